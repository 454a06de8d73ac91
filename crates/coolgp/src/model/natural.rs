//! q(u) in natural parameters (spec §3).
//!
//! Internally and on the wire q(u) is in **K-form** `T = (T1 [m, m], T2 [m])`:
//! `T1 = K R1 K = K + Ψ2/σ_n²`, `T2 = K R2 = Ψ1ᵀy/σ_n²`, prior `T0 = (K, 0)`. The paper's
//! `R = (S⁻¹, S⁻¹m)` is `R = (K⁻¹ T1 K⁻¹, K⁻¹ T2)`, so every additive identity of the paper
//! (Eq. 3.6, 4.10, message passing) holds verbatim with `R0 → T0`.
//! The data part ("excess") is `E = T − T0 = (Ψ2/σ_n², Ψ1ᵀy/σ_n²)`, with `E1 ⪰ 0`.

use faer::Mat;

use crate::error::Result;
use crate::linalg::{frobenius_norm, mat_vec, mul, symmetrize, Cholesky};
use crate::model::psi::UnitStats;
use crate::model::Vocabulary;

/// Relative jitter of the bounded retry on `T1` (spec §9: `+ε·mean(diag T1)·I`, ≤ 2 tries).
const T1_RETRY_JITTER: f64 = 1e-6;

/// The data part `E = (E1 [m, m], E2 [m])` of a q(u) in K-form: what an agent adds to the prior.
#[derive(Clone, Debug, PartialEq)]
pub struct Excess {
    /// `E1 = Ψ2/σ_n²`, symmetric PSD.
    pub d1: Mat<f64>,
    /// `E2 = Ψ1ᵀy/σ_n²`.
    pub d2: Vec<f64>,
}

impl Excess {
    /// The zero excess (the prior itself) for m inducing inputs.
    pub fn zeros(m: usize) -> Self {
        Self {
            d1: Mat::zeros(m, m),
            d2: vec![0.0; m],
        }
    }

    /// Number of inducing inputs.
    pub fn m(&self) -> usize {
        self.d2.len()
    }

    /// From unit-scale statistics and the scales: `E = (σ_s² Ψ̄2/σ_n², σ_s Ψ̄1ᵀy/σ_n²)` (spec §3).
    pub fn from_unit_stats(stats: &UnitStats, sigma_s: f64, sigma_n: f64) -> Self {
        Self::from_unit_parts(&stats.psi2, &stats.psi1_y, sigma_s, sigma_n)
    }

    /// As [`Excess::from_unit_stats`] from the two parts.
    pub fn from_unit_parts(psi2: &Mat<f64>, psi1_y: &[f64], sigma_s: f64, sigma_n: f64) -> Self {
        let sn2 = sigma_n * sigma_n;
        let c1 = sigma_s * sigma_s / sn2;
        let c2 = sigma_s / sn2;
        let mut d1 = Mat::from_fn(psi2.nrows(), psi2.ncols(), |i, j| c1 * psi2[(i, j)]);
        symmetrize(&mut d1);
        Self {
            d1,
            d2: psi1_y.iter().map(|v| c2 * v).collect(),
        }
    }

    /// `self += other`.
    pub fn add_in_place(&mut self, other: &Excess) {
        self.add_scaled_in_place(other, 1.0);
    }

    /// `self += c · other`.
    ///
    /// `d1` is kept exactly symmetric by construction (every constructor symmetrizes, and the
    /// agent symmetrizes what it accepts from peers); entrywise IEEE scaling and addition give
    /// the same result at (i, j) and (j, i), so sums of exactly symmetric matrices stay exactly
    /// symmetric and no re-symmetrization is needed here (this is the hot path of fusion).
    pub fn add_scaled_in_place(&mut self, other: &Excess, c: f64) {
        let m = self.m();
        for j in 0..m {
            let dst = self.d1.col_as_slice_mut(j);
            let src = other.d1.col_as_slice(j);
            for (a, b) in dst.iter_mut().zip(src) {
                *a += c * b;
            }
        }
        for (a, b) in self.d2.iter_mut().zip(&other.d2) {
            *a += c * b;
        }
    }

    /// True when `d1` equals its transpose bit for bit.
    pub fn is_exactly_symmetric(&self) -> bool {
        let m = self.d1.nrows();
        (0..m).all(|j| {
            let cj = self.d1.col_as_slice(j);
            ((j + 1)..m).all(|i| cj[i].to_bits() == self.d1.col_as_slice(i)[j].to_bits())
        })
    }

    /// Exact (IEEE `==`) equality of the two parts; NaN never equals, so a message carrying
    /// NaN never passes as a repeat of validated data.
    pub fn exact_eq(&self, other: &Excess) -> bool {
        let m = self.m();
        self.d2.len() == other.d2.len()
            && self.d1.nrows() == other.d1.nrows()
            && self.d1.ncols() == other.d1.ncols()
            && self.d2 == other.d2
            && (0..m).all(|j| self.d1.col_as_slice(j) == other.d1.col_as_slice(j))
    }

    /// Makes `d1` exactly symmetric (`½(D1 + D1ᵀ)`), for data from outside.
    pub fn symmetrize_in_place(&mut self) {
        symmetrize(&mut self.d1);
    }

    /// `c · self`.
    pub fn scaled(&self, c: f64) -> Excess {
        let mut out = Excess::zeros(self.m());
        out.add_scaled_in_place(self, c);
        out
    }

    /// `‖E1‖_F² + ‖E2‖²`, the squared norm used for relative errors.
    pub fn norm_sq(&self) -> f64 {
        let f = frobenius_norm(self.d1.as_ref());
        f * f + self.d2.iter().map(|v| v * v).sum::<f64>()
    }

    /// Relative distance `‖self − other‖ / max(‖other‖, tiny)` in the norm of
    /// [`Excess::norm_sq`].
    pub fn rel_dist(&self, other: &Excess) -> f64 {
        let mut diff = self.clone();
        diff.add_scaled_in_place(other, -1.0);
        (diff.norm_sq() / other.norm_sq().max(f64::MIN_POSITIVE)).sqrt()
    }
}

/// q(u) in K-form, `T = (T1 [m, m], T2 [m])`.
#[derive(Clone, Debug, PartialEq)]
pub struct NaturalParams {
    /// `T1 = K R1 K = K + E1`, symmetric positive definite.
    pub t1: Mat<f64>,
    /// `T2 = K R2 = E2`.
    pub t2: Vec<f64>,
}

impl Vocabulary {
    /// The prior `T0 = (K, 0)`.
    pub fn t0(&self) -> NaturalParams {
        NaturalParams {
            t1: self.k().to_owned(),
            t2: vec![0.0; self.m()],
        }
    }
}

impl NaturalParams {
    /// `T = T0 + E`.
    pub fn from_excess(vocab: &Vocabulary, e: &Excess) -> Self {
        let mut t1 = vocab.k().to_owned();
        t1 += &e.d1;
        symmetrize(&mut t1);
        Self {
            t1,
            t2: e.d2.clone(),
        }
    }

    /// `E = T − T0`.
    pub fn excess(&self, vocab: &Vocabulary) -> Excess {
        let mut d1 = self.t1.clone();
        d1 -= vocab.k();
        symmetrize(&mut d1);
        Excess {
            d1,
            d2: self.t2.clone(),
        }
    }

    /// The paper's natural parameters `R = (K⁻¹ T1 K⁻¹, K⁻¹ T2)` (R1 = S⁻¹, R2 = S⁻¹m).
    pub fn to_r(&self, vocab: &Vocabulary) -> (Mat<f64>, Vec<f64>) {
        let ck = vocab.chol_k();
        let a = ck.solve(self.t1.as_ref());
        let mut r1 = ck.solve(a.transpose());
        symmetrize(&mut r1);
        (r1, ck.solve_vec(&self.t2))
    }

    /// From the paper's `R`: `T = (K R1 K, K R2)`.
    pub fn from_r(vocab: &Vocabulary, r1: &Mat<f64>, r2: &[f64]) -> Self {
        let k = vocab.k();
        let mut t1 = mul(mul(k, r1.as_ref()).as_ref(), k);
        symmetrize(&mut t1);
        Self {
            t1,
            t2: mat_vec(k, r2),
        }
    }

    /// Factors T1 and caches what prediction and gradients need.
    ///
    /// # Errors
    /// [`crate::Error::NotPositiveDefinite`] if T1 fails even with the bounded retry.
    pub fn posterior(&self, vocab: &Vocabulary) -> Result<Posterior> {
        Posterior::new(vocab, self)
    }

    /// `α = T1⁻¹T2 = K⁻¹m [m]` alone (the predictive mean is `ψ1(x)α`): the same
    /// factorization and solve as [`Posterior::new`], without the inverse, B and G.
    ///
    /// # Errors
    /// [`crate::Error::NotPositiveDefinite`].
    pub fn mean_weights(&self) -> Result<Vec<f64>> {
        let chol_t1 = Cholesky::with_jitter(self.t1.as_ref(), "T1", T1_RETRY_JITTER, 2)?;
        Ok(chol_t1.solve_vec(&self.t2))
    }
}

/// A factored q(u): `L_T = chol(T1)`, `α = T1⁻¹T2 = K⁻¹m`, `T1⁻¹ = K⁻¹SK⁻¹`,
/// `B = K⁻¹ − T1⁻¹` (spec §5) and `G = T1⁻¹ + ααᵀ − K⁻¹` (spec §3).
#[derive(Clone, Debug)]
pub struct Posterior {
    chol_t1: Cholesky,
    /// `α = K⁻¹ m [m]`.
    pub alpha: Vec<f64>,
    /// `T1⁻¹ [m, m]`.
    pub t1_inv: Mat<f64>,
    /// `B = K⁻¹ − T1⁻¹ [m, m]`.
    pub b: Mat<f64>,
    /// `G = K⁻¹(S + m mᵀ)K⁻¹ − K⁻¹ = T1⁻¹ + ααᵀ − K⁻¹ [m, m]`.
    pub g: Mat<f64>,
    /// The T2 it was built from.
    t2: Vec<f64>,
}

impl Posterior {
    /// Factors `t.t1` with the bounded retry of spec §9.
    ///
    /// # Errors
    /// [`crate::Error::NotPositiveDefinite`].
    pub fn new(vocab: &Vocabulary, t: &NaturalParams) -> Result<Self> {
        let chol_t1 = Cholesky::with_jitter(t.t1.as_ref(), "T1", T1_RETRY_JITTER, 2)?;
        let alpha = chol_t1.solve_vec(&t.t2);
        let t1_inv = chol_t1.inverse();
        let m = alpha.len();
        let k_inv = vocab.k_inv();
        let b = Mat::from_fn(m, m, |i, j| k_inv[(i, j)] - t1_inv[(i, j)]);
        let g = Mat::from_fn(m, m, |i, j| {
            t1_inv[(i, j)] + alpha[i] * alpha[j] - k_inv[(i, j)]
        });
        Ok(Self {
            chol_t1,
            alpha,
            t1_inv,
            b,
            g,
            t2: t.t2.clone(),
        })
    }

    /// The jitter the factorization of T1 needed (0 normally); reported as an event.
    pub fn jitter(&self) -> f64 {
        self.chol_t1.jitter
    }

    /// Moments of q(u): `m = K α`, `S = K T1⁻¹ K`.
    pub fn moments(&self, vocab: &Vocabulary) -> (Vec<f64>, Mat<f64>) {
        let k = vocab.k();
        let mean = mat_vec(k, &self.alpha);
        let mut s = mul(mul(k, self.t1_inv.as_ref()).as_ref(), k);
        symmetrize(&mut s);
        (mean, s)
    }

    /// `KL(q(u) ‖ p(u)) = ½[tr(T1⁻¹K) + αᵀKα − m + log|T1| − log|K|]` (spec §6).
    pub fn kl(&self, vocab: &Vocabulary) -> f64 {
        let k = vocab.k();
        let m = self.alpha.len();
        let tr = crate::linalg::frobenius_inner(self.t1_inv.as_ref(), k);
        let ka = mat_vec(k, &self.alpha);
        let quad = crate::linalg::dot(&self.alpha, &ka);
        0.5 * (tr + quad - m as f64 + self.chol_t1.log_det() - vocab.chol_k().log_det())
    }

    /// The T2 this posterior was factored from.
    pub fn t2(&self) -> &[f64] {
        &self.t2
    }
}
