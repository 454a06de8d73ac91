//! The checkpoint format: one safetensors file with every matrix of an agent's state and JSON
//! metadata, with a SHA-256 checksum that is verified on load. Encoding and decoding only
//! (bytes ↔ [`AgentSnapshot`] + [`NodeMeta`]); where the files go and how they are written
//! durably is the writer's business (`coolgp-node`'s state directory, Python's `Agent.save`).
//!
//! # Layout
//! All tensors are `F64`, little-endian, **row-major** (numpy order; `safetensors.numpy.load_file`
//! reads them). `m` inducing inputs, `d` input columns, `d'` latent dimension, `n = 2 d' d + 2`
//! parameters θ.
//!
//! | tensor                         | shape        | what                                          |
//! |--------------------------------|--------------|-----------------------------------------------|
//! | `vocab/z`                      | `[m, d']`    | inducing inputs Z                             |
//! | `vocab/k`                      | `[m, m]`     | `K = k(Z, Z) + εI` (the prior `T0 = (K, 0)`)  |
//! | `theta/mu`, `theta/log_sigma`  | `[d', d]`    | q(W) mean and log standard deviations         |
//! | `theta/log_sigma_s`, `_n`      | `[1]`        | log signal and noise scales                   |
//! | `adam/m1`, `adam/m2`           | `[n]`        | Adam moments (step count in the metadata)     |
//! | `adam/config`                  | `[6]`        | lr, β1, β2, ε, τ, κ                           |
//! | `cache/psi2`, `cache/psi1_y`, `cache/yty` | `[m, m]`, `[m]`, `[1]` | frozen-mode caches (unit scale) |
//! | `cache/samples`, `cache/a`, `cache/b` | `[k, d', d]`, `[k, m, m]`, `[k, m]` | importance-mode caches |
//! | `cache/x/<i>`, `cache/y/<i>`   | `[n_i, d]`, `[n_i]` | exact mode: every block                 |
//! | `cache/w/<i>`                  | `[n_i]`      | exact mode, robust likelihood: block i's row weights, taken on arrival (absent: every weight 1) |
//! | `own/d1`, `own/d2`             | `[m, m]`, `[m]` | own excess `E_i` (recomputed on load)      |
//! | `fused/t1`, `fused/t2`         | `[m, m]`, `[m]` | fused q(u) in K-form: `T1 = K + D1`, `T2` |
//! | `fused/points`                 | `[1]`        | data points represented in the fused model    |
//! | `posterior/mean`, `posterior/cov` | `[m]`, `[m, m]` | fused q(u) = N(mean, cov) of u = f(Z)  |
//! | `inbox/<j>/d1`, `/d2`, `/points` | …          | last message accepted from neighbour j (tree) |
//! | `pushsum/{mass,sent}/d1`, `/d2`, `/w_points` | … | push-sum state (`w_points` = [ω, points]) |
//! | `pushsum/received/<j>/…`       | …            | last running total received from j           |
//! | `pushsum/pending/…`            | …            | own changes not yet in the push-sum mass      |
//! | `fusion/push_sum`              | `[2]`        | push-sum scale s and initial weight           |
//! | `site/prec`, `site/shift`      | `[d' d]`     | fleet projection: own site Λ_i, λ_i (column-major) |
//! | `site/stats`                   | `[5]`        | own site's A, B, YY, N and raw points         |
//! | `site/recent/x/<i>`, `site/recent/y/<i>` | `[n_i, d]`, `[n_i]` | fleet projection: the site window's blocks, oldest first (metadata `site_recent` counts them) |
//! | `site/recent/w/<i>`            | `[n_i]`      | fleet projection, robust likelihood (metadata `site_recent_weights`): block i's row weights, taken on arrival (absent for a block absorbed without them) |
//! | `site/frozen/{prec,shift,stats}`, `site/window_term/{prec,shift,stats}` | as `site/*` | fleet projection with `--site-memory stream`: the frozen terms of the blocks that left the window and the last window term (metadata `site_window_term_points`) |
//! | `inbox/<j>/site_prec`, `_shift`, `_stats` | … | site sums last received from neighbour j    |
//! | `pushsum/{mass,sent,received/<j>}/site_prec`, `_shift`, `_stats` | … | fleet projection under push-sum: the site part of each push-sum mass (absent otherwise) |
//! | `local/x`, `local/y`           | `[n, d]`, `[n]` | the local memory's rows and targets, in memory order (`--local-memory`; absent when off) |
//! | `local/params`                 | `[p]`        | the residual kernel's parameters (`ResidualKernel::params`; its family in the metadata's `local.family`) |
//!
//! With projection groups (`--projection-group`) every site-sum prefix `P` above (`inbox/<j>/site_`,
//! `pushsum/…/site_`) holds one site per group, `P<g>_prec`, `P<g>_shift`, `P<g>_stats` with `g`
//! the group id; the ids of each prefix are in the metadata's `site_groups`, and the node's own
//! group in `group`.
//!
//! The local memory's settings and the policy's state (rows offered, the kernel's fit
//! schedule) are in the metadata's `local` ([`LocalMeta`]); a checkpoint without it (every
//! version 1 file) restores with the memory off.
//!
//! Metadata (`__metadata__`, strings): `format = "coolgp-checkpoint"`, `format_version = "2"`
//! (version 2 added the local memory; version 1 files still read, see [`FORMAT_VERSIONS_READ`]),
//! `coolgp` = the [`NodeMeta`] JSON (fleet, id, fingerprint, stream offset, counts, settings),
//! and `sha256` = hex SHA-256 over, for each tensor in name order, `name ‖ 0x00 ‖ shape as
//! u64 LE ‖ data`, followed by the `coolgp` JSON string.

mod decode;
mod encode;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use coolgp::protocol::AgentSnapshot;
use safetensors::SafeTensors;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Result, StoreError};

pub use decode::from_bytes;
pub use encode::to_bytes;

/// Value of the `format` metadata key.
pub const FORMAT: &str = "coolgp-checkpoint";
/// The checkpoint format version written (2: the local memory, `local/*`).
pub const FORMAT_VERSION: u32 = 2;
/// The format versions this build reads: every version up to [`FORMAT_VERSION`] (a version 1
/// file has no local memory and restores with it off).
pub const FORMAT_VERSIONS_READ: std::ops::RangeInclusive<u32> = 1..=FORMAT_VERSION;

/// Where the data stream stands in a checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamPos {
    /// The data file (`-` for stdin).
    pub source: String,
    /// Byte offset just after the last row absorbed (resume point in a file).
    pub offset: u64,
    /// Rows consumed (absorbed or skipped).
    pub rows: u64,
    /// Rows skipped as unusable.
    pub rows_skipped: u64,
    /// The stream had ended (no `--follow`).
    pub ended: bool,
}

/// Which agent of which fleet, and the model it runs: in every checkpoint and every status
/// reply (serialized inline, as top-level keys).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelIdentity {
    /// Fleet name.
    pub fleet: String,
    /// Agent id.
    pub id: u64,
    /// Vocabulary fingerprint (hex).
    pub fingerprint: String,
    /// Inducing inputs m.
    pub m: usize,
    /// Latent dimension d'.
    pub d_latent: usize,
    /// Input column names, in model order (query columns are matched to these).
    pub inputs: Vec<String>,
    /// Target column.
    pub target: String,
}

/// The node-level metadata of a checkpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeMeta {
    /// Fleet, id and model.
    #[serde(flatten)]
    pub model: ModelIdentity,
    /// Data stream position.
    pub stream: StreamPos,
    /// Blocks acknowledged (in this checkpoint).
    pub blocks: u64,
    /// Own data points acknowledged.
    pub points: u64,
    /// Round counter at writing.
    pub round: u64,
    /// Wall-clock time of writing (ms since the Unix epoch).
    pub written_unix_ms: u64,
    /// Agent fields that are not matrices.
    pub agent: AgentMeta,
}

/// Non-matrix agent fields (`Default`: the placeholder that [`to_bytes`] fills in).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentMeta {
    /// Own points absorbed.
    pub n_own: usize,
    /// Blocks absorbed.
    pub blocks: u64,
    /// Data version.
    pub version: u64,
    /// Round counter.
    pub round: u64,
    /// Neighbours.
    pub neighbors: Vec<u64>,
    /// Last accepted round per sender.
    pub last_round: BTreeMap<u64, u64>,
    /// Adam steps.
    pub adam_t: u64,
    /// `frozen`, `importance` or `exact`.
    pub mode: String,
    /// Importance normalization (`unnormalized`, `self-normalized`).
    pub normalization: Option<String>,
    /// `tree` or `push-sum`.
    pub fusion: String,
    /// Learn θ online.
    pub learn: bool,
    /// The agent's own seed.
    pub seed: u64,
    /// Frozen caches: number of points.
    pub cache_points: usize,
    /// Importance samples or exact blocks stored.
    pub cache_len: usize,
    /// Neighbours with an inbox entry.
    pub inbox: Vec<u64>,
    /// Inbox entries carrying a projection share.
    pub inbox_shares: Vec<u64>,
    /// Push-sum senders with a received running total.
    pub push_received: Vec<u64>,
    /// Projection mode: `per-agent` or `fleet` (spec §14).
    #[serde(default = "per_agent")]
    pub projection: String,
    /// Fleet projection: damping ρ, N0 and N_h of the site update.
    #[serde(default)]
    pub site: Option<[f64; 3]>,
    /// Fleet projection: the site update's fleet damping ρ_f (`None`: a checkpoint written
    /// before it existed, restored with ρ_f = 0, the rate it was written under).
    #[serde(default)]
    pub site_fleet_damping: Option<f64>,
    /// Fleet projection: the fleet's points at the last site step (`None`: written before the
    /// clock existed, restored as 0; unused there, since such a checkpoint's ρ_f is 0).
    #[serde(default)]
    pub site_clock: Option<f64>,
    /// Fleet projection: the site window's points (`None`: written before the window existed,
    /// restored as 0, the newest block alone).
    #[serde(default)]
    pub site_window: Option<usize>,
    /// Fleet projection: blocks stored in the site window (`site/recent/…`).
    #[serde(default)]
    pub site_recent: usize,
    /// Fleet projection, robust likelihood: the site window's row weights are stored
    /// (`site/recent/w/<i>`, docs/ROBUST.md §2). `false` in checkpoints written before they
    /// were: a robust agent's restore then takes them again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub site_recent_weights: bool,
    /// Fleet projection: what the site remembers, `recent` or `stream` (`None`: written before
    /// the choice existed, `recent`). With `stream`, `site/frozen/…` and `site/window_term/…`
    /// hold its frozen terms and last window term.
    #[serde(default)]
    pub site_memory: Option<String>,
    /// Fleet projection with `stream` memory: the points of the last window term.
    #[serde(default)]
    pub site_window_term_points: Option<f64>,
    /// The agent withholds its own data (issue 29; `false` in checkpoints written before).
    #[serde(default)]
    pub withheld: bool,
    /// Inbox entries carrying site sums (fleet projection).
    #[serde(default)]
    pub inbox_sites: Vec<u64>,
    /// Fleet projection: the node's projection group id (`None`: no groups).
    #[serde(default)]
    pub group: Option<u64>,
    /// With projection groups: the group ids stored under each site-sum tensor prefix.
    #[serde(default)]
    pub site_groups: BTreeMap<String, Vec<u64>>,
    /// The local memory's settings and state (`None`: the memory is off, or the checkpoint
    /// was written before it existed); its rows are the `local/*` tensors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<LocalMeta>,
    /// The likelihood, `robust` (issue 29, docs/ROBUST.md); `None`: Gaussian (absent in
    /// checkpoints of Gaussian agents and in those written before the choice existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub likelihood: Option<String>,
    /// The robust likelihood's threshold c.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub robust_c: Option<f64>,
}

/// The local memory in a checkpoint's metadata (issue 19): its settings (`--local-memory`,
/// `--local-policy`, `--local-kernel`) and the non-matrix part of its state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalMeta {
    /// Rows kept at most, B.
    pub capacity: usize,
    /// Which rows are kept (`MemoryPolicy::name`).
    pub policy: String,
    /// The residual kernel (`ResidualKind::name`).
    pub kernel: String,
    /// Rows in the memory (`local/x` has this many).
    pub rows: usize,
    /// Rows offered to the memory so far (the policy's state).
    pub seen: u64,
    /// Memory rows at the residual kernel's last fit (0: none yet).
    pub last_fit: u64,
    /// Rows inserted since that fit.
    pub since_fit: u64,
    /// The learned residual kernel's family (`ResidualFamily::name`: `matern32`,
    /// `matern52`, `sum`, whose `local/params` are then `2d + 4`); `None`: the squared
    /// exponential (absent for it, and in checkpoints
    /// written before the families, which restore as the squared exponential).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
}

fn per_agent() -> String {
    "per-agent".into()
}

/// A loaded checkpoint.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    /// Node metadata.
    pub meta: NodeMeta,
    /// The agent state.
    pub snapshot: AgentSnapshot,
    /// The file it came from.
    pub path: PathBuf,
}

/// The `sha256` metadata value (module docs): over each tensor in name order, then the metadata.
fn checksum<'a>(
    tensors: impl Iterator<Item = (&'a str, &'a [usize], &'a [u8])>,
    meta: &str,
) -> String {
    let mut h = Sha256::new();
    for (name, shape, data) in tensors {
        h.update(name.as_bytes());
        h.update([0u8]);
        for s in shape {
            h.update((*s as u64).to_le_bytes());
        }
        h.update(data);
    }
    h.update(meta.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads only the metadata of a checkpoint file (no vocabulary needed): for tools and tests.
///
/// # Errors
/// [`StoreError::Io`] or [`StoreError::Checkpoint`].
pub fn read_meta(path: &Path) -> Result<NodeMeta> {
    let bytes = std::fs::read(path).map_err(|e| StoreError::io("reading checkpoint", path, e))?;
    let err = |reason: String| StoreError::checkpoint(path, reason);
    let (_, md) = SafeTensors::read_metadata(&bytes).map_err(|e| err(e.to_string()))?;
    let info = md.metadata().clone().unwrap_or_default();
    let json = info
        .get("coolgp")
        .ok_or_else(|| err("no 'coolgp' metadata".into()))?;
    serde_json::from_str(json).map_err(|e| err(e.to_string()))
}
