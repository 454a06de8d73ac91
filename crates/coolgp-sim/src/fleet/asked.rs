//! Asking the fleet about some rows (issue 31): every agent about every row, or, with
//! `--route K`, each row only the K agents whose coverage is nearest it
//! ([`coolgp::local::coverage`]), so a query costs rows × K answers instead of rows × agents.

use coolgp::faer::{Mat, MatRef};
use coolgp::local::{route, Coverage, LocalAnswer};
use coolgp::{Agent, View};
use rayon::prelude::*;

/// One agent's answers: the rows it answered (ascending; `None` = every row) and its answers
/// there.
type Answered = (Option<Vec<usize>>, Vec<LocalAnswer>);

/// The agents' answers at the rows of a query.
pub(super) struct Asked {
    /// Per agent its answers; `None` for an agent not asked, excluded, or unable to answer.
    per_agent: Vec<Option<Answered>>,
    /// Per row, the agents asked (ascending); `None` = every agent.
    per_row: Option<Vec<Vec<usize>>>,
}

impl Asked {
    /// Asks the `agents` not `excluded` about the rows of `x [q, d]`: every one of them
    /// about every row when `who` is `None`, else row `r` the agents `who[r]` (ascending; see
    /// [`routes`]).
    pub(super) fn ask(
        agents: &[Agent],
        excluded: &[bool],
        x: MatRef<'_, f64>,
        who: Option<Vec<Vec<usize>>>,
    ) -> Self {
        let out = |i: usize| excluded.get(i).copied().unwrap_or(false);
        let per_row = who;
        let mut rows_of: Vec<Option<Vec<usize>>> = vec![None; agents.len()];
        if let Some(per_row) = &per_row {
            rows_of = vec![Some(Vec::new()); agents.len()];
            for (r, who) in per_row.iter().enumerate() {
                for &a in who {
                    if let Some(v) = rows_of[a].as_mut() {
                        v.push(r);
                    }
                }
            }
        }
        let per_agent = agents
            .par_iter()
            .zip(rows_of)
            .enumerate()
            .map(|(i, (a, rows))| {
                if out(i) {
                    return None;
                }
                match rows {
                    Some(rows) if rows.is_empty() => None,
                    // Every row: the query's own matrix (the answers of asking all, bit for bit).
                    Some(rows) if rows.len() == x.nrows() => {
                        a.local_answers(x, View::Fused).ok().map(|v| (None, v))
                    }
                    Some(rows) => {
                        let sub = Mat::from_fn(rows.len(), x.ncols(), |r, j| x[(rows[r], j)]);
                        let v = a.local_answers(sub.as_ref(), View::Fused).ok()?;
                        Some((Some(rows), v))
                    }
                    None => a.local_answers(x, View::Fused).ok().map(|v| (None, v)),
                }
            })
            .collect();
        Self { per_agent, per_row }
    }

    /// The answers at row `i`, as `(agent, answer)` in ascending agent order.
    pub(super) fn at(&self, i: usize) -> Vec<(usize, LocalAnswer)> {
        let one = |a: usize| -> Option<(usize, LocalAnswer)> {
            let (rows, v) = self.per_agent.get(a)?.as_ref()?;
            let at = match rows {
                None => i,
                Some(rows) => rows.binary_search(&i).ok()?,
            };
            v.get(at).map(|&ans| (a, ans))
        };
        match &self.per_row {
            None => (0..self.per_agent.len()).filter_map(one).collect(),
            Some(per_row) => per_row
                .get(i)
                .map_or_else(Vec::new, |who| who.iter().filter_map(|&a| one(a)).collect()),
        }
    }

    /// The answers at row `i` alone, in ascending agent order.
    pub(super) fn answers_at(&self, i: usize) -> Vec<LocalAnswer> {
        self.at(i).into_iter().map(|(_, a)| a).collect()
    }

    /// Every agent's answers at every row (`None` for an agent that gave none), when every
    /// agent was asked about every row: what the union rules read.
    pub(super) fn everyone(&self) -> Option<Vec<Option<Vec<LocalAnswer>>>> {
        self.per_agent
            .iter()
            .map(|p| match p {
                None => Some(None),
                Some((None, v)) => Some(Some(v.clone())),
                Some((Some(_), _)) => None,
            })
            .collect()
    }

    /// Answers given (agent × row pairs).
    pub(super) fn count(&self) -> usize {
        self.per_agent.iter().flatten().map(|(_, v)| v.len()).sum()
    }
}

/// The answers at each row of `x [q, d]` of the `k` agents not `excluded` nearest it by
/// coverage ([`routes`]), per row in ascending agent order: the routed fleet query
/// (`--route k`, issue 31) for a driver that combines them itself (the Python
/// `FleetRegressor.predict`). An agent that cannot answer gives no answers.
pub fn routed_answers(
    agents: &[Agent],
    excluded: &[bool],
    x: MatRef<'_, f64>,
    k: usize,
) -> Vec<Vec<LocalAnswer>> {
    let who = routes(agents, excluded, x, k, None);
    let asked = Asked::ask(agents, excluded, x, Some(who));
    (0..x.nrows()).map(|i| asked.answers_at(i)).collect()
}

/// The agents [`Asked::ask`] asks about each row of `x [q, d]` under `--route k`: among the
/// agents not `excluded`, the `k` nearest by coverage ([`route`]); where `owners` gives the
/// row's owner (a calibration row), the owner and the `k − 1` others nearest.
pub(super) fn routes(
    agents: &[Agent],
    excluded: &[bool],
    x: MatRef<'_, f64>,
    k: usize,
    owners: Option<&[usize]>,
) -> Vec<Vec<usize>> {
    let out = |i: usize| excluded.get(i).copied().unwrap_or(false);
    let candidates: Vec<usize> = (0..agents.len()).filter(|&i| !out(i)).collect();
    let coverages: Vec<Option<Coverage>> = candidates
        .par_iter()
        .map(|&i| agents[i].coverage())
        .collect();
    // Every candidate's coverage, once: a query row ranks them all.
    let every: Vec<Option<&Coverage>> = coverages.iter().map(Option::as_ref).collect();
    (0..x.nrows())
        .into_par_iter()
        .map(|r| {
            let row: Vec<f64> = (0..x.ncols()).map(|j| x[(r, j)]).collect();
            let owner = owners.and_then(|o| o.get(r).copied());
            let Some(o) = owner else {
                let who = route(&every, &row, k);
                return who.into_iter().map(|p| candidates[p]).collect();
            };
            // A calibration row: the owner and the k − 1 others nearest.
            let pool: Vec<usize> = (0..candidates.len())
                .filter(|&c| candidates[c] != o)
                .collect();
            let want = k.saturating_sub(1);
            let covs: Vec<Option<&Coverage>> = pool.iter().map(|&c| every[c]).collect();
            let mut who: Vec<usize> = route(&covs, &row, want)
                .into_iter()
                .map(|p| candidates[pool[p]])
                .collect();
            if !out(o) {
                let at = who.partition_point(|&a| a < o);
                who.insert(at, o);
            }
            who
        })
        .collect()
}
