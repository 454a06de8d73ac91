//! The agent's local memory and residual GP (issue 19; the math: docs/LOCAL.md).
//!
//! Each agent keeps up to B of its own raw rows ([`memory`]), an exact GP on their residuals
//! against the global fused model with its own kernel ([`kernel`]), and the incremental
//! Cholesky factor of `A = K_r(B, B) + σ_rn² I` ([`factor`]). Its answer at x* is the global
//! model's plus a local correction ([`LocalAnswer`], [`answer`]):
//!
//! ```text
//! mean(x*) = μ_g(x*) + k_r(x*, B) A⁻¹ (y_B − μ_g(B))
//! ```
//!
//! A querier combines several agents' answers with a [`FleetRule`] ([`combine`]), or, holding
//! their rows, answers with the exact GP on the union of the most informative agents' rows
//! ([`UnionRule`], [`union`]). With
//! `capacity = 0` ([`LocalConfig::default`]) the memory is off and the agent is today's, bit
//! for bit.

pub mod answer;
mod cache;
pub mod calibrate;
pub mod combine;
pub mod composite;
pub mod consensus;
pub mod coverage;
pub mod factor;
pub mod family;
pub mod fit;
mod glue;
pub mod groups;
pub mod kdtree;
pub mod kernel;
mod loo;
pub mod memory;
mod model;
pub mod pool;
pub mod select;
pub mod snapshot;
pub mod sum;
#[cfg(test)]
mod tests;
pub mod union;

pub use answer::LocalAnswer;
pub use combine::{combine, FleetRule};
pub use coverage::{route, CoverBox, Coverage};
pub use family::ResidualFamily;
pub use kernel::ResidualKernel;
pub use loo::HeldOutRows;
pub use model::LocalModel;
pub use pool::{FitSample, PoolOptions, PoolSample};
pub use snapshot::LocalSnapshot;
pub use union::{UnionRows, UnionRule};

/// The agent's local memory and residual GP (issue 19). `capacity = 0`: off, today's agent
/// bit for bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalConfig {
    /// Rows kept, B (0 = off).
    pub capacity: usize,
    /// Which rows are kept.
    pub policy: MemoryPolicy,
    /// The residual kernel.
    pub kernel: ResidualKind,
    /// Who fits the learned residual kernel: each agent on its own memory, or the fleet once
    /// on a pooled sample of every agent's memory ([`pool`]).
    pub fit: LocalFit,
}

impl Default for LocalConfig {
    fn default() -> Self {
        Self {
            capacity: 0,
            policy: MemoryPolicy::Recent,
            kernel: ResidualKind::Learned,
            fit: LocalFit::Agent,
        }
    }
}

impl LocalConfig {
    /// True when the memory is on (`capacity > 0`).
    pub fn is_on(&self) -> bool {
        self.capacity > 0
    }

    /// The settings that take effect: an off memory has no policy, kernel or fit, so they are
    /// set to [`LocalConfig::default`]'s (two off memories compare equal whatever they were
    /// given).
    pub fn in_effect(&self) -> Self {
        match self.is_on() {
            true => *self,
            false => Self::default(),
        }
    }
}

/// Which of the agent's rows the memory keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryPolicy {
    /// The newest B rows.
    Recent,
    /// A uniform sample of the whole stream (Algorithm R, seeded by the agent's seed).
    Reservoir,
    /// Rows spread over the input space: when full, a new row evicts one point of the closest
    /// pair.
    Spread,
}

impl MemoryPolicy {
    /// Every policy, in the order of [`MemoryPolicy::name`]'s list.
    pub const ALL: [Self; 3] = [Self::Recent, Self::Reservoir, Self::Spread];

    /// The command-line name (`recent`, `reservoir`, `spread`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Recent => "recent",
            Self::Reservoir => "reservoir",
            Self::Spread => "spread",
        }
    }

    /// The policy of a name ([`MemoryPolicy::name`]), `None` for another string.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// The kernel of the residual GP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResidualKind {
    /// An ARD kernel on the raw inputs with its own scale, lengthscales and noise, learned
    /// by marginal likelihood on the memory's residuals: the squared exponential, or the
    /// Matérn 3/2 or 5/2 family or the sum (a per-agent offset, a short-range and a smooth
    /// part) the fleet's fit chooses ([`ResidualFamily`]).
    Learned,
    /// The global kernel's residual `K − Q` at the mean projection (its σ_s, σ_n).
    GlobalResidual,
}

impl ResidualKind {
    /// Every kind, in the order of [`ResidualKind::name`]'s list.
    pub const ALL: [Self; 2] = [Self::Learned, Self::GlobalResidual];

    /// The command-line name (`learned`, `global`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Learned => "learned",
            Self::GlobalResidual => "global",
        }
    }

    /// The kind of a name ([`ResidualKind::name`]), `None` for another string.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// Who fits the learned residual kernel (docs/LOCAL.md §9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LocalFit {
    /// Each agent on its own memory, on the schedule of [`LocalModel::fit_due`]; where the
    /// driver can (the simulator, Python, nodes), after each fusion every agent takes the
    /// fleet's consensus of those fits, the elementwise median
    /// ([`consensus::median_kernel`], [`crate::Agent::adopt_local_kernel`]), and refits
    /// from it. No row leaves an agent.
    Agent,
    /// The fleet, once per fusion, on a pooled sample of every agent's memory
    /// ([`pool::fit_pooled`]); every agent then takes the same parameters
    /// ([`crate::Agent::set_local_kernel_params`]) and never refits on its own. Needs a
    /// driver that can pool rows (the simulator, Python's `FleetRegressor`).
    Fleet,
}

impl LocalFit {
    /// Every setting, in the order of [`LocalFit::name`]'s list.
    pub const ALL: [Self; 2] = [Self::Agent, Self::Fleet];

    /// The command-line name (`agent`, `fleet`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Fleet => "fleet",
        }
    }

    /// The setting of a name ([`LocalFit::name`]), `None` for another string.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }
}
