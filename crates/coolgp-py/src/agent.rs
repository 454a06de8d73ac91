//! `coolgp.Agent`: one sans-IO COOL-GP agent. The caller carries the bytes: `tick()` returns
//! exactly what `coolgp node` publishes (`protocol::codec::encode` of each queued message) and
//! `receive(payload)` takes exactly what a node publishes.

use std::path::PathBuf;

use coolgp::faer::Mat;
use coolgp::protocol::{codec, Body};
use coolgp::View;
use numpy::{PyArray1, PyArray2};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::config::{
    agent_config, check_memory, describe, site_options, AgentKw, LocalKw, SITE_KEYS,
};
use crate::convert::{self, count, count_opt};
use crate::fence::{core_err, fenced, rejected};
use crate::persist;
use crate::vocab::Vocabulary;

/// The three predictive arrays `(mean, var_f, var_y)`, each of shape (n,).
type Moments<'py> = (
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
);

/// A vector and a matrix, e.g. q(u)'s `(mean [m], cov [m, m])`.
type VecMat<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray2<f64>>);

/// A matrix and a vector, e.g. q(u)'s K-form `(T1 [m, m], T2 [m])`.
type MatVec<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<f64>>);

fn view(fused: bool) -> View {
    if fused {
        View::Fused
    } else {
        View::Own
    }
}

/// One COOL-GP agent: a sparse GP learned online from its own data with its own projection
/// q(W), fused with its neighbours by exchanging constant-size messages (bytes).
///
/// Agent(id, vocab, input_dim, *, mode="frozen", samples=None, normalization=None,
///       projection="per-agent", fusion="tree", fleet_size=None, learn=True, seed=None,
///       projection_group=None, site=None, local_memory=None, local_policy=None,
///       local_kernel=None, likelihood=None, robust_c=None)
///
/// likelihood: "gaussian" (default) or "robust": each row of a block is weighted by
///     w = (1 + r²/c²)^(−1/2), r its standardized residual against the model before the
///     block, so gross outliers barely move it (docs/ROBUST.md; any mode and
///     projection). robust_c: the threshold c (> 0, default 3).
///
/// mode: "frozen" (default), "importance" (the paper's Eq. 3.7; samples=k, default 20;
///     normalization "unnormalized" | "self-normalized") or "exact" (keeps all data; a test
///     oracle). projection: "per-agent" (the paper), "fleet" (spec §14: one fleet-wide q(W),
///     σ_s, σ_n as a sum of sites), "shared" (federated averaging, tree fusion only), or spec
///     §13's "shared-plain-proxy" / "shared-product-proxy".
/// projection_group: with projection="fleet", the agent's projection group: agents of one
///     group learn one q(W), q(u) is fused with every neighbour (every agent of a fleet names
///     a group or none does).
/// site: with projection="fleet", a dict tuning the site update, as the node's --site-*
///     flags: damping (0.3), fleet_damping (0.01), window (points, 80), prior_points (2000),
///     scale_prior_points (100000), memory ("recent", or "stream" for time-ordered streams);
///     omitted keys keep their defaults.
/// local_memory: keep up to B of the agent's own rows and answer `predict(X, local=True)`
///     with the global model plus an exact GP on their residuals (issue 19; None: 500, the
///     measured default; 0: off). local_policy: which rows, "reservoir" (default), "recent"
///     or "spread"; local_kernel:
///     the residual kernel, "learned" (default) or "global" (K − Q of the global kernel).
/// fusion: "tree" (exact on trees) or "push-sum" (loopy or lossy graphs; needs fleet_size).
/// learn: learn q(W), σ_s, σ_n online. seed: the agent's own randomness (default: its id,
///     as `coolgp node`).
/// Sizes the machine cannot hold (the importance caches of k samples at the vocabulary's m,
/// the site window) are refused with the memory they would need.
///
/// Call order: set `neighbors`, then any interleaving of observe(X, y), tick() (send every
/// returned payload to its receiver) and receive(payload); predict(X) at any time.
#[pyclass(module = "coolgp._coolgp")]
pub struct Agent {
    pub(crate) inner: coolgp::Agent,
    /// The projection mode's name, as given (stored in checkpoints).
    pub(crate) projection: String,
}

impl Agent {
    /// Queued messages as `(receiver, bytes)`; queued events are dropped (the core keeps at
    /// most 4096 and they carry nothing a Python caller acts on).
    fn drain(&mut self) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        while let Some(msg) = self.inner.poll_transmit() {
            out.push((msg.header.receiver, codec::encode(&msg)));
        }
        while self.inner.poll_event().is_some() {}
        out
    }

    fn rebuild(&mut self, edit: impl FnOnce(&mut coolgp::protocol::AgentSnapshot)) -> PyResult<()> {
        let mut snap = self.inner.snapshot();
        edit(&mut snap);
        let vocab = self.inner.vocabulary().clone();
        self.inner = coolgp::Agent::restore(vocab, snap).map_err(core_err)?;
        Ok(())
    }
}

#[pymethods]
impl Agent {
    #[new]
    #[pyo3(signature = (id, vocab, input_dim, *, mode="frozen", samples=None, normalization=None,
        projection="per-agent", fusion="tree", fleet_size=None, learn=true, seed=None,
        projection_group=None, site=None, local_memory=None, local_policy=None,
        local_kernel=None, likelihood=None, robust_c=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        id: u64,
        vocab: PyRef<'_, Vocabulary>,
        input_dim: i64,
        mode: &str,
        samples: Option<i64>,
        normalization: Option<&str>,
        projection: &str,
        fusion: &str,
        fleet_size: Option<i64>,
        learn: bool,
        seed: Option<u64>,
        projection_group: Option<&str>,
        site: Option<Bound<'_, PyDict>>,
        local_memory: Option<i64>,
        local_policy: Option<&str>,
        local_kernel: Option<&str>,
        likelihood: Option<&str>,
        robust_c: Option<f64>,
    ) -> PyResult<Self> {
        let input_dim = count("input_dim", input_dim)?;
        let (samples, fleet_size) = (
            count_opt("samples", samples)?,
            count_opt("fleet_size", fleet_size)?,
        );
        let local_memory = count_opt("local_memory", local_memory)?;
        let mut pairs = Vec::new();
        let mut memory = None;
        for (k, v) in site.iter().flat_map(|d| d.iter()) {
            // A value of the wrong type is a TypeError (as Python's own), a bad number a
            // ValueError.
            let key: String = k.extract().map_err(|_| {
                PyTypeError::new_err(format!("site: keys must be strings ({SITE_KEYS})"))
            })?;
            if key == "memory" {
                let name: String = v.extract().map_err(|_| {
                    PyTypeError::new_err("site: 'memory' must be 'recent' or 'stream'")
                })?;
                memory = Some(
                    coolgp::learn::SiteMemory::from_name(&name)
                        .map_err(|e| PyValueError::new_err(format!("site: {e}")))?,
                );
                continue;
            }
            let value: f64 = v.extract().map_err(|_| {
                let kind = v
                    .get_type()
                    .name()
                    .map_or_else(|_| "?".to_owned(), |n| n.to_string());
                PyTypeError::new_err(format!("site: '{key}' must be a number, got {kind}"))
            })?;
            pairs.push((key, value));
        }
        let mut site = site_options(pairs).map_err(PyValueError::new_err)?;
        site.memory = memory;
        let kw = AgentKw {
            mode,
            samples,
            normalization,
            projection,
            fusion,
            fleet_size,
            learn,
            seed: seed.unwrap_or(id),
            projection_group,
            site,
            local: LocalKw {
                memory: local_memory,
                policy: local_policy,
                kernel: local_kernel,
                // A lone agent has no fleet to pool a sample with: it fits its own kernel.
                fit: Some("agent"),
            },
            likelihood,
            robust_c,
        };
        let config = agent_config(&kw).map_err(PyValueError::new_err)?;
        check_memory(&config, vocab.inner.m(), input_dim).map_err(PyValueError::new_err)?;
        let inner = fenced("Agent()", || {
            coolgp::Agent::new(id, vocab.inner.clone(), input_dim, config).map_err(core_err)
        })?;
        Ok(Self {
            inner,
            projection: projection.to_string(),
        })
    }

    /// This agent's id.
    #[getter]
    fn id(&self) -> u64 {
        self.inner.id()
    }

    /// Input dimension d (columns of X).
    #[getter]
    fn input_dim(&self) -> usize {
        self.inner.projection().d()
    }

    /// The shared vocabulary.
    #[getter]
    fn vocabulary(&self) -> Vocabulary {
        Vocabulary {
            inner: self.inner.vocabulary().clone(),
        }
    }

    /// Neighbour ids (sorted). Setting it drops what former neighbours last sent.
    #[getter]
    fn get_neighbors(&self) -> Vec<u64> {
        self.inner.neighbors().collect()
    }

    /// Raises ValueError when the change is refused (push-sum, once totals were exchanged).
    #[setter]
    fn set_neighbors(&mut self, ids: Vec<u64>) -> PyResult<()> {
        self.inner.set_neighbors(ids).map_err(core_err)
    }

    /// Own data points absorbed.
    #[getter]
    fn points(&self) -> usize {
        self.inner.n_own()
    }

    /// Rows in the local memory (at most local_memory; 0 when it is off).
    #[getter]
    fn local_points(&self) -> usize {
        self.inner.local_points()
    }

    /// Data points represented in the fused model (own + what neighbours' messages carry).
    #[getter]
    fn fleet_points(&self) -> f64 {
        self.inner.fleet_points()
    }

    /// Blocks absorbed.
    #[getter]
    fn blocks(&self) -> u64 {
        self.inner.blocks()
    }

    /// The round counter: the round number of the last messages sent (strictly increasing;
    /// peers reject a round they have seen as stale). It can be moved forward only: a
    /// restarted process starts it from the clock, as `coolgp node` does, so that peers that
    /// remember an earlier incarnation do not take its messages for replays.
    #[getter]
    fn get_round(&self) -> u64 {
        self.inner.round()
    }

    #[setter]
    fn set_round(&mut self, round: u64) -> PyResult<()> {
        if round < self.inner.round() {
            return Err(PyValueError::new_err(format!(
                "round can only move forward (now {}, asked {round})",
                self.inner.round()
            )));
        }
        fenced("round", || self.rebuild(|s| s.round = round))
    }

    /// Neighbours from which a message has been accepted.
    #[getter]
    fn neighbors_heard(&self) -> usize {
        self.inner.neighbors_heard()
    }

    /// The settings as a dict: mode, projection, fusion, learn, seed, projection_group (its id
    /// as an int, or None), with projection="fleet" site (the site update's settings) and
    /// with a local memory local (memory, policy, kernel).
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.inner.config();
        let (mode, fusion) = describe(c);
        let d = PyDict::new(py);
        d.set_item("mode", mode)?;
        d.set_item("projection", &self.projection)?;
        d.set_item("fusion", fusion)?;
        d.set_item("learn", c.learn)?;
        d.set_item("seed", c.seed)?;
        d.set_item("projection_group", c.group)?;
        if c.projection == coolgp::ProjectionMode::Fleet {
            let site = PyDict::new(py);
            site.set_item("damping", c.site.damping)?;
            site.set_item("fleet_damping", c.site.fleet_damping)?;
            site.set_item("window", c.site.window_points)?;
            site.set_item("prior_points", c.site.prior_points)?;
            site.set_item("scale_prior_points", c.site.scale_prior_points)?;
            site.set_item("memory", c.site.memory.name())?;
            d.set_item("site", site)?;
        }
        if c.local.is_on() {
            let local = PyDict::new(py);
            local.set_item("memory", c.local.capacity)?;
            local.set_item("policy", c.local.policy.name())?;
            local.set_item("kernel", c.local.kernel.name())?;
            d.set_item("local", local)?;
        }
        Ok(d)
    }

    /// Absorbs one block of own data: X (n, d) and y (n,), then one optimizer step on q(W),
    /// σ_s, σ_n (unless learn=False). Releases the GIL.
    ///
    /// Raises TypeError if X or y cannot be converted to float64, ValueError for a wrong
    /// shape or a NaN/infinity; the agent is then unchanged.
    #[pyo3(name = "observe", signature = (x, y))]
    fn observe(
        &mut self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        y: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let x = convert::matrix(x, "X", Some(self.inner.projection().d()))?;
        let y = convert::vector(y, "y", Some(x.nrows()))?;
        let inner = &mut self.inner;
        py.detach(|| {
            fenced("observe", || {
                inner.handle_block(x.as_ref(), &y).map_err(core_err)
            })
        })?;
        self.drain();
        Ok(())
    }

    /// One communication round: returns `[(receiver, payload), ...]`, one message per
    /// neighbour (tree: D_ij; push-sum: the running total), each payload exactly the bytes
    /// `coolgp node` publishes on `coolgp/<fleet>/<id>/msg/<receiver>`.
    fn tick<'py>(&mut self, py: Python<'py>) -> PyResult<Vec<(u64, Bound<'py, PyBytes>)>> {
        let out = fenced("tick", || {
            self.inner.handle_tick();
            Ok(self.drain())
        })?;
        Ok(out
            .into_iter()
            .map(|(to, b)| (to, PyBytes::new(py, &b)))
            .collect())
    }

    /// One tree message to one neighbour (event-driven schedules such as the two-pass
    /// schedule): the payload, or None under push-sum or if `to` is not a neighbour.
    fn tick_to<'py>(&mut self, py: Python<'py>, to: u64) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let out = fenced("tick_to", || {
            let sent = self.inner.handle_tick_to(to);
            Ok(sent.then(|| self.drain()))
        })?;
        Ok(out
            .and_then(|v| v.into_iter().next())
            .map(|(_, b)| PyBytes::new(py, &b)))
    }

    /// Validates and absorbs a neighbour's message (the bytes of `tick()` or of a node).
    ///
    /// Raises RejectedMessage (a ValueError) naming the reason: 'decode' (not a coolgp
    /// message), 'fingerprint' (another vocabulary), 'wrong_receiver', 'unknown_sender' (not a
    /// neighbour), 'stale' (a replay), 'shape', 'non_finite', 'not_psd', ... The agent is then
    /// unchanged.
    fn receive(&mut self, py: Python<'_>, payload: &[u8]) -> PyResult<()> {
        let inner = &mut self.inner;
        let r = py.detach(|| {
            fenced("receive", || {
                let msg = codec::decode(payload).map_err(|r| rejected(&r))?;
                inner.handle_message(msg).map_err(|r| rejected(&r))
            })
        });
        self.drain();
        r
    }

    /// Predicts at the rows of X (n, d) with the agent's q(W) and the fused (default) or own
    /// q(u); with local=True plus the local memory's correction (the residual GP on the
    /// agent's own rows; the same as local=False when the memory is off or empty). Returns
    /// `(mean, var_f, var_y)`, three float64 arrays of shape (n,): the latent mean, the latent
    /// variance and the variance of a new observation (var_f + noise). Releases the GIL.
    #[pyo3(signature = (x, fused=true, local=false))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        fused: bool,
        local: bool,
    ) -> PyResult<Moments<'py>> {
        let x = convert::matrix(x, "X", Some(self.inner.projection().d()))?;
        let inner = &self.inner;
        let p = py.detach(|| {
            fenced("predict", || {
                if local {
                    inner.predict_local(x.as_ref(), view(fused))
                } else {
                    inner.predict(x.as_ref(), view(fused))
                }
                .map_err(core_err)
            })
        })?;
        Ok((
            convert::to_numpy_vec(py, p.mean),
            convert::to_numpy_vec(py, p.var_f),
            convert::to_numpy_vec(py, p.var_y),
        ))
    }

    /// The agent's answers at the rows of X (n, d), as `coolgp query --parts` prints them: a
    /// dict of float64 arrays of shape (n,), 'global_mean', 'global_var' (the fused global
    /// model), 'residual_mean', 'residual_var', 'residual_prior' (the local residual GP; 0
    /// without a memory) and 'noise_var'. Combine several agents' answers with
    /// `coolgp.combine_answers`.
    #[pyo3(signature = (x, fused=true))]
    fn local_answers<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        fused: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let x = convert::matrix(x, "X", Some(self.inner.projection().d()))?;
        let inner = &self.inner;
        let answers = py.detach(|| {
            fenced("local_answers", || {
                inner
                    .local_answers(x.as_ref(), view(fused))
                    .map_err(core_err)
            })
        })?;
        crate::answers::to_dict(py, &answers)
    }

    /// q(u) in K-form: `(T1 [m, m], T2 [m])` with T1 = K + E1, T2 = E2 (spec §3), fused
    /// (default) or own. Fusion adds these: T_ab = T_a + T_b − T0, T0 = (K, 0).
    #[pyo3(signature = (fused=true))]
    fn natural_params<'py>(&self, py: Python<'py>, fused: bool) -> PyResult<MatVec<'py>> {
        let t = fenced("natural_params", || {
            Ok(self.inner.natural_params(view(fused)))
        })?;
        Ok((
            convert::to_numpy_mat(py, &t.t1),
            convert::to_numpy_vec(py, t.t2),
        ))
    }

    /// q(u) = N(mean, cov) over the inducing outputs u = f(Z): `(mean [m], cov [m, m])`.
    ///
    /// Raises ValueError if T1 cannot be factored (a corrupted state).
    #[pyo3(signature = (fused=true))]
    fn posterior<'py>(&self, py: Python<'py>, fused: bool) -> PyResult<VecMat<'py>> {
        let (mean, cov) = fenced("posterior", || {
            let post = self.inner.posterior(view(fused)).map_err(core_err)?;
            Ok(post.moments(self.inner.vocabulary()))
        })?;
        Ok((
            convert::to_numpy_vec(py, mean),
            convert::to_numpy_mat(py, &cov),
        ))
    }

    /// q(W) and the scales: dict with 'mean' (d', d), 'std' (d', d), 'sigma_s', 'sigma_n'.
    #[getter]
    fn projection<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = self.inner.projection();
        let (mu, sd) = convert::projection_arrays(p);
        let d = PyDict::new(py);
        d.set_item("mean", convert::to_numpy_mat(py, &mu))?;
        d.set_item("std", convert::to_numpy_mat(py, &sd))?;
        d.set_item("sigma_s", p.sigma_s())?;
        d.set_item("sigma_n", p.sigma_n())?;
        Ok(d)
    }

    /// Sets q(W) = N(mean, std²) elementwise ([d', d] each) and the signal and noise scales
    /// σ_s, σ_n (all > 0). The own model is recomputed from the caches under the new q(W):
    /// set it before observing data to reproduce a model exactly (frozen mode caches the
    /// statistics of each block under the q(W) current when it arrived).
    ///
    /// Raises ValueError for a wrong shape or a value that is not finite and positive.
    fn set_projection(
        &mut self,
        mean: &Bound<'_, PyAny>,
        std: &Bound<'_, PyAny>,
        sigma_s: f64,
        sigma_n: f64,
    ) -> PyResult<()> {
        let (dz, d) = (
            self.inner.vocabulary().d_latent(),
            self.inner.projection().d(),
        );
        let mu = convert::matrix(mean, "mean", Some(d))?;
        let sd = convert::matrix(std, "std", Some(d))?;
        if mu.nrows() != dz || sd.nrows() != dz {
            return Err(PyValueError::new_err(format!(
                "mean and std must have shape ({dz}, {d}) (latent_dim, input_dim)"
            )));
        }
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !(0..dz).all(|i| (0..d).all(|j| positive(sd[(i, j)])))
            || !positive(sigma_s)
            || !positive(sigma_n)
        {
            return Err(PyValueError::new_err(
                "std, sigma_s and sigma_n must be finite and > 0",
            ));
        }
        let log_sigma = Mat::from_fn(dz, d, |i, j| sd[(i, j)].ln());
        fenced("set_projection", || {
            self.rebuild(|s| {
                s.mu = mu;
                s.log_sigma = log_sigma;
                s.log_sigma_s = sigma_s.ln();
                s.log_sigma_n = sigma_n.ln();
            })
        })
    }

    /// Writes the agent in the checkpoint format of `coolgp node` (safetensors, see
    /// docs/NODE.md), atomically. `fleet`, `inputs` (column names, default x0..x{d-1}) and
    /// `target` fill the node metadata. The vocabulary's jitter and seed are added as extra
    /// metadata so that Agent.load needs no vocabulary.
    #[pyo3(signature = (path, *, fleet="python", inputs=None, target="y"))]
    fn save(
        &self,
        path: PathBuf,
        fleet: &str,
        inputs: Option<Vec<String>>,
        target: &str,
    ) -> PyResult<()> {
        let inputs = inputs.unwrap_or_else(|| {
            (0..self.inner.projection().d())
                .map(|j| format!("x{j}"))
                .collect()
        });
        if inputs.len() != self.inner.projection().d() {
            return Err(PyValueError::new_err(format!(
                "inputs: expected {} names (input_dim), got {}",
                self.inner.projection().d(),
                inputs.len()
            )));
        }
        let who = persist::Identity {
            fleet,
            inputs,
            target,
        };
        fenced("save", || {
            persist::save(&self.inner, &self.projection, &path, who)
        })
    }

    /// Reads a checkpoint written by Agent.save or by `coolgp node --state DIR`
    /// (`DIR/checkpoint.safetensors`), verifying its checksum. A node's checkpoint needs the
    /// node's vocabulary: `vocab=Vocabulary(inducing, latent_dim, seed)` or
    /// `Vocabulary.load(file)`. Neighbours, inbox and counters are restored as saved.
    ///
    /// Raises ValueError for a corrupt file, another format, or another vocabulary.
    #[staticmethod]
    #[pyo3(signature = (path, vocab=None))]
    fn load(path: PathBuf, vocab: Option<PyRef<'_, Vocabulary>>) -> PyResult<Self> {
        let v = vocab.map(|v| v.inner.clone());
        fenced("load", || {
            persist::load(&path, v).map(|(inner, projection)| Self { inner, projection })
        })
    }

    /// Pickling: the agent as its checkpoint bytes (Agent.save's format, the local memory
    /// included), rebuilt by `coolgp._coolgp._agent_from_checkpoint`.
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let py = slf.py();
        let this = slf.borrow();
        let d = this.inner.projection().d();
        let who = persist::Identity {
            fleet: "python",
            inputs: (0..d).map(|j| format!("x{j}")).collect(),
            target: "y",
        };
        let bytes = fenced("pickle", || {
            persist::to_bytes(&this.inner, &this.projection, "<pickle>".as_ref(), who)
        })?;
        let rebuild = py
            .import("coolgp._coolgp")?
            .getattr("_agent_from_checkpoint")?;
        Ok((rebuild, (PyBytes::new(py, &bytes),)))
    }

    fn __repr__(&self) -> String {
        let (mode, fusion) = describe(self.inner.config());
        format!(
            "Agent(id={}, input_dim={}, inducing={}, mode={mode}, projection={}, fusion={fusion}, points={}, fleet_points={}, neighbors={:?})",
            self.inner.id(),
            self.inner.projection().d(),
            self.inner.vocabulary().m(),
            self.projection,
            self.inner.n_own(),
            self.inner.fleet_points(),
            self.inner.neighbors().collect::<Vec<_>>()
        )
    }
}

/// An agent from the checkpoint bytes of `Agent.__reduce__` (unpickling).
///
/// Raises ValueError for bytes that are not such a checkpoint.
#[pyfunction]
pub fn _agent_from_checkpoint(bytes: &[u8]) -> PyResult<Agent> {
    fenced("unpickle", || {
        persist::from_bytes("<pickle>".as_ref(), bytes, None)
            .map(|(inner, projection)| Agent { inner, projection })
    })
}

/// Decodes a payload's header without an agent: dict with 'sender', 'receiver', 'round',
/// 'version', 'fingerprint' (hex), 'kind' ('tree' | 'push-sum'), 'points' and 'bytes'.
/// Transports use it to check that the key a message arrived on names its sender.
///
/// Raises RejectedMessage('decode', ...) for bytes that are not a coolgp message.
#[pyfunction]
pub fn message_info<'py>(py: Python<'py>, payload: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let msg = fenced("message_info", || {
        codec::decode(payload).map_err(|r| rejected(&r))
    })?;
    let h = &msg.header;
    let d = PyDict::new(py);
    d.set_item("sender", h.sender)?;
    d.set_item("receiver", h.receiver)?;
    d.set_item("round", h.round)?;
    d.set_item("version", h.version)?;
    d.set_item("fingerprint", h.fingerprint.to_string())?;
    let (kind, points) = match &msg.body {
        Body::Tree { points, .. } => ("tree", *points),
        Body::PushSum { total } => ("push-sum", total.points),
        Body::Site => ("site", 0.0),
    };
    d.set_item("has_site", msg.sites.is_some())?;
    d.set_item("kind", kind)?;
    d.set_item("points", points)?;
    d.set_item("bytes", payload.len())?;
    Ok(d)
}
