//! A lossy in-memory network that drives a fleet of [`Agent`]s through communication rounds.
//!
//! One round: every agent ticks (in parallel), every queued message is dropped independently
//! with probability `loss` (one seeded coin per message, in a fixed order), and the survivors
//! are delivered grouped by receiver in (sender, round) order (in parallel over receivers).
//! Deterministic for a seed whatever the thread count. [`run_schedule`] drives an
//! event-driven schedule instead of rounds (one message per listed edge and step);
//! [`run_until_settled`] runs rounds until the fused estimates stop moving.

use coolgp::learn::Site;
use coolgp::rng::Rng;
use coolgp::{Agent, Message, ProjectionMode};
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

/// Counters of one or more rounds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct NetStats {
    /// Messages sent.
    pub sent: u64,
    /// Messages dropped by the lossy network.
    pub dropped: u64,
    /// Messages rejected by their receiver.
    pub rejected: u64,
    /// Messages scaled down by their receiver's influence cap (issue 29).
    pub capped: u64,
}

impl NetStats {
    /// Adds another set of counters.
    pub fn add_all(&mut self, o: NetStats) {
        self.sent += o.sent;
        self.dropped += o.dropped;
        self.rejected += o.rejected;
        self.capped += o.capped;
    }
}

/// Runs `rounds` communication rounds over `agents` (indexed by id) with message loss.
pub fn run_rounds(agents: &mut [Agent], rounds: usize, loss: f64, rng: &mut Rng) -> NetStats {
    let mut total = NetStats::default();
    for _ in 0..rounds {
        total.add_all(one_round(agents, loss, rng));
    }
    total
}

/// When [`run_until_settled`] stops: every agent's fused estimate moved by less than `tol`
/// (relative) in the last round, or `cap` rounds have run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settle {
    /// Relative change of the fused estimate below which an agent has settled (1e-9).
    pub tol: f64,
    /// Most rounds per fusion.
    pub cap: usize,
}

impl Default for Settle {
    fn default() -> Self {
        Self {
            tol: 1e-9,
            cap: 20_000,
        }
    }
}

/// Runs rounds until every agent's fused data part `E_g,i` (and, in the fleet projection mode,
/// its fused site sums) changes by less than `settle.tol` relative to its norm in one round
/// (`‖ΔE‖ ≤ tol·‖E‖` in [`coolgp::Excess::rel_dist`]'s norm), or until `settle.cap` rounds. Returns the counters, the rounds run (at least one,
/// at most the cap) and whether the fleet settled (false: the cap was hit).
/// For push-sum, whose estimates approach T_g geometrically: a change below tol per round
/// leaves an error of about tol/(1 − λ) for contraction rate λ.
pub fn run_until_settled(
    agents: &mut [Agent],
    settle: Settle,
    loss: f64,
    rng: &mut Rng,
) -> (NetStats, usize, bool) {
    let mut total = NetStats::default();
    let mut last: Vec<_> = agents.par_iter().map(fused_state).collect();
    for r in 1..=settle.cap.max(1) {
        total.add_all(one_round(agents, loss, rng));
        let now: Vec<_> = agents.par_iter().map(fused_state).collect();
        let settled = now.par_iter().zip(&last).all(|((n, ns), (l, ls))| {
            l.rel_dist(n) <= settle.tol
                && ls.iter().zip(ns).all(|(a, b)| a.rel_dist(b) <= settle.tol)
        });
        if settled {
            return (total, r, true);
        }
        last = now;
    }
    (total, settle.cap.max(1), false)
}

/// What [`run_until_settled`] watches: the fused data part and, in the fleet projection mode,
/// the fused site sums.
fn fused_state(a: &Agent) -> (coolgp::Excess, Option<Site>) {
    let site = (a.config().projection == ProjectionMode::Fleet).then(|| a.fused_site());
    (a.fused_excess().0, site)
}

/// Rounds used by the fusions of a run that settle ([`run_until_settled`]): the most rounds
/// one fusion took, and how many fusions stopped at the cap.
#[derive(Debug, Default)]
pub(crate) struct SettledRounds {
    /// Most rounds of one fusion.
    max: AtomicUsize,
    /// Fusions that hit the cap before settling.
    capped: AtomicUsize,
}

impl SettledRounds {
    /// Records one fusion.
    pub(crate) fn record(&self, rounds: usize, settled: bool) {
        self.max.fetch_max(rounds, Ordering::Relaxed);
        if !settled {
            self.capped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Most rounds of one fusion.
    pub(crate) fn max(&self) -> usize {
        self.max.load(Ordering::Relaxed)
    }

    /// Fusions that hit the cap before settling.
    pub(crate) fn capped(&self) -> usize {
        self.capped.load(Ordering::Relaxed)
    }
}

fn one_round(agents: &mut [Agent], loss: f64, rng: &mut Rng) -> NetStats {
    one_round_of(Payload::Model, agents, loss, rng)
}

/// What a round or schedule sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload {
    /// The agents' model messages (q(u), and the site sums in the fleet projection mode).
    Model,
    /// Site-only messages of the fleet projection mode (spec §14), far smaller than q(u).
    Sites,
}

fn one_round_of(what: Payload, agents: &mut [Agent], loss: f64, rng: &mut Rng) -> NetStats {
    let outgoing: Vec<Vec<Message>> = agents
        .par_iter_mut()
        .map(|a| {
            match what {
                Payload::Model => a.handle_tick(),
                Payload::Sites => a.handle_site_tick(),
            }
            std::iter::from_fn(|| a.poll_transmit()).collect()
        })
        .collect();
    deliver(agents, outgoing, loss, rng)
}

/// [`run_rounds`] of site-only messages (fleet projection mode).
pub fn run_site_rounds(agents: &mut [Agent], rounds: usize, loss: f64, rng: &mut Rng) -> NetStats {
    let mut total = NetStats::default();
    for _ in 0..rounds {
        total.add_all(one_round_of(Payload::Sites, agents, loss, rng));
    }
    total
}

/// Runs an event-driven schedule (e.g. [`coolgp::fuse::tree::two_pass_schedule`]): at each
/// step, every listed sender queues its one message to the listed receiver (in parallel),
/// then the messages go through the lossy network as in a round.
pub fn run_schedule(
    agents: &mut [Agent],
    steps: &[Vec<(usize, usize)>],
    loss: f64,
    rng: &mut Rng,
) -> NetStats {
    run_schedule_of(Payload::Model, agents, steps, loss, rng)
}

/// [`run_schedule`] sending `what`.
pub fn run_schedule_of(
    what: Payload,
    agents: &mut [Agent],
    steps: &[Vec<(usize, usize)>],
    loss: f64,
    rng: &mut Rng,
) -> NetStats {
    let mut total = NetStats::default();
    for step in steps {
        // Only the step's senders tick (a step lists a few edges of a large fleet).
        let mut edges: Vec<(usize, usize)> = step.clone();
        edges.sort_by_key(|e| e.0);
        let mut work: Vec<(&mut Agent, Vec<usize>)> = Vec::new();
        let mut next = edges.iter().peekable();
        for (i, a) in agents.iter_mut().enumerate() {
            let mut to = Vec::new();
            while let Some(&&(from, j)) = next.peek() {
                if from != i {
                    break;
                }
                to.push(j);
                next.next();
            }
            if !to.is_empty() {
                work.push((a, to));
            }
            if next.peek().is_none() {
                break;
            }
        }
        let outgoing: Vec<Vec<Message>> = work
            .into_par_iter()
            .map(|(a, to)| {
                for j in to {
                    match what {
                        Payload::Model => a.handle_tick_to(j as u64),
                        Payload::Sites => a.handle_site_tick_to(j as u64),
                    };
                }
                std::iter::from_fn(|| a.poll_transmit()).collect()
            })
            .collect();
        total.add_all(deliver(agents, outgoing, loss, rng));
    }
    total
}

/// Drops each message with probability `loss` (one seeded coin per message, in sender order),
/// then delivers the survivors grouped by receiver (in parallel over receivers).
fn deliver(
    agents: &mut [Agent],
    outgoing: Vec<Vec<Message>>,
    loss: f64,
    rng: &mut Rng,
) -> NetStats {
    let mut stats = NetStats::default();
    // (receiver, message) in sender order; the coins are drawn in that order.
    let mut arrivals: Vec<(usize, Message)> = Vec::new();
    for msgs in outgoing {
        for msg in msgs {
            stats.sent += 1;
            if loss > 0.0 && rng.uniform() < loss {
                stats.dropped += 1;
                continue;
            }
            let to = msg.header.receiver as usize;
            if to < agents.len() {
                arrivals.push((to, msg));
            }
        }
    }
    // Grouped by receiver, each group in sender order (stable sort); only receivers work.
    arrivals.sort_by_key(|(to, _)| *to);
    let mut work: Vec<(&mut Agent, Vec<Message>)> = Vec::new();
    let mut next = arrivals.into_iter().peekable();
    for (i, a) in agents.iter_mut().enumerate() {
        let mut msgs = Vec::new();
        while next.peek().is_some_and(|(to, _)| *to == i) {
            if let Some((_, m)) = next.next() {
                msgs.push(m);
            }
        }
        if !msgs.is_empty() {
            work.push((a, msgs));
        }
        if next.peek().is_none() {
            break;
        }
    }
    let (rejected, capped) = work
        .into_par_iter()
        .map(|(a, msgs)| {
            let mut r = 0;
            for msg in msgs {
                if a.handle_message(msg).is_err() {
                    r += 1;
                }
            }
            // Events are consumed by the driver; the simulator counts rejects and caps.
            let mut c = 0;
            while let Some(e) = a.poll_event() {
                c += u64::from(matches!(
                    e,
                    coolgp::Event::Capped { .. } | coolgp::Event::RateCapped { .. }
                ));
            }
            (r, c)
        })
        .reduce(|| (0, 0), |x, y| (x.0 + y.0, x.1 + y.1));
    stats.rejected = rejected;
    stats.capped = capped;
    stats
}
