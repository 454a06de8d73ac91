//! The simulated fleet as one object whose phases are the paper's protocol (spec §13–§14;
//! paper §5):
//!
//! 1. [`Fleet::build`] (`build.rs`): the shared vocabulary (Z, K, T0), the projection groups
//!    and the communication graph, the fusion rule and schedule, the agents with their
//!    neighbours, the central learner, and the dispatch of the stream's batches to agents.
//! 2. [`Fleet::stream`] (`stream.rs`): the batches in dispatch order, each a block of its
//!    agent's online update; between two fusions of q(u), the fleet projection mode fuses the
//!    sites (and warms q(u) up early in the stream); after each fusion, a learning-curve point.
//! 3. [`Fleet::fuse`] (`fuse.rs`): one fusion of q(u) (tree message passing in rounds or on the
//!    two-pass schedule, or push-sum), or of the sites alone; then, with `--local-fit fleet`,
//!    the fleet-wide fit of the residual kernel (`pool.rs`).
//! 4. [`Fleet::evaluate`] (`evaluate.rs`): the fused agents and the references (the central
//!    learner, dDTC and dPITC) on the test sets, and the fleet-wide queries (`query.rs`:
//!    every agent's answer with its local memory, combined by the fleet rules and calibrated
//!    by each rule's variance scale (`calibrate.rs`), and the oracle's; `union.rs`: the
//!    union rules of `--union-k`), as a [`Report`].
//!
//! [`crate::run`] is these phases in order; the Python `FleetRegressor` drives the same
//! phases on in-memory arrays and keeps the fused agents instead of evaluating them.

mod asked;
mod build;
mod calibrate;
mod duel;
mod evaluate;
mod fuse;
mod members;
mod pool;
mod query;
mod stream;
mod union;

use std::sync::Arc;
use std::time::Instant;

use coolgp::rng::Rng;
use coolgp::{Agent, Vocabulary};

use crate::config::SimConfig;
use crate::groups::GroupPlan;
use crate::network::NetStats;
use crate::report::{CurvePoint, Phases};
use crate::workload::{TestSet, Workload};
use crate::SimError;

pub use asked::routed_answers;
pub use calibrate::{calibrate, Calibration, RuleCalibration};
pub use duel::{
    family_on_the_fleet_task, score_families, FamilyScore, FAMILY_MARGIN, FAMILY_ROUTE,
};
use fuse::Fusion;
pub use members::{MemberReport, MembersReport};
pub use pool::{adopt_consensus, fit_agents_near, fit_agents_pooled};
pub use query::{local_bytes, QueryScores, QUERY_POINTS, RULES};
use stream::{Cadence, Dispatch};
pub use union::{cpu_seconds, UnionStats};

/// Progress callback: (batches done, batches total).
pub type Progress<'a> = &'a (dyn Fn(usize, usize) + Sync);

/// A fleet of agents over a communication graph, with its central learner, fed the batches
/// of one [`Workload`] under one [`SimConfig`].
///
/// Call order: [`Fleet::build`], then [`Fleet::stream`] (which fuses as the configuration
/// says), then [`Fleet::evaluate`] for a [`Report`], or [`Fleet::into_agents`] for the fused
/// agents.
pub struct Fleet<'a> {
    /// The run's settings.
    cfg: &'a SimConfig,
    /// The stream and the test sets.
    work: &'a Workload,
    /// When the run started (the report's wall time).
    start: Instant,
    /// The shared vocabulary (Z, K, T0).
    vocab: Arc<Vocabulary>,
    /// Projection groups and the parts of the graph.
    plan: GroupPlan,
    /// The fusion rule and schedule.
    fusion: Fusion,
    /// The agents, indexed by id.
    agents: Vec<Agent>,
    /// The central learner (one agent on the whole stream), if configured.
    central: Option<Agent>,
    /// Stream order and the agent of each batch.
    dispatch: Dispatch,
    /// When q(u) and the sites fuse.
    cadence: Cadence,
    /// Batches of the stream absorbed so far.
    done: usize,
    /// Training points absorbed so far.
    points: usize,
    /// Coins of the q(u) fusions' lossy network.
    net_rng: Rng,
    /// Coins of the site fusions' lossy network.
    site_rng: Rng,
    /// Network counters.
    net: NetStats,
    /// Wall seconds per phase.
    phases: Phases,
    /// The learning curves, one point per fusion of q(u).
    curves: Vec<CurvePoint>,
    /// A fleet-wide fit of the residual kernel has been made (`--local-fit fleet`).
    local_pooled: bool,
    /// Each kernel family's last fleet-wide fit: the chains an exploring fit continues
    /// ([`coolgp::local::select::fit_grouped_selected`]).
    local_chains: Vec<(coolgp::local::ResidualFamily, Vec<f64>)>,
    /// The agents' residual kernel before the first fleet-wide fit (where fits without a
    /// warm start begin, [`coolgp::local::PoolOptions::warm_start`]).
    local_initial: Option<coolgp::local::ResidualKernel>,
    /// The member check and who is contained (`--suspects`, issue 29).
    watch: members::Watch,
}

impl<'a> Fleet<'a> {
    /// The agents, indexed by id.
    pub fn agents(&self) -> &[Agent] {
        &self.agents
    }

    /// The agents, indexed by id (after [`Fleet::stream`]: each holds the fused q(u)).
    pub fn into_agents(self) -> Vec<Agent> {
        self.agents
    }

    /// Batches of the stream absorbed so far, out of the stream's length.
    pub fn progress(&self) -> (usize, usize) {
        (self.done, self.dispatch.len())
    }

    /// The test set agent `agent` is evaluated on ([`Workload::test_by_group`]).
    ///
    /// # Panics
    /// If the workload has no test sets (the evaluating phases check first).
    fn test_of(&self, agent: usize) -> &'a TestSet {
        test_of(self.work, agent)
    }
}

/// The test set of `agent`: its routing group's (`test_by_group`), else the first.
fn test_of(work: &Workload, agent: usize) -> &TestSet {
    let index = if work.test_by_group {
        (agent % work.groups.max(1)) % work.tests.len()
    } else {
        0
    };
    &work.tests[index]
}

/// Refuses settings and workloads no fleet can use (a workload without test sets is a
/// fleet's that is not evaluated: [`needs_tests`]).
pub(crate) fn validate(cfg: &SimConfig, work: &Workload) -> Result<(), SimError> {
    if cfg.agents == 0 {
        return Err(SimError::Config("--agents must be at least 1".into()));
    }
    if !(0.0..1.0).contains(&cfg.loss) {
        return Err(SimError::Config(format!(
            "--loss must be in [0, 1), got {}",
            cfg.loss
        )));
    }
    if work.batches.is_empty() {
        return Err(SimError::Config("the stream has no batches".into()));
    }
    if work.tests.iter().any(|t| t.y.is_empty()) {
        return Err(SimError::Config("a test set is empty".into()));
    }
    Ok(())
}

/// Refuses a workload without test sets where one is evaluated.
pub(crate) fn needs_tests(work: &Workload) -> Result<(), SimError> {
    if work.tests.is_empty() {
        return Err(SimError::Config("a test set is empty".into()));
    }
    Ok(())
}

/// `k` agent ids evenly spaced over `0..n` (all of them when `k` is 0 or at least `n`).
fn spaced(n: usize, k: usize) -> Vec<usize> {
    if k == 0 || k >= n {
        return (0..n).collect();
    }
    (0..k).map(|i| i * n / k).collect()
}
