//! Streaming a fleet (paper §5; spec §13–§14): the batches in random order, each a block of
//! its agent's online update, periodic fusions of q(u), the fleet projection mode's site
//! fusions and warm-ups, and a learning-curve point after each fusion of q(u).

use std::time::Instant;

use coolgp::rng::Rng;
use coolgp::{Agent, FusionRule, View};
use rayon::prelude::*;

use super::fuse::Fusion;
use super::{spaced, Fleet, Progress};
use crate::config::SimConfig;
use crate::eval::{eval_both, mean_over, rmse_with};
use crate::network::NetStats;
use crate::report::CurvePoint;
use crate::workload::Workload;
use crate::SimError;

/// The order in which the batches arrive and the agent each goes to.
pub(super) struct Dispatch {
    /// Batch indices in arrival order.
    pub order: Vec<usize>,
    /// The agent of the k-th arrival.
    owner: Vec<usize>,
}

impl Dispatch {
    /// The paper's dispatch: the batches in random order (the workload's order without
    /// `cfg.shuffle`), each to a uniformly random agent; a batch of routing group g to a
    /// random agent of that group (agent i is in group `i % groups`), or with fewer agents
    /// than groups to agent `g % agents`.
    pub fn new(cfg: &SimConfig, work: &Workload) -> Self {
        let mut rng = Rng::new(cfg.seed, 0x57AE);
        let mut order: Vec<usize> = (0..work.batches.len()).collect();
        if cfg.shuffle {
            rng.shuffle(&mut order);
        }
        let groups = work.groups.max(1);
        let owner = order
            .iter()
            .map(|&b| match work.batches[b].group {
                Some(g) if cfg.agents >= groups => {
                    let g = g % groups;
                    let members = (cfg.agents - g).div_ceil(groups);
                    g + groups * rng.below(members)
                }
                Some(g) => g % cfg.agents,
                None => rng.below(cfg.agents),
            })
            .collect();
        Self { order, owner }
    }

    /// Batches in the stream.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Each agent's batches among arrivals `start..stop`, in arrival order.
    fn deal(&self, agents: usize, start: usize, stop: usize) -> Vec<Vec<usize>> {
        let mut per_agent: Vec<Vec<usize>> = vec![Vec::new(); agents];
        for k in start..stop {
            per_agent[self.owner[k]].push(self.order[k]);
        }
        per_agent
    }
}

/// The agents that receive the batches of routing group `g` (of `groups`) in a fleet of
/// `agents` ([`Dispatch::new`]): `g, g + groups, g + 2·groups, …`, or with fewer agents than
/// groups agent `g % agents` alone.
pub(super) fn members(agents: usize, groups: usize, g: usize) -> Vec<usize> {
    let g = g % groups.max(1);
    if agents >= groups {
        (g..agents).step_by(groups.max(1)).collect()
    } else {
        vec![g % agents.max(1)]
    }
}

/// Blocks per agent (on average) an epoch must span for its members to be probed at its site
/// fusions ([`Fleet::probe_pending`]): shorter epochs already check each agent within a few
/// of its blocks (airline by 100 regions: 1–2.5 blocks an epoch, where probing cost 6× the
/// check's CPU), longer ones (10 blocks of 5 at batch 5) delay a fault's mark.
const PROBE_BLOCKS: usize = 3;

/// When the fleet fuses, in batches of the stream.
pub(super) struct Cadence {
    /// Batches between two fusions of q(u) (`fuse_every`; 0: the whole stream).
    pub chunk: usize,
    /// Batches between two site fusions (fleet projection mode; else `chunk`).
    pub site_chunk: usize,
    /// Sites fuse on their own (fleet projection mode).
    sites_apart: bool,
    /// The agents have projection groups.
    grouped: bool,
    /// Tree rule in the fleet projection mode: warm-up fusions of q(u).
    warmup: bool,
    /// Tree fusion (sites fuse before q(u) with groups).
    tree: bool,
}

impl Cadence {
    /// The cadence of `cfg` for a stream of `total` batches: q(u) every `fuse_every` batches;
    /// in the fleet projection mode (`fleet`) the sites more often than q(u) (spec §14: every
    /// `site_every` batches, by default every 1% of the stream or every round of blocks,
    /// whichever is sooner); under push-sum a site fusion is a whole fusion.
    pub fn new(
        cfg: &SimConfig,
        total: usize,
        fleet: bool,
        rule: FusionRule,
        grouped: bool,
    ) -> Self {
        let chunk = if cfg.fuse_every == 0 {
            total.max(1)
        } else {
            cfg.fuse_every
        };
        let sites_apart = fleet;
        let site_chunk = if sites_apart {
            cfg.site_every
                .unwrap_or_else(|| total.div_ceil(100).min(cfg.agents))
                .max(1)
        } else {
            chunk
        };
        Self {
            chunk,
            site_chunk,
            sites_apart,
            grouped,
            warmup: cfg.fuse_warmup && sites_apart && rule == FusionRule::Tree,
            tree: rule == FusionRule::Tree,
        }
    }

    /// Where the epoch that starts at `done` ends: `chunk` batches on; before the first
    /// regular fusion with warm-ups (SimConfig::fuse_warmup), each time the stream has
    /// doubled since the first site fusion.
    fn next_fusion(&self, done: usize, total: usize) -> usize {
        if self.warmup && done < self.chunk {
            (2 * done).max(self.site_chunk).min(self.chunk)
        } else {
            done + self.chunk
        }
        .min(total)
    }

    /// Whether the sites fuse after the sub-chunk that stops at `stop` of an epoch ending at
    /// `end`. The last sub-chunk's sites travel with the q(u) fusion that follows; with
    /// groups they fuse first, so that every agent's excess is in its group's settled scales
    /// when q(u) is fused (the fusion is then exact on trees).
    fn sites_after(&self, stop: usize, end: usize) -> bool {
        self.sites_apart && (stop < end || (self.grouped && self.tree))
    }
}

impl Fleet<'_> {
    /// Streams the whole workload: epoch by epoch, the agents absorb their batches (with the
    /// site fusions of the fleet projection mode) while the central learner absorbs them
    /// all, then the fleet fuses q(u) ([`Fleet::fuse`]) and, if the workload has test sets,
    /// a learning-curve point is taken. `progress` hears of each epoch.
    ///
    /// # Errors
    /// [`SimError::Core`] if an agent rejects a block.
    pub fn stream(&mut self, progress: Progress<'_>) -> Result<(), SimError> {
        let total = self.dispatch.len();
        while self.done < total {
            let end = self.cadence.next_fusion(self.done, total);
            // Sub-chunk by sub-chunk while some member awaits a clear verdict, in an epoch
            // of at least PROBE_BLOCKS blocks per agent: the epoch ends early, at the
            // sub-chunk that makes one suspect ([`Fleet::probe_pending`]).
            let long = end - self.done >= PROBE_BLOCKS * self.agents.len();
            let mut stop = self.done;
            while stop < end {
                let from = stop;
                stop = if long && self.awaits_verdict() {
                    (from + self.cadence.site_chunk).min(end)
                } else {
                    end
                };
                self.absorb(from, stop, end)?;
                if stop < end && self.probe_pending() {
                    break;
                }
            }
            self.points += self.dispatch.order[self.done..stop]
                .iter()
                .map(|&b| self.work.batches[b].y.len())
                .sum::<usize>();
            self.fuse();
            let t = Instant::now();
            self.done = stop;
            progress(stop, total);
            if !self.work.tests.is_empty() {
                let point = self.curve_point();
                self.curves.push(point);
            }
            self.phases.eval_s += t.elapsed().as_secs_f64();
        }
        Ok(())
    }

    /// Part of one epoch's learning, arrivals `from..stop` of the epoch ending at `end`: the
    /// fleet's blocks (and site fusions) alongside the central learner's.
    fn absorb(&mut self, from: usize, stop: usize, end: usize) -> Result<(), SimError> {
        let Self {
            work,
            agents,
            central,
            dispatch,
            cadence,
            fusion,
            site_rng,
            ..
        } = self;
        let work: &Workload = work;
        let fleet_step = || {
            fleet_epoch(
                agents,
                work,
                dispatch,
                cadence,
                fusion,
                site_rng,
                (from, stop, end),
            )
        };
        let central_step = || -> Result<(), coolgp::Error> {
            if let Some(c) = central.as_mut() {
                absorb_all(c, work, &dispatch.order[from..stop])?;
            }
            Ok(())
        };
        let t = Instant::now();
        let (r1, r2) = rayon::join(fleet_step, central_step);
        let (site_net, site_s) = r1?;
        r2?;
        self.net.add_all(site_net);
        self.phases.learn_s += t.elapsed().as_secs_f64() - site_s;
        self.phases.fusion_s += site_s;
        Ok(())
    }

    /// A learning-curve point: the mean RMSE of the evaluated agents' own and fused q(u) (on
    /// the first `curve_points` test points) and of the central learner.
    fn curve_point(&self) -> CurvePoint {
        let (cfg, work) = (self.cfg, self.work);
        let curve_ids = spaced(cfg.agents, cfg.curve_agents);
        let evals: Vec<(f64, f64)> = curve_ids
            .par_iter()
            .map(|&i| {
                let t = self.test_of(i);
                let n = t.y.len().min(cfg.curve_points);
                let xs = t.x.as_ref().subrows(0, n);
                eval_both(&self.agents[i], xs, &t.y[..n])
            })
            .collect();
        let k = evals.len().max(1) as f64;
        let rmse_central = self.central.as_ref().map(|c| {
            let alpha = c.mean_weights(View::Own).ok();
            mean_over(&work.tests, cfg.curve_points, |x, y| {
                rmse_with(c, alpha.as_deref(), x, y)
            }) * work.y_scale
        });
        CurvePoint {
            batches: self.done,
            points: self.points,
            rmse_pre: evals.iter().map(|e| e.0).sum::<f64>() / k * work.y_scale,
            rmse_post: evals.iter().map(|e| e.1).sum::<f64>() / k * work.y_scale,
            rmse_central,
            rmse_ddtc: None,
            rmse_dpitc: None,
            per_agent: curve_ids
                .iter()
                .zip(&evals)
                .map(|(&i, e)| (i, e.0 * work.y_scale, e.1 * work.y_scale))
                .collect(),
        }
    }
}

/// The fleet's part of arrivals `from..stop` of an epoch ending at `end` (`from` on a
/// sub-chunk's start): sub-chunk by sub-chunk, each agent absorbs its batches (in parallel
/// over agents), then the sites fuse ([`Cadence::sites_after`]). Returns the site fusions'
/// counters and wall seconds.
fn fleet_epoch(
    agents: &mut [Agent],
    work: &Workload,
    dispatch: &Dispatch,
    cadence: &Cadence,
    fusion: &Fusion,
    site_rng: &mut Rng,
    (from, to, end): (usize, usize, usize),
) -> Result<(NetStats, f64), coolgp::Error> {
    let (mut site_net, mut site_s) = (NetStats::default(), 0.0);
    for start in (from..to).step_by(cadence.site_chunk) {
        let stop = (start + cadence.site_chunk).min(to);
        let per_agent = dispatch.deal(agents.len(), start, stop);
        agents
            .par_iter_mut()
            .zip(per_agent.par_iter())
            .try_for_each(|(a, bs)| absorb_all(a, work, bs))?;
        if cadence.sites_after(stop, end) {
            let t = Instant::now();
            site_net.add_all(fusion.fuse_sites(agents, site_rng));
            site_s += t.elapsed().as_secs_f64();
        }
    }
    Ok((site_net, site_s))
}

/// Agent `a` absorbs batches `batches` of the stream, one block each, in order.
fn absorb_all(a: &mut Agent, work: &Workload, batches: &[usize]) -> Result<(), coolgp::Error> {
    for &b in batches {
        let bt = &work.batches[b];
        a.handle_block(bt.x.as_ref(), &bt.y)?;
    }
    while a.poll_event().is_some() {}
    Ok(())
}
