//! The calibration of the fleet query (issue 19; docs/LOCAL.md §10): one variance scale per
//! fleet rule, measured on answers given the way a query gets them. Each agent offers some of
//! its memory rows; at each, every other agent answers as usual and the owner answers without
//! that row (its leave-one-out answer, [`Agent::local_held_out`]); the rule combines them and
//! [`variance_scale`] turns the standardized errors into the scale that covers 95% of them.
//! A test row is a row no agent holds: the owner's leave-one-out answer is what it would
//! answer there.

use coolgp::faer::Mat;
use coolgp::local::calibrate::{held_out_error, offered_rows, variance_scale, CALIBRATION_ROWS};
use coolgp::local::pool::shares;
use coolgp::local::{FleetRule, HeldOutRows, LocalAnswer};
use coolgp::{Agent, View};
use rayon::prelude::*;

/// The variance scales of the fleet rules and the rows they were measured on.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// Calibration rows answered (over all agents).
    pub rows: usize,
    /// Each rule's scale (1 where too few rows answered).
    pub scales: Vec<(FleetRule, f64)>,
}

impl Calibration {
    /// The scale of `rule` (1 if it was not calibrated).
    pub fn scale(&self, rule: FleetRule) -> f64 {
        self.scales
            .iter()
            .find(|(r, _)| *r == rule)
            .map_or(1.0, |&(_, s)| s)
    }
}

/// Measures each rule's variance scale on the fused `agents` (module doc): each agent offers
/// its share of [`CALIBRATION_ROWS`] ([`shares`], [`offered_rows`]). Agents that cannot
/// answer (no factorizable model) offer no rows and give no answers.
pub fn calibrate(agents: &[Agent], rules: &[FleetRule]) -> Calibration {
    let k = shares(CALIBRATION_ROWS, agents.len());
    let held: Vec<Option<HeldOutRows>> = agents
        .par_iter()
        .zip(k.par_iter())
        .map(|(a, &k)| {
            a.local_held_out(&offered_rows(a.local_points(), k), View::Fused)
                .ok()
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
    let answers: Vec<Option<Vec<LocalAnswer>>> = agents
        .par_iter()
        .map(|a| a.local_answers(x.as_ref(), View::Fused).ok())
        .collect();
    let scales = rules
        .iter()
        .map(|&rule| {
            let errors: Vec<f64> = owners
                .par_iter()
                .enumerate()
                .filter_map(|(j, &(o, r))| {
                    let h = held[o].as_ref()?;
                    let at =
                        (0..agents.len()).filter_map(|a| answers[a].as_ref().map(|v| (a, v[j])));
                    held_out_error(rule, at, o, h.answers[r], h.y[r])
                })
                .collect();
            (rule, variance_scale(&errors).unwrap_or(1.0))
        })
        .collect();
    Calibration {
        rows: owners.len(),
        scales,
    }
}
