//! One agent's fusion state (spec §7): its own excess `E_i` kept apart from what neighbours
//! sent, the neighbours, the last message from each (tree rule) or the push-sum mass, the last
//! accepted round per sender, and the tree messages of the last tick.
//!
//! The fused view is `E_i + Σ_k D_ki` under the tree rule and the push-sum estimate otherwise;
//! in the fleet projection mode the site sums of the fleet's q(W) travel and add up the same
//! way ([`Fusion::site_sums`], [`Fusion::fused_sites`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::error::Result;
use crate::fuse::{tree, Mass, PushSum};
use crate::learn::{GroupId, Site, Sites};
use crate::members::bound::Scaling;
use crate::model::{Excess, Vocabulary};
use crate::protocol::config::FusionRule;
use crate::protocol::message::{
    validate_excess, AgentId, Body, Message, ProjectionShare, RejectReason,
};

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

/// Outcome of the fusion checks of a message.
pub(crate) enum Verdict {
    /// New content: absorb it (after the remaining checks).
    Fresh,
    /// Bit-identical to the last accepted message from this sender.
    Repeat,
}

/// The fusion state of one agent (module docs).
#[derive(Clone, Debug)]
pub(crate) struct Fusion {
    /// The fusion rule.
    rule: FusionRule,
    /// Own excess `E_i`; unit scale (σ_s = σ_n = 1) in the fleet projection mode without
    /// groups.
    own: Excess,
    /// Rounds ticked.
    round: u64,
    neighbors: BTreeSet<AgentId>,
    /// Tree rule: the last message accepted from each neighbour.
    inbox: BTreeMap<AgentId, Inbound>,
    pushsum: PushSum,
    last_round: BTreeMap<AgentId, u64>,
    /// Tree messages of the last tick, reused while neither E_i nor the inbox changed
    /// (derived state: not in snapshots).
    sent_cache: BTreeMap<AgentId, TreeMessage>,
    /// Tree rule: this agent's round when it last accepted each neighbour's q(u) message (the
    /// row rate's clock, [`crate::members::bound::rate_factor`]; derived state: not in
    /// snapshots, so a restored agent times each neighbour's next message by its header).
    accepted_at: BTreeMap<AgentId, u64>,
    /// Tree rule, fleet projection mode: what issue 29's bounds did to the last tree message
    /// accepted from each neighbour, done to its site-only messages until its next one
    /// (absent: nothing; derived state: not in snapshots, so after a restore a neighbour's
    /// site-only messages are taken as they come until its next tree message).
    site_scaling: BTreeMap<AgentId, Scaling>,
    /// Withheld (issue 29): messages carry none of `E_i` and none of the own points; under
    /// push-sum the mass holds none of them (in snapshots: the mass depends on it).
    withheld: bool,
}

impl Fusion {
    /// No neighbours, `E_i = 0` over `m` inducing inputs; under push-sum with a zero site
    /// part of `site = (group, len)` (fleet projection mode).
    pub(crate) fn new(rule: FusionRule, m: usize, site: Option<(GroupId, usize)>) -> Self {
        let weight = match rule {
            FusionRule::PushSum { weight, .. } => weight,
            FusionRule::Tree => 1.0,
        };
        let mut pushsum = PushSum::new(Excess::zeros(m), weight, 0.0);
        if let (Some((group, len)), FusionRule::PushSum { .. }) = (site, rule) {
            pushsum = pushsum.with_site(group, len);
        }
        Self {
            rule,
            own: Excess::zeros(m),
            round: 0,
            neighbors: BTreeSet::new(),
            inbox: BTreeMap::new(),
            pushsum,
            last_round: BTreeMap::new(),
            sent_cache: BTreeMap::new(),
            accepted_at: BTreeMap::new(),
            site_scaling: BTreeMap::new(),
            withheld: false,
        }
    }

    /// Sets the withheld flag of a snapshot (the restored mass already reflects it).
    pub(crate) fn restore_withheld(&mut self, on: bool) {
        self.withheld = on;
    }

    /// True while the own data is withheld from messages ([`Fusion::set_withheld`]).
    pub(crate) fn is_withheld(&self) -> bool {
        self.withheld
    }

    /// Withholds the own data from every message from now on (`on`), or sends it again
    /// (`n_own` own points). Under push-sum the own excess and points leave the mass (or
    /// re-enter it) as a change injected like any other (conserved): the running totals then
    /// converge to the fleet's sums without this agent, and its own estimate lacks its data
    /// too. Returns true when the state changed.
    pub(crate) fn set_withheld(&mut self, on: bool, n_own: usize) -> bool {
        if self.withheld == on {
            return false;
        }
        if self.is_push_sum() {
            let sign = if on { -1.0 } else { 1.0 };
            self.pushsum
                .inject(&self.own.scaled(sign), sign * n_own as f64);
        }
        self.withheld = on;
        self.sent_cache.clear();
        true
    }

    /// Sets a snapshot's round, neighbours, inbox, push-sum state and last rounds (checked
    /// by the caller).
    pub(crate) fn restore(
        &mut self,
        round: u64,
        neighbors: BTreeSet<AgentId>,
        inbox: BTreeMap<AgentId, Inbound>,
        pushsum: PushSum,
        last_round: BTreeMap<AgentId, u64>,
    ) {
        self.round = round;
        self.neighbors = neighbors;
        self.inbox = inbox;
        self.pushsum = pushsum;
        self.last_round = last_round;
    }

    /// True under push-sum.
    pub(crate) fn is_push_sum(&self) -> bool {
        matches!(self.rule, FusionRule::PushSum { .. })
    }

    /// Own excess `E_i`.
    pub(crate) fn own(&self) -> &Excess {
        &self.own
    }

    /// Replaces `E_i` by `e`, `new_points` more own points than before: under push-sum the
    /// change enters the mass (conserved). The tree messages are then out of date.
    pub(crate) fn set_own(&mut self, e: Excess, new_points: f64) {
        // Withheld under push-sum: the mass holds none of the own data (set_withheld).
        if self.is_push_sum() && !self.withheld {
            let mut delta = e.clone();
            delta.add_scaled_in_place(&self.own, -1.0);
            self.pushsum.inject(&delta, new_points);
        }
        self.own = e;
        self.sent_cache.clear();
    }

    /// Sets `E_i` as recomputed from restored caches (the mass already holds it).
    pub(crate) fn restore_own(&mut self, e: Excess) {
        self.own = e;
    }

    /// Rounds ticked.
    pub(crate) fn round(&self) -> u64 {
        self.round
    }

    /// This agent's round when it last accepted `from`'s q(u) message (tree rule; `None`
    /// before the first since this agent started or was restored).
    pub(crate) fn accepted_at(&self, from: AgentId) -> Option<u64> {
        self.accepted_at.get(&from).copied()
    }

    /// What the bounds did to the last tree message accepted from `from`
    /// ([`Scaling::NONE`] before any, and while nothing was scaled).
    pub(crate) fn site_scaling(&self, from: AgentId) -> Scaling {
        self.site_scaling
            .get(&from)
            .copied()
            .unwrap_or(Scaling::NONE)
    }

    /// Remembers what the bounds did to `from`'s tree message now being accepted.
    pub(crate) fn set_site_scaling(&mut self, from: AgentId, s: Scaling) {
        if s.is_none() {
            self.site_scaling.remove(&from);
        } else {
            self.site_scaling.insert(from, s);
        }
    }

    /// Counts one more round (one tick, or one message sent on its own).
    pub(crate) fn next_round(&mut self) {
        self.round += 1;
    }

    /// The neighbours, ascending.
    pub(crate) fn neighbors(&self) -> &BTreeSet<AgentId> {
        &self.neighbors
    }

    /// Sets the neighbours `ids` (see [`crate::Agent::set_neighbors`]).
    ///
    /// # Errors
    /// As [`crate::fuse::pushsum::check_neighbor_change`]; the state is then unchanged.
    pub(crate) fn set_neighbors(&mut self, ids: BTreeSet<AgentId>) -> Result<()> {
        if self.is_push_sum() {
            crate::fuse::pushsum::check_neighbor_change(&self.pushsum, &self.neighbors, &ids)?;
        }
        self.neighbors = ids;
        let keep = &self.neighbors;
        self.inbox.retain(|k, _| keep.contains(k));
        self.sent_cache.clear();
        Ok(())
    }

    /// Neighbours from which a message has been accepted.
    pub(crate) fn neighbors_heard(&self) -> usize {
        self.last_round
            .keys()
            .filter(|k| self.neighbors.contains(k))
            .count()
    }

    /// The last message accepted from each neighbour (tree rule).
    pub(crate) fn inbox(&self) -> &BTreeMap<AgentId, Inbound> {
        &self.inbox
    }

    /// The push-sum state.
    pub(crate) fn pushsum(&self) -> &PushSum {
        &self.pushsum
    }

    /// Last accepted round per sender.
    pub(crate) fn last_rounds(&self) -> &BTreeMap<AgentId, u64> {
        &self.last_round
    }

    /// The fused data part and the points it represents, with `n_own` own points.
    pub(crate) fn fused_excess(&self, n_own: usize) -> (Excess, f64) {
        match self.rule {
            FusionRule::Tree => {
                let mut e = self.own.clone();
                let mut pts = n_own as f64;
                for ib in self.inbox.values() {
                    e.add_in_place(&ib.excess);
                    pts += ib.points;
                }
                (e, pts)
            }
            FusionRule::PushSum { agents, .. } => self
                .pushsum
                .estimate(agents)
                .unwrap_or_else(|| (self.own.clone(), n_own as f64)),
        }
    }

    /// Data points represented in the fused model, with `n_own` own points.
    pub(crate) fn fleet_points(&self, n_own: usize) -> f64 {
        match self.rule {
            FusionRule::Tree => n_own as f64 + self.inbox.values().map(|i| i.points).sum::<f64>(),
            FusionRule::PushSum { agents, .. } => self
                .pushsum
                .estimate(agents)
                .map_or(n_own as f64, |(_, p)| p),
        }
    }

    /// Tree rule: the payload of the message to neighbour `to`, `D_ij = E_i + Σ_{k≠j} D_ki`
    /// with the points it represents and the projection sums over this side of the edge
    /// (`share`: this agent's term, shared projection modes); reused from the last tick while
    /// neither `E_i` nor the inbox changed.
    pub(crate) fn tree_payload(
        &mut self,
        to: AgentId,
        n_own: usize,
        share: Option<&ProjectionShare>,
    ) -> TreeMessage {
        if let Some((e, p, pr)) = self.sent_cache.get(&to) {
            return (Arc::clone(e), *p, pr.clone());
        }
        let received = self.inbox.iter().map(|(k, v)| (k, &*v.excess));
        let (excess, n_own) = if self.withheld {
            let zero = Excess::zeros(self.own.d2.len());
            (tree::message_to(&zero, received, &to), 0)
        } else {
            (tree::message_to(&self.own, received, &to), n_own)
        };
        let others = self.inbox.iter().filter(|(k, _)| **k != to);
        let points = n_own as f64 + others.clone().map(|(_, v)| v.points).sum::<f64>();
        let projection = share.map(|own| {
            let mut s = own.clone();
            for p in others.filter_map(|(_, v)| v.projection.as_ref()) {
                s.add_in_place(p);
            }
            s
        });
        let m = (Arc::new(excess), points, projection);
        self.sent_cache
            .insert(to, (Arc::clone(&m.0), m.1, m.2.clone()));
        m
    }

    /// Push-sum: one round's running total, after keeping one share ([`PushSum::step`]).
    pub(crate) fn pushsum_step(&mut self) -> Mass {
        self.pushsum.step(self.neighbors.len())
    }

    /// Push-sum: a change of the own site enters the mass (conserved), as `E_i`'s does.
    pub(crate) fn inject_site(&mut self, group: GroupId, delta: &Site) {
        self.pushsum.inject_site(group, delta);
    }

    /// `own` (this agent's site sums) plus the site sums received from every neighbour but
    /// `exclude` (tree rule: what a message to `exclude` carries).
    pub(crate) fn site_sums(&self, own: Sites, exclude: Option<AgentId>) -> Sites {
        let mut s = own;
        for (k, v) in &self.inbox {
            if Some(*k) != exclude {
                if let Some(sites) = &v.sites {
                    s.add_in_place(sites);
                }
            }
        }
        s
    }

    /// The fused site sums of every group heard of: [`Fusion::site_sums`] over every
    /// neighbour (tree rule) or the push-sum estimate (`own` while ω = 0).
    pub(crate) fn fused_sites(&self, own: Sites) -> Sites {
        match self.rule {
            FusionRule::Tree => self.site_sums(own, None),
            FusionRule::PushSum { agents, .. } => self.pushsum.site_estimate(agents).unwrap_or(own),
        }
    }

    /// `own` plus the projection sums last received from every neighbour (shared
    /// projection modes).
    pub(crate) fn projection_total(&self, own: ProjectionShare) -> ProjectionShare {
        let mut total = own;
        for v in self.inbox.values() {
            if let Some(p) = &v.projection {
                total.add_in_place(p);
            }
        }
        total
    }

    /// The fusion checks of a message (spec §9), in order: a known sender, a newer round, a
    /// body of this rule's kind with a valid excess (`fleet`: site-only messages are
    /// accepted). A tree message bit-identical to the last accepted one is a
    /// [`Verdict::Repeat`].
    pub(crate) fn check(
        &self,
        msg: &Message,
        vocab: &Vocabulary,
        fleet: bool,
    ) -> std::result::Result<Verdict, RejectReason> {
        let h = &msg.header;
        if !self.neighbors.contains(&h.sender) {
            return Err(RejectReason::UnknownSender(h.sender));
        }
        if let Some(&last) = self.last_round.get(&h.sender) {
            if h.round <= last {
                return Err(RejectReason::Stale {
                    round: h.round,
                    last,
                });
            }
        }
        match (&msg.body, self.rule) {
            (Body::Tree { excess, points }, FusionRule::Tree) => {
                // Messages are re-sent every round and, once the fleet has converged, repeat
                // the last accepted one bit for bit: that content was validated already.
                let unchanged = self.inbox.get(&h.sender).is_some_and(|ib| {
                    ib.points.to_bits() == points.to_bits()
                        && (Arc::ptr_eq(&ib.excess, excess) || ib.excess.exact_eq(excess))
                });
                if unchanged {
                    let same_sums = self
                        .inbox
                        .get(&h.sender)
                        .is_some_and(|ib| ib.projection == msg.projection && ib.sites == msg.sites);
                    if same_sums {
                        return Ok(Verdict::Repeat);
                    }
                } else {
                    validate_excess(vocab, excess, *points)?
                }
            }
            (Body::PushSum { total }, FusionRule::PushSum { .. }) => {
                if !(total.w.is_finite() && total.points.is_finite()) {
                    return Err(RejectReason::NonFinite);
                }
                if total.w < 0.0 {
                    return Err(RejectReason::Implausible("negative push-sum weight"));
                }
                validate_excess(vocab, &total.x, total.points)?;
            }
            (Body::Site, FusionRule::Tree) if fleet => {}
            _ => return Err(RejectReason::WrongKind),
        }
        Ok(Verdict::Fresh)
    }

    /// A repeated message from `from`: only its round advances, and its claim's (issue 29's
    /// row rate): a sender that repeats its claim says it has no more rows at this round, so
    /// the rows a later claim may add are counted from here, not from the claim's first
    /// arrival (else a member could repeat a claim for a while and then jump by all the
    /// rounds it waited).
    pub(crate) fn note_round(&mut self, from: AgentId, round: u64) {
        self.last_round.insert(from, round);
        if let Some(at) = self.accepted_at.get_mut(&from) {
            *at = self.round;
        }
    }

    /// Absorbs a checked message (`m` inducing inputs).
    pub(crate) fn accept(&mut self, msg: Message, m: usize) {
        let from = msg.header.sender;
        // D_ij for j ≠ from includes what `from` sent; the message back to `from` does not.
        // (Site sums are added at send time: a site-only message leaves the cache valid.)
        if !matches!(msg.body, Body::Site) {
            self.sent_cache.retain(|k, _| *k == from);
        }
        self.last_round.insert(from, msg.header.round);
        match msg.body {
            Body::Tree { mut excess, points } => {
                self.accepted_at.insert(from, self.round);
                // Validation allows asymmetry up to 1e-9·scale; stored state is exactly symmetric.
                if !excess.is_exactly_symmetric() {
                    Arc::make_mut(&mut excess).symmetrize_in_place();
                }
                self.inbox.insert(
                    from,
                    Inbound {
                        excess,
                        points,
                        projection: msg.projection,
                        sites: msg.sites,
                    },
                );
            }
            Body::Site => {
                // Only the sums of the fleet's q(W) change; q(u) as last heard (none yet: zero).
                let entry = self.inbox.entry(from).or_insert_with(|| Inbound {
                    excess: Arc::new(Excess::zeros(m)),
                    points: 0.0,
                    projection: None,
                    sites: None,
                });
                entry.sites = msg.sites;
            }
            Body::PushSum { mut total } => {
                total.x.symmetrize_in_place();
                // Fleet projection mode: the site part of the running total (validated).
                total.site = msg.sites;
                self.pushsum.receive(from, total)
            }
        }
    }
}
