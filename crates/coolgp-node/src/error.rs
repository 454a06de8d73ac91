//! The node's error type.

use std::path::PathBuf;

/// Everything that can stop a node, a query or a status request.
///
/// Data from peers never produces an error: a bad message is rejected, counted and logged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// A flag or configuration-file value is missing, malformed or out of range (at start-up).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A file or directory could not be read or written.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being accessed ("reading data", "writing checkpoint", ...).
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A checkpoint file is corrupt, truncated, from another format version or fails its
    /// checksum.
    #[error("checkpoint {path}: {reason}")]
    Checkpoint {
        /// The checkpoint file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The state directory holds a checkpoint of another fleet, agent or input columns.
    #[error("state directory {path} does not match this node: {reason} (use a fresh --state DIR)")]
    StateMismatch {
        /// The state directory.
        path: PathBuf,
        /// Which field differs.
        reason: String,
    },
    /// The state directory holds a checkpoint of this agent written with other agent settings
    /// (projection mode, group, site update, fusion, ...).
    #[error(
        "state directory {path} was written with {settings}: restart with those flags to \
         resume, or use a fresh --state DIR to start over"
    )]
    StateSettings {
        /// The state directory.
        path: PathBuf,
        /// Each differing setting as its flag, the checkpoint's value and this node's, e.g.
        /// `--projection fleet (now per-agent) and --projection-group none (now g)`.
        settings: String,
    },
    /// The data stream is unusable (missing target column, no input columns, bad header).
    #[error("data {source_name}: {reason}")]
    Data {
        /// The file name or `-` for standard input.
        source_name: String,
        /// What is wrong.
        reason: String,
    },
    /// zenoh failed to open a session or declare an entity.
    #[error("zenoh: {what}: {message}")]
    Zenoh {
        /// The operation.
        what: &'static str,
        /// zenoh's error message.
        message: String,
    },
    /// A query got no reply before its deadline (wrong endpoint, fleet or agent id, or the
    /// node is not running).
    #[error("no reply from {key} within {timeout_ms} ms (is the node running, are --fleet/--agent right, and does a TLS fleet get --tls DIR?)")]
    NoReply {
        /// The key expression queried.
        key: String,
        /// The deadline.
        timeout_ms: u64,
    },
    /// The node answered a query with an error.
    #[error("{key} answered: {message}")]
    Remote {
        /// The key expression queried.
        key: String,
        /// The node's error message.
        message: String,
    },
    /// A fleet certificate or key (`--tls DIR`, `coolgp certs`) is missing, unreadable or
    /// invalid.
    #[error("{path}: {reason}")]
    Tls {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The core rejected a configuration or input.
    #[error(transparent)]
    Core(#[from] coolgp::Error),
}

/// A store error in the node's own terms: file-system failures as [`NodeError::Io`], a bad
/// checkpoint as [`NodeError::Checkpoint`], a vocabulary file as [`NodeError::Config`].
impl From<coolgp_store::StoreError> for NodeError {
    fn from(e: coolgp_store::StoreError) -> Self {
        use coolgp_store::StoreError as S;
        match e {
            S::Io { what, path, error } => NodeError::Io {
                what,
                path,
                source: error,
            },
            S::Checkpoint { path, reason } => NodeError::Checkpoint { path, reason },
            S::Core(e) => NodeError::Core(e),
            other => NodeError::Config(other.to_string()),
        }
    }
}

impl NodeError {
    pub(crate) fn zenoh(what: &'static str, e: impl std::fmt::Display) -> Self {
        NodeError::Zenoh {
            what,
            message: e.to_string(),
        }
    }

    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        NodeError::Io {
            what,
            path: path.into(),
            source,
        }
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, NodeError>;
