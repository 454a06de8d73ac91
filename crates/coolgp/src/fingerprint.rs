//! The fingerprint of a vocabulary (spec §1, §9): what every message carries so that only
//! agents sharing Z, the kernel, the jitter and the initial q(W) fuse. Computed by
//! [`crate::model::Vocabulary`]; a leaf module, so that [`crate::error`] can name it.

use std::fmt;

/// SHA-256 of the vocabulary (format version, kernel, m, d', jitter, Z, init seed).
///
/// Two agents fuse only if their fingerprints are equal.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// The first 16 hex digits, as shown in logs and status.
    pub fn short(&self) -> String {
        self.0[..8].iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in &self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({})", self.short())
    }
}
