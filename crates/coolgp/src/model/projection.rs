//! q(W): the agent's own mean-field Gaussian projection into the standardized domain, with the
//! signal and noise scales (spec §1, §6).

use faer::{Mat, MatRef};

/// Clamp of `log σ_ij` (spec §6): `[log 1e-3, log 3]`.
pub const LOG_SIGMA_MIN: f64 = -6.907_755_278_982_137;
/// Upper clamp of `log σ_ij`.
pub const LOG_SIGMA_MAX: f64 = 1.098_612_288_668_109_8;

/// `q(W) = Π_ij N(w_ij | μ_ij, σ_ij²)` with `W [d', d]`, plus `σ_s`, `σ_n`.
///
/// Free parameters θ = `(M, P = log Σ, λ = log σ_s, η = log σ_n)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Projection {
    mu: Mat<f64>,
    log_sigma: Mat<f64>,
    log_sigma_s: f64,
    log_sigma_n: f64,
    /// Cached `σ_ij²`, kept in sync with `log_sigma`.
    sigma2: Mat<f64>,
}

impl Projection {
    /// A projection from its free parameters (`mu`, `log_sigma` both `[d', d]`).
    ///
    /// # Panics
    /// If the two matrices differ in shape (our misuse).
    #[track_caller]
    pub fn new(mu: Mat<f64>, log_sigma: Mat<f64>, log_sigma_s: f64, log_sigma_n: f64) -> Self {
        assert_eq!(
            (mu.nrows(), mu.ncols()),
            (log_sigma.nrows(), log_sigma.ncols())
        );
        let sigma2 = Mat::from_fn(mu.nrows(), mu.ncols(), |i, j| {
            (2.0 * log_sigma[(i, j)]).exp()
        });
        Self {
            mu,
            log_sigma,
            log_sigma_s,
            log_sigma_n,
            sigma2,
        }
    }

    /// A point mass at `w` (σ_ij → the clamp floor): q(W) ≈ δ(W0), used by the baselines.
    pub fn point(w: Mat<f64>, sigma_s: f64, sigma_n: f64) -> Self {
        let ls = Mat::from_fn(w.nrows(), w.ncols(), |_, _| LOG_SIGMA_MIN);
        Self::new(w, ls, sigma_s.ln(), sigma_n.ln())
    }

    /// The same q(W) with `σ_s = σ_n = 1`: the projection behind unit-scale statistics.
    pub fn with_unit_scales(&self) -> Projection {
        Self {
            log_sigma_s: 0.0,
            log_sigma_n: 0.0,
            ..self.clone()
        }
    }

    /// Input dimension d.
    pub fn d(&self) -> usize {
        self.mu.ncols()
    }

    /// Standardized dimension d'.
    pub fn d_latent(&self) -> usize {
        self.mu.nrows()
    }

    /// `M [d', d]`.
    pub fn mu(&self) -> MatRef<'_, f64> {
        self.mu.as_ref()
    }

    /// `log Σ [d', d]`.
    pub fn log_sigma(&self) -> MatRef<'_, f64> {
        self.log_sigma.as_ref()
    }

    /// `Σ∘Σ [d', d]`.
    pub fn sigma2(&self) -> MatRef<'_, f64> {
        self.sigma2.as_ref()
    }

    /// `σ_ij`.
    pub fn sigma(&self, i: usize, j: usize) -> f64 {
        self.log_sigma[(i, j)].exp()
    }

    /// `σ_s`.
    pub fn sigma_s(&self) -> f64 {
        self.log_sigma_s.exp()
    }

    /// `σ_n`.
    pub fn sigma_n(&self) -> f64 {
        self.log_sigma_n.exp()
    }

    /// `log σ_s`.
    pub fn log_sigma_s(&self) -> f64 {
        self.log_sigma_s
    }

    /// `log σ_n`.
    pub fn log_sigma_n(&self) -> f64 {
        self.log_sigma_n
    }

    /// Moments of `v = W x` for one input (spec §2): `a = M x`, `s = (Σ∘Σ)(x∘x)`, each `[d']`.
    #[inline]
    pub fn moments_into(&self, x: &[f64], a: &mut [f64], s: &mut [f64]) {
        let dz = self.d_latent();
        for i in 0..dz {
            let (mut ai, mut si) = (0.0, 0.0);
            for (j, &xj) in x.iter().enumerate() {
                ai += self.mu[(i, j)] * xj;
                si += self.sigma2[(i, j)] * xj * xj;
            }
            a[i] = ai;
            s[i] = si;
        }
    }

    /// `KL(q(W) ‖ p(W)) = Σ_ij [½(σ_ij² + μ_ij² − 1) − log σ_ij]` with `p = Π N(0, 1)`.
    pub fn kl(&self) -> f64 {
        let mut s = 0.0;
        for j in 0..self.d() {
            for i in 0..self.d_latent() {
                let mu = self.mu[(i, j)];
                s += 0.5 * (self.sigma2[(i, j)] + mu * mu - 1.0) - self.log_sigma[(i, j)];
            }
        }
        s
    }

    /// Number of free parameters: `2 d' d + 2`.
    pub fn n_params(&self) -> usize {
        2 * self.d() * self.d_latent() + 2
    }

    /// θ flattened: `[vec(M) column-major, vec(log Σ), log σ_s, log σ_n]`.
    pub fn to_flat(&self) -> Vec<f64> {
        let mut v = Vec::with_capacity(self.n_params());
        for j in 0..self.d() {
            for i in 0..self.d_latent() {
                v.push(self.mu[(i, j)]);
            }
        }
        for j in 0..self.d() {
            for i in 0..self.d_latent() {
                v.push(self.log_sigma[(i, j)]);
            }
        }
        v.push(self.log_sigma_s);
        v.push(self.log_sigma_n);
        v
    }

    /// Sets θ from [`Projection::to_flat`]'s layout, clamping `log σ_ij` (spec §6).
    ///
    /// # Panics
    /// If `theta` has the wrong length (our misuse).
    #[track_caller]
    pub fn set_flat(&mut self, theta: &[f64]) {
        assert_eq!(theta.len(), self.n_params());
        let (dz, d) = (self.d_latent(), self.d());
        let nm = dz * d;
        for j in 0..d {
            for i in 0..dz {
                self.mu[(i, j)] = theta[j * dz + i];
                let ls = theta[nm + j * dz + i].clamp(LOG_SIGMA_MIN, LOG_SIGMA_MAX);
                self.log_sigma[(i, j)] = ls;
                self.sigma2[(i, j)] = (2.0 * ls).exp();
            }
        }
        self.log_sigma_s = theta[2 * nm];
        self.log_sigma_n = theta[2 * nm + 1];
    }
}

impl Projection {
    /// q(W) in natural form, flattened like [`Projection::to_flat`]:
    /// `[vec(M/Σ²), vec(1/Σ²), log σ_s, log σ_n]` (precision-weighted means and precisions; the
    /// scales as they are). Summed over agents it gives the product `Π_i q_i(W)` (spec §13,
    /// proxy 2 of the shared projection).
    pub fn to_natural_flat(&self) -> Vec<f64> {
        let mut v = Vec::with_capacity(self.n_params());
        for j in 0..self.d() {
            for i in 0..self.d_latent() {
                v.push(self.mu[(i, j)] / self.sigma2[(i, j)]);
            }
        }
        for j in 0..self.d() {
            for i in 0..self.d_latent() {
                v.push(1.0 / self.sigma2[(i, j)]);
            }
        }
        v.push(self.log_sigma_s);
        v.push(self.log_sigma_n);
        v
    }

    /// Sets q(W) to the product whose natural parameters sum to `sum` (a sum of `count`
    /// [`Projection::to_natural_flat`] vectors): precision `P = Σ 1/σ²`, mean `Σ(μ/σ²)/P`,
    /// `log σ = −½ log P` (clamped); `log σ_s`, `log σ_n` are averaged over the `count` agents.
    /// Returns false and changes nothing if a precision is not positive and finite.
    pub fn set_from_natural_sum(&mut self, sum: &[f64], count: f64) -> bool {
        let nm = self.d() * self.d_latent();
        if sum.len() != self.n_params()
            || count.is_nan()
            || count <= 0.0
            || sum[nm..2 * nm].iter().any(|&p| p.is_nan() || p <= 0.0)
            || sum.iter().any(|v| !v.is_finite())
        {
            return false;
        }
        let mut theta = Vec::with_capacity(self.n_params());
        theta.extend((0..nm).map(|k| sum[k] / sum[nm + k]));
        theta.extend((0..nm).map(|k| -0.5 * sum[nm + k].ln()));
        theta.push(sum[2 * nm] / count);
        theta.push(sum[2 * nm + 1] / count);
        self.set_flat(&theta);
        true
    }
}

/// Gradient of an objective with respect to θ, in the same shapes as [`Projection`].
#[derive(Clone, Debug, PartialEq)]
pub struct ProjectionGrad {
    /// `∂/∂M [d', d]`.
    pub mu: Mat<f64>,
    /// `∂/∂ log Σ [d', d]`.
    pub log_sigma: Mat<f64>,
    /// `∂/∂ log σ_s`.
    pub log_sigma_s: f64,
    /// `∂/∂ log σ_n`.
    pub log_sigma_n: f64,
}

impl ProjectionGrad {
    /// Flattened like [`Projection::to_flat`].
    pub fn to_flat(&self) -> Vec<f64> {
        let (dz, d) = (self.mu.nrows(), self.mu.ncols());
        let mut v = Vec::with_capacity(2 * dz * d + 2);
        for j in 0..d {
            for i in 0..dz {
                v.push(self.mu[(i, j)]);
            }
        }
        for j in 0..d {
            for i in 0..dz {
                v.push(self.log_sigma[(i, j)]);
            }
        }
        v.push(self.log_sigma_s);
        v.push(self.log_sigma_n);
        v
    }

    /// `∇KL_W`: `∂/∂M = M`, `∂/∂log Σ = Σ∘Σ − 1`, zero for the scales (spec §6).
    pub fn kl(p: &Projection) -> Self {
        Self {
            mu: p.mu.clone(),
            log_sigma: Mat::from_fn(p.d_latent(), p.d(), |i, j| p.sigma2[(i, j)] - 1.0),
            log_sigma_s: 0.0,
            log_sigma_n: 0.0,
        }
    }
}
