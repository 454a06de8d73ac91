//! Flags (clap) and the TOML configuration file of `coolgp node`, `query` and `status`, and
//! their validation into a [`NodeSettings`] once, at the edge. The agent's options (mode,
//! projection, site update, …) are [`AgentArgs`], shared with `coolgp simulate` and Python.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use coolgp::local::ResidualFamily;
use coolgp::{AgentConfig, FusionRule};
use coolgp_config::{AgentArgs, ConfigError, Driver, FitArgs, Ros2Args, Sizes};
use coolgp_ros2::RowSpec;
use serde::{Deserialize, Serialize};

use crate::error::{NodeError, Result};
use crate::keys::validate_fleet;
use crate::ros2::Ros2Settings;

mod client;
mod diff;
mod ros2;

pub use client::{QueryArgs, StatusArgs, DEFAULT_ROUTE};

pub use diff::{join_and, setting_differences, SettingDiff};
pub use ros2::Ros2NodeArgs;

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
#[derive(Args, Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "kebab-case")]
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

impl ZenohArgs {
    /// The keys of a configuration file.
    pub const KEYS: [&'static str; 5] = ["listen", "connect", "scout", "zenoh-config", "tls"];

    /// These flags over `file`'s (a list given here replaces the file's).
    pub(crate) fn merged(self, file: ZenohArgs) -> ZenohArgs {
        ZenohArgs {
            listen: or_list(self.listen, file.listen),
            connect: or_list(self.connect, file.connect),
            scout: self.scout || file.scout,
            zenoh_config: self.zenoh_config.or(file.zenoh_config),
            tls: self.tls.or(file.tls),
        }
    }
}

/// `flags` unless empty, else `file`.
fn or_list<T>(flags: Vec<T>, file: Vec<T>) -> Vec<T> {
    if flags.is_empty() {
        file
    } else {
        flags
    }
}

/// Flags of `coolgp node`: one COOL-GP agent as its own process. Also the keys of its TOML
/// file (kebab-case).
#[derive(Args, Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, rename_all = "kebab-case")]
pub struct NodeArgs {
    /// A TOML file with any of the flags below (kebab-case keys, e.g. `round-ms = 100`);
    /// flags given on the command line win.
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
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
    /// Inducing inputs m of the default design [default: 50; refused if one m × m matrix
    /// exceeds the machine's memory].
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
    /// The agent's options (mode, projection, site update, learning), as `coolgp simulate`'s.
    #[command(flatten)]
    #[serde(flatten)]
    pub agent: AgentArgs,
    /// The fleet's pooled fit of the residual kernel (`--local-families`).
    #[command(flatten)]
    #[serde(flatten)]
    pub fit: FitArgs,
    /// Seed of the agent's own randomness (importance samples) [default: the id].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Data stream: a CSV file with a header, - for standard input, or a rosbag2 recording
    /// (.mcap or a bag directory) with --ros2-input and --ros2-target.
    #[arg(long, value_name = "FILE|-|BAG")]
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
    #[serde(flatten)]
    #[allow(missing_docs)]
    pub zenoh: ZenohArgs,
    /// ROS 2 messages as the data (docs/ROS2.md).
    #[command(flatten)]
    #[serde(flatten)]
    pub ros2: Ros2Args,
    /// The node as a ROS 2 participant (docs/ROS2.md).
    #[command(flatten)]
    #[serde(flatten)]
    pub ros2_node: Ros2NodeArgs,
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
    /// A rosbag2 recording, its messages paired into rows as `spec` says (offsets in the
    /// checkpoint are rows).
    Bag {
        /// The .mcap file or bag directory.
        path: PathBuf,
        /// Topics, fields and tolerance.
        spec: RowSpec,
    },
}

impl DataSource {
    /// `-` or the path, for logs and the checkpoint.
    pub fn name(&self) -> String {
        match self {
            DataSource::File(p) | DataSource::Bag { path: p, .. } => p.display().to_string(),
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
    /// The node as a ROS 2 participant (`--ros2`).
    pub ros2: Option<Ros2Settings>,
    /// The kernel families this node's pooled fit chooses among (`--local-families`).
    pub local_families: Vec<ResidualFamily>,
}

impl From<ConfigError> for NodeError {
    fn from(e: ConfigError) -> Self {
        NodeError::Config(e.to_string())
    }
}

/// A recording as the data: its topics and fields from `--ros2-input`/`--ros2-target`; the
/// CSV column options are refused, naming the ROS 2 ones.
fn bag_source(a: &NodeArgs, path: PathBuf) -> Result<DataSource> {
    if a.target.is_some() || !a.inputs.is_empty() || a.follow {
        return Err(NodeError::Config(format!(
            "{} is a ROS 2 recording: name its fields with --ros2-input TOPIC:TYPE:FIELDS and \
             --ros2-target TOPIC:TYPE:FIELD (not --target, --inputs or --follow)",
            path.display()
        )));
    }
    let r = &a.ros2;
    let (Some(inputs), Some(target)) = (&r.ros2_input, &r.ros2_target) else {
        return Err(NodeError::Config(format!(
            "{} is a ROS 2 recording: say what to learn with --ros2-input TOPIC:TYPE:FIELDS \
             and --ros2-target TOPIC:TYPE:FIELD (docs/ROS2.md)",
            path.display()
        )));
    };
    let tol = r.ros2_tolerance.unwrap_or(coolgp_ros2::DEFAULT_TOLERANCE);
    let spec = RowSpec::parse(inputs, target, tol).map_err(|e| NodeError::Config(e.to_string()))?;
    one_robot(&spec)?;
    Ok(DataSource::Bag { path, spec })
}

/// A node is one robot: topics under `/*/` (every robot's, for `coolgp simulate`) are refused.
fn one_robot(spec: &RowSpec) -> Result<()> {
    if spec.per_namespace() {
        return Err(NodeError::Config(
            "a node learns one robot's topics: name them without /*/ (e.g. /robot1/fix, or a \
             relative name under --ros2-namespace); /*/ is for `coolgp simulate` on a \
             recording of many robots"
                .into(),
        ));
    }
    Ok(())
}

/// Live topics as the data: the topics and fields of `--ros2-input`/`--ros2-target`.
fn live_spec(a: &NodeArgs) -> Result<RowSpec> {
    if a.target.is_some() || !a.inputs.is_empty() {
        return Err(NodeError::Config(
            "live ROS 2 topics name their fields with --ros2-input and --ros2-target (not \
             --target or --inputs)"
                .into(),
        ));
    }
    let r = &a.ros2;
    let (Some(inputs), Some(target)) = (&r.ros2_input, &r.ros2_target) else {
        return Err(NodeError::Config(
            "live ROS 2 topics need both --ros2-input TOPIC:TYPE:FIELDS and --ros2-target \
             TOPIC:TYPE:FIELD"
                .into(),
        ));
    };
    let tol = r.ros2_tolerance.unwrap_or(coolgp_ros2::DEFAULT_TOLERANCE);
    let spec = RowSpec::parse(inputs, target, tol).map_err(|e| NodeError::Config(e.to_string()))?;
    one_robot(&spec)?;
    Ok(spec)
}

/// Reads `--config FILE`, refusing keys that are not flags (a typo would be ignored).
fn read_file_config(path: &Path) -> Result<NodeArgs> {
    let text =
        std::fs::read_to_string(path).map_err(|e| NodeError::io("reading config", path, e))?;
    let bad = |e: String| NodeError::Config(format!("{}: {e}", path.display()));
    let file: NodeArgs = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let keys: toml::Table = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
    coolgp_config::check_keys(keys.keys().map(String::as_str), &NodeArgs::known_keys())
        .map_err(bad)?;
    Ok(file)
}

/// `v`, unless it is 0.
fn positive<T: Default + PartialEq>(v: T, flag: &str) -> Result<T> {
    if v == T::default() {
        Err(NodeError::Config(format!("{flag} must be > 0")))
    } else {
        Ok(v)
    }
}

impl NodeArgs {
    /// The node's own keys of a configuration file (besides [`ZenohArgs::KEYS`] and
    /// [`AgentArgs::KEYS`]).
    pub const KEYS: [&'static str; 23] = [
        "id",
        "fleet",
        "vocab",
        "inducing",
        "latent-dim",
        "vocab-seed",
        "neighbors",
        "fusion",
        "fleet-size",
        "seed",
        "data",
        "follow",
        "target",
        "inputs",
        "batch",
        "blocks-per-round",
        "round-ms",
        "resend-every",
        "state",
        "checkpoint-every",
        "standardize",
        "holdout",
        "queue",
    ];

    /// Every key of a configuration file: the flags' names.
    pub fn known_keys() -> Vec<&'static str> {
        let log = ["log-format"];
        let keys = Self::KEYS.iter().chain(&log).chain(&AgentArgs::KEYS);
        let keys = keys.chain(&FitArgs::KEYS);
        keys.chain(&ZenohArgs::KEYS)
            .chain(&Ros2Args::KEYS)
            .chain(&Ros2NodeArgs::KEYS)
            .copied()
            .collect()
    }

    /// These flags over `file`'s: what is given here wins, the file fills the rest.
    pub(crate) fn merged(self, f: NodeArgs) -> NodeArgs {
        NodeArgs {
            config: self.config,
            id: self.id.or(f.id),
            fleet: self.fleet.or(f.fleet),
            vocab: self.vocab.or(f.vocab),
            inducing: self.inducing.or(f.inducing),
            latent_dim: self.latent_dim.or(f.latent_dim),
            vocab_seed: self.vocab_seed.or(f.vocab_seed),
            neighbors: or_list(self.neighbors, f.neighbors),
            fusion: self.fusion.or(f.fusion),
            fleet_size: self.fleet_size.or(f.fleet_size),
            agent: self.agent.merged(f.agent),
            fit: self.fit.merged(f.fit),
            seed: self.seed.or(f.seed),
            data: self.data.or(f.data),
            follow: self.follow || f.follow,
            target: self.target.or(f.target),
            inputs: or_list(self.inputs, f.inputs),
            batch: self.batch.or(f.batch),
            blocks_per_round: self.blocks_per_round.or(f.blocks_per_round),
            round_ms: self.round_ms.or(f.round_ms),
            resend_every: self.resend_every.or(f.resend_every),
            state: self.state.or(f.state),
            checkpoint_every: self.checkpoint_every.or(f.checkpoint_every),
            standardize: self.standardize.or(f.standardize),
            holdout: self.holdout.or(f.holdout),
            queue: self.queue.or(f.queue),
            log_format: self.log_format.or(f.log_format),
            zenoh: self.zenoh.merged(f.zenoh),
            ros2: self.ros2.merged(f.ros2),
            ros2_node: self.ros2_node.merged(f.ros2_node),
        }
    }

    /// `--vocab FILE`, or the default design of `--inducing`, `--latent-dim`, `--vocab-seed`.
    fn vocab_source(&self) -> Result<VocabSource> {
        if let Some(p) = &self.vocab {
            return Ok(VocabSource::File(p.clone()));
        }
        let m = positive(self.inducing.unwrap_or(DEFAULT_INDUCING), "--inducing")?;
        if self.latent_dim == Some(0) {
            return Err(NodeError::Config("--latent-dim must be > 0".into()));
        }
        Ok(VocabSource::Default {
            m,
            d_latent: self.latent_dim,
            seed: self.vocab_seed.unwrap_or(0),
        })
    }

    /// `--fusion` (and `--fleet-size` for push-sum).
    fn fusion_rule(&self) -> Result<FusionRule> {
        match self.fusion.as_deref().unwrap_or("tree") {
            "tree" => Ok(FusionRule::Tree),
            "push-sum" | "pushsum" => {
                let s = self.fleet_size.ok_or_else(|| {
                    NodeError::Config("--fusion push-sum needs --fleet-size N".into())
                })?;
                Ok(FusionRule::PushSum {
                    agents: positive(s, "--fleet-size")? as f64,
                    weight: 1.0,
                })
            }
            other => Err(NodeError::Config(format!(
                "unknown --fusion '{other}': use tree or push-sum"
            ))),
        }
    }

    /// Merges the TOML file (if any) under the flags and validates everything, with the sizes
    /// checked against this machine's memory ([`NodeArgs::resolve_for_memory`]).
    ///
    /// # Errors
    /// [`NodeError::Config`] for a missing or invalid value, [`NodeError::Io`] if the
    /// configuration file cannot be read.
    pub fn resolve(self) -> Result<NodeSettings> {
        self.resolve_for_memory(coolgp_config::machine_memory())
    }

    /// As [`NodeArgs::resolve`], on a machine with `machine` bytes of memory (`None`: the
    /// sizes are not checked).
    ///
    /// # Errors
    /// As [`NodeArgs::resolve`]; also [`NodeError::Config`] for a size that needs more memory
    /// than `machine` ([`coolgp_config::check_memory`]).
    pub fn resolve_for_memory(self, machine: Option<u64>) -> Result<NodeSettings> {
        let a = match &self.config {
            Some(p) => {
                let file = read_file_config(p)?;
                self.merged(file)
            }
            None => self,
        };
        let id =
            a.id.ok_or_else(|| NodeError::Config("--id is required".into()))?;
        let fleet = a
            .fleet
            .clone()
            .ok_or_else(|| NodeError::Config("--fleet is required".into()))?;
        validate_fleet(&fleet)?;
        let vocab = a.vocab_source()?;
        let mut neighbors = a.neighbors.clone();
        neighbors.retain(|&n| n != id);
        neighbors.sort_unstable();
        neighbors.dedup();
        let fusion = a.fusion_rule()?;
        let v = a.agent.validate(Driver::Node)?;
        let agent = AgentConfig {
            fusion,
            seed: a.seed.unwrap_or(id),
            ..v.config
        };
        if let Some(machine) = machine {
            check_memory(&vocab, &agent, a.inputs.len(), machine)?;
        }
        let data = match a.data.clone() {
            Some(p) if p.as_os_str() == "-" => Some(DataSource::Stdin),
            Some(p) if coolgp_ros2::is_bag(&p) => Some(bag_source(&a, p)?),
            Some(p) => Some(DataSource::File(p)),
            None => None,
        };
        let live = match (&data, a.ros2.any()) {
            (None, true) => Some(live_spec(&a)?),
            (Some(DataSource::Bag { .. }), _) | (_, false) => None,
            (Some(_), true) => {
                return Err(NodeError::Config(
                    "--ros2-input/--ros2-target name live topics (with --ros2 zenoh) or the \
                     topics of a rosbag2 recording given as --data (an .mcap file or a bag \
                     directory), not the columns of a CSV"
                        .into(),
                ))
            }
        };
        let ros2 = a.ros2_node.settings(id, live, agent.local.capacity > 0)?;
        if a.follow && !matches!(data, Some(DataSource::File(_))) {
            return Err(NodeError::Config("--follow needs --data FILE".into()));
        }
        if data.is_none() && a.inputs.is_empty() && ros2.as_ref().is_none_or(|r| r.live.is_none()) {
            return Err(NodeError::Config(
                "a node without --data needs --inputs (the input column names)".into(),
            ));
        }
        a.settings(
            id,
            fleet,
            vocab,
            agent,
            v.group,
            v.fuse_within,
            neighbors,
            data,
            ros2,
        )
    }

    /// The validated settings, with the loop's counts and periods checked.
    #[allow(clippy::too_many_arguments)]
    fn settings(
        self,
        id: u64,
        fleet: String,
        vocab: VocabSource,
        agent: AgentConfig,
        projection_group: Option<String>,
        fuse_within: bool,
        neighbors: Vec<u64>,
        data: Option<DataSource>,
        ros2: Option<Ros2Settings>,
    ) -> Result<NodeSettings> {
        let resend_every = self.resend_every.unwrap_or(1);
        if resend_every == 0 {
            return Err(NodeError::Config(
                "--resend-every must be ≥ 1 (1 = every round)".into(),
            ));
        }
        let log_format = match self.log_format.as_deref().unwrap_or("text") {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => {
                return Err(NodeError::Config(format!(
                    "unknown --log-format '{other}': use text or json"
                )))
            }
        };
        let batch = self.batch.unwrap_or(DEFAULT_BATCH);
        let round_ms = self.round_ms.unwrap_or(DEFAULT_ROUND_MS);
        let every = self.checkpoint_every.unwrap_or(DEFAULT_CHECKPOINT_EVERY);
        let spec = match &data {
            Some(DataSource::Bag { spec, .. }) => Some(spec),
            _ => ros2.as_ref().and_then(|r| r.live.as_ref()),
        };
        let (target, inputs) = match spec {
            Some(spec) => (spec.target_name().to_string(), Some(spec.input_names())),
            None => (
                self.target.unwrap_or_else(|| "y".into()),
                (!self.inputs.is_empty()).then_some(self.inputs),
            ),
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
            follow: self.follow,
            target,
            inputs,
            batch: positive(batch, "--batch")?,
            blocks_per_round: positive(self.blocks_per_round.unwrap_or(1), "--blocks-per-round")?,
            round: Duration::from_millis(positive(round_ms, "--round-ms")?),
            resend_every,
            state: self.state,
            checkpoint_every: positive(every, "--checkpoint-every")?,
            standardize: self.standardize,
            holdout: self.holdout,
            queue: positive(self.queue.unwrap_or(DEFAULT_QUEUE), "--queue")?,
            log_format,
            zenoh: self.zenoh,
            ros2,
            local_families: self.fit.families(Driver::Node)?,
        })
    }
}

/// Refuses a default design, importance caches, site window (with `--inputs`, whose count
/// is d) or local memory that need more than `machine` bytes ([`coolgp_config::check_memory`]). A vocabulary
/// file is read whole before it is used; its m is not known here.
fn check_memory(vocab: &VocabSource, agent: &AgentConfig, d: usize, machine: u64) -> Result<()> {
    let b = agent.local.capacity;
    let VocabSource::Default { m, .. } = vocab else {
        // The local memory's factor does not depend on m.
        let sizes = Sizes {
            agents: 1,
            ..Sizes::default()
        };
        let sizes = sizes.with_local_memory(b);
        return Ok(coolgp_config::check_memory(&sizes, machine, Driver::Node)?);
    };
    let (window, d) = (agent.site.window_points, (d > 0).then_some(d));
    let sizes = Sizes::of(1, *m, agent.mode, agent.projection, window, d).with_local_memory(b);
    Ok(coolgp_config::check_memory(&sizes, machine, Driver::Node)?)
}

#[cfg(test)]
mod families_tests;
#[cfg(test)]
mod tests;
