//! The fleet's residual-kernel fit on neighbourhood groups, chosen among several starts by
//! held-out evidence (issue 28; docs/LOCAL.md §11).
//!
//! Candidates, each [`FIT_STEPS`] Adam steps of the composite likelihood
//! ([`composite::log_likelihood`]) on the fit groups:
//! - the warm chain's continuation (from the previous fleet kernel),
//! - a cold start (the agents' initial kernel),
//! - three starts whose lengthscales are, per input, the groups' own spacing (`short`: the
//!   median non-zero distance from an anchor to its group's rows), the inputs' spread
//!   (`long`: their standard deviation over the groups' rows) and the geometric mean of the
//!   two (`medium`); `σ_r² = σ_rn² = var(r)/2` for all three.
//!
//! Each is scored by the leave-one-out density of the *held-out* groups
//! ([`composite::loo_score`]; anchors of the same agents, disjoint from the fit anchors), and
//! the best is kept, the warm one unless beaten by [`GROUP_SWITCH_MARGIN`] nats a row. As in
//! the pooled fit, a choice whose held-out msr exceeds [`CALIBRATE_ABOVE`] is also tried with
//! `σ_r²`, `σ_rn²` times that msr.

use super::composite::{self, Groups};
use super::fit::{ascend, FIT_STEPS};
use super::kernel::LOG_BOUNDS;
use super::pool::{HeldOut, CALIBRATE_ABOVE, COLD_ABOVE};

/// Held-out log density per scored row by which a candidate must beat the warm chain's
/// continuation to replace it. Measured in docs/LOCAL.md §11.
pub const GROUP_SWITCH_MARGIN: f64 = 0.01;

/// A start of [`fit_grouped_selected`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// The previous fleet kernel.
    Warm,
    /// The agents' initial kernel.
    Cold,
    /// Lengthscales at the groups' spacing.
    Short,
    /// Between short and long.
    Medium,
    /// Lengthscales at the inputs' spread.
    Long,
    /// The chosen one with its variances times its held-out msr.
    Calibrated,
}

/// The outcome of [`fit_grouped_selected`].
#[derive(Clone, Debug, PartialEq)]
pub struct GroupedFit {
    /// The chosen parameters `[ln σ_r, ln σ_rn, ln ℓ_1..d]`.
    pub params: Vec<f64>,
    /// Which start they came from.
    pub chosen: Start,
    /// Every scored candidate, in the order scored.
    pub scores: Vec<(Start, HeldOut)>,
}

/// The fit chosen by held-out evidence (module doc). `warm`: the previous fleet kernel's
/// parameters, `initial`: the agents' initial ones (both `[ln σ_r, ln σ_rn, ln ℓ_1..d]`),
/// `fit` and `held` the fit and scored groups (of width `initial.len() − 2`). With `explore`
/// false and a warm start whose held-out msr is at most [`COLD_ABOVE`], the warm chain's
/// continuation alone is fitted (the other starts at the fusions the caller picks, as the
/// pooled fit's cold candidate: [`super::pool::cold_due`]). `None` when no candidate could be
/// fitted and scored. Deterministic.
pub fn fit_grouped_selected(
    warm: Option<&[f64]>,
    initial: &[f64],
    (fit, held): (&Groups, &Groups),
    explore: bool,
) -> Option<GroupedFit> {
    let d = initial.len().checked_sub(2)?;
    if fit.d() != d || held.d() != d || fit.is_empty() || held.is_empty() {
        return None;
    }
    let var = variance(fit.residuals());
    let half = 0.5 * (0.5 * var).max(1e-12).ln();
    let first = |mut p: Vec<f64>| {
        p[0] = half;
        p[1] = half;
        p
    };
    let (short, long) = spacing(fit);
    let with_len = |l: &[f64]| {
        let mut p = first(initial.to_vec());
        p[2..]
            .iter_mut()
            .zip(l)
            .for_each(|(v, l)| *v = l.max(1e-300).ln().clamp(LOG_BOUNDS.0, LOG_BOUNDS.1));
        p
    };
    let medium: Vec<f64> = short
        .iter()
        .zip(&long)
        .map(|(a, b)| (a * b).sqrt())
        .collect();
    let mut starts: Vec<(Start, Vec<f64>)> = Vec::new();
    if let Some(w) = warm.filter(|w| w.len() == initial.len()) {
        starts.push((Start::Warm, w.to_vec()));
    }
    starts.push((Start::Cold, first(initial.to_vec())));
    starts.push((Start::Short, with_len(&short)));
    starts.push((Start::Medium, with_len(&medium)));
    starts.push((Start::Long, with_len(&long)));
    let rows = fit.rows();
    let mut out: Option<GroupedFit> = None;
    for (start, p0) in starts {
        let settled = out
            .as_ref()
            .is_some_and(|o| o.chosen == Start::Warm && o.scores[0].1.msr <= COLD_ABOVE);
        if !explore && settled {
            break;
        }
        let Some(p) = ascend(p0, FIT_STEPS, rows, |p| composite::log_likelihood(p, fit)) else {
            continue;
        };
        let Some(h) = composite::loo_score(&p, held) else {
            continue;
        };
        consider(&mut out, start, p, h, held.rows());
    }
    let mut out = out?;
    let best = out
        .scores
        .iter()
        .find(|(s, _)| *s == out.chosen)
        .map(|s| s.1);
    if let Some(b) = best.filter(|b| b.msr > CALIBRATE_ABOVE) {
        let mut p = out.params.clone();
        let half = 0.5 * b.msr.ln();
        p[..2]
            .iter_mut()
            .for_each(|v| *v = (*v + half).clamp(LOG_BOUNDS.0, LOG_BOUNDS.1));
        if let Some(h) = composite::loo_score(&p, held) {
            let mut some = Some(out);
            consider(&mut some, Start::Calibrated, p, h, held.rows());
            out = some?;
        }
    }
    Some(out)
}

/// Records candidate `s` and makes it the chosen one if it beats the chosen one's log density
/// (by [`GROUP_SWITCH_MARGIN`] a row if that is the warm one).
fn consider(out: &mut Option<GroupedFit>, s: Start, p: Vec<f64>, h: HeldOut, rows: usize) {
    let Some(o) = out else {
        *out = Some(GroupedFit {
            params: p,
            chosen: s,
            scores: vec![(s, h)],
        });
        return;
    };
    let chosen = o.scores.iter().find(|(k, _)| *k == o.chosen).map(|x| x.1);
    let margin = match o.chosen {
        Start::Warm => GROUP_SWITCH_MARGIN * rows as f64,
        _ => 0.0,
    };
    if chosen.is_none_or(|b| h.log_density > b.log_density + margin) {
        (o.params, o.chosen) = (p, s);
    }
    o.scores.push((s, h));
}

/// The population variance of `r` (0 for fewer than one value).
fn variance(r: &[f64]) -> f64 {
    let n = r.len().max(1) as f64;
    let mean = r.iter().sum::<f64>() / n;
    r.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n
}

/// Per input: the median non-zero distance from each group's first row (its anchor) to its
/// other rows (`short`), and the input's standard deviation over all rows (`long`); an input
/// with no spread gets 1 for both, and `short` is at most `long`.
fn spacing(groups: &Groups) -> (Vec<f64>, Vec<f64>) {
    let d = groups.d();
    let mut short = Vec::with_capacity(d);
    let mut long = Vec::with_capacity(d);
    for k in 0..d {
        let mut gaps = Vec::new();
        let mut col = Vec::new();
        for b in 0..groups.len() {
            let (x, _) = groups.group(b);
            let a = x[k];
            for row in x.chunks_exact(d) {
                col.push(row[k]);
                let gap = (row[k] - a).abs();
                if gap > 0.0 {
                    gaps.push(gap);
                }
            }
        }
        let sd = variance(&col).sqrt();
        let sd = if sd > 0.0 && sd.is_finite() { sd } else { 1.0 };
        gaps.sort_by(f64::total_cmp);
        let s = gaps.get(gaps.len() / 2).copied().unwrap_or(sd).min(sd);
        short.push(s);
        long.push(sd);
    }
    (short, long)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// Groups of a field whose residual is a short-range anomaly in input 1 (lengthscale 0.05
    /// on inputs spread over [0, 10]) plus noise 0.1: each group is 12 rows within ±0.1 of
    /// its anchor in input 1 (input 0 uniform, irrelevant).
    fn field(seed: u64, groups: usize) -> Groups {
        let mut rng = Rng::new(seed, 2);
        let mut g = Groups::new(2);
        for _ in 0..groups {
            let c = 10.0 * rng.uniform();
            let x: Vec<f64> = (0..12)
                .flat_map(|_| [10.0 * rng.uniform(), c + 0.2 * (rng.uniform() - 0.5)])
                .collect();
            // A draw of the anomaly at the group's rows: sum of bumps at random centres.
            let centres: Vec<(f64, f64)> = (0..8)
                .map(|_| (c + 0.3 * (rng.uniform() - 0.5), rng.normal()))
                .collect();
            let r: Vec<f64> = x
                .chunks_exact(2)
                .map(|v| {
                    centres
                        .iter()
                        .map(|(m, a)| a * (-0.5 * ((v[1] - m) / 0.05).powi(2)).exp())
                        .sum::<f64>()
                        + 0.1 * rng.normal()
                })
                .collect();
            g.push(&x, &r).expect("group");
        }
        g
    }

    #[test]
    fn the_short_start_finds_a_short_lengthscale_that_a_long_start_misses() {
        let (fit, held) = (field(1, 60), field(2, 60));
        let initial = [0.0, 0.0, 0.0, 0.0];
        let f = fit_grouped_selected(None, &initial, (&fit, &held), true).expect("fit");
        let l1 = f.params[3].exp();
        assert!(l1 < 0.2, "lengthscale of input 1: {l1} ({:?})", f.chosen);
        assert!(
            f.params[2].exp() > 1.0,
            "input 0 is irrelevant: {}",
            f.params[2].exp()
        );
        let cold = f
            .scores
            .iter()
            .find(|s| s.0 == Start::Cold)
            .expect("cold")
            .1;
        let best = f.scores.iter().find(|s| s.0 == f.chosen).expect("chosen").1;
        assert!(best.log_density > cold.log_density, "{:?}", f.scores);
    }

    #[test]
    fn the_warm_chain_stays_unless_beaten_by_the_margin() {
        let (fit, held) = (field(3, 40), field(4, 40));
        let first = fit_grouped_selected(None, &[0.0; 4], (&fit, &held), true).expect("fit");
        let again = fit_grouped_selected(Some(&first.params), &[0.0; 4], (&fit, &held), true)
            .expect("refit");
        assert_eq!(again.scores[0].0, Start::Warm);
        let warm = again.scores[0].1.log_density;
        let best = again
            .scores
            .iter()
            .map(|s| s.1.log_density)
            .fold(f64::NEG_INFINITY, f64::max);
        if again.chosen == Start::Warm {
            assert!(best <= warm + GROUP_SWITCH_MARGIN * held.rows() as f64);
        } else {
            assert!(best > warm + GROUP_SWITCH_MARGIN * held.rows() as f64);
        }
    }

    #[test]
    fn mismatched_or_empty_groups_give_none() {
        let g = field(5, 4);
        assert!(fit_grouped_selected(None, &[0.0; 3], (&g, &g), true).is_none());
        assert!(fit_grouped_selected(None, &[0.0; 4], (&Groups::new(2), &g), true).is_none());
    }
}
