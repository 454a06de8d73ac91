//! A neighbour's message arriving at an agent: validation (spec §9) and absorption. A rejected
//! message leaves the agent unchanged.

use crate::members::bound::{cap_factor, ceiling_factor, precision, rate_factor, Scaling};
use crate::protocol::agent::Agent;
use crate::protocol::event::Event;
use crate::protocol::fusion::Verdict;
use crate::protocol::message::{Body, Message, RejectReason};

impl Agent {
    /// Validates and absorbs a neighbour's message (spec §9). A rejected message leaves the
    /// agent unchanged and is reported as [`Event::Rejected`].
    ///
    /// # Errors
    /// The [`RejectReason`].
    pub fn handle_message(&mut self, msg: Message) -> std::result::Result<(), RejectReason> {
        let from = msg.header.sender;
        match self.validate(&msg) {
            Ok(Verdict::Repeat) => {
                // Same content as the last accepted message: only the round advances.
                self.fusion_mut().note_round(from, msg.header.round);
                Ok(())
            }
            Ok(Verdict::Fresh) => {
                let m = self.vocabulary().m();
                let msg = self.bounded(msg);
                self.fusion_mut().accept(msg, m);
                self.adopt_site_view();
                let fleet_points = self.fleet_points();
                self.push_event(Event::FusedUpdated { fleet_points });
                Ok(())
            }
            Err(reason) => {
                self.push_event(Event::Rejected {
                    from,
                    reason: reason.clone(),
                });
                Err(reason)
            }
        }
    }

    /// A message within issue 29's bounds (docs/MEMBERS.md §6). A tree message's claimed rows
    /// and excess are held to the row rate ([`Agent::rate_limited`]), its excess to the
    /// ceiling ([`Agent::ceilinged`]) and to the influence cap ([`Agent::capped`]), and its
    /// site sums (fleet projection mode) are scaled as its q(u) part was
    /// ([`crate::members::bound::Scaling`]): Λ, λ and `(A, B, YY, n)` by the product of the
    /// factors, the site points by the rate's. What was done is remembered per sender and
    /// done to its site-only messages until its next tree message. A message nothing bounds
    /// (every honest one) is returned bit for bit; push-sum messages as they are.
    fn bounded(&mut self, msg: Message) -> Message {
        let from = msg.header.sender;
        let (msg, rate) = self.rate_limited(msg);
        let (msg, ceiling) = self.ceilinged(msg);
        let (mut msg, cap) = self.capped(msg);
        let scaling = match msg.body {
            Body::Tree { .. } => {
                let s = Scaling {
                    weight: rate,
                    points: rate,
                }
                .then_weight(ceiling)
                .then_weight(cap);
                self.fusion_mut().set_site_scaling(from, s);
                s
            }
            Body::Site => self.fusion().site_scaling(from),
            Body::PushSum { .. } => Scaling::NONE,
        };
        msg.sites = msg.sites.map(|sites| scaling.sites(sites));
        msg
    }

    /// A tree message with its excess scaled down to [`crate::AgentConfig::influence_cap`]
    /// times the precision per row of the rest of what this agent holds (its own excess and
    /// every other neighbour's message; [`crate::members::bound::cap_factor`]), reported as
    /// [`Event::Capped`]; any other message as it is. Returns the factor (1: untouched).
    fn capped(&mut self, mut msg: Message) -> (Message, f64) {
        let Some(ratio) = self.config().influence_cap else {
            return (msg, 1.0);
        };
        let from = msg.header.sender;
        let Body::Tree { excess, points } = &mut msg.body else {
            return (msg, 1.0);
        };
        let mut rest = (precision(self.fusion().own()), self.n_own() as f64);
        for (k, ib) in self.fusion().inbox() {
            if *k != from {
                rest.0 += precision(&ib.excess);
                rest.1 += ib.points;
            }
        }
        let Some(factor) = cap_factor((precision(excess), *points), rest, ratio) else {
            return (msg, 1.0);
        };
        *excess = std::sync::Arc::new(excess.scaled(factor));
        self.push_event(Event::Capped { from, factor });
        (msg, factor)
    }

    /// A tree message whose precision exceeds what its claimed rows can carry
    /// ([`crate::members::bound::ceiling_factor`]: `tr(D1) ≤ m · points` in unit scale),
    /// scaled down to it and reported as [`Event::Capped`]; any other message, and every
    /// message where the excess is not in unit scale (outside the fleet projection mode, or
    /// with projection groups), as it is. Always on: no honest message can exceed it.
    /// Returns the factor (1: untouched).
    fn ceilinged(&mut self, mut msg: Message) -> (Message, f64) {
        if !self.unit_scale_excess() {
            return (msg, 1.0);
        }
        let m = self.vocabulary().m();
        let from = msg.header.sender;
        let Body::Tree { excess, points } = &mut msg.body else {
            return (msg, 1.0);
        };
        let Some(factor) = ceiling_factor(precision(excess), *points, m) else {
            return (msg, 1.0);
        };
        *excess = std::sync::Arc::new(excess.scaled(factor));
        self.push_event(Event::Capped { from, factor });
        (msg, factor)
    }

    /// A tree message with its claimed rows and excess scaled down to what
    /// [`crate::AgentConfig::row_rate`] allows since the sender's last accepted message
    /// ([`crate::members::bound::rate_factor`]), reported as [`Event::RateCapped`]; any other
    /// message as it is. Returns the factor (1: untouched).
    fn rate_limited(&mut self, mut msg: Message) -> (Message, f64) {
        let Some(rate) = self.config().row_rate else {
            return (msg, 1.0);
        };
        let from = msg.header.sender;
        let (base, elapsed) = match self.fusion().accepted_at(from) {
            Some(at) => (
                self.fusion().inbox().get(&from).map_or(0.0, |ib| ib.points),
                self.fusion().round().saturating_sub(at),
            ),
            None => (0.0, msg.header.round),
        };
        let Body::Tree { excess, points } = &mut msg.body else {
            return (msg, 1.0);
        };
        let Some((factor, allowed)) = rate_factor(*points, base, elapsed, rate) else {
            return (msg, 1.0);
        };
        let claimed = *points;
        *excess = std::sync::Arc::new(excess.scaled(factor));
        *points = allowed;
        self.push_event(Event::RateCapped {
            from,
            claimed,
            allowed,
        });
        (msg, factor)
    }

    /// The checks of spec §9, in order: the vocabulary's fingerprint, the receiver, then the
    /// fusion state's (sender, round, payload; [`crate::protocol::fusion::Fusion::check`]),
    /// the site sums and the projection sums.
    fn validate(&self, msg: &Message) -> std::result::Result<Verdict, RejectReason> {
        let h = &msg.header;
        if h.fingerprint != self.vocabulary().fingerprint() {
            return Err(RejectReason::Fingerprint(h.fingerprint.short()));
        }
        if h.receiver != self.id() {
            return Err(RejectReason::WrongReceiver(h.receiver));
        }
        if let Verdict::Repeat = self
            .fusion()
            .check(msg, self.vocabulary(), self.is_fleet())?
        {
            return Ok(Verdict::Repeat);
        }
        self.validate_site(msg)?;
        if let Some(p) = &msg.projection {
            if !p.is_valid(self.projection().n_params()) {
                return Err(RejectReason::BadProjection);
            }
        }
        Ok(Verdict::Fresh)
    }

    /// The fleet projection mode requires valid site sums in every message (tree sums, or the
    /// site part of a push-sum running total); other modes accept none.
    fn validate_site(&self, msg: &Message) -> std::result::Result<(), RejectReason> {
        match (&msg.sites, self.is_fleet()) {
            (None, false) => Ok(()),
            (Some(_), false) => Err(RejectReason::BadSite(
                "site sums outside the fleet projection mode",
            )),
            (None, true) => Err(RejectReason::BadSite(
                "missing in the fleet projection mode",
            )),
            (Some(sites), true) => {
                let len = self.projection().d() * self.projection().d_latent();
                if sites
                    .iter()
                    .any(|(_, s)| s.len() != len || s.shift.len() != len)
                {
                    return Err(RejectReason::BadSite(
                        "wrong length for this input dimension",
                    ));
                }
                if sites.is_ungrouped() != self.config().group.is_none() {
                    return Err(RejectReason::BadSite(if sites.is_ungrouped() {
                        "sums of a fleet without projection groups; this agent has a group"
                    } else {
                        "sums of projection groups; this agent has none"
                    }));
                }
                if sites.is_valid(len) {
                    Ok(())
                } else {
                    Err(RejectReason::BadSite(
                        "no group, too many groups, a non-finite value, a negative precision or count",
                    ))
                }
            }
        }
    }
}
