//! The store's error type.

use std::path::PathBuf;

/// What can go wrong reading or writing a coolgp file.
///
/// Display names the file and what is wrong, followed by the underlying OS or JSON error where
/// there is one (so it is not also a [`source`](std::error::Error::source): a chain printer
/// such as anyhow's `{:#}` shows it once).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A file could not be read or written.
    #[error("{what} {}: {error}", path.display())]
    Io {
        /// What was being done ("reading checkpoint", "writing", ...).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// A checkpoint is corrupt, truncated, of another format or version, fails its checksum,
    /// or was written under another vocabulary.
    #[error("checkpoint {path}: {reason}")]
    Checkpoint {
        /// The checkpoint file (empty when encoding).
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A vocabulary file is not valid JSON of the expected shape, or could not be encoded.
    #[error("{what} {}: {error}", path.display())]
    Json {
        /// What was being done ("parsing vocabulary", "encoding vocabulary").
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The JSON error.
        error: serde_json::Error,
    },
    /// A JSON file that is not a vocabulary file (its `format` key says otherwise).
    #[error("{} is not a coolgp vocabulary file (format '{format}')", path.display())]
    NotVocabulary {
        /// The file.
        path: PathBuf,
        /// The file's `format` value.
        format: String,
    },
    /// A vocabulary file whose Z does not have the `inducing × dim` shape it declares.
    #[error("{}: Z must be {inducing}×{dim}", path.display())]
    VocabularyShape {
        /// The file.
        path: PathBuf,
        /// Declared inducing inputs m.
        inducing: usize,
        /// Declared dimension d'.
        dim: usize,
    },
    /// A vocabulary file whose contents do not give the fingerprint it records (edited, or
    /// written by another version).
    #[error(
        "{}: fingerprint mismatch (file says {recorded}, contents give {computed}): the file \
         was edited or is from another version",
        path.display()
    )]
    VocabularyFingerprint {
        /// The file.
        path: PathBuf,
        /// The fingerprint the file records (hex).
        recorded: String,
        /// The fingerprint of its Z, jitter and seed (hex).
        computed: String,
    },
    /// The core refused the stored values (e.g. a Z whose kernel matrix cannot be factored).
    #[error(transparent)]
    Core(#[from] coolgp::Error),
}

impl StoreError {
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, error: std::io::Error) -> Self {
        StoreError::Io {
            what,
            path: path.into(),
            error,
        }
    }

    pub(crate) fn checkpoint(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        StoreError::Checkpoint {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, StoreError>;
