//! The shared configuration every agent of a fleet must hold bit for bit (spec §1, §9):
//! inducing inputs Z, the unit kernel, the jitter, K and its Cholesky factor, the prior T0,
//! the seed of the initial q(W), and a fingerprint of all of these.

use std::sync::Arc;

use faer::{Mat, MatRef};
use sha2::{Digest, Sha256};

use crate::error::{ensure_finite, Error, Result};
pub use crate::fingerprint::Fingerprint;
use crate::linalg::Cholesky;
use crate::model::kernel::gram;
use crate::model::projection::Projection;
use crate::rng::Rng;

/// Version of everything a fingerprint covers; bump it when the meaning of a field changes.
pub const FORMAT_VERSION: u32 = 1;

/// The default jitter ε on K (spec §9); relative, since k_uu has unit variance.
pub const DEFAULT_JITTER: f64 = 1e-6;

/// Largest jitter the configuration schedule tries before rejecting Z (spec §9).
pub const MAX_JITTER: f64 = 1e-3;

/// The encoding vocabulary: `Z [m, d']`, `K = k_uu(Z,Z) + εI [m, m]`, `L = chol(K)`,
/// the prior `T0 = (K, 0)`, and the seed of the shared initial q(W).
///
/// Cheap to share: agents hold it behind an [`Arc`].
#[derive(Clone, Debug)]
pub struct Vocabulary {
    z: Mat<f64>,
    jitter: f64,
    k: Mat<f64>,
    chol_k: Cholesky,
    k_inv: Mat<f64>,
    init_seed: u64,
    fingerprint: Fingerprint,
    /// Z transposed, `[d', m]` row-major: dimension i of every z_j is contiguous (hot loops).
    zt: Vec<f64>,
}

impl Vocabulary {
    /// Builds a vocabulary from `Z [m, d']` with the default jitter schedule: ε = 1e-6, times 10
    /// while `K` fails to factor, up to 1e-3; then the design is rejected (spec §9).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for an empty or non-finite Z, [`Error::NotPositiveDefinite`]
    /// when even ε = 1e-3 fails (prune near-duplicate inducing inputs).
    pub fn new(z: Mat<f64>, init_seed: u64) -> Result<Self> {
        let mut jitter = DEFAULT_JITTER;
        loop {
            match Self::with_jitter(z.clone(), jitter, init_seed) {
                Ok(v) => return Ok(v),
                Err(Error::NotPositiveDefinite { .. }) if jitter < MAX_JITTER => jitter *= 10.0,
                Err(e) => return Err(e),
            }
        }
    }

    /// Builds a vocabulary with exactly this jitter (no schedule).
    ///
    /// # Errors
    /// As [`Vocabulary::new`], with `jitter_tried = jitter`.
    pub fn with_jitter(z: Mat<f64>, jitter: f64, init_seed: u64) -> Result<Self> {
        let (m, dz) = (z.nrows(), z.ncols());
        if m == 0 || dz == 0 {
            return Err(Error::InvalidConfig(format!(
                "inducing inputs must be non-empty, got {m}×{dz}"
            )));
        }
        if !(jitter.is_finite() && jitter > 0.0) {
            return Err(Error::InvalidConfig(format!(
                "jitter must be > 0, got {jitter}"
            )));
        }
        let flat: Vec<f64> = (0..dz)
            .flat_map(|i| (0..m).map(move |j| (i, j)))
            .map(|(i, j)| z[(j, i)])
            .collect();
        ensure_finite("Z", &flat)?;
        let k = gram(z.as_ref(), jitter);
        let chol_k = Cholesky::new(k.as_ref(), "K").map_err(|_| Error::NotPositiveDefinite {
            what: "K",
            jitter_tried: jitter,
        })?;
        let k_inv = chol_k.inverse();
        let fingerprint = fingerprint_of(z.as_ref(), jitter, init_seed);
        Ok(Self {
            zt: flat,
            z,
            jitter,
            k,
            chol_k,
            k_inv,
            init_seed,
            fingerprint,
        })
    }

    /// The deterministic default design for `(m, d')` (spec §13): k-means (Lloyd, k-means++
    /// seeding) of `40·m` standard normal samples in d' dimensions, all drawn from `seed`.
    /// Every agent given the same `(m, d', seed)` holds the same Z.
    ///
    /// # Errors
    /// As [`Vocabulary::new`].
    pub fn default_design(m: usize, d_latent: usize, seed: u64) -> Result<Self> {
        if m == 0 || d_latent == 0 {
            return Err(Error::InvalidConfig(format!(
                "need m > 0 and d' > 0, got m = {m}, d' = {d_latent}"
            )));
        }
        let mut rng = Rng::new(seed, 0x5A5A);
        let n = 40 * m;
        let pts: Vec<f64> = (0..n * d_latent).map(|_| rng.normal()).collect();
        let centres = kmeans(&pts, d_latent, m, 25, &mut rng)?;
        let z = Mat::from_fn(m, d_latent, |j, i| centres[j * d_latent + i]);
        Self::new(z, seed)
    }

    /// Number of inducing inputs m.
    pub fn m(&self) -> usize {
        self.z.nrows()
    }

    /// Dimension d' of the standardized domain.
    pub fn d_latent(&self) -> usize {
        self.z.ncols()
    }

    /// `Z [m, d']`.
    pub fn z(&self) -> MatRef<'_, f64> {
        self.z.as_ref()
    }

    /// `Zᵀ` as a `[d', m]` row-major slice (dimension-major), for the hot loops.
    pub fn z_dim_major(&self) -> &[f64] {
        &self.zt
    }

    /// The jitter ε that K carries.
    pub fn jitter(&self) -> f64 {
        self.jitter
    }

    /// `K = k_uu(Z,Z) + εI [m, m]`.
    pub fn k(&self) -> MatRef<'_, f64> {
        self.k.as_ref()
    }

    /// The Cholesky factor of K.
    pub fn chol_k(&self) -> &Cholesky {
        &self.chol_k
    }

    /// `K⁻¹ [m, m]` (by a Cholesky solve, symmetrized; needed for R-form and B in spec §5).
    pub fn k_inv(&self) -> MatRef<'_, f64> {
        self.k_inv.as_ref()
    }

    /// The seed of the shared initial q(W) (spec §6).
    pub fn init_seed(&self) -> u64 {
        self.init_seed
    }

    /// The fingerprint every message carries.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// The shared initial q(W) for agents of input dimension `d` (spec §6, revised):
    /// `μ_ij ~ N(0, 0.25/d)` from the vocabulary's seed (one stream per d), `σ_ij = 0.1`,
    /// `σ_s = 1`, `σ_n = 0.5`. Every agent with the same d gets the same q(W).
    pub fn initial_projection(&self, d: usize) -> Projection {
        let mut rng = Rng::new(self.init_seed, 0xC0FF_EE00 ^ d as u64);
        let sd = (0.25 / d.max(1) as f64).sqrt();
        let mu = Mat::from_fn(self.d_latent(), d, |_, _| 0.0);
        let mut mu = mu;
        for i in 0..self.d_latent() {
            for j in 0..d {
                mu[(i, j)] = sd * rng.normal();
            }
        }
        Projection::new(
            mu,
            Mat::from_fn(self.d_latent(), d, |_, _| 0.1f64.ln()),
            0.0,
            0.5f64.ln(),
        )
    }

    /// Shares this vocabulary.
    pub fn into_shared(self) -> Arc<Self> {
        Arc::new(self)
    }
}

fn fingerprint_of(z: MatRef<'_, f64>, jitter: f64, init_seed: u64) -> Fingerprint {
    let mut h = Sha256::new();
    h.update(b"coolgp-vocabulary");
    h.update(FORMAT_VERSION.to_le_bytes());
    h.update(b"kernel:se-unit");
    h.update((z.nrows() as u64).to_le_bytes());
    h.update((z.ncols() as u64).to_le_bytes());
    h.update(jitter.to_bits().to_le_bytes());
    for j in 0..z.nrows() {
        for i in 0..z.ncols() {
            h.update(z[(j, i)].to_bits().to_le_bytes());
        }
    }
    h.update(init_seed.to_le_bytes());
    Fingerprint(h.finalize().into())
}

/// Lloyd's k-means on `n` points of dimension `d` (row-major), k-means++ seeding, fixed
/// iteration count: deterministic for a given RNG state. Returns `k` centres, row-major.
///
/// # Errors
/// [`Error::InvalidConfig`] for `d = 0`, `k = 0` or no points; [`Error::DimensionMismatch`]
/// when `pts.len()` is not a multiple of `d`; [`Error::NonFinite`] for NaN or infinite points.
pub fn kmeans(pts: &[f64], d: usize, k: usize, iters: usize, rng: &mut Rng) -> Result<Vec<f64>> {
    if d == 0 || k == 0 {
        return Err(Error::InvalidConfig(format!(
            "k-means needs d > 0 and k > 0, got d = {d}, k = {k}"
        )));
    }
    if !pts.len().is_multiple_of(d) {
        return Err(Error::DimensionMismatch {
            what: "k-means points (a multiple of d)",
            expected: pts.len().next_multiple_of(d),
            found: pts.len(),
        });
    }
    let n = pts.len() / d;
    if n == 0 {
        return Err(Error::InvalidConfig("k-means on no points".into()));
    }
    ensure_finite("k-means points", pts)?;
    let p = |i: usize| &pts[i * d..(i + 1) * d];
    let dist = |a: &[f64], b: &[f64]| crate::model::kernel::sqdist(a, b);
    let mut centres = Vec::with_capacity(k * d);
    centres.extend_from_slice(p(rng.below(n)));
    let mut best = vec![f64::INFINITY; n];
    while centres.len() < k * d {
        let last = &centres[centres.len() - d..].to_vec();
        for (i, b) in best.iter_mut().enumerate() {
            *b = b.min(dist(p(i), last));
        }
        let total: f64 = best.iter().sum();
        let pick = if total > 0.0 {
            let mut t = rng.uniform() * total;
            let mut idx = n - 1;
            for (i, b) in best.iter().enumerate() {
                if t < *b {
                    idx = i;
                    break;
                }
                t -= b;
            }
            idx
        } else {
            rng.below(n)
        };
        centres.extend_from_slice(p(pick));
    }
    let mut assign = vec![0usize; n];
    for _ in 0..iters {
        for (i, a) in assign.iter_mut().enumerate() {
            let mut bi = 0;
            let mut bd = f64::INFINITY;
            for c in 0..k {
                let dd = dist(p(i), &centres[c * d..(c + 1) * d]);
                if dd < bd {
                    bd = dd;
                    bi = c;
                }
            }
            *a = bi;
        }
        let mut sums = vec![0.0; k * d];
        let mut counts = vec![0usize; k];
        for (i, &a) in assign.iter().enumerate() {
            counts[a] += 1;
            for t in 0..d {
                sums[a * d + t] += pts[i * d + t];
            }
        }
        for c in 0..k {
            if counts[c] > 0 {
                for t in 0..d {
                    centres[c * d + t] = sums[c * d + t] / counts[c] as f64;
                }
            }
        }
    }
    Ok(centres)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kmeans_on_bad_input_is_an_error_not_a_panic() {
        let mut rng = Rng::new(1, 2);
        assert!(matches!(
            kmeans(&[], 2, 3, 5, &mut rng),
            Err(Error::InvalidConfig(_))
        ));
        assert!(matches!(
            kmeans(&[1.0, 2.0], 0, 1, 5, &mut rng),
            Err(Error::InvalidConfig(_))
        ));
        assert!(matches!(
            kmeans(&[1.0, 2.0, 3.0], 2, 1, 5, &mut rng),
            Err(Error::DimensionMismatch { found: 3, .. })
        ));
        assert!(matches!(
            kmeans(&[1.0, f64::NAN], 2, 1, 5, &mut rng),
            Err(Error::NonFinite { index: 1, .. })
        ));
        // Valid input still works: two clusters, two centres.
        let c = kmeans(&[0.0, 0.1, 10.0, 10.1], 1, 2, 5, &mut rng).expect("kmeans");
        let mut c = c;
        c.sort_by(f64::total_cmp);
        assert_eq!(c, vec![0.05, 10.05]);
    }

    #[test]
    fn default_design_is_deterministic_and_factors() {
        let a = Vocabulary::default_design(20, 3, 11).expect("design");
        let b = Vocabulary::default_design(20, 3, 11).expect("design");
        let c = Vocabulary::default_design(20, 3, 12).expect("design");
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_ne!(a.fingerprint(), c.fingerprint());
        assert_eq!(a.jitter(), DEFAULT_JITTER);
        assert_eq!(a.m(), 20);
        assert_eq!(a.d_latent(), 3);
    }

    #[test]
    fn duplicate_inducing_inputs_are_singular_without_jitter_and_factor_with_it() {
        // Reference: spec §9 (jitter ε on K, part of the vocabulary and its fingerprint).
        // Two identical rows: K = [[1, 1], [1, 1]] (plus a third point) is singular. A jitter
        // lost to rounding (1 + 1e-300 = 1) leaves it singular, and the exact jitter tried is
        // reported; the schedule's first step, 1e-6, makes it positive definite, and that is
        // the jitter the vocabulary keeps (no needless escalation), on K's diagonal and in the
        // fingerprint.
        let z = Mat::from_fn(3, 1, |i, _| if i < 2 { 0.0 } else { 1.0 });
        assert_eq!(
            Vocabulary::with_jitter(z.clone(), 1e-300, 0).map(|v| v.jitter()),
            Err(Error::NotPositiveDefinite {
                what: "K",
                jitter_tried: 1e-300
            })
        );
        let v = Vocabulary::new(z.clone(), 0).expect("jitter makes it PD");
        assert_eq!(v.jitter(), DEFAULT_JITTER);
        for j in 0..3 {
            assert_eq!(v.k()[(j, j)], 1.0 + DEFAULT_JITTER);
        }
        assert_eq!(v.k()[(0, 1)], 1.0);
        let bigger = Vocabulary::with_jitter(z.clone(), 10.0 * DEFAULT_JITTER, 0).expect("PD");
        assert_ne!(v.fingerprint(), bigger.fingerprint());
        assert!(matches!(
            Vocabulary::with_jitter(z, 0.0, 0),
            Err(Error::InvalidConfig(_))
        ));
        let nan = Mat::from_fn(2, 1, |i, _| if i == 0 { f64::NAN } else { 0.0 });
        assert!(matches!(
            Vocabulary::new(nan, 0),
            Err(Error::NonFinite { .. })
        ));
    }

    #[test]
    fn initial_projection_is_shared_per_dimension() {
        let v = Vocabulary::default_design(5, 2, 3).expect("design");
        let p1 = v.initial_projection(4);
        let p2 = v.initial_projection(4);
        assert_eq!(p1, p2);
        assert_eq!(p1.d(), 4);
        assert!((p1.sigma(0, 0) - 0.1).abs() < 1e-15);
    }
}
