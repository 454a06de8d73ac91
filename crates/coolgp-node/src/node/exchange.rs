//! The exchange with the neighbours: each round, absorb, checkpoint if due, tick and publish
//! the agent's messages; between rounds, verify, screen and deliver what arrived.

use std::sync::Arc;
use std::time::Instant;

use coolgp::protocol::codec;
use coolgp::protocol::{Body, Message};

use super::{Node, Peers};
use crate::error::Result;
use crate::inbound::{Inbound, Raw};

/// Received messages handled before the loop looks at its timer and queries again.
const DRAIN_BUDGET: usize = 256;
/// Accepted (round, version) pairs remembered per sender for duplicate detection.
const SEEN_PER_SENDER: usize = 32;

impl Peers {
    /// True when `msg` is a tree message with the same payload as the last one published to
    /// its receiver, fewer than `resend_every` rounds before round `now` (the agent keeps an
    /// unchanged payload in the same `Arc`). Otherwise records it as published now. Push-sum
    /// messages always go out: each carries a share of the mass.
    fn hold_unchanged(&mut self, msg: &Message, now: u64, resend_every: u64) -> bool {
        let Body::Tree { excess, .. } = &msg.body else {
            return false;
        };
        let to = msg.header.receiver;
        if let Some((prev, at)) = self.last_published.get(&to) {
            if Arc::ptr_eq(prev, excess) && now - at < resend_every {
                return true;
            }
        }
        self.last_published.insert(to, (Arc::clone(excess), now));
        false
    }
}

impl Peers {
    /// Forgets what went to a neighbour that has (re)joined since the last round (a new
    /// liveliness token: a restart, a link healed), so that its unchanged message goes out to
    /// it at once rather than at the next `--resend-every` turn.
    fn resend_to_rejoined(&mut self) {
        let Ok(m) = self.members.lock() else {
            return;
        };
        for &j in self.publishers.keys() {
            let alive = m.contains(&j);
            if alive && !self.alive_seen.contains(&j) {
                self.last_published.remove(&j);
            }
            if alive {
                self.alive_seen.insert(j);
            } else {
                self.alive_seen.remove(&j);
            }
        }
    }
}

impl Node {
    /// One round: absorb blocks, checkpoint (after absorbing, or when the round lease runs
    /// out), tick the agent and publish what it sends.
    pub(super) async fn on_round(&mut self) -> Result<()> {
        let absorbed = self.pull_blocks();
        let durable = self.s.state.is_some();
        let lease_due = self.agent.round()
            >= self
                .durability
                .last_ckpt_round
                .saturating_add(self.s.checkpoint_every);
        if absorbed > 0 || (durable && lease_due && self.lease_needed()) {
            self.checkpoint()?;
        }
        self.agent.handle_tick();
        self.refresh_coverage();
        self.traffic.rounds_run += 1;
        self.publish().await;
        self.progress.drain_events(&mut self.agent);
        Ok(())
    }

    /// Publishes the agent's outgoing messages (signed with `--tls`), holding back unchanged
    /// tree messages (`--resend-every`).
    async fn publish(&mut self) {
        self.peers.resend_to_rejoined();
        while let Some(msg) = self.agent.poll_transmit() {
            let to = msg.header.receiver;
            let now = self.traffic.rounds_run;
            if self.peers.hold_unchanged(&msg, now, self.s.resend_every) {
                self.traffic.messages_unchanged_held += 1;
                continue;
            }
            let bytes = match &self.peers.auth {
                Some(a) => a.signer.seal(codec::encode(&msg)),
                None => codec::encode(&msg),
            };
            let Some(p) = self.peers.publishers.get(&to) else {
                continue;
            };
            let len = bytes.len() as u64;
            let bytes = zenoh::bytes::ZBytes::from(bytes);
            match p.put(bytes.clone()).await {
                Ok(()) => {
                    self.traffic.messages_sent += 1;
                    self.traffic.bytes_sent += len;
                    self.peers.last_sent.insert(to, bytes);
                }
                Err(e) => tracing::warn!(to, error = %e, "publishing failed"),
            }
        }
    }

    /// Handles up to [`DRAIN_BUDGET`] queued messages, logging the oversize ones dropped.
    pub(super) fn drain_inbound(&mut self, inbound: &Inbound) {
        for o in inbound.take_oversize() {
            // Counted by the queues (`rejected.oversize`); logged here, rate-limited.
            self.peers.rejects.log(
                o.key_from,
                "oversize",
                &format_args!(
                    "payload of {} bytes dropped unread: longer than any valid message ({} bytes)",
                    o.len, o.max_len
                ),
            );
        }
        for _ in 0..DRAIN_BUDGET {
            match inbound.pop() {
                Some(raw) => self.handle_raw(raw),
                None => return,
            }
        }
        // More is waiting: come back after the timer and the queries had a chance.
        inbound.notify.notify_one();
    }

    fn handle_raw(&mut self, raw: Raw) {
        self.traffic.messages_received += 1;
        self.traffic.bytes_received += raw.bytes.len() as u64;
        let Some(msg) = self.screen(raw) else {
            return;
        };
        let sender = msg.header.sender;
        let key = (msg.header.round, msg.header.version);
        match self.agent.handle_message(msg) {
            Ok(()) => {
                self.traffic.messages_accepted += 1;
                self.peers.last_heard.insert(sender, Instant::now());
                let s = self.peers.seen.entry(sender).or_default();
                s.push_back(key);
                if s.len() > SEEN_PER_SENDER {
                    s.pop_front();
                }
                self.note_fused_change();
            }
            Err(reason) => {
                self.peers
                    .rejects
                    .record(Some(sender), reason.label(), &reason);
            }
        }
        self.progress.drain_events(&mut self.agent);
    }

    /// The message in `raw` if it may reach the agent: signed by a fleet member (`--tls`),
    /// decodable, from the sender its key names, of our projection group (`--fuse-groups
    /// within`), and not a duplicate. Otherwise records the reject and returns `None`.
    fn screen(&mut self, raw: Raw) -> Option<Message> {
        let rejects = &mut self.peers.rejects;
        // Origin first: in a TLS fleet nothing unsigned or forged reaches the codec or agent.
        let bytes = match self.peers.auth.as_mut() {
            Some(a) => match a.roster.verify(&raw.bytes) {
                Ok(b) => b,
                Err(e) => {
                    rejects.record(raw.key_from, "signature", &e);
                    return None;
                }
            },
            None => raw.bytes,
        };
        let msg = match codec::decode(&bytes) {
            Ok(m) => m,
            Err(reason) => {
                rejects.record(raw.key_from, reason.label(), &reason);
                return None;
            }
        };
        let sender = msg.header.sender;
        if raw.key_from != Some(sender) {
            rejects.record(
                raw.key_from,
                "key_mismatch",
                &format_args!("key names sender {:?}, header {}", raw.key_from, sender),
            );
            return None;
        }
        if self.s.fuse_within {
            let own = self.agent.site_key();
            if let Some(g) = msg
                .sites
                .as_ref()
                .and_then(|s| s.iter().find(|(g, _)| *g != own))
            {
                rejects.record(
                    Some(sender),
                    "foreign_group",
                    &format_args!(
                        "sums of projection group {:#x} under --fuse-groups within",
                        g.0
                    ),
                );
                return None;
            }
        }
        let key = (msg.header.round, msg.header.version);
        if self
            .peers
            .seen
            .get(&sender)
            .is_some_and(|s| s.contains(&key))
        {
            if self.heal.pulled_from(sender) {
                // Both paths delivered it: the pull and the subscription (node/heal.rs). Not
                // a replay, not a reject.
                tracing::debug!(sender, round = key.0, "a pulled message arrived twice");
                return None;
            }
            rejects.record(
                Some(sender),
                "duplicate",
                &format_args!("round {} v{} again", key.0, key.1),
            );
            return None;
        }
        Some(msg)
    }
}
