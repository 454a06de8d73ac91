//! One agent's part of the fleet-wide q(W), σ_s, σ_n (spec §14): its own site, the
//! pseudo-site of the shared q0(W), the window of its newest blocks a step's target is taken
//! over, the stream memory's frozen terms, and the clock of fleet-time damping.
//!
//! Per block, spec §14's steps 3–6 (steps 1–2, absorbing the block and the fused q(u), are the
//! agent's): the caller pushes the block into the window ([`FleetSite::push_block`]), which
//! says over which rows the target is taken; the caller takes their data term under the
//! current q(W) and fused q(u) and hands it to [`FleetSite::step`], which forms the
//! clipped-curvature target
//!
//! ```text
//! τ_Λ = c·h,   τ_λ = c·(dM + h∘M),   h = max(0, −dρ/Σ)
//! ```
//!
//! and moves the own site toward it. [`SiteMemory::Recent`] takes the target over the whole
//! window at every block and damps toward it. [`SiteMemory::Stream`] (the default) sums terms:
//! the new block's alone on arrival (its ψ̄ statistics are those its absorption computed, so
//! the step costs one gradient of one block, as an Adam step does), the whole window's again
//! only when the fused q(u) has grown by [`STREAM_REFRESH_GROWTH`] since the window's last
//! evaluation, the blocks that left the window frozen. What the agent predicts and learns with
//! is [`FleetSite::view`] of the fused sums: the own group's sums plus the faded pseudo-site,
//! `prior + w·P_W + P_h + Σ_i s_i`.

use faer::{Mat, MatRef};

use crate::learn::elbo::BlockElbo;
use crate::learn::recent::RecentBlocks;
use crate::learn::site::{Site, SiteConfig, SiteMemory};
use crate::learn::sites::{GroupId, Sites};
use crate::model::Projection;

/// The fleet site of one agent (module docs). Outside the fleet projection mode it is
/// inactive: every site is empty and it never steps.
#[derive(Clone, Debug)]
pub struct FleetSite {
    /// The site settings (rate, window, memory, pseudo-site weights).
    config: SiteConfig,
    /// The key of the own site in [`Sites`]: the projection group, or
    /// [`crate::learn::UNGROUPED`].
    key: GroupId,
    /// The own site `s_i`.
    own: Site,
    /// The pseudo-site of the shared initial q0(W) (derived from the vocabulary and the
    /// settings: not in snapshots).
    pseudo: Site,
    /// [`SiteMemory::Stream`]: the frozen terms of the blocks that have left the window.
    frozen: Site,
    /// [`SiteMemory::Stream`]: the last step's window term and its points (0: none yet).
    window_term: (Site, f64),
    /// The newest own blocks a step's target is taken over ([`SiteConfig::window_points`]
    /// > 0; else empty).
    recent: RecentBlocks,
    /// The fleet's points (own group's fused sums, this agent's current count) at the last
    /// step: the clock of [`SiteConfig::fleet_damping`].
    clock: f64,
}

/// [`SiteMemory::Stream`]: the window is re-evaluated under the current q(W) and fused q(u)
/// only when the points of the agent's fused q(u) have grown by more than this fraction since
/// its last evaluation; in between, each new block's term is taken alone, from the ψ̄
/// statistics its absorption computed, and added to the window's term. q(u) and q(W) move
/// with the fleet's data: a term taken at `N` points is stale by about `ΔN/N`. One learner
/// re-evaluates its window about `ln(N_end/N_start)/0.05` times in a stream; an agent of a
/// fleet at its first block after each fusion of q(u).
pub const STREAM_REFRESH_GROWTH: f64 = 0.05;

/// The data of one step's target, from [`FleetSite::push_block`]: the window's rows stacked
/// (`None`: the block alone) with their weights under the robust likelihood, the window's
/// points before the block arrived, and whether the step re-evaluates the window
/// ([`STREAM_REFRESH_GROWTH`]).
#[derive(Debug)]
pub struct StepData {
    stacked: Option<(Mat<f64>, Vec<f64>)>,
    weights: Option<Vec<f64>>,
    before: usize,
    refresh: bool,
}

impl StepData {
    /// The window's rows `(x [Σn, d], y [Σn])`, oldest first, when the target is taken over
    /// more than the newest block.
    pub fn stacked(&self) -> Option<(MatRef<'_, f64>, &[f64])> {
        self.stacked
            .as_ref()
            .map(|(x, y)| (x.as_ref(), y.as_slice()))
    }

    /// The weights `w [Σn]` of the [`StepData::stacked`] rows, each taken when its block
    /// arrived (the robust likelihood, [`FleetSite::push_weighted_block`]); `None` when the
    /// rows are not stacked or carry no weights (the Gaussian likelihood).
    pub fn stacked_weights(&self) -> Option<&[f64]> {
        self.weights.as_deref()
    }
}

/// The agent's counts at a step.
#[derive(Clone, Copy, Debug)]
pub struct StepCounts {
    /// Own points absorbed `N_i` (the new block included).
    pub n_own: usize,
    /// Own blocks absorbed (the new block included).
    pub blocks: u64,
    /// Points of the new block `n`.
    pub block_points: usize,
    /// Points in the agent's fused view of its group's sums ([`FleetSite::view`]'s
    /// `points`); read by [`SiteMemory::Recent`] only (the clock of
    /// [`SiteConfig::fleet_damping`]).
    pub fused_points: f64,
    /// Points in the agent's fused q(u) (the new block included): the clock of the window's
    /// refresh ([`SiteMemory::Stream`], [`STREAM_REFRESH_GROWTH`]).
    pub data_points: f64,
}

impl FleetSite {
    /// An active fleet site of agents with the shared initial `q0`: zero own site, the
    /// pseudo-site of `q0` ([`Site::pseudo`]), an empty window. `config` must be valid
    /// ([`SiteConfig::validate`]).
    pub fn new(q0: &Projection, config: &SiteConfig, key: GroupId) -> Self {
        let len = q0.d() * q0.d_latent();
        Self::with_pseudo(config, key, len, Site::pseudo(q0, config))
    }

    /// The inactive site of an agent outside the fleet projection mode: every site empty.
    pub fn inactive(config: &SiteConfig, key: GroupId) -> Self {
        Self::with_pseudo(config, key, 0, Site::zeros(0))
    }

    fn with_pseudo(config: &SiteConfig, key: GroupId, len: usize, pseudo: Site) -> Self {
        let own = Site::zeros(len);
        Self {
            config: config.clone(),
            key,
            frozen: own.clone(),
            window_term: (own.clone(), 0.0),
            own,
            pseudo,
            recent: RecentBlocks::default(),
            clock: 0.0,
        }
    }

    /// Sets a snapshot's own site, clock, window, frozen terms and window term (checked by
    /// the caller).
    pub fn restore(
        &mut self,
        own: Site,
        clock: f64,
        recent: RecentBlocks,
        frozen: Site,
        window_term: (Site, f64),
    ) {
        self.own = own;
        self.clock = clock;
        self.recent = recent;
        self.frozen = frozen;
        self.window_term = window_term;
    }

    /// The own site `s_i` (empty when inactive).
    pub fn own(&self) -> &Site {
        &self.own
    }

    /// The key of the own site in [`Sites`]: the projection group, or
    /// [`crate::learn::UNGROUPED`].
    pub fn key(&self) -> GroupId {
        self.key
    }

    /// The fleet's points at the last step ([`SiteMemory::Recent`]: the clock of
    /// [`SiteConfig::fleet_damping`]) or the fused q(u)'s points at the window's last
    /// evaluation ([`SiteMemory::Stream`]).
    pub fn clock(&self) -> f64 {
        self.clock
    }

    /// The window of newest own blocks.
    pub fn recent(&self) -> &RecentBlocks {
        &self.recent
    }

    /// The window of newest own blocks, to change through its methods (a restored robust
    /// agent's weights, [`RecentBlocks::set_weights`]).
    pub(crate) fn recent_mut(&mut self) -> &mut RecentBlocks {
        &mut self.recent
    }

    /// [`SiteMemory::Stream`]: the frozen terms of the blocks that left the window.
    pub fn frozen(&self) -> &Site {
        &self.frozen
    }

    /// [`SiteMemory::Stream`]: the last window term and its points (0: none yet).
    pub fn window_term(&self) -> &(Site, f64) {
        &self.window_term
    }

    /// What this agent contributes to the fleet's sums: its own site under its key.
    pub fn sums(&self) -> Sites {
        Sites::single(self.key, self.own.clone())
    }

    /// What the agent predicts and learns with, from the `fused` sums of every group it
    /// has heard of: its own group's sums (the own site alone if the group is missing) plus
    /// the faded pseudo-site of q0 ([`Site::with_pseudo`]).
    pub fn view(&self, fused: &Sites) -> Site {
        let own = fused
            .get(self.key)
            .cloned()
            .unwrap_or_else(|| self.own.clone());
        own.with_pseudo(&self.pseudo, &self.config)
    }

    /// Takes the newest block `(x [n, d], y [n])` into the window ([`SiteConfig::window_points`];
    /// at 0 the target is the block alone) and returns the data of this step's target: the
    /// window's rows, or under [`SiteMemory::Stream`] the block alone unless the fused q(u)'s
    /// points have grown by [`STREAM_REFRESH_GROWTH`] since the window's last evaluation.
    pub fn push_block(&mut self, x: MatRef<'_, f64>, y: &[f64], counts: StepCounts) -> StepData {
        self.push_weighted_block(x, y, None, counts)
    }

    /// As [`FleetSite::push_block`], the block's rows with their weights `w [n]` under the
    /// robust likelihood (docs/ROBUST.md; `None`: every weight 1): the window keeps them with
    /// the rows, so every re-evaluation tempers each row by the weight it got on arrival.
    ///
    /// # Panics
    /// If `w` does not hold one weight per row (our own misuse).
    #[track_caller]
    pub fn push_weighted_block(
        &mut self,
        x: MatRef<'_, f64>,
        y: &[f64],
        w: Option<&[f64]>,
        counts: StepCounts,
    ) -> StepData {
        let window = self.config.window_points;
        let before = self.recent.points();
        let refresh = match self.config.memory {
            SiteMemory::Recent => true,
            SiteMemory::Stream => {
                let points = counts.data_points;
                let grown =
                    self.clock <= 0.0 || points > self.clock * (1.0 + STREAM_REFRESH_GROWTH);
                if grown {
                    self.clock = points;
                }
                grown
            }
        };
        let (stacked, weights) = if window > 0 {
            self.recent.push_weighted(x, y, w, window);
            if refresh && self.recent.len() > 1 {
                (Some(self.recent.stacked()), self.recent.stacked_weights())
            } else {
                (None, None)
            }
        } else {
            (None, None)
        };
        StepData {
            stacked,
            weights,
            before,
            refresh,
        }
    }

    /// The fleet's points with the new block: the fused view's, the own site's replaced by
    /// the agent's current count.
    fn fleet_points(&self, counts: StepCounts) -> f64 {
        counts.fused_points - self.own.points + counts.n_own as f64
    }

    /// One site step (spec §14, steps 4–6): the clipped-curvature target of `elbo`, the data
    /// term of `data` ([`FleetSite::push_block`]) under the current q(W) `proj` and the fused
    /// q(u), moves the own site. Returns false (the own site unchanged) for an unusable target.
    pub fn step(
        &mut self,
        proj: &Projection,
        elbo: &BlockElbo,
        data: &StepData,
        counts: StepCounts,
    ) -> bool {
        let n_data = data
            .stacked
            .as_ref()
            .map_or(counts.block_points, |s| s.1.len()) as f64;
        // Stream memory: the window's own term (c = 1); recent: scaled to the N own points.
        let scale_to = match self.config.memory {
            SiteMemory::Recent => counts.n_own as f64,
            SiteMemory::Stream => n_data,
        };
        let target = Site::block_target(proj, elbo, scale_to, n_data);
        if !target.is_valid(self.own.len()) {
            return false;
        }
        match self.config.memory {
            SiteMemory::Recent => self.damp_toward(&target, counts),
            SiteMemory::Stream if data.refresh || self.config.window_points == 0 => {
                self.replace_window_term(target, n_data, data, counts)
            }
            SiteMemory::Stream => self.add_block_term(&target, n_data, counts),
        }
        true
    }

    /// [`SiteMemory::Recent`]: running mean of the targets for the first 1/ρ blocks, then the
    /// damped average, at least as fast as one learner with the fleet's data would forget
    /// ([`SiteConfig::rate`]).
    fn damp_toward(&mut self, target: &Site, counts: StepCounts) {
        let n = counts.block_points as f64;
        let clock = self.fleet_points(counts);
        let fleet_blocks = ((clock - self.clock) / n).max(1.0);
        self.clock = clock;
        let rate = self.config.rate(counts.blocks, fleet_blocks);
        self.own.damp_toward(target, rate);
    }

    /// [`SiteMemory::Stream`]: the blocks that left the window keep their share of its last
    /// term, pro rata to their points; the site is those frozen terms plus the window's new
    /// term.
    fn replace_window_term(
        &mut self,
        target: Site,
        n_data: f64,
        data: &StepData,
        counts: StepCounts,
    ) {
        let (last, last_points) = &self.window_term;
        let dropped = if self.config.window_points > 0 {
            (data.before + counts.block_points).saturating_sub(self.recent.points()) as f64
        } else {
            *last_points
        };
        if dropped > 0.0 && *last_points > 0.0 {
            self.frozen
                .add_scaled_in_place(last, (dropped / last_points).min(1.0));
        }
        self.window_term = (target, n_data);
        self.sum_terms(counts);
    }

    /// [`SiteMemory::Stream`] between the window's evaluations: the new block's own term
    /// joins the window's term; the blocks that left the window take their share of it, pro
    /// rata to their points, into the frozen terms.
    fn add_block_term(&mut self, target: &Site, n_data: f64, counts: StepCounts) {
        let (term, points) = &mut self.window_term;
        term.add_in_place(target);
        *points += n_data;
        let dropped = *points - self.recent.points() as f64;
        if dropped > 0.0 {
            let share = (dropped / *points).min(1.0);
            self.frozen.add_scaled_in_place(term, share);
            term.scale_in_place(1.0 - share);
            *points -= dropped;
        }
        self.sum_terms(counts);
    }

    /// The own site: the frozen terms plus the window's term, at the agent's points.
    fn sum_terms(&mut self, counts: StepCounts) {
        let mut site = self.frozen.clone();
        site.add_in_place(&self.window_term.0);
        site.points = counts.n_own as f64;
        self.own = site;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::elbo::{block_loglik_grad, BlockPsi};
    use crate::model::psi::UnitStats;
    use crate::model::{Excess, NaturalParams, Posterior, Vocabulary};
    use crate::rng::Rng;

    fn q0() -> Projection {
        Vocabulary::default_design(9, 2, 4)
            .expect("design")
            .initial_projection(3)
    }

    /// The counts of a step of 10-point blocks with `n_own` own points and the fused q(u)
    /// at `fused` points.
    fn counts(n_own: usize, fused: f64) -> StepCounts {
        StepCounts {
            n_own,
            blocks: (n_own / 10) as u64,
            block_points: 10,
            fused_points: fused,
            data_points: fused,
        }
    }

    /// Six 10-point blocks of `y = sin(x0 − x1/2) + noise`, a q(W) away from q0 and a q(u)
    /// fitted to them: a fixed linearization (neither moves in these tests).
    type Fixture = (Vocabulary, Projection, Posterior, Vec<(Mat<f64>, Vec<f64>)>);

    fn fixture() -> Fixture {
        let vocab = Vocabulary::default_design(9, 2, 4).expect("design");
        let mut proj = vocab.initial_projection(3);
        let mut theta = proj.to_flat();
        for (k, t) in theta.iter_mut().enumerate() {
            *t += 0.05 * ((k * 7 % 5) as f64 - 2.0);
        }
        proj.set_flat(&theta);
        let mut rng = Rng::new(21, 2);
        let blocks: Vec<(Mat<f64>, Vec<f64>)> = (0..6)
            .map(|_| {
                let x = Mat::from_fn(10, 3, |_, _| rng.normal());
                let y = (0..10)
                    .map(|r| (x[(r, 0)] - 0.5 * x[(r, 1)]).sin() + 0.1 * rng.normal())
                    .collect();
                (x, y)
            })
            .collect();
        let mut stats = UnitStats::zeros(vocab.m());
        for (x, y) in &blocks {
            BlockPsi::compute(&vocab, &proj, x.as_ref()).accumulate_into(y, &mut stats);
        }
        let e = Excess::from_unit_stats(&stats, proj.sigma_s(), proj.sigma_n());
        let post = NaturalParams::from_excess(&vocab, &e)
            .posterior(&vocab)
            .expect("posterior");
        (vocab, proj, post, blocks)
    }

    /// One stream-memory step of `site` on block `b` at the fleet's `fused` points, its target
    /// taken under the fixed linearization; returns whether it re-evaluated the window.
    fn stream_step(site: &mut FleetSite, fx: &Fixture, b: usize, fused: f64) -> bool {
        let (vocab, proj, post, blocks) = fx;
        let c = counts(10 * (b + 1), fused);
        let (x, y) = &blocks[b];
        let data = site.push_block(x.as_ref(), y, c);
        let elbo = match data.stacked() {
            Some((xs, ys)) => block_loglik_grad(vocab, proj, post, xs, ys),
            None => block_loglik_grad(vocab, proj, post, x.as_ref(), y),
        };
        assert!(site.step(proj, &elbo, &data, c));
        data.stacked().is_some()
    }

    /// A stream-memory site with a 30-point window (three blocks) at the fixture's q(W).
    fn stream_site(fx: &Fixture) -> FleetSite {
        let cfg = SiteConfig {
            window_points: 30,
            memory: SiteMemory::Stream,
            ..SiteConfig::default()
        };
        FleetSite::new(&fx.1, &cfg, 0)
    }

    fn close(a: &Site, b: &Site) {
        let d = a.rel_dist(b);
        assert!(d <= 1e-12, "sites differ by {d:e}");
    }

    #[test]
    fn between_refreshes_the_window_term_is_its_blocks_terms_at_the_unmoved_linearization() {
        // The window's term is kept, not re-evaluated, while the fleet's points grow by less
        // than STREAM_REFRESH_GROWTH: it is then the sum of its blocks' own terms, each taken
        // on arrival. With q(W) and q(u) unmoved, that equals the terms recomputed now.
        let fx = fixture();
        let mut site = stream_site(&fx);
        // The fused q(u) holds 1,000 points and grows by one block at a time: 1% per step.
        let mut refreshed = Vec::new();
        for b in 0..6 {
            refreshed.push(stream_step(&mut site, &fx, b, 1000.0 + 10.0 * b as f64));
        }
        assert_eq!(
            refreshed, [false; 6],
            "the first block alone: nothing stacked"
        );
        assert_eq!(
            site.clock(),
            1000.0,
            "the window was last evaluated at the first step"
        );
        // Recomputed: every block's own term under the same q(W), q(u), summed.
        let (vocab, proj, post, blocks) = &fx;
        let mut want = Site::zeros(site.own().len());
        for (x, y) in blocks {
            let e = block_loglik_grad(vocab, proj, post, x.as_ref(), y);
            want.add_in_place(&Site::block_target(proj, &e, 10.0, 10.0));
        }
        want.points = 60.0;
        close(site.own(), &want);
        // The window's term covers its 30 points (the blocks that left took their share).
        assert_eq!(site.window_term().1, 30.0);
    }

    #[test]
    fn growth_past_the_threshold_re_evaluates_the_window() {
        // Reference: STREAM_REFRESH_GROWTH. 1% growth per step keeps the window's term; a jump
        // of the fused q(u)'s points past 5% (a fusion) re-evaluates the whole window at once.
        let fx = fixture();
        let mut site = stream_site(&fx);
        for b in 0..4 {
            assert!(!stream_step(&mut site, &fx, b, 1000.0 + 10.0 * b as f64));
        }
        let before = site.frozen().clone();
        let jump = 1000.0 * (1.0 + 2.0 * STREAM_REFRESH_GROWTH);
        assert!(stream_step(&mut site, &fx, 4, jump), "re-evaluated");
        assert_eq!(site.clock(), jump);
        // The window's term is now one evaluation over its rows (blocks 2–4).
        let (vocab, proj, post, blocks) = &fx;
        let (xs, ys) = site.recent().stacked();
        assert_eq!(ys.len(), 30);
        assert_eq!(ys[..10], blocks[2].1[..]);
        let e = block_loglik_grad(vocab, proj, post, xs.as_ref(), &ys);
        let mut want = Site::block_target(proj, &e, 30.0, 30.0);
        want.points = site.window_term().0.points;
        assert_eq!(site.window_term().0, want);
        // Block 1 left the window at this step: its share of the kept term was frozen.
        assert!(site.frozen().hyper.n > before.hyper.n);
        assert!((site.frozen().hyper.n + 30.0 - 50.0).abs() < 1e-9);
        // The next step, at 1% growth again, keeps the new term.
        assert!(!stream_step(&mut site, &fx, 5, jump + 20.0));
    }

    #[test]
    fn a_group_not_heard_of_views_its_own_site_plus_the_pseudo_site() {
        // Reference: spec §14, `view = prior + w·P_W + P_h + Σ s_i`: the own group's sums,
        // the own site alone while no sums of the group have arrived.
        let q0 = q0();
        let site = FleetSite::new(&q0, &SiteConfig::default(), 7);
        assert_eq!(site.own().len(), q0.d() * q0.d_latent());
        let others = Sites::single(8, Site::zeros(site.own().len()));
        assert_eq!(site.view(&others), site.view(&site.sums()));
        let inactive = FleetSite::inactive(&SiteConfig::default(), 7);
        assert!(inactive.own().is_empty() && inactive.sums().get(7).is_some());
    }

    #[test]
    fn the_window_stacks_the_newest_blocks_and_zero_points_take_the_block_alone() {
        // Reference: spec §14 improved (the target's data, module docs of `learn::site`).
        let x = Mat::from_fn(10, 3, |i, j| (i + j) as f64 * 0.1);
        let y = vec![0.5; 10];
        let cfg = SiteConfig {
            window_points: 15,
            ..SiteConfig::default()
        };
        let mut site = FleetSite::new(&q0(), &cfg, 0);
        assert!(
            site.push_block(x.as_ref(), &y, counts(10, 0.0))
                .stacked()
                .is_none(),
            "one block"
        );
        let data = site.push_block(x.as_ref(), &y, counts(20, 0.0));
        assert_eq!(
            data.stacked().map(|(x, y)| (x.nrows(), y.len())),
            Some((20, 20))
        );
        assert_eq!(site.recent().points(), 20);
        let cfg = SiteConfig {
            window_points: 0,
            ..SiteConfig::default()
        };
        let mut alone = FleetSite::new(&q0(), &cfg, 0);
        alone.push_block(x.as_ref(), &y, counts(10, 0.0));
        assert!(alone
            .push_block(x.as_ref(), &y, counts(20, 0.0))
            .stacked()
            .is_none());
        assert!(alone.recent().is_empty());
    }
}
