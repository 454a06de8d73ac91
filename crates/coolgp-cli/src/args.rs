//! Flags of `coolgp simulate` (also readable from a TOML file with `--config`; flags win).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use coolgp_sim::{FusionChoice, SimConfig, TopologyKind};
use serde::Deserialize;

/// Every run flag. All optional so that `--config FILE` can fill what the command line omits.
#[derive(Args, Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SimArgs {
    /// Built-in dataset: synthetic (2 phenomena, 6-d), airline (NYC flights 2013), wind (Irish
    /// stations), air (German PM10 stations). Ignored with --data.
    #[arg(long)]
    pub dataset: Option<String>,
    /// A CSV file (header required; .csv.gz works) to stream instead of a built-in dataset.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Target column of --data.
    #[arg(long)]
    pub target: Option<String>,
    /// Input columns of --data, comma-separated (default: every other numeric column).
    #[arg(long, value_delimiter = ',')]
    pub inputs: Option<Vec<String>>,
    /// A separate test CSV (same columns) instead of --test-fraction.
    #[arg(long)]
    pub test: Option<PathBuf>,
    /// Fraction of the rows held out for testing (default 0.1).
    #[arg(long, allow_negative_numbers = true)]
    pub test_fraction: Option<f64>,
    /// Route rows to agents by this column (e.g. a station id) instead of at random.
    #[arg(long)]
    pub agent_by: Option<String>,
    /// Skip malformed rows (counted and reported) instead of stopping at the first.
    #[arg(long)]
    #[serde(default)]
    pub skip_bad_rows: bool,
    /// Number of agents (default 10; with --agent-by, one per key).
    #[arg(long)]
    pub agents: Option<usize>,
    /// Inducing inputs m (default 50).
    #[arg(long)]
    pub inducing: Option<usize>,
    /// Dimension d' of the standardized domain (default: the input dimension).
    #[arg(long)]
    pub latent_dim: Option<usize>,
    /// Points per batch (default 20; the synthetic dataset uses its own 40).
    #[arg(long)]
    pub batch: Option<usize>,
    /// Online update: frozen (default), importance (the paper's Eq. 3.7), exact (keeps all data).
    #[arg(long)]
    pub mode: Option<String>,
    /// Importance samples k for --mode importance (default 20).
    #[arg(long)]
    pub samples: Option<usize>,
    /// Importance weights: unnormalized (the paper) or self-normalized.
    #[arg(long)]
    pub normalization: Option<String>,
    /// per-agent (default, the paper); fleet (spec §14: one fleet-wide q(W), σ_s, σ_n as the
    /// prior plus a sum of per-agent natural-parameter sites, fused by the same message
    /// passing as q(u)); shared (federated averaging of θ weighted by points); both (simulate
    /// only: per-agent, shared and fleet side by side, dDTC/dPITC computed once); spec §13's
    /// proxies for comparison: shared-plain-proxy, shared-product-proxy.
    #[arg(long)]
    pub projection: Option<String>,
    /// Fleet projection only: batches between two fusions of the sites (tiny next to q(u))
    /// (default: every 1% of the stream or every round of blocks — one per agent — whichever
    /// is sooner; at least 1). Under push-sum the sites ride with q(u), so q(u) then fuses
    /// as often.
    #[arg(long, allow_negative_numbers = true, value_name = "BATCHES")]
    pub site_every: Option<usize>,
    /// Projection groups (spec §14 with groups): agents whose rows share a value of COLUMN
    /// observe one phenomenon and learn one q(W), σ_s, σ_n together in the fleet projection
    /// mode, while q(u) is fused across every group. Rows are routed by COLUMN (agent i takes
    /// value i mod #values), or with --agent-by COLUMN one agent per value. The built-in
    /// synthetic dataset's groups are its phenomena (default there); `none`: one group.
    #[arg(long, value_name = "COLUMN|none")]
    pub projection_group: Option<String>,
    /// With projection groups: across (default) fuses q(u) over one graph of the whole
    /// fleet; within builds one graph per group, so q(u) is fused only inside each group.
    #[arg(long, value_name = "across|within")]
    pub fuse_groups: Option<String>,
    /// Fleet projection only: damping ρ ∈ (0, 1] of the agents' site steps (default 0.3; keep
    /// 1 − (1−ρ)^k ≲ 0.5 for k blocks per agent between site fusions).
    #[arg(long, allow_negative_numbers = true)]
    pub site_damping: Option<f64>,
    /// Fleet projection only: ρ_f ∈ [0, 1), the damping per block of one learner with the
    /// fleet's data (default 0.01, the central learner's; 0: off). A site step's rate is at
    /// least 1 − (1 − ρ_f)^(blocks the fleet's fused points grew by since the agent's previous
    /// step), so an agent with few blocks in a long stream keeps no stale targets.
    #[arg(long, allow_negative_numbers = true)]
    pub site_fleet_damping: Option<f64>,
    /// Fleet projection only: each site step's target is the data term over the agent's
    /// newest blocks holding at least POINTS points, re-evaluated under the current q(W) and
    /// q(u) (default 80, at most 100000; 0: the newest block alone, spec §14 as written).
    #[arg(long, allow_negative_numbers = true, value_name = "POINTS")]
    pub site_window: Option<usize>,
    /// Fleet projection only: N0, the scale of the shared initial q(W)'s pseudo-site, whose
    /// weight fades as exp(−N/N0) with the fleet's N data points (default 2000).
    #[arg(long, allow_negative_numbers = true)]
    pub site_prior_points: Option<f64>,
    /// Fleet projection only: pseudo-points of the initial σ_s = 1, σ_n = 0.5 (a fixed prior on
    /// the scales, counted once; default 100000).
    #[arg(long, allow_negative_numbers = true)]
    pub scale_prior_points: Option<f64>,
    /// Fleet projection only: what a site remembers. recent (default): the newest window's
    /// term scaled to the agent's points and damped, which assumes a randomly ordered stream;
    /// stream: the sum of every block's term, the window's re-evaluated and older blocks'
    /// frozen, for time-ordered streams (--stream-order file, live sensors).
    #[arg(long, value_name = "recent|stream")]
    pub site_memory: Option<String>,
    /// path, star, random-tree (default), mst, ring, grid, complete, geometric.
    #[arg(long)]
    pub topology: Option<String>,
    /// auto (default: tree on trees, push-sum otherwise), tree, push-sum, spanning-tree.
    #[arg(long)]
    pub fusion: Option<String>,
    /// Probability that one transmission is lost (default 0).
    #[arg(long, allow_negative_numbers = true)]
    pub loss: Option<f64>,
    /// Communication rounds per fusion (default: the diameter for tree fusion; for push-sum,
    /// until every agent's fused estimate changes by less than 1e-9 relative in a round, at
    /// most 20,000 rounds, reported as `rounds` in summary.json; implies --schedule rounds).
    #[arg(long)]
    pub rounds: Option<usize>,
    /// When tree messages are sent: rounds (the paper: every agent to every neighbour each
    /// round, `diameter` rounds), two-pass (each message once, leaves up then root down:
    /// 2(n−1) messages per fusion, the same fused models) or auto (default: two-pass for
    /// loss-free tree fusion, rounds otherwise).
    #[arg(long)]
    pub schedule: Option<String>,
    /// Batches between fusions (default: 10% of the stream).
    #[arg(long)]
    pub fuse_every: Option<usize>,
    /// A vocabulary file from `coolgp vocab --save` (default: the deterministic design).
    #[arg(long)]
    pub vocab: Option<PathBuf>,
    /// Seed of everything random (default 0).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Synthetic only: input dimension d of each phenomenon (default 6; d' = d).
    #[arg(long)]
    pub synthetic_dim: Option<usize>,
    /// Synthetic only: relatedness ρ ∈ [0, 1] of the phenomena's projections (default 0.9).
    #[arg(long, allow_negative_numbers = true)]
    pub relatedness: Option<f64>,
    /// Use at most this many training rows (after the split).
    #[arg(long)]
    pub max_train: Option<usize>,
    /// Use at most this many test rows (default 10000).
    #[arg(long)]
    pub max_test: Option<usize>,
    /// Order of the stream: random (default; the paper's protocol: the batches in random
    /// order, rows of a key in time order inside each batch) or file: no shuffling, the rows
    /// in the data file's order; with --agent-by, the k-th batch of every key before the
    /// (k+1)-th, so a time-sorted file gives each agent its sensor's stream in time order
    /// and the fleet one clock (what networked nodes fed from live sensors see).
    #[arg(long, value_name = "random|file")]
    pub stream_order: Option<String>,
    /// Skip the central learner.
    #[arg(long)]
    #[serde(default)]
    pub no_central: bool,
    /// Skip dDTC and dPITC.
    #[arg(long)]
    #[serde(default)]
    pub no_baselines: bool,
    /// Do not learn q(W), σ_s, σ_n (keep the shared initial values).
    #[arg(long)]
    #[serde(default)]
    pub no_learn: bool,
    /// Fleet projection under the tree rule: no warm-up q(u) fusions. By default q(u) also
    /// fuses before its first regular fusion each time the stream has doubled since the first
    /// site fusion (1%, 2%, 4%, 8% of the stream at the default schedule), so the early site
    /// steps are taken against a fleet q(u) rather than each agent's own few points.
    #[arg(long)]
    #[serde(default)]
    pub no_fuse_warmup: bool,
    /// Read flags from a TOML file (keys are the flag names); flags given here override it.
    #[arg(long)]
    #[serde(skip)]
    pub config: Option<PathBuf>,
}

macro_rules! merge_opts {
    ($dst:ident, $src:ident, $($f:ident),*) => { $( if $dst.$f.is_none() { $dst.$f = $src.$f.clone(); } )* };
}

impl SimArgs {
    /// Fills the omitted flags from `--config FILE`.
    pub fn with_config_file(mut self) -> Result<Self> {
        let Some(path) = self.config.clone() else {
            return Ok(self);
        };
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading config {}", path.display()))?;
        let file: SimArgs =
            toml::from_str(&text).with_context(|| format!("parsing config {}", path.display()))?;
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
            agents,
            inducing,
            latent_dim,
            batch,
            mode,
            samples,
            normalization,
            projection,
            site_every,
            projection_group,
            fuse_groups,
            site_damping,
            site_fleet_damping,
            site_window,
            site_prior_points,
            scale_prior_points,
            site_memory,
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
        self.skip_bad_rows |= file.skip_bad_rows;
        self.no_central |= file.no_central;
        self.no_baselines |= file.no_baselines;
        self.no_learn |= file.no_learn;
        self.no_fuse_warmup |= file.no_fuse_warmup;
        Ok(self)
    }

    /// Whether the stream keeps the data file's order (`--stream-order file`).
    pub fn file_order(&self) -> Result<bool> {
        match self.stream_order.as_deref().unwrap_or("random") {
            "random" => Ok(false),
            "file" => Ok(true),
            other => bail!("unknown --stream-order '{other}': use random (the default) or file"),
        }
    }

    /// Refuses the fleet projection's flags without `--projection fleet` (or `both`), where
    /// they would be silently ignored.
    pub fn check_fleet_flags(&self) -> Result<()> {
        if matches!(self.projection.as_deref(), Some("fleet" | "both")) {
            return Ok(());
        }
        let given: Vec<&str> = [
            ("--site-every", self.site_every.is_some()),
            ("--site-damping", self.site_damping.is_some()),
            ("--site-fleet-damping", self.site_fleet_damping.is_some()),
            ("--site-window", self.site_window.is_some()),
            ("--site-prior-points", self.site_prior_points.is_some()),
            ("--scale-prior-points", self.scale_prior_points.is_some()),
            ("--site-memory", self.site_memory.is_some()),
            ("--projection-group", self.projection_group.is_some()),
            ("--fuse-groups", self.fuse_groups.is_some()),
            ("--no-fuse-warmup", self.no_fuse_warmup),
        ]
        .into_iter()
        .filter_map(|(flag, set)| set.then_some(flag))
        .collect();
        if given.is_empty() {
            return Ok(());
        }
        bail!(
            "{} {} to the fleet projection only, and this run is {}: add --projection fleet \
             (or --projection both to compare the modes), or drop {}",
            given.join(", "),
            if given.len() == 1 { "applies" } else { "apply" },
            self.projection.as_deref().unwrap_or("per-agent"),
            if given.len() == 1 { "it" } else { "them" }
        )
    }

    /// The update mode.
    pub fn update_mode(&self) -> Result<coolgp::UpdateMode> {
        coolgp::UpdateMode::parse(
            self.mode.as_deref(),
            self.samples,
            self.normalization.as_deref(),
        )
        .map_err(anyhow::Error::msg)
    }

    /// The projection mode.
    pub fn projection_mode(&self) -> Result<coolgp::ProjectionMode> {
        let name = self.projection.as_deref().unwrap_or("per-agent");
        match coolgp::ProjectionMode::from_name(name) {
            Some(m) => Ok(m),
            None => bail!(
                "unknown --projection '{name}': use per-agent, fleet or shared (or, to compare, spec §13's shared-plain-proxy or shared-product-proxy)"
            ),
        }
    }
}

/// Resolves flags into a simulator configuration.
pub fn sim_config(a: &SimArgs, n_batches: usize, groups: Option<usize>) -> Result<SimConfig> {
    let topology: TopologyKind = a
        .topology
        .as_deref()
        .unwrap_or("random-tree")
        .parse()
        .map_err(anyhow::Error::msg)?;
    let fusion: FusionChoice = a
        .fusion
        .as_deref()
        .unwrap_or("auto")
        .parse()
        .map_err(anyhow::Error::msg)?;
    let vocab = match &a.vocab {
        Some(p) => Some(std::sync::Arc::new(crate::vocab_file::load(p)?)),
        None => None,
    };
    if a.site_every == Some(0) {
        bail!("--site-every 0: the sites need at least 1 batch between two fusions");
    }
    let agents = a
        .agents
        .unwrap_or_else(|| groups.filter(|_| a.agent_by.is_some()).unwrap_or(10));
    Ok(SimConfig {
        agents,
        inducing: a.inducing.unwrap_or(50),
        d_latent: a.latent_dim,
        mode: a.update_mode()?,
        projection: a.projection_mode()?,
        topology,
        fusion,
        loss: a.loss.unwrap_or(0.0),
        rounds: a.rounds,
        schedule: a
            .schedule
            .as_deref()
            .unwrap_or("auto")
            .parse()
            .map_err(anyhow::Error::msg)?,
        fuse_every: a.fuse_every.unwrap_or((n_batches / 10).max(1)),
        shuffle: !a.file_order()?,
        seed: a.seed.unwrap_or(0),
        vocab,
        central: !a.no_central,
        baselines: !a.no_baselines,
        learn: !a.no_learn,
        site_every: a.site_every,
        fuse_groups: a
            .fuse_groups
            .as_deref()
            .unwrap_or("across")
            .parse()
            .map_err(anyhow::Error::msg)?,
        // A fleet of one is the central learner: its default damping is the central's.
        fuse_warmup: !a.no_fuse_warmup,
        site: site_config(coolgp::learn::SiteOptions {
            damping: a
                .site_damping
                .or((agents == 1).then_some(SimConfig::default().central_damping)),
            fleet_damping: a.site_fleet_damping,
            window_points: a.site_window,
            prior_points: a.site_prior_points,
            scale_prior_points: a.scale_prior_points,
            memory: a
                .site_memory
                .as_deref()
                .map(coolgp::learn::SiteMemory::from_name)
                .transpose()
                .map_err(anyhow::Error::msg)?,
        })?,
        ..SimConfig::default()
    })
}

/// The fleet projection's site update from the flags (defaults: [`coolgp::learn::SiteConfig::default`]).
pub fn site_config(o: coolgp::learn::SiteOptions) -> Result<coolgp::learn::SiteConfig> {
    coolgp::learn::SiteConfig::from_options(o).map_err(anyhow::Error::msg)
}
