//! The options of a simulated run ([`SimArgs`]): the flags of `coolgp simulate` (with the
//! cargo feature `clap`), the keys of its TOML file (`--config`) and the keywords of Python's
//! `coolgp.simulate(...)`; and their validation into a [`SimConfig`] ([`sim_config`]), with
//! the check of the run's sizes against the machine's memory ([`check_memory`]).

use coolgp::members::Policy;
use std::path::PathBuf;
use std::sync::Arc;

use coolgp::Vocabulary;
use coolgp_config::{check_keys, AgentArgs, ConfigError, Driver, Ros2Args, Sizes};
use serde::{Deserialize, Serialize};

use crate::config::{FuseGroups, FusionChoice, SimConfig, TopologyKind};
use crate::SimError;
use coolgp::local::{FleetRule, PoolOptions, PoolSample, ResidualFamily, UnionRule};

/// Every run option. All optional so that `--config FILE` can fill what the command line omits.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(rename_all = "kebab-case")]
pub struct SimArgs {
    /// Built-in dataset: synthetic (2 phenomena, 6-d), airline (NYC flights 2013), wind (Irish
    /// stations), air (German PM10 stations). Ignored with --data.
    #[cfg_attr(feature = "clap", arg(long))]
    pub dataset: Option<String>,
    /// A CSV file (header required; .csv.gz works) to stream instead of a built-in dataset,
    /// or a rosbag2 recording (an .mcap file or a bag directory) with --ros2-input and
    /// --ros2-target.
    #[cfg_attr(feature = "clap", arg(long))]
    pub data: Option<PathBuf>,
    /// Target column of --data (a built-in dataset predicts its own).
    #[cfg_attr(feature = "clap", arg(long))]
    pub target: Option<String>,
    /// Input columns, comma-separated: of --data (default: every other numeric column), or of
    /// the built-in airline, wind or air (default: theirs; wind and air: lon,lat,day,doy).
    #[cfg_attr(feature = "clap", arg(long, value_delimiter = ','))]
    pub inputs: Option<Vec<String>>,
    /// A separate test CSV (same columns) instead of --test-fraction.
    #[cfg_attr(feature = "clap", arg(long))]
    pub test: Option<PathBuf>,
    /// Fraction of the rows held out for testing (default 0.1).
    #[cfg_attr(feature = "clap", arg(long, allow_negative_numbers = true))]
    pub test_fraction: Option<f64>,
    /// Route rows to agents by this column (e.g. a station id) instead of at random.
    #[cfg_attr(feature = "clap", arg(long))]
    pub agent_by: Option<String>,
    /// Route rows to agents by region instead: seeded k-means (k = --agents, seed = --seed)
    /// over these input columns, standardized, comma-separated (e.g. lon,lat; `all`: every
    /// input column), so that each agent patrols one compact region; a test row belongs to the
    /// region of its nearest centre.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', value_name = "COLS")
    )]
    pub regions: Option<Vec<String>>,
    /// How a fleet-wide query combines the agents' answers at a test row (summary.json's
    /// `*_fleet_query`): auto (default: the rule with the smallest error on the calibration's
    /// held-out memory rows), min-variance (the answer with the smallest predictive
    /// variance), most-informed, bcm or rbcm (Bayesian committee machines over the agents'
    /// local corrections, the robust one weighing each agent by what it knows).
    #[cfg_attr(feature = "clap", arg(long, value_name = "NAME"))]
    pub fleet_rule: Option<String>,
    /// Also score the union rule for each of these k (comma-separated, e.g. 2,3): at each
    /// query row the k agents whose answers carry the most information pool their memory
    /// rows, and the most informative answers with the exact residual GP on the pooled rows
    /// (summary.json's `fleet_query_rules` gains `union-K`; with --local-memory). It reads
    /// the agents' raw rows, so it is a measurement, not a rule a querier can apply from
    /// answers (docs/LOCAL.md §6–§7); it costs one Cholesky of up to k·B rows per distinct
    /// set of agents chosen.
    #[cfg_attr(feature = "clap", arg(long, value_delimiter = ',', value_name = "K"))]
    pub union_k: Option<Vec<usize>>,
    /// Ask each fleet-query row only the K agents whose memory lies nearest it (their
    /// coverage: a few boxes around their rows in the residual kernel's metric), so a query
    /// costs rows × K answers, not rows × agents; 0: every agent answers every row. Default 16
    /// (EXPERIMENTS.md "Routing"). The calibration is routed the same way.
    #[cfg_attr(feature = "clap", arg(long, value_name = "K"))]
    pub route: Option<usize>,
    /// The rows the fleet fits its residual kernel on (`--local-fit fleet`): near (default:
    /// anchor rows with their nearest rows in their own and the other agents' memories,
    /// fitted block by block and chosen among several starts on held-out groups; sees
    /// short-range structure such as the same day at nearby stations on every setting) or
    /// spaced (evenly spaced rows of every memory, one exact likelihood: the fit before
    /// issue 28). docs/LOCAL.md §11.
    #[cfg_attr(feature = "clap", arg(long, value_name = "NAME"))]
    pub local_sample: Option<String>,
    /// The residual kernel families the fleet's fit on neighbourhood groups explores
    /// (`--local-sample near`): se (squared exponential), matern32, matern52, sum (a
    /// per-agent offset + a short-range + a smooth part). Each family's start is chosen on
    /// held-out groups, the family on the fleet query's own task (its calibration rows, each
    /// answered by the other agents; another family must err 5% less than the incumbent).
    /// Default se alone; se,sum gains on air and region-routed fields (docs/LOCAL.md §12c).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', value_name = "FAMILY")
    )]
    pub local_families: Option<Vec<String>>,
    /// The member check (docs/MEMBERS.md): after each fusion, each agent's memory rows against
    /// its nearest peers' own models; a member far worse than the median member, and outside
    /// the intervals, is a suspect. contain (default: a suspect's data leaves the fused model,
    /// the pooled fits and the fleet query until its rows check out again), flag (report
    /// only: summary.json's `members`) or off.
    #[cfg_attr(feature = "clap", arg(long, value_name = "POLICY"))]
    pub suspects: Option<String>,
    /// Skip malformed rows (counted and reported) instead of stopping at the first.
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(default)]
    pub skip_bad_rows: bool,
    /// Number of agents (default 10; with --agent-by, one per key).
    #[cfg_attr(feature = "clap", arg(long))]
    pub agents: Option<usize>,
    /// Inducing inputs m (default 50; refused if one m × m matrix per agent exceeds the
    /// machine's memory).
    #[cfg_attr(feature = "clap", arg(long))]
    pub inducing: Option<usize>,
    /// Dimension d' of the standardized domain (default: the input dimension).
    #[cfg_attr(feature = "clap", arg(long))]
    pub latent_dim: Option<usize>,
    /// Points per batch (default 20; the synthetic dataset uses its own 40).
    #[cfg_attr(feature = "clap", arg(long))]
    pub batch: Option<usize>,
    /// The agents' options (mode, projection, site update, learning).
    #[cfg_attr(feature = "clap", command(flatten))]
    #[serde(flatten)]
    pub agent: AgentArgs,
    /// ROS 2 recordings as data: --data BAG.mcap (or a rosbag2 directory) with the topics
    /// and fields to pair into rows.
    #[cfg_attr(feature = "clap", command(flatten))]
    #[serde(flatten)]
    pub ros2: Ros2Args,
    /// Fleet projection only: batches between two fusions of the sites (tiny next to q(u))
    /// (default: every 1% of the stream or every round of blocks — one per agent — whichever
    /// is sooner; at least 1). Under push-sum the sites ride with q(u), so q(u) then fuses
    /// as often.
    #[cfg_attr(
        feature = "clap",
        arg(long, allow_negative_numbers = true, value_name = "BATCHES")
    )]
    pub site_every: Option<usize>,
    /// path, star, random-tree (default), mst, ring, grid, complete, geometric.
    #[cfg_attr(feature = "clap", arg(long))]
    pub topology: Option<String>,
    /// auto (default: tree on trees, push-sum otherwise), tree, push-sum, spanning-tree.
    #[cfg_attr(feature = "clap", arg(long))]
    pub fusion: Option<String>,
    /// Probability that one transmission is lost (default 0).
    #[cfg_attr(feature = "clap", arg(long, allow_negative_numbers = true))]
    pub loss: Option<f64>,
    /// Communication rounds per fusion (default: the diameter for tree fusion; for push-sum,
    /// until every agent's fused estimate changes by less than 1e-9 relative in a round, at
    /// most 20,000 rounds, reported as `rounds` in summary.json; implies --schedule rounds).
    #[cfg_attr(feature = "clap", arg(long))]
    pub rounds: Option<usize>,
    /// When tree messages are sent: rounds (the paper: every agent to every neighbour each
    /// round, `diameter` rounds), two-pass (each message once, leaves up then root down:
    /// 2(n−1) messages per fusion, the same fused models) or auto (default: two-pass for
    /// loss-free tree fusion, rounds otherwise).
    #[cfg_attr(feature = "clap", arg(long))]
    pub schedule: Option<String>,
    /// Batches between fusions (default: 10% of the stream).
    #[cfg_attr(feature = "clap", arg(long))]
    pub fuse_every: Option<usize>,
    /// A vocabulary file from `coolgp vocab --save` (default: the deterministic design).
    #[cfg_attr(feature = "clap", arg(long))]
    pub vocab: Option<PathBuf>,
    /// Seed of everything random (default 0).
    #[cfg_attr(feature = "clap", arg(long))]
    pub seed: Option<u64>,
    /// Synthetic only: input dimension d of each phenomenon (default 6; d' = d).
    #[cfg_attr(feature = "clap", arg(long))]
    pub synthetic_dim: Option<usize>,
    /// Synthetic only: relatedness ρ ∈ [0, 1] of the phenomena's projections (default 0.9).
    #[cfg_attr(feature = "clap", arg(long, allow_negative_numbers = true))]
    pub relatedness: Option<f64>,
    /// Use at most this many training rows (after the split).
    #[cfg_attr(feature = "clap", arg(long))]
    pub max_train: Option<usize>,
    /// Use at most this many test rows (default 10000).
    #[cfg_attr(feature = "clap", arg(long))]
    pub max_test: Option<usize>,
    /// Order of the stream: random (default; the paper's protocol: the batches in random
    /// order, rows of a key in time order inside each batch) or file: no shuffling, the rows
    /// in the data file's order; with --agent-by, the k-th batch of every key before the
    /// (k+1)-th, so a time-sorted file gives each agent its sensor's stream in time order
    /// and the fleet one clock (what networked nodes fed from live sensors see).
    #[cfg_attr(feature = "clap", arg(long, value_name = "random|file"))]
    pub stream_order: Option<String>,
    /// Skip the central learner.
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(default)]
    pub no_central: bool,
    /// Skip dDTC and dPITC.
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(default)]
    pub no_baselines: bool,
    /// Fleet projection under the tree rule: no warm-up q(u) fusions. By default q(u) also
    /// fuses before its first regular fusion each time the stream has doubled since the first
    /// site fusion (1%, 2%, 4%, 8% of the stream at the default schedule), so the early site
    /// steps are taken against a fleet q(u) rather than each agent's own few points.
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(default)]
    pub no_fuse_warmup: bool,
    /// Read flags from a TOML file (keys are the flag names); flags given here override it.
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(skip)]
    pub config: Option<PathBuf>,
}

macro_rules! merge_opts {
    ($dst:ident, $src:ident, $($f:ident),*) => { $( if $dst.$f.is_none() { $dst.$f = $src.$f.clone(); } )* };
}

impl From<ConfigError> for SimError {
    fn from(e: ConfigError) -> Self {
        SimError::Config(e.to_string())
    }
}

impl SimArgs {
    /// The keys of a configuration file besides [`AgentArgs::KEYS`] (the flags' names).
    pub const KEYS: [&'static str; 36] = [
        "dataset",
        "data",
        "target",
        "inputs",
        "test",
        "test-fraction",
        "agent-by",
        "regions",
        "fleet-rule",
        "union-k",
        "route",
        "local-sample",
        "local-families",
        "suspects",
        "skip-bad-rows",
        "agents",
        "inducing",
        "latent-dim",
        "batch",
        "site-every",
        "topology",
        "fusion",
        "loss",
        "rounds",
        "schedule",
        "fuse-every",
        "vocab",
        "seed",
        "synthetic-dim",
        "relatedness",
        "max-train",
        "max-test",
        "stream-order",
        "no-central",
        "no-baselines",
        "no-fuse-warmup",
    ];

    /// Every key a configuration file or Python's `simulate` may give: [`SimArgs::KEYS`]
    /// and [`AgentArgs::KEYS`].
    pub fn known_keys() -> Vec<&'static str> {
        Self::KEYS
            .iter()
            .chain(&AgentArgs::KEYS)
            .chain(&Ros2Args::KEYS)
            .copied()
            .collect()
    }

    /// Refuses keys that are not options of a run (a typo would otherwise be ignored).
    ///
    /// # Errors
    /// A message naming the first unknown key and the known ones (serde's wording).
    pub fn check_keys<'a>(given: impl IntoIterator<Item = &'a str>) -> Result<(), String> {
        check_keys(given, &Self::known_keys())
    }

    /// Fills the omitted flags from `--config FILE`.
    ///
    /// # Errors
    /// [`SimError::ConfigFile`] if the file cannot be read, is not TOML, holds a value of the
    /// wrong type or an unknown key.
    pub fn with_config_file(mut self) -> Result<Self, SimError> {
        let Some(path) = self.config.clone() else {
            return Ok(self);
        };
        let failed =
            |what, source: Box<dyn std::error::Error + Send + Sync>| SimError::ConfigFile {
                what,
                path: path.clone(),
                source,
            };
        let text = std::fs::read_to_string(&path).map_err(|e| failed("reading", e.into()))?;
        let file: SimArgs = toml::from_str(&text).map_err(|e| failed("parsing", e.into()))?;
        let keys: toml::Table = toml::from_str(&text).map_err(|e| failed("parsing", e.into()))?;
        Self::check_keys(keys.keys().map(String::as_str))
            .map_err(|e| failed("parsing", e.into()))?;
        merge_opts!(
            self,
            file,
            dataset,
            data,
            target,
            inputs,
            test,
            test_fraction,
            agent_by,
            regions,
            fleet_rule,
            union_k,
            route,
            local_sample,
            local_families,
            suspects,
            agents,
            inducing,
            latent_dim,
            batch,
            site_every,
            topology,
            fusion,
            loss,
            rounds,
            schedule,
            fuse_every,
            vocab,
            seed,
            max_train,
            max_test,
            stream_order,
            relatedness,
            synthetic_dim
        );
        self.agent = self.agent.merged(file.agent);
        self.ros2 = self.ros2.merged(file.ros2);
        self.skip_bad_rows |= file.skip_bad_rows;
        self.no_central |= file.no_central;
        self.no_baselines |= file.no_baselines;
        self.no_fuse_warmup |= file.no_fuse_warmup;
        Ok(self)
    }

    /// Whether the rows carry their own routing key: `--agent-by`, or a recording of every
    /// robot's topics (`--ros2-target /*/…`: one agent per robot).
    pub fn keyed(&self) -> bool {
        self.agent_by.is_some()
            || self
                .ros2
                .ros2_target
                .as_deref()
                .is_some_and(|t| t.trim_start_matches('/').starts_with("*/"))
    }

    /// Whether the stream keeps the data file's order (`--stream-order file`).
    ///
    /// # Errors
    /// [`SimError::Config`] for an unknown order.
    pub fn file_order(&self) -> Result<bool, SimError> {
        match self.stream_order.as_deref().unwrap_or("random") {
            "random" => Ok(false),
            "file" => Ok(true),
            other => Err(SimError::Config(format!(
                "unknown --stream-order '{other}': use random (the default) or file"
            ))),
        }
    }

    /// Refuses the fleet projection's flags without `--projection fleet` (or `both`), where
    /// they would be silently ignored: the agents' ([`AgentArgs::fleet_only`]) and the run's
    /// own (`--site-every`, `--no-fuse-warmup`).
    ///
    /// # Errors
    /// [`SimError::Config`] naming the flags given and the fix.
    pub fn check_fleet_flags(&self) -> Result<(), SimError> {
        let projection = self.agent.projection.as_deref();
        if matches!(projection, Some("fleet" | "both")) {
            return Ok(());
        }
        let given: Vec<String> = (self
            .site_every
            .is_some()
            .then_some("site-every")
            .into_iter())
        .chain(self.agent.fleet_only(None))
        .chain(self.no_fuse_warmup.then_some("no-fuse-warmup"))
        .map(|k| format!("--{k}"))
        .collect();
        if given.is_empty() {
            return Ok(());
        }
        Err(SimError::Config(format!(
            "{} {} to the fleet projection only, and this run is {}: add --projection fleet \
             (or --projection both to compare the modes), or drop {}",
            given.join(", "),
            if given.len() == 1 { "applies" } else { "apply" },
            projection.unwrap_or("per-agent"),
            if given.len() == 1 { "it" } else { "them" }
        )))
    }
}

/// Resolves the options into a simulator configuration, for a stream of `n_batches` batches
/// routed into `groups` groups (`--agent-by`: one agent per group unless `--agents`), with
/// the `--vocab` file's vocabulary (loaded by the caller: the file format is not this crate's).
///
/// # Errors
/// [`SimError::Config`] naming the bad option and what to use instead.
pub fn sim_config(
    a: &SimArgs,
    n_batches: usize,
    groups: Option<usize>,
    vocab: Option<Arc<Vocabulary>>,
) -> Result<SimConfig, SimError> {
    let topology: TopologyKind = a
        .topology
        .as_deref()
        .unwrap_or("random-tree")
        .parse()
        .map_err(SimError::Config)?;
    let fusion: FusionChoice = a
        .fusion
        .as_deref()
        .unwrap_or("auto")
        .parse()
        .map_err(SimError::Config)?;
    if a.site_every == Some(0) {
        return Err(SimError::Config(
            "--site-every 0: the sites need at least 1 batch between two fusions".into(),
        ));
    }
    let agents = a
        .agents
        .unwrap_or_else(|| groups.filter(|_| a.keyed()).unwrap_or(10));
    // A fleet of one is the central learner: its default damping is the central's.
    let agent = AgentArgs {
        site_damping: a
            .agent
            .site_damping
            .or((agents == 1).then_some(SimConfig::default().central_damping)),
        ..a.agent.clone()
    }
    .validate(Driver::Simulate)?;
    Ok(SimConfig {
        agents,
        inducing: a.inducing.unwrap_or(50),
        d_latent: a.latent_dim,
        mode: agent.config.mode,
        projection: agent.config.projection,
        topology,
        fusion,
        loss: a.loss.unwrap_or(0.0),
        rounds: a.rounds,
        schedule: a
            .schedule
            .as_deref()
            .unwrap_or("auto")
            .parse()
            .map_err(SimError::Config)?,
        fuse_every: a.fuse_every.unwrap_or((n_batches / 10).max(1)),
        shuffle: !a.file_order()?,
        seed: a.seed.unwrap_or(0),
        vocab,
        central: !a.no_central,
        baselines: !a.no_baselines,
        learn: agent.config.learn,
        site_every: a.site_every,
        fuse_groups: if agent.fuse_within {
            FuseGroups::Within
        } else {
            FuseGroups::Across
        },
        fuse_warmup: !a.no_fuse_warmup,
        fleet_rule: fleet_rule(a.fleet_rule.as_deref())?,
        union: union_rules(a.union_k.as_deref())?,
        route: match a.route {
            Some(0) => None,
            Some(k) => Some(k),
            None => Some(crate::config::DEFAULT_ROUTE),
        },
        pool: PoolOptions {
            sample: local_sample(a.local_sample.as_deref())?,
            families: local_families(a.local_families.as_deref())?,
            ..PoolOptions::default()
        },
        local: agent.config.local,
        site: agent.config.site,
        influence_cap: agent.config.influence_cap,
        row_rate: agent.config.row_rate,
        likelihood: agent.config.likelihood,
        suspects: a
            .suspects
            .as_deref()
            .map_or(Ok(Policy::default()), Policy::from_name)
            .map_err(SimError::Config)?,
        ..SimConfig::default()
    })
}

/// The fleet rule named `name`: `None` for `auto` or no name (chosen on held-out rows,
/// [`SimConfig::fleet_rule`]).
///
/// # Errors
/// [`SimError::Config`] for an unknown name, listing the known ones.
fn fleet_rule(name: Option<&str>) -> Result<Option<FleetRule>, SimError> {
    let Some(name) = name.filter(|n| *n != "auto") else {
        return Ok(None);
    };
    FleetRule::from_name(name).map(Some).ok_or_else(|| {
        SimError::Config(format!(
            "unknown --fleet-rule '{name}': use auto, {}",
            crate::fleet::RULES
                .iter()
                .map(|r| r.name())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })
}

/// The pooled fit's sample named `name` (`None`: [`PoolSample::default`]).
///
/// # Errors
/// [`SimError::Config`] for an unknown name, listing the known ones.
fn local_sample(name: Option<&str>) -> Result<PoolSample, SimError> {
    let Some(name) = name else {
        return Ok(PoolSample::default());
    };
    PoolSample::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = PoolSample::ALL.iter().map(|s| s.name()).collect();
        SimError::Config(format!(
            "unknown --local-sample '{name}': use {}",
            known.join(", ")
        ))
    })
}

/// The residual kernel families of `--local-families` (`None`: [`PoolOptions::default`]'s,
/// the squared exponential alone), in the order given, each once.
///
/// # Errors
/// [`SimError::Config`] for an unknown name (listing the known ones) or an empty list.
fn local_families(names: Option<&[String]>) -> Result<Vec<ResidualFamily>, SimError> {
    Ok(coolgp_config::local_families(names, Driver::Simulate)?)
}

/// The union rules of `--union-k` (ascending, each k once; none without the flag).
///
/// # Errors
/// [`SimError::Config`] for k = 0.
fn union_rules(ks: Option<&[usize]>) -> Result<Vec<UnionRule>, SimError> {
    let mut rules = ks
        .unwrap_or_default()
        .iter()
        .map(|&k| {
            UnionRule::new(k).ok_or_else(|| {
                SimError::Config("--union-k 0: the union needs at least 1 agent".into())
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.sort_unstable();
    rules.dedup();
    Ok(rules)
}

/// Refuses a configuration whose agents need more memory than `machine` bytes (on `rows`
/// training rows of `d` inputs): one m × m matrix per agent, the importance caches, the site
/// windows, the local memories' factors ([`coolgp_config::check_memory`]; agent i's memory
/// holds min(B, n_i) of the rows). The caller reads the machine's memory
/// ([`coolgp_config::machine_memory`]).
///
/// # Errors
/// [`SimError::Config`] naming the option and the memory it would need.
pub fn check_memory(cfg: &SimConfig, d: usize, rows: usize, machine: u64) -> Result<(), SimError> {
    let m = cfg.vocab.as_ref().map_or(cfg.inducing, |v| v.m());
    let window = cfg.site.window_points;
    let sizes = Sizes::of(cfg.agents, m, cfg.mode, cfg.projection, window, Some(d))
        .with_local_memory(cfg.local.capacity)
        .with_rows(rows);
    Ok(coolgp_config::check_memory(
        &sizes,
        machine,
        Driver::Simulate,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_lists_are_every_option() {
        let value = serde_json::to_value(SimArgs::default()).expect("serializable");
        let mut keys: Vec<&str> = value
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let mut known = SimArgs::known_keys();
        keys.sort_unstable();
        known.sort_unstable();
        assert_eq!(keys, known);
        let e = SimArgs::check_keys(["agents", "agnts"]).expect_err("unknown");
        assert!(
            e.starts_with("unknown field `agnts`, expected one of `dataset`"),
            "{e}"
        );
    }

    #[test]
    fn a_config_file_fills_the_omitted_flags_and_refuses_unknown_keys() {
        let dir = std::env::temp_dir().join(format!("coolgp-sim-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let path = dir.join("run.toml");
        std::fs::write(&path, "agents = 4\nsite-window = 40\nno-learn = true\n").expect("write");
        let flags = SimArgs {
            agents: Some(2),
            config: Some(path.clone()),
            ..SimArgs::default()
        };
        let a = flags.clone().with_config_file().expect("valid");
        assert_eq!(
            (a.agents, a.agent.site_window, a.agent.no_learn),
            (Some(2), Some(40), true)
        );
        std::fs::write(&path, "agents = 4\nsite-windw = 40\n").expect("write");
        let e = flags.with_config_file().expect_err("unknown key");
        let text = format!(
            "{e}: {}",
            std::error::Error::source(&e).map_or(String::new(), ToString::to_string)
        );
        assert!(
            text.starts_with("parsing config ") && text.contains("unknown field `site-windw`"),
            "{text}"
        );
    }

    #[test]
    fn sizes_beyond_the_machine_are_refused_before_the_run() {
        let args = SimArgs {
            inducing: Some(100_000),
            agents: Some(12),
            ..SimArgs::default()
        };
        let cfg = sim_config(&args, 100, None, None).expect("valid flags");
        let e = check_memory(&cfg, 2, 1_000, 23 << 30).expect_err("too large");
        assert_eq!(
            e.to_string(),
            "--inducing 100000 needs 960 GB for one m × m matrix per agent (12 agents × m² × 8 \
             bytes); this machine has 23 GiB"
        );
        let fits = sim_config(&SimArgs::default(), 100, None, None).expect("valid");
        assert!(check_memory(&fits, 2, 1_000, 23 << 30).is_ok());
    }
}
