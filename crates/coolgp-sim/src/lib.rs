//! # coolgp-sim — many COOL-GP agents in one process
//!
//! A second driver of the sans-IO [`coolgp::Agent`]: a fleet over a chosen [`coolgp::Topology`],
//! a lossy in-memory network, the paper's stream protocol, and the references computed in the
//! same run (no fusion, a central learner, dDTC and dPITC). Parallel across agents with rayon,
//! deterministic for a seed whatever the thread count. The run itself does no file I/O; beside
//! it, the options of a run ([`args::SimArgs`]: the flags of `coolgp simulate` with the cargo
//! feature `clap`, its TOML file, Python's `coolgp.simulate` keywords) are turned into a
//! [`SimConfig`] ([`args::sim_config`]) and into a [`Workload`] read from a dataset
//! ([`prepare::prepare`]), and [`summary::run_fields`] names what was run. Writing results
//! belongs to the CLI.
//!
//! [`run`] is the phases of a [`Fleet`] in order: [`Fleet::build`], [`Fleet::stream`] (with
//! its fusions, [`Fleet::fuse`]), [`Fleet::evaluate`]. The Python `FleetRegressor` drives the
//! same phases on in-memory arrays and keeps the fused agents.
//!
//! ```
//! use coolgp::faer::Mat;
//! use coolgp_sim::{run, Batch, SimConfig, TestSet, TopologyKind, Workload};
//!
//! // 40 batches of y = sin(x0) + x1/2 on 2 inputs, a held-out test set.
//! let f = |x: &Mat<f64>| (0..x.nrows()).map(|i| x[(i, 0)].sin() + 0.5 * x[(i, 1)]).collect::<Vec<_>>();
//! let grid = |n: usize, o: usize| Mat::from_fn(n, 2, |i, j| (((i + o) * (j + 3)) as f64 * 0.37).sin() * 2.0);
//! let batches = (0..40)
//!     .map(|b| {
//!         let x = grid(10, 10 * b);
//!         Batch { group: None, y: f(&x), x }
//!     })
//!     .collect();
//! let xt = grid(100, 7);
//! let work = Workload {
//!     d: 2,
//!     batches,
//!     tests: vec![TestSet::new(xt.clone(), f(&xt))],
//!     groups: 0,
//!     test_by_group: false,
//!     projection_groups: Vec::new(),
//!     y_scale: 1.0,
//! };
//! let cfg = SimConfig { agents: 8, inducing: 15, topology: TopologyKind::RandomTree, fuse_every: 10, ..SimConfig::default() };
//! let report = run(&cfg, &work, &|_done, _total| {})?;
//! assert!(report.fusion_max_rel_err < 1e-9); // tree fusion is exact
//! assert!(report.rmse_post < report.rmse_constant);
//! # Ok::<(), coolgp_sim::SimError>(())
//! ```

#![warn(missing_docs)]

pub mod args;
pub mod baselines;
pub mod config;
mod eval;
pub mod faults;
pub mod fleet;
mod groups;
pub mod network;
pub mod prepare;
pub mod regions;
pub mod report;
pub mod run;
pub mod summary;
mod tables;
pub mod workload;

pub use args::{check_memory, sim_config, SimArgs};
pub use config::{FuseGroups, FusionChoice, Schedule, SimConfig, TopologyKind};
pub use fleet::QueryScores;
pub use fleet::{Fleet, Progress};
pub use network::{run_rounds, run_schedule, run_until_settled, NetStats, Settle};
pub use prepare::{prepare, Prepared};
pub use report::{AgentRow, CurvePoint, Phases, Report};
pub use run::run;
pub use workload::{Batch, TestSet, Workload};

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
    /// The data could not be read or prepared (a file, a column, a value).
    #[error(transparent)]
    Data(#[from] coolgp_data::DataError),
    /// A configuration file (`--config`) could not be read, is not TOML, or holds a bad value
    /// or an unknown key (the source says which).
    #[error("{what} config {}", path.display())]
    ConfigFile {
        /// `reading` or `parsing`.
        what: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A step of preparing the workload failed: `context` says which (`--projection-group g
    /// routes the rows by that column`), the source why.
    #[error("{context}")]
    Context {
        /// What was being done.
        context: String,
        /// Why it failed.
        #[source]
        source: Box<SimError>,
    },
}
