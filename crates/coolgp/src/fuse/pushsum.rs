//! Push-sum on the excesses for loopy or lossy graphs (spec §7, alternative 2), in the
//! running-sum form of Hadjicostis, Domínguez-García & Vaidya (2016).
//!
//! State `(x_i, ω_i)` starts at `(E_i, 1)`. Each round agent j splits its state into
//! `deg_j + 1` equal shares, keeps one and sends one to each neighbour as a *running total*
//! `σ_j += share`; receiver l adds `σ_j − ρ_lj` and remembers `ρ_lj ← σ_j`, so a lost packet
//! is delivered with the next one. Estimate: `T_g,i ≈ T0 + s · x_i/ω_i` (s agents).
//! `x_i/ω_i` is a nonnegative combination of the E_j, so every estimate is a valid posterior.
//! When E_i changes, the difference is injected into x_i (mass is conserved).
//!
//! **Pending changes.** An injected difference `δ` would count `s/ω_i ≈ s` times in agent i's
//! estimate until it has mixed, so an agent that learns between push-sum rounds (the
//! simulator fuses every 10% of the stream) would weigh its own fresh data s-fold: measured,
//! that made a fleet projection's fused model *worse* than its agents' own. Changes therefore
//! wait in [`PushSum::pending`], count once in the estimates (as under the tree rule, whose
//! view is the own value plus what neighbours last sent), and enter the mass at the next round.
//!
//! **Sites (spec §14).** In the fleet projection mode the mass has a site part too: the
//! natural-parameter sites of q(W), σ_s, σ_n, split with the same shares, summed with the same
//! running totals (so lost messages heal alike) and scaled by the same weight:
//! `Σ_i s_i ≈ s · site_i/ω_i` ([`PushSum::site_estimate`]). A change of the own site is
//! injected like a change of E_i ([`PushSum::inject_site`]). Without a site part every
//! operation is the q(u)-only one, bit for bit.
//!
//! **Fixed links.** The running totals assume each link exists from the first round on: a
//! neighbour added later would receive the sender's whole cumulative σ_j (mass created), and a
//! link removed with a lost total in flight loses that mass. Conserving mass across such
//! changes needs per-link totals and a reset handshake that the message format does not carry,
//! so the neighbour set is frozen once any total has been sent or received
//! ([`check_neighbor_change`]); a fleet whose links change uses the tree rule on its current
//! spanning tree, or restarts push-sum.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, Result};
use crate::learn::{GroupId, Site, Sites};
use crate::model::Excess;

/// One agent's share of the push-sum mass: excess, weight, represented data points and, in
/// the fleet projection mode, site sums.
#[derive(Clone, Debug, PartialEq)]
pub struct Mass {
    /// Excess part x.
    pub x: Excess,
    /// Weight ω.
    pub w: f64,
    /// Data points p (push-summed like x).
    pub points: f64,
    /// Site part per projection group (fleet projection mode; `None` otherwise). In a
    /// message it travels in [`crate::protocol::Message::sites`], so a message body's total
    /// carries `None`.
    pub site: Option<Sites>,
}

impl Mass {
    /// The zero mass (no site part).
    pub fn zeros(m: usize) -> Self {
        Self {
            x: Excess::zeros(m),
            w: 0.0,
            points: 0.0,
            site: None,
        }
    }

    /// The zero mass shaped like `self` (with a zero site part iff `self` has one).
    pub fn zeros_like(&self) -> Self {
        Self {
            site: self.site.as_ref().map(Sites::zeros_like),
            ..Self::zeros(self.x.m())
        }
    }

    /// Sets every number to zero in place (the m × m part is not reallocated: it runs every
    /// round), keeping the shape and the site groups.
    fn set_zero(&mut self) {
        for j in 0..self.x.m() {
            self.x.d1.col_as_slice_mut(j).fill(0.0);
        }
        self.x.d2.fill(0.0);
        self.w = 0.0;
        self.points = 0.0;
        if let Some(s) = &mut self.site {
            *s = s.zeros_like();
        }
    }

    fn add_scaled(&mut self, o: &Mass, c: f64) {
        self.x.add_scaled_in_place(&o.x, c);
        self.w += c * o.w;
        self.points += c * o.points;
        if let Some(os) = &o.site {
            self.site
                .get_or_insert_with(Sites::default)
                .add_scaled_in_place(os, c);
        }
    }
}

/// Running-sum push-sum state of one agent.
#[derive(Clone, Debug, PartialEq)]
pub struct PushSum {
    /// Current mass (x_i, ω_i, p_i, and the site part in the fleet projection mode).
    pub mass: Mass,
    /// Running total of everything sent (one share per round, the same to every neighbour).
    pub sent: Mass,
    /// Last running total received from each neighbour (ρ_lj).
    pub received: BTreeMap<u64, Mass>,
    /// Changes of the own excess, points and site not yet in the mass (ω part always 0):
    /// they enter it at the next round ([`PushSum::step`]) and count once in the estimates
    /// until then (module docs).
    pub pending: Mass,
}

impl PushSum {
    /// Initial state `(E_i, ω_i, n_i)`; `weight` is 1 at every agent (or 1 at one leader and
    /// 0 elsewhere when the agent count is unknown).
    pub fn new(own: Excess, weight: f64, points: f64) -> Self {
        let m = own.m();
        Self {
            mass: Mass {
                x: own,
                w: weight,
                points,
                site: None,
            },
            sent: Mass::zeros(m),
            received: BTreeMap::new(),
            pending: Mass::zeros(m),
        }
    }

    /// Adds a zero site part for the agent's projection `group` (`len` entries) to the mass
    /// and the running total sent (fleet projection mode; before any round).
    pub fn with_site(mut self, group: GroupId, len: usize) -> Self {
        self.mass.site = Some(Sites::single(group, Site::zeros(len)));
        self.sent.site = Some(Sites::single(group, Site::zeros(len)));
        self.pending.site = Some(Sites::single(group, Site::zeros(len)));
        self
    }

    /// Injects a change of the own site (`new − old`) of projection `group`; no-op without
    /// a site part.
    pub fn inject_site(&mut self, group: GroupId, delta: &Site) {
        if let Some(s) = &mut self.pending.site {
            s.add_site_scaled(group, delta, 1.0);
        }
    }

    /// Injects a change of the own excess (`new − old`) and of the own point count (into
    /// [`PushSum::pending`] until the next round).
    pub fn inject(&mut self, delta: &Excess, delta_points: f64) {
        self.pending.x.add_in_place(delta);
        self.pending.points += delta_points;
    }

    /// One round: moves the pending own changes into the mass, keeps `1/(deg + 1)` of it and
    /// returns the running total to send to every neighbour.
    pub fn step(&mut self, degree: usize) -> Mass {
        self.mass.add_scaled(&self.pending, 1.0);
        self.pending.set_zero();
        let share = 1.0 / (degree as f64 + 1.0);
        let mut kept = self.mass.zeros_like();
        kept.add_scaled(&self.mass, share);
        if degree > 0 {
            self.sent.add_scaled(&kept, 1.0);
            self.mass = kept;
        }
        self.sent.clone()
    }

    /// Receives neighbour `from`'s running total: adds `σ − ρ`, remembers `ρ ← σ`.
    pub fn receive(&mut self, from: u64, total: Mass) {
        let prev = self
            .received
            .remove(&from)
            .unwrap_or_else(|| total.zeros_like());
        let mut delta = total.clone();
        delta.add_scaled(&prev, -1.0);
        self.mass.add_scaled(&delta, 1.0);
        self.received.insert(from, total);
    }

    /// The fused data-part estimate `scale · x_i/ω_i` (`scale` = agent count, or 1 in leader
    /// mode) and the represented points; `None` while ω_i = 0.
    pub fn estimate(&self, scale: f64) -> Option<(Excess, f64)> {
        if self.mass.w <= 0.0 {
            return None;
        }
        let c = scale / self.mass.w;
        let mut x = self.mass.x.scaled(c);
        x.add_in_place(&self.pending.x);
        Some((x, self.mass.points * c + self.pending.points))
    }

    /// The fused site estimate `scale · site_i/ω_i` (fleet projection mode): the fleet's
    /// `Σ_i s_i` once the mass has mixed. `None` while ω_i = 0 or without a site part.
    pub fn site_estimate(&self, scale: f64) -> Option<Sites> {
        let site = self.mass.site.as_ref().filter(|_| self.mass.w > 0.0)?;
        let mut est = site.scaled(scale / self.mass.w);
        if let Some(p) = &self.pending.site {
            est.add_in_place(p);
        }
        Some(est)
    }
}

/// Checks that a push-sum agent may move from neighbours `old` to `new`: always when the set
/// is unchanged, and otherwise only while no running total has been sent or received (before
/// the first round with a neighbour).
///
/// # Errors
/// [`Error::InvalidConfig`] naming the added and removed neighbours.
pub fn check_neighbor_change(
    state: &PushSum,
    old: &BTreeSet<u64>,
    new: &BTreeSet<u64>,
) -> Result<()> {
    let fresh = state.received.is_empty() && state.sent == state.sent.zeros_like();
    if old == new || fresh {
        return Ok(());
    }
    let added: Vec<u64> = new.difference(old).copied().collect();
    let removed: Vec<u64> = old.difference(new).copied().collect();
    Err(Error::InvalidConfig(format!(
        "push-sum neighbours cannot change once mass has been exchanged (added {added:?}, \
         removed {removed:?}): the running totals would create or lose mass; use tree fusion \
         on the current spanning tree, or restart push-sum"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn excess(v: f64) -> Excess {
        let mut e = Excess::zeros(1);
        e.d1[(0, 0)] = v;
        e.d2[0] = v;
        e
    }

    #[test]
    fn a_pending_change_counts_once_until_the_next_round_then_mixes_conserved() {
        // Two agents on one edge, settled at Σ = 2 + 4; agent 0's own value then grows by 3.
        let mut a = PushSum::new(excess(2.0), 1.0, 0.0);
        let mut b = PushSum::new(excess(4.0), 1.0, 0.0);
        for _ in 0..60 {
            let (ta, tb) = (a.step(1), b.step(1));
            a.receive(1, tb);
            b.receive(0, ta);
        }
        let est = |p: &PushSum| p.estimate(2.0).expect("ω > 0").0.d2[0];
        assert!((est(&a) - 6.0).abs() < 1e-12);
        a.inject(&excess(3.0), 0.0);
        // Counted once (not s/ω = 2 times) before it has mixed; b has not heard of it.
        assert!((est(&a) - 9.0).abs() < 1e-12, "{}", est(&a));
        assert!((est(&b) - 6.0).abs() < 1e-12);
        for _ in 0..60 {
            let (ta, tb) = (a.step(1), b.step(1));
            a.receive(1, tb);
            b.receive(0, ta);
        }
        assert!((est(&a) - 9.0).abs() < 1e-12 && (est(&b) - 9.0).abs() < 1e-12);
        assert_eq!(a.pending, a.pending.zeros_like(), "flushed at the round");
    }
}
