//! The paper's SYNTHETIC domain: several phenomena that share one latent function.
//!
//! One latent `u` is drawn from the unit GP on the standardized domain `R^{d'}`, kernel
//! `k(z, z') = exp(-½‖z − z'‖²)` (spec §1), and phenomenon `p` observes
//! `f_p(x) = u(W_p x)` with its own `W_p ∈ R^{d'×d}`, entries `N(0, 1/d)` (so `W_p x` has
//! roughly unit scale for `x ~ N(0, I_d)`), and `y = f_p(x) + N(0, noise²)`. The projections
//! share a common part, `W_p = √ρ·W_common + √(1−ρ)·W_own,p`, with relatedness ρ (default 0.9):
//! the paper calls the phenomena "correlated" without saying how much.
//!
//! ## The random-Fourier-feature approximation
//! `u` is drawn as `u(z) = sqrt(2/F) Σ_f cos(ω_fᵀz + b_f)` with `ω_f ~ N(0, I_{d'})` and
//! `b_f ~ U(0, 2π)` (Rahimi & Recht 2007). Over draws, `E[u(z)u(z')] = exp(-½‖z − z'‖²)`
//! *exactly* for every `F`, and `u` is Gaussian only in the limit: its finite-dimensional
//! marginals are sums of `F` i.i.d. bounded terms, so they are Gaussian up to `O(1/sqrt(F))`
//! (Berry–Esseen). For one fixed draw, `u` lies in the span of the `F` features, whose empirical
//! kernel `k̂(z, z') = (2/F) Σ_f cos(ω_fᵀz + b_f) cos(ω_fᵀz' + b_f)` deviates from `k` by a
//! random error of standard deviation at most `1/sqrt(F)` at each pair of points (≈ 0.022 for
//! the default `F = 2000`). [`RandomFeatures::kernel`] gives `k̂`; the tests check both the
//! covariance over draws and the single-draw kernel error.

use coolgp::faer::Mat;
use coolgp::rng::Rng;

use crate::error::{DataError, Result};

const STREAM_LATENT: u64 = 1;
const STREAM_ORDER: u64 = 2;
const STREAM_W: u64 = 1 << 32;
const STREAM_TRAIN: u64 = 2 << 32;
const STREAM_TEST: u64 = 3 << 32;
const STREAM_W_COMMON: u64 = 4 << 32;

/// A draw of the unit-SE-kernel GP on `R^{d'}` by random Fourier features.
#[derive(Debug, Clone)]
pub struct RandomFeatures {
    /// Frequencies `ω_f` as rows, `F × d'`, entries `N(0, 1)`.
    pub omega: Mat<f64>,
    /// Phases `b_f ~ U(0, 2π)`, length `F`.
    pub phase: Vec<f64>,
}

impl RandomFeatures {
    /// Draws `features` features on `R^{d_latent}` from `rng` (row by row: the `d'` entries of
    /// `ω_f`, then `b_f`).
    pub fn new(d_latent: usize, features: usize, rng: &mut Rng) -> Self {
        let mut om = Vec::with_capacity(features * d_latent);
        let mut phase = Vec::with_capacity(features);
        for _ in 0..features {
            for _ in 0..d_latent {
                om.push(rng.normal());
            }
            phase.push(2.0 * std::f64::consts::PI * rng.uniform());
        }
        let omega = Mat::from_fn(features, d_latent, |f, j| om[f * d_latent + j]);
        Self { omega, phase }
    }

    /// Dimension `d'` of the domain.
    pub fn dim(&self) -> usize {
        self.omega.ncols()
    }

    /// Number of features `F`.
    pub fn features(&self) -> usize {
        self.phase.len()
    }

    /// The arguments `ω_fᵀz + b_f` for all features, into `buf`.
    fn phases_into(&self, z: &[f64], buf: &mut Vec<f64>) {
        buf.clear();
        buf.extend_from_slice(&self.phase);
        for (j, &zj) in z.iter().enumerate().take(self.dim()) {
            for (a, &w) in buf.iter_mut().zip(self.omega.col_as_slice(j)) {
                *a += w * zj;
            }
        }
    }

    fn eval_with(&self, z: &[f64], buf: &mut Vec<f64>) -> f64 {
        self.phases_into(z, buf);
        let s: f64 = buf.iter().map(|a| a.cos()).sum();
        s * (2.0 / self.features() as f64).sqrt()
    }

    /// `u(z)`.
    ///
    /// # Errors
    /// [`DataError::DimensionMismatch`] if `z.len() != d'`.
    pub fn eval(&self, z: &[f64]) -> Result<f64> {
        self.check(z.len())?;
        Ok(self.eval_with(z, &mut Vec::new()))
    }

    /// `u` at every row of `z` (`n × d'`).
    ///
    /// # Errors
    /// [`DataError::DimensionMismatch`] if `z` does not have `d'` columns.
    pub fn eval_rows(&self, z: &Mat<f64>) -> Result<Vec<f64>> {
        self.check(z.ncols())?;
        let mut buf = Vec::with_capacity(self.features());
        let mut row = vec![0.0; z.ncols()];
        Ok((0..z.nrows())
            .map(|i| {
                for (j, r) in row.iter_mut().enumerate() {
                    *r = z[(i, j)];
                }
                self.eval_with(&row, &mut buf)
            })
            .collect())
    }

    /// The empirical kernel of this draw, `k̂(z, z') = (2/F) Σ_f cos(ω_fᵀz + b_f) cos(ω_fᵀz' + b_f)`,
    /// an unbiased estimate of `exp(-½‖z − z'‖²)` with standard deviation at most `1/sqrt(F)`.
    ///
    /// # Errors
    /// [`DataError::DimensionMismatch`] if a point does not have `d'` coordinates.
    pub fn kernel(&self, z: &[f64], z2: &[f64]) -> Result<f64> {
        self.check(z.len())?;
        self.check(z2.len())?;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        self.phases_into(z, &mut a);
        self.phases_into(z2, &mut b);
        let s: f64 = a.iter().zip(&b).map(|(p, q)| p.cos() * q.cos()).sum();
        Ok(2.0 * s / self.features() as f64)
    }

    fn check(&self, len: usize) -> Result<()> {
        if len == self.dim() {
            Ok(())
        } else {
            Err(DataError::DimensionMismatch(format!(
                "latent points have {} coordinates, got {len}",
                self.dim()
            )))
        }
    }
}

/// Configuration of [`generate`]; [`Default`] gives the paper-like setting.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticConfig {
    /// Input dimension `d` of every phenomenon (default 6).
    pub d: usize,
    /// Dimension `d'` of the shared standardized domain (default 6).
    pub d_latent: usize,
    /// Number of phenomena sharing the latent `u` (default 2).
    pub phenomena: usize,
    /// Training batches per phenomenon (default 200).
    pub batches_per_phenomenon: usize,
    /// Points per training batch (default 40).
    pub batch: usize,
    /// Test points in total, split evenly across phenomena; the first
    /// `test_points % phenomena` phenomena get one more (default 4000).
    pub test_points: usize,
    /// Observation noise standard deviation (default 0.1).
    pub noise: f64,
    /// Number `F` of random Fourier features (default 2000; see the module docs for the error).
    pub features: usize,
    /// How related the phenomena are, ρ ∈ [0, 1]: `W_p = √ρ·W_common + √(1−ρ)·W_own,p`
    /// (entries of both `N(0, 1/d)`, so `W_p` keeps the same scale). 0 gives independent
    /// projections, 1 identical ones (default 0.9).
    pub relatedness: f64,
    /// Seed: the same configuration gives bit-identical data (default 0).
    pub seed: u64,
}

impl Default for SyntheticConfig {
    fn default() -> Self {
        Self {
            d: 6,
            d_latent: 6,
            phenomena: 2,
            batches_per_phenomenon: 200,
            batch: 40,
            test_points: 4000,
            noise: 0.1,
            features: 2000,
            relatedness: 0.9,
            seed: 0,
        }
    }
}

/// One generated SYNTHETIC domain.
#[derive(Debug, Clone)]
pub struct Synthetic {
    /// Training batches `(phenomenon, X (batch × d), y)`, in a seeded random order (the
    /// stream order: all phenomena interleaved).
    pub train_batches: Vec<(usize, Mat<f64>, Vec<f64>)>,
    /// Noisy test sets `(phenomenon, X, y)`, one per phenomenon, in phenomenon order.
    pub test: Vec<(usize, Mat<f64>, Vec<f64>)>,
    /// The projections `W_p` (`d' × d`), one per phenomenon.
    pub w: Vec<Mat<f64>>,
    /// The shared latent function `u`.
    pub latent: RandomFeatures,
}

impl Synthetic {
    /// The noiseless `f_p(x) = u(W_p x)` at every row of `x` (`n × d`).
    ///
    /// # Errors
    /// [`DataError::InvalidConfig`] for an unknown phenomenon; [`DataError::DimensionMismatch`]
    /// if `x` does not have `d` columns.
    pub fn f(&self, phenomenon: usize, x: &Mat<f64>) -> Result<Vec<f64>> {
        let w = self.w.get(phenomenon).ok_or_else(|| {
            DataError::InvalidConfig(format!(
                "phenomenon {phenomenon} out of range (there are {})",
                self.w.len()
            ))
        })?;
        if x.ncols() != w.ncols() {
            return Err(DataError::DimensionMismatch(format!(
                "phenomenon inputs have {} columns, got {}",
                w.ncols(),
                x.ncols()
            )));
        }
        Ok(f_rows(&self.latent, w, x))
    }
}

/// `u(W x_i)` for every row `x_i` of `x` (dimensions already checked).
fn f_rows(latent: &RandomFeatures, w: &Mat<f64>, x: &Mat<f64>) -> Vec<f64> {
    let (dl, d) = (w.nrows(), w.ncols());
    let mut z = vec![0.0; dl];
    let mut buf = Vec::with_capacity(latent.features());
    (0..x.nrows())
        .map(|i| {
            for (k, zk) in z.iter_mut().enumerate() {
                *zk = (0..d).map(|j| w[(k, j)] * x[(i, j)]).sum();
            }
            latent.eval_with(&z, &mut buf)
        })
        .collect()
}

/// Draws `n` points `x ~ N(0, I_d)` (row by row) and their noisy observations.
fn draw_points(
    rng: &mut Rng,
    n: usize,
    latent: &RandomFeatures,
    w: &Mat<f64>,
    noise: f64,
) -> (Mat<f64>, Vec<f64>) {
    let d = w.ncols();
    let raw: Vec<f64> = (0..n * d).map(|_| rng.normal()).collect();
    let x = Mat::from_fn(n, d, |i, j| raw[i * d + j]);
    let mut y = f_rows(latent, w, &x);
    for v in &mut y {
        *v += noise * rng.normal();
    }
    (x, y)
}

/// Generates the SYNTHETIC domain for `cfg` (deterministic for a configuration).
///
/// Each part has its own RNG stream of `cfg.seed` (the latent, each `W_p`, each phenomenon's
/// training and test points, the batch order), so e.g. changing the number of batches does not
/// change `u`, `W_p` or the test sets.
///
/// # Errors
/// [`DataError::InvalidConfig`] if `d`, `d_latent`, `phenomena`, `batch` or `features` is 0,
/// or `noise` is negative or not finite.
pub fn generate(cfg: &SyntheticConfig) -> Result<Synthetic> {
    for (name, v) in [
        ("d", cfg.d),
        ("d_latent", cfg.d_latent),
        ("phenomena", cfg.phenomena),
        ("batch", cfg.batch),
        ("features", cfg.features),
    ] {
        if v == 0 {
            return Err(DataError::InvalidConfig(format!("{name} must be positive")));
        }
    }
    if !(cfg.noise.is_finite() && cfg.noise >= 0.0) {
        return Err(DataError::InvalidConfig(format!(
            "noise must be finite and non-negative, got {}",
            cfg.noise
        )));
    }
    let seed = cfg.seed;
    let latent = RandomFeatures::new(
        cfg.d_latent,
        cfg.features,
        &mut Rng::new(seed, STREAM_LATENT),
    );
    if !(0.0..=1.0).contains(&cfg.relatedness) {
        return Err(DataError::InvalidConfig(format!(
            "relatedness must be in [0, 1], got {}",
            cfg.relatedness
        )));
    }
    let scale = 1.0 / (cfg.d as f64).sqrt();
    let draw_w = |stream: u64| -> Vec<f64> {
        let mut rng = Rng::new(seed, stream);
        (0..cfg.d_latent * cfg.d)
            .map(|_| scale * rng.normal())
            .collect()
    };
    let common = draw_w(STREAM_W_COMMON);
    let (a, b) = (cfg.relatedness.sqrt(), (1.0 - cfg.relatedness).sqrt());
    let w: Vec<Mat<f64>> = (0..cfg.phenomena as u64)
        .map(|p| {
            let own = draw_w(STREAM_W + p);
            Mat::from_fn(cfg.d_latent, cfg.d, |i, j| {
                let k = i * cfg.d + j;
                a * common[k] + b * own[k]
            })
        })
        .collect();

    let mut train_batches = Vec::with_capacity(cfg.phenomena * cfg.batches_per_phenomenon);
    for (p, wp) in w.iter().enumerate() {
        let mut rng = Rng::new(seed, STREAM_TRAIN + p as u64);
        for _ in 0..cfg.batches_per_phenomenon {
            let (x, y) = draw_points(&mut rng, cfg.batch, &latent, wp, cfg.noise);
            train_batches.push((p, x, y));
        }
    }
    Rng::new(seed, STREAM_ORDER).shuffle(&mut train_batches);

    let per = cfg.test_points / cfg.phenomena;
    let rem = cfg.test_points % cfg.phenomena;
    let test = w
        .iter()
        .enumerate()
        .map(|(p, wp)| {
            let mut rng = Rng::new(seed, STREAM_TEST + p as u64);
            let n = per + usize::from(p < rem);
            let (x, y) = draw_points(&mut rng, n, &latent, wp, cfg.noise);
            (p, x, y)
        })
        .collect();

    Ok(Synthetic {
        train_batches,
        test,
        w,
        latent,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> SyntheticConfig {
        SyntheticConfig {
            d: 4,
            d_latent: 3,
            phenomena: 3,
            batches_per_phenomenon: 5,
            batch: 7,
            test_points: 100,
            noise: 0.1,
            features: 300,
            relatedness: 0.5,
            seed: 42,
        }
    }

    #[test]
    fn relatedness_controls_the_shared_part() {
        // ρ = 1: identical projections; ρ = 0: independent ones; anything else is rejected.
        let same = generate(&SyntheticConfig {
            relatedness: 1.0,
            ..small()
        })
        .expect("valid");
        assert!(mats_equal(&same.w[0], &same.w[1]));
        let indep = generate(&SyntheticConfig {
            relatedness: 0.0,
            ..small()
        })
        .expect("valid");
        assert!(!mats_equal(&indep.w[0], &indep.w[1]));
        assert!(generate(&SyntheticConfig {
            relatedness: 1.5,
            ..small()
        })
        .is_err());
    }

    fn mats_equal(a: &Mat<f64>, b: &Mat<f64>) -> bool {
        a.nrows() == b.nrows()
            && a.ncols() == b.ncols()
            && (0..a.nrows()).all(|i| (0..a.ncols()).all(|j| a[(i, j)] == b[(i, j)]))
    }

    #[test]
    fn shapes() {
        let cfg = small();
        let s = generate(&cfg).expect("generate");
        assert_eq!(s.train_batches.len(), 15);
        let mut per_p = [0usize; 3];
        for (p, x, y) in &s.train_batches {
            per_p[*p] += 1;
            assert_eq!((x.nrows(), x.ncols(), y.len()), (7, 4, 7));
        }
        assert_eq!(per_p, [5, 5, 5]);
        // interleaved, not phenomenon-major
        assert!(s.train_batches.windows(2).any(|w| w[0].0 > w[1].0));
        let sizes: Vec<(usize, usize)> = s.test.iter().map(|(p, x, _)| (*p, x.nrows())).collect();
        assert_eq!(sizes, vec![(0, 34), (1, 33), (2, 33)]);
        assert_eq!(s.w.len(), 3);
        assert!(s.w.iter().all(|w| w.nrows() == 3 && w.ncols() == 4));
        assert_eq!((s.latent.dim(), s.latent.features()), (3, 300));
    }

    #[test]
    fn default_shapes() {
        let cfg = SyntheticConfig {
            features: 50,
            ..SyntheticConfig::default()
        };
        let s = generate(&cfg).expect("generate");
        assert_eq!(s.train_batches.len(), 400);
        assert_eq!(s.test.len(), 2);
        assert!(s
            .test
            .iter()
            .all(|(_, x, y)| x.nrows() == 2000 && y.len() == 2000));
        assert!(s.w.iter().all(|w| w.nrows() == 6 && w.ncols() == 6));
    }

    #[test]
    fn deterministic() {
        let cfg = small();
        let a = generate(&cfg).expect("a");
        let b = generate(&cfg).expect("b");
        for (u, v) in a.train_batches.iter().zip(&b.train_batches) {
            assert_eq!(u.0, v.0);
            assert!(mats_equal(&u.1, &v.1));
            assert_eq!(u.2, v.2);
        }
        for (u, v) in a.test.iter().zip(&b.test) {
            assert!(mats_equal(&u.1, &v.1));
            assert_eq!(u.2, v.2);
        }
        let c = generate(&SyntheticConfig {
            seed: 43,
            ..cfg.clone()
        })
        .expect("c");
        assert_ne!(a.test[0].2, c.test[0].2);
        // more batches leave u, W and the test sets unchanged
        let d = generate(&SyntheticConfig {
            batches_per_phenomenon: 9,
            ..cfg
        })
        .expect("d");
        assert!(mats_equal(&a.w[1], &d.w[1]));
        assert_eq!(a.test[2].2, d.test[2].2);
    }

    #[test]
    fn noise_and_scale() {
        let cfg = SyntheticConfig {
            test_points: 4000,
            phenomena: 2,
            d: 6,
            d_latent: 6,
            features: 500,
            ..small()
        };
        let s = generate(&cfg).expect("generate");
        for (p, x, y) in &s.test {
            let f = s.f(*p, x).expect("f");
            let n = y.len() as f64;
            let r2 = y
                .iter()
                .zip(&f)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
                / n;
            // residual variance = noise² = 0.01 (se ≈ 0.01·sqrt(2/2000) ≈ 3e-4)
            assert!((r2 - 0.01).abs() < 0.002, "residual var {r2}");
            let fm = f.iter().sum::<f64>() / n;
            let fv = f.iter().map(|v| (v - fm) * (v - fm)).sum::<f64>() / n;
            assert!(fv > 0.1 && fv < 3.0, "signal var {fv}");
            // W x has roughly unit scale per latent coordinate
            let w = &s.w[*p];
            let mut ss = 0.0;
            for i in 0..x.nrows() {
                for k in 0..w.nrows() {
                    let z: f64 = (0..w.ncols()).map(|j| w[(k, j)] * x[(i, j)]).sum();
                    ss += z * z;
                }
            }
            let ms = ss / (x.nrows() * w.nrows()) as f64;
            assert!(ms > 0.3 && ms < 3.0, "mean ‖Wx‖²/d' = {ms}");
        }
    }

    #[test]
    fn invalid_configs() {
        for cfg in [
            SyntheticConfig { d: 0, ..small() },
            SyntheticConfig {
                phenomena: 0,
                ..small()
            },
            SyntheticConfig {
                features: 0,
                ..small()
            },
            SyntheticConfig {
                noise: -1.0,
                ..small()
            },
            SyntheticConfig {
                noise: f64::NAN,
                ..small()
            },
        ] {
            assert!(matches!(generate(&cfg), Err(DataError::InvalidConfig(_))));
        }
        let s = generate(&small()).expect("generate");
        assert!(s.f(3, &s.test[0].1).is_err());
        assert!(s.f(0, &Mat::zeros(2, 5)).is_err());
        assert!(s.latent.eval(&[0.0; 2]).is_err());
    }

    /// Over draws, Cov[u(z), u(z + Δ)] must be exp(-½‖Δ‖²). With S draws the standard error of
    /// the empirical second moment is ≈ sqrt((1 + k²)/S) ≤ 0.022 for S = 4000; the tolerance of
    /// 0.09 (4 se) still rejects a wrong lengthscale (e.g. exp(-‖Δ‖²) at ‖Δ‖ = 1 is 0.37, not
    /// 0.61) or a wrong normalization (variance 2 or ½ instead of 1).
    #[test]
    fn rff_covariance_over_draws() {
        let s_draws = 4000;
        let z0 = [0.3, -0.2, 0.1];
        let dir = [2.0 / 3.0, 1.0 / 3.0, -2.0 / 3.0]; // unit vector
        let dists = [0.0, 0.5, 1.0, 1.5, 2.5];
        let mut sums = [0.0; 5];
        let mut mean_u = 0.0;
        for seed in 0..s_draws {
            let rf = RandomFeatures::new(3, 100, &mut Rng::new(seed, 99));
            let u0 = rf.eval(&z0).expect("eval");
            mean_u += u0;
            for (k, &r) in dists.iter().enumerate() {
                let z: Vec<f64> = z0.iter().zip(&dir).map(|(a, b)| a + r * b).collect();
                sums[k] += u0 * rf.eval(&z).expect("eval");
            }
        }
        mean_u /= s_draws as f64;
        assert!(mean_u.abs() < 0.07, "E[u] = {mean_u}");
        for (k, &r) in dists.iter().enumerate() {
            let emp = sums[k] / s_draws as f64;
            let want = (-0.5 * r * r).exp();
            assert!((emp - want).abs() < 0.09, "‖Δ‖ = {r}: {emp} vs {want}");
        }
    }

    /// For one draw with F = 2000, the empirical kernel's error has std ≤ 1/sqrt(F); its mean
    /// square over many pairs must be below 2/F.
    #[test]
    fn rff_single_draw_kernel_error() {
        let f = 2000;
        let rf = RandomFeatures::new(6, f, &mut Rng::new(5, 1));
        let mut rng = Rng::new(6, 0);
        let pairs = 200;
        let mut mse = 0.0;
        for _ in 0..pairs {
            let a: Vec<f64> = (0..6).map(|_| rng.normal()).collect();
            let b: Vec<f64> = a.iter().map(|v| v + 0.5 * rng.normal()).collect();
            let dist2: f64 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
            let e = rf.kernel(&a, &b).expect("kernel") - (-0.5 * dist2).exp();
            mse += e * e;
        }
        mse /= pairs as f64;
        assert!(
            mse < 2.0 / f as f64,
            "mse {mse} vs 1/F = {}",
            1.0 / f as f64
        );
        // k̂(z, z) is not exactly 1 either, but close
        let z = [0.1; 6];
        let kzz = rf.kernel(&z, &z).expect("kernel");
        assert!(
            (kzz - 1.0).abs() < 5.0 / (f as f64).sqrt(),
            "k̂(z,z) = {kzz}"
        );
    }
}
