//! `coolgp.Vocabulary`: the shared inducing inputs Z, K = k(Z, Z) + εI and the seed of the
//! shared initial q(W). Agents fuse only under the same vocabulary (same fingerprint).

use std::path::PathBuf;
use std::sync::Arc;

use numpy::PyArray2;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyAny;

use crate::convert;
use crate::fence::{core_err, fenced, value_err};

/// The shared encoding vocabulary of a fleet: Z [m, d'], K = k(Z, Z) + εI [m, m], the prior
/// T0 = (K, 0) and the seed of every agent's initial q(W).
///
/// Vocabulary(inducing, latent_dim, seed=0)
///     The deterministic default design (k-means of 40·m standard normal draws), the one
///     `coolgp node --inducing M --latent-dim D --vocab-seed S` builds.
/// Vocabulary(z=array (m, d'), seed=0, jitter=None)
///     Explicit inducing inputs; jitter None uses the default schedule (1e-6, ×10 up to 1e-3).
/// Vocabulary.load(path)
///     A file written by `coolgp vocab --save` (or Vocabulary.save).
#[pyclass(module = "coolgp._coolgp", frozen)]
pub struct Vocabulary {
    pub(crate) inner: Arc<coolgp::Vocabulary>,
}

#[pymethods]
impl Vocabulary {
    #[new]
    #[pyo3(signature = (inducing=None, latent_dim=None, seed=0, *, z=None, jitter=None))]
    fn new(
        inducing: Option<i64>,
        latent_dim: Option<i64>,
        seed: u64,
        z: Option<&Bound<'_, PyAny>>,
        jitter: Option<f64>,
    ) -> PyResult<Self> {
        let inducing = convert::count_opt("inducing", inducing)?;
        let latent_dim = convert::count_opt("latent_dim", latent_dim)?;
        let v = match (z, inducing, latent_dim) {
            (Some(z), None, None) => {
                let z = convert::matrix(z, "z", None)?;
                fenced("Vocabulary", || {
                    match jitter {
                        Some(j) => coolgp::Vocabulary::with_jitter(z, j, seed),
                        None => coolgp::Vocabulary::new(z, seed),
                    }
                    .map_err(core_err)
                })?
            }
            (None, Some(m), Some(d)) => {
                crate::config::check_inducing(1, m).map_err(PyValueError::new_err)?;
                if jitter.is_some() {
                    return Err(PyValueError::new_err(
                        "jitter applies to an explicit z only (the default design uses the default schedule)",
                    ));
                }
                fenced("Vocabulary", || {
                    coolgp::Vocabulary::default_design(m, d, seed).map_err(core_err)
                })?
            }
            _ => return Err(PyValueError::new_err(
                "give either inducing=M and latent_dim=D (the default design) or z=array (m, d')",
            )),
        };
        Ok(Self { inner: Arc::new(v) })
    }

    /// Loads a vocabulary file (`coolgp vocab --save FILE`), checking its fingerprint.
    ///
    /// Raises ValueError (or OSError-like messages inside it) if the file is unreadable, not a
    /// vocabulary, or its fingerprint does not match its contents.
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Self> {
        let v = fenced("Vocabulary.load", || {
            coolgp_store::vocab_file::load(&path).map_err(value_err)
        })?;
        Ok(Self { inner: Arc::new(v) })
    }

    /// Writes the vocabulary file format of `coolgp vocab --save` (JSON).
    fn save(&self, path: PathBuf) -> PyResult<()> {
        fenced("Vocabulary.save", || {
            coolgp_store::vocab_file::save(&self.inner, &path).map_err(value_err)
        })
    }

    /// SHA-256 fingerprint of (Z, jitter, seed), hex: agents fuse only if theirs are equal.
    #[getter]
    fn fingerprint(&self) -> String {
        self.inner.fingerprint().to_string()
    }

    /// Number of inducing inputs m.
    #[getter]
    fn inducing(&self) -> usize {
        self.inner.m()
    }

    /// Dimension d' of the shared standardized domain.
    #[getter]
    fn latent_dim(&self) -> usize {
        self.inner.d_latent()
    }

    /// The jitter ε added to K's diagonal.
    #[getter]
    fn jitter(&self) -> f64 {
        self.inner.jitter()
    }

    /// Seed of the shared initial q(W).
    #[getter]
    fn seed(&self) -> u64 {
        self.inner.init_seed()
    }

    /// Inducing inputs Z, shape (m, d').
    #[getter]
    fn z<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        convert::to_numpy_mat(py, &self.inner.z().to_owned())
    }

    /// K = k(Z, Z) + εI, shape (m, m) (the prior T0 = (K, 0) in K-form).
    #[getter]
    fn k<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        convert::to_numpy_mat(py, &self.inner.k().to_owned())
    }

    /// K⁻¹, shape (m, m) (the prior R0 = (K⁻¹, 0) in the paper's form).
    #[getter]
    fn k_inv<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        convert::to_numpy_mat(py, &self.inner.k_inv().to_owned())
    }

    /// The shared initial q(W) for input dimension d: (mean [d', d], std [d', d]).
    fn initial_projection<'py>(
        &self,
        py: Python<'py>,
        input_dim: usize,
    ) -> (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>) {
        let p = self.inner.initial_projection(input_dim);
        let (mu, sd) = crate::convert::projection_arrays(&p);
        (
            convert::to_numpy_mat(py, &mu),
            convert::to_numpy_mat(py, &sd),
        )
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<Vocabulary>()
            .is_ok_and(|o| o.get().inner.fingerprint() == self.inner.fingerprint())
    }

    fn __hash__(&self) -> u64 {
        let f = self.inner.fingerprint().0;
        u64::from_le_bytes([f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]])
    }

    fn __repr__(&self) -> String {
        format!(
            "Vocabulary(inducing={}, latent_dim={}, seed={}, jitter={:e}, fingerprint='{}')",
            self.inner.m(),
            self.inner.d_latent(),
            self.inner.init_seed(),
            self.inner.jitter(),
            self.inner.fingerprint().short()
        )
    }
}
