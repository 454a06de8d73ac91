//! The fleet-wide fit of the learned residual kernel (docs/LOCAL.md §9): every agent offers a
//! small, deterministic sample of its memory — raw rows and their residuals against its global
//! model ([`crate::Agent::local_fit_sample`]) — the samples are pooled, the kernel is fitted once
//! on the pool by marginal likelihood ([`fit_pooled`], the per-agent fit's Adam steps of
//! [`super::fit::fit_learned`]), and every agent takes the result
//! ([`crate::Agent::set_local_kernel_params`]).
//!
//! Why pooled: an input an agent's memory does not vary in (a station's coordinates) leaves the
//! agent's likelihood flat in that input's lengthscale, and so does the sum of the agents'
//! likelihoods (each term is flat). Only a likelihood with rows of *different* agents in one
//! covariance sees how residuals at different places co-vary.

use super::fit;
use super::kernel::ResidualKernel;
use super::ResidualKind;
use crate::error::{ensure_dim, ensure_finite, Result};

/// Rows of the pooled sample in all, spread evenly over the agents ([`shares`]): the default of
/// [`PoolOptions::rows`].
pub const POOL_ROWS: usize = 512;

/// How the fleet fits the pooled kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolOptions {
    /// Pooled rows in all (each agent's share: [`shares`]).
    pub rows: usize,
    /// Rounds of [`super::fit::fit_learned`] per start, each from the previous round's best
    /// (so `rounds · FIT_STEPS` Adam steps).
    pub rounds: usize,
    /// Factors on the kernel's lengthscales to start from (at a first fit); each start is
    /// fitted and the largest log marginal likelihood kept.
    pub starts: Vec<f64>,
    /// Each fit after the first starts from the previous pooled parameters (`true`), or every
    /// fit is a first fit from the agents' initial kernel (`false`), so that the bounded
    /// number of Adam steps stays the regularizer it is for one fit (§4 of docs/LOCAL.md).
    pub warm_start: bool,
}

impl Default for PoolOptions {
    fn default() -> Self {
        Self {
            rows: POOL_ROWS,
            rounds: 1,
            starts: vec![1.0],
            warm_start: true,
        }
    }
}

/// One agent's part of the pooled sample: raw rows `x [n, d]` (row-major) and their residuals
/// `r = y − μ_g(x) [n]` against the agent's global model.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FitSample {
    d: usize,
    x: Vec<f64>,
    r: Vec<f64>,
}

impl FitSample {
    /// A sample of `r.len()` rows of width `d`.
    ///
    /// # Errors
    /// [`crate::Error::DimensionMismatch`] if `x` does not hold `r.len()` rows of `d`,
    /// [`crate::Error::NonFinite`] for a non-finite value.
    pub fn new(d: usize, x: Vec<f64>, r: Vec<f64>) -> Result<Self> {
        ensure_dim("local fit sample rows", r.len() * d, x.len())?;
        ensure_finite("local fit sample rows", &x)?;
        ensure_finite("local fit sample residuals", &r)?;
        Ok(Self { d, x, r })
    }

    /// Rows in the sample.
    pub fn len(&self) -> usize {
        self.r.len()
    }

    /// True with no row.
    pub fn is_empty(&self) -> bool {
        self.r.is_empty()
    }

    /// The rows' width d.
    pub fn d(&self) -> usize {
        self.d
    }

    /// The rows, `[n, d]` row-major.
    pub fn x(&self) -> &[f64] {
        &self.x
    }

    /// The residuals, `[n]`.
    pub fn r(&self) -> &[f64] {
        &self.r
    }
}

/// Each of `agents` agents' share of a pooled sample of `total` rows:
/// `⌊total·(i+1)/agents⌋ − ⌊total·i/agents⌋` (they sum to `total`; with more agents than rows,
/// evenly spaced agents give one row each).
pub fn shares(total: usize, agents: usize) -> Vec<usize> {
    (0..agents)
        .map(|i| total * (i + 1) / agents - total * i / agents)
        .collect()
}

/// `k` of the indices `0..n`, evenly spaced (all of them when `k ≥ n`).
pub fn spaced(n: usize, k: usize) -> Vec<usize> {
    if k >= n {
        (0..n).collect()
    } else {
        (0..k).map(|i| i * n / k).collect()
    }
}

/// The learned kernel's parameters fitted on the pooled `samples` (concatenated in order; a
/// sample of another width than the kernel's is left out): for each start of
/// `opts.starts` (at the `first` fit; else the kernel's parameters alone), `opts.rounds` rounds
/// of [`super::fit::fit_learned`], and of the starts the one with the largest log marginal
/// likelihood. `None` for a kernel that is not learned, fewer than two rows, or no start that
/// could be evaluated. Deterministic: the same samples give the same parameters.
pub fn fit_pooled(
    kernel: &ResidualKernel,
    samples: &[FitSample],
    first: bool,
    opts: &PoolOptions,
) -> Option<Vec<f64>> {
    if kernel.kind() != ResidualKind::Learned {
        return None;
    }
    let d = kernel.params().len() - 2;
    let used = || samples.iter().filter(|s| s.d == d);
    let x: Vec<f64> = used().flat_map(|s| s.x.iter().copied()).collect();
    let r: Vec<f64> = used().flat_map(|s| s.r.iter().copied()).collect();
    let starts: &[f64] = if first { &opts.starts } else { &[1.0] };
    let mut best: Option<(f64, Vec<f64>)> = None;
    for &c in starts {
        let mut p = kernel.params().to_vec();
        if c != 1.0 {
            p[2..].iter_mut().for_each(|l| *l += c.ln());
        }
        let Some(p) = rounds(p, d, &x, &r, first, opts.rounds) else {
            continue;
        };
        if starts.len() == 1 {
            return Some(p);
        }
        let Ok((lml, _)) = kernel.log_marginal(&p, &x, &r) else {
            continue;
        };
        if best.as_ref().is_none_or(|b| lml > b.0) {
            best = Some((lml, p));
        }
    }
    best.map(|b| b.1)
}

/// `rounds` rounds of [`super::fit::fit_learned`] from the learned kernel with parameters `p`
/// (the first one `first`), each from the previous round's best; `None` if the first fails.
fn rounds(
    p: Vec<f64>,
    d: usize,
    x: &[f64],
    r: &[f64],
    first: bool,
    rounds: usize,
) -> Option<Vec<f64>> {
    let mut p = p;
    for k in 0..rounds.max(1) {
        let kernel = ResidualKernel::from_params(ResidualKind::Learned, p.clone(), d, 0).ok()?;
        match fit::fit_learned(&kernel, x, r, first && k == 0) {
            Some(q) => p = q,
            None if k == 0 => return None,
            None => break,
        }
    }
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_sum_to_the_total_and_differ_by_at_most_one() {
        for (total, agents) in [(512, 12), (512, 70), (512, 1000), (7, 3), (0, 4)] {
            let s = shares(total, agents);
            assert_eq!(s.len(), agents);
            assert_eq!(s.iter().sum::<usize>(), total);
            let (lo, hi) = (s.iter().min(), s.iter().max());
            assert!(hi.zip(lo).is_none_or(|(h, l)| h - l <= 1), "{s:?}");
        }
        assert_eq!(spaced(10, 4), vec![0, 2, 5, 7]);
        assert_eq!(spaced(3, 5), vec![0, 1, 2]);
    }
}
