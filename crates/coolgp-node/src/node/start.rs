//! Start-up before the network: open the data (columns, vocabulary, standardizer, holdout),
//! restore the agent from the newest checkpoint or create it, and start the data thread where
//! the checkpoint left the stream.

use std::path::Path;
use std::sync::Arc;

use coolgp::faer::Mat;
use coolgp::{Agent, AgentConfig, Vocabulary};
use coolgp_data::Standardizer;
use tokio::sync::mpsc;

use super::{Holdout, Inputs, VocabLoader};
use crate::checkpoint::{self, Checkpoint, StreamPos};
use crate::config::{DataSource, NodeSettings, VocabSource};
use crate::error::{NodeError, Result};
use crate::stream::{self, Item, Layout, Opened};

/// The opened data: the stream (header read), what the model reads from a row, and the
/// vocabulary for its input dimension.
pub(super) struct Data {
    pub(super) opened: Option<Opened>,
    pub(super) inputs: Inputs,
    pub(super) vocab: Arc<Vocabulary>,
}

/// The agent and where its data stands: restored from a checkpoint, or fresh.
pub(super) struct Resumed {
    pub(super) agent: Agent,
    /// Stream position of the checkpoint (or the start).
    pub(super) committed: StreamPos,
    pub(super) acked_blocks: u64,
    pub(super) acked_points: u64,
    /// Byte offset and rows to resume a file at (`None`: not restored).
    pub(super) resume: Option<(u64, u64)>,
}

/// Builds the vocabulary for input dimension `d`.
fn vocabulary(src: &VocabSource, d: usize, loader: VocabLoader<'_>) -> Result<Vocabulary> {
    match src {
        VocabSource::File(p) => loader(p).map_err(NodeError::Config),
        VocabSource::Default { m, d_latent, seed } => Ok(Vocabulary::default_design(
            *m,
            d_latent.unwrap_or(d),
            *seed,
        )?),
    }
}

fn load_holdout(
    path: &Path,
    layout: &Layout,
    target: &str,
    scaler: Option<&Standardizer>,
) -> Result<Holdout> {
    let t = stream::read_table(path)?;
    let col = |name: &str| {
        t.names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| NodeError::Data {
                source_name: path.display().to_string(),
                reason: format!("no column '{name}'"),
            })
    };
    let idx: Vec<usize> = layout
        .inputs
        .iter()
        .map(|n| col(n))
        .collect::<Result<_>>()?;
    let ti = col(target)?;
    let mut x = Mat::from_fn(t.rows.len(), idx.len(), |i, j| t.rows[i][idx[j]]);
    if let Some(s) = scaler {
        s.apply_x(&mut x)
            .map_err(|e| NodeError::Config(e.to_string()))?;
    }
    Ok(Holdout {
        x,
        y: t.rows.iter().map(|r| r[ti]).collect(),
    })
}

/// Step 1: the column layout (and the input dimension) from the data header or `--inputs`,
/// then the vocabulary, the standardizer and the holdout rows.
///
/// # Errors
/// An unreadable data header, vocabulary, standardizer or holdout file.
pub(super) fn open_data(s: &NodeSettings, loader: VocabLoader<'_>) -> Result<Data> {
    let opened = match &s.data {
        Some(src) => Some(stream::open(src, &s.target, s.inputs.as_deref(), None)?),
        None => None,
    };
    let layout = match &opened {
        Some(o) => o.layout.clone(),
        None => {
            let inputs = s.inputs.clone().unwrap_or_default();
            Layout {
                input_idx: (0..inputs.len()).collect(),
                target_idx: inputs.len(),
                ncols: inputs.len() + 1,
                inputs,
            }
        }
    };
    let d = layout.inputs.len();
    let vocab = Arc::new(vocabulary(&s.vocab, d, loader)?);
    let scaler = match &s.standardize {
        Some(p) => Some(crate::standardize::load(p, d)?),
        None => None,
    };
    let holdout = match &s.holdout {
        Some(p) => Some(load_holdout(p, &layout, &s.target, scaler.as_ref())?),
        None => None,
    };
    Ok(Data {
        opened,
        inputs: Inputs {
            layout,
            scaler,
            holdout,
        },
        vocab,
    })
}

/// Step 2: the agent from the newest checkpoint in `--state` (refused if it is another
/// node's or was written with other settings), or fresh.
///
/// # Errors
/// An unusable state directory or checkpoint; the core refusing the settings.
pub(super) fn restore_or_create(
    s: &NodeSettings,
    vocab: &Arc<Vocabulary>,
    layout: &Layout,
) -> Result<Resumed> {
    let d = layout.inputs.len();
    let committed = StreamPos {
        source: s.data.as_ref().map_or_else(String::new, DataSource::name),
        ..StreamPos::default()
    };
    let restored = match &s.state {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| NodeError::io("creating state directory", dir, e))?;
            checkpoint::load_latest(dir, vocab, d)?
        }
        None => None,
    };
    let mut resumed = match restored {
        Some(cp) => {
            check_checkpoint(s, &cp, layout)?;
            resume(s, vocab, cp, committed)?
        }
        None => Resumed {
            agent: fresh(s, vocab, d)?,
            committed,
            acked_blocks: 0,
            acked_points: 0,
            resume: None,
        },
    };
    // Drain anything restore or construction queued.
    while resumed.agent.poll_event().is_some() {}
    Ok(resumed)
}

/// Refuses a checkpoint of another agent, fleet or input columns, or written with other
/// agent settings (naming each differing setting by its flag).
fn check_checkpoint(s: &NodeSettings, cp: &Checkpoint, layout: &Layout) -> Result<()> {
    let dir = s.state.clone().unwrap_or_default();
    let mismatch = |reason: String| NodeError::StateMismatch {
        path: dir.clone(),
        reason,
    };
    if cp.meta.model.fleet != s.fleet || cp.meta.model.id != s.id {
        return Err(mismatch(format!(
            "it holds agent {} of fleet '{}'",
            cp.meta.model.id, cp.meta.model.fleet
        )));
    }
    if cp.meta.model.inputs != layout.inputs {
        return Err(mismatch(format!(
            "its input columns are {:?}",
            cp.meta.model.inputs
        )));
    }
    if without_off_memory(&cp.snapshot.config) != without_off_memory(&s.agent) {
        let diffs: Vec<String> = crate::config::setting_differences(
            &cp.snapshot.config,
            &s.agent,
            s.projection_group.as_deref(),
        )
        .iter()
        .map(ToString::to_string)
        .collect();
        return Err(NodeError::StateSettings {
            path: dir,
            settings: if diffs.is_empty() {
                // Only a value without a usable comparison (NaN) can get here.
                format!("other settings ({:?})", cp.snapshot.config)
            } else {
                crate::config::join_and(&diffs)
            },
        });
    }
    Ok(())
}

/// `c` with its local memory's settings as they take effect ([`coolgp::LocalConfig::in_effect`]):
/// `--local-memory 0` resumes a memory-less checkpoint whatever the (default) policy was when
/// it was written. Who fits the residual kernel (`--local-fit`), the influence cap and the row rate are not
/// compared: a checkpoint does not record them (the driver sets it up anew, [`resume`]), so any fit resumes any
/// checkpoint, the fitted kernel included.
fn without_off_memory(c: &AgentConfig) -> AgentConfig {
    let mut local = c.local.in_effect();
    local.fit = coolgp::local::LocalConfig::default().fit;
    AgentConfig {
        local,
        influence_cap: None,
        row_rate: None,
        ..c.clone()
    }
}

/// The agent of a checked checkpoint, its rounds moved past the lease, and the stream
/// position and acknowledged counts it records.
fn resume(
    s: &NodeSettings,
    vocab: &Arc<Vocabulary>,
    cp: Checkpoint,
    mut committed: StreamPos,
) -> Result<Resumed> {
    if cp.meta.stream.source != committed.source {
        tracing::warn!(
            checkpoint = %cp.meta.stream.source,
            now = %committed.source,
            "the data source differs from the checkpoint's; resuming at its offset anyway"
        );
    }
    let mut snap = cp.snapshot;
    // The checkpoint does not record who fits the residual kernel: the node's `--local-fit`
    // decides (with `fleet` the agent makes no fits of its own and takes the fleet's kernel).
    snap.config.local.fit = s.agent.local.fit;
    // Nor the influence cap (a receiver's policy): `--influence-cap` decides.
    snap.config.influence_cap = s.agent.influence_cap;
    snap.config.row_rate = s.agent.row_rate;
    // Round lease: at most `checkpoint_every` rounds were sent after the checkpoint, or, when
    // lease checkpoints were skipped (nothing new, `Node::lease_needed`), no more than the
    // clock's round: resuming past both, neighbours never see a round number twice.
    snap.round = snap
        .round
        .saturating_add(s.checkpoint_every)
        .max(super::clock_round(s.round) + super::CLOCK_MARGIN);
    let mut agent = Agent::restore(vocab.clone(), snap)?;
    agent.set_neighbors(s.neighbors.iter().copied())?;
    committed.offset = cp.meta.stream.offset;
    committed.rows = cp.meta.stream.rows;
    committed.rows_skipped = cp.meta.stream.rows_skipped;
    committed.ended = cp.meta.stream.ended;
    tracing::info!(
        path = %cp.path.display(),
        blocks = cp.meta.blocks,
        points = cp.meta.points,
        offset = committed.offset,
        round = agent.round(),
        "resumed from checkpoint"
    );
    Ok(Resumed {
        agent,
        resume: Some((committed.offset, committed.rows)),
        committed,
        acked_blocks: cp.meta.blocks,
        acked_points: cp.meta.points,
    })
}

/// A new agent, its rounds started from the clock.
fn fresh(s: &NodeSettings, vocab: &Arc<Vocabulary>, d: usize) -> Result<Agent> {
    let mut snap = Agent::new(s.id, vocab.clone(), d, s.agent.clone())?.snapshot();
    // A fresh agent (new, or whose state was lost) starts its rounds from the clock, so that
    // neighbours which remember an earlier incarnation do not take it for a replay.
    snap.round = super::clock_round(s.round);
    let mut a = Agent::restore(vocab.clone(), snap)?;
    a.set_neighbors(s.neighbors.iter().copied())?;
    Ok(a)
}

/// The data thread (a file resumes at the checkpoint's offset; an ended stream is not
/// reopened).
///
/// # Errors
/// The file cannot be reopened at the offset (truncated or replaced).
pub(super) fn start_stream(
    s: &NodeSettings,
    mut opened: Option<Opened>,
    resumed: &Resumed,
) -> Result<Option<mpsc::Receiver<Item>>> {
    if resumed.committed.ended {
        return Ok(None);
    }
    match (&s.data, resumed.resume) {
        (Some(src @ (DataSource::File(_) | DataSource::Bag { .. })), Some(r)) => {
            opened = Some(stream::open(src, &s.target, s.inputs.as_deref(), Some(r))?);
        }
        (Some(DataSource::Stdin), Some(_)) => tracing::warn!(
            rows = resumed.committed.rows,
            "standard input cannot be rewound: the producer must resume after the rows already consumed"
        ),
        _ => {}
    }
    Ok(opened.map(|o| {
        let (tx, rx) = mpsc::channel(4 * s.batch.max(16));
        o.spawn(s.follow, tx);
        rx
    }))
}
