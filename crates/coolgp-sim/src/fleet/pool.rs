//! The fleet-wide fit of the agents' learned residual kernel (issue 19, docs/LOCAL.md §9):
//! after each fusion, every agent's sample of its memory (its share of
//! [`PoolOptions::rows`]), one fit on the pooled samples (or, by default, candidates fitted
//! on half of them and chosen on the other half), and the result to every agent.

use std::time::Instant;

use coolgp::local::composite::Groups;
use coolgp::local::consensus::median_kernel;
use coolgp::local::groups::{GroupOptions, Neighbourhood, RowRef};
use coolgp::local::pool::{cold_due, fit_pooled, fit_pooled_selected, halves, shares, Selected};
use coolgp::local::select::{fit_grouped_selected, GroupedFit};
use coolgp::local::{
    FitSample, LocalFit, PoolOptions, PoolSample, ResidualFamily, ResidualKernel, ResidualKind,
};
use coolgp::{Agent, Vocabulary};
use rayon::prelude::*;

use super::duel::family_on_the_fleet_task;
use super::Fleet;

impl Fleet<'_> {
    /// With `--local-fit agent` (and a learned residual kernel): the consensus of the agents'
    /// own fits ([`adopt_consensus`]). With `--local-fit fleet`: one pooled fit
    /// ([`fit_agents_pooled`]) from the previous pooled parameters ([`PoolOptions::warm_start`],
    /// the default) or else from the agents' initial kernel; with [`PoolOptions::validate`]
    /// (the default) the warm continuation or, at the fusions [`cold_due`] picks
    /// ([`PoolOptions::cold_growth`]), a cold start, whichever held-out evidence prefers
    /// ([`fit_agents_selected`]). Counted in the learning phase's time. With `COOLGP_POOL_LOG`
    /// set, one line per pooled fit on stderr.
    pub(super) fn fit_local_pooled(&mut self) {
        let local = self.cfg.local;
        if !local.is_on() || local.kernel != ResidualKind::Learned {
            return;
        }
        let t = Instant::now();
        // Contained suspects' rows stay out of the fit (issue 29).
        let excluded = self.contained();
        if local.fit == LocalFit::Agent {
            adopt_consensus(&mut self.agents, &excluded);
            self.phases.learn_s += t.elapsed().as_secs_f64();
            return;
        }
        let Some(a0) = self.agents.first() else {
            return;
        };
        let initial = self
            .local_initial
            .get_or_insert_with(|| a0.local().kernel().clone());
        let opts = &self.cfg.pool;
        let (start, first) = match self.local_pooled {
            true if opts.warm_start => (a0.local().kernel().clone(), false),
            _ => (initial.clone(), true),
        };
        // The stream's rows at the previous fusion (`done` still counts its batches).
        let before: usize = self.dispatch.order[..self.done]
            .iter()
            .map(|&b| self.work.batches[b].y.len())
            .sum();
        let cold = cold_due(before as u64, self.points as u64, opts.cold_growth);
        let (fitted, chosen) = if opts.sample == PoolSample::Near {
            // The warm chain first, then the other families' own chains.
            let warm = (!first).then(|| (start.family(), start.params()));
            let others = self
                .local_chains
                .iter()
                .filter(|c| !first && c.0 != start.family());
            let chains: Vec<(ResidualFamily, &[f64])> = warm
                .into_iter()
                .chain(others.map(|(f, p)| (*f, &p[..])))
                .collect();
            let pick = (&chains[..], initial.params(), cold, &opts.families[..]);
            match fit_agents_near(&mut self.agents, &excluded, pick) {
                Some(s) => {
                    s.keep_chains(&mut self.local_chains);
                    let log = format!(
                        "{} {:?} {:?}; fleet task {:?}",
                        s.family.name(),
                        s.chosen,
                        s.scores,
                        s.fleet_task
                    );
                    (Some(s.params), log)
                }
                None => (None, String::new()),
            }
        } else if opts.validate {
            let (warm, initial) = ((!first).then_some(&start), initial.clone());
            let pick = (warm, &initial, cold);
            match fit_agents_selected(&mut self.agents, &excluded, &self.vocab, opts, pick) {
                Some(s) => {
                    let log = format!("{} {:?} {:?}", s.family.name(), s.chosen, s.scores);
                    (Some(s.params), log)
                }
                None => (None, String::new()),
            }
        } else {
            let p = fit_agents_pooled(&mut self.agents, &excluded, opts, &start, first);
            (p, String::new())
        };
        if let Some(p) = fitted
            .as_ref()
            .filter(|_| std::env::var_os(POOL_LOG).is_some())
        {
            eprintln!(
                "pooled fit: {} training points; params {p:?}; {chosen}",
                self.points
            );
        }
        if fitted.is_some() {
            self.local_pooled = true;
        }
        self.phases.learn_s += t.elapsed().as_secs_f64();
    }
}

/// `--local-fit agent` (docs/LOCAL.md §12b): the median of the kernels of the agents that
/// have fitted on their own rows and are not `excluded` (contained suspects,
/// [`median_kernel`]), taken by every agent that does not hold it yet
/// ([`Agent::adopt_local_kernel`]; its own fit schedule kept). Returns the consensus (`None`: no agent has fitted yet, nothing changed).
pub fn adopt_consensus(
    agents: &mut [Agent],
    excluded: &[bool],
) -> Option<(ResidualFamily, Vec<f64>)> {
    let d = agents.first()?.local().memory().d();
    let fitted = agents
        .iter()
        .enumerate()
        .filter(|(i, a)| !excluded.get(*i).copied().unwrap_or(false) && a.local().fit_state().0 > 0)
        .map(|(_, a)| (a.local().kernel().family(), a.local().kernel().params()));
    let (family, params) = median_kernel(d, fitted)?;
    agents.par_iter_mut().for_each(|a| {
        // An agent that holds it already keeps its factor.
        let k = a.local().kernel();
        if k.family() != family || k.params() != &params[..] {
            let _ = a.adopt_local_kernel(family, &params);
        }
    });
    Some((family, params))
}

/// The environment variable that makes [`Fleet::fit_local_pooled`] log each pooled fit.
const POOL_LOG: &str = "COOLGP_POOL_LOG";

/// What [`fit_agents_near`] starts from: the warm chains (the previous fleet kernel's family
/// and parameters first, then other families' last fits; empty at the first fit), the agents'
/// initial parameters, whether every start is fitted, and the families whose starts are.
pub type NearPick<'a> = (
    &'a [(ResidualFamily, &'a [f64])],
    &'a [f64],
    bool,
    &'a [ResidualFamily],
);

/// One fleet-wide fit of the learned residual kernel over `agents`: agent i offers
/// `shares(opts.rows, agents)[i]` evenly spaced rows of its memory with their residuals
/// against its global model ([`Agent::local_fit_sample`]; an agent that cannot offer one
/// offers none), the kernel is fitted once on the pooled rows in agent order
/// ([`fit_pooled`] from `start`, a first fit if `first`), and every agent takes
/// the parameters ([`Agent::set_local_kernel_params`]; an agent whose memory cannot then be
/// factored leaves its memory unused until the next fit). Deterministic. Returns the
/// parameters (`None`: no fit, nothing changed).
pub fn fit_agents_pooled(
    agents: &mut [Agent],
    excluded: &[bool],
    opts: &PoolOptions,
    start: &ResidualKernel,
    first: bool,
) -> Option<Vec<f64>> {
    let samples = offered(agents, &shares(opts.rows, agents.len()), excluded);
    let params = fit_pooled(start, &samples, first, opts)?;
    take(agents, start.family(), &params);
    Some(params)
}

/// [`fit_agents_pooled`] chosen by held-out evidence ([`fit_pooled_selected`], docs/LOCAL.md
/// §9): agent i offers twice its share, its even rows join the fit sample (with `2k` rows
/// at most the memory's, the very rows [`fit_agents_pooled`] fits) and its odd rows the
/// validation sample; the candidates are the continuation of `warm` (if given) and, if `cold`
/// (or without `warm`), a cold start from `initial`: `pick = (warm, initial, cold)`. Every
/// agent takes the chosen parameters. Deterministic.
fn fit_agents_selected(
    agents: &mut [Agent],
    excluded: &[bool],
    vocab: &Vocabulary,
    opts: &PoolOptions,
    pick: (Option<&ResidualKernel>, &ResidualKernel, bool),
) -> Option<Selected> {
    let (warm, initial, cold) = pick;
    let share: Vec<usize> = shares(opts.rows, agents.len())
        .iter()
        .map(|k| 2 * k)
        .collect();
    let (fit, validation): (Vec<FitSample>, Vec<FitSample>) =
        offered(agents, &share, excluded).iter().map(halves).unzip();
    let selected = fit_pooled_selected(warm, initial, cold, vocab, &fit, &validation, opts)?;
    take(agents, selected.family, &selected.params);
    Some(selected)
}

/// The fleet's fit on neighbourhood groups (docs/LOCAL.md §11): the anchors and their groups
/// over every agent's memory ([`Neighbourhood`], [`GroupOptions::default`]), each group's rows
/// with their residuals against their agent's global model ([`Agent::local_fit_rows`]), and
/// the kernel chosen among the starts by the held-out groups' leave-one-out score
/// ([`fit_grouped_selected`]; `pick = (warm, initial, explore, families)`: the previous
/// fleet kernel's family and parameters, the agents' initial parameters, every start of every
/// family of `families` at the fusions where `explore` ([`cold_due`]), else the warm chain
/// alone unless its held-out errors are off); where more than one family was fitted, the
/// family is chosen on the fleet query's own task ([`family_on_the_fleet_task`],
/// docs/LOCAL.md §12c). Every agent takes the chosen family and parameters. Deterministic.
pub fn fit_agents_near(
    agents: &mut [Agent],
    excluded: &[bool],
    pick: NearPick<'_>,
) -> Option<GroupedFit> {
    let (warm, initial, explore, families) = pick;
    let opts = GroupOptions::default();
    let d = agents.first()?.local().memory().d();
    let (fit, held) = {
        let rows: Vec<&[f64]> = agents
            .iter()
            .enumerate()
            .map(|(i, a)| match excluded.get(i) {
                Some(true) => &[][..],
                _ => a.local().memory().x(),
            })
            .collect();
        let hood = Neighbourhood::new(d, rows);
        let (fit_anchors, held_anchors) = hood.anchors(&opts);
        // The warm kernel's metric (its inverse lengthscales; the sum's short part) adds the
        // rows it claims.
        let kernel: Option<Vec<f64>> = warm
            .first()
            .map(|(_, p)| p[2..2 + d].iter().map(|l| (-l).exp()).collect());
        let group = |anchors: &[RowRef]| -> Vec<Vec<RowRef>> {
            anchors
                .par_iter()
                .map(|&a| hood.group(a, &opts, kernel.as_deref()))
                .collect()
        };
        (group(&fit_anchors), group(&held_anchors))
    };
    // Each agent's residuals at the rows any group uses, once.
    let mut wanted: Vec<Vec<usize>> = vec![Vec::new(); agents.len()];
    for &(a, i) in fit.iter().chain(&held).flatten() {
        wanted[a].push(i);
    }
    wanted.iter_mut().for_each(|w| {
        w.sort_unstable();
        w.dedup();
    });
    let samples: Vec<Option<FitSample>> = agents
        .par_iter()
        .zip(wanted.par_iter())
        .map(|(a, w)| (!w.is_empty()).then(|| a.local_fit_rows(w).ok()).flatten())
        .collect();
    let build = |groups: &[Vec<RowRef>]| {
        let mut out = Groups::new(d);
        for g in groups {
            let (mut x, mut r, mut ids) = (Vec::new(), Vec::new(), Vec::new());
            for &(a, i) in g {
                let (Some(s), Ok(k)) = (&samples[a], wanted[a].binary_search(&i)) else {
                    continue;
                };
                if s.len() == wanted[a].len() {
                    x.extend_from_slice(&s.x()[k * d..(k + 1) * d]);
                    r.push(s.r()[k]);
                    // Each row's agent: the sum family's offset (docs/LOCAL.md §12a).
                    ids.push(a as u64);
                }
            }
            let _ = out.push_from(&x, &r, &ids);
        }
        out
    };
    let groups = (&build(&fit), &build(&held));
    let chosen = fit_grouped_selected(warm, initial, groups, explore, families)?;
    let incumbent = warm.first().map(|w| w.0).or(families.first().copied());
    let chosen = family_on_the_fleet_task(agents, excluded, chosen, incumbent);
    take(agents, chosen.family, &chosen.params);
    Some(chosen)
}

/// Agent i's sample of `share[i]` memory rows ([`Agent::local_fit_sample`]; none if it cannot
/// offer one, or if `excluded[i]`).
fn offered(agents: &[Agent], share: &[usize], excluded: &[bool]) -> Vec<FitSample> {
    agents
        .par_iter()
        .zip(share.par_iter())
        .enumerate()
        .map(|(i, (a, &k))| match k {
            _ if excluded.get(i).copied().unwrap_or(false) => FitSample::default(),
            0 => FitSample::default(),
            k => a.local_fit_sample(k).unwrap_or_default(),
        })
        .collect()
}

/// Every agent takes the kernel of `family` with `params` (one whose memory cannot be
/// factored leaves it unused until the next fit).
fn take(agents: &mut [Agent], family: ResidualFamily, params: &[f64]) {
    agents.par_iter_mut().for_each(|a| {
        let _ = a.set_local_kernel(family, params);
    });
}
