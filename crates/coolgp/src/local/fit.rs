//! The fit of the learned residual kernel: maximizes the Gaussian log marginal likelihood of the
//! memory's residuals `r_B = y_B − μ_g(B)` over `[ln σ_r, ln σ_rn, ln ℓ_1..d]` by a bounded
//! number of Adam steps (deterministic), on at most [`FIT_ROWS`] evenly spaced memory rows.

use super::kernel::{ResidualKernel, LOG_BOUNDS};

/// Most memory rows a fit looks at (evenly spaced over the memory). Fewer were measured
/// (docs/LOCAL.md §8): 192 rows cost +0.1% (wind) and +0.4% (air) at B = 500 but +1.7% on wind
/// at B = 2,000; 128 rows +1.0% on air.
pub const FIT_ROWS: usize = 256;

/// Adam steps of the first fit (from the initial kernel).
pub const FIT_STEPS: usize = 60;

/// Adam steps of a refit, warm-started from the kernel's fitted parameters. As many as the
/// first fit: the early stop is the fit's regularizer (docs/LOCAL.md §4), and fewer steps
/// (40; 20, also at step size 0.15) cost 0.7–1.2% RMSE on the air stations (docs/LOCAL.md §8).
pub const WARM_STEPS: usize = 60;

/// Adam's step size on the log parameters.
const LEARNING_RATE: f64 = 0.05;

/// The rows a fit uses: all of `n`, or [`FIT_ROWS`] evenly spaced.
pub fn fit_rows(n: usize) -> Vec<usize> {
    if n <= FIT_ROWS {
        (0..n).collect()
    } else {
        (0..FIT_ROWS).map(|i| i * n / FIT_ROWS).collect()
    }
}

/// The fitted parameters of a learned kernel from raw rows `x [n·d]` and residuals `r [n]`:
/// the best (largest log marginal likelihood) of [`WARM_STEPS`] Adam steps from the kernel's
/// parameters, or, at the first fit (`first`), of [`FIT_STEPS`] steps from
/// `σ_r² = σ_rn² = var(r)/2` and the kernel's lengthscales. `None` when no step could be
/// evaluated.
pub fn fit_learned(kernel: &ResidualKernel, x: &[f64], r: &[f64], first: bool) -> Option<Vec<f64>> {
    let n = r.len();
    if n < 2 {
        return None;
    }
    let mut p = kernel.params().to_vec();
    if first {
        let mean = r.iter().sum::<f64>() / n as f64;
        let var = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
        let half = 0.5 * (0.5 * var).max(1e-12).ln();
        p[0] = half;
        p[1] = half;
    }
    let steps = if first { FIT_STEPS } else { WARM_STEPS };
    ascend(p, steps, n, |p| kernel.log_marginal(p, x, r).ok())
}

/// The best point (largest objective) of `steps` Adam steps of ascent on `objective(p) / n`
/// from `p` (log parameters, each kept in [`LOG_BOUNDS`], step size 0.05): the optimizer of
/// every residual-kernel fit, exact ([`fit_learned`]) or composite
/// ([`super::composite`]). `objective` returns the value and its gradient, `None` where it
/// cannot be evaluated (the ascent stops there). `None` when no step could be evaluated.
pub fn ascend(
    mut p: Vec<f64>,
    steps: usize,
    n: usize,
    objective: impl Fn(&[f64]) -> Option<(f64, Vec<f64>)>,
) -> Option<Vec<f64>> {
    let (mut m1, mut m2) = (vec![0.0; p.len()], vec![0.0; p.len()]);
    let mut best: Option<(f64, Vec<f64>)> = None;
    let scale = n.max(1) as f64;
    for t in 1..=steps {
        let Some((lml, g)) = objective(&p) else {
            break;
        };
        if !lml.is_finite() || g.iter().any(|v| !v.is_finite()) {
            break;
        }
        if best.as_ref().is_none_or(|b| lml > b.0) {
            best = Some((lml, p.clone()));
        }
        let (b1, b2) = (0.9f64, 0.999f64);
        for i in 0..p.len() {
            // Ascent on objective/n.
            let gi = g[i] / scale;
            m1[i] = b1 * m1[i] + (1.0 - b1) * gi;
            m2[i] = b2 * m2[i] + (1.0 - b2) * gi * gi;
            let mh = m1[i] / (1.0 - b1.powi(t as i32));
            let vh = m2[i] / (1.0 - b2.powi(t as i32));
            p[i] =
                (p[i] + LEARNING_RATE * mh / (vh.sqrt() + 1e-8)).clamp(LOG_BOUNDS.0, LOG_BOUNDS.1);
        }
    }
    best.map(|b| b.1)
}
