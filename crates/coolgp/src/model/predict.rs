//! Prediction under `q(u) q(W)` (spec §5; not given in the paper).
//!
//! ```text
//! mean(x*)  = ψ1(x*) α
//! var_f(x*) = σ_s² − tr(B ψ2(x*)) + αᵀ ψ2(x*) α − mean²,   B = K⁻¹ − T1⁻¹   (clamped ≥ 0)
//! var_y(x*) = var_f(x*) + σ_n²
//! ```
//! The predictive is a mixture over W; these are its first two moments. Cost O(m² d') per point.

use faer::{Mat, MatRef};

use crate::error::{ensure_dim, Result};
use crate::linalg::{mul, mul_add};
use crate::simd::{dispatch, exp, ln};

use crate::model::natural::Posterior;
use crate::model::projection::Projection;
use crate::model::psi::{check_shapes, point_upper, PsiWorkspace};
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
///
/// # Errors
/// [`crate::Error::DimensionMismatch`] when `x`, q(W) or q(u) do not fit together.
pub fn predict(
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    x: MatRef<'_, f64>,
) -> Result<Prediction> {
    check_shapes(vocab, proj, x)?;
    let m = vocab.m();
    ensure_dim("q(u) mean weights α (m)", m, post.alpha.len())?;
    ensure_dim("q(u) matrix B (m)", m, post.b.nrows())?;
    ensure_dim("q(u) matrix B (m)", m, post.b.ncols())?;
    let d = proj.d();
    let (ss, sn2) = (proj.sigma_s(), proj.sigma_n() * proj.sigma_n());
    let mut ws = PsiWorkspace::default();
    let mut psi1 = vec![0.0; m];
    let mut upper = vec![0.0; m * m];
    let mut xr = vec![0.0; d];
    let n = x.nrows();
    let mut out = Prediction {
        mean: Vec::with_capacity(n),
        var_f: Vec::with_capacity(n),
        var_y: Vec::with_capacity(n),
    };
    // W = ααᵀ − B (symmetrized), row-major upper triangle with the off-diagonal doubled, so
    // that tr(W ψ̄2) is one dot product over the upper triangle of ψ̄2.
    let w = upper_weights(m, |j, k| {
        post.alpha[j] * post.alpha[k] - 0.5 * (post.b[(j, k)] + post.b[(k, j)])
    });
    for r in 0..n {
        for (j, v) in xr.iter_mut().enumerate() {
            *v = x[(r, j)];
        }
        point_upper(vocab, proj, &xr, &mut ws, &mut psi1, &mut upper);
        let mean = ss * crate::linalg::dot(&psi1, &post.alpha);
        // tr((ααᵀ − B) ψ2) with ψ2 = σ_s² ψ̄2
        let q = upper_dot(&upper, &w, m) * ss * ss;
        let var_f = (ss * ss + q - mean * mean).max(0.0);
        out.mean.push(mean);
        out.var_f.push(var_f);
        out.var_y.push(var_f + sn2);
    }
    Ok(out)
}

/// A symmetric `[m, m]` matrix `w(j, k)`'s upper triangle, row-major, off-diagonal entries
/// doubled, so that `tr(W P)` for a symmetric P is [`upper_dot`] over P's upper triangle.
pub(crate) fn upper_weights(m: usize, w: impl Fn(usize, usize) -> f64) -> Vec<f64> {
    let mut out = vec![0.0; m * m];
    for j in 0..m {
        for k in j..m {
            let v = w(j, k);
            out[j * m + k] = if k == j { v } else { 2.0 * v };
        }
    }
    out
}

dispatch! {
    /// `Σ_{j ≤ k} a_jk b_jk` over the upper triangles of two row-major `[m, m]` matrices, with
    /// sixteen partial sums in a fixed order.
    pub(crate) fn upper_dot(a: &[f64], b: &[f64], m: usize) -> f64 {
        let mut acc = [0.0f64; 16];
        let mut tail = 0.0;
        for j in 0..m {
            let row = j * m + j..(j + 1) * m;
            let (ra, rb) = (&a[row.clone()], &b[row]);
            let mut ca = ra.chunks_exact(16);
            let mut cb = rb.chunks_exact(16);
            for (x, y) in (&mut ca).zip(&mut cb) {
                for l in 0..16 {
                    acc[l] += x[l] * y[l];
                }
            }
            for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
                tail += x * y;
            }
        }
        let mut s = 0.0;
        for v in acc {
            s += v;
        }
        s + tail
    }
}

/// Predictive means only, `ψ1(x*) α`, at O(m d') per point (no ψ2): for RMSE evaluation.
///
/// # Errors
/// As [`kernel_means`].
pub fn predict_mean(
    vocab: &Vocabulary,
    proj: &Projection,
    alpha: &[f64],
    x: MatRef<'_, f64>,
) -> Result<Vec<f64>> {
    Ok(predict_means(vocab, proj, &[alpha], x)?
        .pop()
        .unwrap_or_default())
}

/// Rows per chunk of [`predict_means`] (bounds its scratch to `ROWS·m` numbers).
const ROWS: usize = 256;

/// Predictive means `ψ1(x*) α_v` for several q(u) (e.g. own and fused) under one q(W),
/// computing ψ1 once per point. Returns one `[n]` vector per α.
///
/// Batched by chunks of rows, in the expanded form of the ψ̄1 exponent (spec §2):
/// `log ψ̄1_nj = −½ log Π_i c_ni − ½ Σ_i a_ni²/c_ni + Σ_i (a_ni/c_ni) z_ji − ½ Σ_i z_ji²/c_ni`
/// with `c = 1 + s`, so the (n, j) part is one product `[n, 2d'] × [2d', m]`, then one
/// exponential per entry and one product `Ψ̄1 [n, m] × [α_v] [m, V]`. Agrees with the
/// per-point form of [`crate::model::psi::psi1_point`] to rounding (the tests check 1e-12).
///
/// # Errors
/// As [`kernel_means`].
pub fn predict_means(
    vocab: &Vocabulary,
    proj: &Projection,
    alphas: &[&[f64]],
    x: MatRef<'_, f64>,
) -> Result<Vec<Vec<f64>>> {
    kernel_means(
        vocab,
        proj.mu(),
        Some(proj.sigma2()),
        proj.sigma_s(),
        alphas,
        x,
    )
}

/// `scale · ψ̄1(x) α_v` for each α, with the inputs mapped to `N(W x, diag(S (x∘x)))`:
/// `w` = W `[d', d]`, `s2` = S `[d', d]` (elementwise variances), or `None` for a fixed W, when
/// `ψ̄1_j(x) = exp(−½‖W x − z_j‖²)` is the unit SE kernel `k(Wx, z_j)` (the server baselines'
/// K_fu). Batched as documented on [`predict_means`].
///
/// # Errors
/// [`crate::Error::DimensionMismatch`] when `x` does not have W's d columns, W (or S) is not
/// `[d', d]`, or an α is not `[m]`.
pub fn kernel_means(
    vocab: &Vocabulary,
    w: MatRef<'_, f64>,
    s2: Option<MatRef<'_, f64>>,
    scale: f64,
    alphas: &[&[f64]],
    x: MatRef<'_, f64>,
) -> Result<Vec<Vec<f64>>> {
    let (m, dz, n) = (vocab.m(), vocab.d_latent(), x.nrows());
    ensure_dim("W rows (d')", dz, w.nrows())?;
    ensure_dim("input columns (d)", w.ncols(), x.ncols())?;
    if let Some(s2) = s2 {
        ensure_dim("S rows (d')", dz, s2.nrows())?;
        ensure_dim("S columns (d)", w.ncols(), s2.ncols())?;
    }
    for a in alphas {
        ensure_dim("mean weights α (m)", m, a.len())?;
    }
    let z = vocab.z();
    // Q = [Zᵀ; −½ (Z∘Z)ᵀ]  [2d', m]
    let q = Mat::from_fn(2 * dz, m, |i, j| {
        if i < dz {
            z[(j, i)]
        } else {
            -0.5 * z[(j, i - dz)] * z[(j, i - dz)]
        }
    });
    let alpha = Mat::from_fn(m, alphas.len(), |j, v| scale * alphas[v][j]);
    let mut out = Mat::<f64>::zeros(n, alphas.len());
    let mut start = 0;
    while start < n {
        let rows = ROWS.min(n - start);
        let xc = x.subrows(start, rows);
        let a = mul(xc, w.transpose());
        let s = s2.map(|s2| {
            let x2 = Mat::from_fn(rows, x.ncols(), |r, j| xc[(r, j)] * xc[(r, j)]);
            mul(x2.as_ref(), s2.transpose())
        });
        // P = [a/c, 1/c]  [rows, 2d'] and the row constants.
        let mut p = Mat::<f64>::zeros(rows, 2 * dz);
        let mut row_const = vec![0.0; rows];
        let mut prods = vec![0.0; rows];
        for (r, rc) in row_const.iter_mut().enumerate() {
            let (mut prod, mut quad) = (1.0, 0.0);
            for i in 0..dz {
                let c = 1.0 + s.as_ref().map_or(0.0, |s| s[(r, i)]);
                let ai = a[(r, i)];
                prod *= c;
                quad += ai * ai / c;
                p[(r, i)] = ai / c;
                p[(r, dz + i)] = 1.0 / c;
            }
            *rc = -0.5 * quad;
            prods[r] = prod;
        }
        if s.is_some() {
            minus_half_ln_add(&mut row_const, &prods[..rows]);
        }
        let mut e = mul(p.as_ref(), q.as_ref());
        for j in 0..m {
            exp_shifted(e.col_as_slice_mut(j), &row_const);
        }
        mul_add(
            out.as_mut().subrows_mut(start, rows),
            e.as_ref(),
            alpha.as_ref(),
            1.0,
        );
        start += rows;
    }
    Ok((0..alphas.len())
        .map(|v| out.col_as_slice(v).to_vec())
        .collect())
}

dispatch! {
    /// `v_r −= ½ ln p_r` in place.
    fn minus_half_ln_add(v: &mut [f64], p: &[f64]) {
        for (x, &pr) in v.iter_mut().zip(p) {
            *x -= 0.5 * ln(pr);
        }
    }
}

dispatch! {
    /// `v_r = exp(v_r + c_r)` in place.
    fn exp_shifted(v: &mut [f64], c: &[f64]) {
        for (x, &cr) in v.iter_mut().zip(c) {
            *x = exp(*x + cr);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::psi::psi1_point;
    use crate::rng::Rng;

    #[test]
    fn upper_dot_is_the_same_on_every_path() {
        let mut rng = Rng::new(2, 2);
        for m in [1usize, 3, 16, 17, 40] {
            let a: Vec<f64> = (0..m * m).map(|_| rng.normal()).collect();
            let b: Vec<f64> = (0..m * m).map(|_| rng.normal()).collect();
            let want: f64 = (0..m)
                .flat_map(|j| (j..m).map(move |k| j * m + k))
                .map(|t| a[t] * b[t])
                .sum();
            let got: Vec<u64> = [2, 1, 0]
                .iter()
                .map(|&l| crate::simd::at_level(l, || upper_dot(&a, &b, m)).to_bits())
                .collect();
            assert_eq!(got[0], got[1]);
            assert_eq!(got[0], got[2]);
            assert!((f64::from_bits(got[0]) - want).abs() < 1e-12 * m as f64 * m as f64);
        }
    }

    #[test]
    fn batched_means_match_the_per_point_form() {
        let mut rng = Rng::new(21, 4);
        for &(m, dz, d, n) in &[
            (7usize, 2usize, 3usize, 5usize),
            (30, 4, 6, 300),
            (50, 8, 8, 600),
        ] {
            let vocab = Vocabulary::default_design(m, dz, 3).expect("design");
            let proj = Projection::new(
                Mat::from_fn(dz, d, |_, _| 0.6 * rng.normal()),
                Mat::from_fn(dz, d, |_, _| -1.0 + 0.5 * rng.normal()),
                0.3,
                -1.0,
            );
            let x = Mat::from_fn(n, d, |_, _| 1.5 * rng.normal());
            let a1: Vec<f64> = (0..m).map(|_| rng.normal()).collect();
            let a2: Vec<f64> = (0..m).map(|_| rng.normal()).collect();
            let got = predict_means(&vocab, &proj, &[&a1, &a2], x.as_ref()).expect("means");
            let (mut a, mut s) = (vec![0.0; dz], vec![0.0; dz]);
            let mut psi1 = vec![0.0; m];
            let mut scale: f64 = 0.0;
            let mut worst: f64 = 0.0;
            for r in 0..n {
                let xr: Vec<f64> = (0..d).map(|j| x[(r, j)]).collect();
                proj.moments_into(&xr, &mut a, &mut s);
                psi1_point(&vocab, &a, &s, &mut psi1);
                for (v, alpha) in [&a1, &a2].iter().enumerate() {
                    let want = proj.sigma_s() * crate::linalg::dot(&psi1, alpha);
                    let norm: f64 = psi1
                        .iter()
                        .zip(alpha.iter())
                        .map(|(p, a)| (p * a).abs())
                        .sum();
                    scale = scale.max(norm * proj.sigma_s());
                    worst =
                        worst.max((got[v][r] - want).abs() / (norm * proj.sigma_s()).max(1e-300));
                }
            }
            assert!(scale > 0.0);
            assert!(
                worst < 1e-12,
                "m {m} d' {dz}: worst relative error {worst:e}"
            );
        }
    }

    #[test]
    fn column_mismatches_are_errors_not_panics() {
        // Inputs with d + 1 columns, α of length m − 1, a q(W) of the wrong d': each public
        // entry point returns DimensionMismatch instead of indexing out of bounds.
        use crate::model::psi::psi1_matrix;
        use crate::Error;
        let (m, dz, d) = (6, 2, 3);
        let vocab = Vocabulary::default_design(m, dz, 5).expect("design");
        let proj = vocab.initial_projection(d);
        let post = vocab.t0().posterior(&vocab).expect("prior posterior");
        let good = Mat::from_fn(4, d, |i, j| (i + j) as f64 * 0.1);
        let wide = Mat::from_fn(4, d + 1, |i, j| (i + j) as f64 * 0.1);
        let mismatch = |r: Result<()>, what: &str| match r {
            Err(Error::DimensionMismatch { .. }) => {}
            other => panic!("{what}: expected DimensionMismatch, got {other:?}"),
        };
        mismatch(
            psi1_matrix(&vocab, &proj, wide.as_ref()).map(drop),
            "psi1_matrix",
        );
        mismatch(
            predict(&vocab, &proj, &post, wide.as_ref()).map(drop),
            "predict",
        );
        let alpha = post.alpha.clone();
        mismatch(
            predict_means(&vocab, &proj, &[&alpha], wide.as_ref()).map(drop),
            "predict_means",
        );
        mismatch(
            kernel_means(&vocab, proj.mu(), None, 1.0, &[&alpha[1..]], good.as_ref()).map(drop),
            "kernel_means short α",
        );
        mismatch(
            kernel_means(&vocab, proj.mu(), None, 1.0, &[&alpha], wide.as_ref()).map(drop),
            "kernel_means columns",
        );
        let other = Vocabulary::default_design(m, dz + 1, 5).expect("design");
        mismatch(
            predict(&other, &proj, &post, good.as_ref()).map(drop),
            "predict with a q(W) of another d'",
        );
        // The same calls with fitting shapes succeed.
        assert_eq!(
            psi1_matrix(&vocab, &proj, good.as_ref())
                .expect("psi1")
                .nrows(),
            4
        );
        assert_eq!(
            predict(&vocab, &proj, &post, good.as_ref())
                .expect("predict")
                .mean
                .len(),
            4
        );
    }
}
