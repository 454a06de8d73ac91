//! Crash-safe checkpoints in the node's state directory: the newest as
//! `<state>/checkpoint.safetensors`, the previous one as `checkpoint.prev.safetensors` (used if
//! the newest fails its checksum); each written to a temporary file, fsynced and renamed.
//!
//! The format itself (tensors, metadata, checksum) is [`coolgp_store::checkpoint`]'s,
//! re-exported here.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use coolgp::{Agent, Vocabulary};

pub use coolgp_store::checkpoint::{
    from_bytes, read_meta, to_bytes, AgentMeta, Checkpoint, LocalMeta, ModelIdentity, NodeMeta,
    StreamPos, FORMAT, FORMAT_VERSION, FORMAT_VERSIONS_READ,
};

use crate::error::{NodeError, Result};

/// The checkpoint file name inside the state directory.
pub const FILE: &str = "checkpoint.safetensors";
/// The previous checkpoint, kept as a fallback.
pub const PREV_FILE: &str = "checkpoint.prev.safetensors";
/// Temporary file of a checkpoint being written.
pub const TMP_FILE: &str = "checkpoint.safetensors.tmp";

/// Writes a checkpoint durably: temporary file, fsync, keep the previous one, rename, fsync
/// the directory. Returns the bytes written.
///
/// # Errors
/// [`NodeError::Io`] on any file-system failure (the previous checkpoint is then intact).
pub fn write(dir: &Path, agent: &Agent, meta: &mut NodeMeta) -> Result<usize> {
    let bytes = to_bytes(agent, meta)?;
    let tmp = dir.join(TMP_FILE);
    let dst = dir.join(FILE);
    let prev = dir.join(PREV_FILE);
    {
        let mut f =
            File::create(&tmp).map_err(|e| NodeError::io("creating checkpoint", &tmp, e))?;
        f.write_all(&bytes)
            .and_then(|()| f.sync_all())
            .map_err(|e| NodeError::io("writing checkpoint", &tmp, e))?;
    }
    if dst.exists() {
        std::fs::rename(&dst, &prev)
            .map_err(|e| NodeError::io("keeping previous checkpoint", &prev, e))?;
    }
    std::fs::rename(&tmp, &dst).map_err(|e| NodeError::io("renaming checkpoint", &dst, e))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| NodeError::io("syncing state directory", dir, e))?;
    Ok(bytes.len())
}

/// Loads the newest valid checkpoint of a state directory: `checkpoint.safetensors`, or the
/// previous one if the newest is missing or fails verification. `None` if there is none.
///
/// # Errors
/// [`NodeError::Checkpoint`] when checkpoints exist but none verifies (the node refuses to
/// start rather than silently forget acknowledged data).
pub fn load_latest(dir: &Path, vocab: &Vocabulary, d: usize) -> Result<Option<Checkpoint>> {
    let mut first_err = None;
    for name in [FILE, PREV_FILE] {
        let path = dir.join(name);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(NodeError::io("reading checkpoint", &path, e)),
        };
        match from_bytes(&path, &bytes, vocab, d) {
            Ok(c) => {
                if let Some(e) = &first_err {
                    tracing::warn!(error = %e, fallback = %path.display(), "newest checkpoint unusable; using the previous one");
                }
                return Ok(Some(c));
            }
            Err(e) => {
                if first_err.is_none() {
                    first_err = Some(e);
                }
            }
        }
    }
    match first_err {
        Some(e) => Err(e.into()),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use coolgp::faer::Mat;
    use coolgp::AgentConfig;

    use super::*;

    /// An agent of input dimension 3 that absorbed one block and ticked once.
    fn agent(vocab: &Arc<Vocabulary>) -> Agent {
        let mut a = Agent::new(1, vocab.clone(), 3, AgentConfig::default()).expect("agent");
        a.set_neighbors([0, 2]).expect("neighbours");
        let x = Mat::from_fn(7, 3, |i, j| ((i * 7 + j * 3) as f64 * 0.37).sin() * 1.5);
        let y: Vec<f64> = (0..7).map(|i| x[(i, 0)].sin() + 0.3 * x[(i, 2)]).collect();
        a.handle_block(x.as_ref(), &y).expect("block");
        a.handle_tick();
        a
    }

    /// Metadata at stream offset 1234 (the agent part is filled in by the writer).
    fn meta(vocab: &Vocabulary, id: u64) -> NodeMeta {
        let model = serde_json::json!({
            "fleet": "f", "id": id, "fingerprint": vocab.fingerprint().to_string(),
            "m": vocab.m(), "d_latent": vocab.d_latent(), "inputs": ["a", "b", "c"], "target": "y",
        });
        NodeMeta {
            model: serde_json::from_value(model).expect("model identity"),
            stream: StreamPos {
                offset: 1234,
                ..StreamPos::default()
            },
            blocks: 0,
            points: 0,
            round: 0,
            written_unix_ms: 0,
            agent: AgentMeta::default(),
        }
    }

    #[test]
    fn files_are_written_atomically_and_the_previous_one_is_a_fallback() {
        let vocab = Arc::new(Vocabulary::default_design(6, 2, 0).expect("vocab"));
        let agent = agent(&vocab);
        let dir = std::env::temp_dir().join(format!("coolgp-ckpt-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let mut m = meta(&vocab, agent.id());
        write(&dir, &agent, &mut m).expect("write 1");
        m.stream.offset = 999;
        write(&dir, &agent, &mut m).expect("write 2");
        assert!(!dir.join(TMP_FILE).exists());
        let cp = load_latest(&dir, &vocab, 3).expect("load").expect("some");
        assert_eq!(cp.meta.stream.offset, 999);
        // Corrupt the newest: the previous one is used.
        let newest = dir.join(FILE);
        let mut bytes = std::fs::read(&newest).expect("read");
        let n = bytes.len();
        bytes[n - 1] ^= 1;
        std::fs::write(&newest, bytes).expect("corrupt");
        let cp = load_latest(&dir, &vocab, 3).expect("load").expect("some");
        assert_eq!(cp.meta.stream.offset, 1234);
        // Both corrupt: refuse to start rather than forget acknowledged data.
        std::fs::write(dir.join(PREV_FILE), b"garbage").expect("corrupt");
        assert!(load_latest(&dir, &vocab, 3).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
