//! Origin authentication in a TLS fleet: every model message is signed with its sender's
//! Ed25519 key, and a receiver verifies it against the fleet **roster** (the public keys of the
//! CA-signed `node-<id>.pem` files) before the bytes reach the codec or the [`coolgp::Agent`].
//!
//! The signature is end to end: it holds through zenoh routers, where a link's TLS peer is a
//! router and not the sender.
//!
//! # Envelope (format version 2)
//! A signed message is the exact format-1 codec bytes with byte 3 (the format version) set to
//! [`SIGNED_VERSION`] = 2, followed by a 64-byte Ed25519 signature over every preceding byte
//! (version byte 2 included). The header keeps its layout, so the sender id is the `u64` LE at
//! offset 38. A receiver checks version 2, looks the sender up in its roster, verifies, then
//! restores byte 3 to 1, strips the signature and decodes as usual. Readers of format 1 reject
//! version 2 cleanly (`decode`); open fleets keep sending unsigned format-1 bytes.
//!
//! The roster is read from the certificate directory at start-up and read again when a
//! message names a sender it does not know, a request for rows a requester, or the pooled fit
//! a fitter (at most once per [`RELOAD_EVERY`]; [`Roster::key_reloading`]), so a node added
//! with `coolgp certs --add` is accepted without restarting the others, its neighbours or not.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ring::signature::{self, Ed25519KeyPair, KeyPair as _, UnparsedPublicKey};

use crate::certs::{fleet_of, read_pem};
use crate::error::{NodeError, Result};
use crate::tls;

/// Length of the Ed25519 signature appended to a signed message.
pub const SIGNATURE_LEN: usize = 64;
/// Format version byte of a signed message.
pub const SIGNED_VERSION: u8 = 2;
/// Format version byte of the unsigned codec bytes.
pub const PLAIN_VERSION: u8 = 1;
/// Offset of the format version byte.
const VERSION_AT: usize = 3;
/// Offset of the sender id (`u64` LE) in the header.
const SENDER_AT: usize = 38;
/// Shortest signed message: a full header and a signature.
const MIN_SIGNED: usize = coolgp::protocol::codec::HEADER_LEN + SIGNATURE_LEN;
/// Least time between two roster reloads triggered by unknown senders.
pub const RELOAD_EVERY: Duration = Duration::from_secs(1);

/// An Ed25519 public key (32 bytes).
pub type PublicKey = [u8; 32];

/// Why a message failed origin authentication (status label `signature`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Not a signed message (format version other than 2).
    #[error("unsigned message (format version {0}, expected 2)")]
    Unsigned(u8),
    /// Too short to hold a header and a signature.
    #[error("signed message of {0} bytes is too short")]
    Truncated(usize),
    /// The sender is not in the roster (no `node-<id>.pem` signed by the fleet CA).
    #[error("sender {0} has no certificate in the roster")]
    UnknownSender(u64),
    /// The signature does not verify with the sender's key.
    #[error("signature does not verify with sender {0}'s key")]
    BadSignature(u64),
}

/// Signs outgoing messages with a node's key.
pub struct Signer {
    key: Ed25519KeyPair,
}

impl Signer {
    /// From PKCS#8 DER bytes of an Ed25519 key.
    ///
    /// # Errors
    /// [`NodeError::Tls`] (naming `path`) if the bytes are not an Ed25519 PKCS#8 key.
    pub fn from_pkcs8(der: &[u8], path: &Path) -> Result<Self> {
        let key = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der).map_err(|e| NodeError::Tls {
            path: path.to_path_buf(),
            reason: format!("not an Ed25519 PKCS#8 key ({e}): create keys with coolgp certs"),
        })?;
        Ok(Self { key })
    }

    /// Loads `DIR/node-<id>.key`.
    ///
    /// # Errors
    /// As [`Signer::from_pkcs8`], or [`NodeError::Io`] if unreadable.
    pub fn load(dir: &Path, id: u64) -> Result<Self> {
        let path = tls::node_key(dir, id);
        Self::from_pkcs8(&read_pem(&path, "PRIVATE KEY")?, &path)
    }

    /// The public key.
    pub fn public_key(&self) -> PublicKey {
        let mut pk = [0u8; 32];
        pk.copy_from_slice(self.key.public_key().as_ref());
        pk
    }

    /// The Ed25519 signature of `bytes` (requests for rows, [`crate::row_auth`]).
    pub fn sign(&self, bytes: &[u8]) -> [u8; SIGNATURE_LEN] {
        let mut sig = [0u8; SIGNATURE_LEN];
        sig.copy_from_slice(self.key.sign(bytes).as_ref());
        sig
    }

    /// Turns format-1 codec bytes into a signed format-2 message (version byte 2, then the
    /// 64-byte signature over everything before it).
    pub fn seal(&self, mut v1: Vec<u8>) -> Vec<u8> {
        if let Some(b) = v1.get_mut(VERSION_AT) {
            *b = SIGNED_VERSION;
        }
        let sig = self.key.sign(&v1);
        v1.extend_from_slice(sig.as_ref());
        v1
    }
}

/// The sender id a signed message claims (`None` if too short).
pub fn claimed_sender(bytes: &[u8]) -> Option<u64> {
    let b: [u8; 8] = bytes.get(SENDER_AT..SENDER_AT + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

/// The start of a fleet-scoped signed statement (requests for rows, [`crate::row_auth`];
/// kernel claims, [`crate::kernel_auth`]): `tag | fleet | 0 | id (u64 LE) | word (u64 LE)`,
/// with room for `more` bytes after it.
pub fn statement(tag: &[u8], fleet: &str, id: u64, word: u64, more: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(tag.len() + fleet.len() + 17 + more);
    b.extend_from_slice(tag);
    b.extend_from_slice(fleet.as_bytes());
    b.push(0);
    b.extend_from_slice(&id.to_le_bytes());
    b.extend_from_slice(&word.to_le_bytes());
    b
}

/// True when `sig` is the Ed25519 signature of `bytes` by the holder of `key`.
pub fn verifies(key: &PublicKey, bytes: &[u8], sig: &[u8]) -> bool {
    UnparsedPublicKey::new(&signature::ED25519, key)
        .verify(bytes, sig)
        .is_ok()
}

/// Verifies a signed message with the key `key_of` gives for its sender; returns the
/// format-1 bytes for the codec.
///
/// # Errors
/// [`AuthError`] for anything but a valid signature by the claimed sender.
pub fn open(
    bytes: &[u8],
    key_of: impl FnOnce(u64) -> Option<PublicKey>,
) -> std::result::Result<Vec<u8>, AuthError> {
    if bytes.len() < MIN_SIGNED {
        return match bytes.get(VERSION_AT) {
            Some(&v) if v != SIGNED_VERSION => Err(AuthError::Unsigned(v)),
            _ => Err(AuthError::Truncated(bytes.len())),
        };
    }
    if bytes[VERSION_AT] != SIGNED_VERSION {
        return Err(AuthError::Unsigned(bytes[VERSION_AT]));
    }
    let sender = claimed_sender(bytes).ok_or(AuthError::Truncated(bytes.len()))?;
    let pk = key_of(sender).ok_or(AuthError::UnknownSender(sender))?;
    let (body, sig) = bytes.split_at(bytes.len() - SIGNATURE_LEN);
    if !verifies(&pk, body, sig) {
        return Err(AuthError::BadSignature(sender));
    }
    let mut v1 = body.to_vec();
    v1[VERSION_AT] = PLAIN_VERSION;
    Ok(v1)
}

/// The fleet's node keys, from the CA-signed `node-<id>.pem` files of a directory.
#[derive(Clone)]
pub struct Roster {
    dir: PathBuf,
    fleet: String,
    keys: BTreeMap<u64, PublicKey>,
    last_load: Instant,
    reloads: u64,
}

/// Reads the node certificates of `dir` that the CA in `ca_der` signed for `fleet`.
/// Certificates that fail a check are skipped with a warning (one bad file must not stop a
/// fleet); returns the keys by agent id.
fn read_keys(dir: &Path, fleet: &str, ca_der: &[u8]) -> Result<BTreeMap<u64, PublicKey>> {
    let ca_path = dir.join(tls::CA_CERT);
    let (_, ca) = x509_parser::parse_x509_certificate(ca_der).map_err(|e| NodeError::Tls {
        path: ca_path.clone(),
        reason: format!("not an X.509 certificate: {e}"),
    })?;
    let entries = std::fs::read_dir(dir).map_err(|e| NodeError::io("listing", dir, e))?;
    let mut keys = BTreeMap::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(tls::parse_node_cert_name) else {
            continue;
        };
        let path = entry.path();
        match node_key_from_cert(&path, id, fleet, &ca) {
            Ok(pk) => {
                keys.insert(id, pk);
            }
            Err(reason) => tracing::warn!(
                path = %path.display(),
                reason,
                "node certificate left out of the roster"
            ),
        }
    }
    Ok(keys)
}

/// OID of Ed25519 keys (RFC 8410).
const OID_ED25519: &str = "1.3.101.112";

fn node_key_from_cert(
    path: &Path,
    id: u64,
    fleet: &str,
    ca: &x509_parser::certificate::X509Certificate<'_>,
) -> std::result::Result<PublicKey, String> {
    let der = read_pem(path, "CERTIFICATE").map_err(|e| e.to_string())?;
    let (_, cert) =
        x509_parser::parse_x509_certificate(&der).map_err(|e| format!("not X.509: {e}"))?;
    cert.verify_signature(Some(ca.public_key()))
        .map_err(|e| format!("not signed by the fleet CA: {e}"))?;
    if !cert.validity().is_valid() {
        return Err("expired or not yet valid".into());
    }
    let cn = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|c| c.as_str().ok());
    if cn != Some(id.to_string().as_str()) {
        return Err(format!("common name {cn:?} is not the file's id {id}"));
    }
    if fleet_of(&cert).as_deref() != Some(fleet) {
        return Err(format!("issued for another fleet than '{fleet}'"));
    }
    let spki = cert.public_key();
    if spki.algorithm.algorithm.to_id_string() != OID_ED25519 {
        return Err("not an Ed25519 key (messages are signed with Ed25519)".into());
    }
    spki.subject_public_key
        .data
        .as_ref()
        .try_into()
        .map_err(|_| "an Ed25519 key is 32 bytes".to_string())
}

impl Roster {
    /// Reads the roster of `dir` for `fleet`.
    ///
    /// # Errors
    /// [`NodeError::Tls`] if `ca.pem` is missing or unparsable or names another fleet.
    pub fn load(dir: &Path, fleet: &str) -> Result<Self> {
        let ca_fleet = crate::certs::ca_fleet(dir)?;
        if ca_fleet != fleet {
            return Err(NodeError::Tls {
                path: dir.join(tls::CA_CERT),
                reason: format!("the CA is fleet '{ca_fleet}', not '{fleet}'"),
            });
        }
        let mut r = Self {
            dir: dir.to_path_buf(),
            fleet: fleet.to_string(),
            keys: BTreeMap::new(),
            last_load: Instant::now(),
            reloads: 0,
        };
        r.reload()?;
        Ok(r)
    }

    fn reload(&mut self) -> Result<()> {
        let ca_der = read_pem(&self.dir.join(tls::CA_CERT), "CERTIFICATE")?;
        self.keys = read_keys(&self.dir, &self.fleet, &ca_der)?;
        self.last_load = Instant::now();
        Ok(())
    }

    /// The key of agent `id`, if in the roster.
    pub fn key(&self, id: u64) -> Option<PublicKey> {
        self.keys.get(&id).copied()
    }

    /// Every key of the roster, by agent id.
    pub fn keys(&self) -> BTreeMap<u64, PublicKey> {
        self.keys.clone()
    }

    /// Agent ids in the roster.
    pub fn ids(&self) -> Vec<u64> {
        self.keys.keys().copied().collect()
    }

    /// Roster reloads so far (triggered by unknown senders, requesters or fitters).
    pub fn reloads(&self) -> u64 {
        self.reloads
    }

    /// The key of agent `id`, the roster reloaded first if `id` is unknown (at most once per
    /// [`RELOAD_EVERY`]): a node added with `coolgp certs --add` since the last load is
    /// found. For what arrives from outside the graph's edges (requests for rows, the
    /// fitter's kernel), where [`Roster::verify`]'s reloads may never happen.
    pub fn key_reloading(&mut self, id: u64) -> Option<PublicKey> {
        self.reload_for(id);
        self.key(id)
    }

    /// Verifies a signed message (see [`open`]); an unknown sender triggers a reload of the
    /// directory first, at most once per [`RELOAD_EVERY`].
    ///
    /// # Errors
    /// As [`open`].
    pub fn verify(&mut self, bytes: &[u8]) -> std::result::Result<Vec<u8>, AuthError> {
        if let Some(s) = claimed_sender(bytes) {
            if bytes.get(VERSION_AT) == Some(&SIGNED_VERSION) {
                self.reload_for(s);
            }
        }
        open(bytes, |id| self.key(id))
    }

    /// Reads the directory again if `id` is not in the roster and the last load is at least
    /// [`RELOAD_EVERY`] old; a failed reload keeps the old roster (and waits as long again).
    fn reload_for(&mut self, id: u64) {
        if self.keys.contains_key(&id) || self.last_load.elapsed() < RELOAD_EVERY {
            return;
        }
        self.reloads += 1;
        if let Err(e) = self.reload() {
            tracing::warn!(error = %e, "reloading the roster failed; keeping the old one");
            self.last_load = Instant::now();
        }
    }
}

/// A node's signing key and its fleet's roster.
pub struct Auth {
    /// Signs outgoing messages (shared with the pooled fit's jobs, which sign their requests
    /// for rows off the node's loop).
    pub signer: std::sync::Arc<Signer>,
    /// Verifies incoming ones.
    pub roster: Roster,
}

impl Auth {
    /// Loads node `id`'s key and the roster of fleet `fleet` from `dir`, and checks that the
    /// key belongs to `node-<id>.pem`.
    ///
    /// # Errors
    /// [`NodeError::Tls`] for a missing, invalid or mismatched certificate or key.
    pub fn load(dir: &Path, fleet: &str, id: u64) -> Result<Self> {
        let roster = Roster::load(dir, fleet)?;
        let signer = Signer::load(dir, id)?;
        match roster.key(id) {
            Some(pk) if pk == signer.public_key() => Ok(Self {
                signer: std::sync::Arc::new(signer),
                roster,
            }),
            Some(_) => Err(NodeError::Tls {
                path: tls::node_key(dir, id),
                reason: format!("does not match node-{id}.pem"),
            }),
            None => Err(NodeError::Tls {
                path: tls::node_cert(dir, id),
                reason: format!(
                    "no valid certificate of node {id} for fleet '{fleet}' signed by ca.pem                      (see the warnings above; create one with coolgp certs --add {id})"
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;

    fn signer() -> Signer {
        let der = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("key");
        Signer::from_pkcs8(der.as_ref(), Path::new("k")).expect("signer")
    }

    fn v1(sender: u64) -> Vec<u8> {
        let mut b = vec![0u8; 200];
        b[..3].copy_from_slice(b"CGP");
        b[VERSION_AT] = PLAIN_VERSION;
        b[SENDER_AT..SENDER_AT + 8].copy_from_slice(&sender.to_le_bytes());
        for (i, x) in b.iter_mut().enumerate().skip(80) {
            *x = i as u8;
        }
        b
    }

    #[test]
    fn sealed_messages_open_to_the_original_bytes() {
        let s = signer();
        let plain = v1(2);
        let sealed = s.seal(plain.clone());
        assert_eq!(sealed.len(), plain.len() + SIGNATURE_LEN);
        assert_eq!(sealed[VERSION_AT], SIGNED_VERSION);
        let pk = s.public_key();
        assert_eq!(open(&sealed, |id| (id == 2).then_some(pk)), Ok(plain));
    }

    #[test]
    fn forgeries_and_unsigned_bytes_fail() {
        let (s2, s3) = (signer(), signer());
        let pk2 = s2.public_key();
        let key_of = |id: u64| (id == 2).then_some(pk2);
        // Node 3 signs a message claiming to be from 2.
        assert_eq!(
            open(&s3.seal(v1(2)), key_of),
            Err(AuthError::BadSignature(2))
        );
        // One flipped bit anywhere.
        let good = s2.seal(v1(2));
        for i in [0, VERSION_AT + 1, 100, good.len() - 1] {
            let mut bad = good.clone();
            bad[i] ^= 1;
            assert_eq!(open(&bad, key_of), Err(AuthError::BadSignature(2)), "{i}");
        }
        // The version byte is signed too: a v1 copy with a stale signature is unsigned.
        let mut downgraded = good.clone();
        downgraded[VERSION_AT] = PLAIN_VERSION;
        assert_eq!(open(&downgraded, key_of), Err(AuthError::Unsigned(1)));
        assert_eq!(open(&v1(2), key_of), Err(AuthError::Unsigned(1)));
        assert_eq!(open(&good[..50], key_of), Err(AuthError::Truncated(50)));
        assert_eq!(
            open(&s3.seal(v1(3)), key_of),
            Err(AuthError::UnknownSender(3))
        );
    }
}
