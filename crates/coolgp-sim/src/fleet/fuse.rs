//! Fusion of the fleet (spec §7; paper §4.2): which rule and schedule a run fuses with, and
//! one fusion of q(u) or of the fleet projection mode's sites (spec §14).

use std::time::Instant;

use coolgp::fuse::tree::two_pass_schedule;
use coolgp::rng::Rng;
use coolgp::{Agent, FusionRule, Topology};
use rayon::prelude::*;

use super::Fleet;
use crate::config::{FusionChoice, Schedule, SimConfig};
use crate::groups::GroupPlan;
use crate::network::{
    run_rounds, run_schedule, run_schedule_of, run_site_rounds, run_until_settled, NetStats,
    Payload, Settle, SettledRounds,
};
use crate::SimError;

/// How the fleet fuses: the rule (tree message passing or push-sum), when messages are sent
/// (two-pass schedule or synchronous rounds), and how many rounds one fusion runs.
pub(super) struct Fusion {
    /// Tree message passing or push-sum.
    pub rule: FusionRule,
    /// The rule's name in the report: `tree`, `spanning-tree` or `push-sum`.
    pub name: &'static str,
    /// Each tree message once, leaves up then root down (else synchronous rounds).
    two_pass: bool,
    /// The two-pass schedule's steps (edges `(sender, receiver)` per step).
    steps: Vec<Vec<(usize, usize)>>,
    /// Rounds per fusion (two-pass: its steps).
    rounds: usize,
    /// Push-sum without `--rounds`: rounds until the estimates settle.
    settle: Option<Settle>,
    /// The rounds the settling fusions took.
    settled: SettledRounds,
    /// Probability that one transmission is lost.
    loss: f64,
    /// The longest diameter over the graph's parts (`None`: a part is not connected).
    pub diameter: Option<usize>,
}

impl Fusion {
    /// Resolves `--fusion`, `--schedule` and `--rounds` on the graphs of `plan`'s parts:
    /// tree message passing on trees (on a BFS spanning tree with `spanning-tree`), push-sum
    /// on graphs with cycles; the two-pass schedule for loss-free tree fusion with the
    /// default rounds. Returns the fusion and the fleet's graph (the parts' graphs side by
    /// side).
    ///
    /// # Errors
    /// [`SimError::Config`] for tree fusion on a graph with cycles (it double counts, spec
    /// §7), or for a two-pass schedule that push-sum or `--rounds` rule out.
    pub fn plan(cfg: &SimConfig, plan: &GroupPlan) -> Result<(Self, Topology), SimError> {
        let graphs = plan.graphs(cfg.topology, cfg.seed);
        let (graphs, rule) = match (cfg.fusion, graphs.iter().all(Topology::is_tree)) {
            (FusionChoice::Tree, false) => {
                return Err(SimError::Config(format!(
                    "--fusion tree on a {:?} graph with cycles would double count (spec §7); use push-sum or spanning-tree",
                    cfg.topology
                )))
            }
            (FusionChoice::Auto | FusionChoice::Tree, true) => (graphs, FusionRule::Tree),
            (FusionChoice::SpanningTree, _) => (
                graphs.iter().map(Topology::bfs_spanning_tree).collect(),
                FusionRule::Tree,
            ),
            (FusionChoice::PushSum, _) | (FusionChoice::Auto, false) => (
                graphs,
                FusionRule::PushSum {
                    agents: cfg.agents as f64,
                    weight: 1.0,
                },
            ),
        };
        // The longest diameter over the parts (each part is connected).
        let diameter = graphs
            .iter()
            .map(Topology::diameter)
            .collect::<Option<Vec<_>>>()
            .map(|d| d.into_iter().max().unwrap_or(0));
        let topo = plan.union(graphs);
        let two_pass = two_pass(cfg, rule)?;
        let steps = if two_pass {
            two_pass_schedule(&topo)
        } else {
            Vec::new()
        };
        let rounds = if two_pass {
            steps.len()
        } else {
            cfg.rounds.unwrap_or(match rule {
                FusionRule::Tree => diameter.unwrap_or(1).max(1),
                FusionRule::PushSum { .. } => (8 * diameter.unwrap_or(1)).max(40),
            })
        };
        // Push-sum without --rounds runs each fusion until the estimates settle (or a cap).
        let settle =
            (!two_pass && cfg.rounds.is_none() && rule != FusionRule::Tree).then(Settle::default);
        let name = match rule {
            FusionRule::Tree if cfg.fusion == FusionChoice::SpanningTree => "spanning-tree",
            FusionRule::Tree => "tree",
            FusionRule::PushSum { .. } => "push-sum",
        };
        let fusion = Self {
            rule,
            name,
            two_pass,
            steps,
            rounds,
            settle,
            settled: SettledRounds::default(),
            loss: cfg.loss,
            diameter,
        };
        Ok((fusion, topo))
    }

    /// One fusion of q(u) (with the sites, in the fleet projection mode): the two-pass
    /// schedule, rounds until the push-sum estimates settle, or the configured rounds.
    pub fn fuse(&self, agents: &mut [Agent], rng: &mut Rng) -> NetStats {
        if self.two_pass {
            run_schedule(agents, &self.steps, self.loss, rng)
        } else if let Some(s) = self.settle {
            let (net, used, settled) = run_until_settled(agents, s, self.loss, rng);
            self.settled.record(used, settled);
            net
        } else {
            run_rounds(agents, self.rounds, self.loss, rng)
        }
    }

    /// One fusion of the fleet projection mode's sites (spec §14). Under the tree rule they
    /// travel on their own (site-only messages, far smaller than q(u)); push-sum has no
    /// site-only messages (the sites share the running totals' weight with q(u)), so there a
    /// site fusion is a whole push-sum fusion.
    pub fn fuse_sites(&self, agents: &mut [Agent], rng: &mut Rng) -> NetStats {
        match self.rule {
            FusionRule::Tree if self.two_pass => {
                run_schedule_of(Payload::Sites, agents, &self.steps, self.loss, rng)
            }
            FusionRule::Tree => run_site_rounds(agents, self.rounds, self.loss, rng),
            FusionRule::PushSum { .. } => self.fuse(agents, rng),
        }
    }

    /// The report's rounds per fusion: the two-pass schedule's steps, the configured rounds,
    /// or (push-sum until settled) the most rounds one fusion took.
    pub fn rounds(&self) -> usize {
        if self.settle.is_some() {
            self.settled.max()
        } else {
            self.rounds
        }
    }

    /// Fusions that stopped at the round cap before settling.
    pub fn capped(&self) -> usize {
        self.settled.capped()
    }

    /// The schedule's name in the report: `two-pass` or `rounds`.
    pub fn schedule(&self) -> &'static str {
        if self.two_pass {
            "two-pass"
        } else {
            "rounds"
        }
    }
}

/// Whether tree messages follow the two-pass schedule (`--schedule`).
fn two_pass(cfg: &SimConfig, rule: FusionRule) -> Result<bool, SimError> {
    Ok(match (cfg.schedule, rule) {
        (Schedule::TwoPass, FusionRule::PushSum { .. }) => {
            return Err(SimError::Config(
                "--schedule two-pass needs tree fusion (push-sum runs in rounds)".into(),
            ))
        }
        (Schedule::TwoPass, FusionRule::Tree) => {
            if cfg.rounds.is_some() {
                return Err(SimError::Config(
                    "--rounds applies to --schedule rounds, not two-pass".into(),
                ));
            }
            true
        }
        (Schedule::Auto, FusionRule::Tree) => cfg.loss == 0.0 && cfg.rounds.is_none(),
        _ => false,
    })
}

impl Fleet<'_> {
    /// One fusion of q(u) over the whole fleet (paper §4.2: every agent then holds
    /// `T_g = T0 + Σ_i E_i` on a tree). In the shared projection mode the agents then adopt
    /// the fleet's q(W) (spec §13) and fuse q(u) again under it. Then, with `--local-fit
    /// fleet`, the fleet-wide fit of the residual kernel against the fused model
    /// ([`Fleet::fit_local_pooled`]).
    pub fn fuse(&mut self) {
        let t = Instant::now();
        self.fuse_once();
        // The member check (issue 29); a change of who is contained fuses once more, so the
        // rest of the fleet holds the model without the suspects.
        if self.check_members() {
            self.fuse_once();
        }
        self.phases.fusion_s += t.elapsed().as_secs_f64();
        self.fit_local_pooled();
    }

    /// One fusion of q(u) and, in the shared projection mode, the adoption of the fleet's
    /// q(W) and a second fusion under it.
    fn fuse_once(&mut self) {
        self.net
            .add_all(self.fusion.fuse(&mut self.agents, &mut self.net_rng));
        if self.cfg.projection.is_shared() {
            self.agents.par_iter_mut().for_each(|a| {
                a.adopt_fleet_projection();
            });
            self.net
                .add_all(self.fusion.fuse(&mut self.agents, &mut self.net_rng));
        }
    }
}
