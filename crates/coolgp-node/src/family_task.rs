//! The fitter's choice of the residual kernel's family on the fleet query's own task
//! (docs/LOCAL.md §12c, docs/NODE.md §13 "Its family"): the simulator's
//! `fleet::family_on_the_fleet_task` on nodes.
//!
//! The held-out groups score a joint GP over every member's rows; the fleet query does not
//! answer that way (each member from its own memory, the answers combined by a fleet rule).
//! So where an exploring fit on neighbourhood groups scored more than one family
//! (`--local-families` of two or more), each family's candidate
//! ([`GroupedFit::candidate`]: the groups' choice for its own family, else the family's best
//! start) is sent to every member as a trial kernel ([`TrialKernel`], answered on a copy of
//! the member: nothing of it changes) and scored by the fleet's calibration under it
//! ([`measured`]: held-out memory rows, each answered by its owner leave-one-out and by the
//! [`FAMILY_ROUTE`] − 1 members nearest it by coverage; the `auto` rule's weighted mean squared
//! error). The family is chosen by the core's rule ([`family_on_scores`]: the incumbent unless
//! another errs [`coolgp::local::select::FAMILY_MARGIN`] less). If a family cannot be scored
//! (a get failed, too few rows), the groups' choice stands.

use coolgp::local::calibrate::chosen_rule;
use coolgp::local::select::{family_on_scores, GroupedFit, FAMILY_ROUTE};
use coolgp::local::ResidualFamily;

use crate::fleet_calibration::{measured, NotMeasured};
use crate::fleet_query::{Calibrated, Member};
use crate::request::TrialKernel;

/// `fit` with its family chosen on the fleet's task (module doc), each family's error there in
/// [`GroupedFit::fleet_task`]; `fit` unchanged with fewer than two families scored on the
/// groups or a family that could not be scored (logged). `incumbent`: the warm chain's family,
/// at a first fit the first family asked for ([`crate::pooled_fit::Start::incumbent`]). The
/// requests are signed by `signer` in a TLS fleet; `suspects` stay out, and `members` (the
/// fleet's live members) sizes each member's share of rows.
pub async fn family_on_the_fleet_task(
    session: &zenoh::Session,
    fleet: &str,
    signer: Option<Member<'_>>,
    (suspects, members): (&[u64], usize),
    fit: GroupedFit,
    incumbent: Option<ResidualFamily>,
) -> GroupedFit {
    if fit.best_of_family.len() < 2 {
        return fit;
    }
    let mut scores = Vec::with_capacity(fit.best_of_family.len());
    for family in fit.best_of_family.iter().map(|b| b.0) {
        let Some((_, params)) = fit.candidate(family) else {
            continue;
        };
        let trial = TrialKernel::new(family, params);
        let asked = (suspects, members);
        match measured(session, fleet, signer, asked, (Some(&trial), FAMILY_ROUTE)).await {
            Ok(c) => scores.push((family, best_mse(&c))),
            Err(why) => {
                not_scored(family, fit.family, &why);
                return fit;
            }
        }
    }
    let chosen = family_on_scores(&scores, incumbent);
    // `family=mse`, the error printed to round-trip.
    let named: Vec<String> = scores
        .iter()
        .map(|(f, m)| format!("{}={m}", f.name()))
        .collect();
    tracing::info!(
        scores = ?named,
        incumbent = incumbent.map(ResidualFamily::name),
        groups = fit.family.name(),
        chosen = chosen.map_or(fit.family.name(), ResidualFamily::name),
        "pooled fit: families on the fleet's task"
    );
    let mut fit = fit;
    if let Some(family) = chosen {
        fit.choose_family(family);
    }
    fit.fleet_task = scores;
    fit
}

/// Logs why `family` was not scored (`groups`: the groups' choice, which stands): a young
/// fleet's too few rows at info, anything else as a warning.
fn not_scored(family: ResidualFamily, groups: ResidualFamily, why: &NotMeasured) {
    let (family, groups) = (family.name(), groups.name());
    if let NotMeasured::TooFewRows(_) = why {
        tracing::info!(family, %why, groups, "pooled fit: a family not scored on the fleet's task (a young fleet); the groups' choice stands");
    } else {
        tracing::warn!(family, %why, groups, "pooled fit: a family not scored on the fleet's task; the groups' choice stands");
    }
}

/// The calibration's `auto` rule's weighted mean squared error ([`chosen_rule`], as the
/// simulator's `Calibration::best`); `+∞` where nothing was measured.
pub fn best_mse(c: &Calibrated) -> f64 {
    let mse = chosen_rule(&c.rules)
        .and_then(|r| c.rules.iter().find(|m| m.rule == r))
        .map_or(f64::INFINITY, |m| m.mse);
    if mse.is_finite() {
        mse
    } else {
        f64::INFINITY
    }
}
