//! zenoh session set-up: peer mode, explicit endpoints, multicast scouting off unless asked,
//! mutual TLS with `--tls DIR` ([`crate::tls`]).

use crate::config::ZenohArgs;
use crate::error::{NodeError, Result};
use crate::tls::{self, Identity};

/// Whether the session accepts incoming connections when no `--listen` is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Node `id`: listens where told (nowhere by default, instead of zenoh's all interfaces);
    /// with `--tls` it presents `node-<id>.pem`.
    Node(u64),
    /// A one-shot client (`query`, `status`): never listens unless told; with `--tls` it
    /// presents `reader.pem`.
    Client,
}

fn json_list(items: &[String]) -> Result<String> {
    serde_json::to_string(items).map_err(|e| NodeError::Config(format!("endpoints: {e}")))
}

/// The zenoh configuration for `z`: the file (if any), then `mode = peer`, the endpoints from
/// the flags, multicast scouting only with `--scout`, and with `--tls DIR` the mutual-TLS
/// settings (then every endpoint must be `tls/`).
///
/// # Errors
/// [`NodeError::Zenoh`] if the file cannot be read or an endpoint is malformed;
/// [`NodeError::Config`] for a plain endpoint with `--tls`; [`NodeError::Tls`] for a missing
/// certificate or key.
pub fn zenoh_config(z: &ZenohArgs, role: Role) -> Result<zenoh::Config> {
    let mut c = match &z.zenoh_config {
        Some(p) => zenoh::Config::from_file(p)
            .map_err(|e| NodeError::zenoh("reading --zenoh-config", e))?,
        None => zenoh::Config::default(),
    };
    let set = |c: &mut zenoh::Config, key: &str, value: &str| {
        c.insert_json5(key, value)
            .map_err(|e| NodeError::Config(format!("zenoh {key} = {value}: {e}")))
    };
    set(&mut c, "mode", "\"peer\"")?;
    if !z.listen.is_empty() {
        set(&mut c, "listen/endpoints", &json_list(&z.listen)?)?;
    } else if z.zenoh_config.is_none() || role == Role::Client {
        set(&mut c, "listen/endpoints", "[]")?;
    }
    if !z.connect.is_empty() {
        set(&mut c, "connect/endpoints", &json_list(&z.connect)?)?;
    }
    set(
        &mut c,
        "scouting/multicast/enabled",
        if z.scout { "true" } else { "false" },
    )?;
    if let Some(dir) = &z.tls {
        let who = match role {
            Role::Node(id) => Identity::Node(id),
            Role::Client => Identity::Reader,
        };
        tls::apply(&mut c, dir, who)?;
        tls::require_tls_endpoints(&c)?;
    }
    Ok(c)
}

/// How long a host's session waits for room in a link's queue before it gives up a
/// non-droppable message (a query, a reply) and closes the link (µs; zenoh's default 5 s).
/// Issue 31: a host of a hundred agents starting on a loaded machine filled its queues for
/// longer than 5 s, and zenoh closed the links between hosts, which a waiting queue does not.
pub const HOST_WAIT_BEFORE_CLOSE_US: u64 = 60_000_000;

/// Opens a host's zenoh session (`coolgp host`): [`open`]'s, with a link's queue waited on
/// for [`HOST_WAIT_BEFORE_CLOSE_US`] before the link is closed (unless `--zenoh-config` sets it).
///
/// # Errors
/// As [`open`].
pub async fn open_host(z: &ZenohArgs, role: Role) -> Result<zenoh::Session> {
    let mut c = zenoh_config(z, role)?;
    if z.zenoh_config.is_none() {
        c.insert_json5(
            "transport/link/tx/queue/congestion_control/block/wait_before_close",
            &HOST_WAIT_BEFORE_CLOSE_US.to_string(),
        )
        .map_err(|e| NodeError::Config(format!("zenoh wait_before_close: {e}")))?;
    }
    zenoh::open(c)
        .await
        .map_err(|e| NodeError::zenoh("opening session", e))
}

/// Opens a zenoh session for `z`.
///
/// # Errors
/// [`NodeError::Zenoh`] when the configuration is invalid or an endpoint cannot be bound.
pub async fn open(z: &ZenohArgs, role: Role) -> Result<zenoh::Session> {
    let c = zenoh_config(z, role)?;
    zenoh::open(c)
        .await
        .map_err(|e| NodeError::zenoh("opening session", e))
}
