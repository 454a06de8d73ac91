//! The one error type of the core crate.

use crate::model::Fingerprint;

/// Everything that can go wrong in the core, with enough context to say what to fix.
///
/// Data from users or peers never panics the core: it surfaces as one of these variants.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A matrix that must be symmetric positive definite failed its Cholesky factorization
    /// even after the bounded jitter schedule (spec §9).
    #[error("{what} is not positive definite (jitter tried up to {jitter_tried:e})")]
    NotPositiveDefinite {
        /// Which matrix (e.g. "K", "T1").
        what: &'static str,
        /// The largest jitter that was tried.
        jitter_tried: f64,
    },
    /// A shape did not match what the vocabulary or agent expects.
    #[error("dimension mismatch in {what}: expected {expected}, found {found}")]
    DimensionMismatch {
        /// What was being checked.
        what: &'static str,
        /// The expected size.
        expected: usize,
        /// The size that was given.
        found: usize,
    },
    /// An input contained NaN or an infinity.
    #[error("non-finite value in {what} at index {index}")]
    NonFinite {
        /// What was being checked.
        what: &'static str,
        /// Flat index of the first offending value.
        index: usize,
    },
    /// An input is finite but so large that its ψ statistics would overflow (its |value|, or
    /// that of its projected moments, is above `limit`,
    /// [`crate::model::input_range::MAX_ABS_INPUT`]); nothing was changed.
    #[error("{what} out of range at index {index}: |value| above {limit:e} would overflow the ψ statistics")]
    OutOfRange {
        /// What was being checked.
        what: &'static str,
        /// Flat index of the first offending input, or the offending row.
        index: usize,
        /// The largest |value| accepted.
        limit: f64,
    },
    /// A message or state was produced under a different vocabulary (Z, kernel, jitter, seed).
    #[error("vocabulary mismatch: expected fingerprint {expected}, found {found}")]
    VocabularyMismatch {
        /// This agent's fingerprint.
        expected: Fingerprint,
        /// The fingerprint that came with the data.
        found: Fingerprint,
    },
    /// A configuration value is outside its valid range.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// A received message failed validation (spec §9); the agent is unchanged.
    #[error("message rejected: {0}")]
    Rejected(#[from] crate::protocol::RejectReason),
    /// Bytes could not be decoded as a message.
    #[error("cannot decode message: {0}")]
    Decode(String),
}

/// Result alias of the core crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Checks that every value is finite; `what` names the input in the error.
pub(crate) fn ensure_finite(what: &'static str, values: &[f64]) -> Result<()> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(Error::NonFinite { what, index }),
        None => Ok(()),
    }
}

/// Checks that a size is what was expected; `what` names it in the error.
pub(crate) fn ensure_dim(what: &'static str, expected: usize, found: usize) -> Result<()> {
    if expected == found {
        Ok(())
    } else {
        Err(Error::DimensionMismatch {
            what,
            expected,
            found,
        })
    }
}
