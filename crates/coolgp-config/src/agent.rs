//! [`AgentArgs`]: the options of one agent, as flags, TOML keys and Python keywords, and their
//! validation into a [`coolgp::AgentConfig`].

use coolgp::learn::{group_id, Likelihood, SiteConfig, SiteMemory, SiteOptions};
use coolgp::local::LocalFit;
use coolgp::{AgentConfig, LocalConfig, MemoryPolicy, ProjectionMode, ResidualKind, UpdateMode};
use serde::{Deserialize, Serialize};

use crate::{ConfigError, Driver};

/// The options of one agent that `coolgp simulate`, `coolgp node` and Python share. All
/// optional, so that a configuration file can fill what the command line omits
/// ([`AgentArgs::merged`]); kebab-case keys in files (`site-window = 40`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(rename_all = "kebab-case")]
pub struct AgentArgs {
    /// Online update: frozen (default), importance (the paper's Eq. 3.7), exact (keeps all data).
    #[cfg_attr(feature = "clap", arg(long))]
    pub mode: Option<String>,
    /// Importance samples k for --mode importance (default 20).
    #[cfg_attr(feature = "clap", arg(long))]
    pub samples: Option<usize>,
    /// Importance weights: unnormalized (default, the paper) or self-normalized.
    #[cfg_attr(feature = "clap", arg(long))]
    pub normalization: Option<String>,
    /// per-agent (default, the paper: each agent learns its own q(W)); fleet (spec §14: one
    /// fleet-wide q(W), σ_s, σ_n as the prior plus a sum of per-agent natural-parameter sites,
    /// fused by the same message passing as q(u); agents that hold the same sums predict
    /// identically); simulate only: shared (federated averaging of θ weighted by points), both
    /// (per-agent, shared and fleet side by side, dDTC/dPITC computed once) and spec §13's
    /// proxies for comparison, shared-plain-proxy and shared-product-proxy.
    #[cfg_attr(feature = "clap", arg(long))]
    pub projection: Option<String>,
    /// Fleet projection only: projection groups (spec §14 with groups). Agents that observe
    /// one phenomenon learn one q(W), σ_s, σ_n together, while q(u) is fused across every
    /// group. simulate: the groups are the values of COLUMN; rows are routed by COLUMN (agent
    /// i takes value i mod #values), or with --agent-by COLUMN one agent per value; the
    /// built-in synthetic dataset's groups are its phenomena (default there); `none`: one
    /// group. node: this node's group NAME; either every node of a fleet names a group or none
    /// does (default: none, the whole fleet is one group).
    #[cfg_attr(feature = "clap", arg(long, value_name = "COLUMN|NAME|none"))]
    pub projection_group: Option<String>,
    /// With projection groups: across (default) fuses q(u) across the groups; within only
    /// inside each group (simulate: one graph per group; node: refuses messages that carry
    /// another group's sums, so give such a node only neighbours of its own group).
    #[cfg_attr(feature = "clap", arg(long, value_name = "across|within"))]
    pub fuse_groups: Option<String>,
    /// Fleet projection only: damping ρ ∈ (0, 1] of the agents' site steps (default 0.3; keep
    /// 1 − (1−ρ)^k ≲ 0.5 for k blocks per agent between site fusions).
    #[cfg_attr(feature = "clap", arg(long, allow_negative_numbers = true))]
    pub site_damping: Option<f64>,
    /// Fleet projection only: ρ_f ∈ [0, 1), the damping per block of one learner with the
    /// fleet's data (default 0.01, the central learner's; 0: off). A site step's rate is at
    /// least 1 − (1 − ρ_f)^(blocks the fleet's fused points grew by since the agent's previous
    /// step), so an agent with few blocks in a long stream keeps no stale targets.
    #[cfg_attr(feature = "clap", arg(long, allow_negative_numbers = true))]
    pub site_fleet_damping: Option<f64>,
    /// Fleet projection only: each site step's target is the data term over the agent's
    /// newest blocks holding at least POINTS points, re-evaluated under the current q(W) and
    /// q(u) (kept in memory and in a node's checkpoint) (default 320 under --site-memory
    /// stream, 80 under recent; at most 100000; 0: the newest block alone, spec §14 as written).
    #[cfg_attr(
        feature = "clap",
        arg(long, allow_negative_numbers = true, value_name = "POINTS")
    )]
    pub site_window: Option<usize>,
    /// Fleet projection only: N0, the scale of the shared initial q(W)'s pseudo-site, whose
    /// weight fades as exp(−N/N0) with the fleet's N data points (default 2000).
    #[cfg_attr(feature = "clap", arg(long, allow_negative_numbers = true))]
    pub site_prior_points: Option<f64>,
    /// Fleet projection only: pseudo-points of the initial σ_s = 1, σ_n = 0.5 (a fixed prior on
    /// the scales, counted once; default 100000).
    #[cfg_attr(feature = "clap", arg(long, allow_negative_numbers = true))]
    pub scale_prior_points: Option<f64>,
    /// Fleet projection only: what a site remembers. stream (default): the sum of every
    /// block's term, each taken on arrival, the window's re-evaluated when the fused q(u) has
    /// grown by 5%, older blocks' frozen; right in random and in time order (simulate's
    /// --stream-order file, live sensors) (default window 320 points). recent: the newest
    /// window's term, re-evaluated at every block, scaled to the agent's points and damped,
    /// which assumes a randomly ordered stream (default window 80 points).
    #[cfg_attr(feature = "clap", arg(long, value_name = "stream|recent"))]
    pub site_memory: Option<String>,
    /// Local memory (issue 19): keep up to B of the agent's own rows and answer with the
    /// global model plus an exact GP on their residuals (default 500, chosen by measurement:
    /// EXPERIMENTS.md, issue 19; 0 = off, the agent as without it, bit for bit). The global
    /// fused model is the same either way. Costs min(B, rows seen)² × 8 bytes, the residual
    /// kernel's fits, and O(B²) per row that entered since the last answer (nothing while
    /// learning unqueried).
    #[cfg_attr(feature = "clap", arg(long, value_name = "B"))]
    pub local_memory: Option<usize>,
    /// Which rows the local memory keeps: reservoir (default, a uniform sample of the whole
    /// stream, seeded; the best measured), recent (the newest B) or spread (spread over the
    /// input space: a new row replaces one of the closest pair).
    #[cfg_attr(feature = "clap", arg(long, value_name = "reservoir|recent|spread"))]
    pub local_policy: Option<String>,
    /// The local memory's residual kernel: learned (default, an ARD squared exponential with
    /// its own scale, lengthscales and noise, fitted by marginal likelihood on the memory's
    /// residuals) or global (the global kernel's own residual K − Q at the mean projection).
    #[cfg_attr(feature = "clap", arg(long, value_name = "learned|global"))]
    pub local_kernel: Option<String>,
    /// Who fits the learned residual kernel: fleet (the default: one kernel for the fleet,
    /// fitted on a pooled sample of every agent's memory, about 1,024 raw rows per fit, half to
    /// fit and half to validate: the only fit that can learn how residuals at different agents'
    /// places co-vary; docs/LOCAL.md §9) or
    /// agent (each agent on its own memory, no row leaves it; after each fusion, or on a node
    /// when the fitter's fit would be due, every agent takes the median of the fitted kernels
    /// and refits from it: docs/LOCAL.md §12b). In simulate and Python once
    /// per fusion, every agent taking the result; on a node, the lowest live id fits when the
    /// fused model has grown by a quarter, on samples it asks of every node, and the others
    /// take its kernel: raw rows go over the network, with --tls only to the fleet's members
    /// (signed requests), in an open fleet to whoever asks (docs/NODE.md §13). A fleet that
    /// must not send raw rows runs --local-fit agent.
    #[cfg_attr(feature = "clap", arg(long, value_name = "agent|fleet"))]
    pub local_fit: Option<String>,
    /// Bounded influence (issue 29, docs/MEMBERS.md §6): a neighbour's tree message whose
    /// precision per claimed row exceeds R times the rest of the fleet's is scaled down to it
    /// before it is fused, and counted (a member that sends its sums inflated then adds no
    /// more than R times its claimed rows of typical rows). Off by default (0): honest
    /// members in different regions differ by more than 16× (airline by regions).
    #[cfg_attr(
        feature = "clap",
        arg(long, allow_negative_numbers = true, value_name = "R")
    )]
    pub influence_cap: Option<f64>,
    /// Bounded influence (issue 29, docs/MEMBERS.md §6): a neighbour's tree message may claim
    /// at most N rows per round (of this agent's own clock) more than its last accepted
    /// message; above it, its claimed rows and its sums are scaled down to the bound before
    /// they are fused, and counted. Under tree fusion a message speaks for the sender's whole
    /// side of the edge: set N to what that side can gather in a round (e.g. the fleet's
    /// members times their rows per round). Off by default (0).
    #[cfg_attr(
        feature = "clap",
        arg(long, allow_negative_numbers = true, value_name = "N")
    )]
    pub row_rate: Option<f64>,
    /// How a block's rows enter the model (issue 29, docs/ROBUST.md): gaussian (default) or
    /// robust (each row's likelihood term tempered by w = (1 + r²/c²)^(−1/2), r its
    /// standardized residual against the agent's predictive before the block: gross outliers
    /// barely move the model; the messages keep their size). Every --mode and --projection.
    #[cfg_attr(feature = "clap", arg(long, value_name = "gaussian|robust"))]
    pub likelihood: Option<String>,
    /// The robust likelihood's threshold c on the standardized residual (finite, > 0;
    /// default 3).
    #[cfg_attr(
        feature = "clap",
        arg(long, allow_negative_numbers = true, value_name = "C")
    )]
    pub robust_c: Option<f64>,
    /// Do not learn q(W), σ_s, σ_n (keep the shared initial values).
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(default)]
    pub no_learn: bool,
}

/// The default of `--influence-cap`: off. On the station fleets a cap of 4 never triggered,
/// but on airline by 100 regions honest messages reached 16× the rest's precision per row
/// and a cap of 4 made the fleet query 0.4% worse (docs/MEMBERS.md §6).
pub const DEFAULT_INFLUENCE_CAP: f64 = 0.0;

/// An unknown name of option `key`, in `driver`'s spelling, with the known names.
fn unknown(driver: Driver, key: &str, name: &str, known: &[&str]) -> ConfigError {
    let option = match driver {
        Driver::Python => key.replace('-', "_"),
        _ => format!("--{key}"),
    };
    ConfigError::Invalid(format!(
        "unknown {option} '{name}': use {}",
        known.join(", ")
    ))
}

/// The default of `--local-memory` in every driver: B = 500 rows. On the station sets the fleet
/// query then answers 0.81× (wind) and 0.74× (air) the global fused model's RMSE, and
/// 0.89× on airline's random routing; a larger memory gains more (B = 2,000: 0.64×, 0.79×) at
/// 4× the memory and more CPU (EXPERIMENTS.md, issue 19). `--local-memory 0` turns it off.
pub const DEFAULT_LOCAL_MEMORY: usize = 500;

/// The default of `--local-policy` in every driver: [`MemoryPolicy::Reservoir`], a uniform
/// sample of the agent's whole stream (wind, B = 500: reservoir 4.874, spread 4.893, recent
/// 4.894 at a third of recent's learning time; EXPERIMENTS.md, issue 19).
pub const DEFAULT_LOCAL_POLICY: MemoryPolicy = MemoryPolicy::Reservoir;

/// The default of `--local-fit` for `driver`: [`LocalFit::Fleet`] in every driver (the pooled
/// fit measured better on every station set, EXPERIMENTS.md issue 19; on 12 real wind nodes
/// the fleet query's RMSE 4.490 against 4.975 with per-node fits). On a node it sends raw
/// memory rows to the fitting node (with `--tls` only on a member's signed request,
/// docs/NODE.md §13); `--local-fit agent` is the opt-out.
pub fn default_fit(driver: Driver) -> LocalFit {
    match driver {
        Driver::Simulate | Driver::Python | Driver::Node => LocalFit::Fleet,
    }
}

/// What a fleet-only option tunes (see [`AgentArgs::fleet_only`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tunes {
    /// The site update (`--site-*`, `--scale-prior-points`).
    Site,
    /// The projection groups (`--projection-group`, `--fuse-groups`).
    Groups,
}

/// A fleet-only option: its key, what it tunes, and whether it is given.
type FleetOnly = (&'static str, Tunes, fn(&AgentArgs) -> bool);

/// The options that apply to the fleet projection only, in the order of `--help`, with
/// whether each is given: the one table every driver checks them with.
const FLEET_ONLY: [FleetOnly; 8] = [
    ("site-damping", Tunes::Site, |a| a.site_damping.is_some()),
    ("site-fleet-damping", Tunes::Site, |a| {
        a.site_fleet_damping.is_some()
    }),
    ("site-window", Tunes::Site, |a| a.site_window.is_some()),
    ("site-prior-points", Tunes::Site, |a| {
        a.site_prior_points.is_some()
    }),
    ("scale-prior-points", Tunes::Site, |a| {
        a.scale_prior_points.is_some()
    }),
    ("site-memory", Tunes::Site, |a| a.site_memory.is_some()),
    ("projection-group", Tunes::Groups, |a| {
        a.projection_group.is_some()
    }),
    ("fuse-groups", Tunes::Groups, |a| a.fuse_groups.is_some()),
];

/// The options validated by [`AgentArgs::validate`].
#[derive(Clone, Debug, PartialEq)]
pub struct Validated {
    /// The agent's configuration: mode, projection, learn, site and (node, Python) the
    /// projection group's id; the fusion rule, seed and optimizer are the defaults, for the
    /// driver to set.
    pub config: AgentConfig,
    /// The projection group's name (node, Python; `None` for simulate, whose groups are a
    /// column of the data).
    pub group: Option<String>,
    /// `--fuse-groups within`.
    pub fuse_within: bool,
}

impl AgentArgs {
    /// The keys of a configuration file (the flags' names), in the order of `--help`.
    pub const KEYS: [&'static str; 21] = [
        "mode",
        "samples",
        "normalization",
        "projection",
        "projection-group",
        "fuse-groups",
        "site-damping",
        "site-fleet-damping",
        "site-window",
        "site-prior-points",
        "scale-prior-points",
        "site-memory",
        "local-memory",
        "local-policy",
        "local-kernel",
        "local-fit",
        "influence-cap",
        "row-rate",
        "likelihood",
        "robust-c",
        "no-learn",
    ];

    /// These options over `file`'s: what is given here wins, the file fills the rest (a
    /// switch is on if either turns it on).
    pub fn merged(self, file: AgentArgs) -> AgentArgs {
        AgentArgs {
            mode: self.mode.or(file.mode),
            samples: self.samples.or(file.samples),
            normalization: self.normalization.or(file.normalization),
            projection: self.projection.or(file.projection),
            projection_group: self.projection_group.or(file.projection_group),
            fuse_groups: self.fuse_groups.or(file.fuse_groups),
            site_damping: self.site_damping.or(file.site_damping),
            site_fleet_damping: self.site_fleet_damping.or(file.site_fleet_damping),
            site_window: self.site_window.or(file.site_window),
            site_prior_points: self.site_prior_points.or(file.site_prior_points),
            scale_prior_points: self.scale_prior_points.or(file.scale_prior_points),
            site_memory: self.site_memory.or(file.site_memory),
            local_memory: self.local_memory.or(file.local_memory),
            local_policy: self.local_policy.or(file.local_policy),
            local_kernel: self.local_kernel.or(file.local_kernel),
            local_fit: self.local_fit.or(file.local_fit),
            influence_cap: self.influence_cap.or(file.influence_cap),
            row_rate: self.row_rate.or(file.row_rate),
            likelihood: self.likelihood.or(file.likelihood),
            robust_c: self.robust_c.or(file.robust_c),
            no_learn: self.no_learn || file.no_learn,
        }
    }

    /// The fleet-only options given (keys, `site-window`), in the order of `--help`; only
    /// those that tune `which` when given.
    pub fn fleet_only(&self, which: Option<Tunes>) -> Vec<&'static str> {
        FLEET_ONLY
            .iter()
            .filter(|(_, tunes, given)| which.is_none_or(|w| w == *tunes) && given(self))
            .map(|(key, _, _)| *key)
            .collect()
    }

    /// The update mode (`--mode`, `--samples`, `--normalization`).
    ///
    /// # Errors
    /// [`ConfigError::Mode`] for an unknown name or zero samples.
    pub fn update_mode(&self) -> Result<UpdateMode, ConfigError> {
        UpdateMode::parse(
            self.mode.as_deref(),
            self.samples,
            self.normalization.as_deref(),
        )
        .map_err(ConfigError::Mode)
    }

    /// The projection mode: any for simulate and Python, per-agent or fleet for a node (the
    /// modes that need no fleet-wide agreement on timing, NODE.md §11).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the modes the driver accepts.
    pub fn projection_mode(&self, driver: Driver) -> Result<ProjectionMode, ConfigError> {
        let name = self.projection.as_deref().unwrap_or("per-agent");
        let mode = ProjectionMode::from_name(name);
        let refused = match (driver, mode) {
            (Driver::Node, Some(m @ (ProjectionMode::PerAgent | ProjectionMode::Fleet))) => {
                return Ok(m)
            }
            (Driver::Node, _) => format!("unknown --projection '{name}': use per-agent or fleet"),
            (_, Some(m)) => return Ok(m),
            (Driver::Simulate, None) => format!(
                "unknown --projection '{name}': use per-agent, fleet or shared (or, to compare, \
                 spec §13's shared-plain-proxy or shared-product-proxy)"
            ),
            (Driver::Python, None) => format!(
                "unknown projection '{name}': use 'per-agent', 'fleet' or 'shared' (or, to \
                 compare, 'shared-plain-proxy' or 'shared-product-proxy')"
            ),
        };
        Err(ConfigError::Invalid(refused))
    }

    /// `--influence-cap`: `None` for 0 or when not given ([`DEFAULT_INFLUENCE_CAP`]).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for a negative or non-finite ratio, or one in (0, 1) (which
    /// would scale down honest messages).
    pub fn influence_cap(&self) -> Result<Option<f64>, ConfigError> {
        match self.influence_cap.unwrap_or(DEFAULT_INFLUENCE_CAP) {
            0.0 => Ok(None),
            r if r.is_finite() && r >= 1.0 => Ok(Some(r)),
            r => Err(ConfigError::Invalid(format!(
                "--influence-cap must be 0 (off) or at least 1, got {r}"
            ))),
        }
    }

    /// `--row-rate`: `None` for 0 or when not given.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for a negative or non-finite rate.
    pub fn row_rate(&self) -> Result<Option<f64>, ConfigError> {
        match self.row_rate.unwrap_or(0.0) {
            0.0 => Ok(None),
            r if r.is_finite() && r > 0.0 => Ok(Some(r)),
            r => Err(ConfigError::Invalid(format!(
                "--row-rate must be 0 (off) or a positive number of rows per round, got {r}"
            ))),
        }
    }

    /// `--likelihood`, `--robust-c` (default gaussian; c [`coolgp::learn::DEFAULT_ROBUST_C`]).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for an unknown name (naming the known ones), a threshold
    /// that is not finite and > 0, or a threshold without `robust`.
    pub fn likelihood(&self, driver: Driver) -> Result<Likelihood, ConfigError> {
        if let Some(name) = self.likelihood.as_deref() {
            if !Likelihood::NAMES.contains(&name) {
                return Err(unknown(driver, "likelihood", name, &Likelihood::NAMES));
            }
        }
        Likelihood::parse(self.likelihood.as_deref(), self.robust_c).map_err(|e| {
            ConfigError::Invalid(match driver {
                Driver::Python => e
                    .replace("--robust-c", "robust_c")
                    .replace("--likelihood", "likelihood"),
                _ => e,
            })
        })
    }

    /// The fleet projection's site update (defaults: [`SiteConfig::default`]).
    ///
    /// # Errors
    /// [`ConfigError::Site`] for a value out of range or an unknown `--site-memory`.
    pub fn site_config(&self) -> Result<SiteConfig, ConfigError> {
        let memory = self
            .site_memory
            .as_deref()
            .map(SiteMemory::from_name)
            .transpose()
            .map_err(ConfigError::Site)?;
        SiteConfig::from_options(SiteOptions {
            damping: self.site_damping,
            fleet_damping: self.site_fleet_damping,
            window_points: self.site_window,
            prior_points: self.site_prior_points,
            scale_prior_points: self.scale_prior_points,
            memory,
        })
        .map_err(ConfigError::Site)
    }

    /// The local memory (`--local-memory`, `--local-policy`, `--local-kernel`,
    /// `--local-fit`; defaults: [`DEFAULT_LOCAL_MEMORY`] rows, [`DEFAULT_LOCAL_POLICY`], the
    /// kernel of [`LocalConfig::default`], the fit [`default_fit`]). A policy, kernel or fit
    /// without memory is accepted (and unused).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for an unknown policy, kernel or fit, naming the known ones.
    pub fn local_config(&self, driver: Driver) -> Result<LocalConfig, ConfigError> {
        let mut local = LocalConfig {
            capacity: self.local_memory.unwrap_or(DEFAULT_LOCAL_MEMORY),
            policy: DEFAULT_LOCAL_POLICY,
            fit: default_fit(driver),
            ..LocalConfig::default()
        };
        if let Some(name) = self.local_fit.as_deref() {
            local.fit = LocalFit::from_name(name).ok_or_else(|| {
                let known: Vec<&str> = LocalFit::ALL.iter().map(|p| p.name()).collect();
                unknown(driver, "local-fit", name, &known)
            })?;
        }
        if let Some(name) = self.local_policy.as_deref() {
            local.policy = MemoryPolicy::from_name(name).ok_or_else(|| {
                let known: Vec<&str> = MemoryPolicy::ALL.iter().map(|p| p.name()).collect();
                unknown(driver, "local-policy", name, &known)
            })?;
        }
        if let Some(name) = self.local_kernel.as_deref() {
            local.kernel = ResidualKind::from_name(name).ok_or_else(|| {
                let known: Vec<&str> = ResidualKind::ALL.iter().map(|p| p.name()).collect();
                unknown(driver, "local-kernel", name, &known)
            })?;
        }
        Ok(local)
    }

    /// `--fuse-groups`: whether q(u) is fused only inside each projection group. A node
    /// needs its group for `within`; the simulator checks its groups against the workload.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for an unknown name, or `within` on a node without a group.
    pub fn fuse_within(&self, driver: Driver) -> Result<bool, ConfigError> {
        match self.fuse_groups.as_deref() {
            None | Some("across") => Ok(false),
            Some("within") if driver != Driver::Node || self.projection_group.is_some() => Ok(true),
            Some("within") => Err(ConfigError::Invalid(
                "--fuse-groups within needs --projection-group NAME".into(),
            )),
            Some(other) => Err(ConfigError::Invalid(format!(
                "unknown --fuse-groups '{other}': use across or within"
            ))),
        }
    }

    /// Refuses the fleet-only options outside the fleet projection, where they would be
    /// silently ignored (a node and Python; simulate checks them with its own fleet-only
    /// flags, on the flags as given, since `--projection both` runs every mode).
    fn check_fleet_only(
        &self,
        driver: Driver,
        projection: ProjectionMode,
    ) -> Result<(), ConfigError> {
        if driver == Driver::Simulate || projection == ProjectionMode::Fleet {
            return Ok(());
        }
        let site = self.fleet_only(Some(Tunes::Site));
        let refused = match driver {
            _ if site.is_empty() && self.projection_group.is_none() => return Ok(()),
            Driver::Python if site.is_empty() => {
                "projection_group needs projection='fleet' (groups share q(W) sites)".into()
            }
            Driver::Python => {
                "site settings need projection='fleet' (they tune its site update)".into()
            }
            _ if site.is_empty() => {
                "--projection-group needs --projection fleet (groups share q(W) sites)".into()
            }
            _ => {
                let flags: Vec<String> = site.iter().map(|k| format!("--{k}")).collect();
                format!(
                    "{} tune the fleet projection's site update: add --projection fleet or drop \
                     them",
                    flags.join(", ")
                )
            }
        };
        Err(ConfigError::Invalid(refused))
    }

    /// Validates every option into the agent's configuration: mode, projection, (node,
    /// Python) the fleet-only options outside the fleet projection, the site update, the
    /// projection group and `--fuse-groups`.
    ///
    /// # Errors
    /// The first bad option: [`ConfigError::Mode`], [`ConfigError::Site`] or
    /// [`ConfigError::Invalid`], the message naming the option and what to use instead.
    pub fn validate(&self, driver: Driver) -> Result<Validated, ConfigError> {
        let mode = self.update_mode()?;
        let projection = self.projection_mode(driver)?;
        self.check_fleet_only(driver, projection)?;
        let site = self.site_config()?;
        let group = match driver {
            Driver::Simulate => None,
            _ => self.projection_group.clone(),
        };
        if group.as_deref() == Some("") {
            let name = match driver {
                Driver::Python => "projection_group",
                _ => "--projection-group",
            };
            return Err(ConfigError::Invalid(format!("{name} must not be empty")));
        }
        let fuse_within = self.fuse_within(driver)?;
        let local = self.local_config(driver)?;
        Ok(Validated {
            config: AgentConfig {
                mode,
                projection,
                learn: !self.no_learn,
                site,
                group: group.as_deref().map(group_id),
                local,
                influence_cap: self.influence_cap()?,
                row_rate: self.row_rate()?,
                likelihood: self.likelihood(driver)?,
                ..AgentConfig::default()
            },
            group,
            fuse_within,
        })
    }
}

#[cfg(test)]
#[path = "agent_tests.rs"]
mod tests;
