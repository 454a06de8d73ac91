//! The fleet's residual kernel as a node hands it out (`--local-fit fleet`, the default): in a
//! TLS fleet every node signs the kernel its `status` reports with its Ed25519 node key, and a
//! follower takes the fitter's kernel only if that signature verifies with the fitter's
//! roster key. A reader, or anything else that can answer on the fitter's status key, cannot
//! hand the fleet a kernel. Open fleets send and take kernels unsigned (as every message).
//!
//! The signed bytes: [`KERNEL_TAG`] | fleet | `0` | node id (u64 LE) | pooled fits (u64 LE) |
//! each parameter (f64 LE).

use crate::auth::{statement, verifies, PublicKey, Signer};

/// Domain tag of a kernel signature (no other signed bytes of the node start with it).
pub const KERNEL_TAG: &[u8] = b"coolgp kernel v1\0";

/// A kernel as a status reports it: the node, its pooled fit count and the parameters.
#[derive(Clone, Copy, Debug)]
pub struct KernelClaim<'a> {
    /// The fleet's name.
    pub fleet: &'a str,
    /// The reporting node's id.
    pub node: u64,
    /// Its `local_pooled_fits`.
    pub fits: u64,
    /// Its `local_kernel`.
    pub params: &'a [f64],
}

impl KernelClaim<'_> {
    /// The bytes a signature covers (module doc).
    pub fn signed_bytes(&self) -> Vec<u8> {
        let more = 8 * self.params.len();
        let mut b = statement(KERNEL_TAG, self.fleet, self.node, self.fits, more);
        for p in self.params {
            b.extend_from_slice(&p.to_le_bytes());
        }
        b
    }

    /// The node's signature of the claim.
    pub fn sign(&self, signer: &Signer) -> Vec<u8> {
        signer.sign(&self.signed_bytes()).to_vec()
    }

    /// True when `sig` is a signature of the claim by the holder of `key`.
    pub fn verifies(&self, key: &PublicKey, sig: &[u8]) -> bool {
        verifies(key, &self.signed_bytes(), sig)
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

impl SuspectsClaim<'_> {
    /// The bytes a signature covers.
    pub fn signed_bytes(&self) -> Vec<u8> {
        let more = 8 * self.suspects.len();
        let mut b = statement(SUSPECTS_TAG, self.fleet, self.node, self.checks, more);
        for s in self.suspects {
            b.extend_from_slice(&s.to_le_bytes());
        }
        b
    }

    /// The node's signature of the claim.
    pub fn sign(&self, signer: &Signer) -> Vec<u8> {
        signer.sign(&self.signed_bytes()).to_vec()
    }

    /// True when `sig` is a signature of the claim by the holder of `key`.
    pub fn verifies(&self, key: &PublicKey, sig: &[u8]) -> bool {
        verifies(key, &self.signed_bytes(), sig)
    }
}

#[cfg(test)]
mod tests {
    use super::{KernelClaim, SuspectsClaim};
    use crate::auth::Signer;
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
}
