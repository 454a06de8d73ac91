//! Decentralized message passing on trees (paper §4.2, corrected by spec §7).
//!
//! In excess form (`D = M − T0`): `D_ij⁰ = E_i`, `D_ij^{t+1} = E_i + Σ_{k∈N(i)\{j}} D_ki^t`,
//! and agent i's fused view is `T_g,i = T0 + E_i + Σ_{k∈N(i)} D_ki` with the *last* message
//! received from each neighbour. The own E_i is kept apart from what was received, so re-fusing
//! never double counts. Exact on a tree after `diameter − 1` updates; double counts on cycles.

use std::collections::BTreeMap;

use crate::fuse::topology::Topology;
use crate::model::Excess;

/// `D_ij = E_i + Σ_{k∈N(i)\{j}} D_ki`: the message from i to neighbour `to`, from the last
/// message received from each neighbour. Cost O(deg · m²).
pub fn message_to<'a, K: PartialEq + 'a>(
    own: &Excess,
    inbox: impl IntoIterator<Item = (&'a K, &'a Excess)>,
    to: &K,
) -> Excess {
    let mut d = own.clone();
    for (k, dk) in inbox {
        if k != to {
            d.add_in_place(dk);
        }
    }
    d
}

/// `E_i + Σ_{k∈N(i)} D_ki`: agent i's fused data part.
pub fn fused<K>(own: &Excess, inbox: &BTreeMap<K, Excess>) -> Excess {
    let mut d = own.clone();
    for dk in inbox.values() {
        d.add_in_place(dk);
    }
    d
}

/// Synchronous message passing on any graph for `updates` rounds after the initial messages,
/// with every message delivered. Returns each agent's inbox (last message from each
/// neighbour) and the messages of every round (`rounds[t][(i, j)] = D_ij^t`).
///
/// On a tree, `updates = diameter − 1` makes every fused view exact; on a cycle it double
/// counts (spec §7). A reference implementation for tests and experiments.
#[allow(clippy::type_complexity)]
pub fn run_synchronous(
    topo: &Topology,
    own: &[Excess],
    updates: usize,
) -> (
    Vec<BTreeMap<usize, Excess>>,
    Vec<BTreeMap<(usize, usize), Excess>>,
) {
    let n = topo.len();
    let mut inbox: Vec<BTreeMap<usize, Excess>> = vec![BTreeMap::new(); n];
    let mut history = Vec::with_capacity(updates + 1);
    for _ in 0..=updates {
        let mut msgs = BTreeMap::new();
        for i in 0..n {
            for &j in topo.neighbors(i) {
                msgs.insert((i, j), message_to(&own[i], &inbox[i], &j));
            }
        }
        for ((i, j), d) in &msgs {
            inbox[*j].insert(*i, d.clone());
        }
        history.push(msgs);
    }
    (inbox, history)
}
