//! `coolgp vocab` and the vocabulary file format (JSON): Z, jitter, init seed, fingerprint.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use coolgp::faer::Mat;
use coolgp::Vocabulary;
use serde::{Deserialize, Serialize};

/// Flags of `coolgp vocab`.
#[derive(Args, Debug)]
pub struct VocabArgs {
    /// Inducing inputs m.
    #[arg(long)]
    pub inducing: usize,
    /// Dimension d' of the standardized domain.
    #[arg(long)]
    pub dim: usize,
    /// Seed of the design and of the shared initial q(W).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Save the vocabulary here (JSON); `simulate --vocab FILE` and `node --vocab FILE` read it.
    #[arg(long)]
    pub save: Option<PathBuf>,
}

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

/// Runs `coolgp vocab`.
pub fn run(a: &VocabArgs) -> Result<()> {
    let v = Vocabulary::default_design(a.inducing, a.dim, a.seed)?;
    println!(
        "vocabulary: m = {}, d' = {}, jitter {:e}, fingerprint {}",
        v.m(),
        v.d_latent(),
        v.jitter(),
        v.fingerprint()
    );
    if let Some(p) = &a.save {
        save(&v, p)?;
        println!("saved to {}", p.display());
    }
    Ok(())
}

/// Writes a vocabulary file.
pub fn save(v: &Vocabulary, path: &Path) -> Result<()> {
    let z = v.z();
    let f = VocabFile {
        format: "coolgp-vocabulary".into(),
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
    std::fs::write(path, serde_json::to_string_pretty(&f)? + "\n")
        .with_context(|| format!("writing {}", path.display()))
}

/// Reads a vocabulary file and checks its fingerprint.
pub fn load(path: &Path) -> Result<Vocabulary> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading vocabulary {}", path.display()))?;
    let f: VocabFile = serde_json::from_str(&text)
        .with_context(|| format!("parsing vocabulary {}", path.display()))?;
    if f.format != "coolgp-vocabulary" {
        bail!(
            "{} is not a coolgp vocabulary file (format '{}')",
            path.display(),
            f.format
        );
    }
    if f.z.len() != f.inducing || f.z.iter().any(|r| r.len() != f.dim) {
        bail!("{}: Z must be {}×{}", path.display(), f.inducing, f.dim);
    }
    let z = Mat::from_fn(f.inducing, f.dim, |j, i| f.z[j][i]);
    let v = Vocabulary::with_jitter(z, f.jitter, f.init_seed)?;
    if v.fingerprint().to_string() != f.fingerprint {
        bail!(
            "{}: fingerprint mismatch (file says {}, contents give {}): the file was edited or is from another version",
            path.display(),
            f.fingerprint,
            v.fingerprint()
        );
    }
    Ok(v)
}
