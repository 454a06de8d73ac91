//! Fleet-wide queries (issue 19): a querier that does not know which agent knows a place asks
//! every agent and combines their answers by a rule computable from the answers alone
//! ([`coolgp::local::combine`]); and the oracle, the agents whose region (or station) the
//! point belongs to; and, with `--union-k`, the union rules (`union.rs`: an exact GP on the
//! pooled rows of the most informative agents, which needs their rows, not only their
//! answers). Scored on the first [`QUERY_POINTS`] rows of each test set; each fleet rule's
//! answers calibrated by its variance scale (`calibrate.rs`), the raw scores kept beside.

use std::collections::BTreeMap;
use std::time::Instant;

use coolgp::local::{combine, FleetRule, LocalAnswer};
use coolgp::model::predict::Prediction;
use coolgp::Agent;
use rayon::prelude::*;
use serde::Serialize;

use super::asked::{routes, Asked};
use super::calibrate::{calibrate, RuleCalibration};
use super::stream::members;
use super::union::{cpu_seconds, UnionStats};
use super::Fleet;
use crate::eval::{coverage95, rmse, window};
use crate::workload::TestSet;

/// Test rows per test set answered by the whole fleet (the first ones of the set, which is
/// shuffled: a deterministic subset). With `--route K` the K agents nearest each row answer
/// it, else every agent: the cost is K (or agents) × rows × (one prediction + one residual
/// solve on the agent's memory).
pub const QUERY_POINTS: usize = 2_000;

/// The fleet rules every run scores: every rule of the core ([`FleetRule::ALL`]).
pub const RULES: &[FleetRule] = &FleetRule::ALL;

/// Scores of one way of answering the test rows (original units).
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct QueryScores {
    /// Root mean squared error of the answers' means.
    pub rmse: f64,
    /// Mean Gaussian negative log predictive density of the targets under (mean, var_y).
    pub nlpd: f64,
    /// Fraction of targets inside `mean ± 1.96·sqrt(var_y)`.
    pub coverage95: f64,
    /// The variance scale the answers were calibrated with (1: uncalibrated;
    /// [`super::calibrate`]): `nlpd` and `coverage95` are of the answers with every variance
    /// times it.
    pub var_scale: f64,
    /// The safety net's weight on the residual correction (1: the answers as combined;
    /// [`super::calibrate`]): `rmse`, `nlpd` and `coverage95` are of the weighted answers.
    pub weight: f64,
    /// `rmse` of the answers as combined (weight 1).
    pub rmse_unweighted: f64,
    /// `rmse` of the combined answers' global part alone (weight 0): the global fused model
    /// on the same rows.
    pub rmse_global: f64,
    /// `nlpd` of the uncalibrated answers.
    pub nlpd_raw: f64,
    /// `coverage95` of the uncalibrated answers.
    pub coverage95_raw: f64,
}

impl QueryScores {
    /// All NaN (no answer).
    pub const NAN: Self = Self {
        rmse: f64::NAN,
        nlpd: f64::NAN,
        coverage95: f64::NAN,
        var_scale: f64::NAN,
        weight: f64::NAN,
        rmse_unweighted: f64::NAN,
        rmse_global: f64::NAN,
        nlpd_raw: f64::NAN,
        coverage95_raw: f64::NAN,
    };

    /// The scores of `answers` (standardized) against `y`, in original units (`y_scale`).
    fn of(answers: &[LocalAnswer], y: &[f64], y_scale: f64) -> Self {
        Self::calibrated(answers, y, y_scale, &RuleCalibration::unit(FleetRule::Rbcm))
    }

    /// [`QueryScores::of`] of the answers weighted by `cal.weight` with every variance times
    /// `cal.scale` (the uncalibrated scores of the weighted answers, and the RMSE of the
    /// unweighted ones, beside).
    fn calibrated(answers: &[LocalAnswer], y: &[f64], y_scale: f64, cal: &RuleCalibration) -> Self {
        if y.is_empty() {
            return Self::NAN;
        }
        let rmse_unweighted = rmse(
            &answers.iter().map(LocalAnswer::mean).collect::<Vec<_>>(),
            y,
        );
        let rmse_global = rmse(
            &answers.iter().map(|a| a.global_mean).collect::<Vec<_>>(),
            y,
        );
        let answers: Vec<LocalAnswer> = answers.iter().map(|a| a.shrunk(cal.weight)).collect();
        let scale = cal.scale;
        let p = Prediction {
            mean: answers.iter().map(LocalAnswer::mean).collect(),
            var_f: answers.iter().map(LocalAnswer::var_f).collect(),
            var_y: answers.iter().map(LocalAnswer::var_y).collect(),
        };
        let scaled = Prediction {
            mean: p.mean.clone(),
            var_f: p.var_f.iter().map(|v| v * scale).collect(),
            var_y: p.var_y.iter().map(|v| v * scale).collect(),
        };
        Self {
            rmse: rmse(&p.mean, y) * y_scale,
            nlpd: scaled.nlpd(y) + y_scale.ln(),
            coverage95: coverage95(&scaled, y),
            var_scale: scale,
            weight: cal.weight,
            rmse_unweighted: rmse_unweighted * y_scale,
            rmse_global: rmse_global * y_scale,
            nlpd_raw: p.nlpd(y) + y_scale.ln(),
            coverage95_raw: coverage95(&p, y),
        }
    }

    /// The mean of several test sets' scores (NaN if none).
    fn mean(all: &[Self]) -> Self {
        if all.is_empty() {
            return Self::NAN;
        }
        let k = all.len() as f64;
        let avg = |f: fn(&Self) -> f64| all.iter().map(f).sum::<f64>() / k;
        Self {
            rmse: avg(|s| s.rmse),
            nlpd: avg(|s| s.nlpd),
            coverage95: avg(|s| s.coverage95),
            var_scale: avg(|s| s.var_scale),
            weight: avg(|s| s.weight),
            rmse_unweighted: avg(|s| s.rmse_unweighted),
            rmse_global: avg(|s| s.rmse_global),
            nlpd_raw: avg(|s| s.nlpd_raw),
            coverage95_raw: avg(|s| s.coverage95_raw),
        }
    }
}

/// What the fleet-wide queries measured.
pub(super) struct FleetQuery {
    /// Each rule's scores, by its name (the union rules of `--union-k` too).
    pub rules: BTreeMap<String, QueryScores>,
    /// What each union rule did, by its name (empty without `--union-k`).
    pub union: BTreeMap<String, UnionStats>,
    /// The oracle's scores (over the rows whose group is known), if any row's is.
    pub oracle: Option<QueryScores>,
    /// The run's rule's RMSE (original units) on the rows of each routing group (`None` for a
    /// group without a row).
    pub by_group: Vec<Option<f64>>,
    /// Rows the calibration was measured on ([`super::calibrate`]).
    pub calibration_rows: usize,
    /// Agents that answered each query row, on average.
    pub answers_per_row: f64,
    /// The rule of the run's `*_fleet_query` scores: `--fleet-rule`, or the one `auto` chose.
    pub rule: FleetRule,
    /// CPU seconds of the calibration (the process's, all threads; 0 where unknown).
    pub calibration_cpu_s: f64,
    /// Mean rows in the agents' local memories.
    pub local_points_mean: f64,
    /// Mean bytes of local state per agent ([`local_bytes`]).
    pub local_bytes_per_agent: f64,
}

impl Fleet<'_> {
    /// Every agent answers the first [`QUERY_POINTS`] rows of each test set with its fused
    /// q(u) and its local memory; the answers are combined under each rule of [`RULES`] and,
    /// where a row's group is known, by the oracle: the smallest-variance answer among the
    /// agents of the row's group (its one agent when groups and agents match). Scores are
    /// means over the test sets. An agent that cannot answer (no factorizable model) is left
    /// out of the combination.
    pub(super) fn fleet_query(&self) -> FleetQuery {
        let y_scale = self.work.y_scale;
        let mut per_rule: Vec<Vec<QueryScores>> = vec![Vec::new(); RULES.len()];
        let mut oracle = Vec::new();
        let mut by_group = GroupErrors::new(self.work.groups);
        let mut per_union: Vec<Vec<QueryScores>> = vec![Vec::new(); self.cfg.union.len()];
        let mut union = vec![UnionStats::default(); self.cfg.union.len()];
        let cpu = cpu_seconds();
        // Contained suspects (issue 29) neither offer rows nor answer.
        let excluded = self.contained();
        let calibration = calibrate(&self.agents, RULES, &excluded, self.cfg.route);
        let calibration_cpu_s = cpu.zip(cpu_seconds()).map_or(0.0, |(a, b)| b - a);
        let chosen = self
            .cfg
            .fleet_rule
            .or_else(|| calibration.best())
            .unwrap_or(FleetRule::Rbcm);
        let (mut asked_pairs, mut asked_rows) = (0usize, 0usize);
        for t in &self.work.tests {
            let w = window(t, 0, QUERY_POINTS);
            let cpu = cpu_seconds();
            let who = self
                .cfg
                .route
                .map(|k| routes(&self.agents, &excluded, w.x.as_ref(), k, None));
            let asked = Asked::ask(&self.agents, &excluded, w.x.as_ref(), who);
            asked_pairs += asked.count();
            asked_rows += w.y.len();
            let answers_cpu = cpu.zip(cpu_seconds()).map_or(0.0, |(a, b)| b - a);
            let n = w.y.len();
            for (r, &rule) in RULES.iter().enumerate() {
                let combined: Vec<LocalAnswer> = (0..n)
                    .into_par_iter()
                    .map(|i| combine(rule, &asked.answers_at(i)))
                    .collect::<Option<_>>()
                    .unwrap_or_default();
                if rule == chosen && combined.len() == n {
                    by_group.add(&w, &combined);
                }
                per_rule[r].push(if combined.len() == n {
                    QueryScores::calibrated(&combined, &w.y, y_scale, &calibration.of(rule))
                } else {
                    QueryScores::NAN
                });
            }
            if let Some(s) = self.oracle_scores(&w, &excluded, &asked) {
                oracle.push(s);
            }
            for (u, &rule) in self.cfg.union.iter().enumerate() {
                let (start, cpu) = (Instant::now(), cpu_seconds());
                let got = match asked.everyone() {
                    Some(all) => self.union_answers(rule, &w, &all),
                    None => {
                        let who = None;
                        let all = Asked::ask(&self.agents, &excluded, w.x.as_ref(), who);
                        all.everyone()
                            .and_then(|all| self.union_answers(rule, &w, &all))
                    }
                };
                let (scores, mut stats) = match got {
                    Some((a, stats)) => (QueryScores::of(&a, &w.y, y_scale), stats),
                    None => (QueryScores::NAN, UnionStats::default()),
                };
                stats.wall_s = start.elapsed().as_secs_f64();
                stats.cpu_s = cpu.zip(cpu_seconds()).map_or(0.0, |(a, b)| b - a);
                stats.answers_cpu_s = answers_cpu;
                per_union[u].push(scores);
                union[u].merge(&stats);
            }
        }
        let union_names = self.cfg.union.iter().map(|r| r.name());
        let na = self.agents.len().max(1) as f64;
        FleetQuery {
            rules: RULES
                .iter()
                .map(|rule| rule.name().to_owned())
                .chain(union_names.clone())
                .zip(per_rule.iter().chain(&per_union))
                .map(|(name, s)| (name, QueryScores::mean(s)))
                .collect(),
            union: union_names.zip(union).collect(),
            oracle: (!oracle.is_empty()).then(|| QueryScores::mean(&oracle)),
            by_group: by_group.rmse(y_scale),
            calibration_rows: calibration.rows,
            answers_per_row: asked_pairs as f64 / asked_rows.max(1) as f64,
            calibration_cpu_s,
            rule: chosen,
            local_points_mean: self
                .agents
                .iter()
                .map(|a| a.local_points() as f64)
                .sum::<f64>()
                / na,
            local_bytes_per_agent: self
                .agents
                .iter()
                .map(|a| local_bytes(a) as f64)
                .sum::<f64>()
                / na,
        }
    }

    /// The oracle's scores on the rows of `w` whose group is known: the smallest-variance
    /// answer among the agents of the row's group ([`members`]), asked directly when the
    /// query was routed; `None` if no row's group is.
    fn oracle_scores(&self, w: &TestSet, excluded: &[bool], asked: &Asked) -> Option<QueryScores> {
        let groups = self.work.groups.max(1);
        let group_of = |i: usize| w.group(i).map(|g| members(self.cfg.agents, groups, g));
        let direct;
        let asked = if self.cfg.route.is_some() {
            let who = (0..w.y.len())
                .map(|i| group_of(i).unwrap_or_default())
                .collect();
            direct = Asked::ask(&self.agents, excluded, w.x.as_ref(), Some(who));
            &direct
        } else {
            asked
        };
        let (mut picked, mut y) = (Vec::new(), Vec::new());
        for i in 0..w.y.len() {
            let Some(who) = group_of(i) else { continue };
            let at: Vec<LocalAnswer> = asked
                .at(i)
                .into_iter()
                .filter(|(a, _)| who.contains(a))
                .map(|(_, a)| a)
                .collect();
            if let Some(a) = combine(FleetRule::MinVariance, &at) {
                picked.push(a);
                y.push(w.y[i]);
            }
        }
        (!y.is_empty()).then(|| QueryScores::of(&picked, &y, self.work.y_scale))
    }
}

/// Squared errors of the combined answers summed per routing group.
struct GroupErrors {
    /// `(Σ (mean − y)², rows)` per group.
    sums: Vec<(f64, usize)>,
}

impl GroupErrors {
    fn new(groups: usize) -> Self {
        Self {
            sums: vec![(0.0, 0); groups],
        }
    }

    /// Adds the answers at the rows of `w` whose group is known.
    fn add(&mut self, w: &TestSet, answers: &[LocalAnswer]) {
        for (i, a) in answers.iter().enumerate() {
            if let Some(s) = w.group(i).and_then(|g| self.sums.get_mut(g)) {
                let e = a.mean() - w.y[i];
                s.0 += e * e;
                s.1 += 1;
            }
        }
    }

    /// Each group's RMSE in original units.
    fn rmse(&self, y_scale: f64) -> Vec<Option<f64>> {
        self.sums
            .iter()
            .map(|&(sse, n)| (n > 0).then(|| (sse / n as f64).sqrt() * y_scale))
            .collect()
    }
}

/// Bytes of agent `a`'s local state, 8 per value: the memory's rows and targets
/// (`n·(d + 1)`), the rows' residual-kernel features (`n·f`) and the Cholesky factor of
/// `K_r(B,B) + σ²I` (`n²`), for `n` rows in the memory.
pub fn local_bytes(a: &Agent) -> usize {
    let local = a.local();
    let n = local.len();
    let rows = local.memory().x().len() + local.memory().y().len();
    let feats = n * local.kernel().feature_len(a.vocabulary().m());
    8 * (rows + feats + n * n)
}
