//! # coolgp-sim — many COOL-GP agents in one process
//!
//! A second driver of the sans-IO [`coolgp::Agent`]: a fleet over a chosen [`coolgp::Topology`],
//! a lossy in-memory network, the paper's stream protocol, and the references computed in the
//! same run (no fusion, a central learner, dDTC and dPITC). Parallel across agents with rayon,
//! deterministic for a seed whatever the thread count. It does no file I/O: loading data and
//! writing results belong to the CLI.

pub mod baselines;
pub mod network;
pub mod run;

pub use network::{run_rounds, NetStats};
pub use run::{
    run, AgentRow, Batch, CurvePoint, FusionChoice, Phases, Progress, Report, SimConfig, TestSet,
    TopologyKind, Workload,
};

/// Errors of a simulated run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// A setting is invalid; the message says which and what to use instead.
    #[error("{0}")]
    Config(String),
    /// The core rejected something.
    #[error(transparent)]
    Core(#[from] coolgp::Error),
}
