//! A neighbour's message arriving at an agent: validation (spec §9) and absorption. A rejected
//! message leaves the agent unchanged.

use std::sync::Arc;

use crate::protocol::agent::{Agent, FusionRule, Inbound};
use crate::protocol::event::Event;
use crate::protocol::message::{validate_excess, Body, Message, RejectReason};

/// Outcome of validating a message.
enum Verdict {
    /// New content: absorb it.
    Fresh,
    /// Bit-identical to the last accepted message from this sender.
    Repeat,
}

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
                self.last_round.insert(from, msg.header.round);
                Ok(())
            }
            Ok(Verdict::Fresh) => {
                self.accept(msg);
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

    fn validate(&self, msg: &Message) -> std::result::Result<Verdict, RejectReason> {
        let h = &msg.header;
        if h.fingerprint != self.vocab.fingerprint() {
            return Err(RejectReason::Fingerprint(h.fingerprint.short()));
        }
        if h.receiver != self.id {
            return Err(RejectReason::WrongReceiver(h.receiver));
        }
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
        match (&msg.body, self.config.fusion) {
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
                    validate_excess(&self.vocab, excess, *points)?
                }
            }
            (Body::PushSum { total }, FusionRule::PushSum { .. }) => {
                if !(total.w.is_finite() && total.points.is_finite()) {
                    return Err(RejectReason::NonFinite);
                }
                if total.w < 0.0 {
                    return Err(RejectReason::Implausible("negative push-sum weight"));
                }
                validate_excess(&self.vocab, &total.x, total.points)?;
            }
            (Body::Site, FusionRule::Tree) if self.is_fleet() => {}
            _ => return Err(RejectReason::WrongKind),
        }
        self.validate_site(msg)?;
        if let Some(p) = &msg.projection {
            let n = self.proj.n_params();
            let ok = p.theta.len() == n
                && p.m1.len() == n
                && p.m2.len() == n
                && p.weight.is_finite()
                && p.weight >= 0.0
                && p.theta
                    .iter()
                    .chain(&p.m1)
                    .chain(&p.m2)
                    .all(|v| v.is_finite())
                && p.m2.iter().all(|v| *v >= 0.0);
            if !ok {
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
                let len = self.proj.d() * self.proj.d_latent();
                if sites
                    .iter()
                    .any(|(_, s)| s.len() != len || s.shift.len() != len)
                {
                    return Err(RejectReason::BadSite(
                        "wrong length for this input dimension",
                    ));
                }
                if sites.is_ungrouped() != self.config.group.is_none() {
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

    fn accept(&mut self, msg: Message) {
        let from = msg.header.sender;
        // D_ij for j ≠ from includes what `from` sent; the message back to `from` does not.
        // (Site sums are added at send time: a site-only message leaves the cache valid.)
        if !matches!(msg.body, Body::Site) {
            self.sent_cache.retain(|k, _| *k == from);
        }
        self.last_round.insert(from, msg.header.round);
        match msg.body {
            Body::Tree { mut excess, points } => {
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
                let m = self.vocab.m();
                let entry = self.inbox.entry(from).or_insert_with(|| Inbound {
                    excess: Arc::new(crate::model::Excess::zeros(m)),
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
        self.adopt_site_view();
        let fleet_points = self.fleet_points();
        self.push_event(Event::FusedUpdated { fleet_points });
    }
}
