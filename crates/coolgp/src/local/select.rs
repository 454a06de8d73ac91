//! The fleet's residual-kernel fit on neighbourhood groups, chosen among several starts by
//! held-out evidence (issue 28; docs/LOCAL.md §11).
//!
//! Candidates, each [`FIT_STEPS`] Adam steps of the composite likelihood
//! ([`composite::log_likelihood`]) on the fit groups:
//! - the warm chain's continuation (from the previous fleet kernel, in its own family),
//! - for each kernel family asked for ([`ResidualFamily`], in that order; [`FAMILIES`], the
//!   squared exponential alone, by default): a cold start (the agents' initial kernel) and three starts whose lengthscales
//!   are, per input, the groups' own spacing (`short`: the median non-zero distance from an
//!   anchor to its group's rows), the inputs' spread (`long`: their standard deviation over
//!   the groups' rows) and the geometric mean of the two (`medium`); `σ_r² = σ_rn² = var(r)/2`
//!   for all four.
//!
//! Each is scored by the leave-one-out density of the *held-out* groups
//! ([`composite::loo_score`] under its family; anchors of the same agents, disjoint from the
//! fit anchors), and the best is kept with its family, the warm one unless beaten by
//! [`GROUP_SWITCH_MARGIN`] nats a row; a candidate of another family than the *incumbent*
//! one (the warm chain's; at a first fit the first family asked for, the squared
//! exponential by default) must beat the incumbent family's best by the same margin (a
//! difference of a nat on two thousand rows is noise, and the chain would keep it). As in the
//! pooled fit, a choice whose held-out msr exceeds [`CALIBRATE_ABOVE`] is also tried with
//! `σ_r²`, `σ_rn²` (the sum: every variance, [`ResidualFamily::variance_params`]) times that
//! msr.
//!
//! The sum family's four starts ([`super::sum::start`]) put its short part at the start's
//! lengthscales (the agents' initial ones, short, medium, long) and its smooth part at four
//! times them or the inputs' spread, whichever is longer, per input; the variance is split as
//! `σ_rn² = var(r)/2`, `σ_s² = σ_o² = σ_l² = var(r)/6`.

use super::composite::{self, Groups};
use super::fit::{ascend, FIT_STEPS};
use super::kernel::LOG_BOUNDS;
use super::pool::{HeldOut, CALIBRATE_ABOVE, COLD_ABOVE};
use super::ResidualFamily;

/// Held-out log density per scored row by which a candidate must beat the warm chain's
/// continuation to replace it. Measured in docs/LOCAL.md §11.
pub const GROUP_SWITCH_MARGIN: f64 = 0.01;

/// The kernel families whose starts the fleet's fit tries when it explores, by default: the
/// squared exponential alone, the fit before the families (up to rounding: docs/LOCAL.md
/// §12c's faster composite likelihood). Measured in
/// docs/LOCAL.md §12a (wind and air stations, 23 runs): adding Matérn 3/2 and 5/2 made the
/// fleet query 0.3% (wind) and 1.2% (air) worse on average at 37% and 9% more CPU; Matérn
/// 5/2 alone beside it was level (+0.1%, −0.4%). The sum beside it ([`super::sum`]) made
/// the air stations and region-routed fields better (−1.5% to −4.6% on the mean) but the wind
/// stations worse (+1.6% on the mean, the worst run too); with the family chosen on the
/// fleet query's own task (the simulator, docs/LOCAL.md §12c) the sum keeps wind level and
/// gains on air and region-routed fields, but the faulty-station field's worst seed got
/// worse. The simulator's and the node's `--local-families` choose others.
pub const FAMILIES: [ResidualFamily; 1] = [ResidualFamily::SquaredExponential];

/// The relative margin by which another family's error on the fleet query's own task must be
/// below the incumbent family's to replace it ([`family_on_scores`], docs/LOCAL.md §12c): the
/// calibration's rows are a sample (on a field drawn from a squared exponential, Matérn 5/2
/// scored 0.9–2.8% below it): without a margin the choice follows differences within that noise.
pub const FAMILY_MARGIN: f64 = 0.05;

/// The agents asked about each calibration row of a family's score on the fleet's task (its
/// owner and the 15 nearest by coverage): a routed query's answer at a bounded cost (on
/// airline by 100 regions the same choices as asking all 100, 20% less CPU; docs/LOCAL.md
/// §12c).
pub const FAMILY_ROUTE: usize = 16;

/// The family chosen on the fleet query's own task (docs/LOCAL.md §12c) from each family's
/// error there (`scores`: the best fleet rule's held-out mean squared error; a non-finite one
/// counts as `+∞`, nothing measured): the `incumbent` (the warm chain's family; at a first fit
/// the first family asked for) unless the family with the smallest error (the first of equals)
/// errs less than `(1 − FAMILY_MARGIN)` times the incumbent's. `None`, the groups' choice
/// standing, with fewer than two families scored or the incumbent not among them.
pub fn family_on_scores(
    scores: &[(ResidualFamily, f64)],
    incumbent: Option<ResidualFamily>,
) -> Option<ResidualFamily> {
    let mse = |m: f64| if m.is_finite() { m } else { f64::INFINITY };
    let held = scores.iter().find(|s| Some(s.0) == incumbent)?;
    let best = scores.iter().min_by(|a, b| mse(a.1).total_cmp(&mse(b.1)))?;
    let switch = mse(best.1) < (1.0 - FAMILY_MARGIN) * mse(held.1);
    (scores.len() >= 2).then_some(if switch { best.0 } else { held.0 })
}

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
    /// The chosen kernel family.
    pub family: ResidualFamily,
    /// The chosen parameters `[ln σ_r, ln σ_rn, ln ℓ_1..d]`.
    pub params: Vec<f64>,
    /// Which start they came from.
    pub chosen: Start,
    /// Every scored candidate (its start and family), in the order scored.
    pub scores: Vec<(Start, ResidualFamily, HeldOut)>,
    /// Each family's best-scored candidate (its start, parameters and score), in the order
    /// the families were first scored: what [`fit_grouped_selected`]'s caller can compare on
    /// another task than the held-out groups (no margin applied).
    pub best_of_family: Vec<(ResidualFamily, Start, Vec<f64>, HeldOut)>,
    /// Each family's error on the fleet query's own task where the caller scored them
    /// (the simulator's choice of family, docs/LOCAL.md §12c); empty otherwise.
    pub fleet_task: Vec<(ResidualFamily, f64)>,
}

impl GroupedFit {
    /// The chosen candidate's held-out score.
    pub fn chosen_score(&self) -> Option<HeldOut> {
        let key = (self.chosen, self.family);
        self.scores
            .iter()
            .find(|(s, f, _)| (*s, *f) == key)
            .map(|s| s.2)
    }

    /// `family`'s candidate on another task than the held-out groups: the groups' choice for
    /// the chosen family (the warm chain's margin kept), else the family's best start; `None`
    /// for a family not scored.
    pub fn candidate(&self, family: ResidualFamily) -> Option<(Start, &[f64])> {
        if family == self.family {
            return Some((self.chosen, &self.params));
        }
        let b = self.best_of_family.iter().find(|b| b.0 == family)?;
        Some((b.1, &b.2))
    }

    /// Makes `family`'s [`GroupedFit::candidate`] the choice (nothing for a family not scored).
    pub fn choose_family(&mut self, family: ResidualFamily) {
        if let Some((start, params)) = self.candidate(family) {
            let params = params.to_vec();
            (self.family, self.chosen, self.params) = (family, start, params);
        }
    }

    /// Records each family's last fit in `chains` (family → parameters; its best start on
    /// the held-out groups, the chosen family's choice): where the next exploration's chains
    /// continue ([`fit_grouped_selected`]'s `chains`, docs/LOCAL.md §12c).
    pub fn keep_chains(&self, chains: &mut Vec<(ResidualFamily, Vec<f64>)>) {
        let best = self.best_of_family.iter().map(|b| (b.0, &b.2));
        for (family, params) in best.chain([(self.family, &self.params)]) {
            match chains.iter_mut().find(|c| c.0 == family) {
                Some(c) => c.1.clone_from(params),
                None => chains.push((family, params.clone())),
            }
        }
    }
}

/// The fit chosen by held-out evidence (module doc). `chains`: the warm chains, each a
/// family and its last parameters, the previous fleet kernel's first (the *warm* chain; empty
/// at a first fit); where `explore`, each other family of `families` with a chain continues
/// from it too (a [`Start::Warm`] of that family) besides its fresh starts. `initial`: the agents' initial parameters (both
/// `[ln σ_r, ln σ_rn, ln ℓ_1..d]`), `fit` and `held` the fit and scored groups (of width
/// `initial.len() − 2`), `families` the families whose cold, short, medium and long starts
/// are tried (the warm chain continues in its own family whatever they are). With `explore`
/// false and a warm start whose held-out msr is at most [`COLD_ABOVE`], the warm chain's
/// continuation alone is fitted (the other starts at the fusions the caller picks, as the
/// pooled fit's cold candidate: [`super::pool::cold_due`]). `None` when no candidate could be
/// fitted and scored. Deterministic; with `families = [SquaredExponential]` the fit of the
/// squared exponential alone, as before the families.
pub fn fit_grouped_selected(
    chains: &[(ResidualFamily, &[f64])],
    initial: &[f64],
    (fit, held): (&Groups, &Groups),
    explore: bool,
    families: &[ResidualFamily],
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
    let warm = chains.first().copied();
    let mut starts: Vec<(Start, ResidualFamily, Vec<f64>)> = Vec::new();
    if let Some((f, w)) = warm.filter(|w| w.1.len() == w.0.param_len(d)) {
        starts.push((Start::Warm, f, w.to_vec()));
    }
    // The other families' chains, where they are explored: each continues from its own last
    // fit rather than restarting (a change of family back and forth keeps both chains).
    let others = chains.iter().skip(1).filter(|(f, p)| {
        explore
            && families.contains(f)
            && Some(*f) != warm.map(|w| w.0)
            && p.len() == f.param_len(d)
    });
    for &(f, p) in others {
        starts.push((Start::Warm, f, p.to_vec()));
    }
    let named = [
        (Start::Cold, first(initial.to_vec())),
        (Start::Short, with_len(&short)),
        (Start::Medium, with_len(&medium)),
        (Start::Long, with_len(&long)),
    ];
    for &f in families {
        for (s, p) in &named {
            let p = match f {
                // The smooth part at 4× the short part's lengthscales or the spread.
                ResidualFamily::Sum => {
                    let smooth: Vec<f64> = p[2..]
                        .iter()
                        .zip(&long)
                        .map(|(l, sd)| (l + 4f64.ln()).max(sd.max(1e-300).ln()))
                        .map(|l| l.clamp(LOG_BOUNDS.0, LOG_BOUNDS.1))
                        .collect();
                    super::sum::start(&p[2..], &smooth, var)
                }
                _ => p.clone(),
            };
            starts.push((*s, f, p));
        }
    }
    let rows = fit.rows();
    // The family that keeps the choice unless clearly beaten: the warm chain's, else the first
    // one asked for (the squared exponential by default).
    let incumbent = warm.map(|w| w.0).or(families.first().copied());
    let rule = (held.rows(), incumbent);
    let mut out: Option<GroupedFit> = None;
    for (start, family, p0) in starts {
        let settled = out
            .as_ref()
            .is_some_and(|o| o.chosen == Start::Warm && o.scores[0].2.msr <= COLD_ABOVE);
        if !explore && settled {
            break;
        }
        let objective = |p: &[f64]| composite::log_likelihood(family, p, fit);
        let Some(p) = ascend(p0, FIT_STEPS, rows, objective) else {
            continue;
        };
        let Some(h) = composite::loo_score(family, &p, held) else {
            continue;
        };
        consider(&mut out, (start, family), p, h, rule);
    }
    let mut out = out?;
    if let Some(b) = out.chosen_score().filter(|b| b.msr > CALIBRATE_ABOVE) {
        let mut p = out.params.clone();
        let half = 0.5 * b.msr.ln();
        let family = out.family;
        for i in family.variance_params(d) {
            p[i] = (p[i] + half).clamp(LOG_BOUNDS.0, LOG_BOUNDS.1);
        }
        if let Some(h) = composite::loo_score(family, &p, held) {
            let mut some = Some(out);
            consider(&mut some, (Start::Calibrated, family), p, h, rule);
            out = some?;
        }
    }
    Some(out)
}

/// Records candidate `(s, family)` and makes it the chosen one if it beats the chosen one's
/// log density, by [`GROUP_SWITCH_MARGIN`] a row of the `rows` scored rows if that is the warm
/// one, or if it is of the `incumbent` family and the candidate of another (`rule =
/// (rows, incumbent)`): another family must beat the incumbent family's choice clearly.
fn consider(
    out: &mut Option<GroupedFit>,
    (s, family): (Start, ResidualFamily),
    p: Vec<f64>,
    h: HeldOut,
    (rows, incumbent): (usize, Option<ResidualFamily>),
) {
    let Some(o) = out else {
        *out = Some(GroupedFit {
            family,
            params: p.clone(),
            chosen: s,
            scores: vec![(s, family, h)],
            best_of_family: vec![(family, s, p, h)],
            fleet_task: Vec::new(),
        });
        return;
    };
    match o.best_of_family.iter_mut().find(|b| b.0 == family) {
        Some(b) if h.log_density > b.3.log_density => *b = (family, s, p.clone(), h),
        Some(_) => {}
        None => o.best_of_family.push((family, s, p.clone(), h)),
    }
    let chosen = o.chosen_score();
    let switch = family != o.family && Some(o.family) == incumbent;
    let margin = match o.chosen {
        _ if switch => GROUP_SWITCH_MARGIN * rows as f64,
        Start::Warm => GROUP_SWITCH_MARGIN * rows as f64,
        _ => 0.0,
    };
    if chosen.is_none_or(|b| h.log_density > b.log_density + margin) {
        (o.params, o.chosen, o.family) = (p, s, family);
    }
    o.scores.push((s, family, h));
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

    const SE: ResidualFamily = ResidualFamily::SquaredExponential;
    const ALL: [ResidualFamily; 3] = ResidualFamily::STATIONARY;
    const NOISE: f64 = 0.05;

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
        let f = fit_grouped_selected(&[], &initial, (&fit, &held), true, &[SE]).expect("fit");
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
            .2;
        let best = f.chosen_score().expect("chosen");
        assert!(best.log_density > cold.log_density, "{:?}", f.scores);
    }

    #[test]
    fn the_warm_chain_stays_unless_beaten_by_the_margin() {
        let (fit, held) = (field(3, 40), field(4, 40));
        let first = fit_grouped_selected(&[], &[0.0; 4], (&fit, &held), true, &ALL).expect("fit");
        let warm = Some((first.family, &first.params[..]));
        let again = fit_grouped_selected(warm.as_slice(), &[0.0; 4], (&fit, &held), true, &ALL)
            .expect("refit");
        assert_eq!(
            (again.scores[0].0, again.scores[0].1),
            (Start::Warm, first.family)
        );
        let warm = again.scores[0].2.log_density;
        let best = again
            .scores
            .iter()
            .map(|s| s.2.log_density)
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
        assert!(fit_grouped_selected(&[], &[0.0; 3], (&g, &g), true, &ALL).is_none());
        let empty = Groups::new(2);
        assert!(fit_grouped_selected(&[], &[0.0; 4], (&empty, &g), true, &ALL).is_none());
    }

    /// Groups of exact draws of a GP with a kernel of `family` (σ = 1, lengthscale `ell` on
    /// input 0, input 1 irrelevant) plus noise 0.05: each group is 16 rows within ±0.5 of its
    /// anchor in input 0 (anchors over [0, 10]), drawn from the group's covariance by its
    /// Cholesky factor (the groups independent, as the composite likelihood assumes).
    fn gp_groups(family: ResidualFamily, ell: f64, seed: u64, groups: usize) -> Groups {
        use faer::Mat;
        let mut rng = Rng::new(seed, 3);
        let mut g = Groups::new(2);
        for _ in 0..groups {
            let c = 10.0 * rng.uniform();
            let x: Vec<f64> = (0..16)
                .flat_map(|_| [c + rng.uniform() - 0.5, 10.0 * rng.uniform()])
                .collect();
            let mut a = Mat::from_fn(16, 16, |i, j| {
                let u = (x[2 * i] - x[2 * j]) / ell;
                family.unit(u * u) + if i == j { NOISE * NOISE } else { 0.0 }
            });
            assert!(super::super::factor::cholesky_seq_in_place(a.as_mut()));
            let z: Vec<f64> = (0..16).map(|_| rng.normal()).collect();
            let r: Vec<f64> = (0..16)
                .map(|i| (0..=i).map(|k| a[(i, k)] * z[k]).sum())
                .collect();
            g.push(&x, &r).expect("group");
        }
        g
    }

    #[test]
    fn the_choice_finds_the_family_the_field_was_drawn_from() {
        // Reference: docs/LOCAL.md §12a. A rough field (Matérn 3/2, lengthscale 0.15 against
        // rows 0.06 apart) chooses a Matérn family, its best start beating the squared
        // exponential's by more than 0.03 nats a scored row (seeds 1, 3-8 of this generator:
        // 55-120 nats over 960 rows; which of 3/2 and 5/2 wins is a coin flip after 60
        // steps, 5/2 with a shorter lengthscale); a smooth one (squared exponential,
        // lengthscale 0.5) chooses the squared exponential. All by held-out leave-one-out
        // density, every family's four starts fitted and scored.
        for (truth, ell) in [
            (ResidualFamily::Matern32, 0.15),
            (ResidualFamily::SquaredExponential, 0.5),
        ] {
            let (fit, held) = (gp_groups(truth, ell, 1, 60), gp_groups(truth, ell, 2, 60));
            let f = fit_grouped_selected(&[], &[0.0; 4], (&fit, &held), true, &ALL).expect("fit");
            assert_eq!(
                f.scores.len(),
                12,
                "four starts of each family: {:?}",
                f.scores
            );
            let best_of = |fam: ResidualFamily| {
                f.scores
                    .iter()
                    .filter(|s| s.1 == fam)
                    .map(|s| s.2.log_density)
                    .fold(f64::NEG_INFINITY, f64::max)
            };
            let scores: Vec<f64> = ALL.iter().map(|&x| best_of(x)).collect();
            if truth == SE {
                assert_eq!(f.family, SE, "best per family {scores:?}");
                let l0 = f.params[2].exp();
                assert!((l0 / ell - 1.0).abs() < 0.3, "ℓ_0 = {l0}");
            } else {
                assert_ne!(f.family, SE, "best per family {scores:?}");
                let gap = scores[1].max(scores[2]) - scores[0];
                assert!(gap > 0.03 * held.rows() as f64, "{scores:?}");
                let l0 = f.params[2].exp();
                assert!((0.08..0.2).contains(&l0), "{:?}: ℓ_0 = {l0}", f.family);
            }
        }
    }

    #[test]
    fn the_warm_chain_continues_in_its_own_family() {
        let (fit, held) = (field(7, 30), field(8, 30));
        let m32 = ResidualFamily::Matern32;
        let p = [0.0, -1.0, 1.0, -2.0];
        // Not exploring, with calibrated held-out errors: the warm chain alone, in its family
        // (even one the caller does not explore).
        let f = fit_grouped_selected(&[(m32, &p)], &[0.0; 4], (&fit, &held), false, &[SE])
            .expect("fit");
        assert!(f.scores[0].2.msr <= COLD_ABOVE, "{:?}", f.scores);
        assert_eq!(f.scores.len(), 1, "{:?}", f.scores);
        assert_eq!((f.scores[0].0, f.scores[0].1), (Start::Warm, m32));
        assert_eq!((f.chosen, f.family), (Start::Warm, m32));
        // Exploring, the warm chain stays in its family unless another start of any family
        // beats it by the margin.
        let f =
            fit_grouped_selected(&[(m32, &p)], &[0.0; 4], (&fit, &held), true, &ALL).expect("fit");
        let warm = f.scores[0].2.log_density + GROUP_SWITCH_MARGIN * held.rows() as f64;
        let beaten = f.scores[1..].iter().any(|s| s.2.log_density > warm);
        assert_eq!(f.chosen != Start::Warm, beaten, "{:?}", f.scores);
        assert_eq!(f.family == m32 && f.chosen == Start::Warm, !beaten);
    }

    /// Groups of exact draws of the sum kernel (docs/LOCAL.md §12a): per-agent offsets
    /// σ_o = 1, a short part σ_s = 0.7 with lengthscale 0.1 and a smooth part σ_l = 0.5 with
    /// lengthscale 3 on input 0 (input 1 irrelevant), noise 0.05. Each group: 4 rows of the
    /// anchor's agent within ±0.15 of the anchor and one row of each of 12 other agents
    /// within ±0.3, as the fleet's groups are made; drawn by the group's Cholesky factor.
    fn sum_groups(seed: u64, groups: usize) -> Groups {
        use faer::Mat;
        let mut rng = Rng::new(seed, 5);
        let mut g = Groups::new(2);
        for b in 0..groups {
            let c = 10.0 * rng.uniform();
            let agents: Vec<u64> = (0..16u64)
                .map(|i| {
                    if i < 4 {
                        b as u64 * 100
                    } else {
                        b as u64 * 100 + i
                    }
                })
                .collect();
            let x: Vec<f64> = (0..16)
                .flat_map(|i| {
                    let w = if i < 4 { 0.3 } else { 0.6 };
                    [c + w * (rng.uniform() - 0.5), 10.0 * rng.uniform()]
                })
                .collect();
            let mut a = Mat::from_fn(16, 16, |i, j| {
                let u = x[2 * i] - x[2 * j];
                let same = if agents[i] == agents[j] { 1.0 } else { 0.0 };
                same + 0.49 * (-0.5 * (u / 0.1).powi(2)).exp()
                    + 0.25 * (-0.5 * (u / 3.0).powi(2)).exp()
                    + if i == j { NOISE * NOISE } else { 0.0 }
            });
            assert!(super::super::factor::cholesky_seq_in_place(a.as_mut()));
            let z: Vec<f64> = (0..16).map(|_| rng.normal()).collect();
            let r: Vec<f64> = (0..16)
                .map(|i| (0..=i).map(|k| a[(i, k)] * z[k]).sum())
                .collect();
            g.push_from(&x, &r, &agents).expect("group");
        }
        g
    }

    #[test]
    fn the_choice_finds_the_sum_on_a_field_with_agent_offsets() {
        // Reference: docs/LOCAL.md §12a, the sum. Offered beside the squared exponential on
        // a field with per-agent offsets, the sum wins by more than the family margin and
        // finds the offset and the short lengthscale.
        let sum = ResidualFamily::Sum;
        let (fit, held) = (sum_groups(1, 60), sum_groups(2, 60));
        let f = fit_grouped_selected(&[], &[0.0; 4], (&fit, &held), true, &[SE, sum]).expect("fit");
        assert_eq!(f.scores.len(), 8, "{:?}", f.scores);
        assert_eq!(f.family, sum, "{:?}", f.scores);
        assert_eq!(f.params.len(), 8);
        let offset = f.params[4].exp();
        assert!(
            (0.6..1.5).contains(&offset),
            "σ_o = {offset}: {:?}",
            f.params
        );
        let short = f.params[2].exp();
        assert!(
            (0.05..0.2).contains(&short),
            "ℓ^s_0 = {short}: {:?}",
            f.params
        );
        // The warm chain continues in the sum (its 2d + 4 parameters).
        let warm = Some((sum, &f.params[..]));
        let again =
            fit_grouped_selected(warm.as_slice(), &[0.0; 4], (&fit, &held), false, &[SE, sum])
                .expect("refit");
        assert_eq!((again.scores[0].0, again.scores[0].1), (Start::Warm, sum));
        // (On a field without offsets, gp_groups(SE, 0.5, ..) with every row of another
        // agent, the sum still out-scores the squared exponential by 52 nats on 960 rows
        // after 60 steps: its two scales fit faster; docs/LOCAL.md §12a.)
    }

    #[test]
    fn the_incumbent_family_stays_unless_beaten_by_the_margin() {
        // Reference: docs/LOCAL.md §12c, the rule on the fleet's task.
        let (sum, m52) = (ResidualFamily::Sum, ResidualFamily::Matern52);
        let pick = |s: &[(ResidualFamily, f64)], i| family_on_scores(s, i);
        let edge = 1.0 - FAMILY_MARGIN;
        // Just inside the margin: kept; just beyond it: the best taken.
        assert_eq!(pick(&[(SE, 1.0), (sum, edge)], Some(SE)), Some(SE));
        let below = edge * (1.0 - 1e-12);
        assert_eq!(pick(&[(SE, 1.0), (sum, below)], Some(SE)), Some(sum));
        // The best of three, the first of equals; an incumbent that is best stays.
        let three = [(SE, 1.0), (sum, 0.5), (m52, 0.5)];
        assert_eq!(pick(&three, Some(SE)), Some(sum));
        assert_eq!(pick(&three, Some(sum)), Some(sum));
        assert_eq!(pick(&[(SE, 0.5), (sum, 0.3)], Some(sum)), Some(sum));
        // No incumbent scored, or fewer than two families: the groups' choice stands.
        assert_eq!(pick(&[(SE, 1.0), (sum, 0.1)], Some(m52)), None);
        assert_eq!(pick(&[(SE, 1.0), (sum, 0.1)], None), None);
        assert_eq!(pick(&[(SE, 1.0)], Some(SE)), None);
        assert_eq!(pick(&[], Some(SE)), None);
        // Nothing measured (+∞, or NaN, taken as +∞): any measured family beats it; two
        // unmeasured keep the incumbent.
        let inf = f64::INFINITY;
        assert_eq!(pick(&[(SE, inf), (sum, 1e9)], Some(SE)), Some(sum));
        assert_eq!(pick(&[(SE, f64::NAN), (sum, 1e9)], Some(SE)), Some(sum));
        assert_eq!(pick(&[(SE, 1.0), (sum, inf)], Some(SE)), Some(SE));
        assert_eq!(pick(&[(SE, inf), (sum, f64::NAN)], Some(SE)), Some(SE));
        assert_eq!(pick(&[(SE, 1.0), (sum, -inf)], Some(SE)), Some(SE));
    }

    #[test]
    fn each_family_s_chain_continues_where_the_families_are_explored() {
        // docs/LOCAL.md §12c: a change of family must not restart the other family's chain.
        let sum = ResidualFamily::Sum;
        let (fit, held) = (sum_groups(1, 60), sum_groups(2, 60));
        let f = fit_grouped_selected(&[], &[0.0; 4], (&fit, &held), true, &[SE, sum]).expect("fit");
        let se = f.best_of_family.iter().find(|b| b.0 == SE).expect("se");
        let chains = [(sum, &f.params[..]), (SE, &se.2[..])];
        // The chains kept: the chosen family's choice, each other family's best start.
        let mut kept = Vec::new();
        f.keep_chains(&mut kept);
        assert_eq!(kept, vec![(SE, se.2.clone()), (sum, f.params.clone())]);
        assert_eq!(f.candidate(SE), Some((se.1, &se.2[..])));
        let mut g = f.clone();
        g.choose_family(SE);
        assert_eq!((g.family, g.chosen, &g.params), (SE, se.1, &se.2));
        let warm =
            |g: &GroupedFit, family| g.scores.iter().any(|s| (s.0, s.1) == (Start::Warm, family));
        // Exploring: both chains continue (the fleet's first, then the other), besides the
        // fresh starts of both families.
        let again = fit_grouped_selected(&chains, &[0.0; 4], (&fit, &held), true, &[SE, sum])
            .expect("refit");
        assert_eq!((again.scores[0].0, again.scores[0].1), (Start::Warm, sum));
        assert_eq!((again.scores[1].0, again.scores[1].1), (Start::Warm, SE));
        assert_eq!(again.scores.len(), 10, "{:?}", again.scores);
        // Between explorations the fleet's chain alone; and a family not asked for is not
        // continued either.
        let between = fit_grouped_selected(&chains, &[0.0; 4], (&fit, &held), false, &[SE, sum])
            .expect("refit");
        assert!(!warm(&between, SE), "{:?}", between.scores);
        let only_sum =
            fit_grouped_selected(&chains, &[0.0; 4], (&fit, &held), true, &[sum]).expect("refit");
        assert!(!warm(&only_sum, SE), "{:?}", only_sum.scores);
        // A chain of the wrong length (another input width) is left out, not fitted.
        let short = [0.0; 3];
        let bad = [(sum, &f.params[..]), (SE, &short[..])];
        let g =
            fit_grouped_selected(&bad, &[0.0; 4], (&fit, &held), true, &[SE, sum]).expect("fit");
        assert!(!warm(&g, SE), "{:?}", g.scores);
    }
}
