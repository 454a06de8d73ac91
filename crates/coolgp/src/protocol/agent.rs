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
//!
//! The agent's state is three owned parts with one job each: the learning state (q(W), Adam,
//! the learner's caches; `learn/state.rs`), the fusion state (`E_i`, neighbours, inbox,
//! push-sum; `protocol/fusion.rs`) and the fleet site ([`FleetSite`], spec §14). The agent
//! walks a block ([`Agent::handle_block`]), a message ([`Agent::handle_message`],
//! `protocol/inbound.rs`) or a tick ([`Agent::handle_tick`]) through them.

use std::collections::VecDeque;
use std::sync::Arc;

use faer::MatRef;

use crate::error::{ensure_finite, Error, Result};
use crate::fuse::Mass;
use crate::learn::elbo::{BlockElbo, BlockPsi};
use crate::learn::state::{block_rows, keep_block_psi, take_block_psi, LearnState};
use crate::learn::{FleetSite, IsDiagnostics, Learner, Likelihood, StepCounts, UpdateMode};
use crate::local::memory::Memory;
use crate::local::LocalModel;
use crate::local::MemoryPolicy;
use crate::members::RECENT_ROWS;
use crate::model::predict::predict;
use crate::model::{Excess, NaturalParams, Posterior, Prediction, Projection, Vocabulary};
use crate::protocol::event::Event;
use crate::protocol::fusion::Fusion;
use crate::protocol::message::{AgentId, Body, Header, Message};

pub use crate::protocol::config::{AgentConfig, FusionRule, ProjectionMode, View};

/// Most events kept when the driver does not poll; the oldest are dropped first.
const MAX_EVENTS: usize = 4096;

/// What [`Agent::data_term_of`] is given: a block whose ψ `bp` holds, or a site window whose
/// newest block's ψ it holds.
#[derive(Clone, Copy, Debug)]
enum Rows<'a> {
    /// A block, with its rows' weights under the robust likelihood.
    Block(Option<&'a [f64]>),
    /// The window's newest block's rows, with the window's rows' weights under the robust
    /// likelihood.
    Window(usize, Option<&'a [f64]>),
}

/// One COOL-GP agent.
#[derive(Clone, Debug)]
pub struct Agent {
    id: AgentId,
    vocab: Arc<Vocabulary>,
    config: AgentConfig,
    /// q(W), σ_s, σ_n, Adam, the learner's caches, the counts of own data.
    learning: LearnState,
    /// `E_i`, neighbours, what they sent, push-sum, rounds.
    fusion: Fusion,
    /// The own part of the fleet's q(W) (fleet projection mode; inactive otherwise).
    site: FleetSite,
    /// The local memory and residual GP (issue 19; empty and unused with capacity 0).
    local: LocalModel,
    /// The newest rows, kept for the member check when there is no local memory (issue 29):
    /// a memory of the `recent` policy and [`RECENT_ROWS`] rows, with no residual GP.
    recent: Memory,
    outbox: VecDeque<Message>,
    events: VecDeque<Event>,
}

impl Agent {
    /// A new agent of input dimension `d`, starting from the vocabulary's shared initial q(W).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for `d = 0`, zero importance samples, the shared projection
    /// with push-sum, the fleet projection with the importance mode, bad site settings, or
    /// the robust likelihood with a threshold that is not finite and > 0.
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
        config.check_likelihood()?;
        if fleet {
            if let UpdateMode::Importance { .. } = config.mode {
                return Err(Error::InvalidConfig(
                    "the fleet projection mode needs the frozen or exact online mode (importance caches are not sums of unit-scale statistics)".into(),
                ));
            }
            config.site.validate().map_err(Error::InvalidConfig)?;
        }
        let proj = vocab.initial_projection(d);
        let key = config.group.unwrap_or(crate::learn::UNGROUPED);
        let site = if fleet {
            FleetSite::new(&proj, &config.site, key)
        } else {
            FleetSite::inactive(&config.site, key)
        };
        let site_part = fleet.then(|| (key, site.own().len()));
        let fusion = Fusion::new(config.fusion, vocab.m(), site_part);
        let local = LocalModel::new(config.local, &vocab, &proj, config.seed);
        let recent = Memory::new(MemoryPolicy::Recent, RECENT_ROWS, d, config.seed);
        let learning = LearnState::new(&vocab, proj, config.adam.clone(), config.mode, config.seed);
        Ok(Self {
            id,
            vocab,
            config,
            learning,
            fusion,
            site,
            local,
            recent,
            outbox: VecDeque::new(),
            events: VecDeque::new(),
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
        let ids = ids.into_iter().filter(|&j| j != self.id).collect();
        self.fusion.set_neighbors(ids)
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
        self.learning.projection()
    }

    /// Own data points absorbed.
    pub fn n_own(&self) -> usize {
        self.learning.n_own()
    }

    /// Blocks absorbed.
    pub fn blocks(&self) -> u64 {
        self.learning.blocks()
    }

    /// Data version: bumped by every block absorbed.
    pub fn version(&self) -> u64 {
        self.learning.version()
    }

    /// Rounds ticked.
    pub fn round(&self) -> u64 {
        self.fusion.round()
    }

    /// Neighbours.
    pub fn neighbors(&self) -> impl Iterator<Item = AgentId> + '_ {
        self.fusion.neighbors().iter().copied()
    }

    /// Neighbours from which a message has been accepted.
    pub fn neighbors_heard(&self) -> usize {
        self.fusion.neighbors_heard()
    }

    /// The learner's caches (memory accounting, checkpoints).
    pub fn learner(&self) -> &Learner {
        self.learning.learner()
    }

    /// The own part of the fleet's q(W): own site, pseudo-site, window, clock (spec §14;
    /// inactive outside the fleet projection mode).
    pub fn fleet_site(&self) -> &FleetSite {
        &self.site
    }

    /// Own data part `E_i` under the current θ.
    pub fn own_excess(&self) -> &Excess {
        self.fusion.own()
    }

    /// The fused data part and the data points it represents (in the fleet projection mode,
    /// unit scale: [`Agent::natural_params`] applies the fleet's σ_s, σ_n).
    pub fn fused_excess(&self) -> (Excess, f64) {
        self.fusion.fused_excess(self.learning.n_own())
    }

    /// Data points represented in the fused model (exact on trees after convergence).
    pub fn fleet_points(&self) -> f64 {
        self.fusion.fleet_points(self.learning.n_own())
    }

    /// q(u) in K-form for a view.
    pub fn natural_params(&self, view: View) -> NaturalParams {
        match view {
            View::Own => self.natural_params_of(self.fusion.own()),
            View::Fused => self.natural_params_of(&self.fused_excess().0),
        }
    }

    /// q(u) in K-form of a data part `e` given in this agent's representation (e.g. a sum of
    /// the fleet's own excesses `Σ E_i`, to compare with the fused view): in the fleet
    /// projection mode without groups the unit-scale sums times the fleet's `σ_s²/σ_n²` and
    /// `σ_s/σ_n²` (spec §3); as it is otherwise.
    pub fn natural_params_of(&self, e: &Excess) -> NaturalParams {
        if self.unit_scale_excess() {
            let proj = self.learning.projection();
            let (ss, sn) = (proj.sigma_s(), proj.sigma_n());
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
        predict(&self.vocab, self.learning.projection(), &post, x)
    }

    /// Predicts at the rows of `x [n, d]` with the agent's q(W) and the prior plus a data part
    /// `e` in this agent's representation (e.g. a peer's own excess `E_j`: that peer's own
    /// model, for the member check of issue 29).
    ///
    /// # Errors
    /// As [`Agent::predict`]; [`Error::NotPositiveDefinite`] if `T0 + e` cannot be factored.
    pub fn predict_given(&self, x: MatRef<'_, f64>, e: &Excess) -> Result<Prediction> {
        self.check_inputs(x, None)?;
        let post = self.natural_params_of(e).posterior(&self.vocab)?;
        predict(&self.vocab, self.learning.projection(), &post, x)
    }

    /// Withholds the own data (q(u)'s `E_i` and points, the fleet projection's site, the
    /// shared projection's term) from every message from now on, or (`on = false`) sends it
    /// again: the containment of a suspect member (issue 29, docs/MEMBERS.md §2). On a tree
    /// the rest of the fleet then converges to the model without this agent, exactly, and
    /// the agent's own fused view keeps its data. Under push-sum its excess, points and site
    /// leave the mass as an injected change (conserved, so every estimate converges to the
    /// fleet's sums without it, its own included) and re-enter it when readmitted. Part of a
    /// snapshot (a push-sum mass depends on it); the driver sets it from the fleet's verdicts.
    pub fn set_withheld(&mut self, on: bool) {
        let n_own = self.learning.n_own();
        if self.fusion.set_withheld(on, n_own) && self.fusion.is_push_sum() && self.is_fleet() {
            let sign = if on { -1.0 } else { 1.0 };
            let mut delta = self.site.own().clone();
            delta.scale_in_place(sign);
            self.fusion.inject_site(self.site.key(), &delta);
        }
    }

    /// True while the own data is withheld from messages ([`Agent::set_withheld`]).
    pub fn is_withheld(&self) -> bool {
        self.fusion.is_withheld()
    }

    /// Checks query or block inputs: width d, finite, within the ψ statistics' range.
    pub(crate) fn check_inputs(&self, x: MatRef<'_, f64>, y: Option<&[f64]>) -> Result<()> {
        let proj = self.learning.projection();
        if x.ncols() != proj.d() {
            return Err(Error::DimensionMismatch {
                what: "input columns",
                expected: proj.d(),
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
        crate::model::input_range::check_input_range(proj, x)
    }

    /// Absorbs one block of own data `(x [n, d], y [n])`, takes one learning step (an Adam
    /// step on q(W), σ_s, σ_n, or a site step in the fleet projection mode), and recomputes
    /// the own excess.
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
        // reused by the learning step, which runs under the same θ. A block too large for one
        // ψ buffer is processed in chunks of rows (and its ψ recomputed for the gradient).
        let rows = block_rows(self.vocab.m());
        let mut bp = take_block_psi();
        // Spec §4: the block enters the caches under the current q(W); E_i follows.
        let weights = self.absorb(x, y, &mut bp, rows);
        self.refresh_own(y.len() as f64);
        if self.config.learn {
            if self.is_fleet() {
                // Spec §14: the own site steps; the fused sums change and are adopted.
                self.site_step(x, y, &mut bp, rows, weights.as_deref());
            } else {
                // Spec §6: one Adam step on θ against the fused q(u); E_i under the new θ.
                self.optimizer_step(x, y, &mut bp, rows, weights.as_deref());
                self.refresh_own(0.0);
            }
        }
        keep_block_psi(bp);
        // Issue 19: the local memory sees the block once it is absorbed; without one, the
        // member check's ring does (issue 29).
        if self.config.local.is_on() {
            self.offer_local(x, y);
        } else {
            self.recent.offer(x, y);
        }
        Ok(())
    }

    /// Absorbs the block under the current q(W) (spec §4) in the configured likelihood;
    /// robust: weighted against the q(u) before the block ([`Agent::current_posterior`];
    /// Gaussian if none factors), the weights returned for the gradient step.
    fn absorb(
        &mut self,
        x: MatRef<'_, f64>,
        y: &[f64],
        bp: &mut BlockPsi,
        rows: usize,
    ) -> Option<Vec<f64>> {
        if let Likelihood::Robust { c } = self.config.likelihood {
            if let Some(post) = self.current_posterior() {
                let l = &mut self.learning;
                return Some(l.absorb_weighted(&self.vocab, x, y, bp, rows, &post, c));
            }
        }
        self.learning.absorb(&self.vocab, x, y, bp, rows);
        None
    }

    /// The fused q(u), or the own one if the fused one cannot be factored; `None` (and a
    /// [`Event::StepSkipped`] "posterior") if neither can.
    fn current_posterior(&mut self) -> Option<Posterior> {
        let post = (self.posterior(View::Fused)).or_else(|_| self.posterior(View::Own));
        if post.is_err() {
            self.push_event(Event::StepSkipped {
                reason: "posterior",
            });
        }
        post.ok()
    }

    /// The data term `L_D` and its gradient against the fused q(u) (the own q(u) if the
    /// fused one cannot be factored; `None` if neither can) of a block (`bp` holds its ψ, or
    /// its last chunk's; rows tempered by their weights if given) or of a site window (`bp`
    /// holds its newest block's ψ: [`LearnState::window_data_term`]).
    fn data_term_of(
        &mut self,
        x: MatRef<'_, f64>,
        y: &[f64],
        bp: &mut BlockPsi,
        rows: usize,
        what: Rows<'_>,
    ) -> Option<BlockElbo> {
        let post = self.current_posterior()?;
        if post.jitter() > 0.0 {
            self.push_event(Event::Jitter {
                what: "T1",
                jitter: post.jitter(),
            });
        }
        match what {
            Rows::Block(w) => self
                .learning
                .data_term(&self.vocab, &post, x, y, bp, rows, w),
            Rows::Window(tail, w) => {
                self.learning
                    .window_data_term(&self.vocab, &post, x, y, bp, tail, w)
            }
        }
    }

    /// One Adam step on the per-datum gradient `∇L_D/n − w·∇KL_W/N_own` (spec §6), against
    /// the fused q(u). In shared mode the KL weight is `N_own/N_fleet` (spec §13).
    fn optimizer_step(
        &mut self,
        x: MatRef<'_, f64>,
        y: &[f64],
        bp: &mut BlockPsi,
        rows: usize,
        weights: Option<&[f64]>,
    ) {
        let Some(elbo) = self.data_term_of(x, y, bp, rows, Rows::Block(weights)) else {
            return;
        };
        let n_own = self.learning.n_own() as f64;
        let kl_den = match self.config.projection {
            ProjectionMode::Shared => self.fleet_points().max(n_own),
            _ => n_own,
        };
        if let Err(reason) = self.learning.gradient_step(&elbo, y.len() as f64, kl_den) {
            self.push_event(Event::StepSkipped { reason });
        }
    }

    /// The fleet projection mode's site step (spec §14): the data term of the window of
    /// newest own blocks ([`crate::learn::SiteConfig::window_points`]; the block alone at 0)
    /// under the fleet q(W) and the fused q(u) moves the own site ([`FleetSite::step`]); then
    /// the fused sums have changed and the agent adopts them. Under the robust likelihood the
    /// block's `weights` stay with its rows in the window, and temper every term taken over them.
    fn site_step(
        &mut self,
        x: MatRef<'_, f64>,
        y: &[f64],
        bp: &mut BlockPsi,
        rows: usize,
        weights: Option<&[f64]>,
    ) {
        let counts = StepCounts {
            n_own: self.learning.n_own(),
            blocks: self.learning.blocks(),
            block_points: y.len(),
            fused_points: self.fused_site().points,
            data_points: self.fleet_points(),
        };
        let data = self.site.push_weighted_block(x, y, weights, counts);
        let elbo = match data.stacked() {
            // `bp` holds the newest block's ψ (a one-chunk block, absorbed under the same
            // q(W)): a one-chunk window computes only its older rows, point by point.
            Some((xs, ys)) => {
                let what = Rows::Window(y.len(), data.stacked_weights());
                self.data_term_of(xs, ys, bp, rows, what)
            }
            None => self.data_term_of(x, y, bp, rows, Rows::Block(weights)),
        };
        let Some(elbo) = elbo else {
            return;
        };
        let old = self.fusion.is_push_sum().then(|| self.site.own().clone());
        if !self
            .site
            .step(self.learning.projection(), &elbo, &data, counts)
        {
            return self.push_event(Event::StepSkipped { reason: "site" });
        }
        if let Some(old) = old.filter(|_| !self.fusion.is_withheld()) {
            // The change of the own site enters the push-sum mass (conserved), as E_i's does
            // (not while the agent is withheld: the mass then holds none of its site).
            let mut delta = self.site.own().clone();
            delta.add_scaled_in_place(&old, -1.0);
            self.fusion.inject_site(self.site.key(), &delta);
        }
        self.adopt_site_view();
    }

    /// `E_i` from the learner's caches under the current θ: unit scale (σ_s = σ_n = 1) in the
    /// fleet projection mode without groups, where the fleet's scales are applied to the fused
    /// sums instead ([`Agent::unit_scale_excess`]).
    pub(crate) fn excess_from_caches(&mut self) -> (Excess, Option<IsDiagnostics>) {
        let unit = self.unit_scale_excess();
        self.learning.excess(&self.vocab, unit)
    }

    /// Recomputes `E_i` under the current θ (unit scale in the fleet projection mode); in
    /// push-sum, injects the change into the mass.
    pub(crate) fn refresh_own(&mut self, new_points: f64) {
        let (e, diag) = self.excess_from_caches();
        if let Some(d) = diag {
            self.push_event(Event::ImportanceWeights(d));
        }
        self.fusion.set_own(e, new_points);
    }

    /// One communication round: queues a message to every neighbour (tree: `D_ij`; push-sum:
    /// the running total after keeping one share, its site part in the message's site).
    pub fn handle_tick(&mut self) {
        self.fusion.next_round();
        match self.config.fusion {
            FusionRule::Tree => {
                let to: Vec<AgentId> = self.fusion.neighbors().iter().copied().collect();
                for j in to {
                    self.queue_tree_message(j);
                }
            }
            FusionRule::PushSum { .. } => {
                let mut total = self.fusion.pushsum_step();
                // The site part of the running total travels in the message's site section.
                let site = total.site.take();
                let to: Vec<AgentId> = self.fusion.neighbors().iter().copied().collect();
                for j in to {
                    let msg = Message {
                        header: self.header(j),
                        body: Body::PushSum {
                            total: total.clone(),
                        },
                        projection: None,
                        sites: site.clone(),
                    };
                    self.queue(msg);
                }
            }
        }
    }

    /// One message to one neighbour `to` under the tree rule (`D_ij`, as in a round of
    /// [`Agent::handle_tick`]), for event-driven schedules such as the two-pass schedule on a
    /// tree: i sends `D_ij` once it has heard from all its other neighbours, so each edge
    /// carries one message each way per fusion. Returns false (and sends nothing) under
    /// push-sum or when `to` is not a neighbour.
    pub fn handle_tick_to(&mut self, to: AgentId) -> bool {
        if self.config.fusion != FusionRule::Tree || !self.fusion.neighbors().contains(&to) {
            return false;
        }
        self.fusion.next_round();
        self.queue_tree_message(to);
        true
    }

    /// Queues the tree message `D_ij` to neighbour `to` with, in shared projection mode, the
    /// projection sums and, in the fleet projection mode, the site sums (spec §7, §13, §14).
    fn queue_tree_message(&mut self, to: AgentId) {
        let mut share = self.own_projection_share();
        if let Some(s) = share.as_mut().filter(|_| self.fusion.is_withheld()) {
            // Withheld: the fleet's projection sums without this agent's term.
            s.weight = 0.0;
            for v in s.theta.iter_mut().chain(&mut s.m1).chain(&mut s.m2) {
                *v = 0.0;
            }
        }
        let n_own = self.learning.n_own();
        let (excess, points, projection) = self.fusion.tree_payload(to, n_own, share.as_ref());
        let msg = Message {
            header: self.header(to),
            body: Body::Tree { excess, points },
            projection,
            sites: self.site_for(to),
        };
        self.queue(msg);
    }

    /// The header of a message sent now to `to`.
    pub(crate) fn header(&self, to: AgentId) -> Header {
        Header {
            fingerprint: self.vocab.fingerprint(),
            sender: self.id,
            receiver: to,
            round: self.fusion.round(),
            version: self.learning.version(),
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

    /// Queues an event for [`Agent::poll_event`], dropping the oldest beyond
    /// [`MAX_EVENTS`].
    pub(crate) fn push_event(&mut self, e: Event) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }

    /// Push-sum state (tests, checkpoints).
    pub fn pushsum_mass(&self) -> &Mass {
        &self.fusion.pushsum().mass
    }

    /// The learning state (read by the agent's other files).
    pub(crate) fn learning(&self) -> &LearnState {
        &self.learning
    }

    /// The learning state, to change through its methods.
    pub(crate) fn learning_mut(&mut self) -> &mut LearnState {
        &mut self.learning
    }

    /// The fusion state (read by the agent's other files).
    pub(crate) fn fusion(&self) -> &Fusion {
        &self.fusion
    }

    /// The fusion state, to change through its methods.
    pub(crate) fn fusion_mut(&mut self) -> &mut Fusion {
        &mut self.fusion
    }

    /// The local memory and residual GP.
    pub fn local(&self) -> &LocalModel {
        &self.local
    }

    /// The newest rows absorbed, kept for the member check without local memory (empty with
    /// a memory, whose rows the check reads instead: [`crate::members::check_rows`]).
    pub fn recent_rows(&self) -> &Memory {
        &self.recent
    }

    /// The local memory, to change through its methods.
    pub(crate) fn local_mut(&mut self) -> &mut LocalModel {
        &mut self.local
    }

    /// The fleet site, to change through its methods.
    pub(crate) fn fleet_site_mut(&mut self) -> &mut FleetSite {
        &mut self.site
    }
}

#[cfg(test)]
#[path = "agent_tests.rs"]
mod tests;
