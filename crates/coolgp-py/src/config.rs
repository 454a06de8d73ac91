//! Keyword settings of `coolgp.Agent` → [`AgentConfig`]. The keywords fill the options that
//! `coolgp simulate` and `coolgp node` share ([`AgentArgs`]) and are validated by the same
//! code ([`AgentArgs::validate`]), so the names are the flags' (`--mode`, `--projection`) and
//! new names added there are accepted here too.

use coolgp::{AgentConfig, FusionRule};
use coolgp_config::{AgentArgs, ConfigError, Driver, Sizes};

/// The keyword settings of an agent, as given.
pub struct AgentKw<'a> {
    /// `frozen` | `importance` | `exact`.
    pub mode: &'a str,
    /// Importance samples k.
    pub samples: Option<usize>,
    /// `unnormalized` | `self-normalized`.
    pub normalization: Option<&'a str>,
    /// `per-agent` | `shared` | `shared-plain-proxy` | `shared-product-proxy`.
    pub projection: &'a str,
    /// `tree` | `push-sum`.
    pub fusion: &'a str,
    /// Fleet size s (push-sum).
    pub fleet_size: Option<usize>,
    /// Learn θ online.
    pub learn: bool,
    /// The agent's own seed.
    pub seed: u64,
    /// Projection group name (fleet projection only; `None`: no groups).
    pub projection_group: Option<&'a str>,
    /// Site-update settings (fleet projection only; `None` fields take the defaults).
    pub site: coolgp::learn::SiteOptions,
    /// The local memory (`local_memory=`, `local_policy=`, `local_kernel=`).
    pub local: LocalKw<'a>,
    /// `gaussian` | `robust` (`None`: gaussian; docs/ROBUST.md).
    pub likelihood: Option<&'a str>,
    /// The robust likelihood's threshold c (`None`: 3).
    pub robust_c: Option<f64>,
}

/// The local memory's keywords (issue 19): the node's `--local-memory`, `--local-policy`,
/// `--local-kernel`, simulate's `--local-fit` (`None`: the defaults, memory off).
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalKw<'a> {
    /// Rows kept, B (0 or `None`: off).
    pub memory: Option<usize>,
    /// `recent` | `reservoir` | `spread`.
    pub policy: Option<&'a str>,
    /// `learned` | `global`.
    pub kernel: Option<&'a str>,
    /// `agent` | `fleet` (`FleetRegressor` only: a lone agent has no fleet to pool with).
    pub fit: Option<&'a str>,
}

/// The keys of `Agent(site={...})` (the node's `--site-*` flags).
pub const SITE_KEYS: &str =
    "damping, fleet_damping, window, prior_points, scale_prior_points, memory";

/// Reads `site={...}` into [`coolgp::learn::SiteOptions`]: `(key, value)` pairs, numbers as
/// f64 (`window` a non-negative integer).
///
/// # Errors
/// A message naming an unknown key or a value of the wrong kind.
pub fn site_options(
    pairs: impl IntoIterator<Item = (String, f64)>,
) -> Result<coolgp::learn::SiteOptions, String> {
    let mut o = coolgp::learn::SiteOptions::default();
    for (k, v) in pairs {
        match k.as_str() {
            "damping" => o.damping = Some(v),
            "fleet_damping" => o.fleet_damping = Some(v),
            "prior_points" => o.prior_points = Some(v),
            "scale_prior_points" => o.scale_prior_points = Some(v),
            "window" => {
                if !(v >= 0.0 && v.fract() == 0.0) {
                    return Err(format!("site: window must be a whole number >= 0, got {v}"));
                }
                // `as` saturates: a huge window reaches the range check ("at most …").
                o.window_points = Some(v as usize);
            }
            other => return Err(format!("site: unknown key '{other}' (use {SITE_KEYS})")),
        }
    }
    Ok(o)
}

/// Resolves the keywords into an [`AgentConfig`].
///
/// # Errors
/// A message naming the bad keyword and the accepted values.
pub fn agent_config(kw: &AgentKw<'_>) -> Result<AgentConfig, String> {
    let args = AgentArgs {
        mode: Some(kw.mode.to_string()),
        samples: kw.samples,
        normalization: kw.normalization.map(str::to_string),
        projection: Some(kw.projection.to_string()),
        projection_group: kw.projection_group.map(str::to_string),
        fuse_groups: None,
        site_damping: kw.site.damping,
        site_fleet_damping: kw.site.fleet_damping,
        site_window: kw.site.window_points,
        site_prior_points: kw.site.prior_points,
        scale_prior_points: kw.site.scale_prior_points,
        site_memory: kw.site.memory.map(|m| m.name().to_string()),
        local_memory: kw.local.memory,
        local_policy: kw.local.policy.map(str::to_string),
        local_kernel: kw.local.kernel.map(str::to_string),
        local_fit: kw.local.fit.map(str::to_string),
        influence_cap: None,
        row_rate: None,
        likelihood: kw.likelihood.map(str::to_string),
        robust_c: kw.robust_c,
        no_learn: !kw.learn,
    };
    let valid = args.validate(Driver::Python).map_err(|e| match e {
        ConfigError::Mode(m) => format!("mode: {m}"),
        ConfigError::Site(m) => format!("site: {m}"),
        other => other.to_string(),
    })?;
    let fusion = match kw.fusion {
        "tree" => FusionRule::Tree,
        "push-sum" | "pushsum" => match kw.fleet_size {
            Some(s) if s > 0 => FusionRule::PushSum {
                agents: s as f64,
                weight: 1.0,
            },
            _ => {
                return Err(
                    "fusion='push-sum' needs fleet_size=N > 0 (the number of agents)".into(),
                )
            }
        },
        other => {
            return Err(format!(
                "unknown fusion '{other}': use 'tree' or 'push-sum'"
            ))
        }
    };
    Ok(AgentConfig {
        fusion,
        seed: kw.seed,
        ..valid.config
    })
}

/// Refuses `agents` agents at `m` inducing inputs when their m × m matrices alone need more
/// memory than this machine has (`Vocabulary(inducing=...)`, `FleetRegressor(inducing=...)`).
///
/// # Errors
/// A message naming the keyword and the memory it would need.
pub fn check_inducing(agents: usize, m: usize) -> Result<(), String> {
    let Some(machine) = coolgp_config::machine_memory() else {
        return Ok(());
    };
    let sizes = Sizes {
        agents,
        inducing: m,
        ..Sizes::default()
    };
    coolgp_config::check_memory(&sizes, machine, Driver::Python).map_err(|e| e.to_string())
}

/// Refuses an agent whose `config` needs more memory than this machine has, at `m` inducing
/// inputs on rows of `d` inputs ([`coolgp_config::check_memory`]: importance caches, site
/// window, local memory); the memory is read here, at the edge.
///
/// # Errors
/// A message naming the keyword and the memory it would need.
pub fn check_memory(config: &AgentConfig, m: usize, d: usize) -> Result<(), String> {
    let Some(machine) = coolgp_config::machine_memory() else {
        return Ok(());
    };
    let window = config.site.window_points;
    let sizes = Sizes::of(1, m, config.mode, config.projection, window, Some(d))
        .with_local_memory(config.local.capacity);
    coolgp_config::check_memory(&sizes, machine, Driver::Python).map_err(|e| e.to_string())
}

/// The command-line names of a configuration's update mode and fusion rule (the projection
/// mode's name is kept as given, so that modes added later need no change here).
pub fn describe(c: &AgentConfig) -> (String, String) {
    let mode = match c.mode {
        coolgp::UpdateMode::Importance { samples, .. } => format!("importance(k={samples})"),
        m => m.name().to_string(),
    };
    let fusion = match c.fusion {
        FusionRule::Tree => "tree".to_string(),
        FusionRule::PushSum { agents, .. } => format!("push-sum(s={agents})"),
    };
    (mode, fusion)
}
