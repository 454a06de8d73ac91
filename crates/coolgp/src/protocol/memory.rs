//! A loss-free in-memory network for tests, examples and benchmarks: agent `i` of the slice
//! has id `i`. (The simulator's lossy, parallel network is `coolgp_sim::network`.)

use crate::protocol::agent::Agent;
use crate::protocol::message::RejectReason;

/// Delivers every queued message, in sender order, to `agents[receiver]` (messages to an id
/// outside the slice are dropped). Returns how many were delivered, or the first rejection.
///
/// # Errors
/// The [`RejectReason`] of the first message a receiver rejects (the rest are not delivered).
pub fn deliver_all(agents: &mut [Agent]) -> Result<usize, RejectReason> {
    let msgs: Vec<_> = agents
        .iter_mut()
        .flat_map(|a| std::iter::from_fn(|| a.poll_transmit()).collect::<Vec<_>>())
        .collect();
    let mut delivered = 0;
    for msg in msgs {
        let Ok(to) = usize::try_from(msg.header.receiver) else {
            continue;
        };
        if let Some(a) = agents.get_mut(to) {
            a.handle_message(msg)?;
            delivered += 1;
        }
    }
    Ok(delivered)
}

/// One synchronous round of the paper's rule: every agent ticks, then [`deliver_all`].
///
/// # Errors
/// As [`deliver_all`].
pub fn round(agents: &mut [Agent]) -> Result<usize, RejectReason> {
    for a in agents.iter_mut() {
        a.handle_tick();
    }
    deliver_all(agents)
}
