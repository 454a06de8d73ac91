//! The fleet's residual kernel as a node hands it out (`--local-fit fleet`, the default): in a
//! TLS fleet every node signs the kernel its `status` reports with its Ed25519 node key, and a
//! follower takes the fitter's kernel only if that signature verifies with the fitter's
//! roster key. A reader, or anything else that can answer on the fitter's status key, cannot
//! hand the fleet a kernel. Open fleets send and take kernels unsigned (as every message).
//!
//! The signed bytes: [`KERNEL_TAG`] | fleet | `0` | node id (u64 LE) | pooled fits (u64 LE) |
//! each word of the kernel (f64 LE).
//!
//! The kernel's words (`local_kernel` in the status, [`kernel_words`]): a learned kernel's
//! parameters `[ln σ_r, ln σ_rn, ln ℓ_1..d]` followed, for a Matérn family, by its smoothness
//! ν (1.5 or 2.5; docs/LOCAL.md §12a); the squared exponential (ν → ∞) has no word more, as
//! before the families, so its words are the parameters alone. The sum family's words are its
//! `2d + 4` parameters followed by [`SUM_WORD`] (0, never a Matérn ν): a node of a build
//! before the sum counts `2d + 5` words where it expects `2 + d` or `3 + d` and refuses them
//! with a log line, keeping its kernel. The family is signed with the parameters. A follower
//! reads them back with [`kernel_of_words`] and refuses a family it does not know.

use coolgp::local::ResidualFamily;

use crate::auth::{statement, verifies, PublicKey, Signer};
use crate::status::Status;

/// The word after a sum kernel's parameters (module doc): 0, no Matérn smoothness.
pub const SUM_WORD: f64 = 0.0;

/// A learned kernel of `family` with `params` as a status reports it (module doc): the
/// parameters, then ν for a Matérn family or [`SUM_WORD`] for the sum.
pub fn kernel_words(family: ResidualFamily, params: &[f64]) -> Vec<f64> {
    let mut words = params.to_vec();
    words.extend(family.smoothness());
    if family == ResidualFamily::Sum {
        words.push(SUM_WORD);
    }
    words
}

/// The family and parameters of a status's kernel words (module doc), for a learned kernel
/// whose squared exponential has `len` parameters (`2 + d`): `len` words are a squared
/// exponential, `len + 1` a Matérn kernel whose last word is its smoothness ν, `2·len + 1`
/// (`2d + 5`) a sum whose last word is [`SUM_WORD`].
///
/// # Errors
/// The reason, for a log line: another number of words, or a ν of no family this build
/// knows (a fitter of a newer build).
pub fn kernel_of_words(words: &[f64], len: usize) -> Result<(ResidualFamily, &[f64]), String> {
    match words.len() {
        n if n == len => Ok((ResidualFamily::SquaredExponential, words)),
        n if len >= 2 && n == 2 * len + 1 && words[n - 1] == SUM_WORD => {
            Ok((ResidualFamily::Sum, &words[..n - 1]))
        }
        n if n == len + 1 => {
            let nu = words[len];
            let family = ResidualFamily::from_smoothness(nu).ok_or_else(|| {
                let known: Vec<&str> = ResidualFamily::ALL.iter().map(|f| f.name()).collect();
                format!(
                    "unknown kernel family (Matérn smoothness ν = {nu}); this node knows {}",
                    known.join(", ")
                )
            })?;
            Ok((family, &words[..len]))
        }
        n => Err(format!(
            "{n} kernel words, expected {len} parameters (squared exponential), {} \
             (Matérn: the parameters and ν) or {} (the sum: its 2d + 4 parameters and 0)",
            len + 1,
            2 * len + 1
        )),
    }
}

/// Domain tag of a kernel signature (no other signed bytes of the node start with it).
pub const KERNEL_TAG: &[u8] = b"coolgp kernel v1\0";

/// A statement a node's status carries and, in a TLS fleet, signs with its node key.
pub trait Claim {
    /// The bytes a signature covers.
    fn signed_bytes(&self) -> Vec<u8>;

    /// The node's signature of the claim.
    fn sign(&self, signer: &Signer) -> Vec<u8> {
        signer.sign(&self.signed_bytes()).to_vec()
    }

    /// True when `sig` is a signature of the claim by the holder of `key`.
    fn verifies(&self, key: &PublicKey, sig: &[u8]) -> bool {
        verifies(key, &self.signed_bytes(), sig)
    }
}

/// `tag | fleet | 0 | node (u64 LE) | count (u64 LE) | each word (8 bytes LE)`.
pub(crate) fn claim_bytes(
    tag: &[u8],
    fleet: &str,
    node: u64,
    count: u64,
    words: &[[u8; 8]],
) -> Vec<u8> {
    let mut b = statement(tag, fleet, node, count, 8 * words.len());
    words.iter().for_each(|w| b.extend_from_slice(w));
    b
}

/// Whether a node may take what `from`'s status claims (`claim`, signed `sig`): always in an
/// open fleet (`key` `None`); with `--tls` only if the signature verifies with `from`'s
/// roster key (`Some(None)`: not in the roster). A refusal is logged, naming `what`.
pub fn taken_from(
    key: Option<Option<PublicKey>>,
    from: u64,
    claim: &impl Claim,
    sig: &[u8],
    what: &str,
) -> bool {
    let Some(key) = key else {
        return true;
    };
    let ok = key.is_some_and(|k| claim.verifies(&k, sig));
    if !ok {
        tracing::warn!(
            from,
            "{what} refused: the status reply is not signed by the node's key"
        );
    }
    ok
}

/// A kernel as a status reports it: the node, its pooled fit count and the parameters.
#[derive(Clone, Copy, Debug)]
pub struct KernelClaim<'a> {
    /// The fleet's name.
    pub fleet: &'a str,
    /// The reporting node's id.
    pub node: u64,
    /// Its `local_pooled_fits`.
    pub fits: u64,
    /// Its `local_kernel`: the kernel's words, family included ([`kernel_words`]).
    pub params: &'a [f64],
}

impl<'a> KernelClaim<'a> {
    /// The kernel node `node`'s status `s` reports.
    pub fn of(fleet: &'a str, node: u64, s: &'a Status) -> Self {
        Self {
            fleet,
            node,
            fits: s.local_pooled_fits,
            params: &s.local_kernel,
        }
    }
}

impl Claim for KernelClaim<'_> {
    /// The bytes a signature covers (module doc).
    fn signed_bytes(&self) -> Vec<u8> {
        let words: Vec<[u8; 8]> = self.params.iter().map(|p| p.to_le_bytes()).collect();
        claim_bytes(KERNEL_TAG, self.fleet, self.node, self.fits, &words)
    }
}

/// Domain tag of a consensus signature (`--local-fit agent`, docs/LOCAL.md §12b).
pub const CONSENSUS_TAG: &[u8] = b"coolgp consensus v1\0";

/// The consensus of the members' own kernels a node publishes (its status's
/// `local_consensus`, [`crate::status::Status`]): a [`KernelClaim`] whose parameters are the
/// consensus's words, signed under [`CONSENSUS_TAG`] so that neither signature can stand
/// for the other.
#[derive(Clone, Copy, Debug)]
pub struct ConsensusClaim<'a>(pub KernelClaim<'a>);

impl<'a> ConsensusClaim<'a> {
    /// The consensus node `node`'s status `s` reports.
    pub fn of(fleet: &'a str, node: u64, s: &'a Status) -> Self {
        Self(KernelClaim {
            fleet,
            node,
            fits: s.local_pooled_fits,
            params: &s.local_consensus,
        })
    }
}

impl Claim for ConsensusClaim<'_> {
    /// As [`KernelClaim`]'s, under [`CONSENSUS_TAG`].
    fn signed_bytes(&self) -> Vec<u8> {
        let k = &self.0;
        let words: Vec<[u8; 8]> = k.params.iter().map(|p| p.to_le_bytes()).collect();
        claim_bytes(CONSENSUS_TAG, k.fleet, k.node, k.fits, &words)
    }
}

/// Domain tag of a suspects signature (issue 29).
pub const SUSPECTS_TAG: &[u8] = b"coolgp suspects v1\0";

/// The fitter's verdict as its status reports it (issue 29, docs/MEMBERS.md §5): the node,
/// its member-check count and the suspects. Signed like a kernel, so that in a TLS fleet only
/// the fitter can have a member withheld. Signed bytes: [`SUSPECTS_TAG`] | fleet | `0` | node
/// id (u64 LE) | checks (u64 LE) | each suspect id (u64 LE).
#[derive(Clone, Copy, Debug)]
pub struct SuspectsClaim<'a> {
    /// The fleet's name.
    pub fleet: &'a str,
    /// The judging node's id.
    pub node: u64,
    /// Its `member_checks`.
    pub checks: u64,
    /// Its `suspects`.
    pub suspects: &'a [u64],
}

impl<'a> SuspectsClaim<'a> {
    /// The verdict node `node`'s status `s` reports.
    pub fn of(fleet: &'a str, node: u64, s: &'a Status) -> Self {
        Self {
            fleet,
            node,
            checks: s.member_checks,
            suspects: &s.suspects,
        }
    }
}

impl Claim for SuspectsClaim<'_> {
    fn signed_bytes(&self) -> Vec<u8> {
        let words: Vec<[u8; 8]> = self.suspects.iter().map(|s| s.to_le_bytes()).collect();
        claim_bytes(SUSPECTS_TAG, self.fleet, self.node, self.checks, &words)
    }
}

#[cfg(test)]
mod tests {
    use super::{kernel_of_words, kernel_words, Claim, KernelClaim, SuspectsClaim};
    use crate::auth::Signer;
    use coolgp::local::ResidualFamily;
    use ring::rand::SystemRandom;
    use ring::signature::Ed25519KeyPair;
    use std::path::Path;

    fn signer() -> Signer {
        let der = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("key");
        Signer::from_pkcs8(der.as_ref(), Path::new("test")).expect("signer")
    }

    #[test]
    fn only_the_signed_kernel_of_that_node_verifies() {
        let (fitter, other) = (signer(), signer());
        let params = [0.1, -1.2, 0.7];
        let claim = KernelClaim {
            fleet: "lab",
            node: 1,
            fits: 4,
            params: &params,
        };
        let sig = claim.sign(&fitter);
        assert!(claim.verifies(&fitter.public_key(), &sig));
        // Another key, another node, fit count, fleet or parameter, or a flipped bit: refused.
        assert!(!claim.verifies(&other.public_key(), &sig));
        assert!(!claim.verifies(&fitter.public_key(), &claim.sign(&other)));
        let moved = [0.1, -1.2, 0.7000000001];
        for c in [
            KernelClaim { node: 2, ..claim },
            KernelClaim { fits: 5, ..claim },
            KernelClaim {
                fleet: "lab2",
                ..claim
            },
            KernelClaim {
                params: &moved,
                ..claim
            },
        ] {
            assert!(!c.verifies(&fitter.public_key(), &sig), "{c:?}");
        }
        let mut bad = sig.clone();
        bad[7] ^= 1;
        assert!(!claim.verifies(&fitter.public_key(), &bad));
        assert!(!claim.verifies(&fitter.public_key(), &sig[..63]));
    }

    #[test]
    fn only_the_fitters_signed_suspects_verify() {
        let (fitter, other) = (signer(), signer());
        let claim = SuspectsClaim {
            fleet: "lab",
            node: 0,
            checks: 7,
            suspects: &[2, 5],
        };
        let sig = claim.sign(&fitter);
        assert!(claim.verifies(&fitter.public_key(), &sig));
        assert!(!claim.verifies(&other.public_key(), &sig));
        for c in [
            SuspectsClaim { checks: 8, ..claim },
            SuspectsClaim {
                suspects: &[2],
                ..claim
            },
            SuspectsClaim {
                suspects: &[2, 5, 1],
                ..claim
            },
            SuspectsClaim { node: 1, ..claim },
        ] {
            assert!(!c.verifies(&fitter.public_key(), &sig), "{c:?}");
        }
        // A kernel signature is not a suspects signature.
        let kernel = KernelClaim {
            fleet: "lab",
            node: 0,
            fits: 7,
            params: &[],
        };
        assert!(!claim.verifies(&fitter.public_key(), &kernel.sign(&fitter)));
    }

    #[test]
    fn a_kernel_and_its_family_travel_as_words_and_an_unknown_family_is_refused() {
        let p = [0.1, -1.2, 0.7, 0.3];
        for family in ResidualFamily::STATIONARY {
            let words = kernel_words(family, &p);
            // The squared exponential's words are its parameters alone, as before.
            let extra = usize::from(family != ResidualFamily::SquaredExponential);
            assert_eq!(words.len(), p.len() + extra);
            assert_eq!(kernel_of_words(&words, 4), Ok((family, &p[..])));
        }
        // The sum (d = 2): its 8 parameters and 0; an older node's reading (len + 1 words
        // at most) refuses its 9 words by count.
        let q = [0.1, -1.2, 0.7, 0.3, -0.5, 0.2, 1.7, 1.3];
        let words = kernel_words(ResidualFamily::Sum, &q);
        assert_eq!(words.len(), 9);
        assert_eq!(
            kernel_of_words(&words, 4),
            Ok((ResidualFamily::Sum, &q[..]))
        );
        let mut bad = words.clone();
        bad[8] = 1.5;
        assert!(kernel_of_words(&bad, 4).is_err(), "9 words with a ν");
        let why = kernel_of_words(&words[..7], 4).expect_err("7 words");
        assert!(why.contains("7 kernel words"), "{why}");
        let why = kernel_of_words(&[0.1, -1.2, 0.7, 0.3, 0.5], 4).expect_err("ν = 1/2");
        assert!(
            why.contains("unknown kernel family") && why.contains("0.5"),
            "{why}"
        );
        assert!(kernel_of_words(&[0.1, f64::NAN, 0.7, 0.3, f64::NAN], 4).is_err());
        assert!(kernel_of_words(&p[..2], 4).is_err());
        // The family is signed: the same parameters in another family do not verify.
        let s = signer();
        let words = kernel_words(ResidualFamily::Matern32, &p);
        let claim = KernelClaim {
            fleet: "lab",
            node: 1,
            fits: 2,
            params: &words,
        };
        let sig = claim.sign(&s);
        let other = kernel_words(ResidualFamily::Matern52, &p);
        let swapped = KernelClaim {
            params: &other,
            ..claim
        };
        assert!(claim.verifies(&s.public_key(), &sig));
        assert!(!swapped.verifies(&s.public_key(), &sig));
    }
}
