//! The flags of `coolgp dashboard`, validated once into [`Settings`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use coolgp_node::keys::validate_fleet;
use coolgp_node::ZenohArgs;

use crate::brief::DEFAULT_FULL_STATUS_LIMIT;
use crate::error::{DashboardError, Result};

/// Flags of `coolgp dashboard`.
///
/// The zenoh flags are spelled out here rather than flattened from [`ZenohArgs`]: `--listen`
/// is the HTTP address, and the dashboard never accepts zenoh connections.
#[derive(Args, Debug, Clone)]
pub struct DashboardArgs {
    /// Fleet name to watch.
    #[arg(long)]
    pub fleet: String,
    /// zenoh endpoint of a node (or router) of the fleet, e.g. tcp/127.0.0.1:7447
    /// (repeatable; the other nodes are found through zenoh gossip).
    #[arg(long, value_name = "ENDPOINT")]
    pub connect: Vec<String>,
    /// HTTP address of the page and API; a loopback address unless you mean to publish the
    /// fleet's status to your network (port 0: any free port, printed at start).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Period of the status polls in milliseconds (one `status` query per node per period, or
    /// one brief request for the whole fleet in brief mode).
    #[arg(long, default_value_t = 1000)]
    pub poll_ms: u64,
    /// A node whose last status is older than this many milliseconds is shown as stale.
    #[arg(long, default_value_t = 5000)]
    pub stale_ms: u64,
    /// Above this many members, brief mode: each poll is ONE request for every agent's brief
    /// status (`coolgp/<fleet>/*/status?brief`, as `coolgp status --all`) instead of one full
    /// status per member, and the page shows fleet aggregates, a grid of one cell per agent
    /// coloured by the share of the fleet's points it holds, the agents that need attention
    /// first (at most 50 rows) and fleet-level series. Why: at hundreds of agents, a status
    /// call per agent per poll loads the fleet, every full status lists all members, and a
    /// network graph is unreadable. Briefs carry no neighbours, so no edges are drawn.
    /// 0: always brief.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_FULL_STATUS_LIMIT)]
    pub full_status_limit: usize,
    /// Enable zenoh's UDP multicast scouting (off unless given).
    #[arg(long)]
    pub scout: bool,
    /// A zenoh configuration file (JSON5), as for `coolgp node`; --connect overrides its
    /// endpoints.
    #[arg(long, value_name = "FILE")]
    pub zenoh_config: Option<PathBuf>,
    /// A TLS fleet's certificate directory (`coolgp certs`): connect with mutual TLS as the
    /// fleet's `reader` (read-only) over tls/ endpoints.
    #[arg(long, value_name = "DIR")]
    pub tls: Option<PathBuf>,
}

/// Validated settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Fleet name (a valid key chunk).
    pub fleet: String,
    /// HTTP address.
    pub listen: SocketAddr,
    /// Status poll period.
    pub poll: Duration,
    /// Staleness threshold.
    pub stale: Duration,
    /// The zenoh client flags (never listening).
    pub zenoh: ZenohArgs,
    /// Members above which the dashboard polls briefs (0: always).
    pub full_status_limit: usize,
}

/// Shortest poll period accepted (the dashboard must not load the nodes).
pub const MIN_POLL_MS: u64 = 200;
/// Largest `--full-status-limit` accepted: beyond it, one full status per member per poll is
/// the load brief mode exists to avoid.
pub const MAX_FULL_STATUS_LIMIT: usize = 1024;

impl DashboardArgs {
    /// Checks the flags.
    ///
    /// # Errors
    /// [`DashboardError::Config`] for an unusable fleet name, a poll period below
    /// [`MIN_POLL_MS`] or above a minute, a staleness threshold not above the poll period, or
    /// a `--full-status-limit` above [`MAX_FULL_STATUS_LIMIT`].
    pub fn validate(&self) -> Result<Settings> {
        validate_fleet(&self.fleet)?;
        if !(MIN_POLL_MS..=60_000).contains(&self.poll_ms) {
            return Err(DashboardError::Config(format!(
                "--poll-ms {}: use {MIN_POLL_MS} to 60000",
                self.poll_ms
            )));
        }
        if self.stale_ms <= self.poll_ms {
            return Err(DashboardError::Config(format!(
                "--stale-ms {} must exceed --poll-ms {}",
                self.stale_ms, self.poll_ms
            )));
        }
        if self.full_status_limit > MAX_FULL_STATUS_LIMIT {
            return Err(DashboardError::Config(format!(
                "--full-status-limit {}: use 0 (always brief) to {MAX_FULL_STATUS_LIMIT}",
                self.full_status_limit
            )));
        }
        Ok(Settings {
            fleet: self.fleet.clone(),
            listen: self.listen,
            poll: Duration::from_millis(self.poll_ms),
            stale: Duration::from_millis(self.stale_ms),
            zenoh: self.zenoh_args(),
            full_status_limit: self.full_status_limit,
        })
    }

    /// The zenoh client flags; with `--tls DIR` the session of [`coolgp_node::client::open`]
    /// connects as the fleet's `reader`.
    pub fn zenoh_args(&self) -> ZenohArgs {
        // Field by field on a default, so that flags added to ZenohArgs later keep their
        // defaults here until wired in. No `listen`: the dashboard never accepts connections.
        let mut z = ZenohArgs::default();
        z.connect.clone_from(&self.connect);
        z.scout = self.scout;
        z.zenoh_config.clone_from(&self.zenoh_config);
        z.tls.clone_from(&self.tls);
        z
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        d: DashboardArgs,
    }

    fn parse(args: &[&str]) -> DashboardArgs {
        let mut v = vec!["dashboard"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).map(|c| c.d).expect("flags parse")
    }

    #[test]
    fn defaults_bind_loopback_and_never_listen_on_zenoh() {
        let s = parse(&["--fleet", "demo", "--connect", "tcp/127.0.0.1:7447"])
            .validate()
            .expect("valid");
        assert!(s.listen.ip().is_loopback());
        assert!(s.zenoh.listen.is_empty());
        assert_eq!(s.zenoh.connect, vec!["tcp/127.0.0.1:7447".to_string()]);
        assert_eq!(s.poll, Duration::from_secs(1));
        assert_eq!(s.full_status_limit, DEFAULT_FULL_STATUS_LIMIT);
    }

    #[test]
    fn bad_flags_are_refused_with_a_reason() {
        let e = parse(&["--fleet", "a/b"]).validate().unwrap_err();
        assert!(e.to_string().contains("fleet name"), "{e}");
        let e = parse(&["--fleet", "f", "--poll-ms", "10"])
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("--poll-ms"), "{e}");
        let e = parse(&["--fleet", "f", "--stale-ms", "500"])
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("--stale-ms"), "{e}");
        let e = parse(&["--fleet", "f", "--full-status-limit", "5000"])
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("--full-status-limit 5000"), "{e}");
        let s = parse(&["--fleet", "f", "--full-status-limit", "0"])
            .validate()
            .expect("0 means always brief");
        assert_eq!(s.full_status_limit, 0);
    }
}
