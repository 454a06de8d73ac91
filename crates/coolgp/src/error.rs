//! The error types of the core crate: [`Error`], and [`RejectReason`] for a peer's message
//! (also at `coolgp::protocol::RejectReason`). A leaf module: it imports nothing of the crate
//! but the [`Fingerprint`] (itself a leaf), so every layer may use it.

use crate::fingerprint::Fingerprint;

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
    Rejected(#[from] RejectReason),
    /// Bytes could not be decoded as a message.
    #[error("cannot decode message: {0}")]
    Decode(String),
}

/// Why a received message was rejected; the agent is unchanged (spec §9).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RejectReason {
    /// Produced under another vocabulary.
    #[error("foreign vocabulary fingerprint {0}")]
    Fingerprint(String),
    /// Shapes are not (m×m, m) for this vocabulary.
    #[error("wrong shape: expected m = {expected}, found {found}")]
    Shape {
        /// This vocabulary's m.
        expected: usize,
        /// The message's m.
        found: usize,
    },
    /// NaN or infinity.
    #[error("non-finite value")]
    NonFinite,
    /// D1 is not symmetric.
    #[error("asymmetric data part (max |D1 − D1ᵀ| = {0:e})")]
    Asymmetric(f64),
    /// D1 has a clearly negative eigenvalue.
    #[error("data part not positive semidefinite")]
    NotPsd,
    /// Values out of any plausible range (trace bound, negative weight or count).
    #[error("implausible values: {0}")]
    Implausible(&'static str),
    /// Not newer than the last accepted message from this sender (replay or reordering).
    #[error("stale round {round} (last accepted {last})")]
    Stale {
        /// Round of the message.
        round: u64,
        /// Last accepted round from this sender.
        last: u64,
    },
    /// The sender (an agent id) is not a configured neighbour.
    #[error("sender {0} is not a neighbour")]
    UnknownSender(u64),
    /// The message is addressed to another agent (its id).
    #[error("addressed to agent {0}")]
    WrongReceiver(u64),
    /// The payload kind does not match this agent's fusion rule.
    #[error("wrong payload kind for this fusion rule")]
    WrongKind,
    /// Projection sums have the wrong length or are non-finite.
    #[error("bad projection share")]
    BadProjection,
    /// Site sums of the fleet's q(W) with the wrong length, a negative precision or count, or
    /// a non-finite value; or missing where the fleet projection mode needs them.
    #[error("bad site: {0}")]
    BadSite(&'static str),
    /// Bytes that do not decode.
    #[error("undecodable: {0}")]
    Decode(String),
}

impl RejectReason {
    /// A short stable label for counting rejects by reason (status, metrics).
    pub fn label(&self) -> &'static str {
        match self {
            RejectReason::Fingerprint(_) => "fingerprint",
            RejectReason::Shape { .. } => "shape",
            RejectReason::NonFinite => "non_finite",
            RejectReason::Asymmetric(_) => "asymmetric",
            RejectReason::NotPsd => "not_psd",
            RejectReason::Implausible(_) => "implausible",
            RejectReason::Stale { .. } => "stale",
            RejectReason::UnknownSender(_) => "unknown_sender",
            RejectReason::WrongReceiver(_) => "wrong_receiver",
            RejectReason::WrongKind => "wrong_kind",
            RejectReason::BadProjection => "bad_projection",
            RejectReason::BadSite(_) => "bad_site",
            RejectReason::Decode(_) => "decode",
        }
    }
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

/// An error and its causes as one line, `a: b: c`, a cause left out when the text before it
/// already ends with it (error types that print their source in their own message, as a file
/// error that says "file: No such file or directory" and also returns the I/O error as its
/// source). What the command line and the Python package show.
pub fn chain_message(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let m = c.to_string();
        if !out.ends_with(&m) {
            out.push_str(": ");
            out.push_str(&m);
        }
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{file}: {source}")]
    struct SaysItsSource {
        file: &'static str,
        #[source]
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("loading the run")]
    struct Context(#[source] SaysItsSource);

    #[test]
    fn a_chain_says_each_cause_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = Context(SaysItsSource {
            file: "a.csv",
            source: io(),
        });
        assert_eq!(chain_message(&e), "loading the run: a.csv: no such file");
        assert_eq!(chain_message(&io()), "no such file");
    }
}
