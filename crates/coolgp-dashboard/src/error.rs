//! The dashboard's error type: only start-up can fail; once running, every problem of the
//! fleet (no peer, unknown fleet, a malformed status) is shown on the page and logged.

use std::net::SocketAddr;

/// What stops `coolgp dashboard` from starting.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DashboardError {
    /// A flag is missing, malformed or out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The HTTP address cannot be bound (in use, or not an address of this machine).
    #[error("cannot listen on http://{addr}: {source} (is another dashboard running? try --listen 127.0.0.1:0)")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The async runtime or a signal handler could not start.
    #[error("{what}: {source}")]
    Io {
        /// What was being set up.
        what: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// zenoh could not open a session (bad endpoint syntax, unreadable --zenoh-config).
    #[error(transparent)]
    Node(#[from] coolgp_node::NodeError),
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, DashboardError>;
