//! Errors crossing into Python: every Rust error becomes a `ValueError` (bad values), a
//! `TypeError` (unconvertible types), `OSError` (files) or [`RejectedMessage`] (a peer's
//! message refused, a `ValueError` subclass naming the reason); and a panic never crosses:
//! [`fenced`] catches it as a last resort and raises `RuntimeError`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

create_exception!(
    _coolgp,
    RejectedMessage,
    pyo3::exceptions::PyValueError,
    "A peer's message was refused (spec §9); `args[0]` is the reason label (e.g. 'fingerprint', \
     'stale', 'decode'), `args[1]` the explanation. The agent is unchanged."
);

/// Runs `f`, turning a panic into `RuntimeError` (a bug in coolgp, never a user error).
///
/// # Errors
/// What `f` returns, or `RuntimeError` if it panicked.
pub fn fenced<T>(what: &str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(PyRuntimeError::new_err(format!(
                "internal error in coolgp during {what} (please report): {msg}"
            )))
        }
    }
}

/// A core error as `ValueError` (every core error is about values: shapes, NaN, settings,
/// factorizations).
pub fn core_err(e: coolgp::Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// A rejected message as [`RejectedMessage`]`(label, explanation)`.
pub fn rejected(r: &coolgp::protocol::RejectReason) -> PyErr {
    RejectedMessage::new_err((r.label(), format!("message rejected ({}): {r}", r.label())))
}

/// A file-format error (checkpoints, vocabulary files): file-system failures as `OSError`, the
/// rest `ValueError`.
pub fn store_err(e: coolgp_store::StoreError) -> PyErr {
    match e {
        coolgp_store::StoreError::Io { .. } => PyOSError::new_err(e.to_string()),
        other => PyValueError::new_err(other.to_string()),
    }
}

/// An error with its chain of causes (`{e:#}`) as `ValueError`: `simulate`'s JSON and a
/// vocabulary file's errors (unreadable files included, as before).
pub fn value_err(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("{e:#}"))
}

/// Self-test of the fence, for the test suite: panics inside [`fenced`] and returns what
/// Python sees (a `RuntimeError` naming the panic).
///
/// # Errors
/// Always: the `RuntimeError` the fence made of the panic.
#[pyfunction]
pub fn _panic_fence_check() -> PyResult<()> {
    fenced("_panic_fence_check", || -> PyResult<()> {
        panic!("deliberate panic (fence self-test)")
    })
}
