//! A branch-free `exp` that the compiler vectorizes, and the runtime dispatch that lets the
//! hot loops use AVX-512 or AVX2 where the CPU has them.
//!
//! Both code paths run the same IEEE operations in the same order (Rust never contracts a
//! multiply and an add), so results are bit-identical with or without AVX2. [`exp`] writes no
//! fused multiply-add. [`exp_fma`] and the ψ̄2 kernel write `f64::mul_add`, a correctly rounded
//! fused multiply-add on *every* path: a `vfmadd` instruction on the AVX2+FMA path, and on the
//! baseline x86-64 path one call per operation to the `fma` function linked in by Rust's
//! runtime (the hardware instruction where the CPU has it, a correctly rounded software
//! emulation where it does not): about 12× slower there, but the same bits.

const LOG2E: f64 = std::f64::consts::LOG2_E;
/// ln 2 in two parts (Cody–Waite): the high part has trailing zero bits, so `n·LN2_HI` is exact.
const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
/// 1.5 · 2^52: adding it rounds to the nearest integer, held in the low mantissa bits.
const SHIFT: f64 = 6_755_399_441_055_744.0;

/// The last step of [`exp`] and [`exp_fma`]: `p · 2^n` with `n` read from the low bits of
/// `kf = x·log2 e + SHIFT`, and exactly 0 for `x < −708`.
#[inline(always)]
fn scale_by_2n(p: f64, kf: f64, x: f64) -> f64 {
    let ni = (kf.to_bits() as i64).wrapping_sub(SHIFT.to_bits() as i64);
    let scale = f64::from_bits(((ni + 1023) as u64) << 52);
    let v = p * scale;
    if x < -708.0 {
        0.0
    } else {
        v
    }
}

/// `exp(x)` to about 2 ulp for `x ≤ 709`; returns exactly 0 below −708 (where the true value
/// is subnormal) and is meant for the psi-statistic loops, whose exponents are ≤ 0.
///
/// Cody–Waite reduction `x = n ln2 + r`, `|r| ≤ ln2/2`, then the degree-12 Taylor polynomial
/// (truncation error < 2e-16), then scaling by `2^n` through the exponent bits.
#[inline(always)]
pub fn exp(x: f64) -> f64 {
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
    scale_by_2n(p, kf, x)
}

/// As [`exp`] (the same reduction and degree-12 Taylor polynomial, the same range handling),
/// with every multiply-add of the reduction and of Horner's scheme fused (`f64::mul_add`):
/// 23 vector operations instead of 36, and one rounding less per step.
#[inline(always)]
pub fn exp_fma(x: f64) -> f64 {
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
    scale_by_2n(p, kf, x)
}

/// `ln(x)` to about 1 ulp for positive normal `x` (branch-free, so loops over it vectorize).
///
/// `x = 2^k·f` with `f ∈ [√½, √2)`, then `ln f = 2 atanh(t)`, `t = (f − 1)/(f + 1)`,
/// `|t| ≤ 0.1716`, by its series through `t²¹` (truncation < 3e-17), and `k ln 2` added in two
/// parts. Not for 0, subnormals, negatives, infinities or NaN (callers pass `1 + s`, `s ≥ 0`).
#[inline(always)]
pub fn ln(x: f64) -> f64 {
    let bits = x.to_bits();
    let e = ((bits >> 52) & 0x7FF) as i64 - 1023;
    let f = f64::from_bits((bits & 0x000F_FFFF_FFFF_FFFF) | 0x3FF0_0000_0000_0000);
    let big = f > std::f64::consts::SQRT_2;
    let f = if big { 0.5 * f } else { f };
    let k = (e + i64::from(big)) as f64;
    let t = (f - 1.0) / (f + 1.0);
    let t2 = t * t;
    let mut p = 1.0 / 21.0;
    p = p * t2 + 1.0 / 19.0;
    p = p * t2 + 1.0 / 17.0;
    p = p * t2 + 1.0 / 15.0;
    p = p * t2 + 1.0 / 13.0;
    p = p * t2 + 1.0 / 11.0;
    p = p * t2 + 1.0 / 9.0;
    p = p * t2 + 1.0 / 7.0;
    p = p * t2 + 1.0 / 5.0;
    p = p * t2 + 1.0 / 3.0;
    let s = 2.0 * t;
    (k * LN2_HI + (s + s * (t2 * p))) + k * LN2_LO
}

#[cfg(test)]
thread_local! {
    /// Tests lower this to run a [`dispatch`]ed function's AVX2 (1) or baseline (0) path on a
    /// CPU that has more; 2 (the default) lets the CPU decide.
    static MAX_LEVEL: std::cell::Cell<u8> = const { std::cell::Cell::new(2) };
}

/// Runs `f` with dispatch capped at `level` (0 baseline, 1 AVX2+FMA, 2 AVX-512) on this thread.
#[cfg(test)]
pub fn at_level<R>(level: u8, f: impl FnOnce() -> R) -> R {
    let old = MAX_LEVEL.with(|l| l.replace(level));
    let r = f();
    MAX_LEVEL.with(|l| l.set(old));
    r
}

/// True when the running CPU has AVX2 and FMA (checked once, cached by std).
#[inline]
pub fn has_avx2() -> bool {
    #[cfg(test)]
    if MAX_LEVEL.with(std::cell::Cell::get) < 1 {
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

/// True when the running CPU has AVX-512 F/DQ/VL, AVX2 and FMA (checked once, cached by std).
#[inline]
pub fn has_avx512() -> bool {
    #[cfg(test)]
    if MAX_LEVEL.with(std::cell::Cell::get) < 2 {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        has_avx2()
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Clears the upper halves of the vector registers (`vzeroupper`) where the CPU has AVX.
///
/// faer's matrix products (from about 32 × 32 on, its hand-written AVX-512 kernels) return
/// with the upper halves dirty, and every later call into glibc's `exp`, `log`, `sin` and the
/// like then pays an AVX–SSE transition: 4–5 ns became 120–140 ns a call on this project's
/// machine (BENCHMARKS.md §18), until the next `vzeroupper`. [`crate::linalg::mul`] and
/// [`crate::linalg::mul_add`] call this after each product. It changes no value.
#[inline]
pub fn clean_upper() {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU supports AVX (checked just above).
        unsafe { zero_upper() }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn zero_upper() {
    std::arch::x86_64::_mm256_zeroupper();
}

/// Defines `$name(args)` that runs `$body` compiled for AVX-512 (F, DQ, VL) when available, else
/// for AVX2+FMA when available, else for the baseline target. The body must be
/// `#[inline(always)]`-friendly code whose float operations are written out in a fixed order
/// (Rust neither reassociates nor contracts them), so every path gives the same bits.
macro_rules! dispatch {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn imp($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
                unsafe fn avx512($($arg: $ty),*) $(-> $ret)? { imp($($arg),*) }
                if $crate::simd::has_avx512() {
                    // SAFETY: the CPU supports avx512f/dq/vl, avx2 and fma (checked just above).
                    return unsafe { avx512($($arg),*) };
                }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? { imp($($arg),*) }
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
    fn ln_matches_std_ln() {
        let mut worst: f64 = 0.0;
        let mut x: f64 = 1e-300;
        while x < 1e300 {
            for y in [
                x,
                x * 1.000_001,
                x * std::f64::consts::SQRT_2,
                x * 1.414_3,
                x * 1.5,
                x * 0.999_999,
            ] {
                let want = y.ln();
                let err = (ln(y) - want).abs() / want.abs().max(f64::MIN_POSITIVE);
                let abs = (ln(y) - want).abs();
                worst = worst.max(if want.abs() < 1.0 { abs } else { err });
            }
            x *= 1.37;
        }
        let mut y = 0.5;
        while y < 2.0 {
            worst = worst.max((ln(y) - y.ln()).abs());
            y += 1e-4;
        }
        assert!(worst < 3e-16, "worst error {worst:e}");
        assert_eq!(ln(1.0), 0.0);
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
