//! Dense linear algebra on top of faer, always sequential (`Par::Seq`) inside an agent.
//!
//! Matrices are [`faer::Mat<f64>`]; vectors are `Vec<f64>`. Symmetric matrices are kept
//! exactly symmetric ([`symmetrize`]) after every addition, as spec §9 asks.

use faer::linalg::matmul::matmul;
use faer::linalg::solvers::{Llt, Solve};
use faer::{Accum, Mat, MatMut, MatRef, Par, Side};

use crate::error::{Error, Result};

/// `A ← ½(A + Aᵀ)` in place.
///
/// # Panics
/// If `a` is not square (our misuse, never user data).
#[track_caller]
pub fn symmetrize(a: &mut Mat<f64>) {
    let n = a.nrows();
    assert_eq!(n, a.ncols(), "symmetrize needs a square matrix");
    for j in 0..n {
        for i in (j + 1)..n {
            let v = 0.5 * (a[(i, j)] + a[(j, i)]);
            a[(i, j)] = v;
            a[(j, i)] = v;
        }
    }
}

/// Mirrors the upper triangle into the lower one.
pub fn fill_lower_from_upper(a: &mut Mat<f64>) {
    let n = a.nrows();
    for j in 0..n {
        for i in (j + 1)..n {
            a[(i, j)] = a[(j, i)];
        }
    }
}

/// `C = A B` (sequential; the vector registers' upper halves cleaned after, [`crate::simd::clean_upper`]).
pub fn mul(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> Mat<f64> {
    let mut c = Mat::zeros(a.nrows(), b.ncols());
    matmul(c.as_mut(), Accum::Replace, a, b, 1.0, Par::Seq);
    crate::simd::clean_upper();
    c
}

/// `C += alpha · A B` (sequential; cleaned after, as [`mul`]).
pub fn mul_add(c: MatMut<'_, f64>, a: MatRef<'_, f64>, b: MatRef<'_, f64>, alpha: f64) {
    matmul(c, Accum::Add, a, b, alpha, Par::Seq);
    crate::simd::clean_upper();
}

/// `y = A x`.
pub fn mat_vec(a: MatRef<'_, f64>, x: &[f64]) -> Vec<f64> {
    debug_assert_eq!(a.ncols(), x.len());
    let mut y = vec![0.0; a.nrows()];
    for (j, &xj) in x.iter().enumerate() {
        if xj == 0.0 {
            continue;
        }
        let col = a.col(j);
        for (i, yi) in y.iter_mut().enumerate() {
            *yi += col[i] * xj;
        }
    }
    y
}

/// `xᵀ y`.
pub fn dot(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(a, b)| a * b).sum()
}

/// `Σ_ij A_ij B_ij` (= tr(Aᵀ B)).
pub fn frobenius_inner(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
    let mut s = 0.0;
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            s += a[(i, j)] * b[(i, j)];
        }
    }
    s
}

/// Frobenius norm.
pub fn frobenius_norm(a: MatRef<'_, f64>) -> f64 {
    frobenius_inner(a, a).sqrt()
}

/// Largest absolute entry.
pub fn max_abs(a: MatRef<'_, f64>) -> f64 {
    let mut m: f64 = 0.0;
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            m = m.max(a[(i, j)].abs());
        }
    }
    m
}

/// A lower Cholesky factor `A = L Lᵀ` with its solves.
#[derive(Clone, Debug)]
pub struct Cholesky {
    llt: Llt<f64>,
    /// The jitter that had to be added to the diagonal (0 if none).
    pub jitter: f64,
}

impl Cholesky {
    /// Factors a symmetric positive definite `a` (lower triangle read), no jitter.
    ///
    /// # Errors
    /// [`Error::NotPositiveDefinite`] if a pivot is not positive.
    pub fn new(a: MatRef<'_, f64>, what: &'static str) -> Result<Self> {
        Llt::new(a, Side::Lower)
            .map(|llt| Self { llt, jitter: 0.0 })
            .map_err(|_| Error::NotPositiveDefinite {
                what,
                jitter_tried: 0.0,
            })
    }

    /// Factors `a`, retrying with `a + τ I` for `τ = rel · mean(diag a) · 10^t`, `t < tries`
    /// (spec §9's bounded schedule). The jitter used is reported in [`Cholesky::jitter`]; it is
    /// never written back into `a`.
    ///
    /// # Errors
    /// [`Error::NotPositiveDefinite`] when every try fails.
    pub fn with_jitter(
        a: MatRef<'_, f64>,
        what: &'static str,
        rel: f64,
        tries: u32,
    ) -> Result<Self> {
        if let Ok(c) = Self::new(a, what) {
            return Ok(c);
        }
        let n = a.nrows();
        let mean_diag = (0..n).map(|i| a[(i, i)]).sum::<f64>() / n.max(1) as f64;
        let mut tau = rel * mean_diag.abs().max(f64::MIN_POSITIVE);
        let mut work = a.to_owned();
        for _ in 0..tries {
            work.copy_from(a);
            for i in 0..n {
                work[(i, i)] += tau;
            }
            if let Ok(llt) = Llt::new(work.as_ref(), Side::Lower) {
                return Ok(Self { llt, jitter: tau });
            }
            tau *= 10.0;
        }
        Err(Error::NotPositiveDefinite {
            what,
            jitter_tried: tau / 10.0,
        })
    }

    /// The lower factor L.
    pub fn l(&self) -> MatRef<'_, f64> {
        self.llt.L()
    }

    /// Dimension.
    pub fn dim(&self) -> usize {
        self.llt.L().nrows()
    }

    /// `A⁻¹ b` for a vector.
    pub fn solve_vec(&self, b: &[f64]) -> Vec<f64> {
        let mut x = Mat::from_fn(b.len(), 1, |i, _| b[i]);
        self.llt.solve_in_place(x.as_mut());
        (0..b.len()).map(|i| x[(i, 0)]).collect()
    }

    /// `A⁻¹ B` for a matrix.
    pub fn solve(&self, b: MatRef<'_, f64>) -> Mat<f64> {
        let mut x = b.to_owned();
        self.llt.solve_in_place(x.as_mut());
        x
    }

    /// `A⁻¹`, symmetrized (by a solve against I, never an explicit inversion formula).
    pub fn inverse(&self) -> Mat<f64> {
        let n = self.dim();
        let mut x = self.solve(Mat::<f64>::identity(n, n).as_ref());
        symmetrize(&mut x);
        x
    }

    /// `log |A|`.
    pub fn log_det(&self) -> f64 {
        let l = self.l();
        2.0 * (0..l.nrows()).map(|i| l[(i, i)].ln()).sum::<f64>()
    }

    /// `L⁻¹ B` (forward substitution).
    pub fn solve_lower(&self, b: MatRef<'_, f64>) -> Mat<f64> {
        let mut x = b.to_owned();
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
            self.l(),
            x.as_mut(),
            Par::Seq,
        );
        x
    }
}

/// Smallest eigenvalue of a symmetric matrix (lower triangle read).
///
/// # Errors
/// [`Error::NotPositiveDefinite`] is never returned; a failed eigen-solver yields `None`.
pub fn min_eigenvalue(a: MatRef<'_, f64>) -> Option<f64> {
    if a.nrows() == 0 {
        return Some(0.0);
    }
    a.self_adjoint_eigenvalues(Side::Lower)
        .ok()
        .and_then(|v| v.first().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cholesky_solves_and_logdet() {
        let a = Mat::from_fn(3, 3, |i, j| if i == j { 4.0 } else { 1.0 });
        let c = Cholesky::new(a.as_ref(), "a").expect("spd");
        let x = c.solve_vec(&[1.0, 2.0, 3.0]);
        let back = mat_vec(a.as_ref(), &x);
        for (b, e) in back.iter().zip([1.0, 2.0, 3.0]) {
            assert!((b - e).abs() < 1e-14);
        }
        // det = (4-1)^2 (4+2) = 54
        assert!((c.log_det() - 54f64.ln()).abs() < 1e-13);
        let inv = c.inverse();
        let id = mul(a.as_ref(), inv.as_ref());
        for i in 0..3 {
            for j in 0..3 {
                let e = if i == j { 1.0 } else { 0.0 };
                assert!((id[(i, j)] - e).abs() < 1e-14);
            }
        }
    }

    #[test]
    fn jitter_schedule_rescues_semidefinite_and_reports() {
        // rank-1 matrix: not PD, PD after jitter
        let a = Mat::from_fn(3, 3, |_, _| 1.0);
        assert!(Cholesky::new(a.as_ref(), "a").is_err());
        let c = Cholesky::with_jitter(a.as_ref(), "a", 1e-8, 3).expect("jittered");
        assert!(c.jitter > 0.0);
        let neg = Mat::from_fn(2, 2, |i, j| if i == j { -1.0 } else { 0.0 });
        let err = Cholesky::with_jitter(neg.as_ref(), "neg", 1e-8, 2).unwrap_err();
        assert!(matches!(
            err,
            Error::NotPositiveDefinite { what: "neg", .. }
        ));
    }

    #[test]
    fn min_eigenvalue_of_diag() {
        let a = Mat::from_fn(3, 3, |i, j| if i == j { [3.0, -2.0, 5.0][i] } else { 0.0 });
        assert!((min_eigenvalue(a.as_ref()).expect("evd") + 2.0).abs() < 1e-14);
    }

    /// The processor's XINUSE bits (`xgetbv(1)`): bit 2 the upper halves of ymm0–15, bit 6
    /// those of zmm0–15; `None` where the CPU cannot report them.
    #[cfg(target_arch = "x86_64")]
    fn upper_in_use() -> Option<u64> {
        #[target_feature(enable = "xsave")]
        unsafe fn xinuse() -> u64 {
            std::arch::x86_64::_xgetbv(1)
        }
        if !std::arch::is_x86_feature_detected!("xsave") {
            return None;
        }
        // CPUID.(EAX=0DH, ECX=1):EAX[2]: XGETBV with ECX = 1 is supported.
        let leaf = std::arch::x86_64::__cpuid_count(0xD, 1);
        if leaf.eax & 4 == 0 {
            return None;
        }
        // SAFETY: xsave and xgetbv(1) are supported (checked just above).
        Some(unsafe { xinuse() } & 0b100_0100)
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn products_leave_the_upper_halves_of_the_vector_registers_clean() {
        // faer's products of this size leave them dirty, which slows every later glibc
        // `exp`/`log` call ~25× (simd::clean_upper); ours must not.
        let a = Mat::from_fn(64, 64, |i, j| ((i * 7 + j) % 13) as f64);
        crate::simd::clean_upper();
        let Some(before) = upper_in_use() else {
            eprintln!("this CPU does not report XINUSE: nothing to check");
            return;
        };
        assert_eq!(before, 0, "clean_upper left the upper halves in use");
        let mut raw = Mat::zeros(64, 64);
        matmul(
            raw.as_mut(),
            Accum::Replace,
            a.as_ref(),
            a.as_ref(),
            1.0,
            Par::Seq,
        );
        let dirty = upper_in_use().unwrap_or(0);
        let c = mul(a.as_ref(), a.as_ref());
        assert_eq!(upper_in_use(), Some(0), "mul left them in use");
        let mut d = Mat::zeros(64, 64);
        mul_add(d.as_mut(), a.as_ref(), a.as_ref(), 1.0);
        assert_eq!(upper_in_use(), Some(0), "mul_add left them in use");
        assert_eq!(c, raw, "cleaning changed a value");
        assert_eq!(d, raw);
        // Where faer's kernel dirtied them (it does on AVX-512 machines) the check above had
        // something to catch.
        eprintln!("faer's own product left XINUSE bits {dirty:#b}");
    }
}
