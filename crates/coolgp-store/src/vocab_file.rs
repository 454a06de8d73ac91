//! The vocabulary file (`coolgp vocab --save FILE`, `--vocab FILE`, Python's
//! `Vocabulary.save`/`load`): pretty JSON with Z (row per inducing input), the jitter on K, the
//! seed of the shared initial q(W), and the fingerprint, which is checked on load.
//!
//! ```json
//! {"format": "coolgp-vocabulary", "version": 1, "inducing": m, "dim": d', "jitter": ε,
//!  "init_seed": s, "z": [[…d' numbers…], …m rows…], "fingerprint": "<hex>"}
//! ```

use std::path::Path;

use coolgp::faer::Mat;
use coolgp::Vocabulary;
use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};

/// Value of the `format` key.
pub const FORMAT: &str = "coolgp-vocabulary";

#[derive(Serialize, Deserialize)]
struct VocabFile {
    format: String,
    version: u32,
    inducing: usize,
    dim: usize,
    jitter: f64,
    init_seed: u64,
    z: Vec<Vec<f64>>,
    fingerprint: String,
}

/// Writes a vocabulary file.
///
/// # Errors
/// [`StoreError::Io`] if the file cannot be written.
pub fn save(v: &Vocabulary, path: &Path) -> Result<()> {
    let z = v.z();
    let f = VocabFile {
        format: FORMAT.into(),
        version: coolgp::model::vocabulary::FORMAT_VERSION,
        inducing: v.m(),
        dim: v.d_latent(),
        jitter: v.jitter(),
        init_seed: v.init_seed(),
        z: (0..z.nrows())
            .map(|j| (0..z.ncols()).map(|i| z[(j, i)]).collect())
            .collect(),
        fingerprint: v.fingerprint().to_string(),
    };
    let text = serde_json::to_string_pretty(&f).map_err(|error| StoreError::Json {
        what: "encoding vocabulary",
        path: path.to_path_buf(),
        error,
    })?;
    std::fs::write(path, text + "\n").map_err(|e| StoreError::io("writing", path, e))
}

/// Reads a vocabulary file and checks its fingerprint.
///
/// # Errors
/// [`StoreError::Io`] (unreadable), [`StoreError::Json`] (not JSON of this shape),
/// [`StoreError::NotVocabulary`], [`StoreError::VocabularyShape`],
/// [`StoreError::VocabularyFingerprint`] (edited or from another version), or
/// [`StoreError::Core`] if the core refuses Z.
pub fn load(path: &Path) -> Result<Vocabulary> {
    let text =
        std::fs::read_to_string(path).map_err(|e| StoreError::io("reading vocabulary", path, e))?;
    let f: VocabFile = serde_json::from_str(&text).map_err(|error| StoreError::Json {
        what: "parsing vocabulary",
        path: path.to_path_buf(),
        error,
    })?;
    if f.format != FORMAT {
        return Err(StoreError::NotVocabulary {
            path: path.to_path_buf(),
            format: f.format,
        });
    }
    if f.z.len() != f.inducing || f.z.iter().any(|r| r.len() != f.dim) {
        return Err(StoreError::VocabularyShape {
            path: path.to_path_buf(),
            inducing: f.inducing,
            dim: f.dim,
        });
    }
    let z = Mat::from_fn(f.inducing, f.dim, |j, i| f.z[j][i]);
    let v = Vocabulary::with_jitter(z, f.jitter, f.init_seed)?;
    if v.fingerprint().to_string() != f.fingerprint {
        return Err(StoreError::VocabularyFingerprint {
            path: path.to_path_buf(),
            recorded: f.fingerprint,
            computed: v.fingerprint().to_string(),
        });
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("coolgp-store-{}-{name}", std::process::id()))
    }

    #[test]
    fn a_saved_vocabulary_loads_with_the_same_fingerprint() {
        let v = Vocabulary::default_design(5, 2, 7).expect("vocabulary");
        let p = temp("round-trip.json");
        save(&v, &p).expect("save");
        let back = load(&p).expect("load");
        let _ = std::fs::remove_file(&p);
        assert_eq!(back.fingerprint(), v.fingerprint());
        assert_eq!(back.z().to_owned(), v.z().to_owned());
        assert_eq!(back.jitter().to_bits(), v.jitter().to_bits());
    }

    #[test]
    fn an_edited_file_and_a_foreign_file_are_refused_with_their_reason() {
        let v = Vocabulary::default_design(4, 2, 1).expect("vocabulary");
        let p = temp("edited.json");
        save(&v, &p).expect("save");
        let text = std::fs::read_to_string(&p).expect("read");
        let edited = text.replacen("\"init_seed\": 1", "\"init_seed\": 2", 1);
        assert_ne!(edited, text);
        std::fs::write(&p, edited).expect("write");
        let e = load(&p).expect_err("edited");
        assert!(matches!(e, StoreError::VocabularyFingerprint { .. }), "{e}");
        assert!(e.to_string().contains("fingerprint mismatch"), "{e}");
        std::fs::write(&p, text.replacen(FORMAT, "something-else", 1)).expect("write");
        let e = load(&p).expect_err("foreign");
        assert!(matches!(e, StoreError::NotVocabulary { .. }), "{e}");
        let _ = std::fs::remove_file(&p);
        let e = load(&p).expect_err("missing");
        assert!(e.to_string().starts_with("reading vocabulary "), "{e}");
    }
}
