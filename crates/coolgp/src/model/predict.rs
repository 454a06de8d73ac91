//! Prediction under `q(u) q(W)` (spec §5; not given in the paper).
//!
//! ```text
//! mean(x*)  = ψ1(x*) α
//! var_f(x*) = σ_s² − tr(B ψ2(x*)) + αᵀ ψ2(x*) α − mean²,   B = K⁻¹ − T1⁻¹   (clamped ≥ 0)
//! var_y(x*) = var_f(x*) + σ_n²
//! ```
//! The predictive is a mixture over W; these are its first two moments. Cost O(m² d') per point.

use faer::MatRef;

use crate::model::natural::Posterior;
use crate::model::projection::Projection;
use crate::model::psi::PointPsi;
use crate::model::Vocabulary;

/// Predictive moments for a set of inputs, each `[n]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    /// Predictive mean of f (and y).
    pub mean: Vec<f64>,
    /// Variance of f(x*).
    pub var_f: Vec<f64>,
    /// Variance of y(x*) = var_f + σ_n².
    pub var_y: Vec<f64>,
}

impl Prediction {
    /// Root mean squared error against `y`.
    pub fn rmse(&self, y: &[f64]) -> f64 {
        rmse(&self.mean, y)
    }

    /// Mean Gaussian negative log predictive density of `y` with the moments (mean, var_y).
    pub fn nlpd(&self, y: &[f64]) -> f64 {
        let n = y.len().max(1) as f64;
        self.mean
            .iter()
            .zip(&self.var_y)
            .zip(y)
            .map(|((m, v), t)| {
                let v = v.max(1e-300);
                0.5 * ((2.0 * std::f64::consts::PI * v).ln() + (t - m) * (t - m) / v)
            })
            .sum::<f64>()
            / n
    }
}

/// Root mean squared error of `pred` against `y`.
pub fn rmse(pred: &[f64], y: &[f64]) -> f64 {
    let n = y.len().max(1) as f64;
    (pred
        .iter()
        .zip(y)
        .map(|(p, t)| (p - t) * (p - t))
        .sum::<f64>()
        / n)
        .sqrt()
}

/// Predicts at the rows of `x [n, d]` with the agent's own q(W) and a factored q(u).
pub fn predict(
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    x: MatRef<'_, f64>,
) -> Prediction {
    let m = vocab.m();
    let d = proj.d();
    let (ss, sn2) = (proj.sigma_s(), proj.sigma_n() * proj.sigma_n());
    let mut pp = PointPsi::new(vocab, d);
    let mut xr = vec![0.0; d];
    let n = x.nrows();
    let mut out = Prediction {
        mean: Vec::with_capacity(n),
        var_f: Vec::with_capacity(n),
        var_y: Vec::with_capacity(n),
    };
    // Row-major copies of B and ααᵀ − B for one fused pass over ψ̄2.
    let mut w = vec![0.0; m * m];
    for j in 0..m {
        for k in 0..m {
            w[j * m + k] = post.alpha[j] * post.alpha[k] - post.b[(j, k)];
        }
    }
    for r in 0..n {
        for (j, v) in xr.iter_mut().enumerate() {
            *v = x[(r, j)];
        }
        pp.eval(vocab, proj, &xr);
        let mean = ss * crate::linalg::dot(&pp.psi1, &post.alpha);
        // tr((ααᵀ − B) ψ2) with ψ2 = σ_s² ψ̄2
        let q: f64 = pp.psi2.iter().zip(&w).map(|(p, c)| p * c).sum::<f64>() * ss * ss;
        let var_f = (ss * ss + q - mean * mean).max(0.0);
        out.mean.push(mean);
        out.var_f.push(var_f);
        out.var_y.push(var_f + sn2);
    }
    out
}

/// Predictive means only, `ψ1(x*) α`, at O(m d') per point (no ψ2): for RMSE evaluation.
pub fn predict_mean(
    vocab: &Vocabulary,
    proj: &Projection,
    alpha: &[f64],
    x: MatRef<'_, f64>,
) -> Vec<f64> {
    predict_means(vocab, proj, &[alpha], x)
        .pop()
        .unwrap_or_default()
}

/// Predictive means `ψ1(x*) α_v` for several q(u) (e.g. own and fused) under one q(W),
/// computing ψ1 once per point. Returns one `[n]` vector per α.
pub fn predict_means(
    vocab: &Vocabulary,
    proj: &Projection,
    alphas: &[&[f64]],
    x: MatRef<'_, f64>,
) -> Vec<Vec<f64>> {
    let m = vocab.m();
    let d = proj.d();
    let dz = vocab.d_latent();
    let ss = proj.sigma_s();
    let (mut a, mut s) = (vec![0.0; dz], vec![0.0; dz]);
    let mut xr = vec![0.0; d];
    let mut psi1 = vec![0.0; m];
    let mut out: Vec<Vec<f64>> = alphas
        .iter()
        .map(|_| Vec::with_capacity(x.nrows()))
        .collect();
    for r in 0..x.nrows() {
        for (j, v) in xr.iter_mut().enumerate() {
            *v = x[(r, j)];
        }
        proj.moments_into(&xr, &mut a, &mut s);
        crate::model::psi::psi1_point(vocab, &a, &s, &mut psi1);
        for (o, alpha) in out.iter_mut().zip(alphas) {
            o.push(ss * crate::linalg::dot(&psi1, alpha));
        }
    }
    out
}
