//! The paper's importance-sampled online estimator (Eq. 3.7) with summed caches (spec §4b).
//!
//! `k` prior samples `W_t ~ N(0,1)^{d'×d}` are drawn once from a seed. Each block adds, per
//! sample, `Ā_t += K̄⁽ᵗ⁾ᵀK̄⁽ᵗ⁾ [m, m]` and `b̄_t += K̄⁽ᵗ⁾ᵀy [m]` with the unit-scale
//! `K̄⁽ᵗ⁾_nj = exp(−½‖W_t x_n − z_j‖²)`: memory `k(m² + m)`, constant in the data. Under the
//! current q(W) the weights are `log w_t = Σ_ij [−log σ_ij − (W_t,ij − μ_ij)²/(2σ_ij²) + W_t,ij²/2]`
//! and `Ê = (σ_s²/σ_n² Σ_t ω_t Ā_t, σ_s/σ_n² Σ_t ω_t b̄_t)`.
//!
//! **Warning (spec §4, §12.4):** the variance of these weights grows exponentially in `d·d'`;
//! for any learned q(W) in d ≥ 6 the unnormalized estimate is ≈ 0 (the agent forgets all data).
//! It is built for fidelity to the paper; [`crate::learn::UpdateMode::Frozen`] is the default.

use faer::{Mat, MatRef};

use crate::linalg::{mul, mul_add, symmetrize};
use crate::model::{Excess, Projection, Vocabulary};
use crate::rng::Rng;
use crate::simd::{dispatch, exp};

/// How the importance weights are normalized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IsNormalization {
    /// The paper's `ω_t = w_t / k` (unbiased, degenerate in realistic dimensions).
    Unnormalized,
    /// `ω_t = w_t / Σ_s w_s` (consistent, biased).
    SelfNormalized,
}

impl IsNormalization {
    /// The command-line name: `unnormalized` or `self-normalized`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Unnormalized => "unnormalized",
            Self::SelfNormalized => "self-normalized",
        }
    }
}

/// Diagnostics of one recompute of the estimate: always reported (spec §4b, §9).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IsDiagnostics {
    /// Effective sample size `exp(2 lse(log w) − lse(2 log w))`.
    pub ess: f64,
    /// `max_t log w_t`.
    pub max_log_w: f64,
    /// Number of samples k.
    pub samples: usize,
    /// Weights ω_t that overflowed to infinity (unnormalized weights with `log w_t` above
    /// ≈ 709 + ln k): their samples are left out of Ê, which can turn Ê into 0. Any overflow
    /// also sets `degenerate`.
    pub overflowed: usize,
    /// Flagged when `max log w > 700`, `ESS < 2` or a weight overflowed (spec §9).
    pub degenerate: bool,
}

/// The per-sample summed caches.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportanceCache {
    /// The prior samples `W_t [d', d]`.
    pub samples: Vec<Mat<f64>>,
    /// `Ā_t [m, m]`, summed over blocks.
    pub a: Vec<Mat<f64>>,
    /// `b̄_t [m]`, summed over blocks.
    pub b: Vec<Vec<f64>>,
    /// Normalization of the weights.
    pub normalization: IsNormalization,
}

dispatch! {
    /// `out_n = exp(−½ Σ_i (v_i[n] − z_ji)²)` for one inducing input j (`zt` is `[d', m]`).
    fn unit_kernel_column(v: &[&[f64]], zt: &[f64], m: usize, j: usize, out: &mut [f64]) {
        out.fill(0.0);
        for (i, vi) in v.iter().enumerate() {
            let z = zt[i * m + j];
            for (o, &x) in out.iter_mut().zip(vi.iter()) {
                let t = x - z;
                *o += t * t;
            }
        }
        for o in out.iter_mut() {
            *o = exp(-0.5 * *o);
        }
    }
}

fn logsumexp(v: impl Iterator<Item = f64> + Clone) -> f64 {
    let c = v.clone().fold(f64::NEG_INFINITY, f64::max);
    if !c.is_finite() {
        return c;
    }
    c + v.map(|x| (x - c).exp()).sum::<f64>().ln()
}

impl ImportanceCache {
    /// Draws `k` samples `W_t [d', d]` from `N(0, 1)` with `seed` and empty caches.
    pub fn new(
        vocab: &Vocabulary,
        d: usize,
        k: usize,
        seed: u64,
        normalization: IsNormalization,
    ) -> Self {
        let mut rng = Rng::new(seed, 0x1_5A3B);
        let dz = vocab.d_latent();
        let samples = (0..k)
            .map(|_| {
                let mut w = Mat::zeros(dz, d);
                for j in 0..d {
                    for i in 0..dz {
                        w[(i, j)] = rng.normal();
                    }
                }
                w
            })
            .collect();
        Self::with_samples(vocab, samples, normalization)
    }

    /// Empty caches for explicitly given samples.
    pub fn with_samples(
        vocab: &Vocabulary,
        samples: Vec<Mat<f64>>,
        normalization: IsNormalization,
    ) -> Self {
        let m = vocab.m();
        let k = samples.len();
        Self {
            samples,
            a: (0..k).map(|_| Mat::zeros(m, m)).collect(),
            b: (0..k).map(|_| vec![0.0; m]).collect(),
            normalization,
        }
    }

    /// Adds one block `(x [n, d], y [n])` to every sample's sums. Cost O(k n m (d' + m)).
    pub fn absorb(&mut self, vocab: &Vocabulary, x: MatRef<'_, f64>, y: &[f64]) {
        self.absorb_weighted(vocab, x, y, None);
    }

    /// As [`ImportanceCache::absorb`] with row weights `w [n]` (the robust likelihood,
    /// [`crate::learn::robust`]; `None`: every weight 1): per sample
    /// `Ā_t += K̄ᵀ diag(w) K̄` and `b̄_t += K̄ᵀ (w∘y)`, formed as `(√w∘K̄)ᵀ(√w∘K̄)` and
    /// `(√w∘K̄)ᵀ(√w∘y)` so Ā_t stays exactly symmetric. The weights are folded into the sums
    /// once, when the block arrives: every later re-weighting of the samples under a new
    /// q(W) ([`ImportanceCache::excess`]) uses them as they were. Weights 1 give the
    /// unweighted sums bit for bit (`√1 = 1`, `1·v = v`).
    ///
    /// # Panics
    /// If `w` does not hold one weight per row (our own misuse).
    #[track_caller]
    pub fn absorb_weighted(
        &mut self,
        vocab: &Vocabulary,
        x: MatRef<'_, f64>,
        y: &[f64],
        w: Option<&[f64]>,
    ) {
        let (n, m) = (x.nrows(), vocab.m());
        assert!(w.is_none_or(|w| w.len() == n), "one weight per row");
        let root: Option<Vec<f64>> = w.map(|w| w.iter().map(|v| v.sqrt()).collect());
        let ys: Vec<f64> = match &root {
            Some(r) => y.iter().zip(r).map(|(y, r)| r * y).collect(),
            None => y.to_vec(),
        };
        let zt = vocab.z_dim_major();
        let mut kbar = Mat::<f64>::zeros(n, m);
        for ((w, a), b) in self
            .samples
            .iter()
            .zip(self.a.iter_mut())
            .zip(self.b.iter_mut())
        {
            // V = X W_tᵀ [n, d'], then K̄_nj = exp(−½‖v_n − z_j‖²), one column j at a time.
            let v = mul(x, w.transpose());
            let vcols: Vec<&[f64]> = (0..v.ncols()).map(|i| v.col_as_slice(i)).collect();
            for j in 0..m {
                let col = kbar.col_as_slice_mut(j);
                unit_kernel_column(&vcols, zt, m, j, col);
                if let Some(r) = &root {
                    for (k, r) in col.iter_mut().zip(r) {
                        *k *= r;
                    }
                }
            }
            mul_add(a.as_mut(), kbar.transpose(), kbar.as_ref(), 1.0);
            symmetrize(a);
            for (j, bj) in b.iter_mut().enumerate() {
                *bj += crate::linalg::dot(kbar.col_as_slice(j), &ys);
            }
        }
    }

    /// `log w_t = log q(W_t) − log p(W_t)` under `proj` (log-space, spec §4b).
    pub fn log_weights(&self, proj: &Projection) -> Vec<f64> {
        let (mu, ls, s2) = (proj.mu(), proj.log_sigma(), proj.sigma2());
        self.samples
            .iter()
            .map(|w| {
                let mut lw = 0.0;
                for j in 0..w.ncols() {
                    for i in 0..w.nrows() {
                        let wij = w[(i, j)];
                        let dlt = wij - mu[(i, j)];
                        lw += -ls[(i, j)] - dlt * dlt / (2.0 * s2[(i, j)]) + 0.5 * wij * wij;
                    }
                }
                lw
            })
            .collect()
    }

    /// The normalized weights ω_t and the diagnostics.
    pub fn weights(&self, proj: &Projection) -> (Vec<f64>, IsDiagnostics) {
        let lw = self.log_weights(proj);
        let k = lw.len();
        let lse = logsumexp(lw.iter().copied());
        let lse2 = logsumexp(lw.iter().map(|v| 2.0 * v));
        let ess = (2.0 * lse - lse2).exp();
        let max_log_w = lw.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let omega: Vec<f64> = match self.normalization {
            IsNormalization::Unnormalized => lw
                .iter()
                .map(|v| (v - max_log_w).exp() * max_log_w.exp() / k as f64)
                .collect(),
            IsNormalization::SelfNormalized => lw.iter().map(|v| (v - lse).exp()).collect(),
        };
        let overflowed = omega.iter().filter(|w| !w.is_finite()).count();
        let diag = IsDiagnostics {
            ess,
            max_log_w,
            samples: k,
            overflowed,
            degenerate: max_log_w > 700.0 || ess < 2.0 || !ess.is_finite() || overflowed > 0,
        };
        (omega, diag)
    }

    /// The estimated data part `Ê` under `proj` with its diagnostics. Cost O(k m²). Weights
    /// that overflowed (or are zero) are skipped and counted in
    /// [`IsDiagnostics::overflowed`]: the driver sees them in
    /// [`crate::Event::ImportanceWeights`].
    pub fn excess(&self, vocab: &Vocabulary, proj: &Projection) -> (Excess, IsDiagnostics) {
        let (omega, diag) = self.weights(proj);
        let m = vocab.m();
        let mut c = Mat::<f64>::zeros(m, m);
        let mut cy = vec![0.0; m];
        for ((w, a), b) in omega.iter().zip(&self.a).zip(&self.b) {
            if *w == 0.0 || !w.is_finite() {
                continue;
            }
            for j in 0..m {
                for i in 0..m {
                    c[(i, j)] += w * a[(i, j)];
                }
                cy[j] += w * b[j];
            }
        }
        (
            Excess::from_unit_parts(&c, &cy, proj.sigma_s(), proj.sigma_n()),
            diag,
        )
    }

    /// `E_p[w²] = Π_ij exp(μ²/(2−σ²)) / (σ √(2−σ²))`, infinite if any `σ_ij ≥ √2` (spec §4);
    /// `ESS ≈ k / E_p[w²]` for large k. Returned as a natural log.
    pub fn log_second_moment(proj: &Projection) -> f64 {
        let (mu, s2) = (proj.mu(), proj.sigma2());
        let mut acc = 0.0;
        for j in 0..mu.ncols() {
            for i in 0..mu.nrows() {
                let s = s2[(i, j)];
                if s >= 2.0 {
                    return f64::INFINITY;
                }
                acc += mu[(i, j)] * mu[(i, j)] / (2.0 - s) - 0.5 * s.ln() - 0.5 * (2.0 - s).ln();
            }
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflowing_weights_are_counted_not_silently_skipped() {
        // One sample W_t = 0 [1, 2] under q(W) = N(0, e^−720 I): log w_t = Σ_ij −log σ_ij =
        // 2·360 = 720 > ln(f64::MAX) ≈ 709.8, so the unnormalized ω_t overflows, the sample is
        // left out and Ê = 0. The diagnostics must say so (spec §4b, §9).
        let vocab = Vocabulary::default_design(4, 1, 3).expect("design");
        let zero = Mat::zeros(1, 2);
        let mut cache = ImportanceCache::with_samples(
            &vocab,
            vec![zero.clone()],
            IsNormalization::Unnormalized,
        );
        let x = Mat::from_fn(3, 2, |i, j| 0.1 * (i + j) as f64);
        cache.absorb(&vocab, x.as_ref(), &[1.0, 0.5, -0.2]);
        let proj = Projection::new(zero.clone(), Mat::from_fn(1, 2, |_, _| -360.0), 0.0, -1.0);
        let (e, diag) = cache.excess(&vocab, &proj);
        assert_eq!(diag.overflowed, 1);
        assert!(diag.degenerate);
        assert!(
            e.d2.iter().all(|v| *v == 0.0),
            "the overflowed sample is left out"
        );
        // Control: a moderate q(W) keeps the weight finite, counts nothing and uses the data.
        let proj = Projection::new(zero, Mat::from_fn(1, 2, |_, _| -1.0), 0.0, -1.0);
        let (e, diag) = cache.excess(&vocab, &proj);
        assert_eq!(diag.overflowed, 0);
        assert!(e.d2.iter().any(|v| *v != 0.0));
    }
}
