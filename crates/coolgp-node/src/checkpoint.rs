//! Crash-safe checkpoints: one safetensors file with every matrix of the agent state and JSON
//! metadata, written to a temporary file, fsynced and renamed, with a SHA-256 checksum that is
//! verified on load.
//!
//! # File: `<state>/checkpoint.safetensors` (the previous one is kept as
//! `checkpoint.prev.safetensors` and used if the newest fails its checksum)
//!
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
//! | `site/frozen/{prec,shift,stats}`, `site/window_term/{prec,shift,stats}` | as `site/*` | fleet projection with `--site-memory stream`: the frozen terms of the blocks that left the window and the last window term (metadata `site_window_term_points`) |
//! | `inbox/<j>/site_prec`, `_shift`, `_stats` | … | site sums last received from neighbour j    |
//! | `pushsum/{mass,sent,received/<j>}/site_prec`, `_shift`, `_stats` | … | fleet projection under push-sum: the site part of each push-sum mass (absent otherwise) |
//!
//! With projection groups (`--projection-group`) every site-sum prefix `P` above (`inbox/<j>/site_`,
//! `pushsum/…/site_`) holds one site per group, `P<g>_prec`, `P<g>_shift`, `P<g>_stats` with `g`
//! the group id; the ids of each prefix are in the metadata's `site_groups`, and the node's own
//! group in `group`.
//!
//! Metadata (`__metadata__`, strings): `format = "coolgp-checkpoint"`, `format_version = "1"`,
//! `coolgp` = the [`NodeMeta`] JSON (fleet, id, fingerprint, stream offset, counts, settings),
//! and `sha256` = hex SHA-256 over, for each tensor in name order, `name ‖ 0x00 ‖ shape as
//! u64 LE ‖ data`, followed by the `coolgp` JSON string.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use coolgp::faer::Mat;
use coolgp::fuse::Mass;
use coolgp::learn::{
    Adam, AdamConfig, HyperStats, ImportanceCache, IsNormalization, Learner, Site, SiteConfig,
    SiteMemory, Sites, UNGROUPED,
};
use coolgp::model::psi::UnitStats;
use coolgp::protocol::{AgentSnapshot, InboundSnapshot, ProjectionShare};
use coolgp::{
    Agent, AgentConfig, Excess, FusionRule, ProjectionMode, UpdateMode, View, Vocabulary,
};
use safetensors::tensor::{Dtype, TensorView};
use safetensors::SafeTensors;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{NodeError, Result};

/// The checkpoint file name inside the state directory.
pub const FILE: &str = "checkpoint.safetensors";
/// The previous checkpoint, kept as a fallback.
pub const PREV_FILE: &str = "checkpoint.prev.safetensors";
/// Temporary file of a checkpoint being written.
pub const TMP_FILE: &str = "checkpoint.safetensors.tmp";
/// Value of the `format` metadata key.
pub const FORMAT: &str = "coolgp-checkpoint";
/// The checkpoint format version.
pub const FORMAT_VERSION: u32 = 1;

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
    /// Fleet projection: what the site remembers, `recent` or `stream` (`None`: written before
    /// the choice existed, `recent`). With `stream`, `site/frozen/…` and `site/window_term/…`
    /// hold its frozen terms and last window term.
    #[serde(default)]
    pub site_memory: Option<String>,
    /// Fleet projection with `stream` memory: the points of the last window term.
    #[serde(default)]
    pub site_window_term_points: Option<f64>,
    /// Inbox entries carrying site sums (fleet projection).
    #[serde(default)]
    pub inbox_sites: Vec<u64>,
    /// Fleet projection: the node's projection group id (`None`: no groups).
    #[serde(default)]
    pub group: Option<u64>,
    /// With projection groups: the group ids stored under each site-sum tensor prefix.
    #[serde(default)]
    pub site_groups: BTreeMap<String, Vec<u64>>,
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

/// Tensors by name, and the group ids stored under each grouped site-sum prefix.
#[derive(Default)]
struct Tensors(
    BTreeMap<String, (Vec<usize>, Vec<u8>)>,
    BTreeMap<String, Vec<u64>>,
);

impl Tensors {
    fn vec(&mut self, name: impl Into<String>, v: &[f64]) {
        let bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.0.insert(name.into(), (vec![v.len()], bytes));
    }
    fn scalars(&mut self, name: impl Into<String>, v: &[f64]) {
        self.vec(name, v);
    }
    fn mat(&mut self, name: impl Into<String>, m: &Mat<f64>) {
        let mut bytes = Vec::with_capacity(m.nrows() * m.ncols() * 8);
        for i in 0..m.nrows() {
            for j in 0..m.ncols() {
                bytes.extend_from_slice(&m[(i, j)].to_le_bytes());
            }
        }
        self.0
            .insert(name.into(), (vec![m.nrows(), m.ncols()], bytes));
    }
    fn mats(&mut self, name: impl Into<String>, ms: &[Mat<f64>], r: usize, c: usize) {
        let mut bytes = Vec::with_capacity(ms.len() * r * c * 8);
        for m in ms {
            for i in 0..r {
                for j in 0..c {
                    bytes.extend_from_slice(&m[(i, j)].to_le_bytes());
                }
            }
        }
        self.0.insert(name.into(), (vec![ms.len(), r, c], bytes));
    }
    fn excess(&mut self, prefix: &str, e: &Excess) {
        self.mat(format!("{prefix}/d1"), &e.d1);
        self.vec(format!("{prefix}/d2"), &e.d2);
    }
    fn site(&mut self, prefix: &str, s: &Site) {
        self.vec(format!("{prefix}prec"), &s.prec);
        self.vec(format!("{prefix}shift"), &s.shift);
        let h = s.hyper.to_array();
        self.vec(
            format!("{prefix}stats"),
            &[h[0], h[1], h[2], h[3], s.points],
        );
    }
    /// Site sums under `prefix`: one site (no groups) or one per group (module docs).
    fn sites(&mut self, prefix: &str, s: &Sites) {
        if s.is_ungrouped() {
            if let Some(site) = s.get(UNGROUPED) {
                self.site(prefix, site);
            }
            return;
        }
        for (g, site) in s.iter() {
            self.site(&format!("{prefix}{g}_"), site);
        }
        self.1
            .insert(prefix.to_owned(), s.iter().map(|(g, _)| g).collect());
    }
    fn mass(&mut self, prefix: &str, m: &Mass) {
        self.excess(prefix, &m.x);
        self.scalars(format!("{prefix}/w_points"), &[m.w, m.points]);
        if let Some(sites) = &m.site {
            self.sites(&format!("{prefix}/site_"), sites);
        }
    }
}

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

fn mode_name(m: &UpdateMode) -> (&'static str, Option<String>) {
    let normalization = match m {
        UpdateMode::Importance { normalization, .. } => Some(normalization.name().into()),
        UpdateMode::Frozen | UpdateMode::Exact => None,
    };
    (m.name(), normalization)
}

/// Serializes an agent and its node metadata into checkpoint bytes (no I/O).
///
/// `meta.agent` is filled from the agent.
///
/// # Errors
/// [`NodeError::Checkpoint`] if safetensors refuses the layout (never for a valid agent).
pub fn to_bytes(agent: &Agent, meta: &mut NodeMeta) -> Result<Vec<u8>> {
    let vocab = agent.vocabulary().clone();
    let s = agent.snapshot();
    let mut t = Tensors::default();
    t.mat("vocab/z", &vocab.z().to_owned());
    t.mat("vocab/k", &vocab.k().to_owned());
    t.mat("theta/mu", &s.mu);
    t.mat("theta/log_sigma", &s.log_sigma);
    t.scalars("theta/log_sigma_s", &[s.log_sigma_s]);
    t.scalars("theta/log_sigma_n", &[s.log_sigma_n]);
    t.vec("adam/m1", &s.adam.m1);
    t.vec("adam/m2", &s.adam.m2);
    let c = &s.adam.config;
    t.scalars(
        "adam/config",
        &[c.lr, c.beta1, c.beta2, c.eps, c.tau, c.kappa],
    );
    let (m, dz, d) = (vocab.m(), vocab.d_latent(), s.mu.ncols());
    let (cache_points, cache_len) = match &s.learner {
        Learner::Frozen(st) => {
            t.mat("cache/psi2", &st.psi2);
            t.vec("cache/psi1_y", &st.psi1_y);
            t.scalars("cache/yty", &[st.yty]);
            (st.n, 0)
        }
        Learner::Importance(c) => {
            t.mats("cache/samples", &c.samples, dz, d);
            t.mats("cache/a", &c.a, m, m);
            let b: Vec<f64> = c.b.iter().flatten().copied().collect();
            let bytes = b.iter().flat_map(|x| x.to_le_bytes()).collect();
            t.0.insert("cache/b".into(), (vec![c.b.len(), m], bytes));
            (0, c.samples.len())
        }
        Learner::Exact(blocks) => {
            for (i, (x, y)) in blocks.iter().enumerate() {
                t.mat(format!("cache/x/{i:08}"), x);
                t.vec(format!("cache/y/{i:08}"), y);
            }
            (0, blocks.len())
        }
    };
    t.excess("own", agent.own_excess());
    // K-form as q(u) uses it (in the fleet projection mode, scaled by the fleet's σ_s, σ_n).
    let fused = agent.natural_params(View::Fused);
    t.mat("fused/t1", &fused.t1);
    t.vec("fused/t2", &fused.t2);
    t.scalars("fused/points", &[agent.fleet_points()]);
    if let Ok(post) = agent.posterior(View::Fused) {
        let (mean, cov) = post.moments(&vocab);
        t.vec("posterior/mean", &mean);
        t.mat("posterior/cov", &cov);
    }
    let mut shares = Vec::new();
    let mut inbox_sites = Vec::new();
    let fleet = s.config.projection == ProjectionMode::Fleet;
    if fleet {
        t.site("site/", &s.site);
        if s.config.site.memory == SiteMemory::Stream {
            t.site("site/frozen/", &s.site_frozen);
            t.site("site/window_term/", &s.window_term.0);
        }
        for (i, (x, y)) in s.recent.iter().enumerate() {
            t.mat(format!("site/recent/x/{i:08}"), x);
            t.vec(format!("site/recent/y/{i:08}"), y);
        }
    }
    for (k, ib) in &s.inbox {
        if let Some(sites) = &ib.sites {
            t.sites(&format!("inbox/{k}/site_"), sites);
            inbox_sites.push(*k);
        }
        t.excess(&format!("inbox/{k}"), &ib.excess);
        t.scalars(format!("inbox/{k}/points"), &[ib.points]);
        if let Some(p) = &ib.projection {
            t.scalars(format!("inbox/{k}/share_weight"), &[p.weight]);
            t.vec(format!("inbox/{k}/share_theta"), &p.theta);
            t.vec(format!("inbox/{k}/share_m1"), &p.m1);
            t.vec(format!("inbox/{k}/share_m2"), &p.m2);
            shares.push(*k);
        }
    }
    t.mass("pushsum/mass", &s.push_mass);
    t.mass("pushsum/sent", &s.push_sent);
    t.mass("pushsum/pending", &s.push_pending);
    for (k, v) in &s.push_received {
        t.mass(&format!("pushsum/received/{k}"), v);
    }
    let (mode, normalization) = mode_name(&s.config.mode);
    let fusion = match s.config.fusion {
        FusionRule::Tree => "tree",
        FusionRule::PushSum { agents, weight } => {
            t.scalars("fusion/push_sum", &[agents, weight]);
            "push-sum"
        }
    };
    meta.agent = AgentMeta {
        n_own: s.n_own,
        blocks: s.blocks,
        version: s.version,
        round: s.round,
        neighbors: s.neighbors.clone(),
        last_round: s.last_round.clone(),
        adam_t: s.adam.t,
        mode: mode.into(),
        normalization,
        fusion: fusion.into(),
        learn: s.config.learn,
        seed: s.config.seed,
        cache_points,
        cache_len,
        inbox: s.inbox.keys().copied().collect(),
        inbox_shares: shares,
        push_received: s.push_received.keys().copied().collect(),
        projection: s.config.projection.name().into(),
        site: fleet.then_some([
            s.config.site.damping,
            s.config.site.prior_points,
            s.config.site.scale_prior_points,
        ]),
        site_fleet_damping: fleet.then_some(s.config.site.fleet_damping),
        site_clock: fleet.then_some(s.site_clock),
        site_window: fleet.then_some(s.config.site.window_points),
        site_recent: if fleet { s.recent.len() } else { 0 },
        site_memory: fleet.then(|| s.config.site.memory.name().to_owned()),
        site_window_term_points: (fleet && s.config.site.memory == SiteMemory::Stream)
            .then_some(s.window_term.1),
        inbox_sites,
        group: s.config.group,
        site_groups: std::mem::take(&mut t.1),
    };
    let meta_json = serde_json::to_string(meta).map_err(|e| NodeError::Checkpoint {
        path: PathBuf::new(),
        reason: e.to_string(),
    })?;
    let sum = checksum(
        t.0.iter()
            .map(|(k, (s, d))| (k.as_str(), s.as_slice(), d.as_slice())),
        &meta_json,
    );
    let mut info = HashMap::new();
    info.insert("format".to_string(), FORMAT.to_string());
    info.insert("format_version".to_string(), FORMAT_VERSION.to_string());
    info.insert("coolgp".to_string(), meta_json);
    info.insert("sha256".to_string(), sum);
    let views =
        t.0.iter()
            .map(|(k, (shape, data))| {
                TensorView::new(Dtype::F64, shape.clone(), data).map(|v| (k.clone(), v))
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| NodeError::Checkpoint {
                path: PathBuf::new(),
                reason: e.to_string(),
            })?;
    safetensors::serialize(views, Some(info)).map_err(|e| NodeError::Checkpoint {
        path: PathBuf::new(),
        reason: e.to_string(),
    })
}

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

struct Reader<'a> {
    st: SafeTensors<'a>,
    path: &'a Path,
    /// Group ids per grouped site-sum prefix (metadata `site_groups`).
    site_groups: BTreeMap<String, Vec<u64>>,
}

impl Reader<'_> {
    fn err(&self, reason: impl Into<String>) -> NodeError {
        NodeError::Checkpoint {
            path: self.path.to_path_buf(),
            reason: reason.into(),
        }
    }
    fn has(&self, name: &str) -> bool {
        self.st.tensor(name).is_ok()
    }
    fn raw(&self, name: &str) -> Result<(Vec<usize>, Vec<f64>)> {
        let v = self
            .st
            .tensor(name)
            .map_err(|_| self.err(format!("missing tensor {name}")))?;
        if v.dtype() != Dtype::F64 {
            return Err(self.err(format!("{name}: dtype {:?}, expected F64", v.dtype())));
        }
        let data = v
            .data()
            .chunks_exact(8)
            .map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                f64::from_le_bytes(b)
            })
            .collect();
        Ok((v.shape().to_vec(), data))
    }
    fn vec(&self, name: &str, len: usize) -> Result<Vec<f64>> {
        let (shape, v) = self.raw(name)?;
        if shape != [len] {
            return Err(self.err(format!("{name}: shape {shape:?}, expected [{len}]")));
        }
        Ok(v)
    }
    fn mat(&self, name: &str, r: usize, c: usize) -> Result<Mat<f64>> {
        let (shape, v) = self.raw(name)?;
        if shape != [r, c] {
            return Err(self.err(format!("{name}: shape {shape:?}, expected [{r}, {c}]")));
        }
        Ok(Mat::from_fn(r, c, |i, j| v[i * c + j]))
    }
    fn mat_any(&self, name: &str, c: usize) -> Result<Mat<f64>> {
        let (shape, v) = self.raw(name)?;
        if shape.len() != 2 || shape[1] != c {
            return Err(self.err(format!("{name}: shape {shape:?}, expected [_, {c}]")));
        }
        let r = shape[0];
        Ok(Mat::from_fn(r, c, |i, j| v[i * c + j]))
    }
    fn mats(&self, name: &str, k: usize, r: usize, c: usize) -> Result<Vec<Mat<f64>>> {
        let (shape, v) = self.raw(name)?;
        if shape != [k, r, c] {
            return Err(self.err(format!("{name}: shape {shape:?}, expected [{k}, {r}, {c}]")));
        }
        Ok((0..k)
            .map(|s| Mat::from_fn(r, c, |i, j| v[s * r * c + i * c + j]))
            .collect())
    }
    fn excess(&self, prefix: &str, m: usize) -> Result<Excess> {
        Ok(Excess {
            d1: self.mat(&format!("{prefix}/d1"), m, m)?,
            d2: self.vec(&format!("{prefix}/d2"), m)?,
        })
    }
    fn site(&self, prefix: &str, len: usize) -> Result<Site> {
        let st = self.vec(&format!("{prefix}stats"), 5)?;
        Ok(Site {
            prec: self.vec(&format!("{prefix}prec"), len)?,
            shift: self.vec(&format!("{prefix}shift"), len)?,
            hyper: HyperStats::from_array([st[0], st[1], st[2], st[3]]),
            points: st[4],
        })
    }
    /// Site sums under `prefix` (one site, or one per group listed in `site_groups`), or
    /// `None` if the file has none there.
    fn sites(&self, prefix: &str, len: usize) -> Result<Option<Sites>> {
        if let Some(ids) = self.site_groups.get(prefix) {
            let pairs = ids
                .iter()
                .map(|g| Ok((*g, self.site(&format!("{prefix}{g}_"), len)?)))
                .collect::<Result<Vec<_>>>()?;
            return Ok(Some(Sites::from_pairs(pairs)));
        }
        if self.has(&format!("{prefix}stats")) {
            return Ok(Some(Sites::single(UNGROUPED, self.site(prefix, len)?)));
        }
        Ok(None)
    }
    /// A push-sum mass; its site part (`site_len` entries) is read if the file has one.
    fn mass(&self, prefix: &str, m: usize, site_len: usize) -> Result<Mass> {
        let wp = self.vec(&format!("{prefix}/w_points"), 2)?;
        Ok(Mass {
            x: self.excess(prefix, m)?,
            w: wp[0],
            points: wp[1],
            site: self.sites(&format!("{prefix}/site_"), site_len)?,
        })
    }
}

/// Parses and verifies checkpoint bytes read from `path`, for an agent of input dimension `d`
/// under `vocab`.
///
/// # Errors
/// [`NodeError::Checkpoint`] for a corrupt file, a failed checksum, another format, or a
/// vocabulary other than `vocab`.
pub fn from_bytes(path: &Path, bytes: &[u8], vocab: &Vocabulary, d: usize) -> Result<Checkpoint> {
    let err = |reason: String| NodeError::Checkpoint {
        path: path.to_path_buf(),
        reason,
    };
    let (_, md) = SafeTensors::read_metadata(bytes)
        .map_err(|e| err(format!("not a safetensors file: {e}")))?;
    let info = md.metadata().clone().unwrap_or_default();
    if info.get("format").map(String::as_str) != Some(FORMAT) {
        return Err(err("not a coolgp checkpoint (metadata 'format')".into()));
    }
    if info.get("format_version").map(String::as_str) != Some(&FORMAT_VERSION.to_string()) {
        return Err(err(format!(
            "format version {:?}, this build reads {FORMAT_VERSION}",
            info.get("format_version")
        )));
    }
    let meta_json = info
        .get("coolgp")
        .ok_or_else(|| err("no 'coolgp' metadata".into()))?;
    let st = SafeTensors::deserialize(bytes).map_err(|e| err(format!("corrupt: {e}")))?;
    let mut names: Vec<(String, TensorView<'_>)> = st.tensors();
    names.sort_by(|a, b| a.0.cmp(&b.0));
    let sum = checksum(
        names.iter().map(|(k, v)| (k.as_str(), v.shape(), v.data())),
        meta_json,
    );
    if info.get("sha256") != Some(&sum) {
        return Err(err("checksum mismatch: the file is corrupt".into()));
    }
    let meta: NodeMeta =
        serde_json::from_str(meta_json).map_err(|e| err(format!("metadata: {e}")))?;
    if meta.model.fingerprint != vocab.fingerprint().to_string() {
        return Err(err(format!(
            "written under vocabulary {}, this node uses {}",
            meta.model.fingerprint,
            vocab.fingerprint()
        )));
    }
    let r = Reader {
        st,
        path,
        site_groups: meta.agent.site_groups.clone(),
    };
    let (m, dz) = (vocab.m(), vocab.d_latent());
    let a = &meta.agent;
    let mu = r.mat("theta/mu", dz, d)?;
    let log_sigma = r.mat("theta/log_sigma", dz, d)?;
    let n_params = 2 * dz * d + 2;
    let ac = r.vec("adam/config", 6)?;
    let adam = Adam {
        config: AdamConfig {
            lr: ac[0],
            beta1: ac[1],
            beta2: ac[2],
            eps: ac[3],
            tau: ac[4],
            kappa: ac[5],
        },
        t: a.adam_t,
        m1: r.vec("adam/m1", n_params)?,
        m2: r.vec("adam/m2", n_params)?,
    };
    let normalization = match a.normalization.as_deref() {
        Some("self-normalized") => IsNormalization::SelfNormalized,
        _ => IsNormalization::Unnormalized,
    };
    let (mode, learner) = match a.mode.as_str() {
        "frozen" => (
            UpdateMode::Frozen,
            Learner::Frozen(UnitStats {
                psi2: r.mat("cache/psi2", m, m)?,
                psi1_y: r.vec("cache/psi1_y", m)?,
                n: a.cache_points,
                yty: r.vec("cache/yty", 1)?[0],
            }),
        ),
        "importance" => {
            let k = a.cache_len;
            let (bshape, b) = r.raw("cache/b")?;
            if bshape != [k, m] {
                return Err(r.err(format!("cache/b: shape {bshape:?}, expected [{k}, {m}]")));
            }
            (
                UpdateMode::Importance {
                    samples: k,
                    normalization,
                },
                Learner::Importance(ImportanceCache {
                    samples: r.mats("cache/samples", k, dz, d)?,
                    a: r.mats("cache/a", k, m, m)?,
                    b: b.chunks_exact(m.max(1)).map(<[f64]>::to_vec).collect(),
                    normalization,
                }),
            )
        }
        "exact" => {
            let mut blocks = Vec::with_capacity(a.cache_len);
            for i in 0..a.cache_len {
                let x = r.mat_any(&format!("cache/x/{i:08}"), d)?;
                let y = r.vec(&format!("cache/y/{i:08}"), x.nrows())?;
                blocks.push((x, y));
            }
            (UpdateMode::Exact, Learner::Exact(blocks))
        }
        other => return Err(r.err(format!("unknown mode '{other}'"))),
    };
    let fusion = match a.fusion.as_str() {
        "tree" => FusionRule::Tree,
        "push-sum" => {
            let p = r.vec("fusion/push_sum", 2)?;
            FusionRule::PushSum {
                agents: p[0],
                weight: p[1],
            }
        }
        other => return Err(r.err(format!("unknown fusion '{other}'"))),
    };
    let projection = ProjectionMode::from_name(&a.projection)
        .ok_or_else(|| r.err(format!("unknown projection mode '{}'", a.projection)))?;
    let mut inbox = BTreeMap::new();
    for k in &a.inbox {
        let p = format!("inbox/{k}");
        let projection = if r.has(&format!("{p}/share_weight")) {
            let n = n_params;
            Some(ProjectionShare {
                weight: r.vec(&format!("{p}/share_weight"), 1)?[0],
                theta: r.vec(&format!("{p}/share_theta"), n)?,
                m1: r.vec(&format!("{p}/share_m1"), n)?,
                m2: r.vec(&format!("{p}/share_m2"), n)?,
            })
        } else {
            None
        };
        inbox.insert(
            *k,
            InboundSnapshot {
                excess: r.excess(&p, m)?,
                points: r.vec(&format!("{p}/points"), 1)?[0],
                projection,
                sites: if a.inbox_sites.contains(k) {
                    Some(
                        r.sites(&format!("{p}/site_"), dz * d)?
                            .ok_or_else(|| r.err(format!("missing tensor {p}/site_stats")))?,
                    )
                } else {
                    None
                },
            },
        );
    }
    let mut push_received = BTreeMap::new();
    for k in &a.push_received {
        push_received.insert(*k, r.mass(&format!("pushsum/received/{k}"), m, dz * d)?);
    }
    let push_mass = r.mass("pushsum/mass", m, dz * d)?;
    let memory = match a.site_memory.as_deref() {
        None => SiteMemory::Recent,
        Some(name) => SiteMemory::from_name(name).map_err(|e| NodeError::Checkpoint {
            path: path.to_path_buf(),
            reason: e,
        })?,
    };
    let fleet = projection == ProjectionMode::Fleet;
    let stream = fleet && memory == SiteMemory::Stream;
    // The stream memory's state of an agent without it: zeros of the site's length.
    let site_len_zeros = Site::zeros(if fleet { dz * d } else { 0 });
    let snapshot = AgentSnapshot {
        id: meta.model.id,
        config: AgentConfig {
            mode,
            projection,
            fusion,
            adam: adam.config.clone(),
            learn: a.learn,
            seed: a.seed,
            site: match a.site {
                Some([damping, prior_points, scale_prior_points]) => SiteConfig {
                    damping,
                    fleet_damping: a.site_fleet_damping.unwrap_or(0.0),
                    window_points: a.site_window.unwrap_or(0),
                    prior_points,
                    scale_prior_points,
                    memory,
                },
                None => SiteConfig::default(),
            },
            group: a.group,
        },
        mu,
        log_sigma,
        log_sigma_s: r.vec("theta/log_sigma_s", 1)?[0],
        log_sigma_n: r.vec("theta/log_sigma_n", 1)?[0],
        adam,
        learner,
        n_own: a.n_own,
        blocks: a.blocks,
        version: a.version,
        round: a.round,
        neighbors: a.neighbors.clone(),
        inbox,
        // Checkpoints written before pending changes existed have none.
        push_pending: if r.has("pushsum/pending/w_points") {
            r.mass("pushsum/pending", m, dz * d)?
        } else {
            push_mass.zeros_like()
        },
        push_mass,
        push_sent: r.mass("pushsum/sent", m, dz * d)?,
        push_received,
        last_round: a.last_round.clone(),
        site: if fleet {
            r.site("site/", dz * d)?
        } else {
            Site::zeros(0)
        },
        site_clock: a.site_clock.unwrap_or(0.0),
        site_frozen: if stream {
            r.site("site/frozen/", dz * d)?
        } else {
            site_len_zeros.clone()
        },
        window_term: if stream {
            (
                r.site("site/window_term/", dz * d)?,
                a.site_window_term_points.unwrap_or(0.0),
            )
        } else {
            (site_len_zeros, 0.0)
        },
        recent: {
            let mut blocks = Vec::with_capacity(a.site_recent.min(1024));
            for i in 0..a.site_recent {
                let x = r.mat_any(&format!("site/recent/x/{i:08}"), d)?;
                let y = r.vec(&format!("site/recent/y/{i:08}"), x.nrows())?;
                blocks.push((x, y));
            }
            blocks
        },
    };
    Ok(Checkpoint {
        meta,
        snapshot,
        path: path.to_path_buf(),
    })
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
        Some(e) => Err(e),
        None => Ok(None),
    }
}

/// Reads only the metadata of a checkpoint file (no vocabulary needed): for tools and tests.
///
/// # Errors
/// [`NodeError::Io`] or [`NodeError::Checkpoint`].
pub fn read_meta(path: &Path) -> Result<NodeMeta> {
    let bytes = std::fs::read(path).map_err(|e| NodeError::io("reading checkpoint", path, e))?;
    let err = |reason: String| NodeError::Checkpoint {
        path: path.to_path_buf(),
        reason,
    };
    let (_, md) = SafeTensors::read_metadata(&bytes).map_err(|e| err(e.to_string()))?;
    let info = md.metadata().clone().unwrap_or_default();
    let json = info
        .get("coolgp")
        .ok_or_else(|| err("no 'coolgp' metadata".into()))?;
    serde_json::from_str(json).map_err(|e| err(e.to_string()))
}
