//! The calibration of the fleet query (issue 19; docs/LOCAL.md §10, §12): per fleet rule, a
//! weight on the residual correction (the safety net) and a variance scale, measured on
//! answers given the way a query gets them ([`RuleCalibration::measure`]). Each agent offers
//! some of its memory rows; at each, every other agent answers as usual and the owner answers
//! without that row (its leave-one-out answer, [`Agent::local_held_out`]); the rule combines
//! them. A test row is a row no agent holds: the owner's leave-one-out answer is what it
//! would answer there.

use coolgp::faer::Mat;
use coolgp::local::calibrate::{chosen_rule, held_out_answer, offered_rows, CALIBRATION_ROWS};
use coolgp::local::pool::shares;
use coolgp::local::{FleetRule, HeldOutRows, LocalAnswer};

use super::asked::{routes, Asked};
use coolgp::{Agent, View};
use rayon::prelude::*;

pub use coolgp::local::calibrate::RuleCalibration;

/// The calibrations of the fleet rules and the rows they were measured on.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// Calibration rows answered (over all agents).
    pub rows: usize,
    /// Each rule's weight and scale.
    pub rules: Vec<RuleCalibration>,
}

impl Calibration {
    /// The calibration of `rule` (weight 1, scale 1 if it was not calibrated).
    pub fn of(&self, rule: FleetRule) -> RuleCalibration {
        self.rules
            .iter()
            .find(|r| r.rule == rule)
            .copied()
            .unwrap_or(RuleCalibration::unit(rule))
    }

    /// The variance scale of `rule` (1 if it was not calibrated).
    pub fn scale(&self, rule: FleetRule) -> f64 {
        self.of(rule).scale
    }

    /// The fleet query's `auto` rule (docs/LOCAL.md §12): rbcm unless another rule's
    /// weighted answers beat its held-out error decisively ([`chosen_rule`]).
    pub fn best(&self) -> Option<FleetRule> {
        chosen_rule(&self.rules)
    }
}

/// Measures each rule's weight and variance scale on the fused `agents` (module doc): each
/// agent offers its share of [`CALIBRATION_ROWS`] ([`shares`], [`offered_rows`]). Agents that
/// cannot answer (no factorizable model) offer no rows and give no answers, and so do the
/// agents `excluded` marks (contained suspects, issue 29; an empty slice excludes none).
/// With `route = Some(k)` each row is answered as a routed query would be (issue 31): by its
/// owner and the `k − 1` others nearest by coverage ([`super::asked::routes`]).
pub fn calibrate(
    agents: &[Agent],
    rules: &[FleetRule],
    excluded: &[bool],
    route: Option<usize>,
) -> Calibration {
    let out = |i: usize| excluded.get(i).copied().unwrap_or(false);
    let k = shares(CALIBRATION_ROWS, agents.len());
    let held: Vec<Option<HeldOutRows>> = agents
        .par_iter()
        .zip(k.par_iter())
        .enumerate()
        .map(|(i, (a, &k))| {
            let rows = offered_rows(a.local_points(), if out(i) { 0 } else { k });
            a.local_held_out(&rows, View::Fused).ok()
        })
        .collect();
    let owners: Vec<(usize, usize)> = held
        .iter()
        .enumerate()
        .flat_map(|(o, h)| (0..h.as_ref().map_or(0, |h| h.y.len())).map(move |r| (o, r)))
        .collect();
    let d = agents.first().map_or(0, |a| a.local().memory().d());
    let x = Mat::from_fn(owners.len(), d, |j, c| {
        let (o, r) = owners[j];
        held[o].as_ref().map_or(0.0, |h| h.x[(r, c)])
    });
    let who = route.map(|k| {
        let owner_of: Vec<usize> = owners.iter().map(|&(o, _)| o).collect();
        routes(agents, excluded, x.as_ref(), k, Some(&owner_of))
    });
    let asked = Asked::ask(agents, excluded, x.as_ref(), who);
    let rules = rules
        .iter()
        .map(|&rule| {
            let combined: Vec<(LocalAnswer, f64)> = owners
                .par_iter()
                .enumerate()
                .filter_map(|(j, &(o, r))| {
                    let h = held[o].as_ref()?;
                    let at = asked.at(j);
                    Some((held_out_answer(rule, at, o, h.answers[r])?, h.y[r]))
                })
                .collect();
            RuleCalibration::measure(rule, &combined)
        })
        .collect();
    Calibration {
        rows: owners.len(),
        rules,
    }
}
