//! Routes that zenoh lost, declared again, and messages pulled past them. In three of about
//! twenty 1,000-agent runs (issue 31, EXPERIMENTS.md "Massive fleets") the peers' routes of a
//! few dozen agents' subscriptions were lost while the hosts started under load: those agents
//! never received a message from their neighbours on one other host, although every side was
//! alive. A neighbour that is alive (its liveliness token is seen) and sends every
//! `--resend-every` rounds at the least, yet has not been heard for [`SILENT_RESENDS`] of
//! them, means such a loss. The node then
//! - declares its inbox subscriber and its publisher to that neighbour again, so that zenoh
//!   propagates them anew, and sends its message to it at once;
//! - **pulls** the neighbour's last message to it: a status query `?msg=<own id>` on the
//!   neighbour's key, answered with the very bytes the neighbour last published to it (signed
//!   with `--tls`), which enter the inbox as if they had arrived by the subscription (the same
//!   screening: signature, sender, duplicates). A query travels on the neighbour's queryable's
//!   declaration, made at its start, and its reply on the query's path, so the pull reaches a
//!   neighbour whose subscription route was lost. In run 17 the routes of one direction were
//!   lost after two re-declarations; a pulled neighbour is heard, so it is pulled again at the
//!   next silence.
//!
//! Each neighbour's attempts back off (doubling, up to [`MAX_BACKOFF`] times the first wait)
//! while it stays unheard; `status.routes_redeclared` counts the attempts and
//! `status.messages_pulled` the messages the pulls brought.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zenoh::qos::CongestionControl;
use zenoh::query::Query;

use super::{session::Endpoints, Node};
use crate::inbound::Inbound;
use crate::keys;

/// Resend periods (or [`MIN_SILENT_ROUNDS`] rounds, whichever is longer) a live neighbour may
/// stay unheard before the routes to and from it are declared again.
pub const SILENT_RESENDS: u64 = 3;

/// The shortest silence, in rounds, that counts.
pub const MIN_SILENT_ROUNDS: u64 = 30;

/// The longest wait between two attempts for one neighbour, in multiples of the first.
pub const MAX_BACKOFF: u32 = 64;

/// How long a pull waits for the neighbour's reply.
const PULL_TIMEOUT: Duration = Duration::from_secs(2);

/// The healing's state on a node.
pub(super) struct Heal {
    /// When the node started listening (a neighbour never heard counts from here).
    started: Instant,
    /// Per neighbour: when its routes were last declared again, and how often so far.
    tried: BTreeMap<u64, (Instant, u32)>,
    /// Routes declared again (status `routes_redeclared`).
    pub(super) count: u64,
    /// Messages the pulls brought (status `messages_pulled`; counted by the replies'
    /// callbacks).
    pulled: Arc<AtomicU64>,
}

impl Heal {
    /// A node's state at its start.
    pub(super) fn new() -> Self {
        Self {
            started: Instant::now(),
            tried: BTreeMap::new(),
            count: 0,
            pulled: Arc::default(),
        }
    }

    /// Whether neighbour `j`'s message was ever pulled: its message may then arrive twice,
    /// by the pull and by the subscription, and the second copy is no replay.
    pub(super) fn pulled_from(&self, j: u64) -> bool {
        self.tried.contains_key(&j)
    }

    /// Messages the pulls brought so far.
    pub(super) fn pulled(&self) -> u64 {
        self.pulled.load(Ordering::Relaxed)
    }

    /// Whether neighbour `j`, last heard at `heard` (`None`: never), is due: silent for
    /// longer than `silence`, and its back-off since the last attempt has passed.
    fn due(&self, j: u64, heard: Option<Instant>, silence: Duration, now: Instant) -> bool {
        let since = heard.unwrap_or(self.started);
        if now.saturating_duration_since(since) < silence {
            return false;
        }
        match self.tried.get(&j) {
            // Not heard since the last attempt: wait out the back-off.
            Some(&(at, n)) if at >= since => {
                let wait = silence * 2u32.saturating_pow(n).min(MAX_BACKOFF);
                now.saturating_duration_since(at) >= wait
            }
            // Never tried, or heard since (that attempt worked): silent long enough.
            _ => true,
        }
    }
}

impl Node {
    /// After a round: declares the routes to and from each live neighbour unheard for too
    /// long again (module doc). A declaration zenoh refuses is logged and tried again later.
    pub(super) async fn heal_routes(&mut self, endpoints: &mut Endpoints) {
        let every = self.s.resend_every.max(1).saturating_mul(SILENT_RESENDS);
        let silence =
            self.s.round * u32::try_from(every.max(MIN_SILENT_ROUNDS)).unwrap_or(u32::MAX);
        let now = Instant::now();
        let alive: Vec<u64> = match self.peers.members.lock() {
            Ok(m) => self
                .s
                .neighbors
                .iter()
                .copied()
                .filter(|j| m.contains(j))
                .collect(),
            Err(_) => return,
        };
        let due: Vec<u64> = alive
            .into_iter()
            .filter(|j| {
                let heard = self.peers.last_heard.get(j).copied();
                self.heal.due(*j, heard, silence, now)
            })
            .collect();
        if due.is_empty() {
            return;
        }
        let (fleet, id) = (self.s.fleet.clone(), self.s.id);
        let inbound = std::sync::Arc::clone(&self.peers.inbound);
        if let Err(e) = endpoints.redeclare_inbox(&fleet, id, inbound).await {
            tracing::warn!(error = %e, "declaring the inbox again failed");
        }
        for j in due {
            let n = self.heal.tried.get(&j).map_or(0, |t| t.1);
            self.heal.tried.insert(j, (now, n.saturating_add(1)));
            self.heal.count += 1;
            tracing::warn!(
                neighbour = j,
                silent_s = silence.as_secs_f64(),
                attempt = n + 1,
                "a live neighbour unheard for too long: declaring the routes to and from it again"
            );
            self.pull(endpoints, j).await;
            match endpoints.publisher(&fleet, (id, j)).await {
                Ok(p) => {
                    self.peers.publishers.insert(j, p);
                    // Its message goes out at once, not at the next resend.
                    self.peers.last_published.remove(&j);
                }
                Err(e) => {
                    tracing::warn!(neighbour = j, error = %e, "declaring the publisher again failed")
                }
            }
        }
    }
}

impl Node {
    /// Asks neighbour `j` for its last message to this node (module doc): a droppable status
    /// query `?msg=<id>`; the reply's bytes go to the inbox as `j`'s, screened as any message.
    async fn pull(&self, endpoints: &Endpoints, j: u64) {
        let selector = format!("{}?msg={}", keys::status(&self.s.fleet, j), self.s.id);
        let inbound: Arc<Inbound> = Arc::clone(&self.peers.inbound);
        let pulled = Arc::clone(&self.heal.pulled);
        let asked = endpoints
            .session()
            .get(&selector)
            .congestion_control(CongestionControl::Drop)
            .timeout(PULL_TIMEOUT)
            .callback(move |reply| {
                if let Ok(sample) = reply.result() {
                    let payload = sample.payload();
                    let n = pulled.fetch_add(1, Ordering::Relaxed) + 1;
                    tracing::info!(
                        neighbour = j,
                        pulled = n,
                        "a silent neighbour's message pulled"
                    );
                    inbound.push(Some(j), payload.len(), || payload.to_bytes().into_owned());
                }
            })
            .await;
        if let Err(e) = asked {
            tracing::warn!(neighbour = j, error = %e, "pulling a silent neighbour's message failed");
        }
    }

    /// Answers a pull (`?msg=<to>`): the bytes last published to neighbour `to`, or an error
    /// reply naming why there are none.
    pub(super) async fn answer_pull(&self, q: Query, to: &str) {
        let sent = to
            .parse::<u64>()
            .ok()
            .and_then(|to| self.peers.last_sent.get(&to));
        let reply = match sent {
            Some(bytes) => {
                q.reply(keys::status(&self.s.fleet, self.s.id), bytes.clone())
                    .await
            }
            None => {
                q.reply_err(format!(
                    "no message to {to:?}: not a neighbour of node {}, or none sent yet",
                    self.s.id
                ))
                .await
            }
        };
        if let Err(e) = reply {
            tracing::debug!(error = %e, "pull reply failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_neighbour_is_due_after_the_silence_then_with_a_doubling_back_off() {
        let mut h = Heal::new();
        let t0 = h.started;
        let s = Duration::from_secs(10);
        assert!(!h.due(1, None, s, t0 + Duration::from_secs(9)));
        assert!(
            h.due(1, None, s, t0 + Duration::from_secs(10)),
            "never heard"
        );
        let heard = t0 + Duration::from_secs(5);
        assert!(!h.due(1, Some(heard), s, t0 + Duration::from_secs(14)));
        h.tried.insert(1, (t0 + Duration::from_secs(10), 1));
        assert!(
            !h.due(1, None, s, t0 + Duration::from_secs(29)),
            "back-off: 2 × 10 s"
        );
        assert!(h.due(1, None, s, t0 + Duration::from_secs(30)));
        // Heard since the last attempt: the attempt worked, nothing is due until the next
        // silence.
        let later = t0 + Duration::from_secs(12);
        assert!(!h.due(1, Some(later), s, t0 + Duration::from_secs(21)));
        assert!(h.due(1, Some(later), s, t0 + Duration::from_secs(22)));
        // The back-off stops doubling at MAX_BACKOFF.
        h.tried.insert(2, (t0, 30));
        assert!(h.due(2, None, s, t0 + s * MAX_BACKOFF));
    }
}
