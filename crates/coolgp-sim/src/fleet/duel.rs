//! The kernel family chosen on the fleet query's own task (issue 28 item 2; docs/LOCAL.md
//! §12c).
//!
//! The fleet's fit on neighbourhood groups ([`coolgp::local::select`]) chooses each family's
//! start by the held-out groups' leave-one-out density: predicting a row from a joint GP over
//! its group's rows, every agent's rows together. The fleet query answers otherwise: each
//! agent from its own memory alone, the answers combined by a fleet rule. On the wind
//! stations the sum family out-scores the squared exponential on the groups while its fleet
//! query is worse (each agent's answer carries its own offset); on air and on region-routed
//! fields it is better. So where more than one family was fitted, each family's best start
//! is taken by every agent in turn and scored by the calibration's held-out error
//! ([`calibrate`]: memory rows, each answered by its owner without it and by the others, the
//! `auto` rule's weighted mean squared error). The incumbent family (the warm chain's) is
//! kept unless another errs [`FAMILY_MARGIN`] less. With one family (the fits between
//! explorations) nothing is scored.

use coolgp::local::select::{family_on_scores, GroupedFit, Start};
use coolgp::local::{FleetRule, ResidualFamily};
use coolgp::Agent;
use rayon::prelude::*;

use super::calibrate::calibrate;
use super::query::RULES;

/// The rule's margin and the calibration's route, the core's
/// ([`coolgp::local::select::FAMILY_MARGIN`], [`coolgp::local::select::FAMILY_ROUTE`]): the
/// node's fitter chooses by the same.
pub use coolgp::local::select::{FAMILY_MARGIN, FAMILY_ROUTE};

/// One family's score on the fleet's task: its best start's parameters and the `auto`
/// rule's held-out mean squared error (standardized; `+∞` where nothing could be measured).
#[derive(Clone, Debug, PartialEq)]
pub struct FamilyScore {
    /// The family.
    pub family: ResidualFamily,
    /// The start scored: the groups' choice for its family, else the family's best start on
    /// the held-out groups.
    pub start: Start,
    /// Its parameters.
    pub params: Vec<f64>,
    /// The rule the calibration chose for it.
    pub rule: Option<FleetRule>,
    /// That rule's weighted held-out mean squared error.
    pub mse: f64,
}

/// Scores each family of `fit.best_of_family` on the fleet's task (module doc) and returns
/// `fit` with the chosen family's best start: the `incumbent` family (the warm chain's, at a
/// first fit the first family asked for) unless another family's error is below its own by
/// [`FAMILY_MARGIN`], then the family with the smallest error. With one family scored, or
/// the incumbent not among them, the groups' choice stands. Every agent holds the last family
/// scored on return: the caller sets the chosen one. Deterministic.
pub fn family_on_the_fleet_task(
    agents: &mut [Agent],
    excluded: &[bool],
    fit: GroupedFit,
    incumbent: Option<ResidualFamily>,
) -> GroupedFit {
    let scores = score_families(agents, excluded, &fit);
    let mut fit = fit;
    fit.fleet_task = scores.iter().map(|s| (s.family, s.mse)).collect();
    if let Some(family) = family_on_scores(&fit.fleet_task, incumbent) {
        fit.choose_family(family);
    }
    fit
}

/// Each family of `fit.best_of_family` — the groups' choice for its own family (margins kept),
/// every other family's best start — taken by every agent and scored by [`calibrate`]
/// (routed to [`FAMILY_ROUTE`] agents); empty with fewer than two families.
pub fn score_families(
    agents: &mut [Agent],
    excluded: &[bool],
    fit: &GroupedFit,
) -> Vec<FamilyScore> {
    if fit.best_of_family.len() < 2 {
        return Vec::new();
    }
    fit.best_of_family
        .iter()
        .filter_map(|b| Some((b.0, fit.candidate(b.0)?)))
        .map(|(family, (start, params))| {
            agents.par_iter_mut().for_each(|a| {
                let _ = a.set_local_kernel(family, params);
            });
            let cal = calibrate(agents, RULES, excluded, Some(FAMILY_ROUTE));
            let rule = cal.best();
            let mse = rule.map_or(f64::INFINITY, |r| cal.of(r).mse);
            FamilyScore {
                family,
                start,
                params: params.to_vec(),
                rule,
                mse: if mse.is_finite() { mse } else { f64::INFINITY },
            }
        })
        .collect()
}
