//! The fit of the learned residual kernel: maximizes the Gaussian log marginal likelihood of the
//! memory's residuals `r_B = y_B − μ_g(B)` over `[ln σ_r, ln σ_rn, ln ℓ_1..d]` by L-BFGS with a
//! backtracking line search (deterministic), at most [`FIT_EVALS`] evaluations ([`WARM_EVALS`]
//! after the first fit) on at most
//! [`FIT_ROWS`] evenly spaced memory rows: O(FIT_EVALS · FIT_ROWS³) per fit, which the agent
//! runs when the memory has doubled and then every `capacity` new rows.

use super::kernel::{ResidualKernel, LOG_BOUNDS};

/// Most memory rows a fit looks at (evenly spaced over the memory).
pub const FIT_ROWS: usize = 128;

/// Most evaluations of the log marginal likelihood and its gradient at the first fit.
pub const FIT_EVALS: usize = 30;

/// Most evaluations at a later fit, which starts from the previous optimum.
pub const WARM_EVALS: usize = 12;

/// Pairs kept by L-BFGS.
const HISTORY: usize = 6;

/// Largest change of any log parameter in one step.
const MAX_STEP: f64 = 2.0;

/// The rows a fit uses: all of `n`, or [`FIT_ROWS`] evenly spaced.
pub fn fit_rows(n: usize) -> Vec<usize> {
    if n <= FIT_ROWS {
        (0..n).collect()
    } else {
        (0..FIT_ROWS).map(|i| i * n / FIT_ROWS).collect()
    }
}

/// Lengthscales tried at the first fit, as multiples of each input's standard deviation.
const FIRST_SCALES: [f64; 4] = [0.1, 0.3, 1.0, 3.0];

/// The fitted parameters of a learned kernel from raw rows `x [n·d]` and residuals `r [n]`,
/// from the kernel's parameters or, at the first fit (`first`), from `σ_r² = σ_rn² = var(r)/2`
/// and the best (largest likelihood) of the lengthscales `c · sd(x_k)`, `c` in
/// [`FIRST_SCALES`]. `None` when the start cannot be evaluated.
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
        p[0] = half.clamp(LOG_BOUNDS.0, LOG_BOUNDS.1);
        p[1] = p[0];
        p = first_start(kernel, p, x, r);
    }
    // Minimize −L/n.
    let eval = |p: &[f64]| -> Option<(f64, Vec<f64>)> {
        let (l, g) = kernel.log_marginal(p, x, r).ok()?;
        let f = -l / n as f64;
        let g: Vec<f64> = g.iter().map(|v| -v / n as f64).collect();
        (f.is_finite() && g.iter().all(|v| v.is_finite())).then_some((f, g))
    };
    let (mut f, mut g) = eval(&p)?;
    let mut evals = 1;
    let max_evals = if first { FIT_EVALS } else { WARM_EVALS };
    let mut hist: Vec<(Vec<f64>, Vec<f64>)> = Vec::new();
    while evals < max_evals {
        let mut dir = direction(&g, &hist);
        if dot(&dir, &g) >= 0.0 {
            dir = g.iter().map(|v| -v).collect();
            hist.clear();
        }
        let big = dir.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        let mut t = if big > MAX_STEP { MAX_STEP / big } else { 1.0 };
        let slope = dot(&dir, &g);
        let mut next = None;
        while evals < max_evals {
            let q: Vec<f64> = p
                .iter()
                .zip(&dir)
                .map(|(a, b)| (a + t * b).clamp(LOG_BOUNDS.0, LOG_BOUNDS.1))
                .collect();
            evals += 1;
            match eval(&q) {
                Some((fq, gq)) if fq <= f + 1e-4 * t * slope => {
                    next = Some((q, fq, gq));
                    break;
                }
                _ => t *= 0.5,
            }
        }
        let Some((q, fq, gq)) = next else {
            break;
        };
        let s: Vec<f64> = q.iter().zip(&p).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = gq.iter().zip(&g).map(|(a, b)| a - b).collect();
        if dot(&s, &y) > 1e-12 {
            if hist.len() == HISTORY {
                hist.remove(0);
            }
            hist.push((s, y));
        }
        let done = (f - fq).abs() <= 1e-7 * f.abs().max(1.0);
        (p, f, g) = (q, fq, gq);
        if done || g.iter().all(|v| v.abs() < 1e-6) {
            break;
        }
    }
    Some(p)
}

/// Spread (standard deviation) below which an input does not vary in the memory.
pub const FLAT_SPREAD: f64 = 1e-6;

/// The first fit's start: `p` with the lengthscales `c · sd(x_k)` of the best `c` in
/// [`FIRST_SCALES`] (`p` itself if none can be evaluated).
///
/// An input the memory does not vary in (`sd(x_k) <` [`FLAT_SPREAD`]: a station's own
/// coordinates) leaves its lengthscale unidentified — the likelihood and its gradient do not
/// depend on it, so the fit never moves it. It starts (and stays) at 1, the unit of the
/// standardized inputs, the fleet's spread: the agent's knowledge then reaches about one
/// standard deviation of the fleet's inputs along it, instead of nowhere (a lengthscale of
/// `c · 1e-6`, which made every other station's query a prior answer).
fn first_start(kernel: &ResidualKernel, p: Vec<f64>, x: &[f64], r: &[f64]) -> Vec<f64> {
    let (n, d) = (r.len(), p.len() - 2);
    let sd: Vec<Option<f64>> = (0..d)
        .map(|k| {
            let mean = (0..n).map(|i| x[i * d + k]).sum::<f64>() / n as f64;
            let var = (0..n).map(|i| (x[i * d + k] - mean).powi(2)).sum::<f64>() / n as f64;
            (var.sqrt() >= FLAT_SPREAD).then(|| var.sqrt())
        })
        .collect();
    let mut best: Option<(f64, Vec<f64>)> = None;
    for c in FIRST_SCALES {
        let mut q = p.clone();
        for (k, s) in sd.iter().enumerate() {
            let l = s.map_or(1.0, |s| c * s);
            q[2 + k] = l.ln().clamp(LOG_BOUNDS.0, LOG_BOUNDS.1);
        }
        if let Ok((l, _)) = kernel.log_marginal(&q, x, r) {
            if l.is_finite() && best.as_ref().is_none_or(|b| l > b.0) {
                best = Some((l, q));
            }
        }
    }
    best.map_or(p, |b| b.1)
}

/// The L-BFGS direction `−H g` by the two-loop recursion over the pairs `(s, y)`, oldest first.
fn direction(g: &[f64], hist: &[(Vec<f64>, Vec<f64>)]) -> Vec<f64> {
    let mut q = g.to_vec();
    let mut alpha = vec![0.0; hist.len()];
    for (k, (s, y)) in hist.iter().enumerate().rev() {
        let a = dot(s, &q) / dot(y, s);
        alpha[k] = a;
        q.iter_mut().zip(y).for_each(|(v, yi)| *v -= a * yi);
    }
    if let Some((s, y)) = hist.last() {
        let gamma = dot(s, y) / dot(y, y);
        q.iter_mut().for_each(|v| *v *= gamma);
    }
    for (k, (s, y)) in hist.iter().enumerate() {
        let b = dot(y, &q) / dot(y, s);
        q.iter_mut()
            .zip(s)
            .for_each(|(v, si)| *v += (alpha[k] - b) * si);
    }
    q.iter().map(|v| -v).collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    crate::linalg::dot(a, b)
}
