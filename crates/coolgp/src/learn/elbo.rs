//! The block expected log-likelihood `L_D` and its analytic gradients (spec §3, §6).
//!
//! ```text
//! L_D = −(n/2) log(2π σ_n²) − Q/(2σ_n²),  Q = yᵀy − 2yᵀΨ1α + tr(GΨ2) + nσ_s²      (3.1)
//! ∂L_D/∂M = (gᵃ)ᵀX,  ∂L_D/∂logΣ = 2Σ∘Σ∘((gˢ)ᵀ(X∘X)),
//! ∂L_D/∂logσ_s = (yᵀΨ1α − tr(GΨ2) − nσ_s²)/σ_n²,  ∂L_D/∂logσ_n = −n + Q/σ_n²
//! ```
//! with q(u) (α, G) held fixed. The ψ2 sums use `h = H·1`, `H = c2∘ψ2(x_n)`, so no
//! m×m×d' temporary is formed (spec §6).

use faer::{Mat, MatRef};

use crate::model::natural::Posterior;
use crate::model::projection::{Projection, ProjectionGrad};
use crate::model::psi::PointPsi;
use crate::model::Vocabulary;

/// `L_D` of one block and its gradient with respect to θ.
#[derive(Clone, Debug)]
pub struct BlockElbo {
    /// `L_D` (3.1).
    pub value: f64,
    /// `∇_θ L_D`.
    pub grad: ProjectionGrad,
}

const LOG_2PI: f64 = 1.837_877_066_409_345_5;

/// `L_D` and `∇_θ L_D` for the block `(x [n, d], y [n])` under q(u) = `post`.
pub fn block_loglik_grad(
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    x: MatRef<'_, f64>,
    y: &[f64],
) -> BlockElbo {
    let (m, dz, d) = (vocab.m(), vocab.d_latent(), proj.d());
    let n = y.len();
    let ss = proj.sigma_s();
    let sn2 = proj.sigma_n() * proj.sigma_n();
    let zt = vocab.z_dim_major();
    let alpha = &post.alpha;
    // Row-major G for the hot loop.
    let g: Vec<f64> = (0..m * m).map(|t| post.g[(t / m, t % m)]).collect();
    let mut pp = PointPsi::new(vocab, d);
    let mut xr = vec![0.0; d];
    let mut ga = Mat::<f64>::zeros(n, dz);
    let mut gs = Mat::<f64>::zeros(n, dz);
    let mut h = vec![0.0; m];
    let mut hz = vec![0.0; m];
    let (mut y_psi_alpha, mut tr_g_psi2, mut yty) = (0.0, 0.0, 0.0);
    for r in 0..n {
        for (j, v) in xr.iter_mut().enumerate() {
            *v = x[(r, j)];
        }
        pp.eval(vocab, proj, &xr);
        let yn = y[r];
        yty += yn * yn;
        // ψ1 = σ_s ψ̄1; w1_j = c1_nj ψ1_nj with c1_nj = y_n α_j / σ_n².
        let mut w1_tot = 0.0;
        let w1: Vec<f64> = (0..m)
            .map(|j| {
                let v = yn * alpha[j] / sn2 * ss * pp.psi1[j];
                w1_tot += v;
                v
            })
            .collect();
        y_psi_alpha += (0..m).map(|j| yn * ss * pp.psi1[j] * alpha[j]).sum::<f64>();
        // H = c2 ∘ ψ2 with c2 = −G/(2σ_n²), ψ2 = σ_s² ψ̄2; h = H·1.
        let c = -ss * ss / (2.0 * sn2);
        let mut htot = 0.0;
        let mut trg = 0.0;
        for j in 0..m {
            let mut hj = 0.0;
            for k in 0..m {
                let gp = g[j * m + k] * pp.psi2[j * m + k];
                hj += gp;
            }
            trg += hj;
            h[j] = c * hj;
            htot += h[j];
        }
        tr_g_psi2 += ss * ss * trg;
        let (a, s) = pp.moments();
        for i in 0..dz {
            let zi = &zt[i * m..(i + 1) * m];
            let (ai, si) = (a[i], s[i]);
            // ψ1 part
            let w1z: f64 = w1.iter().zip(zi).map(|(w, z)| w * z).sum();
            let w1zz: f64 = w1.iter().zip(zi).map(|(w, z)| w * z * z).sum();
            let s1 = 1.0 + si;
            let mut gai = -(ai * w1_tot - w1z) / s1;
            let mut gsi =
                -w1_tot / (2.0 * s1) + (ai * ai * w1_tot - 2.0 * ai * w1z + w1zz) / (2.0 * s1 * s1);
            // ψ2 part: Σ_j h_j z_ji, Σ_j h_j z_ji², z_iᵀ H z_i
            let hz1: f64 = h.iter().zip(zi).map(|(a, b)| a * b).sum();
            let hz2: f64 = h.iter().zip(zi).map(|(a, b)| a * b * b).sum();
            for j in 0..m {
                let row = &pp.psi2[j * m..(j + 1) * m];
                let grow = &g[j * m..(j + 1) * m];
                hz[j] = row
                    .iter()
                    .zip(grow)
                    .zip(zi)
                    .map(|((p, gg), z)| p * gg * z)
                    .sum::<f64>()
                    * c;
            }
            let zhz: f64 = hz.iter().zip(zi).map(|(a, b)| a * b).sum();
            let c2 = 1.0 + 2.0 * si;
            gai += -2.0 / c2 * (ai * htot - hz1);
            gsi += -htot / c2
                + 2.0 / (c2 * c2) * (ai * ai * htot - 2.0 * ai * hz1 + 0.5 * hz2 + 0.5 * zhz);
            ga[(r, i)] = gai;
            gs[(r, i)] = gsi;
        }
    }
    let nf = n as f64;
    let q = yty - 2.0 * y_psi_alpha + tr_g_psi2 + nf * ss * ss;
    let value = -0.5 * nf * (LOG_2PI + sn2.ln()) - 0.5 * q / sn2;
    let sigma2 = proj.sigma2();
    let mut dmu = Mat::zeros(dz, d);
    let mut dls = Mat::zeros(dz, d);
    for i in 0..dz {
        for j in 0..d {
            let (mut a1, mut a2) = (0.0, 0.0);
            for r in 0..n {
                let xv = x[(r, j)];
                a1 += ga[(r, i)] * xv;
                a2 += gs[(r, i)] * xv * xv;
            }
            dmu[(i, j)] = a1;
            dls[(i, j)] = 2.0 * sigma2[(i, j)] * a2;
        }
    }
    BlockElbo {
        value,
        grad: ProjectionGrad {
            mu: dmu,
            log_sigma: dls,
            log_sigma_s: (y_psi_alpha - tr_g_psi2 - nf * ss * ss) / sn2,
            log_sigma_n: -nf + q / sn2,
        },
    }
}

/// The paper's unbiased stochastic objective `c·L_D* − KL_u − KL_W` with `c = N_own/n*`
/// (spec §6), and its gradient (KL_u does not depend on θ).
pub fn stochastic_objective(
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    x: MatRef<'_, f64>,
    y: &[f64],
    scale: f64,
) -> BlockElbo {
    let b = block_loglik_grad(vocab, proj, post, x, y);
    let kl = ProjectionGrad::kl(proj);
    let value = scale * b.value - post.kl(vocab) - proj.kl();
    let grad = ProjectionGrad {
        mu: Mat::from_fn(proj.d_latent(), proj.d(), |i, j| {
            scale * b.grad.mu[(i, j)] - kl.mu[(i, j)]
        }),
        log_sigma: Mat::from_fn(proj.d_latent(), proj.d(), |i, j| {
            scale * b.grad.log_sigma[(i, j)] - kl.log_sigma[(i, j)]
        }),
        log_sigma_s: scale * b.grad.log_sigma_s,
        log_sigma_n: scale * b.grad.log_sigma_n,
    };
    BlockElbo { value, grad }
}
