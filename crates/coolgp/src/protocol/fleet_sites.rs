//! The fleet projection mode (spec §14): the fleet's q(W), σ_s, σ_n as the prior plus a sum
//! of per-agent sites, carried in the messages that carry q(u) (or on their own, more often)
//! and adopted whenever the agent's fused sums change.
//!
//! Under the tree rule the agent's view is `own site + Σ_k (what neighbour k last sent)`, the
//! same sum as q(u)'s, plus the pseudo-site of the shared q0(W) with a weight that fades with
//! the points in that sum ([`Site::with_pseudo`]): the view starts at q0 everywhere and is
//! the same function of the fleet's sums at every agent once messages have settled.
//!
//! Under push-sum the site is part of the push-sum mass ([`crate::fuse::pushsum`]): every
//! round's message carries the site part of the sender's running total, a change of the own
//! site is injected into the mass, and the view is the estimate `s · site_i/ω_i` of the
//! fleet's `Σ_i s_i` plus the same faded pseudo-site. Site-only messages are a tree-rule
//! device: under push-sum the sites travel in every push-sum round.

use crate::error::{Error, Result};
use crate::learn::elbo::BlockPsi;
use crate::learn::robust::row_weights;
use crate::learn::{GroupId, Likelihood, RecentBlocks, Site, Sites};
use crate::protocol::agent::{Agent, FusionRule, ProjectionMode, View};
use crate::protocol::message::{AgentId, Body, Message};

impl Agent {
    /// True in the fleet projection mode.
    pub(crate) fn is_fleet(&self) -> bool {
        self.config().projection == ProjectionMode::Fleet
    }

    /// The own site (fleet projection mode; empty otherwise).
    pub fn site(&self) -> &Site {
        self.fleet_site().own()
    }

    /// The key of the own site in [`Sites`]: the projection group, or
    /// [`crate::learn::UNGROUPED`].
    pub fn site_key(&self) -> GroupId {
        self.fleet_site().key()
    }

    /// True when the own excess `E_i` and the fused sums are kept in unit scale
    /// (σ_s = σ_n = 1) and scaled by the fleet's σ_s, σ_n at use: the fleet projection mode
    /// without groups. With groups, whose scales differ, each agent's excess is in its group's
    /// scales and the sums are used as they are.
    pub(crate) fn unit_scale_excess(&self) -> bool {
        self.is_fleet() && self.config().group.is_none()
    }

    /// The site sums a message to `to` carries (tree rule): the own site plus what every
    /// neighbour but `to` sent; without the own site while the agent is withheld
    /// ([`Agent::set_withheld`]).
    fn site_sums_sent(&self, to: AgentId) -> Sites {
        let own = self.fleet_site().sums();
        let own = if self.fusion().is_withheld() {
            own.zeros_like()
        } else {
            own
        };
        self.fusion().site_sums(own, Some(to))
    }

    /// The fused site sums of every projection group the agent has heard of: the sums it
    /// holds (tree rule) or its push-sum estimate of them (the own site while ω = 0).
    pub fn fused_sites(&self) -> Sites {
        self.fusion().fused_sites(self.fleet_site().sums())
    }

    /// The fused site sums the agent predicts and learns with: its own group's part of
    /// [`Agent::fused_sites`], plus the faded pseudo-site of q0 ([`Site::with_pseudo`];
    /// [`crate::learn::FleetSite::view`]).
    pub fn fused_site(&self) -> Site {
        self.fleet_site().view(&self.fused_sites())
    }

    /// Sets q(W), σ_s, σ_n from the fused sums ([`Site::projection`]); unusable sums leave
    /// them unchanged. In exact mode the own excess is recomputed under the new q(W) (in
    /// frozen mode it is a sum of statistics taken at arrival, which do not change, but with
    /// groups it is re-scaled to the group's new σ_s, σ_n).
    pub(crate) fn adopt_site_view(&mut self) {
        if !self.is_fleet() {
            return;
        }
        let proj = self.projection();
        let (dz, d) = (proj.d_latent(), proj.d());
        if let Some(p) = self.fused_site().projection(dz, d) {
            if self.learning_mut().adopt_projection(p) {
                // Exact mode recomputes under the new q(W); with groups the own excess is in
                // the group's scales, which may have changed.
                if self.learning().is_exact() || !self.unit_scale_excess() {
                    self.refresh_own(0.0);
                }
            }
        }
    }

    /// Queues a site-only message to neighbour `to` with the site sums of this agent's side
    /// of the edge (fleet projection mode, tree rule). Sites are `2·d·d' + 5` numbers, so they
    /// can travel far more often than q(u). Returns false (and sends nothing) in other modes,
    /// under push-sum (whose every round carries the sites), or when `to` is not a neighbour.
    pub fn handle_site_tick_to(&mut self, to: AgentId) -> bool {
        if !self.is_fleet()
            || self.config().fusion != FusionRule::Tree
            || !self.fusion().neighbors().contains(&to)
        {
            return false;
        }
        self.fusion_mut().next_round();
        let msg = Message {
            header: self.header(to),
            body: Body::Site,
            projection: None,
            sites: Some(self.site_sums_sent(to)),
        };
        self.queue(msg);
        true
    }

    /// [`Agent::handle_site_tick_to`] for every neighbour: one round of site messages.
    pub fn handle_site_tick(&mut self) {
        let ns: Vec<AgentId> = self.fusion().neighbors().iter().copied().collect();
        for j in ns {
            self.handle_site_tick_to(j);
        }
    }

    /// The robust likelihood's weights of a restored site window's rows: the `stored` ones
    /// ([`crate::protocol::AgentSnapshot::recent_weights`]), so the restored agent's window
    /// re-evaluations are the original's bit for bit; a snapshot without them (a checkpoint
    /// written before they were stored) has them taken again against the restored agent's
    /// fused predictive (its own if the fused q(u) cannot be factored; left at 1 if neither
    /// can), close to, not equal to, the original's. Nothing to do for a Gaussian agent or
    /// outside the fleet projection mode.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for stored weights of an agent that keeps none, or that do not
    /// hold one entry per window block and one weight in `[0, 1]` per row.
    pub(crate) fn restore_window_weights(
        &mut self,
        stored: Option<Vec<Option<Vec<f64>>>>,
    ) -> Result<()> {
        let robust = match self.config().likelihood {
            Likelihood::Robust { c } if self.is_fleet() => c,
            _ if stored.is_none() => return Ok(()),
            _ => {
                return Err(Error::InvalidConfig(
                    "snapshot site window weights for an agent that keeps none (only a \
                     robust fleet-projection agent does)"
                        .into(),
                ))
            }
        };
        let weights = match stored {
            Some(w) => Some(check_window_weights(self.fleet_site().recent(), w)?),
            None => self.retake_window_weights(robust),
        };
        if let Some(w) = weights {
            self.fleet_site_mut().recent_mut().set_weights(w);
        }
        Ok(())
    }

    /// The window's weights taken against the current fused predictive (threshold `c`);
    /// `None` for an empty window or when no q(u) factors.
    fn retake_window_weights(&self, c: f64) -> Option<Vec<Option<Vec<f64>>>> {
        if self.fleet_site().recent().is_empty() {
            return None;
        }
        let post = (self.posterior(View::Fused)).or_else(|_| self.posterior(View::Own));
        let post = post.ok()?;
        let (vocab, proj) = (self.vocabulary(), self.projection());
        let weights = (self.fleet_site().recent().blocks())
            .map(|(x, y)| {
                let bp = BlockPsi::compute(vocab, proj, x.as_ref());
                Some(row_weights(vocab, proj, &post, &bp, y, c))
            })
            .collect();
        Some(weights)
    }

    /// The site part of a q(u) message to `to`, `None` outside the fleet mode.
    pub(crate) fn site_for(&self, to: AgentId) -> Option<Sites> {
        self.is_fleet().then(|| self.site_sums_sent(to))
    }
}

/// Checks stored site window weights against the restored window: one entry per block, and
/// per weighted block one weight per row, each in `[0, 1]`.
fn check_window_weights(
    recent: &RecentBlocks,
    w: Vec<Option<Vec<f64>>>,
) -> Result<Vec<Option<Vec<f64>>>> {
    let fits = w.len() == recent.len()
        && recent.blocks().zip(&w).all(|((_, y), w)| {
            w.as_ref()
                .is_none_or(|w| w.len() == y.len() && w.iter().all(|v| (0.0..=1.0).contains(v)))
        });
    if !fits {
        return Err(Error::InvalidConfig(format!(
            "snapshot site window weights: {} entries for {} blocks, or a block whose weights \
             are not one per row in [0, 1]",
            w.len(),
            recent.len()
        )));
    }
    Ok(w)
}
