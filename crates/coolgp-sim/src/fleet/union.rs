//! The union rule in the simulator (issue 19, docs/LOCAL.md §7): at each query row the k
//! agents whose own answers carry the largest information gain `½ (ln v0_i − ln v_i)` pool
//! their memory rows, and one of them answers with the exact residual GP on the pooled rows,
//! under its residual kernel and global model ([`coolgp::local::union`]): the most informative
//! one, or, when the set's agents hold the same kernel (`--local-fit fleet`), the lowest id.
//! Rows that choose the same agents share one factorization.
//!
//! The simulator holds every agent, so it can pool raw rows; a querier that only receives
//! answers cannot ([`coolgp::local::UnionRule`] is not a [`coolgp::local::FleetRule`]).

use std::collections::BTreeMap;

use coolgp::faer::Mat;
use coolgp::local::{combine, FleetRule, LocalAnswer, UnionRows, UnionRule};
use coolgp::View;
use rayon::prelude::*;
use serde::Serialize;

use super::Fleet;
use crate::workload::TestSet;

/// What the union rule did on a run (summed over the test sets).
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct UnionStats {
    /// Distinct sets of agents chosen, each factored once.
    pub sets: usize,
    /// Mean rows of a factored union (at most k·B).
    pub rows_mean: f64,
    /// Query rows answered by the most informative agent's own answer because its union could
    /// not be factored.
    pub fallbacks: usize,
    /// Query rows where no agent had a residual part (answered by the global model).
    pub global_only: usize,
    /// Wall seconds of the union's part of the query: choosing, pooling, factoring, answering
    /// (the agents' own answers it chooses from are computed for the other rules anyway).
    pub wall_s: f64,
    /// CPU seconds of the process (every thread) over the same part ([`cpu_seconds`]; 0 where
    /// it cannot be read).
    pub cpu_s: f64,
    /// CPU seconds of the agents' own answers at the query rows, which every rule combines
    /// (the cost of an rBCM query; its combination is negligible beside them).
    pub answers_cpu_s: f64,
}

impl UnionStats {
    /// Adds another test set's figures (`rows_mean` weighted by the sets).
    pub(super) fn merge(&mut self, other: &Self) {
        let rows = self.rows_mean * self.sets as f64 + other.rows_mean * other.sets as f64;
        self.sets += other.sets;
        self.rows_mean = rows / self.sets.max(1) as f64;
        self.fallbacks += other.fallbacks;
        self.global_only += other.global_only;
        self.wall_s += other.wall_s;
        self.cpu_s += other.cpu_s;
        self.answers_cpu_s += other.answers_cpu_s;
    }
}

/// CPU seconds (user + system) of this process so far, every thread, from `/proc/self/stat`
/// (Linux; clock ticks of 1/100 s); `None` where it cannot be read.
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces): state, ppid, …; utime and stime
    // are the 14th and 15th fields of the line, the 12th and 13th after the name.
    let mut after = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let utime: f64 = after.next()?.parse().ok()?;
    let stime: f64 = after.next()?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// A chosen set of agents: the answering one first, the others ascending; its union's rows
/// are pooled in that order. The answering agent is the most informative one, or the lowest
/// id when every agent of the set holds the same residual kernel ([`Fleet::one_kernel`]:
/// then the union depends on the set alone, and rows that chose the same agents in another
/// order of information share its factorization).
type Chosen = Vec<usize>;

/// The agents chosen at one row from `(agent, answer)` pairs: the `k` with a residual part
/// (`residual_prior > 0`) and the largest information gain (ties: the lower id), the most
/// informative first, the others ascending. Empty when no agent has a residual part.
fn choose(k: usize, at_row: impl Iterator<Item = (usize, LocalAnswer)>) -> Chosen {
    let mut ranked: Vec<(f64, usize)> = at_row
        .filter(|(_, a)| a.residual_prior > 0.0)
        .map(|(i, a)| (a.information_gain(), i))
        .collect();
    // Descending gain, ascending id among equal gains (the gains are finite).
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    ranked.truncate(k);
    let mut chosen: Chosen = ranked.into_iter().map(|(_, i)| i).collect();
    if chosen.len() > 2 {
        chosen[1..].sort_unstable();
    }
    chosen
}

impl Fleet<'_> {
    /// The union rule's answers at the rows of `w`, from the agents' own answers there
    /// (`answers[agent][row]`, `None` for an agent that could not answer): the rows are
    /// grouped by their chosen set ([`choose`]; [`Chosen`] says which agent answers), each
    /// set's rows pooled
    /// ([`UnionRows::push_memory`]) and answered by its first agent
    /// ([`coolgp::Agent::union_answers`], the fused q(u)) in one call; a set whose union cannot
    /// be factored falls back to that agent's own answers, a row without any residual part to
    /// [`FleetRule::MostInformed`] (the first agent's global answer). `None` if some row has no
    /// answer at all. Returns the answers and what it did.
    pub(super) fn union_answers(
        &self,
        rule: UnionRule,
        w: &TestSet,
        answers: &[Option<Vec<LocalAnswer>>],
    ) -> Option<(Vec<LocalAnswer>, UnionStats)> {
        let n = w.y.len();
        let at_row = |i: usize| {
            answers
                .iter()
                .enumerate()
                .filter_map(move |(a, v)| v.as_ref().map(|v| (a, v[i])))
        };
        let mut out: Vec<Option<LocalAnswer>> = vec![None; n];
        let mut stats = UnionStats::default();
        let mut groups: BTreeMap<Chosen, Vec<usize>> = BTreeMap::new();
        for (i, slot) in out.iter_mut().enumerate() {
            let mut chosen = choose(rule.k(), at_row(i));
            if self.one_kernel(&chosen) {
                // Interchangeable agents: the set alone decides the union.
                chosen.sort_unstable();
            }
            if chosen.is_empty() {
                let all: Vec<LocalAnswer> = at_row(i).map(|(_, a)| a).collect();
                *slot = Some(combine(FleetRule::MostInformed, &all)?);
                stats.global_only += 1;
            } else {
                groups.entry(chosen).or_default().push(i);
            }
        }
        let groups: Vec<(Chosen, Vec<usize>)> = groups.into_iter().collect();
        let solved: Vec<(Vec<LocalAnswer>, bool, usize)> = groups
            .par_iter()
            .map(|(chosen, rows)| self.union_of(chosen, rows, w, answers))
            .collect();
        let mut pooled = 0;
        for ((_, rows), (got, ok, size)) in groups.iter().zip(solved) {
            pooled += size;
            if !ok {
                stats.fallbacks += rows.len();
            }
            for (&i, a) in rows.iter().zip(got) {
                out[i] = Some(a);
            }
        }
        stats.sets = groups.len();
        stats.rows_mean = pooled as f64 / groups.len().max(1) as f64;
        out.into_iter()
            .collect::<Option<Vec<_>>>()
            .map(|a| (a, stats))
    }

    /// True when every agent of `chosen` holds the same residual kernel (`--local-fit fleet`:
    /// the pooled fit gives every agent the same parameters, bit for bit).
    fn one_kernel(&self, chosen: &[usize]) -> bool {
        let kernel = |a: usize| self.agents[a].local().kernel();
        chosen.iter().all(|&a| kernel(a) == kernel(chosen[0]))
    }

    /// The answers of the union of `chosen` at the rows `rows` of `w` by its first agent, with
    /// whether the union could be factored (else that agent's own answers) and its size.
    fn union_of(
        &self,
        chosen: &[usize],
        rows: &[usize],
        w: &TestSet,
        answers: &[Option<Vec<LocalAnswer>>],
    ) -> (Vec<LocalAnswer>, bool, usize) {
        let lead = &self.agents[chosen[0]];
        let mut pooled = UnionRows::new(w.x.ncols());
        let fits = chosen
            .iter()
            .all(|&a| pooled.push_memory(self.agents[a].local().memory()).is_ok());
        let x = Mat::from_fn(rows.len(), w.x.ncols(), |r, j| w.x[(rows[r], j)]);
        match fits.then(|| lead.union_answers(&pooled, x.as_ref(), View::Fused)) {
            Some(Ok(got)) => (got, true, pooled.len()),
            _ => {
                // `choose` picks agents that answered: their own answers exist.
                let own = answers[chosen[0]].as_deref().unwrap_or_default();
                let got = rows.iter().filter_map(|&i| own.get(i).copied()).collect();
                (got, false, pooled.len())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(prior: f64, var: f64) -> LocalAnswer {
        LocalAnswer {
            residual_prior: prior,
            residual_var: var,
            ..LocalAnswer::global_only(0.0, 1.0, 0.1)
        }
    }

    #[test]
    fn the_most_informative_agents_are_chosen_the_first_leads() {
        // Gains ½ ln(v0/v): agent 0 none (no residual part), 1 ln 2/2, 2 ln 8/2, 3 ln 4/2,
        // 4 ln 2/2 (ties with 1: the lower id wins).
        let all = [
            answer(0.0, 0.0),
            answer(1.0, 0.5),
            answer(4.0, 0.5),
            answer(2.0, 0.5),
            answer(2.0, 1.0),
        ];
        let at = || all.iter().copied().enumerate();
        assert_eq!(choose(1, at()), vec![2]);
        assert_eq!(choose(2, at()), vec![2, 3]);
        assert_eq!(
            choose(3, at()),
            vec![2, 1, 3],
            "the lead, then ascending ids"
        );
        assert_eq!(choose(9, at()), vec![2, 1, 3, 4]);
        assert!(choose(2, [(0, all[0])].into_iter()).is_empty());
    }
}
