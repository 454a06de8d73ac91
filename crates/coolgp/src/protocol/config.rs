//! An agent's settings: the fusion rule (spec §7), the projection mode (spec §13, §14), the
//! online mode, the likelihood and the optimizer, and which q(u) a caller asks for.

use crate::error::{Error, Result};
use crate::learn::{AdamConfig, GroupId, Likelihood, SiteConfig, UpdateMode};
use crate::local::LocalConfig;

/// How an agent combines its neighbours' knowledge (spec §7).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FusionRule {
    /// Message passing, exact on trees (never use it on a graph with cycles).
    Tree,
    /// Running-sum push-sum for loopy or lossy graphs whose links are fixed once fusion has
    /// started ([`crate::Agent::set_neighbors`] refuses a later change). `agents` is the fleet size s
    /// (estimate `T0 + s·x/ω`); with `leader` weights use `agents = 1.0`.
    PushSum {
        /// Scale of the estimate (the agent count s).
        agents: f64,
        /// Initial weight ω: 1 everywhere, or 1 at one leader and 0 elsewhere.
        weight: f64,
    },
}

/// Whether q(W) is the agent's own or learned fleet-wide (spec §13).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProjectionMode {
    /// The paper: each agent learns its own q(W) (needed when domains or d differ).
    PerAgent,
    /// One fleet-wide q(W) for one phenomenon in one input space: the KL is weighted by
    /// `N_own/N_fleet` in local steps, and θ and the Adam moments are averaged with weights
    /// `N_own` at each fusion ([`crate::Agent::adopt_fleet_projection`]). Tree fusion only.
    Shared,
    /// Spec §13's proxy 1, for comparison: local steps as in `PerAgent` (KL weighted as if
    /// the agent were alone), and at each fusion the plain average of θ and of the Adam moments
    /// over the agents that have data. Tree fusion only.
    SharedPlainProxy,
    /// Spec §13's proxy 2, for comparison: local steps as in `PerAgent`, and at each fusion
    /// q(W) becomes the product `Π_i q_i(W)` of the agents' projections (natural parameters
    /// summed: it counts the prior once per agent and is overconfident); σ_s, σ_n and the Adam
    /// moments plainly averaged. Tree fusion only.
    SharedProductProxy,
    /// Spec §14: one fleet-wide q(W), σ_s, σ_n as the prior plus a sum of per-agent
    /// natural-parameter sites, fused by the same message passing as q(u) and adopted whenever
    /// the fused sums change. q(u)'s excess travels in unit scale (σ_s = σ_n = 1) and is scaled
    /// by the fleet's σ_s, σ_n, so everything the agent predicts with is a function of the
    /// fused sums alone. Frozen or exact mode; tree fusion or push-sum (the sites are then a
    /// part of the push-sum mass, [`crate::fuse::pushsum`]).
    Fleet,
}

impl ProjectionMode {
    /// True for the §13 modes whose fleet-wide q(W) is adopted at each fusion
    /// ([`crate::Agent::adopt_fleet_projection`]); the fleet mode adopts continuously instead.
    pub fn is_shared(self) -> bool {
        !matches!(self, Self::PerAgent | Self::Fleet)
    }

    /// The mode of a command-line name ([`ProjectionMode::name`]), `None` for another string.
    pub fn from_name(name: &str) -> Option<Self> {
        [
            Self::PerAgent,
            Self::Shared,
            Self::SharedPlainProxy,
            Self::SharedProductProxy,
            Self::Fleet,
        ]
        .into_iter()
        .find(|m| m.name() == name)
    }

    /// The command-line name (`per-agent`, `shared`, `shared-plain-proxy`,
    /// `shared-product-proxy`, `fleet`).
    pub fn name(self) -> &'static str {
        match self {
            Self::PerAgent => "per-agent",
            Self::Shared => "shared",
            Self::SharedPlainProxy => "shared-plain-proxy",
            Self::SharedProductProxy => "shared-product-proxy",
            Self::Fleet => "fleet",
        }
    }
}

/// Per-agent settings.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentConfig {
    /// Online update mode (default frozen).
    pub mode: UpdateMode,
    /// Projection mode (default per-agent).
    pub projection: ProjectionMode,
    /// Fusion rule (default tree).
    pub fusion: FusionRule,
    /// Optimizer (spec §6 defaults).
    pub adam: AdamConfig,
    /// Learn θ online (false freezes q(W), σ_s, σ_n at their initial values).
    pub learn: bool,
    /// Seed of the agent's own randomness (importance samples).
    pub seed: u64,
    /// Site update of the fleet projection mode (spec §14; unused in the other modes).
    pub site: SiteConfig,
    /// Projection group of the fleet projection mode ([`crate::learn::group_id`] of its
    /// name): the agent learns q(W), σ_s, σ_n with the agents of its group only, while q(u)
    /// is fused with everyone it exchanges messages with. Its own excess is then in its
    /// group's scales (groups have their own σ_s, σ_n), re-scaled whenever they change.
    /// `None`: the whole fleet is one group, and q(u) travels in unit scale. Every agent of
    /// a fleet has a group or none has (messages that mix them are rejected).
    pub group: Option<GroupId>,
    /// The local memory and residual GP (issue 19; default off, capacity 0).
    pub local: LocalConfig,
    /// Bounded influence (issue 29): a tree message whose precision per claimed row exceeds
    /// this multiple of the rest's is scaled down to it ([`crate::members::bound`]); `None`
    /// accepts any plausible message (spec §9 only).
    pub influence_cap: Option<f64>,
    /// Bounded influence (issue 29): a tree message may claim at most this many rows per
    /// round more than the last message accepted from its sender, by this agent's own round
    /// clock; above it, its claimed rows and its excess are scaled down to the bound
    /// ([`crate::members::bound::rate_factor`]). `None`: no limit.
    pub row_rate: Option<f64>,
    /// How a block's rows enter q(u) and `L_D` (issue 29 item 4, docs/ROBUST.md): Gaussian
    /// (default) or robust (each row tempered by its weight against the predictive before
    /// the block, in every online mode; the exact mode's blocks and the fleet projection's
    /// site window keep each row's weight with the row).
    pub likelihood: Likelihood,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            mode: UpdateMode::Frozen,
            projection: ProjectionMode::PerAgent,
            fusion: FusionRule::Tree,
            adam: AdamConfig::default(),
            learn: true,
            seed: 0,
            site: SiteConfig::default(),
            group: None,
            local: LocalConfig::default(),
            influence_cap: None,
            row_rate: None,
            likelihood: Likelihood::Gaussian,
        }
    }
}

impl AgentConfig {
    /// Refuses a robust likelihood with a threshold that is not finite and > 0. Every update
    /// mode keeps each row's weight from its arrival: the frozen and importance modes fold it
    /// into their sums, the exact mode and the fleet projection's site window keep it with the
    /// row.
    pub(crate) fn check_likelihood(&self) -> Result<()> {
        self.likelihood.validate().map_err(Error::InvalidConfig)
    }
}

/// Which q(u) to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// The agent's own `T_i = T0 + E_i` (pre-fusion).
    Own,
    /// The fused `T_g,i` (post-fusion).
    Fused,
}
