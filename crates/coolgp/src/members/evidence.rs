//! The evidence of one member's rows (docs/MEMBERS.md §1), as the simulator and a node take
//! it: up to [`CheckOptions::rows`] rows of the member's memory, spread evenly over it, under
//! each of a few peers' own models; the member's evidence is the one of the peer that agrees
//! with it best. An honest member agrees with some honest peer that knows its inputs; a
//! faulty one with none, however many faulty members the fleet holds, as long as their
//! faults differ. (The fleet's model without the member, tried first, lets one faulty member
//! pull every honest member's reference: with three members, by half its fault.)

use faer::Mat;

use super::check::{CheckOptions, Evidence};
use crate::local::calibrate::offered_rows;
use crate::model::predict::predict;
use crate::model::{Posterior, Prediction};
use crate::protocol::Agent;

/// The rows of `member` the check uses (`x [k, d]`, `y [k]`): up to `opts.rows` of its
/// memory's, spread evenly over it, or without a memory of its newest rows
/// ([`Agent::recent_rows`]); `None` without rows.
pub fn check_rows(member: &Agent, opts: &CheckOptions) -> Option<(Mat<f64>, Vec<f64>)> {
    let memory = match member.local().memory() {
        m if m.is_empty() => member.recent_rows(),
        m => m,
    };
    let rows = offered_rows(memory.len(), opts.rows);
    if rows.is_empty() {
        return None;
    }
    let x = Mat::from_fn(rows.len(), memory.d(), |k, j| memory.row(rows[k])[j]);
    let y = rows.iter().map(|&k| memory.y()[k]).collect();
    Some((x, y))
}

/// The evidence of targets `y` under the best-agreeing peer: of the peers' predictions at the
/// rows, the verifiable one ([`Evidence::verifiable`]) with the smallest score; without one,
/// the one with the most informed rows (an unverifiable member's evidence). `None` without
/// any prediction. `prior_var`: the prior's σ_s².
pub fn best_agreement(
    y: &[f64],
    peers: impl IntoIterator<Item = Prediction>,
    prior_var: f64,
    opts: &CheckOptions,
) -> Option<Evidence> {
    let all: Vec<Evidence> = peers
        .into_iter()
        .map(|p| Evidence::measure(y, &p, prior_var, opts.informed_below))
        .collect();
    let verifiable = all
        .iter()
        .filter(|e| e.verifiable(opts))
        .min_by(|a, b| a.score.total_cmp(&b.score));
    verifiable
        .or_else(|| all.iter().max_by_key(|e| e.informed))
        .copied()
}

/// `member`'s evidence in a fleet of agents (the simulator): its rows under each peer's own
/// model (`peers`: their indices in `agents`; `own[j]`: agent j's own q(u), factored once
/// per check by the caller), [`best_agreement`].
pub fn evidence_among(
    agents: &[Agent],
    own: &[Option<Posterior>],
    member: usize,
    peers: &[usize],
    opts: &CheckOptions,
) -> Option<Evidence> {
    let (x, y) = check_rows(agents.get(member)?, opts)?;
    let prior_var = agents[member].projection().sigma_s().powi(2);
    let preds = peers.iter().filter(|&&j| j != member).filter_map(|&j| {
        let (a, post) = (agents.get(j)?, own.get(j)?.as_ref()?);
        predict(a.vocabulary(), a.projection(), post, x.as_ref()).ok()
    });
    best_agreement(&y, preds, prior_var, opts)
}
