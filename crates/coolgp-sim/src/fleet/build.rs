//! Building a fleet: the shared vocabulary, the graph and the fusion plan, the agents and
//! the central learner, and the stream's dispatch.

use std::sync::Arc;
use std::time::Instant;

use coolgp::local::LocalConfig;
use coolgp::rng::Rng;
use coolgp::{Agent, AgentConfig, FusionRule, ProjectionMode, Topology, Vocabulary};

use super::fuse::Fusion;
use super::stream::{Cadence, Dispatch};
use super::{validate, Fleet};
use crate::config::SimConfig;
use crate::groups::GroupPlan;
use crate::network::NetStats;
use crate::report::Phases;
use crate::workload::Workload;
use crate::SimError;

impl<'a> Fleet<'a> {
    /// Builds the fleet of `cfg` for `work`: the vocabulary (Z, K, T0 shared by every agent,
    /// spec §7's requirement for fusion), the projection groups and the communication graph,
    /// the fusion rule and schedule ([`Fusion::plan`]), `cfg.agents` agents that know their
    /// neighbours, the central learner, and the dispatch of the batches (shuffled, each to a
    /// random agent or one of its routing group's: paper §5).
    ///
    /// The workload may have no test sets (a fleet that is not evaluated); a test set
    /// without points is refused.
    ///
    /// # Errors
    /// [`SimError::Config`] for an invalid configuration or workload, [`SimError::Core`] if
    /// the vocabulary or an agent cannot be made.
    pub fn build(cfg: &'a SimConfig, work: &'a Workload) -> Result<Self, SimError> {
        let start = Instant::now();
        validate(cfg, work)?;
        let vocab = match &cfg.vocab {
            Some(v) => v.clone(),
            None => Arc::new(Vocabulary::default_design(
                cfg.inducing,
                cfg.d_latent.unwrap_or(work.d),
                cfg.seed,
            )?),
        };
        let fleet = cfg.projection == ProjectionMode::Fleet;
        // One graph over the fleet, or one per projection group (`--fuse-groups within`).
        let plan = GroupPlan::new(cfg, work, fleet)?;
        let (fusion, topo) = Fusion::plan(cfg, &plan)?;
        let agents = agents(cfg, work.d, &vocab, &plan, fusion.rule, &topo)?;
        let central = if cfg.central {
            Some(central(cfg, work.d, &vocab, fusion.rule, &plan)?)
        } else {
            None
        };
        let dispatch = Dispatch::new(cfg, work);
        let grouped = plan.group_of.iter().any(Option::is_some);
        let cadence = Cadence::new(cfg, dispatch.len(), fleet, fusion.rule, grouped);
        Ok(Self {
            cfg,
            work,
            start,
            vocab,
            plan,
            fusion,
            agents,
            central,
            dispatch,
            cadence,
            done: 0,
            points: 0,
            net_rng: Rng::new(cfg.seed, 0x4E7),
            site_rng: Rng::new(cfg.seed, 0x517E),
            net: NetStats::default(),
            phases: Phases::default(),
            curves: Vec::new(),
            local_pooled: false,
            local_chains: Vec::new(),
            local_initial: None,
            watch: super::members::Watch::new(cfg.suspects, cfg.agents),
        })
    }
}

/// The configuration of agent `i` (the central learner passes an id past the fleet's).
fn agent_config(cfg: &SimConfig, rule: FusionRule, plan: &GroupPlan, i: usize) -> AgentConfig {
    AgentConfig {
        mode: cfg.mode,
        projection: cfg.projection,
        // Push-sum's scale s is the number of agents that exchange mass: the agent's part.
        fusion: match (rule, plan.part_len.get(i)) {
            (FusionRule::PushSum { weight, .. }, Some(&k)) => FusionRule::PushSum {
                agents: k as f64,
                weight,
            },
            (r, _) => r,
        },
        group: plan.group_of.get(i).copied().flatten(),
        adam: cfg.adam.clone(),
        learn: cfg.learn,
        seed: cfg.seed ^ (0x9E37_79B9 * (i as u64 + 1)),
        site: cfg.site.clone(),
        local: cfg.local,
        influence_cap: cfg.influence_cap,
        row_rate: cfg.row_rate,
        likelihood: cfg.likelihood,
    }
}

/// The fleet's agents, each told its neighbours in `topo`.
fn agents(
    cfg: &SimConfig,
    d: usize,
    vocab: &Arc<Vocabulary>,
    plan: &GroupPlan,
    rule: FusionRule,
    topo: &Topology,
) -> Result<Vec<Agent>, SimError> {
    let agents = (0..cfg.agents)
        .map(|i| {
            let mut a = Agent::new(i as u64, vocab.clone(), d, agent_config(cfg, rule, plan, i))?;
            a.set_neighbors(topo.neighbors(i).iter().map(|&j| j as u64))?;
            Ok(a)
        })
        .collect::<Result<_, coolgp::Error>>()?;
    Ok(agents)
}

/// The reference: one agent on the whole stream, with the fleet's update (in the fleet
/// projection mode: the same site update as a fleet of one, with the central damping of spec
/// §14).
fn central(
    cfg: &SimConfig,
    d: usize,
    vocab: &Arc<Vocabulary>,
    rule: FusionRule,
    plan: &GroupPlan,
) -> Result<Agent, SimError> {
    let mut c = AgentConfig {
        fusion: FusionRule::Tree,
        projection: if cfg.projection == ProjectionMode::Fleet {
            ProjectionMode::Fleet
        } else {
            ProjectionMode::PerAgent
        },
        ..agent_config(cfg, rule, plan, usize::MAX - 1)
    };
    c.site.damping = cfg.central_damping;
    // The reference is the global model: it keeps no local memory.
    c.local = LocalConfig::default();
    // One learner sees every block: its own damping is the whole rule.
    c.site.fleet_damping = 0.0;
    Ok(Agent::new(u64::MAX, vocab.clone(), d, c)?)
}
