//! Decentralized message passing on trees (paper §4.2, corrected by spec §7).
//!
//! In excess form (`D = M − T0`): `D_ij⁰ = E_i`, `D_ij^{t+1} = E_i + Σ_{k∈N(i)\{j}} D_ki^t`,
//! and agent i's fused view is `T_g,i = T0 + E_i + Σ_{k∈N(i)} D_ki` with the *last* message
//! received from each neighbour. The own E_i is kept apart from what was received, so re-fusing
//! never double counts. Exact on a tree after `diameter − 1` updates; double counts on cycles.
//!
//! The synchronous rounds above send every message every round (2(n−1)·diameter messages per
//! fusion). [`two_pass_schedule`] orders the same messages so that each is sent once, when
//! its sender has heard from all its other neighbours: 2(n−1) messages, the same fused views.

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

/// The two-pass schedule on a forest: steps of `(sender, receiver)` pairs, each step's
/// messages independent of one another, such that `D_ij` is sent only after i has received
/// the current `D_ki` from every other neighbour k. Upward pass (deepest BFS level first, each
/// agent to its parent), then downward pass (each agent to its children); the root of each
/// tree is its lowest id. Every edge carries exactly one message each way: `2(n − c)`
/// messages for `c` trees, in `2·height` steps. After it, every agent's fused view is the
/// same as after `diameter` synchronous rounds. `topo` must be a forest (on a graph with
/// cycles the non-BFS edges are never used, and what was received over them is stale).
pub fn two_pass_schedule(topo: &Topology) -> Vec<Vec<(usize, usize)>> {
    let n = topo.len();
    let mut depth = vec![usize::MAX; n];
    let mut parent = vec![usize::MAX; n];
    let mut levels: Vec<Vec<usize>> = Vec::new();
    for root in 0..n {
        if depth[root] != usize::MAX {
            continue;
        }
        depth[root] = 0;
        let mut frontier = vec![root];
        let mut d = 0;
        while !frontier.is_empty() {
            if levels.len() <= d {
                levels.push(Vec::new());
            }
            levels[d].extend_from_slice(&frontier);
            let mut next = Vec::new();
            for &v in &frontier {
                for &u in topo.neighbors(v) {
                    if depth[u] == usize::MAX {
                        depth[u] = d + 1;
                        parent[u] = v;
                        next.push(u);
                    }
                }
            }
            frontier = next;
            d += 1;
        }
    }
    for level in &mut levels {
        level.sort_unstable();
    }
    let up = levels.iter().rev().map(|level| {
        level
            .iter()
            .filter(|&&v| parent[v] != usize::MAX)
            .map(|&v| (v, parent[v]))
            .collect::<Vec<_>>()
    });
    let down = levels.iter().map(|level| {
        level
            .iter()
            .flat_map(|&v| {
                let parent = &parent;
                topo.neighbors(v)
                    .iter()
                    .filter(move |&&u| parent[u] == v)
                    .map(move |&u| (v, u))
            })
            .collect::<Vec<_>>()
    });
    up.chain(down).filter(|step| !step.is_empty()).collect()
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
