//! Array-likes in, numpy arrays out. Inputs go through `numpy.asarray(x, dtype=float64)`, so
//! lists, pandas frames and integer arrays are accepted; what cannot become float64 raises
//! `TypeError`, a wrong number of dimensions or a non-finite value `ValueError` (the message
//! names the argument, the shape expected and the first bad index).

use coolgp::faer::Mat;
use coolgp::Projection;
use numpy::ndarray::{Array1, Array2, ArrayView1, ArrayView2};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// `numpy.asarray(obj, dtype=float64)`, with a `TypeError` naming `what` if that fails or
/// would lose information (complex values).
fn as_f64_array<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let np = py.import("numpy")?;
    let cannot = |e: PyErr| {
        PyTypeError::new_err(format!(
            "{what}: cannot convert to a float64 array ({})",
            e.value(py)
        ))
    };
    let arr = np.call_method1("asarray", (obj,)).map_err(cannot)?;
    let kind: String = arr.getattr("dtype")?.getattr("kind")?.extract()?;
    if kind == "c" {
        return Err(PyTypeError::new_err(format!(
            "{what}: cannot convert complex values to float64 without losing their imaginary part"
        )));
    }
    let kw = PyDict::new(py);
    kw.set_item("dtype", np.getattr("float64")?)?;
    np.call_method("asarray", (arr,), Some(&kw)).map_err(cannot)
}

/// Rejects the first non-finite entry of `v` (row-major flat index).
fn ensure_finite<'a>(what: &str, v: impl Iterator<Item = &'a f64>) -> PyResult<()> {
    for (i, x) in v.enumerate() {
        if !x.is_finite() {
            return Err(PyValueError::new_err(format!(
                "{what}: non-finite value {x} at flat index {i}"
            )));
        }
    }
    Ok(())
}

/// A count keyword (`agents`, `batch`, `local_memory`, …) as `usize`: a negative value is a
/// `ValueError` naming the keyword (pyo3's own conversion to an unsigned integer raises an
/// `OverflowError` that names nothing).
pub fn count(name: &str, v: i64) -> PyResult<usize> {
    usize::try_from(v).map_err(|_| {
        PyValueError::new_err(format!("{name}: expected a non-negative integer, got {v}"))
    })
}

/// [`count`] of an optional keyword.
pub fn count_opt(name: &str, v: Option<i64>) -> PyResult<Option<usize>> {
    v.map(|v| count(name, v)).transpose()
}

/// A 2-d float64 matrix `[n, cols]` from an array-like; `cols = None` accepts any width.
///
/// # Errors
/// `TypeError` if not convertible; `ValueError` for another number of dimensions or columns,
/// or a NaN/infinity.
pub fn matrix(obj: &Bound<'_, PyAny>, what: &str, cols: Option<usize>) -> PyResult<Mat<f64>> {
    let arr = as_f64_array(obj, what)?;
    let arr = arr.cast::<PyArray2<f64>>().map_err(|_| {
        let nd = arr
            .getattr("ndim")
            .and_then(|n| n.extract::<usize>())
            .unwrap_or(0);
        let hint = if nd == 1 {
            " (a single column or a single point: reshape(-1, 1) or reshape(1, -1))"
        } else {
            ""
        };
        PyValueError::new_err(format!(
            "{what}: expected a 2-d array of shape (n, d), got {nd} dimension(s){hint}"
        ))
    })?;
    let ro = arr.readonly();
    let view: ArrayView2<'_, f64> = ro.as_array();
    if let Some(c) = cols {
        if view.ncols() != c {
            return Err(PyValueError::new_err(format!(
                "{what}: expected {c} column(s) (the agent's input_dim), got shape {:?}",
                ro.shape()
            )));
        }
    }
    ensure_finite(what, view.iter())?;
    Ok(Mat::from_fn(view.nrows(), view.ncols(), |i, j| {
        view[(i, j)]
    }))
}

/// A 1-d float64 vector from an array-like, of length `len` if given.
///
/// # Errors
/// As [`matrix`].
pub fn vector(obj: &Bound<'_, PyAny>, what: &str, len: Option<usize>) -> PyResult<Vec<f64>> {
    let arr = as_f64_array(obj, what)?;
    let arr = arr.cast::<PyArray1<f64>>().map_err(|_| {
        PyValueError::new_err(format!(
            "{what}: expected a 1-d array of shape (n,), got shape {}",
            arr.getattr("shape")
                .map_or_else(|_| "?".into(), |s| s.to_string())
        ))
    })?;
    let ro = arr.readonly();
    let view: ArrayView1<'_, f64> = ro.as_array();
    if let Some(n) = len {
        if view.len() != n {
            return Err(PyValueError::new_err(format!(
                "{what}: expected length {n} (one per row), got {}",
                view.len()
            )));
        }
    }
    ensure_finite(what, view.iter())?;
    Ok(view.to_vec())
}

/// A faer matrix as a new numpy array (row-major copy).
pub fn to_numpy_mat<'py>(py: Python<'py>, m: &Mat<f64>) -> Bound<'py, PyArray2<f64>> {
    Array2::from_shape_fn((m.nrows(), m.ncols()), |(i, j)| m[(i, j)]).into_pyarray(py)
}

/// A vector as a new numpy array.
pub fn to_numpy_vec(py: Python<'_>, v: Vec<f64>) -> Bound<'_, PyArray1<f64>> {
    Array1::from_vec(v).into_pyarray(py)
}

/// `(mean, std)` of q(W) as `[d', d]` matrices.
pub fn projection_arrays(p: &Projection) -> (Mat<f64>, Mat<f64>) {
    let mu = p.mu().to_owned();
    let sd = Mat::from_fn(mu.nrows(), mu.ncols(), |i, j| p.sigma(i, j));
    (mu, sd)
}
