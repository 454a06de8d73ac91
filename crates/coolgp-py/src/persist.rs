//! `Agent.save` / `Agent.load` (and pickling) in the checkpoint format of `coolgp node`
//! (`coolgp_store::checkpoint`, documented in docs/NODE.md): the same tensors, metadata and
//! checksum, so a node's checkpoint loads in Python and `safetensors.numpy.load_file` reads
//! ours. One metadata key is added, `coolgp_py` = JSON `{jitter, init_seed, projection}`: what
//! rebuilding the vocabulary and the projection mode needs (the node gets them from its flags).
//! The checksum does not cover it; the vocabulary it rebuilds is checked against the
//! fingerprint the checksum does cover.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use coolgp::faer::Mat;
use coolgp::Vocabulary;
use coolgp_store::checkpoint::{self, ModelIdentity, NodeMeta, StreamPos};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use safetensors::tensor::TensorView;
use safetensors::SafeTensors;
use serde_json::json;

use crate::config::{agent_config, AgentKw, LocalKw};
use crate::fence::{core_err, store_err};

/// The extra metadata key.
const EXTRA_KEY: &str = "coolgp_py";

/// Who the saved agent is, for the node metadata.
pub struct Identity<'a> {
    /// Fleet name.
    pub fleet: &'a str,
    /// Input column names.
    pub inputs: Vec<String>,
    /// Target column name.
    pub target: &'a str,
}

fn bad(path: &Path, reason: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("checkpoint {}: {reason}", path.display()))
}

/// The checkpoint bytes of `a` (with our extra metadata), as [`save`] writes them and
/// pickling carries them.
///
/// # Errors
/// `ValueError` if serialization fails (`path` names the destination in the message).
pub fn to_bytes(
    a: &coolgp::Agent,
    projection: &str,
    path: &Path,
    who: Identity<'_>,
) -> PyResult<Vec<u8>> {
    let vocab = a.vocabulary();
    let mut meta = NodeMeta {
        model: ModelIdentity {
            fleet: who.fleet.to_string(),
            id: a.id(),
            fingerprint: vocab.fingerprint().to_string(),
            m: vocab.m(),
            d_latent: vocab.d_latent(),
            inputs: who.inputs,
            target: who.target.to_string(),
        },
        stream: StreamPos::default(),
        blocks: a.blocks(),
        points: a.n_own() as u64,
        round: a.round(),
        written_unix_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        agent: checkpoint::AgentMeta::default(),
    };
    let bytes = checkpoint::to_bytes(a, &mut meta).map_err(store_err)?;
    let extra = json!({
        "jitter": vocab.jitter(),
        "init_seed": vocab.init_seed(),
        "projection": projection,
    });
    with_extra_metadata(&bytes, &extra.to_string()).map_err(|e| bad(path, e))
}

/// Writes `agent` to `path` (temporary file, fsync, rename).
///
/// # Errors
/// `OSError` for file-system failures, `ValueError` if serialization fails.
pub fn save(a: &coolgp::Agent, projection: &str, path: &Path, who: Identity<'_>) -> PyResult<()> {
    let bytes = to_bytes(a, projection, path, who)?;
    let tmp = path.with_extension("safetensors.tmp");
    let io = |what: &str, e: std::io::Error| {
        PyOSError::new_err(format!("{what} {}: {e}", path.display()))
    };
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp).map_err(|e| io("creating", e))?;
        f.write_all(&bytes)
            .and_then(|()| f.sync_all())
            .map_err(|e| io("writing", e))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| io("renaming onto", e))
}

/// The same safetensors bytes with one more metadata entry.
fn with_extra_metadata(bytes: &[u8], extra: &str) -> Result<Vec<u8>, String> {
    let (_, md) = SafeTensors::read_metadata(bytes).map_err(|e| e.to_string())?;
    let mut info: HashMap<String, String> = md.metadata().clone().unwrap_or_default();
    info.insert(EXTRA_KEY.into(), extra.into());
    let st = SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
    let views: Vec<(String, TensorView<'_>)> = st.tensors();
    safetensors::serialize(views, Some(info)).map_err(|e| e.to_string())
}

/// The vocabulary a checkpoint was written under: `given`, or rebuilt from its `vocab/z`
/// tensor and our extra metadata. Also returns the projection mode's name.
fn vocabulary_of(
    path: &Path,
    st: &SafeTensors<'_>,
    info: &HashMap<String, String>,
    given: Option<Arc<Vocabulary>>,
) -> PyResult<(Arc<Vocabulary>, String)> {
    let extra: Option<serde_json::Value> = info
        .get(EXTRA_KEY)
        .map(|s| serde_json::from_str(s))
        .transpose()
        .map_err(|e| bad(path, format!("metadata {EXTRA_KEY}: {e}")))?;
    let projection = extra
        .as_ref()
        .and_then(|e| e["projection"].as_str())
        .unwrap_or("per-agent")
        .to_string();
    if let Some(v) = given {
        return Ok((v, projection));
    }
    let Some(extra) = extra else {
        return Err(bad(
            path,
            "written by `coolgp node`: pass vocab=Vocabulary(inducing, latent_dim, seed) (the node's --inducing, --latent-dim, --vocab-seed) or Vocabulary.load(file) (its --vocab)",
        ));
    };
    let (Some(jitter), Some(seed)) = (extra["jitter"].as_f64(), extra["init_seed"].as_u64()) else {
        return Err(bad(
            path,
            format!("metadata {EXTRA_KEY} lacks jitter or init_seed"),
        ));
    };
    let (shape, z) = tensor(path, st, "vocab/z")?;
    let [m, dz] = shape[..] else {
        return Err(bad(
            path,
            format!("vocab/z: shape {shape:?}, expected [m, d']"),
        ));
    };
    let z = Mat::from_fn(m, dz, |i, j| z[i * dz + j]);
    let v = Vocabulary::with_jitter(z, jitter, seed).map_err(core_err)?;
    Ok((Arc::new(v), projection))
}

/// A float64 tensor's shape and data.
fn tensor(path: &Path, st: &SafeTensors<'_>, name: &str) -> PyResult<(Vec<usize>, Vec<f64>)> {
    let t = st
        .tensor(name)
        .map_err(|_| bad(path, format!("missing tensor {name}")))?;
    if t.dtype() != safetensors::Dtype::F64 {
        return Err(bad(
            path,
            format!("{name}: dtype {:?}, expected F64", t.dtype()),
        ));
    }
    let data = t
        .data()
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect();
    Ok((t.shape().to_vec(), data))
}

/// Reads a checkpoint (ours or a node's) into an agent.
///
/// # Errors
/// `OSError` if unreadable; `ValueError` for a corrupt or foreign file, or a vocabulary
/// mismatch.
pub fn load(path: &Path, given: Option<Arc<Vocabulary>>) -> PyResult<(coolgp::Agent, String)> {
    let bytes = std::fs::read(path)
        .map_err(|e| PyOSError::new_err(format!("reading checkpoint {}: {e}", path.display())))?;
    from_bytes(path, &bytes, given)
}

/// Checkpoint bytes (ours or a node's, read from `path`) into an agent and its projection
/// mode's name.
///
/// # Errors
/// `ValueError` for corrupt or foreign bytes, or a vocabulary mismatch.
pub fn from_bytes(
    path: &Path,
    bytes: &[u8],
    given: Option<Arc<Vocabulary>>,
) -> PyResult<(coolgp::Agent, String)> {
    let (_, md) = SafeTensors::read_metadata(bytes)
        .map_err(|e| bad(path, format!("not a safetensors file: {e}")))?;
    let info = md.metadata().clone().unwrap_or_default();
    let st = SafeTensors::deserialize(bytes).map_err(|e| bad(path, format!("corrupt: {e}")))?;
    let (vocab, projection) = vocabulary_of(path, &st, &info, given)?;
    let (shape, _) = tensor(path, &st, "theta/mu")?;
    let [_, d] = shape[..] else {
        return Err(bad(
            path,
            format!("theta/mu: shape {shape:?}, expected [d', d]"),
        ));
    };
    let cp = checkpoint::from_bytes(path, bytes, &vocab, d).map_err(store_err)?;
    let mut snap = cp.snapshot;
    // The node's format always restores per-agent q(W); ours records the mode (the
    // likelihood is the checkpoint's own).
    let kw = AgentKw {
        mode: "frozen",
        samples: None,
        normalization: None,
        projection: &projection,
        fusion: "tree",
        fleet_size: None,
        learn: true,
        seed: 0,
        projection_group: None,
        site: coolgp::learn::SiteOptions::default(),
        local: LocalKw::default(),
        likelihood: None,
        robust_c: None,
    };
    snap.config.projection = agent_config(&kw).map_err(|e| bad(path, e))?.projection;
    let inner = coolgp::Agent::restore(vocab, snap).map_err(core_err)?;
    Ok((inner, projection))
}
