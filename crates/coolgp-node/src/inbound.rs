//! Received bytes on their way to the agent: bounded per-sender queues served round-robin,
//! so that a flood from one sender (or from many forged ids) cannot starve the others, and
//! rate-limited logging of rejects.
//!
//! The zenoh callback only copies the payload into the queue of the sender named in the key
//! (`coolgp/<fleet>/<from>/msg/<to>`); configured neighbours get one queue each, every other
//! sender shares one "strangers" queue. A full queue drops its **oldest** message: with both
//! fusion rules the newest message from a sender supersedes the older ones (tree: the last
//! `D_ji` is kept; push-sum: running totals), so dropping old ones loses nothing.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// How often one sender's rejects are logged at most.
pub const LOG_EVERY: Duration = Duration::from_secs(60);

/// Oversize payloads remembered for the log between two drains of the queues; further ones
/// are only counted (the log limiter would suppress most of them anyway).
pub const OVERSIZE_NOTICES: usize = 64;

/// A payload dropped unread because it was longer than any valid message: what the node loop
/// logs (rate-limited, [`Rejects::log`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Oversize {
    /// The sender id named in the key, if it parsed.
    pub key_from: Option<u64>,
    /// The payload's length in bytes.
    pub len: usize,
    /// The limit it exceeded.
    pub max_len: usize,
}

/// One received payload.
#[derive(Clone, Debug, PartialEq)]
pub struct Raw {
    /// The sender id named in the key, if it parsed.
    pub key_from: Option<u64>,
    /// The bytes.
    pub bytes: Vec<u8>,
}

#[derive(Default)]
struct Queues {
    per_sender: BTreeMap<u64, VecDeque<Raw>>,
    strangers: VecDeque<Raw>,
    /// Round-robin cursor: index into `per_sender` keys, then the strangers queue.
    cursor: usize,
    dropped: u64,
    oversize: u64,
    /// Oversize payloads not yet logged (at most [`OVERSIZE_NOTICES`]).
    oversize_notices: Vec<Oversize>,
}

/// The shared inbound queues (zenoh callback → node loop).
pub struct Inbound {
    q: Mutex<Queues>,
    cap: usize,
    max_len: usize,
    /// Woken when something arrives.
    pub notify: Notify,
}

impl Inbound {
    /// Queues for `neighbors`, each bounded to `cap` messages; payloads longer than `max_len`
    /// bytes are dropped unread, counted and noted for the log ([`Inbound::take_oversize`]).
    pub fn new(neighbors: &[u64], cap: usize, max_len: usize) -> Self {
        let q = Queues {
            per_sender: neighbors.iter().map(|&n| (n, VecDeque::new())).collect(),
            ..Queues::default()
        };
        Self {
            q: Mutex::new(q),
            cap: cap.max(1),
            max_len,
            notify: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queues> {
        // A panic while holding the lock cannot leave the queues inconsistent (plain pushes
        // and pops): keep going with the data.
        self.q.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Called from the zenoh callback: enqueue without blocking.
    pub fn push(&self, key_from: Option<u64>, payload_len: usize, bytes: impl FnOnce() -> Vec<u8>) {
        {
            let mut q = self.lock();
            if payload_len > self.max_len {
                q.oversize += 1;
                if q.oversize_notices.len() < OVERSIZE_NOTICES {
                    q.oversize_notices.push(Oversize {
                        key_from,
                        len: payload_len,
                        max_len: self.max_len,
                    });
                }
                drop(q);
                // Wake the loop so that the drop is logged soon.
                self.notify.notify_one();
                return;
            }
            let cap = self.cap;
            let raw = Raw {
                key_from,
                bytes: bytes(),
            };
            let queue = match key_from.and_then(|k| q.per_sender.contains_key(&k).then_some(k)) {
                Some(k) => q.per_sender.get_mut(&k),
                None => None,
            };
            let overflow = match queue {
                Some(queue) => {
                    queue.push_back(raw);
                    if queue.len() > cap {
                        queue.pop_front();
                        true
                    } else {
                        false
                    }
                }
                None => {
                    q.strangers.push_back(raw);
                    if q.strangers.len() > cap {
                        q.strangers.pop_front();
                        true
                    } else {
                        false
                    }
                }
            };
            if overflow {
                q.dropped += 1;
            }
        }
        self.notify.notify_one();
    }

    /// The next payload, round-robin over senders (strangers count as one sender).
    pub fn pop(&self) -> Option<Raw> {
        let mut q = self.lock();
        let n = q.per_sender.len() + 1;
        for step in 0..n {
            let slot = (q.cursor + step) % n;
            let item = if slot < n - 1 {
                q.per_sender
                    .values_mut()
                    .nth(slot)
                    .and_then(VecDeque::pop_front)
            } else {
                q.strangers.pop_front()
            };
            if let Some(item) = item {
                q.cursor = (slot + 1) % n;
                return Some(item);
            }
        }
        None
    }

    /// The oversize payloads noted since the last call (at most [`OVERSIZE_NOTICES`]), for
    /// the log; their count stays in [`Inbound::dropped`].
    pub fn take_oversize(&self) -> Vec<Oversize> {
        std::mem::take(&mut self.lock().oversize_notices)
    }

    /// Messages dropped from full queues, and payloads dropped as oversize.
    pub fn dropped(&self) -> (u64, u64) {
        let q = self.lock();
        (q.dropped, q.oversize)
    }
}

/// Senders whose last log time is remembered; rejects of further senders share one slot.
pub const MAX_LOG_SENDERS: usize = 1024;

/// Reject counters by reason label and the once-per-minute log limiter.
///
/// The limiter's memory is bounded: it remembers at most [`MAX_LOG_SENDERS`] senders (entries
/// older than [`LOG_EVERY`] are pruned when it is full); under a flood of forged sender ids the
/// rest share one "many senders" slot, logged at most once per minute as well.
#[derive(Default)]
pub struct Rejects {
    /// Count per reason label.
    pub counts: BTreeMap<String, u64>,
    last_log: BTreeMap<Option<u64>, (Instant, u64)>,
    overflow: Option<(Instant, u64)>,
    last_prune: Option<Instant>,
}

/// `Some(suppressed)` if a slot last logged at least [`LOG_EVERY`] ago (or never) is due now;
/// otherwise counts one more suppressed reject.
fn due(slot: &mut Option<(Instant, u64)>, now: Instant) -> Option<u64> {
    match slot {
        Some((t, suppressed)) if now.duration_since(*t) < LOG_EVERY => {
            *suppressed += 1;
            None
        }
        _ => {
            let suppressed = slot.map_or(0, |(_, s)| s);
            *slot = Some((now, 0));
            Some(suppressed)
        }
    }
}

impl Rejects {
    /// Counts a reject and logs it unless this sender was logged less than a minute ago.
    /// Returns whether it was logged.
    pub fn record(
        &mut self,
        from: Option<u64>,
        label: &str,
        detail: &dyn std::fmt::Display,
    ) -> bool {
        *self.counts.entry(label.to_string()).or_insert(0) += 1;
        self.log(from, label, detail)
    }

    /// Logs a reject counted elsewhere (oversize payloads are counted by [`Inbound`]) unless
    /// this sender was logged less than a minute ago. Returns whether it was logged.
    pub fn log(&mut self, from: Option<u64>, label: &str, detail: &dyn std::fmt::Display) -> bool {
        let now = Instant::now();
        let known = self.last_log.contains_key(&from);
        if !known && self.last_log.len() >= MAX_LOG_SENDERS {
            let prune = self
                .last_prune
                .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1));
            if prune {
                self.last_prune = Some(now);
                self.last_log
                    .retain(|_, (t, _)| now.duration_since(*t) < LOG_EVERY);
            }
        }
        let (logged, many) = if known || self.last_log.len() < MAX_LOG_SENDERS {
            let mut slot = self.last_log.get(&from).copied();
            let d = due(&mut slot, now);
            if let Some(v) = slot {
                self.last_log.insert(from, v);
            }
            (d, false)
        } else {
            (due(&mut self.overflow, now), true)
        };
        let Some(suppressed) = logged else {
            return false;
        };
        tracing::warn!(
            from = ?from,
            reason = label,
            detail = %detail,
            suppressed_since_last_log = suppressed,
            merged_with_other_senders = many,
            "rejected message"
        );
        true
    }

    /// Senders the log limiter remembers (at most [`MAX_LOG_SENDERS`]).
    pub fn remembered(&self) -> usize {
        self.last_log.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_does_not_starve_others() {
        let q = Inbound::new(&[1, 2], 4, 100);
        for i in 0..1000u32 {
            q.push(Some(99), 4, || i.to_le_bytes().to_vec());
            q.push(Some(1), 4, || i.to_le_bytes().to_vec());
        }
        q.push(Some(2), 1, || vec![7]);
        q.push(Some(2), 1000, || vec![0; 1000]);
        let mut got = Vec::new();
        while let Some(r) = q.pop() {
            got.push(r);
        }
        assert_eq!(got.len(), 4 + 4 + 1);
        assert!(got.iter().any(|r| r.key_from == Some(2) && r.bytes == [7]));
        // Newest kept, oldest dropped.
        let from1: Vec<_> = got.iter().filter(|r| r.key_from == Some(1)).collect();
        assert_eq!(from1[3].bytes, 999u32.to_le_bytes());
        assert_eq!(q.dropped(), (2 * 996, 1));
        // The oversize payload is noted for the log with its sender, size and limit, once.
        assert_eq!(
            q.take_oversize(),
            vec![Oversize {
                key_from: Some(2),
                len: 1000,
                max_len: 100
            }]
        );
        assert_eq!(q.take_oversize(), Vec::new());
    }

    #[test]
    fn oversize_notices_are_bounded_and_logging_them_counts_nothing() {
        let q = Inbound::new(&[1], 4, 10);
        for _ in 0..1000 {
            q.push(Some(1), 11, || {
                unreachable!("an oversize payload is never copied")
            });
        }
        assert_eq!(q.dropped(), (0, 1000));
        assert_eq!(q.take_oversize().len(), OVERSIZE_NOTICES);
        let mut r = Rejects::default();
        assert!(r.log(Some(1), "oversize", &"11 bytes"));
        assert!(!r.log(Some(1), "oversize", &"11 bytes"), "rate-limited");
        assert!(r.counts.is_empty(), "counted by the queues, not twice");
    }

    #[test]
    fn the_log_limiter_stays_bounded_under_a_flood_of_forged_ids() {
        let mut r = Rejects::default();
        assert!(r.record(Some(1), "signature", &"x"));
        assert!(
            !r.record(Some(1), "signature", &"x"),
            "second within a minute"
        );
        let mut logged = 0;
        for id in 10..100_010u64 {
            logged += usize::from(r.record(Some(id), "unknown_sender", &"x"));
        }
        assert!(r.remembered() <= MAX_LOG_SENDERS, "{}", r.remembered());
        // Each remembered sender logged once, plus one line for all the others.
        assert_eq!(logged, MAX_LOG_SENDERS - 1 + 1);
        assert!(
            !r.record(Some(1), "signature", &"x"),
            "sender 1 is still limited"
        );
        assert_eq!(r.counts["unknown_sender"], 100_000);
        assert_eq!(r.counts["signature"], 3);
    }
}
