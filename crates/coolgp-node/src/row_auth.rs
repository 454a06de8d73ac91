//! Who receives a node's raw memory rows: the `fit_sample` requests of the pooled fit of the
//! residual kernel and the `held_out` requests of `coolgp query --all --calibrate`
//! (docs/NODE.md §13).
//!
//! - `--local-fit agent`: none ([`RowPolicy::NotShared`]).
//! - `--local-fit fleet` (the default) in an **open** fleet: whoever reaches the node and asks
//!   ([`RowPolicy::Anyone`]): the node cannot tell who asks.
//! - `--local-fit fleet` with `--tls`: only a request signed by a node of the roster
//!   ([`RowPolicy::Members`]). The zenoh query carries an attachment of [`ATTACHMENT_LEN`]
//!   bytes, `requester id (u64 LE) | unix ms (u64 LE) | Ed25519 signature`, the signature (with
//!   the requester's node key, [`crate::auth`]) over `"coolgp rows v1\0" | fleet | "\0" |
//!   requester id | unix ms | the query's body` ([`signed_bytes`]). A request signed more
//!   than [`MAX_AGE_MS`] away from the node's clock is refused, and so is a signature already
//!   answered within that time (a replay). Readers (`reader.pem`) hold no node key: they get
//!   a clear error and no rows.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::auth::{statement, verifies, PublicKey, Signer, SIGNATURE_LEN};

/// The domain tag that starts the signed bytes of a request for rows.
pub const REQUEST_TAG: &[u8] = b"coolgp rows v1\0";
/// Length of a request's attachment: requester id, unix ms, signature.
pub const ATTACHMENT_LEN: usize = 16 + SIGNATURE_LEN;
/// Most milliseconds between a request's signing time and the node's clock (either way).
pub const MAX_AGE_MS: u64 = 60_000;

/// Why a node refuses to send its memory rows (the error reply's text).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RowRequestError {
    /// The node fits its own kernel (`--local-fit agent`) and never sends rows.
    #[error("{}", crate::query::NOT_SHARED)]
    NotShared,
    /// A TLS fleet's node got a request without a valid attachment.
    #[error(
        "this node sends its memory rows only to members of fleet '{0}': the request must be \
         signed with a node key of the fleet (a reader or an unsigned client gets no rows)"
    )]
    Unsigned(String),
    /// The requester is not in the node's roster.
    #[error("the request for rows is signed by node {0}, which is not in this node's roster")]
    UnknownRequester(u64),
    /// The signature does not verify with the requester's key.
    #[error("the request for rows does not verify with node {0}'s key")]
    BadSignature(u64),
    /// Signed too far from the node's clock.
    #[error(
        "the request for rows was signed {0} ms away from this node's clock (at most \
         {MAX_AGE_MS}): check the clocks"
    )]
    Stale(u64),
    /// A signature already answered (a replay).
    #[error("the request for rows repeats a signature already answered (a replay)")]
    Replayed,
}

/// The bytes a request for rows is signed over (module doc).
pub fn signed_bytes(fleet: &str, by: u64, at_ms: u64, body: &[u8]) -> Vec<u8> {
    let mut b = statement(REQUEST_TAG, fleet, by, at_ms, body.len());
    b.extend_from_slice(body);
    b
}

/// The attachment that signs request `body` of node `by` of `fleet` at `at_ms` (module doc).
pub fn sign_request(signer: &Signer, fleet: &str, by: u64, at_ms: u64, body: &[u8]) -> Vec<u8> {
    let mut a = Vec::with_capacity(ATTACHMENT_LEN);
    a.extend_from_slice(&by.to_le_bytes());
    a.extend_from_slice(&at_ms.to_le_bytes());
    a.extend_from_slice(&signer.sign(&signed_bytes(fleet, by, at_ms, body)));
    a
}

/// Signatures answered recently, with their signing times (the replay check).
#[derive(Debug, Default)]
pub struct Seen(BTreeMap<[u8; SIGNATURE_LEN], u64>);

/// A TLS fleet's members as a node knows them when a query arrives.
#[derive(Clone, Debug)]
pub struct Members {
    /// The fleet's name.
    pub fleet: String,
    /// The roster's keys by agent id.
    pub keys: BTreeMap<u64, PublicKey>,
    /// Signatures answered recently (shared by every query of the node).
    pub seen: Arc<Mutex<Seen>>,
}

/// Who may receive the node's raw memory rows (module doc).
#[derive(Clone, Debug)]
pub enum RowPolicy {
    /// Nobody (`--local-fit agent`).
    NotShared,
    /// Whoever asks (`--local-fit fleet` in an open fleet).
    Anyone,
    /// Members of a TLS fleet, by a signed request.
    Members(Members),
}

impl RowPolicy {
    /// Admits a request for rows with query body `body` and attachment `attachment` at the
    /// node's time `now_ms`: `Ok(Some(id))` for a member's signed request, `Ok(None)` under
    /// [`RowPolicy::Anyone`].
    ///
    /// # Errors
    /// [`RowRequestError`] for a request that gets no rows.
    pub fn admit(
        &self,
        body: &[u8],
        attachment: Option<&[u8]>,
        now_ms: u64,
    ) -> Result<Option<u64>, RowRequestError> {
        match self {
            Self::NotShared => Err(RowRequestError::NotShared),
            Self::Anyone => Ok(None),
            Self::Members(m) => {
                // A poisoned lock still holds a usable cache (a panic mid-insert loses one entry).
                let mut seen = m
                    .seen
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let key_of = |id: u64| m.keys.get(&id).copied();
                check(&m.fleet, key_of, body, attachment, now_ms, &mut seen).map(Some)
            }
        }
    }
}

/// The requester id of a request's attachment (module doc), if it has an attachment's
/// length: read before the signature is checked, to look the requester up.
pub fn requester(attachment: Option<&[u8]>) -> Option<u64> {
    parse(attachment).map(|(by, _, _)| by)
}

/// An attachment's requester id, signing time and signature, if it has an attachment's length.
fn parse(attachment: Option<&[u8]>) -> Option<(u64, u64, [u8; SIGNATURE_LEN])> {
    let a = attachment.filter(|a| a.len() == ATTACHMENT_LEN)?;
    let word = |i: usize| a.get(i..i + 8)?.try_into().ok().map(u64::from_le_bytes);
    let sig = a.get(16..)?.try_into().ok()?;
    Some((word(0)?, word(8)?, sig))
}

/// Checks a member's signed request for rows (module doc); returns the requester's id.
///
/// # Errors
/// [`RowRequestError`]: no or a malformed attachment, an unknown requester, a bad
/// signature, a stale signing time or a replay.
pub fn check(
    fleet: &str,
    key_of: impl FnOnce(u64) -> Option<PublicKey>,
    body: &[u8],
    attachment: Option<&[u8]>,
    now_ms: u64,
    seen: &mut Seen,
) -> Result<u64, RowRequestError> {
    let (by, at_ms, sig) =
        parse(attachment).ok_or_else(|| RowRequestError::Unsigned(fleet.to_string()))?;
    let pk = key_of(by).ok_or(RowRequestError::UnknownRequester(by))?;
    if !verifies(&pk, &signed_bytes(fleet, by, at_ms, body), &sig) {
        return Err(RowRequestError::BadSignature(by));
    }
    let age = now_ms.abs_diff(at_ms);
    if age > MAX_AGE_MS {
        return Err(RowRequestError::Stale(age));
    }
    seen.0.retain(|_, &mut t| now_ms.abs_diff(t) <= MAX_AGE_MS);
    if seen.0.insert(sig, at_ms).is_some() {
        return Err(RowRequestError::Replayed);
    }
    Ok(by)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::Ed25519KeyPair;
    use std::path::Path;

    fn signer() -> Signer {
        let der = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("key");
        Signer::from_pkcs8(der.as_ref(), Path::new("k")).expect("signer")
    }

    fn members(keys: &[(u64, &Signer)]) -> RowPolicy {
        RowPolicy::Members(Members {
            fleet: "f".into(),
            keys: keys.iter().map(|(id, s)| (*id, s.public_key())).collect(),
            seen: Arc::default(),
        })
    }

    #[test]
    fn a_member_s_signed_request_is_admitted_once() {
        let s1 = signer();
        let p = members(&[(1, &s1)]);
        let body = br#"{"x":[],"fit_sample":40}"#;
        let a = sign_request(&s1, "f", 1, 1_000_000, body);
        assert_eq!(a.len(), ATTACHMENT_LEN);
        // The requester is read before any check (to look an unknown one up in the roster).
        assert_eq!(requester(Some(&a)), Some(1));
        assert_eq!(requester(Some(&a[1..])), None);
        assert_eq!(requester(None), None);
        assert_eq!(p.admit(body, Some(&a), 1_000_500), Ok(Some(1)));
        assert_eq!(
            p.admit(body, Some(&a), 1_000_900),
            Err(RowRequestError::Replayed)
        );
        // A new signature of the same request is a new request.
        let again = sign_request(&s1, "f", 1, 1_000_001, body);
        assert_eq!(p.admit(body, Some(&again), 1_001_000), Ok(Some(1)));
        // The open and the closed policies.
        assert_eq!(RowPolicy::Anyone.admit(body, None, 0), Ok(None));
        let e = RowPolicy::NotShared.admit(body, Some(&a), 0).unwrap_err();
        assert!(
            e.to_string().contains("does not send its memory rows"),
            "{e}"
        );
    }

    #[test]
    fn non_members_forgeries_and_stale_requests_get_no_rows() {
        let (s1, s2, outsider) = (signer(), signer(), signer());
        let p = members(&[(1, &s1), (2, &s2)]);
        let body = br#"{"x":[],"held_out":20}"#;
        let now = 5_000_000;
        // No attachment (a reader, an open client) or a malformed one.
        for a in [None, Some(&[0u8; 10][..])] {
            let e = p.admit(body, a, now).unwrap_err();
            assert_eq!(e, RowRequestError::Unsigned("f".into()));
            assert!(
                e.to_string().contains("only to members of fleet 'f'"),
                "{e}"
            );
        }
        // A key outside the roster, under an unknown id or a member's id; a member's signature
        // on another body, another fleet, or with a flipped bit.
        let a = sign_request(&s1, "f", 1, now, body);
        let mut flipped = a.clone();
        flipped[8] ^= 1;
        let other: &[u8] = br#"{"x":[],"held_out":500}"#;
        let refused = [
            (
                body as &[u8],
                sign_request(&outsider, "f", 9, now, body),
                RowRequestError::UnknownRequester(9),
            ),
            (
                body,
                sign_request(&outsider, "f", 2, now, body),
                RowRequestError::BadSignature(2),
            ),
            (other, a.clone(), RowRequestError::BadSignature(1)),
            (
                body,
                sign_request(&s1, "g", 1, now, body),
                RowRequestError::BadSignature(1),
            ),
            (body, flipped, RowRequestError::BadSignature(1)),
        ];
        for (b, att, want) in refused {
            assert_eq!(p.admit(b, Some(&att), now), Err(want));
        }
        // Signed too long ago or too far ahead.
        for at in [now - MAX_AGE_MS - 1, now + MAX_AGE_MS + 1] {
            let a = sign_request(&s2, "f", 2, at, body);
            assert_eq!(
                p.admit(body, Some(&a), now),
                Err(RowRequestError::Stale(MAX_AGE_MS + 1))
            );
        }
        // The good one still passes after all these refusals.
        assert_eq!(p.admit(body, Some(&a), now), Ok(Some(1)));
    }
}
