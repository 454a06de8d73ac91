//! Keyword settings of `coolgp.Agent` → [`AgentConfig`]. Mode and projection names are parsed
//! by the command line's own parsers, so they are the flags' names (`--mode`, `--projection`)
//! and new names added there are accepted here too.

use coolgp::{AgentConfig, FusionRule};
use coolgp_cli::args::SimArgs;

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
    let flags = SimArgs {
        mode: Some(kw.mode.to_string()),
        samples: kw.samples,
        normalization: kw.normalization.map(str::to_string),
        projection: Some(kw.projection.to_string()),
        ..SimArgs::default()
    };
    if kw.projection_group.is_some() && kw.projection != "fleet" {
        return Err("projection_group needs projection='fleet' (groups share q(W) sites)".into());
    }
    if kw.projection_group == Some("") {
        return Err("projection_group must not be empty".into());
    }
    if kw.site != coolgp::learn::SiteOptions::default() && kw.projection != "fleet" {
        return Err("site settings need projection='fleet' (they tune its site update)".into());
    }
    let site =
        coolgp::learn::SiteConfig::from_options(kw.site).map_err(|e| format!("site: {e}"))?;
    let mode = flags.update_mode().map_err(|e| format!("mode: {e}"))?;
    let projection = flags.projection_mode().map_err(|_| {
        format!(
            "unknown projection '{}': use 'per-agent', 'fleet' or 'shared' (or, to compare, \
             'shared-plain-proxy' or 'shared-product-proxy')",
            kw.projection
        )
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
        mode,
        projection,
        fusion,
        learn: kw.learn,
        seed: kw.seed,
        group: kw.projection_group.map(coolgp::learn::group_id),
        site,
        ..AgentConfig::default()
    })
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
