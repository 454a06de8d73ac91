//! Flags (clap) and the TOML configuration file of `coolgp node`, `query` and `status`, and
//! their validation into a [`NodeSettings`] once, at the edge.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use coolgp::learn::AdamConfig;
use coolgp::{AgentConfig, FusionRule, ProjectionMode, UpdateMode};
use serde::Deserialize;

use crate::error::{NodeError, Result};
use crate::keys::validate_fleet;

/// Default inducing inputs m of the default vocabulary design (as `coolgp simulate`).
pub const DEFAULT_INDUCING: usize = 50;
/// Default rows per block.
pub const DEFAULT_BATCH: usize = 50;
/// Default round period in milliseconds.
pub const DEFAULT_ROUND_MS: u64 = 200;
/// Default rounds between periodic checkpoints (also the round lease on restart).
pub const DEFAULT_CHECKPOINT_EVERY: u64 = 20;
/// Default bound of each per-sender inbound queue (messages).
pub const DEFAULT_QUEUE: usize = 16;

/// zenoh flags shared by `node`, `query` and `status`.
#[derive(Args, Debug, Clone, Default, PartialEq)]
pub struct ZenohArgs {
    /// Listen on this zenoh endpoint, e.g. tcp/127.0.0.1:7447 (repeatable).
    #[arg(long, value_name = "ENDPOINT")]
    pub listen: Vec<String>,
    /// Connect to this zenoh endpoint, e.g. tcp/10.0.0.2:7447 (repeatable).
    #[arg(long, value_name = "ENDPOINT")]
    pub connect: Vec<String>,
    /// Enable zenoh's UDP multicast scouting (off unless given, even with --zenoh-config).
    #[arg(long)]
    pub scout: bool,
    /// A zenoh configuration file (JSON5): TLS/mTLS, routers, access control, ...
    /// --listen/--connect override its endpoints; the mode is always `peer`.
    #[arg(long, value_name = "FILE")]
    pub zenoh_config: Option<PathBuf>,
    /// Mutual TLS and signed messages with the fleet certificates in DIR (`coolgp certs`):
    /// only tls/ endpoints, every link authenticated against DIR/ca.pem, every model message
    /// signed and verified. A node uses `node-<id>.pem`/.key, `query` and `status` reader.pem/.key.
    /// Without --tls a fleet is OPEN: anyone who reaches a node's port can publish to it.
    #[arg(long, value_name = "DIR")]
    pub tls: Option<PathBuf>,
}

/// Flags of `coolgp node`: one COOL-GP agent as its own process.
#[derive(Args, Debug, Clone, Default)]
pub struct NodeArgs {
    /// A TOML file with any of the flags below (kebab-case keys, e.g. `round-ms = 100`);
    /// flags given on the command line win.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// This agent's id (unique in the fleet).
    #[arg(long)]
    pub id: Option<u64>,
    /// Fleet name (a key chunk: letters, digits, '-', '_', '.').
    #[arg(long)]
    pub fleet: Option<String>,
    /// Vocabulary file from `coolgp vocab --save FILE` (else the default design).
    #[arg(long, value_name = "FILE")]
    pub vocab: Option<PathBuf>,
    /// Inducing inputs m of the default design [default: 50].
    #[arg(long)]
    pub inducing: Option<usize>,
    /// Dimension d' of the default design [default: the input dimension].
    #[arg(long)]
    pub latent_dim: Option<usize>,
    /// Seed of the default design and shared initial q(W) [default: 0].
    #[arg(long)]
    pub vocab_seed: Option<u64>,
    /// Neighbour ids, comma separated (static tree or graph).
    #[arg(long, value_delimiter = ',')]
    pub neighbors: Vec<u64>,
    /// tree (exact on trees; never on a graph with cycles) or push-sum [default: tree].
    #[arg(long)]
    pub fusion: Option<String>,
    /// Number of agents s in the fleet (push-sum scales its estimate by s).
    #[arg(long)]
    pub fleet_size: Option<usize>,
    /// per-agent (the paper: this node learns its own q(W)) or fleet (spec §14: one
    /// fleet-wide q(W), σ_s, σ_n as a sum of every node's site, carried in every round's
    /// message (tree or push-sum) and adopted whenever the fused sums change; nodes that hold
    /// the same sums predict identically) [default: per-agent].
    #[arg(long)]
    pub projection: Option<String>,
    /// Fleet projection: this node's projection group. Nodes that observe the same phenomenon
    /// name the same group and learn one q(W), σ_s, σ_n together, while q(u) is fused with
    /// every neighbour (spec §14 with groups). Either every node of a fleet names a group or
    /// none does [default: none, the whole fleet is one group].
    #[arg(long, value_name = "NAME")]
    pub projection_group: Option<String>,
    /// With --projection-group: `across` fuses q(u) with neighbours of any group; `within`
    /// refuses messages that carry another group's sums (give such a node only neighbours of
    /// its own group) [default: across].
    #[arg(long, value_name = "across|within")]
    pub fuse_groups: Option<String>,
    /// Fleet projection: damping ρ ∈ (0, 1] of the site steps [default: 0.3].
    #[arg(long, allow_negative_numbers = true)]
    pub site_damping: Option<f64>,
    /// Fleet projection: ρ_f ∈ [0, 1), the damping per block of one learner with the fleet's
    /// data; a site step's rate is at least 1 − (1 − ρ_f)^(blocks the fleet's fused points grew
    /// by since the node's previous step), so old targets fade as fast as that learner's
    /// [default: 0.01; 0: off].
    #[arg(long, allow_negative_numbers = true)]
    pub site_fleet_damping: Option<f64>,
    /// Fleet projection: each site step's target is the data term over the node's newest
    /// blocks holding at least POINTS points, re-evaluated under the current q(W) and q(u)
    /// (kept in memory and in the checkpoint) [default: 80; 0: the newest block alone].
    #[arg(long, allow_negative_numbers = true, value_name = "POINTS")]
    pub site_window: Option<usize>,
    /// Fleet projection: N0, the scale of the shared initial q(W)'s pseudo-site, whose weight
    /// fades as exp(−N/N0) with the fleet's N points [default: 2000].
    #[arg(long, allow_negative_numbers = true)]
    pub site_prior_points: Option<f64>,
    /// Fleet projection: pseudo-points of the initial σ_s, σ_n (a fixed prior on the scales,
    /// counted once) [default: 100000].
    #[arg(long, allow_negative_numbers = true)]
    pub scale_prior_points: Option<f64>,
    /// Fleet projection: what a site remembers. recent: the newest window's term scaled to
    /// the node's points and damped (assumes a randomly ordered stream); stream: the sum of
    /// every block's term, the window's re-evaluated, older blocks' frozen — for live,
    /// time-ordered sensor streams [default: recent].
    #[arg(long, value_name = "recent|stream")]
    pub site_memory: Option<String>,
    /// Online update mode: frozen, importance or exact [default: frozen].
    #[arg(long)]
    pub mode: Option<String>,
    /// Importance samples k [default: 20].
    #[arg(long)]
    pub samples: Option<usize>,
    /// Importance weights: unnormalized or self-normalized [default: unnormalized].
    #[arg(long)]
    pub normalization: Option<String>,
    /// Keep q(W), σ_s, σ_n at their initial values (no optimizer steps).
    #[arg(long)]
    pub no_learn: bool,
    /// Seed of the agent's own randomness (importance samples) [default: the id].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Data stream: a CSV file with a header, or - for standard input.
    #[arg(long, value_name = "FILE|-")]
    pub data: Option<PathBuf>,
    /// Keep reading rows appended to --data (tail -f); rows appended while the node was down
    /// are read on restart.
    #[arg(long)]
    pub follow: bool,
    /// Target column [default: y].
    #[arg(long)]
    pub target: Option<String>,
    /// Input columns, comma separated [default: every column but the target].
    #[arg(long, value_delimiter = ',')]
    pub inputs: Vec<String>,
    /// Rows per block [default: 50].
    #[arg(long)]
    pub batch: Option<usize>,
    /// Blocks absorbed per round at most [default: 1].
    #[arg(long)]
    pub blocks_per_round: Option<usize>,
    /// Round period in milliseconds [default: 200].
    #[arg(long)]
    pub round_ms: Option<u64>,
    /// Tree fusion: publish an unchanged message to a neighbour only every N rounds (a changed
    /// one goes out at once); 1 publishes every message every round, the paper's rule. Larger
    /// values cut the bandwidth of a converged fleet N-fold; a lost message is then repaired
    /// within N rounds [default: 1].
    #[arg(long)]
    pub resend_every: Option<u64>,
    /// State directory for checkpoints; restarting with the same DIR resumes. Without it
    /// nothing is durable.
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
    /// Rounds between periodic checkpoints [default: 20].
    #[arg(long)]
    pub checkpoint_every: Option<u64>,
    /// Fleet-wide standardization (JSON: mean, std per input column, y_mean, y_std) applied
    /// to every row and query; without it raw values are used.
    #[arg(long, value_name = "FILE")]
    pub standardize: Option<PathBuf>,
    /// A CSV with the same columns as --data: status reports `rmse_holdout` on it.
    #[arg(long, value_name = "FILE")]
    pub holdout: Option<PathBuf>,
    /// Bound of each per-sender inbound queue, in messages [default: 16].
    #[arg(long)]
    pub queue: Option<usize>,
    /// Log format: text or json [default: text]; the level comes from RUST_LOG (default info).
    #[arg(long)]
    pub log_format: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub zenoh: ZenohArgs,
}

/// Flags of `coolgp query`: ask an agent for predictions.
#[derive(Args, Debug, Clone)]
pub struct QueryArgs {
    /// Fleet name.
    #[arg(long)]
    pub fleet: String,
    /// Agent id to ask.
    #[arg(long)]
    pub agent: u64,
    /// CSV with a header; columns are matched to the agent's inputs by name (extra columns,
    /// e.g. the target, are ignored).
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
    /// fused (default) or own.
    #[arg(long, default_value = "fused")]
    pub view: String,
    /// Give up after this many milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub zenoh: ZenohArgs,
}

/// Flags of `coolgp status`: print an agent's status as JSON.
#[derive(Args, Debug, Clone)]
pub struct StatusArgs {
    /// Fleet name.
    #[arg(long)]
    pub fleet: String,
    /// Agent id to ask.
    #[arg(long)]
    pub agent: u64,
    /// Include the fused and own excess (upper triangle of D1, and D2).
    #[arg(long)]
    pub fused: bool,
    /// Give up after this many milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub zenoh: ZenohArgs,
}

/// The TOML form of [`NodeArgs`] (kebab-case keys).
#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct NodeFile {
    id: Option<u64>,
    fleet: Option<String>,
    vocab: Option<PathBuf>,
    inducing: Option<usize>,
    latent_dim: Option<usize>,
    vocab_seed: Option<u64>,
    neighbors: Option<Vec<u64>>,
    fusion: Option<String>,
    fleet_size: Option<usize>,
    projection: Option<String>,
    projection_group: Option<String>,
    fuse_groups: Option<String>,
    site_damping: Option<f64>,
    site_fleet_damping: Option<f64>,
    site_window: Option<usize>,
    site_prior_points: Option<f64>,
    scale_prior_points: Option<f64>,
    site_memory: Option<String>,
    mode: Option<String>,
    samples: Option<usize>,
    normalization: Option<String>,
    no_learn: Option<bool>,
    seed: Option<u64>,
    data: Option<PathBuf>,
    follow: Option<bool>,
    target: Option<String>,
    inputs: Option<Vec<String>>,
    batch: Option<usize>,
    blocks_per_round: Option<usize>,
    round_ms: Option<u64>,
    resend_every: Option<u64>,
    state: Option<PathBuf>,
    checkpoint_every: Option<u64>,
    standardize: Option<PathBuf>,
    holdout: Option<PathBuf>,
    queue: Option<usize>,
    log_format: Option<String>,
    listen: Option<Vec<String>>,
    connect: Option<Vec<String>>,
    scout: Option<bool>,
    zenoh_config: Option<PathBuf>,
    tls: Option<PathBuf>,
}

/// Where the vocabulary comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum VocabSource {
    /// A file from `coolgp vocab --save` (loaded by the caller's loader).
    File(PathBuf),
    /// `Vocabulary::default_design(m, d', seed)`; `d' = None` means the input dimension.
    Default {
        /// Inducing inputs.
        m: usize,
        /// Latent dimension d'.
        d_latent: Option<usize>,
        /// Design seed.
        seed: u64,
    },
}

/// Where the data rows come from.
#[derive(Clone, Debug, PartialEq)]
pub enum DataSource {
    /// A CSV file (offsets in the checkpoint are byte offsets in it).
    File(PathBuf),
    /// Standard input (not replayable: the checkpoint records the rows consumed).
    Stdin,
}

impl DataSource {
    /// `-` or the path, for logs and the checkpoint.
    pub fn name(&self) -> String {
        match self {
            DataSource::File(p) => p.display().to_string(),
            DataSource::Stdin => "-".into(),
        }
    }
}

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Validated settings of a node (everything but the vocabulary, which may need the data's
/// input dimension).
#[derive(Clone, Debug)]
pub struct NodeSettings {
    /// Agent id.
    pub id: u64,
    /// Fleet name.
    pub fleet: String,
    /// Vocabulary source.
    pub vocab: VocabSource,
    /// Agent settings.
    pub agent: AgentConfig,
    /// The projection group's name (fleet projection with groups).
    pub projection_group: Option<String>,
    /// Refuse messages carrying another projection group's sums (`--fuse-groups within`).
    pub fuse_within: bool,
    /// Neighbour ids (sorted, without the own id).
    pub neighbors: Vec<u64>,
    /// Data stream.
    pub data: Option<DataSource>,
    /// Tail the data file.
    pub follow: bool,
    /// Target column.
    pub target: String,
    /// Input columns (None: all but the target).
    pub inputs: Option<Vec<String>>,
    /// Rows per block.
    pub batch: usize,
    /// Blocks per round at most.
    pub blocks_per_round: usize,
    /// Round period.
    pub round: Duration,
    /// Rounds between re-sends of an unchanged tree message (1: every round).
    pub resend_every: u64,
    /// State directory.
    pub state: Option<PathBuf>,
    /// Rounds between periodic checkpoints.
    pub checkpoint_every: u64,
    /// Standardization file.
    pub standardize: Option<PathBuf>,
    /// Holdout CSV.
    pub holdout: Option<PathBuf>,
    /// Per-sender queue bound.
    pub queue: usize,
    /// Log format.
    pub log_format: LogFormat,
    /// zenoh settings.
    pub zenoh: ZenohArgs,
}

fn read_file_config(path: &Path) -> Result<NodeFile> {
    let text =
        std::fs::read_to_string(path).map_err(|e| NodeError::io("reading config", path, e))?;
    toml::from_str(&text).map_err(|e| NodeError::Config(format!("{}: {e}", path.display())))
}

/// Parses `--mode`, `--samples`, `--normalization`.
///
/// # Errors
/// [`NodeError::Config`] for an unknown name or zero samples.
pub fn update_mode(
    mode: Option<&str>,
    samples: Option<usize>,
    normalization: Option<&str>,
) -> Result<UpdateMode> {
    UpdateMode::parse(mode, samples, normalization).map_err(NodeError::Config)
}

impl NodeArgs {
    /// Merges the TOML file (if any) under the flags and validates everything.
    ///
    /// # Errors
    /// [`NodeError::Config`] for a missing or invalid value, [`NodeError::Io`] if the
    /// configuration file cannot be read.
    pub fn resolve(self) -> Result<NodeSettings> {
        let f = match &self.config {
            Some(p) => read_file_config(p)?,
            None => NodeFile::default(),
        };
        let id = self
            .id
            .or(f.id)
            .ok_or_else(|| NodeError::Config("--id is required".into()))?;
        let fleet = self
            .fleet
            .or(f.fleet)
            .ok_or_else(|| NodeError::Config("--fleet is required".into()))?;
        validate_fleet(&fleet)?;
        let vocab = match self.vocab.or(f.vocab) {
            Some(p) => VocabSource::File(p),
            None => {
                let m = self.inducing.or(f.inducing).unwrap_or(DEFAULT_INDUCING);
                if m == 0 {
                    return Err(NodeError::Config("--inducing must be > 0".into()));
                }
                let d_latent = self.latent_dim.or(f.latent_dim);
                if d_latent == Some(0) {
                    return Err(NodeError::Config("--latent-dim must be > 0".into()));
                }
                VocabSource::Default {
                    m,
                    d_latent,
                    seed: self.vocab_seed.or(f.vocab_seed).unwrap_or(0),
                }
            }
        };
        let mut neighbors = if self.neighbors.is_empty() {
            f.neighbors.unwrap_or_default()
        } else {
            self.neighbors
        };
        neighbors.retain(|&n| n != id);
        neighbors.sort_unstable();
        neighbors.dedup();
        let fusion = match self.fusion.or(f.fusion).as_deref().unwrap_or("tree") {
            "tree" => FusionRule::Tree,
            "push-sum" | "pushsum" => {
                let s = self.fleet_size.or(f.fleet_size).ok_or_else(|| {
                    NodeError::Config("--fusion push-sum needs --fleet-size N".into())
                })?;
                if s == 0 {
                    return Err(NodeError::Config("--fleet-size must be > 0".into()));
                }
                FusionRule::PushSum {
                    agents: s as f64,
                    weight: 1.0,
                }
            }
            other => {
                return Err(NodeError::Config(format!(
                    "unknown --fusion '{other}': use tree or push-sum"
                )))
            }
        };
        let mode = update_mode(
            self.mode.or(f.mode).as_deref(),
            self.samples.or(f.samples),
            self.normalization.or(f.normalization).as_deref(),
        )?;
        // The node runs the modes that need no fleet-wide agreement on timing (NODE.md §11).
        let name = self.projection.or(f.projection);
        let name = name.as_deref().unwrap_or("per-agent");
        let projection = match ProjectionMode::from_name(name) {
            Some(m @ (ProjectionMode::PerAgent | ProjectionMode::Fleet)) => m,
            _ => {
                return Err(NodeError::Config(format!(
                    "unknown --projection '{name}': use per-agent or fleet"
                )))
            }
        };
        if projection != ProjectionMode::Fleet {
            let given: Vec<&str> = [
                (
                    "--site-damping",
                    self.site_damping.or(f.site_damping).is_some(),
                ),
                (
                    "--site-fleet-damping",
                    self.site_fleet_damping.or(f.site_fleet_damping).is_some(),
                ),
                (
                    "--site-window",
                    self.site_window.or(f.site_window).is_some(),
                ),
                (
                    "--site-prior-points",
                    self.site_prior_points.or(f.site_prior_points).is_some(),
                ),
                (
                    "--scale-prior-points",
                    self.scale_prior_points.or(f.scale_prior_points).is_some(),
                ),
                (
                    "--site-memory",
                    self.site_memory.is_some() || f.site_memory.is_some(),
                ),
            ]
            .into_iter()
            .filter_map(|(flag, set)| set.then_some(flag))
            .collect();
            if !given.is_empty() {
                return Err(NodeError::Config(format!(
                    "{} tune the fleet projection's site update: add --projection fleet or drop \
                     them",
                    given.join(", ")
                )));
            }
        }
        let site = coolgp::learn::SiteConfig::from_options(coolgp::learn::SiteOptions {
            damping: self.site_damping.or(f.site_damping),
            fleet_damping: self.site_fleet_damping.or(f.site_fleet_damping),
            window_points: self.site_window.or(f.site_window),
            prior_points: self.site_prior_points.or(f.site_prior_points),
            scale_prior_points: self.scale_prior_points.or(f.scale_prior_points),
            memory: self
                .site_memory
                .or(f.site_memory)
                .map(|m| coolgp::learn::SiteMemory::from_name(&m))
                .transpose()
                .map_err(NodeError::Config)?,
        })
        .map_err(NodeError::Config)?;
        let projection_group = self.projection_group.or(f.projection_group);
        if projection_group.is_some() && projection != ProjectionMode::Fleet {
            return Err(NodeError::Config(
                "--projection-group needs --projection fleet (groups share q(W) sites)".into(),
            ));
        }
        if projection_group.as_deref().is_some_and(str::is_empty) {
            return Err(NodeError::Config(
                "--projection-group must not be empty".into(),
            ));
        }
        let fuse_within = match self.fuse_groups.or(f.fuse_groups).as_deref() {
            None | Some("across") => false,
            Some("within") if projection_group.is_some() => true,
            Some("within") => {
                return Err(NodeError::Config(
                    "--fuse-groups within needs --projection-group NAME".into(),
                ))
            }
            Some(other) => {
                return Err(NodeError::Config(format!(
                    "unknown --fuse-groups '{other}': use across or within"
                )))
            }
        };
        let agent = AgentConfig {
            mode,
            projection,
            fusion,
            adam: AdamConfig::default(),
            learn: !(self.no_learn || f.no_learn.unwrap_or(false)),
            seed: self.seed.or(f.seed).unwrap_or(id),
            site,
            group: projection_group.as_deref().map(coolgp::learn::group_id),
        };
        let data = self.data.or(f.data).map(|p| {
            if p.as_os_str() == "-" {
                DataSource::Stdin
            } else {
                DataSource::File(p)
            }
        });
        let follow = self.follow || f.follow.unwrap_or(false);
        if follow && !matches!(data, Some(DataSource::File(_))) {
            return Err(NodeError::Config("--follow needs --data FILE".into()));
        }
        let inputs = if self.inputs.is_empty() {
            f.inputs
        } else {
            Some(self.inputs)
        };
        if data.is_none() && inputs.is_none() {
            return Err(NodeError::Config(
                "a node without --data needs --inputs (the input column names)".into(),
            ));
        }
        let positive = |v: usize, what: &str| {
            if v == 0 {
                Err(NodeError::Config(format!("{what} must be > 0")))
            } else {
                Ok(v)
            }
        };
        let batch = positive(self.batch.or(f.batch).unwrap_or(DEFAULT_BATCH), "--batch")?;
        let blocks_per_round = positive(
            self.blocks_per_round.or(f.blocks_per_round).unwrap_or(1),
            "--blocks-per-round",
        )?;
        let round_ms = self.round_ms.or(f.round_ms).unwrap_or(DEFAULT_ROUND_MS);
        if round_ms == 0 {
            return Err(NodeError::Config("--round-ms must be > 0".into()));
        }
        let resend_every = self.resend_every.or(f.resend_every).unwrap_or(1);
        if resend_every == 0 {
            return Err(NodeError::Config(
                "--resend-every must be ≥ 1 (1 = every round)".into(),
            ));
        }
        let checkpoint_every = self
            .checkpoint_every
            .or(f.checkpoint_every)
            .unwrap_or(DEFAULT_CHECKPOINT_EVERY);
        if checkpoint_every == 0 {
            return Err(NodeError::Config("--checkpoint-every must be > 0".into()));
        }
        let queue = positive(self.queue.or(f.queue).unwrap_or(DEFAULT_QUEUE), "--queue")?;
        let log_format = match self
            .log_format
            .or(f.log_format)
            .as_deref()
            .unwrap_or("text")
        {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => {
                return Err(NodeError::Config(format!(
                    "unknown --log-format '{other}': use text or json"
                )))
            }
        };
        let zenoh = ZenohArgs {
            listen: if self.zenoh.listen.is_empty() {
                f.listen.unwrap_or_default()
            } else {
                self.zenoh.listen
            },
            connect: if self.zenoh.connect.is_empty() {
                f.connect.unwrap_or_default()
            } else {
                self.zenoh.connect
            },
            scout: self.zenoh.scout || f.scout.unwrap_or(false),
            zenoh_config: self.zenoh.zenoh_config.or(f.zenoh_config),
            tls: self.zenoh.tls.or(f.tls),
        };
        Ok(NodeSettings {
            id,
            fleet,
            vocab,
            agent,
            projection_group,
            fuse_within,
            neighbors,
            data,
            follow,
            target: self.target.or(f.target).unwrap_or_else(|| "y".into()),
            inputs,
            batch,
            blocks_per_round,
            round: Duration::from_millis(round_ms),
            resend_every,
            state: self.state.or(f.state),
            checkpoint_every,
            standardize: self.standardize.or(f.standardize),
            holdout: self.holdout.or(f.holdout),
            queue,
            log_format,
            zenoh,
        })
    }
}

/// One setting in which a checkpoint differs from this node, named by the flag that sets it.
#[derive(Clone, Debug, PartialEq)]
pub struct SettingDiff {
    /// The flag (`--projection`), or the field's name for a setting without a flag (`adam`).
    pub flag: &'static str,
    /// The checkpoint's value, as given on the command line.
    pub written: String,
    /// This node's value.
    pub now: String,
    /// A switch without a value (`--no-learn`): the values are `with` / `without`.
    pub switch: bool,
}

impl std::fmt::Display for SettingDiff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.switch, self.written.as_str()) {
            (true, "with") => write!(f, "{} (now without it)", self.flag),
            (true, _) => write!(f, "learning (now {})", self.flag),
            (false, _) => write!(f, "{} {} (now {})", self.flag, self.written, self.now),
        }
    }
}

/// The settings in which `written` (a checkpoint's) differs from `wanted` (this node's), in
/// a fixed order, each named by the flag that sets it (`--projection`, `--site-window`, …) with
/// both values as the command line spells them; a setting without a flag (the optimizer's)
/// by its field name. `wanted_group` is this node's `--projection-group` name (a checkpoint
/// holds only the group's id, shown as `id 0x…`). Empty when nothing differs.
pub fn setting_differences(
    written: &AgentConfig,
    wanted: &AgentConfig,
    wanted_group: Option<&str>,
) -> Vec<SettingDiff> {
    let mut out = Vec::new();
    let mut value = |flag: &'static str, w: String, n: String| {
        if w != n {
            out.push(SettingDiff {
                flag,
                written: w,
                now: n,
                switch: false,
            });
        }
    };
    // --mode, and within importance mode --samples and --normalization.
    let mode = |m: &UpdateMode| {
        let detail = match m {
            UpdateMode::Importance {
                samples,
                normalization,
            } => Some((*samples, *normalization)),
            UpdateMode::Frozen | UpdateMode::Exact => None,
        };
        (m.name(), detail)
    };
    let ((wm, wi), (nm, ni)) = (mode(&written.mode), mode(&wanted.mode));
    value("--mode", wm.into(), nm.into());
    if let (Some((ws, wn)), Some((ns, nn))) = (wi, ni) {
        value("--samples", ws.to_string(), ns.to_string());
        value("--normalization", wn.name().into(), nn.name().into());
    }
    value(
        "--projection",
        written.projection.name().into(),
        wanted.projection.name().into(),
    );
    let group = |g: Option<u64>| match g {
        None => "none".to_string(),
        Some(id) if Some(id) == wanted.group => {
            wanted_group.map_or_else(|| format!("id {id:#x}"), str::to_string)
        }
        Some(id) => format!("id {id:#x}"),
    };
    value(
        "--projection-group",
        group(written.group),
        group(wanted.group),
    );
    // --fusion, and under push-sum --fleet-size (the initial weight has no flag).
    let fusion = |f: &FusionRule| match f {
        FusionRule::Tree => ("tree", None),
        FusionRule::PushSum { agents, weight } => ("push-sum", Some((*agents, *weight))),
    };
    let ((wf, wp), (nf, np)) = (fusion(&written.fusion), fusion(&wanted.fusion));
    value("--fusion", wf.into(), nf.into());
    if let (Some((wa, ww)), Some((na, nw))) = (wp, np) {
        value("--fleet-size", wa.to_string(), na.to_string());
        value("push-sum weight", ww.to_string(), nw.to_string());
    }
    // The site update's flags, in the order of `coolgp node --help`.
    let site = |s: &coolgp::learn::SiteConfig| {
        [
            ("--site-damping", s.damping.to_string()),
            ("--site-fleet-damping", s.fleet_damping.to_string()),
            ("--site-window", s.window_points.to_string()),
            ("--site-prior-points", s.prior_points.to_string()),
            ("--scale-prior-points", s.scale_prior_points.to_string()),
            ("--site-memory", s.memory.name().to_owned()),
        ]
    };
    for ((flag, w), (_, n)) in site(&written.site).into_iter().zip(site(&wanted.site)) {
        value(flag, w, n);
    }
    value("--seed", written.seed.to_string(), wanted.seed.to_string());
    value(
        "adam",
        format!("{:?}", written.adam),
        format!("{:?}", wanted.adam),
    );
    if written.learn != wanted.learn {
        let with = |learn: bool| if learn { "without" } else { "with" };
        out.push(SettingDiff {
            flag: "--no-learn",
            written: with(written.learn).into(),
            now: with(wanted.learn).into(),
            switch: true,
        });
    }
    out
}

/// `a`, `a and b`, `a, b and c`.
pub fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coolgp::learn::IsNormalization;

    /// The text of the differences of `written` from `wanted`.
    fn differences(written: &AgentConfig, wanted: &AgentConfig, group: Option<&str>) -> String {
        let d: Vec<String> = setting_differences(written, wanted, group)
            .iter()
            .map(ToString::to_string)
            .collect();
        join_and(&d)
    }

    #[test]
    fn a_checkpoint_with_other_settings_is_described_by_the_flags_that_resume_it() {
        let fleet = AgentConfig {
            projection: ProjectionMode::Fleet,
            ..AgentConfig::default()
        };
        assert!(setting_differences(&fleet, &fleet, None).is_empty());
        // Written with --projection fleet, now started per-agent with a group.
        let wanted = AgentConfig {
            group: Some(coolgp::learn::group_id("g")),
            ..AgentConfig::default()
        };
        assert_eq!(
            differences(&fleet, &wanted, Some("g")),
            "--projection fleet (now per-agent) and --projection-group none (now g)"
        );
        let e = NodeError::StateSettings {
            path: "st2".into(),
            settings: differences(&fleet, &wanted, Some("g")),
        };
        assert_eq!(
            e.to_string(),
            "state directory st2 was written with --projection fleet (now per-agent) and \
             --projection-group none (now g): restart with those flags to resume, or use a \
             fresh --state DIR to start over"
        );
        // The other way round: the checkpoint's group is known by its id only.
        let grouped = AgentConfig {
            group: Some(coolgp::learn::group_id("g")),
            ..fleet.clone()
        };
        let text = differences(&grouped, &fleet, None);
        assert_eq!(
            text,
            format!(
                "--projection-group id {:#x} (now none)",
                coolgp::learn::group_id("g")
            )
        );
        // A checkpoint written before --site-fleet-damping and --site-window (both 0).
        let mut old = fleet.clone();
        old.site.fleet_damping = 0.0;
        old.site.window_points = 0;
        assert_eq!(
            differences(&old, &fleet, None),
            "--site-fleet-damping 0 (now 0.01) and --site-window 0 (now 80)"
        );
        // Mode details, the seed, a switch, and a setting without a flag.
        let mut other = fleet.clone();
        other.mode = UpdateMode::Importance {
            samples: 7,
            normalization: IsNormalization::SelfNormalized,
        };
        other.seed = 9;
        other.learn = false;
        other.adam.lr *= 2.0;
        let text = differences(&other, &fleet, None);
        for part in [
            "--mode importance (now frozen), ",
            "--seed 9 (now 0), ",
            "adam AdamConfig",
            " and --no-learn (now without it)",
        ] {
            assert!(text.contains(part), "{part:?} in {text}");
        }
        let mut is = other.clone();
        is.mode = UpdateMode::Importance {
            samples: 20,
            normalization: IsNormalization::Unnormalized,
        };
        let text = differences(&other, &is, None);
        assert!(
            text == "--samples 7 (now 20) and --normalization self-normalized (now unnormalized)",
            "{text}"
        );
        assert!(differences(&fleet, &other, None).ends_with("learning (now --no-learn)"));
    }

    #[test]
    fn flags_override_the_file() {
        let dir = std::env::temp_dir().join(format!("coolgp-node-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let path = dir.join("node.toml");
        std::fs::write(
            &path,
            "id = 3\nfleet = \"lab\"\nneighbors = [2, 4]\nround-ms = 50\nbatch = 7\ninputs = [\"a\"]\nresend-every = 6\n",
        )
        .expect("write");
        let args = NodeArgs {
            config: Some(path),
            batch: Some(9),
            ..NodeArgs::default()
        };
        let s = args.resolve().expect("valid");
        assert_eq!((s.id, s.fleet.as_str(), s.batch), (3, "lab", 9));
        assert_eq!(s.neighbors, vec![2, 4]);
        assert_eq!(s.round, Duration::from_millis(50));
        assert_eq!(s.resend_every, 6);
        let zero = NodeArgs {
            id: Some(1),
            fleet: Some("lab".into()),
            inputs: vec!["a".into()],
            resend_every: Some(0),
            ..NodeArgs::default()
        };
        let e = zero.resolve().map(|_| ()).expect_err("0 is refused");
        assert!(e.to_string().contains("--resend-every"), "{e}");
        let bad = NodeArgs {
            id: Some(1),
            fleet: Some("a/b".into()),
            inputs: vec!["a".into()],
            ..NodeArgs::default()
        };
        assert!(bad.resolve().is_err());
    }

    #[test]
    fn site_settings_need_the_fleet_projection_and_a_known_memory() {
        let base = || NodeArgs {
            id: Some(1),
            fleet: Some("lab".into()),
            inputs: vec!["a".into()],
            ..NodeArgs::default()
        };
        // Silently ignored before: a per-agent node with the fleet's site settings.
        let per_agent = NodeArgs {
            site_window: Some(50),
            site_memory: Some("stream".into()),
            ..base()
        };
        let e = per_agent.resolve().map(|_| ()).expect_err("refused");
        assert!(
            e.to_string()
                .contains("--site-window, --site-memory tune the fleet projection's"),
            "{e}"
        );
        let fleet = |memory: &str| NodeArgs {
            projection: Some("fleet".into()),
            site_memory: Some(memory.into()),
            ..base()
        };
        let s = fleet("stream").resolve().expect("valid");
        assert_eq!(s.agent.site.memory, coolgp::learn::SiteMemory::Stream);
        let e = fleet("forever").resolve().map(|_| ()).expect_err("refused");
        assert!(
            e.to_string().contains("unknown site memory 'forever'"),
            "{e}"
        );
        // A checkpoint written under the other memory names the flag that resumes it.
        let mut written = s.agent.clone();
        written.site.memory = coolgp::learn::SiteMemory::Recent;
        assert_eq!(
            differences(&written, &s.agent, None),
            "--site-memory recent (now stream)"
        );
    }
}
