//! Settings of a simulated run: the communication graph, the fusion rule and schedule, and
//! everything else a run needs besides its data.

use std::str::FromStr;
use std::sync::Arc;

use coolgp::learn::{AdamConfig, SiteConfig};
use coolgp::local::{FleetRule, LocalConfig, PoolOptions, UnionRule};
use coolgp::{ProjectionMode, Topology, UpdateMode, Vocabulary};
use serde::Serialize;

/// The communication graph (`--topology`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TopologyKind {
    /// A path.
    Path,
    /// A star centred on agent 0.
    Star,
    /// A uniformly random recursive tree.
    RandomTree,
    /// Minimum spanning tree of random points (geometric MST).
    Mst,
    /// A ring (has a cycle).
    Ring,
    /// A near-square grid (cycles).
    Grid,
    /// The complete graph.
    Complete,
    /// A connected random geometric graph (cycles).
    Geometric,
}

impl FromStr for TopologyKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "path" => Self::Path,
            "star" => Self::Star,
            "random-tree" | "tree" => Self::RandomTree,
            "mst" => Self::Mst,
            "ring" => Self::Ring,
            "grid" => Self::Grid,
            "complete" => Self::Complete,
            "geometric" | "rgg" => Self::Geometric,
            _ => {
                return Err(format!(
                    "unknown topology '{s}': use path, star, random-tree, mst, ring, grid, complete or geometric"
                ))
            }
        })
    }
}

impl TopologyKind {
    /// The command-line name (`path`, `star`, `random-tree`, …), as [`FromStr`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Path => "path",
            Self::Star => "star",
            Self::RandomTree => "random-tree",
            Self::Mst => "mst",
            Self::Ring => "ring",
            Self::Grid => "grid",
            Self::Complete => "complete",
            Self::Geometric => "geometric",
        }
    }

    /// Whether every graph of this kind is a tree (path, star, random tree, geometric MST):
    /// tree fusion is exact on it whatever the number of agents.
    pub fn is_tree(self) -> bool {
        matches!(self, Self::Path | Self::Star | Self::RandomTree | Self::Mst)
    }

    /// Builds the graph for `n` agents.
    pub fn build(self, n: usize, seed: u64) -> Topology {
        match self {
            Self::Path => Topology::path(n),
            Self::Star => Topology::star(n),
            Self::RandomTree => Topology::random_tree(n, seed),
            Self::Mst => Topology::geometric_mst(n, seed),
            Self::Ring => Topology::ring(n),
            Self::Grid => Topology::grid(n),
            Self::Complete => Topology::complete(n),
            Self::Geometric => {
                Topology::random_geometric(n, (2.0 / n.max(1) as f64).sqrt().min(1.0), seed)
            }
        }
    }
}

/// How the fleet fuses (`--fusion`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FusionChoice {
    /// Tree message passing on trees, push-sum on graphs with cycles.
    Auto,
    /// Tree message passing (refused on graphs with cycles: it double counts).
    Tree,
    /// Running-sum push-sum.
    PushSum,
    /// Tree message passing on the BFS spanning tree of the graph.
    SpanningTree,
}

impl FromStr for FusionChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "auto" => Self::Auto,
            "tree" => Self::Tree,
            "push-sum" | "pushsum" => Self::PushSum,
            "spanning-tree" => Self::SpanningTree,
            _ => {
                return Err(format!(
                    "unknown fusion '{s}': use auto, tree, push-sum or spanning-tree"
                ))
            }
        })
    }
}

/// When tree messages are sent (`--schedule`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// Two-pass on loss-free tree fusion with the default rounds, rounds otherwise.
    Auto,
    /// The paper's synchronous rounds: every agent sends to every neighbour each round.
    Rounds,
    /// Tree fusion only: each message once, when its sender has heard from its other
    /// neighbours (leaves up, then root down): 2(n−1) messages per fusion, the same fused
    /// views as `diameter` rounds. A lost message is not re-sent.
    TwoPass,
}

impl FromStr for Schedule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "auto" => Self::Auto,
            "rounds" => Self::Rounds,
            "two-pass" => Self::TwoPass,
            _ => {
                return Err(format!(
                    "unknown schedule '{s}': use auto, rounds or two-pass"
                ))
            }
        })
    }
}

/// Which agents fuse q(u) with each other when the workload has projection groups
/// (`--fuse-groups`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FuseGroups {
    /// One graph over the whole fleet: q(u) fused across every group (the paper's
    /// cross-domain setting), q(W) within each group (fleet projection mode).
    #[default]
    Across,
    /// One graph per group, none between them: q(u) and q(W) fused only inside each group.
    Within,
}

impl FromStr for FuseGroups {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "across" => Ok(Self::Across),
            "within" => Ok(Self::Within),
            _ => Err(format!("unknown --fuse-groups '{s}': use across or within")),
        }
    }
}

/// Settings of a simulated run.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Number of agents.
    pub agents: usize,
    /// Inducing inputs m (ignored when `vocab` is given).
    pub inducing: usize,
    /// Standardized dimension d' (default: the input dimension).
    pub d_latent: Option<usize>,
    /// Online update mode.
    pub mode: UpdateMode,
    /// Projection mode.
    pub projection: ProjectionMode,
    /// Communication graph.
    pub topology: TopologyKind,
    /// Fusion rule.
    pub fusion: FusionChoice,
    /// Probability that one transmission is lost.
    pub loss: f64,
    /// Rounds per fusion (default: enough for the topology; push-sum: until every agent's
    /// fused estimate changes by less than 1e-9 relative in a round, at most 20,000 rounds).
    pub rounds: Option<usize>,
    /// When tree messages are sent.
    pub schedule: Schedule,
    /// Batches between fusions (0: fuse once, at the end).
    pub fuse_every: usize,
    /// Seed of everything random in the run.
    pub seed: u64,
    /// A vocabulary to use instead of the default design.
    pub vocab: Option<Arc<Vocabulary>>,
    /// Run the central learner.
    pub central: bool,
    /// Run dDTC and dPITC.
    pub baselines: bool,
    /// Test points per agent used for the learning curves (the last point uses all); with the
    /// default, every test point of a capped test set, so the curves end where the final
    /// evaluation does.
    pub curve_points: usize,
    /// Agents evaluated for the learning curves (evenly spaced ids; the last point uses all).
    pub curve_agents: usize,
    /// Learn θ online.
    pub learn: bool,
    /// Optimizer.
    pub adam: AdamConfig,
    /// Shuffle the stream (the paper's protocol); false keeps the workload's order.
    pub shuffle: bool,
    /// Fleet projection mode: batches between two site fusions (`None`: every 1% of the
    /// stream or every round of blocks — `agents` batches — whichever is sooner). Under
    /// push-sum, whose rounds carry q(u) and the sites together, q(u) fuses this often too.
    pub site_every: Option<usize>,
    /// Fleet projection mode under the tree rule: warm-up q(u) fusions before the first
    /// regular one, each time the stream has doubled since the first site fusion (at the
    /// default schedules 1%, 2%, 4% and 8% of the stream: four more q(u) fusions). Early site
    /// steps are then taken against a fleet q(u), not each agent's own few points.
    pub fuse_warmup: bool,
    /// Fleet projection mode: the agents' site update (spec §14).
    pub site: SiteConfig,
    /// Fleet projection mode: damping ρ of the central learner's site steps (spec §14: about
    /// 0.01 for one learner that sees the whole stream).
    pub central_damping: f64,
    /// With projection groups in the workload: fuse q(u) across them or only within each.
    pub fuse_groups: FuseGroups,
    /// How the fleet-wide query combines the agents' answers (`--fleet-rule`); `None` (the
    /// default, `auto`): the rule with the smallest error on the calibration's held-out rows
    /// ([`crate::fleet::Calibration::best`]; rBCM on the air stations, BCM on wind,
    /// docs/LOCAL.md §12).
    pub fleet_rule: Option<FleetRule>,
    /// The union rules also scored by the fleet-wide query (`--union-k`; none by default):
    /// an exact residual GP on the pooled rows of the k most informative agents
    /// ([`coolgp::local::union`]).
    pub union: Vec<UnionRule>,
    /// Routing of the fleet-wide query and its calibration (`--route K`, issue 31): each row
    /// is answered by the `K` agents whose coverage is nearest it
    /// ([`coolgp::local::coverage`]); `None` (`--route 0`): every agent answers every row.
    pub route: Option<usize>,
    /// The agents' local memory and residual GP (`--local-memory`; the central learner keeps
    /// none).
    pub local: LocalConfig,
    /// The fleet-wide fit of the residual kernel (`--local-fit fleet`): pooled rows, Adam
    /// rounds and starts.
    pub pool: PoolOptions,
    /// The member check and what it does with suspects (`--suspects`; default `contain`,
    /// issue 29, docs/MEMBERS.md).
    pub suspects: coolgp::members::Policy,
    /// Bounded influence (`--influence-cap`; `None`: off, the default here; the command
    /// line's default is 4): [`coolgp::AgentConfig::influence_cap`].
    pub influence_cap: Option<f64>,
    /// Bounded influence (`--row-rate`; `None`: off, the default):
    /// [`coolgp::AgentConfig::row_rate`].
    pub row_rate: Option<f64>,
    /// How the agents' rows enter their models (`--likelihood`, `--robust-c`; default
    /// Gaussian): [`coolgp::AgentConfig::likelihood`], the central reference's too.
    pub likelihood: coolgp::learn::Likelihood,
}

/// The default `--route K` of the fleet-wide query (issue 31; chosen by measurement,
/// EXPERIMENTS.md "Routing").
pub const DEFAULT_ROUTE: usize = 16;

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            agents: 10,
            inducing: 50,
            d_latent: None,
            mode: UpdateMode::Frozen,
            projection: ProjectionMode::PerAgent,
            topology: TopologyKind::RandomTree,
            fusion: FusionChoice::Auto,
            loss: 0.0,
            rounds: None,
            schedule: Schedule::Auto,
            fuse_every: 0,
            seed: 0,
            vocab: None,
            central: true,
            baselines: true,
            curve_points: 10_000,
            curve_agents: 50,
            learn: true,
            adam: AdamConfig::default(),
            shuffle: true,
            site_every: None,
            fuse_warmup: true,
            site: SiteConfig::default(),
            central_damping: 0.01,
            fuse_groups: FuseGroups::Across,
            fleet_rule: None,
            union: Vec::new(),
            route: Some(DEFAULT_ROUTE),
            local: LocalConfig::default(),
            pool: PoolOptions::default(),
            suspects: coolgp::members::Policy::default(),
            influence_cap: None,
            row_rate: None,
            likelihood: coolgp::learn::Likelihood::Gaussian,
        }
    }
}
