//! One agent's answer at query points: the global fused model's part and the local
//! correction by the residual GP on the memory (docs/LOCAL.md derives every line).
//!
//! With `c = A⁻¹ k_r(B, x*)`, `Ψ_B = σ_s ψ̄1(B) [n, m]`, `φ* = σ_s ψ̄1(x*)`, `Σ = T1⁻¹` (the
//! covariance of the q(u) coefficients `K⁻¹u`):
//!
//! ```text
//! mean          = μ_g(x*) + cᵀ (y_B − μ_g(B))
//! global_var    = [var_f(x*) − ρ(x*)] − 2 cᵀΨ_B Σ φ* + cᵀΨ_B Σ Ψ_Bᵀ c,   ρ = max(σ_s² − tr(K⁻¹ψ2(x*)), 0)
//! residual_var  = k_r(x*, x*) − k_r(x*, B) A⁻¹ k_r(B, x*)
//! ```
//! The memory's part (`G = L⁻¹Ψ̄_B`, `z = L⁻¹(y_B − μ_g(B))`, [`super::cache`]) is computed
//! once per model version, O(n m d' + n² m); per query point the cost is O(m² d') (the global
//! part) + O(n f) (kernel) + O(n²) (one triangular solve, batched over the query rows) +
//! O(n m + m²), since `Ψ_Bᵀ c = σ_s Gᵀ L⁻¹ k_r(B, x*)`.

use std::sync::Arc;

use faer::{Mat, MatRef};

use super::cache::{Key, MemoryPart};
use super::factor::Factor;
use super::{LocalModel, ResidualKernel};
use crate::error::Result;
use crate::learn::contract::dot4;
use crate::linalg::{dot, mat_vec, mul};
use crate::model::predict::{upper_dot, upper_weights};
use crate::model::psi::{point_upper, psi1_matrix, PsiWorkspace};
use crate::model::{Posterior, Projection, Vocabulary};

/// Smallest posterior residual variance used in a precision or a log (rounding guard).
pub(crate) const MIN_VAR: f64 = 1e-300;

/// What an agent answers at one point x*: the global fused model's part and its local
/// correction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LocalAnswer {
    /// `μ_g(x*) = ψ1(x*)α` of the fused (or own) q(u) (= [`crate::Agent::predict`]'s mean).
    pub global_mean: f64,
    /// The global part's variance of f (u and W uncertainty, carried through the correction).
    pub global_var: f64,
    /// `k_r(x*, B) A⁻¹ (y_B − μ_g(B))`, `A = K_r(B, B) + σ_rn² I` (0 when the memory is off
    /// or empty).
    pub residual_mean: f64,
    /// Posterior variance of the residual at x*: `k_r(x*, x*) − k_r(x*, B) A⁻¹ k_r(B, x*)`
    /// (0 when the memory is off or empty).
    pub residual_var: f64,
    /// Prior variance of the residual at x*, `k_r(x*, x*)`: what the agent would say knowing
    /// nothing (0 when the memory is off or empty).
    pub residual_prior: f64,
    /// Observation noise of y around f (σ_rn² with memory; σ_n² of the global model without).
    pub noise_var: f64,
}

impl LocalAnswer {
    /// The global model's answer alone (memory off or empty): no residual part.
    pub fn global_only(mean: f64, var_f: f64, noise_var: f64) -> Self {
        Self {
            global_mean: mean,
            global_var: var_f,
            residual_mean: 0.0,
            residual_var: 0.0,
            residual_prior: 0.0,
            noise_var,
        }
    }

    /// Predictive mean of f and y: `global_mean + residual_mean`.
    pub fn mean(&self) -> f64 {
        self.global_mean + self.residual_mean
    }

    /// Variance of f(x*): `global_var + residual_var`.
    pub fn var_f(&self) -> f64 {
        self.global_var + self.residual_var
    }

    /// Variance of y(x*): `var_f + noise_var`.
    pub fn var_y(&self) -> f64 {
        self.var_f() + self.noise_var
    }

    /// The information `½ (ln v0 − ln v)` the residual part carries about its point
    /// (`v0 = residual_prior`, `v = max(residual_var, 1e-300)`; 0 without a residual part):
    /// how much the agent's memory knows here relative to knowing nothing.
    pub fn information_gain(&self) -> f64 {
        if self.residual_prior > 0.0 {
            0.5 * (self.residual_prior.ln() - self.residual_var.max(MIN_VAR).ln())
        } else {
            0.0
        }
    }
}

/// The global part at each query row: `(mean, var_f − ρ)` per row and the unit `ψ̄1(x*)`
/// as the columns of `[m, q]`. The mean is [`crate::model::predict::predict`]'s, bit for bit;
/// `var_f − ρ = σ_s² tr((ααᵀ − B + K⁻¹) ψ̄2) − μ²` is one trace (`var_f = σ_s² + σ_s²
/// tr((ααᵀ − B) ψ̄2) − μ²` and `ρ = σ_s² (1 − tr(K⁻¹ψ̄2))` are each ≥ 0 but for rounding; the
/// difference is floored at 0 in [`global_var`]).
pub(super) fn global_part(
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    x: MatRef<'_, f64>,
) -> (Vec<f64>, Vec<f64>, Mat<f64>) {
    let (m, q) = (vocab.m(), x.nrows());
    let ss = proj.sigma_s();
    let kinv = vocab.k_inv();
    let w = upper_weights(m, |j, k| {
        post.alpha[j] * post.alpha[k] - 0.5 * (post.b[(j, k)] + post.b[(k, j)])
            + 0.5 * (kinv[(j, k)] + kinv[(k, j)])
    });
    let mut ws = PsiWorkspace::default();
    let (mut psi1, mut upper) = (vec![0.0; m], vec![0.0; m * m]);
    let mut xr = vec![0.0; x.ncols()];
    let (mut mean, mut gvar) = (Vec::with_capacity(q), Vec::with_capacity(q));
    let mut phi = Mat::<f64>::zeros(m, q);
    for r in 0..q {
        for (j, v) in xr.iter_mut().enumerate() {
            *v = x[(r, j)];
        }
        point_upper(vocab, proj, &xr, &mut ws, &mut psi1, &mut upper);
        let mu = ss * dot(&psi1, &post.alpha);
        mean.push(mu);
        gvar.push(ss * ss * upper_dot(&upper, &w, m) - mu * mu);
        phi.col_as_slice_mut(r).copy_from_slice(&psi1);
    }
    (mean, gvar, phi)
}

/// The answers of a model with a non-empty memory at the rows of a checked `x [q, d]`, under
/// q(W) `proj` and the factored q(u) `post` (brings the memory's factor up to date).
///
/// # Errors
/// [`crate::Error::DimensionMismatch`] when the shapes do not fit together;
/// [`crate::Error::NotPositiveDefinite`] when the memory's A cannot be factored.
pub(crate) fn answers(
    model: &LocalModel,
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    x: MatRef<'_, f64>,
) -> Result<Vec<LocalAnswer>> {
    let (factor, part) = prepared(model, vocab, proj, post)?;
    let rows = Corrector {
        kernel: model.kernel(),
        feats: model.features(),
        factor: &factor,
        g: part.g.as_ref(),
        z: &part.z,
    };
    // In chunks: V = L⁻¹ k_r(B, x*) [n, chunk] stays in cache (a 100 × 100 map at B = 500:
    // 105 ms whole, 76 ms in chunks of 512; BENCHMARKS.md §17).
    let mut out = Vec::with_capacity(x.nrows());
    for r0 in (0..x.nrows()).step_by(ANSWER_CHUNK) {
        let len = ANSWER_CHUNK.min(x.nrows() - r0);
        out.extend(corrected(&rows, vocab, proj, post, x.subrows(r0, len)));
    }
    Ok(out)
}

/// Query rows answered at once by [`answers`].
const ANSWER_CHUNK: usize = 512;

/// The memory's factor, brought up to date, and its part of the answers under q(W) `proj`
/// and q(u) `post` ([`memory_terms`], kept in the model's cache while nothing changes).
///
/// # Errors
/// As [`answers`].
pub(crate) fn prepared(
    model: &LocalModel,
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
) -> Result<(Arc<Factor>, Arc<MemoryPart>)> {
    let factor = model.factor()?;
    let key = Key {
        version: model.version(),
        theta: proj.to_flat(),
        alpha: post.alpha.clone(),
        t1_inv: post.t1_inv.clone(),
    };
    let part = model.cache().get_or(key, |key| {
        let rows = model.rows();
        let (g, z) = memory_terms(
            &factor,
            vocab,
            proj,
            post,
            rows.as_ref(),
            model.memory().y(),
        )?;
        Ok(MemoryPart::new(key, g, z))
    })?;
    Ok((factor, part))
}

/// The rows a correction is computed from, factored: the residual kernel, the rows' features
/// `[n, f]` (row-major), the factor `A = L Lᵀ` of `A = K_r(B, B) + σ_rn² I` and the memory's
/// part `G = L⁻¹ Ψ̄_B [n, m]`, `z = L⁻¹ (y_B − μ_g(B)) [n]` ([`memory_terms`]).
pub(crate) struct Corrector<'a> {
    /// The residual kernel k_r.
    pub kernel: &'a ResidualKernel,
    /// The rows' kernel features, `[n, f]` row-major.
    pub feats: &'a [f64],
    /// L, `A = L Lᵀ`.
    pub factor: &'a Factor,
    /// `G = L⁻¹ Ψ̄_B [n, m]`.
    pub g: MatRef<'a, f64>,
    /// `z = L⁻¹ (y_B − μ_g(B)) [n]`.
    pub z: &'a [f64],
}

/// The answers at the rows of a checked `x [q, d]`: the global part under `proj` and `post`
/// and the correction by the exact residual GP on `rows` (the module doc's formulas).
pub(crate) fn corrected(
    rows: &Corrector<'_>,
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    x: MatRef<'_, f64>,
) -> Vec<LocalAnswer> {
    let (n, q) = (rows.factor.len(), x.nrows());
    let ss = proj.sigma_s();
    let (mean_g, gvar, phi) = global_part(vocab, proj, post, x);
    // k_r(B, x*) [n, q] and k_r(x*, x*).
    let kernel = rows.kernel;
    let mut fxs = Vec::new();
    let mut xr = vec![0.0; x.ncols()];
    for r in 0..q {
        for (j, a) in xr.iter_mut().enumerate() {
            *a = x[(r, j)];
        }
        kernel.features(vocab, &xr, &mut fxs);
    }
    let f = fxs.len() / q.max(1);
    let kss: Vec<f64> = fxs
        .chunks_exact(f.max(1))
        .map(|fx| kernel.cov(fx, fx))
        .collect();
    let mut v = Mat::<f64>::zeros(n, q);
    kernel.cov_columns(rows.feats, &fxs, f, &mut v);
    // V = L⁻¹ k_r(B, x*); c = L⁻ᵀ V = A⁻¹ k_r(B, x*) enters only through
    // w̄ = Ψ̄_Bᵀ c = Gᵀ V [m, q]; s = Σ w̄.
    rows.factor.solve_lower_in_place(v.as_mut());
    let wbar = mul(rows.g.transpose(), v.as_ref());
    let s = mul(post.t1_inv.as_ref(), wbar.as_ref());
    let zc = rows.z;
    let noise = kernel.noise_var();
    (0..q)
        .map(|r| {
            let vr = v.col_as_slice(r);
            let (sr, wr) = (s.col_as_slice(r), wbar.col_as_slice(r));
            // The n-long dots with four fixed-order partial sums (vectorized, deterministic).
            LocalAnswer {
                global_mean: mean_g[r],
                global_var: global_var(gvar[r], ss, sr, wr, phi.col_as_slice(r)),
                residual_mean: dot4(vr, zc),
                residual_var: (kss[r] - dot4(vr, vr)).max(0.0),
                residual_prior: kss[r],
                noise_var: noise,
            }
        })
        .collect()
}

/// The global part's variance carried through a correction with weights c:
/// `[var_f − ρ] + σ_s² (sᵀw̄ − 2 sᵀφ*)` with `w̄ = Ψ̄_Bᵀ c`, `s = Σ w̄` (floored at 0).
pub(super) fn global_var(gvar: f64, ss: f64, s: &[f64], wbar: &[f64], phi: &[f64]) -> f64 {
    (gvar + ss * ss * (dot(s, wbar) - 2.0 * dot(s, phi))).max(0.0)
}

/// The rows' part of the correction under the factor L of their A: `G = L⁻¹ Ψ̄_B [n, m]`
/// (unit-scale ψ̄1 of the rows `x [n, d]` under `proj`) and `z = L⁻¹ (y − σ_s Ψ̄_B α) [n]`
/// (the rows' residuals against the global mean of `post`).
///
/// # Errors
/// [`crate::Error::DimensionMismatch`] when `x` does not fit `vocab` and `proj`.
pub(crate) fn memory_terms(
    factor: &Factor,
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    x: MatRef<'_, f64>,
    y: &[f64],
) -> Result<(Mat<f64>, Vec<f64>)> {
    let n = x.nrows();
    let mut g = psi1_matrix(vocab, proj, x)?;
    let mu_b = mat_vec(g.as_ref(), &post.alpha);
    let mut z = Mat::from_fn(n, 1, |i, _| y[i] - proj.sigma_s() * mu_b[i]);
    factor.solve_lower_in_place(z.as_mut());
    factor.solve_lower_in_place(g.as_mut());
    Ok((g, z.col_as_slice(0).to_vec()))
}
