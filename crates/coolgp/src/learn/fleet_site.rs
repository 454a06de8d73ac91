//! One agent's part of the fleet-wide q(W), σ_s, σ_n (spec §14): its own site, the
//! pseudo-site of the shared q0(W), the window of its newest blocks a step's target is taken
//! over, the stream memory's frozen terms, and the clock of fleet-time damping.
//!
//! Per block, spec §14's steps 3–6 (steps 1–2, absorbing the block and the fused q(u), are the
//! agent's): the caller pushes the block into the window ([`FleetSite::push_block`]), takes the
//! data term of the window's rows under the current q(W) and fused q(u), and hands it to
//! [`FleetSite::step`], which forms the clipped-curvature target
//!
//! ```text
//! τ_Λ = c·h,   τ_λ = c·(dM + h∘M),   h = max(0, −dρ/Σ)
//! ```
//!
//! and moves the own site toward it (damped, [`SiteMemory::Recent`]; or as the window's term
//! on top of the frozen terms of older blocks, [`SiteMemory::Stream`]). What the agent predicts
//! and learns with is [`FleetSite::view`] of the fused sums: the own group's sums plus the
//! faded pseudo-site, `prior + w·P_W + P_h + Σ_i s_i`.

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

/// The data of one step's target, from [`FleetSite::push_block`]: the window's rows stacked
/// (`None`: the block alone), and the window's points before the block arrived.
#[derive(Debug)]
pub struct StepData {
    stacked: Option<(Mat<f64>, Vec<f64>)>,
    before: usize,
}

impl StepData {
    /// The window's rows `(x [Σn, d], y [Σn])`, oldest first, when the target is taken over
    /// more than the newest block.
    pub fn stacked(&self) -> Option<(MatRef<'_, f64>, &[f64])> {
        self.stacked
            .as_ref()
            .map(|(x, y)| (x.as_ref(), y.as_slice()))
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
    /// `points`); read by [`SiteMemory::Recent`] only.
    pub fused_points: f64,
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

    /// The clock of [`SiteConfig::fleet_damping`]: the fleet's points at the last step.
    pub fn clock(&self) -> f64 {
        self.clock
    }

    /// The window of newest own blocks.
    pub fn recent(&self) -> &RecentBlocks {
        &self.recent
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
    /// at 0 the target is the block alone) and returns the data of this step's target.
    pub fn push_block(&mut self, x: MatRef<'_, f64>, y: &[f64]) -> StepData {
        let window = self.config.window_points;
        let before = self.recent.points();
        let stacked = if window > 0 {
            self.recent.push(x, y, window);
            (self.recent.len() > 1).then(|| self.recent.stacked())
        } else {
            None
        };
        StepData { stacked, before }
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
            SiteMemory::Stream => self.replace_window_term(target, n_data, data, counts),
        }
        true
    }

    /// [`SiteMemory::Recent`]: running mean of the targets for the first 1/ρ blocks, then the
    /// damped average, at least as fast as one learner with the fleet's data would forget
    /// ([`SiteConfig::rate`]).
    fn damp_toward(&mut self, target: &Site, counts: StepCounts) {
        let n = counts.block_points as f64;
        let clock = counts.fused_points - self.own.points + counts.n_own as f64;
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
        let mut site = self.frozen.clone();
        site.add_in_place(&target);
        site.points = counts.n_own as f64;
        self.own = site;
        self.window_term = (target, n_data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Vocabulary;

    fn q0() -> Projection {
        Vocabulary::default_design(9, 2, 4)
            .expect("design")
            .initial_projection(3)
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
            site.push_block(x.as_ref(), &y).stacked().is_none(),
            "one block"
        );
        let data = site.push_block(x.as_ref(), &y);
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
        alone.push_block(x.as_ref(), &y);
        assert!(alone.push_block(x.as_ref(), &y).stacked().is_none());
        assert!(alone.recent().is_empty());
    }
}
