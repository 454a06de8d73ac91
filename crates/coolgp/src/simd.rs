//! A branch-free `exp` that the compiler vectorizes, and the runtime dispatch that lets the
//! hot loops use AVX2 where the CPU has it.
//!
//! Both code paths run the same IEEE operations in the same order (Rust never contracts a
//! multiply and an add), so results are bit-identical with or without AVX2. [`exp`] writes no
//! fused multiply-add. [`exp_fma`] and the ψ̄2 kernel write `f64::mul_add`, a correctly rounded
//! fused multiply-add on *every* path: a `vfmadd` instruction on the AVX2+FMA path, and on the
//! baseline x86-64 path one call per operation to the `fma` function linked in by Rust's
//! runtime (the hardware instruction where the CPU has it, a correctly rounded software
//! emulation where it does not): about 12× slower there, but the same bits.

/// `exp(x)` to about 2 ulp for `x ≤ 709`; returns exactly 0 below −708 (where the true value
/// is subnormal) and is meant for the psi-statistic loops, whose exponents are ≤ 0.
///
/// Cody–Waite reduction `x = n ln2 + r`, `|r| ≤ ln2/2`, then the degree-12 Taylor polynomial
/// (truncation error < 2e-16), then scaling by `2^n` through the exponent bits.
#[inline(always)]
pub fn exp(x: f64) -> f64 {
    const LOG2E: f64 = std::f64::consts::LOG2_E;
    const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
    const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
    // 1.5 · 2^52: adding it rounds to the nearest integer, held in the low mantissa bits.
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    let xc = x.clamp(-708.0, 709.0);
    let kf = xc * LOG2E + SHIFT;
    let n = kf - SHIFT;
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    let mut p = 1.0 / 479_001_600.0;
    p = p * r + 1.0 / 39_916_800.0;
    p = p * r + 1.0 / 3_628_800.0;
    p = p * r + 1.0 / 362_880.0;
    p = p * r + 1.0 / 40_320.0;
    p = p * r + 1.0 / 5_040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    let ni = (kf.to_bits() as i64).wrapping_sub(SHIFT.to_bits() as i64);
    let scale = f64::from_bits(((ni + 1023) as u64) << 52);
    let v = p * scale;
    if x < -708.0 {
        0.0
    } else {
        v
    }
}

/// As [`exp`] (the same reduction and degree-12 Taylor polynomial, the same range handling),
/// with every multiply-add of the reduction and of Horner's scheme fused (`f64::mul_add`):
/// 23 vector operations instead of 36, and one rounding less per step.
#[inline(always)]
pub fn exp_fma(x: f64) -> f64 {
    const LOG2E: f64 = std::f64::consts::LOG2_E;
    const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
    const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    let xc = x.clamp(-708.0, 709.0);
    let kf = xc.mul_add(LOG2E, SHIFT);
    let n = kf - SHIFT;
    let r = (-n).mul_add(LN2_LO, (-n).mul_add(LN2_HI, xc));
    let mut p = r.mul_add(1.0 / 479_001_600.0, 1.0 / 39_916_800.0);
    p = p.mul_add(r, 1.0 / 3_628_800.0);
    p = p.mul_add(r, 1.0 / 362_880.0);
    p = p.mul_add(r, 1.0 / 40_320.0);
    p = p.mul_add(r, 1.0 / 5_040.0);
    p = p.mul_add(r, 1.0 / 720.0);
    p = p.mul_add(r, 1.0 / 120.0);
    p = p.mul_add(r, 1.0 / 24.0);
    p = p.mul_add(r, 1.0 / 6.0);
    p = p.mul_add(r, 0.5);
    p = p.mul_add(r, 1.0);
    p = p.mul_add(r, 1.0);
    let ni = (kf.to_bits() as i64).wrapping_sub(SHIFT.to_bits() as i64);
    let scale = f64::from_bits(((ni + 1023) as u64) << 52);
    let v = p * scale;
    if x < -708.0 {
        0.0
    } else {
        v
    }
}

#[cfg(test)]
thread_local! {
    /// Tests set this to run the baseline path of a [`dispatch`]ed function on an AVX2 CPU.
    pub static FORCE_BASELINE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// True when the running CPU has AVX2 and FMA (checked once, cached by std).
#[inline]
pub fn has_avx2() -> bool {
    #[cfg(test)]
    if FORCE_BASELINE.with(std::cell::Cell::get) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Defines `$name(args)` that runs `$body` compiled for AVX2+FMA when available and for the
/// baseline target otherwise. The body must be `#[inline(always)]`-friendly code.
macro_rules! dispatch {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $body:block) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) {
            #[inline(always)]
            fn imp($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) { imp($($arg),*) }
                if $crate::simd::has_avx2() {
                    // SAFETY: the CPU supports avx2 and fma (checked just above).
                    return unsafe { avx2($($arg),*) };
                }
            }
            imp($($arg),*)
        }
    };
}
pub(crate) use dispatch;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_std_exp() {
        let mut worst: f64 = 0.0;
        let mut x = -707.9;
        while x < 709.0 {
            let rel = (exp(x) - x.exp()).abs() / x.exp();
            worst = worst.max(rel);
            x += 0.0137;
        }
        assert!(worst < 5e-16, "worst relative error {worst:e}");
        assert_eq!(exp(-800.0), 0.0);
        assert_eq!(exp(0.0), 1.0);
    }

    #[test]
    fn fused_matches_std_exp() {
        let mut worst: f64 = 0.0;
        let mut x = -707.9;
        while x < 709.0 {
            let rel = (exp_fma(x) - x.exp()).abs() / x.exp();
            worst = worst.max(rel);
            x += 0.0137;
        }
        assert!(worst < 5e-16, "worst relative error {worst:e}");
        assert_eq!(exp_fma(-800.0), 0.0);
        assert_eq!(exp_fma(0.0), 1.0);
        assert_eq!(exp_fma(f64::NEG_INFINITY), 0.0);
        assert!(exp_fma(f64::NAN).is_nan());
    }
}
