//! A fleet's certificate directory (written by `coolgp certs`) and the mutual-TLS zenoh settings
//! built from it (`--tls DIR`).
//!
//! | file                          | what                                                    |
//! |-------------------------------|---------------------------------------------------------|
//! | `ca.pem`, `ca.key`            | the fleet CA (keep `ca.key` off the nodes if you can)   |
//! | `node-<id>.pem`, `node-<id>.key` | agent `<id>`: common name `<id>`, organization the fleet |
//! | `reader.pem`, `reader.key`    | query-only clients (`coolgp query`/`status --tls DIR`)  |
//!
//! With `--tls DIR` a session listens and connects on `tls/` endpoints only (`tcp/` is refused
//! at start-up, and zenoh's protocol whitelist is set to `tls`), both sides of every link must
//! present a certificate signed by `ca.pem` (`enable_mtls`), and the server name is not checked
//! (`verify_name_on_connect = false`): a link's identity is its CA-signed certificate, not a
//! host name, and the messages themselves are signed end to end ([`crate::auth`]).

use std::path::{Path, PathBuf};

use crate::error::{NodeError, Result};

/// The fleet CA certificate.
pub const CA_CERT: &str = "ca.pem";
/// The fleet CA private key.
pub const CA_KEY: &str = "ca.key";
/// The reader (query-only) certificate.
pub const READER_CERT: &str = "reader.pem";
/// The reader private key.
pub const READER_KEY: &str = "reader.key";

/// `DIR/node-<id>.pem`.
pub fn node_cert(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("node-{id}.pem"))
}

/// `DIR/node-<id>.key`.
pub fn node_key(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("node-{id}.key"))
}

/// The agent id of a file name `node-<id>.pem`, `None` for any other name.
pub fn parse_node_cert_name(name: &str) -> Option<u64> {
    let id = name.strip_prefix("node-")?.strip_suffix(".pem")?;
    // Only canonical decimal ids (no sign, no leading zeros) name a node.
    let v: u64 = id.parse().ok()?;
    (v.to_string() == id).then_some(v)
}

/// Who a session is in a TLS fleet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identity {
    /// Agent `id`: `node-<id>.pem` / `node-<id>.key`.
    Node(u64),
    /// A query-only client: `reader.pem` / `reader.key`.
    Reader,
}

impl Identity {
    /// The certificate file of this identity in `dir`.
    pub fn cert(self, dir: &Path) -> PathBuf {
        match self {
            Identity::Node(id) => node_cert(dir, id),
            Identity::Reader => dir.join(READER_CERT),
        }
    }

    /// The private key file of this identity in `dir`.
    pub fn key(self, dir: &Path) -> PathBuf {
        match self {
            Identity::Node(id) => node_key(dir, id),
            Identity::Reader => dir.join(READER_KEY),
        }
    }

    fn hint(self) -> String {
        match self {
            Identity::Node(id) => format!("coolgp certs --add {id} --out DIR"),
            Identity::Reader => "coolgp certs --fleet F --nodes ... --out DIR".into(),
        }
    }
}

fn existing(path: PathBuf, who: Identity) -> Result<String> {
    if !path.is_file() {
        return Err(NodeError::Tls {
            path,
            reason: format!("missing (create it with `{}`)", who.hint()),
        });
    }
    let text = path.to_str().ok_or_else(|| NodeError::Tls {
        path: path.clone(),
        reason: "the path is not valid UTF-8".into(),
    })?;
    serde_json::to_string(text).map_err(|e| NodeError::Config(e.to_string()))
}

/// Sets zenoh's mutual-TLS keys for `who` from `dir`, and whitelists the `tls` protocol only.
///
/// # Errors
/// [`NodeError::Tls`] if a file is missing; [`NodeError::Config`] if zenoh refuses a key.
pub fn apply(c: &mut zenoh::Config, dir: &Path, who: Identity) -> Result<()> {
    let ca = existing(dir.join(CA_CERT), who)?;
    let cert = existing(who.cert(dir), who)?;
    let key = existing(who.key(dir), who)?;
    let pairs = [
        ("transport/link/protocols", "[\"tls\"]".to_string()),
        ("transport/link/tls/root_ca_certificate", ca),
        ("transport/link/tls/listen_certificate", cert.clone()),
        ("transport/link/tls/listen_private_key", key.clone()),
        ("transport/link/tls/connect_certificate", cert),
        ("transport/link/tls/connect_private_key", key),
        ("transport/link/tls/enable_mtls", "true".into()),
        ("transport/link/tls/verify_name_on_connect", "false".into()),
    ];
    for (k, v) in pairs {
        c.insert_json5(k, &v)
            .map_err(|e| NodeError::Config(format!("zenoh {k} = {v}: {e}")))?;
    }
    Ok(())
}

fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// Refuses every listen or connect endpoint of `c` that is not `tls/…` (from the flags or the
/// `--zenoh-config` file alike).
///
/// # Errors
/// [`NodeError::Config`] naming the first such endpoint.
pub fn require_tls_endpoints(c: &zenoh::Config) -> Result<()> {
    for key in ["listen/endpoints", "connect/endpoints"] {
        let json = c
            .get_json(key)
            .map_err(|e| NodeError::Config(format!("zenoh {key}: {e}")))?;
        let v: serde_json::Value =
            serde_json::from_str(&json).map_err(|e| NodeError::Config(format!("{key}: {e}")))?;
        let mut eps = Vec::new();
        strings(&v, &mut eps);
        if let Some(bad) = eps.iter().find(|e| !e.starts_with("tls/")) {
            return Err(NodeError::Config(format!(
                "endpoint '{bad}' is not a tls/ endpoint: with --tls every link is mutual TLS \
                 (use e.g. tls/127.0.0.1:7447)"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_file_names_round_trip() {
        let d = Path::new("/x");
        assert_eq!(node_cert(d, 7), Path::new("/x/node-7.pem"));
        assert_eq!(parse_node_cert_name("node-7.pem"), Some(7));
        assert_eq!(parse_node_cert_name("node-07.pem"), None);
        assert_eq!(parse_node_cert_name("node-7.key"), None);
        assert_eq!(parse_node_cert_name("reader.pem"), None);
        assert_eq!(parse_node_cert_name("node--1.pem"), None);
    }

    #[test]
    fn plain_endpoints_are_refused() {
        let mut c = zenoh::Config::default();
        c.insert_json5("listen/endpoints", "[\"tls/127.0.0.1:1\"]")
            .expect("set");
        c.insert_json5("connect/endpoints", "[\"tls/127.0.0.1:2\"]")
            .expect("set");
        assert!(require_tls_endpoints(&c).is_ok());
        c.insert_json5(
            "connect/endpoints",
            "[\"tls/127.0.0.1:2\", \"tcp/127.0.0.1:3\"]",
        )
        .expect("set");
        let e = require_tls_endpoints(&c).expect_err("tcp refused");
        assert!(e.to_string().contains("tcp/127.0.0.1:3"), "{e}");
    }
}
