//! `FleetRegressor`'s settings and how they become a simulator fleet: the configuration of
//! the agents and of the fleet ([`Settings::sim_config`]), the rows' split among the agents
//! ([`split`]) and the stream of batches that runs it ([`Settings::run`]).

use std::str::FromStr;

use coolgp::faer::Mat;
use coolgp::local::FleetRule;
use coolgp::rng::Rng;
use coolgp::Agent;
use coolgp_sim::{Batch, Fleet, FusionChoice, SimConfig, SimError, TopologyKind, Workload};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::config::{agent_config, AgentKw, LocalKw};

/// The settings of a fleet.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) agents: usize,
    pub(crate) inducing: usize,
    pub(crate) latent_dim: Option<usize>,
    pub(crate) batch: usize,
    pub(crate) fuse_every: usize,
    pub(crate) topology: String,
    pub(crate) mode: String,
    pub(crate) projection: String,
    pub(crate) site_memory: Option<String>,
    pub(crate) local_memory: Option<usize>,
    pub(crate) local_policy: Option<String>,
    pub(crate) local_kernel: Option<String>,
    pub(crate) local_fit: Option<String>,
    /// `None`: `"auto"`, the rule with the smallest held-out error at fit.
    pub(crate) fleet_rule: Option<FleetRule>,
    pub(crate) learn: bool,
    pub(crate) seed: u64,
    /// `route=K` (0: every agent answers every row).
    pub(crate) route: usize,
    /// `likelihood=` (`None`: gaussian) and `robust_c=` (docs/ROBUST.md).
    pub(crate) likelihood: Option<String>,
    pub(crate) robust_c: Option<f64>,
}

/// The fleet's graph: one of the tree kinds of the simulator's [`TopologyKind`] (tree fusion
/// is exact on trees; graphs with cycles would double count).
pub(crate) fn tree_topology(name: &str) -> PyResult<TopologyKind> {
    let kind = TopologyKind::from_str(name).map_err(PyValueError::new_err)?;
    if !kind.is_tree() {
        return Err(PyValueError::new_err(format!(
            "topology '{name}' has cycles: the fleet fuses by tree message passing, exact on \
             trees; use 'path', 'star', 'random-tree' or 'mst'"
        )));
    }
    Ok(kind)
}

/// A simulator error as `ValueError`.
pub(crate) fn sim_err(e: SimError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Each agent's rows: one agent per group label, or a seeded random equal split.
pub(crate) fn split(
    n: usize,
    agents: usize,
    groups: Option<Vec<usize>>,
    seed: u64,
) -> Vec<Vec<usize>> {
    match groups {
        Some(g) => {
            let k = g.iter().max().map_or(0, |m| m + 1);
            let mut rows = vec![Vec::new(); k];
            for (i, gi) in g.into_iter().enumerate() {
                rows[gi].push(i);
            }
            rows
        }
        None => {
            let mut idx: Vec<usize> = (0..n).collect();
            Rng::new(seed, 0xF1EE7).shuffle(&mut idx);
            let mut rows = vec![Vec::new(); agents];
            for (k, i) in idx.into_iter().enumerate() {
                rows[k % agents].push(i);
            }
            rows
        }
    }
}

impl Settings {
    /// The site memory asked for (`None`: the default).
    pub(crate) fn memory(&self) -> PyResult<Option<coolgp::learn::SiteMemory>> {
        self.site_memory
            .as_deref()
            .map(coolgp::learn::SiteMemory::from_name)
            .transpose()
            .map_err(|e| PyValueError::new_err(format!("site_memory: {e}")))
    }

    /// The simulator's configuration of a fleet of `agents`: no references, the stream in
    /// the given order, tree fusion of q(u) (and of the sites, in the fleet projection mode)
    /// every `fuse_every` rounds of batches (`fuse_every × agents` batches of the stream) and
    /// at the end.
    pub(crate) fn sim_config(&self, agents: usize) -> PyResult<SimConfig> {
        let agent = agent_config(&AgentKw {
            mode: &self.mode,
            samples: None,
            normalization: None,
            projection: &self.projection,
            fusion: "tree",
            fleet_size: None,
            learn: self.learn,
            seed: self.seed,
            projection_group: None,
            site: coolgp::learn::SiteOptions {
                memory: self.memory()?,
                ..coolgp::learn::SiteOptions::default()
            },
            local: LocalKw {
                memory: self.local_memory,
                policy: self.local_policy.as_deref(),
                kernel: self.local_kernel.as_deref(),
                fit: self.local_fit.as_deref(),
            },
            likelihood: self.likelihood.as_deref(),
            robust_c: self.robust_c,
        })
        .map_err(PyValueError::new_err)?;
        Ok(SimConfig {
            agents,
            inducing: self.inducing,
            d_latent: self.latent_dim,
            mode: agent.mode,
            projection: agent.projection,
            topology: tree_topology(&self.topology)?,
            fusion: FusionChoice::Tree,
            fuse_every: self.fuse_every.saturating_mul(agents),
            seed: self.seed,
            central: false,
            baselines: false,
            learn: agent.learn,
            adam: agent.adam,
            shuffle: false,
            site: agent.site,
            local: agent.local,
            likelihood: agent.likelihood,
            fleet_rule: self.fleet_rule,
            route: (self.route > 0).then_some(self.route),
            // The sites fuse with q(u) only (the simulator's default fuses them far more
            // often, with warm-ups); FleetRegressor keeps the cadence it was tuned with.
            site_every: Some(self.fuse_every.saturating_mul(agents)),
            fuse_warmup: false,
            ..SimConfig::default()
        })
    }

    /// Builds, streams and fuses the fleet on standardized data: agent `a` learns from the
    /// rows `rows[a]`.
    pub(crate) fn run(&self, x: &Mat<f64>, y: &[f64], rows: &[Vec<usize>]) -> PyResult<Vec<Agent>> {
        let cfg = self.sim_config(rows.len())?;
        let work = stream(x, y, rows, self.batch);
        let mut fleet = Fleet::build(&cfg, &work).map_err(sim_err)?;
        fleet.stream(&|_, _| {}).map_err(sim_err)?;
        Ok(fleet.into_agents())
    }
}

/// The stream of a fit: each agent's rows in batches of `batch` rows, dealt round by round
/// (every agent's first batch, then every agent's second, …), each batch routed to its agent
/// by the simulator's dispatch (routing group `a` is agent `a`).
fn stream(x: &Mat<f64>, y: &[f64], rows: &[Vec<usize>], batch: usize) -> Workload {
    let d = x.ncols();
    let chunks: Vec<Vec<&[usize]>> = rows.iter().map(|r| r.chunks(batch).collect()).collect();
    let rounds = chunks.iter().map(Vec::len).max().unwrap_or(0);
    let batches = (0..rounds)
        .flat_map(|t| {
            chunks
                .iter()
                .enumerate()
                .filter_map(move |(a, bs)| Some((a, *bs.get(t)?)))
        })
        .map(|(a, b)| Batch {
            group: Some(a),
            x: Mat::from_fn(b.len(), d, |i, j| x[(b[i], j)]),
            y: b.iter().map(|&r| y[r]).collect(),
        })
        .collect();
    Workload {
        d,
        batches,
        tests: Vec::new(),
        groups: rows.len(),
        test_by_group: false,
        projection_groups: Vec::new(),
        y_scale: 1.0,
    }
}
