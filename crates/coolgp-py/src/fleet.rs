//! `coolgp.FleetRegressor`: a whole fleet in one call, scikit-learn style. `fit` standardizes
//! X and y (training statistics), splits the rows among the agents (at random, or one agent
//! per `groups` label), streams each agent's rows in batches, and fuses the fleet over a tree
//! every `fuse_every` batches and at the end; `predict` answers with one agent's q(W) and its
//! fused q(u), in the original units.

use std::sync::Arc;

use coolgp::faer::Mat;
use coolgp::rng::Rng;
use coolgp::{Agent, Topology, View, Vocabulary};
use numpy::PyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::config::{agent_config, AgentKw};
use crate::convert;
use crate::fence::{core_err, fenced, rejected};

/// Column means and standard deviations (a constant column gets scale 1).
struct Scaler {
    x_mean: Vec<f64>,
    x_scale: Vec<f64>,
    y_mean: f64,
    y_scale: f64,
}

fn mean_scale(v: impl Iterator<Item = f64> + Clone, n: usize) -> (f64, f64) {
    let mean = v.clone().sum::<f64>() / n as f64;
    let var = v.map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
    let sd = var.sqrt();
    (mean, if sd > 0.0 && sd.is_finite() { sd } else { 1.0 })
}

impl Scaler {
    fn fit(x: &Mat<f64>, y: &[f64]) -> Self {
        let n = x.nrows();
        let (x_mean, x_scale) = (0..x.ncols())
            .map(|j| mean_scale((0..n).map(|i| x[(i, j)]), n))
            .unzip();
        let (y_mean, y_scale) = mean_scale(y.iter().copied(), n);
        Self {
            x_mean,
            x_scale,
            y_mean,
            y_scale,
        }
    }
    fn x(&self, x: &Mat<f64>) -> Mat<f64> {
        Mat::from_fn(x.nrows(), x.ncols(), |i, j| {
            (x[(i, j)] - self.x_mean[j]) / self.x_scale[j]
        })
    }
}

struct Fitted {
    agents: Vec<Agent>,
    scaler: Scaler,
    d: usize,
}

/// The settings of a fleet.
#[derive(Clone)]
struct Settings {
    agents: usize,
    inducing: usize,
    latent_dim: Option<usize>,
    batch: usize,
    fuse_every: usize,
    topology: String,
    mode: String,
    projection: String,
    site_memory: Option<String>,
    learn: bool,
    seed: u64,
}

/// A fleet of COOL-GP agents as one scikit-learn style regressor.
///
/// FleetRegressor(agents=4, inducing=30, *, latent_dim=None, batch=20, fuse_every=10,
///                topology="path", mode="frozen", projection="per-agent", site_memory=None,
///                learn=True, seed=0)
///
/// site_memory: with projection="fleet", "recent" (the default) or "stream"; use "stream"
/// when the rows of X come in time order (a site then sums every block's term rather than
/// extrapolating from the newest ones; the node's --site-memory).
///
/// fit(X, y, groups=None) splits the rows among `agents` agents at random (or one agent per
/// distinct `groups` label), streams them in batches of `batch` rows, and fuses the fleet
/// (tree message passing on `topology`: "path", "star" or "random-tree") every `fuse_every`
/// batches per agent and after the last. predict(X, return_std=False) uses agent 0's q(W)
/// and the fused q(u) (every agent holds the same fused q(u) after fit).
#[pyclass(module = "coolgp._coolgp")]
pub struct FleetRegressor {
    s: Settings,
    fitted: Option<Fitted>,
}

fn topology(name: &str, n: usize, seed: u64) -> PyResult<Topology> {
    match name {
        "path" => Ok(Topology::path(n)),
        "star" => Ok(Topology::star(n)),
        "random-tree" => Ok(Topology::random_tree(n, seed)),
        other => Err(PyValueError::new_err(format!(
            "unknown topology '{other}': use 'path', 'star' or 'random-tree' (tree fusion is exact on trees)"
        ))),
    }
}

/// One synchronous fusion: `rounds` rounds in which every agent sends to every neighbour and
/// every message is delivered.
fn fuse(agents: &mut [Agent], rounds: usize) -> PyResult<()> {
    for _ in 0..rounds {
        let mut msgs = Vec::new();
        for a in agents.iter_mut() {
            a.handle_tick();
            while let Some(m) = a.poll_transmit() {
                msgs.push(m);
            }
        }
        for m in msgs {
            let to = usize::try_from(m.header.receiver).unwrap_or(usize::MAX);
            if let Some(a) = agents.get_mut(to) {
                a.handle_message(m).map_err(|r| rejected(&r))?;
            }
        }
        for a in agents.iter_mut() {
            while a.poll_event().is_some() {}
        }
    }
    Ok(())
}

/// Each agent's rows: one agent per group label, or a seeded random equal split.
fn split(n: usize, agents: usize, groups: Option<Vec<usize>>, seed: u64) -> Vec<Vec<usize>> {
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
    fn memory(&self) -> PyResult<Option<coolgp::learn::SiteMemory>> {
        self.site_memory
            .as_deref()
            .map(coolgp::learn::SiteMemory::from_name)
            .transpose()
            .map_err(|e| PyValueError::new_err(format!("site_memory: {e}")))
    }

    /// Builds, streams and fuses the fleet on standardized data.
    fn run(&self, x: &Mat<f64>, y: &[f64], rows: &[Vec<usize>]) -> PyResult<Vec<Agent>> {
        let n_agents = rows.len();
        let d = x.ncols();
        let vocab = Arc::new(
            Vocabulary::default_design(self.inducing, self.latent_dim.unwrap_or(d), self.seed)
                .map_err(core_err)?,
        );
        let topo = topology(&self.topology, n_agents, self.seed)?;
        let mut agents = Vec::with_capacity(n_agents);
        for i in 0..n_agents {
            let cfg = agent_config(&AgentKw {
                mode: &self.mode,
                samples: None,
                normalization: None,
                projection: &self.projection,
                fusion: "tree",
                fleet_size: None,
                learn: self.learn,
                seed: self.seed.wrapping_add(i as u64),
                projection_group: None,
                site: coolgp::learn::SiteOptions {
                    memory: self.memory()?,
                    ..coolgp::learn::SiteOptions::default()
                },
            })
            .map_err(PyValueError::new_err)?;
            let mut a = Agent::new(i as u64, vocab.clone(), d, cfg).map_err(core_err)?;
            a.set_neighbors(topo.neighbors(i).iter().map(|&j| j as u64))
                .map_err(core_err)?;
            agents.push(a);
        }
        let rounds = topo.diameter().unwrap_or(1).max(1);
        let batches: Vec<Vec<&[usize]>> = rows
            .iter()
            .map(|r| r.chunks(self.batch).collect())
            .collect();
        let steps = batches.iter().map(Vec::len).max().unwrap_or(0);
        for t in 0..steps {
            for (a, bs) in agents.iter_mut().zip(&batches) {
                if let Some(b) = bs.get(t) {
                    let xb = Mat::from_fn(b.len(), d, |i, j| x[(b[i], j)]);
                    let yb: Vec<f64> = b.iter().map(|&r| y[r]).collect();
                    a.handle_block(xb.as_ref(), &yb).map_err(core_err)?;
                }
            }
            if (t + 1) % self.fuse_every == 0 && t + 1 < steps {
                fuse(&mut agents, rounds)?;
            }
        }
        fuse(&mut agents, rounds)?;
        Ok(agents)
    }
}

/// Group labels (any hashable) → dense indices 0..k, in order of first appearance.
fn group_indices(groups: &Bound<'_, PyAny>, n: usize) -> PyResult<Vec<usize>> {
    let py = groups.py();
    let seen = PyDict::new(py);
    let mut out = Vec::with_capacity(n);
    for g in groups.try_iter()? {
        let g = g?;
        let next = seen.len();
        let idx = match seen.get_item(&g)? {
            Some(i) => i.extract::<usize>()?,
            None => {
                seen.set_item(&g, next)?;
                next
            }
        };
        out.push(idx);
    }
    if out.len() != n {
        return Err(PyValueError::new_err(format!(
            "groups: expected one label per row ({n}), got {}",
            out.len()
        )));
    }
    Ok(out)
}

#[pymethods]
impl FleetRegressor {
    #[new]
    #[pyo3(signature = (agents=4, inducing=30, *, latent_dim=None, batch=20, fuse_every=10,
        topology="path", mode="frozen", projection="per-agent", site_memory=None, learn=true,
        seed=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        agents: usize,
        inducing: usize,
        latent_dim: Option<usize>,
        batch: usize,
        fuse_every: usize,
        topology: &str,
        mode: &str,
        projection: &str,
        site_memory: Option<&str>,
        learn: bool,
        seed: u64,
    ) -> PyResult<Self> {
        if agents == 0 || inducing == 0 || batch == 0 || fuse_every == 0 {
            return Err(PyValueError::new_err(
                "agents, inducing, batch and fuse_every must be > 0",
            ));
        }
        if site_memory.is_some() && projection != "fleet" {
            return Err(PyValueError::new_err(
                "site_memory needs projection='fleet' (it tunes the fleet's site update)",
            ));
        }
        let s = Settings {
            agents,
            inducing,
            latent_dim,
            batch,
            fuse_every,
            topology: topology.to_string(),
            mode: mode.to_string(),
            projection: projection.to_string(),
            site_memory: site_memory.map(str::to_owned),
            learn,
            seed,
        };
        s.memory()?;
        Ok(Self { s, fitted: None })
    }

    /// Fits the fleet on X (n, d) and y (n,); `groups` (n labels) routes the rows, one agent
    /// per distinct label. Returns self. Releases the GIL.
    ///
    /// Raises TypeError/ValueError for unconvertible, misshapen or non-finite input.
    #[pyo3(signature = (x, y, groups=None))]
    fn fit<'py>(
        mut slf: PyRefMut<'py, Self>,
        x: &Bound<'py, PyAny>,
        y: &Bound<'py, PyAny>,
        groups: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<PyRefMut<'py, Self>> {
        let py = slf.py();
        let x = convert::matrix(x, "X", None)?;
        let y = convert::vector(y, "y", Some(x.nrows()))?;
        if x.nrows() == 0 || x.ncols() == 0 {
            return Err(PyValueError::new_err("X: no rows or no columns"));
        }
        let groups = groups.map(|g| group_indices(g, x.nrows())).transpose()?;
        let s = slf.s.clone();
        let fitted = py.detach(|| {
            fenced("fit", || {
                let scaler = Scaler::fit(&x, &y);
                let xs = scaler.x(&x);
                let ys: Vec<f64> = y
                    .iter()
                    .map(|v| (v - scaler.y_mean) / scaler.y_scale)
                    .collect();
                let rows = split(x.nrows(), s.agents.min(x.nrows()), groups, s.seed);
                let agents = s.run(&xs, &ys, &rows)?;
                Ok(Fitted {
                    agents,
                    scaler,
                    d: x.ncols(),
                })
            })
        })?;
        slf.fitted = Some(fitted);
        Ok(slf)
    }

    /// Predictive mean at the rows of X (original units), and with return_std=True also
    /// the standard deviation of the latent function (as GaussianProcessRegressor; with
    /// include_noise=True, of a new observation). `agent` picks whose q(W) is used.
    ///
    /// Raises ValueError before fit or for misshapen input.
    #[pyo3(signature = (x, return_std=false, *, include_noise=false, agent=0))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        return_std: bool,
        include_noise: bool,
        agent: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let f = self.fitted.as_ref().ok_or_else(|| {
            PyValueError::new_err("FleetRegressor is not fitted: call fit(X, y) first")
        })?;
        let a = f.agents.get(agent).ok_or_else(|| {
            PyValueError::new_err(format!(
                "agent {agent}: the fleet has {} agents",
                f.agents.len()
            ))
        })?;
        let x = convert::matrix(x, "X", Some(f.d))?;
        let xs = f.scaler.x(&x);
        let p = py.detach(|| {
            fenced("predict", || {
                a.predict(xs.as_ref(), View::Fused).map_err(core_err)
            })
        })?;
        let (m, s) = (f.scaler.y_mean, f.scaler.y_scale);
        let mean: Vec<f64> = p.mean.iter().map(|v| m + s * v).collect();
        let mean = convert::to_numpy_vec(py, mean);
        if !return_std {
            return Ok(mean.into_any());
        }
        let var = if include_noise { &p.var_y } else { &p.var_f };
        let std: Vec<f64> = var.iter().map(|v| s * v.max(0.0).sqrt()).collect();
        let std: Bound<'py, PyArray1<f64>> = convert::to_numpy_vec(py, std);
        Ok((mean, std).into_pyobject(py)?.into_any())
    }

    /// R² of the predictions at X against y (scikit-learn's `score`).
    fn score(&self, py: Python<'_>, x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>) -> PyResult<f64> {
        let pred = self.predict(py, x, false, false, 0)?;
        let pred = convert::vector(&pred, "prediction", None)?;
        let y = convert::vector(y, "y", Some(pred.len()))?;
        let mean = y.iter().sum::<f64>() / y.len().max(1) as f64;
        let ss_res: f64 = y.iter().zip(&pred).map(|(a, b)| (a - b) * (a - b)).sum();
        let ss_tot: f64 = y.iter().map(|a| (a - mean) * (a - mean)).sum();
        Ok(if ss_tot > 0.0 {
            1.0 - ss_res / ss_tot
        } else {
            0.0
        })
    }

    /// The constructor's settings (scikit-learn's `get_params`).
    #[pyo3(signature = (deep=true))]
    fn get_params<'py>(&self, py: Python<'py>, deep: bool) -> PyResult<Bound<'py, PyDict>> {
        let _ = deep;
        let d = PyDict::new(py);
        let s = &self.s;
        d.set_item("agents", s.agents)?;
        d.set_item("inducing", s.inducing)?;
        d.set_item("latent_dim", s.latent_dim)?;
        d.set_item("batch", s.batch)?;
        d.set_item("fuse_every", s.fuse_every)?;
        d.set_item("topology", &s.topology)?;
        d.set_item("mode", &s.mode)?;
        d.set_item("projection", &s.projection)?;
        d.set_item("site_memory", &s.site_memory)?;
        d.set_item("learn", s.learn)?;
        d.set_item("seed", s.seed)?;
        Ok(d)
    }

    /// Number of agents in the fitted fleet (None before fit).
    #[getter]
    fn n_agents_(&self) -> Option<usize> {
        self.fitted.as_ref().map(|f| f.agents.len())
    }

    /// Points each fitted agent absorbed (None before fit).
    #[getter]
    fn points_(&self) -> Option<Vec<usize>> {
        self.fitted
            .as_ref()
            .map(|f| f.agents.iter().map(Agent::n_own).collect())
    }

    /// Points represented in each agent's fused model (all equal to n after fit on a tree).
    #[getter]
    fn fleet_points_(&self) -> Option<Vec<f64>> {
        self.fitted
            .as_ref()
            .map(|f| f.agents.iter().map(Agent::fleet_points).collect())
    }

    fn __repr__(&self) -> String {
        let s = &self.s;
        format!(
            "FleetRegressor(agents={}, inducing={}, batch={}, fuse_every={}, topology='{}', mode='{}', projection='{}', learn={}, seed={})",
            s.agents, s.inducing, s.batch, s.fuse_every, s.topology, s.mode, s.projection, if s.learn { "True" } else { "False" }, s.seed
        )
    }
}
