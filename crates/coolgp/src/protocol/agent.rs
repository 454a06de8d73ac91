//! The sans-IO agent: one state machine that the simulator and the networked node both drive.
//!
//! Call order (no clock, socket, file, thread or OS randomness inside):
//!
//! 1. [`Agent::new`], then [`Agent::set_neighbors`];
//! 2. any interleaving of [`Agent::handle_block`] (own data), [`Agent::handle_message`]
//!    (a peer's message) and [`Agent::handle_tick`] (one communication round);
//! 3. after each call, drain [`Agent::poll_transmit`] (messages to send) and
//!    [`Agent::poll_event`] (things to log or count);
//! 4. [`Agent::predict`] at any time, with the fused or the own q(u).
//!
//! Per block (spec §10, §6 revised): absorb the block under the current q(W), then one Adam
//! step on the per-datum gradient of `c·L_D − KL_W` computed against the latest *fused* q(u),
//! then recompute the own excess `E_i`. The own E_i is always kept apart from what neighbours
//! sent, so re-fusing never double counts (spec §7).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use faer::MatRef;

use crate::error::{ensure_finite, Error, Result};
use crate::fuse::{tree, Mass, PushSum};
use crate::learn::elbo::{block_loglik_grad_with, BlockElbo, BlockPsi};
use crate::learn::{
    Adam, AdamConfig, GroupId, Learner, Site, SiteConfig, SiteMemory, Sites, UpdateMode,
};
use crate::model::predict::predict;
use crate::model::psi::PsiWorkspace;
use crate::model::{
    Excess, NaturalParams, Posterior, Prediction, Projection, ProjectionGrad, Vocabulary,
};
use crate::protocol::event::Event;
use crate::protocol::message::{AgentId, Body, Header, Message, ProjectionShare};

/// Most events kept when the driver does not poll; the oldest are dropped first.
const MAX_EVENTS: usize = 4096;

/// How an agent combines its neighbours' knowledge (spec §7).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FusionRule {
    /// Message passing, exact on trees (never use it on a graph with cycles).
    Tree,
    /// Running-sum push-sum for loopy or lossy graphs whose links are fixed once fusion has
    /// started ([`Agent::set_neighbors`] refuses a later change). `agents` is the fleet size s
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
    /// `N_own` at each fusion ([`Agent::adopt_fleet_projection`]). Tree fusion only.
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
    /// ([`Agent::adopt_fleet_projection`]); the fleet mode adopts continuously instead.
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
        }
    }
}

/// What one neighbour last sent (tree rule).
#[derive(Clone, Debug)]
pub(crate) struct Inbound {
    pub(crate) excess: Arc<Excess>,
    pub(crate) points: f64,
    pub(crate) projection: Option<ProjectionShare>,
    /// Site sums `Σ_{k in the sender's subtree} s_k` per projection group (fleet projection
    /// mode).
    pub(crate) sites: Option<Sites>,
}

/// A tree message's payload: `D_ij`, the points it represents, the projection sums.
pub(crate) type TreeMessage = (Arc<Excess>, f64, Option<ProjectionShare>);

/// Which q(u) to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// The agent's own `T_i = T0 + E_i` (pre-fusion).
    Own,
    /// The fused `T_g,i` (post-fusion).
    Fused,
}

/// One COOL-GP agent.
#[derive(Clone, Debug)]
pub struct Agent {
    pub(crate) id: AgentId,
    pub(crate) vocab: Arc<Vocabulary>,
    pub(crate) config: AgentConfig,
    pub(crate) proj: Projection,
    pub(crate) adam: Adam,
    pub(crate) learner: Learner,
    pub(crate) n_own: usize,
    pub(crate) blocks: u64,
    /// The fleet's points (own group's fused sums, this agent's current count) at the last
    /// site step: the clock of [`SiteConfig::fleet_damping`].
    pub(crate) site_clock: f64,
    /// The newest own blocks a site step's target is taken over (fleet projection mode with
    /// [`SiteConfig::window_points`] > 0; else empty).
    pub(crate) recent: crate::learn::RecentBlocks,
    /// [`SiteMemory::Stream`]: the frozen terms of the blocks that have left the window.
    pub(crate) site_frozen: Site,
    /// [`SiteMemory::Stream`]: the last step's window term and its points (0: none yet).
    pub(crate) window_term: (Site, f64),
    pub(crate) version: u64,
    pub(crate) round: u64,
    pub(crate) neighbors: BTreeSet<AgentId>,
    /// Own excess `E_i`; unit scale (σ_s = σ_n = 1) in fleet projection mode.
    pub(crate) own: Excess,
    /// Own site of the fleet's q(W) (fleet projection mode; else empty).
    pub(crate) site: Site,
    /// The pseudo-site of the shared initial q0(W) (derived from the vocabulary and the site
    /// settings: not in snapshots).
    pub(crate) pseudo: Site,
    pub(crate) inbox: BTreeMap<AgentId, Inbound>,
    pub(crate) pushsum: PushSum,
    pub(crate) last_round: BTreeMap<AgentId, u64>,
    outbox: VecDeque<Message>,
    events: VecDeque<Event>,
    pub(crate) ws: PsiWorkspace,
    /// Tree messages of the last tick, reused while neither E_i nor the inbox changed
    /// (derived state: not in snapshots).
    pub(crate) sent_cache: BTreeMap<AgentId, TreeMessage>,
}

/// Largest ψ̄2 buffer (numbers) kept per thread between blocks: 8 MiB, e.g. n = 100 at m = 100.
const MAX_KEPT_BLOCK_PSI: usize = 1 << 20;

/// Largest ψ̄2 buffer (numbers) of one chunk of a block: 32 MiB (e.g. 419 rows at m = 100);
/// larger blocks are processed in chunks of rows, so memory does not grow with the block.
const MAX_BLOCK_PSI: usize = 1 << 22;

#[cfg(test)]
thread_local! {
    /// Tests set this to force small chunks.
    static ROWS_PER_CHUNK: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Rows of a block per ψ chunk at m inducing inputs.
fn block_rows(m: usize) -> usize {
    #[cfg(test)]
    if let Some(r) = ROWS_PER_CHUNK.with(std::cell::Cell::get) {
        return r;
    }
    (MAX_BLOCK_PSI / (m * m).max(1)).max(1)
}

/// The block `(x [n, d], y [n])` as consecutive chunks of at most `rows` rows.
fn row_chunks<'a>(
    x: MatRef<'a, f64>,
    y: &'a [f64],
    rows: usize,
) -> impl Iterator<Item = (MatRef<'a, f64>, &'a [f64])> + 'a {
    let rows = rows.max(1);
    (0..y.len()).step_by(rows).map(move |start| {
        let len = rows.min(y.len() - start);
        (x.subrows(start, len), &y[start..start + len])
    })
}

thread_local! {
    /// ψ buffers of the block being absorbed (`n·m²` numbers), reused from block to block by
    /// every agent that runs on this thread: a fleet of agents holds one per thread, not one
    /// per agent.
    static BLOCK_PSI: std::cell::RefCell<BlockPsi> = std::cell::RefCell::new(BlockPsi::default());
}

impl Agent {
    /// A new agent of input dimension `d`, starting from the vocabulary's shared initial q(W).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for `d = 0`, zero importance samples, the shared projection
    /// with push-sum, the fleet projection with the importance mode, or bad site settings.
    pub fn new(id: AgentId, vocab: Arc<Vocabulary>, d: usize, config: AgentConfig) -> Result<Self> {
        if d == 0 {
            return Err(Error::InvalidConfig("input dimension d must be > 0".into()));
        }
        if let UpdateMode::Importance { samples: 0, .. } = config.mode {
            return Err(Error::InvalidConfig(
                "importance mode needs at least 1 sample".into(),
            ));
        }
        if config.projection.is_shared() && config.fusion != FusionRule::Tree {
            return Err(Error::InvalidConfig(
                "the shared projection mode needs tree fusion".into(),
            ));
        }
        let fleet = config.projection == ProjectionMode::Fleet;
        if fleet {
            if let UpdateMode::Importance { .. } = config.mode {
                return Err(Error::InvalidConfig(
                    "the fleet projection mode needs the frozen or exact online mode (importance caches are not sums of unit-scale statistics)".into(),
                ));
            }
            config.site.validate().map_err(Error::InvalidConfig)?;
        }
        let proj = vocab.initial_projection(d);
        let site = Site::zeros(if fleet { proj.d() * proj.d_latent() } else { 0 });
        let pseudo = if fleet {
            Site::pseudo(&proj, &config.site)
        } else {
            Site::zeros(0)
        };
        let adam = Adam::new(config.adam.clone(), proj.n_params());
        let learner = Learner::new(&vocab, d, config.mode, config.seed);
        let m = vocab.m();
        let weight = match config.fusion {
            FusionRule::PushSum { weight, .. } => weight,
            FusionRule::Tree => 1.0,
        };
        let mut pushsum = PushSum::new(Excess::zeros(m), weight, 0.0);
        if fleet && config.fusion != FusionRule::Tree {
            pushsum =
                pushsum.with_site(config.group.unwrap_or(crate::learn::UNGROUPED), site.len());
        }
        Ok(Self {
            id,
            config,
            proj,
            adam,
            learner,
            n_own: 0,
            blocks: 0,
            site_clock: 0.0,
            recent: crate::learn::RecentBlocks::default(),
            site_frozen: site.clone(),
            window_term: (site.clone(), 0.0),
            version: 0,
            round: 0,
            neighbors: BTreeSet::new(),
            own: Excess::zeros(m),
            site,
            pseudo,
            inbox: BTreeMap::new(),
            pushsum,
            last_round: BTreeMap::new(),
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            ws: PsiWorkspace::default(),
            sent_cache: BTreeMap::new(),
            vocab,
        })
    }

    /// Sets the neighbours. Under the tree rule the set may change at any time (messages last
    /// received from agents that are no longer neighbours are dropped from the fused view).
    /// Under push-sum it is fixed once mass has been exchanged: see
    /// [`crate::fuse::pushsum::check_neighbor_change`].
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a push-sum agent whose neighbour set would change after
    /// it has sent or received a running total; the agent is then unchanged.
    pub fn set_neighbors(&mut self, ids: impl IntoIterator<Item = AgentId>) -> Result<()> {
        let ids: BTreeSet<AgentId> = ids.into_iter().filter(|&j| j != self.id).collect();
        if let FusionRule::PushSum { .. } = self.config.fusion {
            crate::fuse::pushsum::check_neighbor_change(&self.pushsum, &self.neighbors, &ids)?;
        }
        self.neighbors = ids;
        let keep = &self.neighbors;
        self.inbox.retain(|k, _| keep.contains(k));
        self.sent_cache.clear();
        Ok(())
    }

    /// This agent's id.
    pub fn id(&self) -> AgentId {
        self.id
    }

    /// The shared vocabulary.
    pub fn vocabulary(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// The settings.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The current q(W), σ_s, σ_n.
    pub fn projection(&self) -> &Projection {
        &self.proj
    }

    /// Own data points absorbed.
    pub fn n_own(&self) -> usize {
        self.n_own
    }

    /// Blocks absorbed.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// Rounds ticked.
    pub fn round(&self) -> u64 {
        self.round
    }

    /// Neighbours.
    pub fn neighbors(&self) -> impl Iterator<Item = AgentId> + '_ {
        self.neighbors.iter().copied()
    }

    /// Neighbours from which a message has been accepted.
    pub fn neighbors_heard(&self) -> usize {
        self.last_round
            .keys()
            .filter(|k| self.neighbors.contains(k))
            .count()
    }

    /// The learner's caches (memory accounting, checkpoints).
    pub fn learner(&self) -> &Learner {
        &self.learner
    }

    /// Own data part `E_i` under the current θ.
    pub fn own_excess(&self) -> &Excess {
        &self.own
    }

    /// The fused data part and the data points it represents (in the fleet projection mode,
    /// unit scale: [`Agent::natural_params`] applies the fleet's σ_s, σ_n).
    pub fn fused_excess(&self) -> (Excess, f64) {
        match self.config.fusion {
            FusionRule::Tree => {
                let mut e = self.own.clone();
                let mut pts = self.n_own as f64;
                for ib in self.inbox.values() {
                    e.add_in_place(&ib.excess);
                    pts += ib.points;
                }
                (e, pts)
            }
            FusionRule::PushSum { agents, .. } => self
                .pushsum
                .estimate(agents)
                .unwrap_or_else(|| (self.own.clone(), self.n_own as f64)),
        }
    }

    /// Data points represented in the fused model (exact on trees after convergence).
    pub fn fleet_points(&self) -> f64 {
        match self.config.fusion {
            FusionRule::Tree => {
                self.n_own as f64 + self.inbox.values().map(|i| i.points).sum::<f64>()
            }
            FusionRule::PushSum { agents, .. } => self
                .pushsum
                .estimate(agents)
                .map_or(self.n_own as f64, |(_, p)| p),
        }
    }

    /// q(u) in K-form for a view.
    pub fn natural_params(&self, view: View) -> NaturalParams {
        match view {
            View::Own => self.natural_params_of(&self.own),
            View::Fused => self.natural_params_of(&self.fused_excess().0),
        }
    }

    /// q(u) in K-form of a data part `e` given in this agent's representation (e.g. a sum of
    /// the fleet's own excesses `Σ E_i`, to compare with the fused view): in the fleet
    /// projection mode without groups the unit-scale sums times the fleet's `σ_s²/σ_n²` and
    /// `σ_s/σ_n²` (spec §3); as it is otherwise.
    pub fn natural_params_of(&self, e: &Excess) -> NaturalParams {
        if self.unit_scale_excess() {
            let (ss, sn) = (self.proj.sigma_s(), self.proj.sigma_n());
            NaturalParams::from_excess(&self.vocab, &Excess::from_unit_parts(&e.d1, &e.d2, ss, sn))
        } else {
            NaturalParams::from_excess(&self.vocab, e)
        }
    }

    /// Factored q(u) for a view.
    ///
    /// # Errors
    /// [`Error::NotPositiveDefinite`] if T1 cannot be factored (a corrupted state).
    pub fn posterior(&self, view: View) -> Result<Posterior> {
        self.natural_params(view).posterior(&self.vocab)
    }

    /// `α = T1⁻¹T2` of a view, for predictive means `ψ1(x)α` (cheaper than
    /// [`Agent::posterior`]).
    ///
    /// # Errors
    /// [`Error::NotPositiveDefinite`] if T1 cannot be factored (a corrupted state).
    pub fn mean_weights(&self, view: View) -> Result<Vec<f64>> {
        self.natural_params(view).mean_weights()
    }

    /// Predicts at the rows of `x [n, d]` with the agent's own q(W) and the chosen q(u).
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] or [`Error::NonFinite`] for bad inputs.
    pub fn predict(&self, x: MatRef<'_, f64>, view: View) -> Result<Prediction> {
        self.check_inputs(x, None)?;
        let post = self.posterior(view)?;
        predict(&self.vocab, &self.proj, &post, x)
    }

    fn check_inputs(&self, x: MatRef<'_, f64>, y: Option<&[f64]>) -> Result<()> {
        if x.ncols() != self.proj.d() {
            return Err(Error::DimensionMismatch {
                what: "input columns",
                expected: self.proj.d(),
                found: x.ncols(),
            });
        }
        if let Some(y) = y {
            if y.len() != x.nrows() {
                return Err(Error::DimensionMismatch {
                    what: "targets (one per input row)",
                    expected: x.nrows(),
                    found: y.len(),
                });
            }
            ensure_finite("targets", y)?;
        }
        for j in 0..x.ncols() {
            for i in 0..x.nrows() {
                if !x[(i, j)].is_finite() {
                    return Err(Error::NonFinite {
                        what: "inputs",
                        index: i * x.ncols() + j,
                    });
                }
            }
        }
        crate::model::input_range::check_input_range(&self.proj, x)
    }

    /// Absorbs one block of own data `(x [n, d], y [n])`, takes one optimizer step, and
    /// recomputes the own excess.
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`], [`Error::NonFinite`] or [`Error::OutOfRange`] (inputs
    /// whose ψ statistics would overflow); the agent is then unchanged.
    pub fn handle_block(&mut self, x: MatRef<'_, f64>, y: &[f64]) -> Result<()> {
        self.check_inputs(x, Some(y))?;
        if y.is_empty() {
            return Ok(());
        }
        // ψ of the block under the current q(W), computed once: absorbed (frozen mode) and
        // reused by the gradient step, which runs under the same θ. A block too large for one
        // ψ buffer is processed in chunks of rows (and its ψ recomputed for the gradient).
        // The buffer is taken out of the thread's slot for the call (a nested call would find
        // it empty and allocate its own).
        let rows = block_rows(self.vocab.m());
        let mut bp = BLOCK_PSI.with(|b| std::mem::take(&mut *b.borrow_mut()));
        for (xs, ys) in row_chunks(x, y, rows) {
            bp.recompute(&self.vocab, &self.proj, xs);
            match &mut self.learner {
                Learner::Frozen(stats) => bp.accumulate_into(ys, stats),
                other => other.absorb(&self.vocab, &self.proj, xs, ys, &mut self.ws),
            }
        }
        self.n_own += y.len();
        self.blocks += 1;
        self.version += 1;
        self.refresh_own(y.len() as f64);
        if self.config.learn {
            if self.config.projection == ProjectionMode::Fleet {
                self.site_step(x, y, &mut bp, rows);
            } else {
                self.optimizer_step(x, y, &mut bp, rows);
                self.refresh_own(0.0);
            }
        }
        // Kept for the next block unless it is large (a big block's n·m² would otherwise stay
        // allocated for the thread's lifetime).
        if bp.psi2.capacity() <= MAX_KEPT_BLOCK_PSI {
            BLOCK_PSI.with(|b| *b.borrow_mut() = bp);
        }
        Ok(())
    }

    /// The block's data term `L_D` and its gradient against the fused q(u) (the own q(u) if
    /// the fused one cannot be factored), summed chunk by chunk for blocks of more than `rows`
    /// rows. `bp` holds the ψ of the block's last chunk (all of it for a one-chunk block).
    /// `None` if no q(u) can be factored.
    fn data_term(
        &mut self,
        x: MatRef<'_, f64>,
        y: &[f64],
        bp: &mut BlockPsi,
        rows: usize,
    ) -> Option<BlockElbo> {
        let post = match self.posterior(View::Fused) {
            Ok(p) => p,
            Err(_) => match self.posterior(View::Own) {
                Ok(p) => p,
                Err(_) => {
                    self.push_event(Event::StepSkipped {
                        reason: "posterior",
                    });
                    return None;
                }
            },
        };
        if post.jitter() > 0.0 {
            self.push_event(Event::Jitter {
                what: "T1",
                jitter: post.jitter(),
            });
        }
        if y.len() <= rows {
            return Some(block_loglik_grad_with(
                &self.vocab,
                &self.proj,
                &post,
                x,
                y,
                bp,
            ));
        }
        // L_D and its gradient are sums over points: summed chunk by chunk.
        let mut acc: Option<BlockElbo> = None;
        for (xs, ys) in row_chunks(x, y, rows) {
            bp.recompute(&self.vocab, &self.proj, xs);
            let g = block_loglik_grad_with(&self.vocab, &self.proj, &post, xs, ys, bp);
            match &mut acc {
                None => acc = Some(g),
                Some(a) => a.add_in_place(&g),
            }
        }
        acc
    }

    /// One Adam step on the per-datum gradient `∇L_D/n − w·∇KL_W/N_own` (spec §6), against
    /// the fused q(u). In shared mode the KL weight is `N_own/N_fleet` (spec §13).
    fn optimizer_step(&mut self, x: MatRef<'_, f64>, y: &[f64], bp: &mut BlockPsi, rows: usize) {
        let Some(elbo) = self.data_term(x, y, bp, rows) else {
            return;
        };
        let gl = elbo.grad.to_flat();
        let kl = ProjectionGrad::kl(&self.proj);
        let n = y.len() as f64;
        let kl_den = match self.config.projection {
            ProjectionMode::Shared => self.fleet_points().max(self.n_own as f64),
            _ => self.n_own as f64,
        };
        let gk = kl.to_flat();
        let g: Vec<f64> = gl
            .iter()
            .zip(&gk)
            .map(|(l, k)| l / n - k / kl_den)
            .collect();
        if g.iter().any(|v| !v.is_finite()) {
            return self.push_event(Event::StepSkipped { reason: "gradient" });
        }
        let mut theta = self.proj.to_flat();
        match self.adam.step(&mut theta, &g) {
            Ok(()) => self.proj.set_flat(&theta),
            Err(_) => self.push_event(Event::StepSkipped { reason: "adam" }),
        }
    }

    /// The fleet projection mode's site step (spec §14): the data-term gradient of the window
    /// of newest own blocks ([`SiteConfig::window_points`]; the block alone at 0) under the
    /// fleet q(W) and the fused q(u), turned into a clipped-curvature target, damps the own
    /// site toward it at [`SiteConfig::rate`]; then the fused sums have changed and the agent
    /// adopts them.
    fn site_step(&mut self, x: MatRef<'_, f64>, y: &[f64], bp: &mut BlockPsi, rows: usize) {
        // The target's data: the window of newest own blocks (SiteConfig::window_points), or
        // the block alone.
        let window = self.config.site.window_points;
        let before = self.recent.points();
        let stacked = if window > 0 {
            self.recent.push(x, y, window);
            (self.recent.len() > 1).then(|| self.recent.stacked())
        } else {
            None
        };
        let elbo = match &stacked {
            Some((xs, ys)) => {
                // `bp` holds the newest block's ψ (a one-chunk block, absorbed under the same
                // q(W)): a one-chunk window computes only its older rows.
                if ys.len() <= rows {
                    bp.recompute_keeping_tail(&self.vocab, &self.proj, xs.as_ref(), y.len());
                }
                self.data_term(xs.as_ref(), ys, bp, rows)
            }
            None => self.data_term(x, y, bp, rows),
        };
        let Some(elbo) = elbo else {
            return;
        };
        let n_data = stacked.as_ref().map_or(y.len(), |s| s.1.len()) as f64;
        let memory = self.config.site.memory;
        // Stream memory: the window's own term (c = 1); recent: scaled to the N own points.
        let scale_to = match memory {
            SiteMemory::Recent => self.n_own as f64,
            SiteMemory::Stream => n_data,
        };
        let target = Site::block_target(&self.proj, &elbo, scale_to, n_data);
        if !target.is_valid(self.site.len()) {
            return self.push_event(Event::StepSkipped { reason: "site" });
        }
        let push = matches!(self.config.fusion, FusionRule::PushSum { .. });
        let old = push.then(|| self.site.clone());
        match memory {
            SiteMemory::Recent => {
                // Running mean of the targets for the first 1/ρ blocks, then the damped
                // average, at least as fast as one learner with the fleet's data would forget
                // (SiteConfig::rate).
                let n = y.len() as f64;
                let clock = self.fused_site().points - self.site.points + self.n_own as f64;
                let fleet_blocks = ((clock - self.site_clock) / n).max(1.0);
                self.site_clock = clock;
                let rate = self.config.site.rate(self.blocks, fleet_blocks);
                self.site.damp_toward(&target, rate);
            }
            SiteMemory::Stream => {
                // The blocks that left the window keep their share of its last term, pro rata
                // to their points; the site is those frozen terms plus the window's new term.
                let (last, last_points) = &self.window_term;
                let dropped = if window > 0 {
                    (before + y.len()).saturating_sub(self.recent.points()) as f64
                } else {
                    *last_points
                };
                if dropped > 0.0 && *last_points > 0.0 {
                    self.site_frozen
                        .add_scaled_in_place(last, (dropped / last_points).min(1.0));
                }
                let mut site = self.site_frozen.clone();
                site.add_in_place(&target);
                site.points = self.n_own as f64;
                self.site = site;
                self.window_term = (target, n_data);
            }
        }
        if let Some(old) = old {
            // The change of the own site enters the push-sum mass (conserved), as E_i's does.
            let mut delta = self.site.clone();
            delta.add_scaled_in_place(&old, -1.0);
            self.pushsum.inject_site(self.site_key(), &delta);
        }
        self.adopt_site_view();
    }

    /// `E_i` from the learner's caches under the current θ: unit scale (σ_s = σ_n = 1) in the
    /// fleet projection mode without groups, where the fleet's scales are applied to the fused
    /// sums instead ([`Agent::unit_scale_excess`]).
    pub(crate) fn excess_from_caches(&mut self) -> (Excess, Option<crate::learn::IsDiagnostics>) {
        if self.unit_scale_excess() {
            let unit = self.proj.with_unit_scales();
            self.learner.excess(&self.vocab, &unit, &mut self.ws)
        } else {
            self.learner.excess(&self.vocab, &self.proj, &mut self.ws)
        }
    }

    /// Recomputes `E_i` under the current θ (unit scale in the fleet projection mode); in
    /// push-sum, injects the change into the mass.
    pub(crate) fn refresh_own(&mut self, new_points: f64) {
        let (e, diag) = self.excess_from_caches();
        if let Some(d) = diag {
            self.push_event(Event::ImportanceWeights(d));
        }
        if let FusionRule::PushSum { .. } = self.config.fusion {
            let mut delta = e.clone();
            delta.add_scaled_in_place(&self.own, -1.0);
            self.pushsum.inject(&delta, new_points);
        }
        self.own = e;
        self.sent_cache.clear();
    }

    /// One communication round: queues a message to every neighbour (tree: `D_ij`; push-sum:
    /// the running total after keeping one share, its site part in the message's site).
    pub fn handle_tick(&mut self) {
        self.round += 1;
        match self.config.fusion {
            FusionRule::Tree => {
                let missing: Vec<AgentId> = self
                    .neighbors
                    .iter()
                    .copied()
                    .filter(|j| !self.sent_cache.contains_key(j))
                    .collect();
                for j in missing {
                    let m = self.tree_message(j);
                    self.sent_cache.insert(j, m);
                }
                let out: Vec<_> = self
                    .sent_cache
                    .iter()
                    .map(|(j, (e, p, pr))| (*j, Arc::clone(e), *p, pr.clone()))
                    .collect();
                for (j, excess, points, projection) in out {
                    let msg = Message {
                        header: self.header(j),
                        body: Body::Tree { excess, points },
                        projection,
                        sites: self.site_for(j),
                    };
                    self.outbox.push_back(msg);
                }
            }
            FusionRule::PushSum { .. } => {
                let mut total = self.pushsum.step(self.neighbors.len());
                // The site part of the running total travels in the message's site section.
                let site = total.site.take();
                for &j in &self.neighbors {
                    self.outbox.push_back(Message {
                        header: self.header(j),
                        body: Body::PushSum {
                            total: total.clone(),
                        },
                        projection: None,
                        sites: site.clone(),
                    });
                }
            }
        }
    }

    /// The header of a message sent now to `to`.
    pub(crate) fn header(&self, to: AgentId) -> Header {
        Header {
            fingerprint: self.vocab.fingerprint(),
            sender: self.id,
            receiver: to,
            round: self.round,
            version: self.version,
        }
    }

    /// One message to one neighbour `to` under the tree rule (`D_ij`, as in a round of
    /// [`Agent::handle_tick`]), for event-driven schedules such as the two-pass schedule on a
    /// tree: i sends `D_ij` once it has heard from all its other neighbours, so each edge
    /// carries one message each way per fusion. Returns false (and sends nothing) under
    /// push-sum or when `to` is not a neighbour.
    pub fn handle_tick_to(&mut self, to: AgentId) -> bool {
        if self.config.fusion != FusionRule::Tree || !self.neighbors.contains(&to) {
            return false;
        }
        self.round += 1;
        if !self.sent_cache.contains_key(&to) {
            let m = self.tree_message(to);
            self.sent_cache.insert(to, m);
        }
        if let Some((excess, points, projection)) = self.sent_cache.get(&to) {
            let msg = Message {
                header: self.header(to),
                body: Body::Tree {
                    excess: Arc::clone(excess),
                    points: *points,
                },
                projection: projection.clone(),
                sites: self.site_for(to),
            };
            self.outbox.push_back(msg);
        }
        true
    }

    /// `D_ij = E_i + Σ_{k≠j} D_ki` for neighbour j, with the points it represents and, in
    /// shared projection mode, the projection sums (spec §7, §13).
    fn tree_message(&self, j: AgentId) -> TreeMessage {
        let own_share = self.own_projection_share();
        {
            let received = self.inbox.iter().map(|(k, v)| (k, &*v.excess));
            let excess = tree::message_to(&self.own, received, &j);
            let others = self.inbox.iter().filter(|(k, _)| **k != j);
            let points = self.n_own as f64 + others.clone().map(|(_, v)| v.points).sum::<f64>();
            let projection = own_share.as_ref().map(|own| {
                let mut s = own.clone();
                for p in others.filter_map(|(_, v)| v.projection.as_ref()) {
                    s.add_in_place(p);
                }
                s
            });
            (Arc::new(excess), points, projection)
        }
    }

    /// The next message to transmit, if any.
    pub fn poll_transmit(&mut self) -> Option<Message> {
        self.outbox.pop_front()
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Queues a message for [`Agent::poll_transmit`].
    pub(crate) fn queue(&mut self, msg: Message) {
        self.outbox.push_back(msg);
    }

    pub(crate) fn push_event(&mut self, e: Event) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }

    /// Push-sum state (tests, checkpoints).
    pub fn pushsum_mass(&self) -> &Mass {
        &self.pushsum.mass
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use faer::Mat;

    #[test]
    fn a_block_in_chunks_equals_the_block_at_once() {
        // Blocks larger than one ψ buffer are absorbed and differentiated chunk by chunk: the
        // same statistics and the same gradient step, to rounding, in every mode.
        let vocab = Arc::new(Vocabulary::default_design(9, 2, 4).expect("design"));
        let mut rng = Rng::new(3, 1);
        let x = Mat::from_fn(53, 2, |_, _| rng.normal());
        let y: Vec<f64> = (0..53)
            .map(|r| x[(r, 0)].sin() + 0.1 * rng.normal())
            .collect();
        for mode in [
            UpdateMode::Frozen,
            UpdateMode::parse(Some("importance"), Some(6), None).expect("mode"),
            UpdateMode::parse(Some("exact"), None, None).expect("mode"),
        ] {
            let cfg = AgentConfig {
                mode,
                ..AgentConfig::default()
            };
            let run = |rows: Option<usize>| {
                ROWS_PER_CHUNK.with(|c| c.set(rows));
                let mut a = Agent::new(1, vocab.clone(), 2, cfg.clone()).expect("agent");
                a.handle_block(x.as_ref(), &y).expect("block");
                a.handle_block(x.subrows(0, 20), &y[..20]).expect("block");
                ROWS_PER_CHUNK.with(|c| c.set(None));
                a
            };
            let (whole, chunked) = (run(None), run(Some(7)));
            let e = chunked.own_excess().rel_dist(whole.own_excess());
            assert!(e < 1e-12, "{mode:?}: excess off by {e:e}");
            let (tw, tc) = (whole.projection().to_flat(), chunked.projection().to_flat());
            for (a, b) in tw.iter().zip(&tc) {
                assert!(
                    (a - b).abs() <= 1e-12 * a.abs().max(1.0),
                    "{mode:?}: θ {a} vs {b}"
                );
            }
            assert_ne!(
                whole.projection(),
                &vocab.initial_projection(2),
                "the step must have moved θ"
            );
        }
    }
}
