//! `coolgp.FleetRegressor`: a whole fleet in one call, scikit-learn style. `fit` standardizes
//! X and y (training statistics, [`Standardizer`]), splits the rows among the agents (at
//! random, or one agent per `groups` label), and hands them to the simulator's [`Fleet`] as a
//! stream of batches, each routed to its agent: the fleet streams them and fuses over a tree
//! every `fuse_every` rounds of batches and at the end; `predict` answers with one agent's
//! q(W) and its fused q(u), in the original units.

use std::sync::Mutex;

use coolgp::local::{FleetRule, LocalAnswer};
use coolgp::{Agent, View};
use coolgp_data::Standardizer;
use coolgp_sim::config::DEFAULT_ROUTE;
use coolgp_sim::fleet::{calibrate, routed_answers};
use numpy::PyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::answers;
use crate::convert::{self, count, count_opt};
use crate::fence::{core_err, fenced};
use crate::fleet_settings::{split, tree_topology, Settings};

struct Fitted {
    agents: Vec<Agent>,
    scaler: Standardizer,
    /// The fleet rule's variance scale (1 without memory; docs/LOCAL.md §10).
    var_scale: f64,
    /// The safety net's weight on the residual correction (1 without memory; docs/LOCAL.md
    /// §12).
    weight: f64,
    /// The fleet rule predict combines with: `fleet_rule`, or the one `"auto"` chose.
    rule: FleetRule,
    /// The K predict and the calibration route with (issue 31): each row asks the K agents
    /// nearest it by coverage; `None` when every agent is asked (`route=0`, K at least the
    /// agents that answer, or no local memory).
    route: Option<usize>,
}

/// A fleet of COOL-GP agents as one scikit-learn style regressor.
///
/// FleetRegressor(agents=4, inducing=30, *, latent_dim=None, batch=20, fuse_every=10,
///                topology="path", mode="frozen", projection="per-agent", site_memory=None,
///                local_memory=None, local_policy=None, local_kernel=None,
///                local_fit=None, fleet_rule="rbcm", learn=True, seed=0, route=16,
///                likelihood=None, robust_c=None)
///
/// likelihood: "gaussian" (default) or "robust": each row of a block is weighted by
///     w = (1 + r²/c²)^(−1/2), r its standardized residual against the model before the
///     block, so gross outliers barely move it (docs/ROBUST.md; any mode and
///     projection). robust_c: the threshold c (> 0, default 3).
///
/// site_memory: with projection="fleet", "stream" (the default: a site sums every block's
/// term, right in random and in time order) or "recent" (extrapolates from the newest
/// blocks; assumes randomly ordered rows); the node's --site-memory.
///
/// fit(X, y, groups=None) splits the rows among `agents` agents at random (or one agent per
/// distinct `groups` label) and runs the simulator's fleet on them: each agent streams its
/// rows in batches of `batch` rows, and the fleet fuses (tree message passing on
/// `topology`: "path", "star", "random-tree" or "mst") every `fuse_every` rounds of batches
/// (one batch per agent) and after the last; with projection="fleet" the q(W) sites fuse
/// more often, as in `coolgp simulate`. predict(X, return_std=False) uses agent 0's q(W)
/// and the fused q(u) (every agent holds the same fused q(u) after fit).
///
/// local_memory=B (issue 19; None: 500, the measured default; 0: off, predict then answers
/// with the fused model alone): each agent keeps up to B of its own rows (local_policy,
/// local_kernel as Agent's) and predict answers with the fleet rule: every agent answers with
/// the global model plus its memory's correction, and the answers are combined point by
/// point by fleet_rule ("rbcm", the default, "bcm", "min-variance" or "most-informed";
/// `coolgp.combine_answers`; or "auto": at fit, the rule with the smallest error on the
/// agents' held-out memory rows, `fleet_rule_`, as `coolgp simulate`'s default). local_fit: who fits the learned residual kernel, "fleet" (the
/// default: after each fusion, once on a pooled sample of every agent's memory, raw rows,
/// which every agent then takes) or "agent" (each agent on its own memory); `coolgp simulate
/// --local-fit`.
///
/// With local memory the fleet also checks its members after each fusion, as `coolgp
/// simulate` does (issue 29, docs/MEMBERS.md): an agent whose rows even its best-agreeing
/// peer predicts far worse than the median agent's is a suspect; its data leave the others'
/// fused models and its answers leave predict's combination (`suspects_`).
///
/// route=K (issue 31; 16, the default of `coolgp simulate --route` and `coolgp query --all
/// --route`; 0: every agent): with local memory, predict asks each row only the K agents
/// whose coverage (where their memory rows lie, docs/LOCAL.md §13) is nearest it and
/// combines their answers, so a query costs rows × K answers instead of rows × agents; the
/// calibration at fit asks each held-out row its owner and the K − 1 others nearest, as the
/// simulator does. With K at least the number of agents the answers are those of asking
/// all, bit for bit. `route_` is the K used (0: every agent asked), `answers_asked_` the
/// answers (agent × row) the last predict combined.
#[pyclass(module = "coolgp._coolgp")]
pub struct FleetRegressor {
    s: Settings,
    fitted: Option<Fitted>,
    /// Answers (agent × row) the last predict asked for.
    asked: Mutex<Option<usize>>,
}

impl FleetRegressor {
    /// True when predict answers with the fleet rule over every agent: the local memory is on
    /// (`local_memory` unset is [`coolgp_config::DEFAULT_LOCAL_MEMORY`]).
    fn fleet_answers(&self) -> bool {
        self.s
            .local_memory
            .unwrap_or(coolgp_config::DEFAULT_LOCAL_MEMORY)
            > 0
    }
}

/// Who answers a prediction.
enum Asking<'a> {
    /// These agents, each about every row.
    Every(Vec<&'a Agent>),
    /// Each row the `k` agents nearest it by coverage among the `fleet`'s not `withheld`
    /// ([`routed_answers`]).
    Routed {
        fleet: &'a [Agent],
        withheld: Vec<bool>,
        k: usize,
    },
}

/// The mean and variance (of f, or of y with `noise`) at the rows of `x` (standardized), and
/// the answers asked for (agent × row): one agent's fused prediction (its local answers if it
/// has a memory), or several agents' local answers combined by `rule` point by point.
fn moments(
    asking: &Asking<'_>,
    x: coolgp::faer::MatRef<'_, f64>,
    (rule, weight): (FleetRule, f64),
    noise: bool,
) -> PyResult<(Vec<f64>, Vec<f64>, usize)> {
    let (combined, asked) = match asking {
        Asking::Every(agents) => {
            if let [a] = agents.as_slice() {
                if a.local_points() == 0 {
                    // Today's answer, bit for bit.
                    let p = a.predict(x, View::Fused).map_err(core_err)?;
                    return Ok((p.mean, if noise { p.var_y } else { p.var_f }, x.nrows()));
                }
            }
            let per_agent = agents
                .iter()
                .map(|a| a.local_answers(x, View::Fused).map_err(core_err))
                .collect::<PyResult<Vec<_>>>()?;
            let asked = per_agent.iter().map(Vec::len).sum();
            (answers::combined(rule, &per_agent)?, asked)
        }
        Asking::Routed { fleet, withheld, k } => {
            let per_row = routed_answers(fleet, withheld, x, *k);
            let asked = per_row.iter().map(Vec::len).sum();
            let combined = per_row
                .iter()
                .map(|at| answers::combined_at(rule, at))
                .collect::<PyResult<Vec<_>>>()?;
            (combined, asked)
        }
    };
    let combined: Vec<LocalAnswer> = combined.iter().map(|a| a.shrunk(weight)).collect();
    let var = |a: &LocalAnswer| if noise { a.var_y() } else { a.var_f() };
    Ok((
        combined.iter().map(LocalAnswer::mean).collect(),
        combined.iter().map(var).collect(),
        asked,
    ))
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
        topology="path", mode="frozen", projection="per-agent", site_memory=None,
        local_memory=None, local_policy=None, local_kernel=None, local_fit=None,
        fleet_rule="rbcm", learn=true, seed=0, route=DEFAULT_ROUTE as i64, likelihood=None,
        robust_c=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        agents: i64,
        inducing: i64,
        latent_dim: Option<i64>,
        batch: i64,
        fuse_every: i64,
        topology: &str,
        mode: &str,
        projection: &str,
        site_memory: Option<&str>,
        local_memory: Option<i64>,
        local_policy: Option<&str>,
        local_kernel: Option<&str>,
        local_fit: Option<&str>,
        fleet_rule: &str,
        learn: bool,
        seed: u64,
        route: i64,
        likelihood: Option<&str>,
        robust_c: Option<f64>,
    ) -> PyResult<Self> {
        let (agents, inducing) = (count("agents", agents)?, count("inducing", inducing)?);
        let (batch, fuse_every) = (count("batch", batch)?, count("fuse_every", fuse_every)?);
        let latent_dim = count_opt("latent_dim", latent_dim)?;
        let local_memory = count_opt("local_memory", local_memory)?;
        let route = count("route", route)?;
        if agents == 0 || inducing == 0 || batch == 0 || fuse_every == 0 {
            return Err(PyValueError::new_err(
                "agents, inducing, batch and fuse_every must be > 0",
            ));
        }
        crate::config::check_inducing(agents, inducing).map_err(PyValueError::new_err)?;
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
            local_memory,
            local_policy: local_policy.map(str::to_owned),
            local_kernel: local_kernel.map(str::to_owned),
            local_fit: local_fit.map(str::to_owned),
            fleet_rule: match fleet_rule {
                "auto" => None,
                name => Some(answers::rule(name)?),
            },
            learn,
            seed,
            route,
            likelihood: likelihood.map(str::to_owned),
            robust_c,
        };
        s.memory()?;
        s.sim_config(1)?;
        tree_topology(&s.topology)?;
        Ok(Self {
            s,
            fitted: None,
            asked: Mutex::new(None),
        })
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
        let fleet_answers = slf.fleet_answers();
        let fitted = py.detach(|| {
            fenced("fit", || {
                let scaler = Standardizer::fit_xy(&x, &y)
                    .map_err(|e| PyValueError::new_err(e.to_string()))?;
                let mut xs = x.clone();
                scaler
                    .apply_x(&mut xs)
                    .map_err(|e| PyValueError::new_err(e.to_string()))?;
                let ys: Vec<f64> = y.iter().map(|&v| scaler.scale_y(v)).collect();
                let rows = split(x.nrows(), s.agents.min(x.nrows()), groups, s.seed);
                let agents = s.run(&xs, &ys, &rows)?;
                let rules = s.fleet_rule.map_or(FleetRule::ALL.to_vec(), |r| vec![r]);
                // Contained suspects (issue 29) neither offer rows nor answer.
                let withheld: Vec<bool> = agents.iter().map(Agent::is_withheld).collect();
                // Routing (issue 31) only where it asks fewer than all: with K at least the
                // agents that answer, every agent is asked, bit for bit as without it.
                let answering = withheld.iter().filter(|&&w| !w).count();
                let route =
                    (fleet_answers && s.route > 0 && s.route < answering).then_some(s.route);
                let c = calibrate(&agents, &rules, &withheld, route);
                let rule = s.fleet_rule.or_else(|| c.best()).unwrap_or(FleetRule::Rbcm);
                let cal = c.of(rule);
                Ok(Fitted {
                    agents,
                    scaler,
                    var_scale: cal.scale,
                    weight: cal.weight,
                    rule,
                    route,
                })
            })
        })?;
        slf.fitted = Some(fitted);
        *slf.asked.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
        Ok(slf)
    }

    /// Predictive mean at the rows of X (original units), and with return_std=True also
    /// the standard deviation of the latent function (as GaussianProcessRegressor; with
    /// include_noise=True, of a new observation). Without a local memory, agent 0's q(W) and
    /// the fused q(u) answer (`agent` picks another agent); with local_memory, every agent
    /// answers with its memory's correction and the answers are combined by fleet_rule
    /// (`agent` then asks that agent alone).
    ///
    /// Raises ValueError before fit or for misshapen input.
    #[pyo3(signature = (x, return_std=false, *, include_noise=false, agent=None))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        return_std: bool,
        include_noise: bool,
        agent: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let f = self.fitted.as_ref().ok_or_else(|| {
            PyValueError::new_err("FleetRegressor is not fitted: call fit(X, y) first")
        })?;
        let asking = match agent {
            Some(i) => Asking::Every(vec![f.agents.get(i).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "agent {i}: the fleet has {} agents",
                    f.agents.len()
                ))
            })?]),
            None if self.fleet_answers() => match f.route {
                Some(k) => Asking::Routed {
                    fleet: &f.agents,
                    withheld: f.agents.iter().map(Agent::is_withheld).collect(),
                    k,
                },
                None => Asking::Every(f.agents.iter().filter(|a| !a.is_withheld()).collect()),
            },
            None => Asking::Every(f.agents.iter().take(1).collect()),
        };
        let mut xs = convert::matrix(x, "X", Some(f.scaler.dim()))?;
        f.scaler
            .apply_x(&mut xs)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let rule = f.rule;
        let weight = match agent {
            None if self.fleet_answers() => f.weight,
            _ => 1.0,
        };
        let (mean, mut var, asked) = py.detach(|| {
            fenced("predict", || {
                moments(&asking, xs.as_ref(), (rule, weight), include_noise)
            })
        })?;
        *self.asked.lock().unwrap_or_else(|e| e.into_inner()) = Some(asked);
        if agent.is_none() && self.fleet_answers() {
            var.iter_mut().for_each(|v| *v *= f.var_scale);
        }
        let scaler = &f.scaler;
        let mean: Vec<f64> = mean.iter().map(|&v| scaler.unscale_y(v)).collect();
        let mean = convert::to_numpy_vec(py, mean);
        if !return_std {
            return Ok(mean.into_any());
        }
        let std: Vec<f64> = var
            .iter()
            .map(|v| scaler.unscale_std(v.max(0.0).sqrt()))
            .collect();
        let std: Bound<'py, PyArray1<f64>> = convert::to_numpy_vec(py, std);
        Ok((mean, std).into_pyobject(py)?.into_any())
    }

    /// R² of the predictions at X against y (scikit-learn's `score`).
    fn score(&self, py: Python<'_>, x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>) -> PyResult<f64> {
        let pred = self.predict(py, x, false, false, None)?;
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
        d.set_item("local_memory", s.local_memory)?;
        d.set_item("local_policy", &s.local_policy)?;
        d.set_item("local_kernel", &s.local_kernel)?;
        d.set_item("local_fit", &s.local_fit)?;
        d.set_item("fleet_rule", s.fleet_rule.map_or("auto", FleetRule::name))?;
        d.set_item("learn", s.learn)?;
        d.set_item("seed", s.seed)?;
        d.set_item("route", s.route)?;
        d.set_item("likelihood", &s.likelihood)?;
        d.set_item("robust_c", s.robust_c)?;
        Ok(d)
    }

    /// A new, unfitted regressor with the same settings (scikit-learn's clone protocol:
    /// `sklearn.base.clone` calls it instead of rebuilding from `get_params`, whose strings
    /// and floats are new objects on every call and fail its identity check).
    fn __sklearn_clone__(&self) -> Self {
        Self {
            s: self.s.clone(),
            fitted: None,
            asked: Mutex::new(None),
        }
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

    /// Rows in each fitted agent's local memory (None before fit).
    #[getter]
    fn local_points_(&self) -> Option<Vec<usize>> {
        self.fitted
            .as_ref()
            .map(|f| f.agents.iter().map(Agent::local_points).collect())
    }

    /// The fleet rule's variance scale: predict's variances of the fleet's combined answer
    /// are its answers' times this, measured at fit on the agents' leave-one-out answers at
    /// their own memory rows (1 without local memory; None before fit).
    #[getter]
    fn var_scale_(&self) -> Option<f64> {
        self.fitted.as_ref().map(|f| f.var_scale)
    }

    /// The safety net's weight on the fleet's residual correction: predict's fleet answer is
    /// the global model's plus this times the combined local correction, measured at fit on
    /// the same leave-one-out answers (in [0, 1]; 1 without local memory; None before fit).
    #[getter]
    fn residual_weight_(&self) -> Option<f64> {
        self.fitted.as_ref().map(|f| f.weight)
    }

    /// The fleet rule predict combines the agents' answers with: fleet_rule, or with
    /// fleet_rule="auto" the one chosen at fit on the held-out memory rows (None before fit).
    #[getter]
    fn fleet_rule_(&self) -> Option<&'static str> {
        self.fitted.as_ref().map(|f| f.rule.name())
    }

    /// The agents the member check marked suspect and contained at fit (issue 29,
    /// docs/MEMBERS.md): their own data is out of the others' fused models and their answers
    /// out of predict's combination (empty before fit and without local memory, which the
    /// check reads).
    #[getter]
    fn suspects_(&self) -> Vec<usize> {
        self.fitted.as_ref().map_or(Vec::new(), |f| {
            (0..f.agents.len())
                .filter(|&i| f.agents[i].is_withheld())
                .collect()
        })
    }

    /// The K predict routes each row to (issue 31): the K agents nearest it by coverage; 0
    /// when every agent answers every row (route=0, K at least the agents that answer, or no
    /// local memory); None before fit.
    #[getter]
    fn route_(&self) -> Option<usize> {
        self.fitted.as_ref().map(|f| f.route.unwrap_or(0))
    }

    /// Answers (agent × row) the last predict combined: rows × agents asking all, about rows
    /// × K routed (None before a predict since the last fit).
    #[getter]
    fn answers_asked_(&self) -> Option<usize> {
        *self.asked.lock().unwrap_or_else(|e| e.into_inner())
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
