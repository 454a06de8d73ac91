//! A k-d tree over every agent's memory rows, for the neighbourhood groups' search of "the
//! nearest row of each of the agents nearest an anchor" ([`super::groups`]; issue 31: with
//! 1,000 agents a scan of every memory per anchor was the pooled fit's cost).
//!
//! [`KdTree::nearest_agents`] visits rows in increasing distance (an incremental nearest
//! neighbour search, Hjaltason & Samet 1999: one priority queue of nodes keyed by the distance
//! to their bounding box and rows keyed by their own) until `k` agents other than the skipped
//! one have shown a row. Distances are computed exactly as [`super::groups::nearest`] computes
//! them and ties go to the smaller `(agent, row)`, so the answer is the brute-force scan's,
//! bit for bit.

use std::cmp::Ordering;
use std::collections::{BTreeSet, BinaryHeap};

use super::groups::{scaled_sqdist, RowRef};

/// Rows per leaf.
const LEAF: usize = 16;

/// A node: its rows `start..end` of the tree's order, its bounding box and its children.
#[derive(Clone, Debug)]
struct Node {
    start: usize,
    end: usize,
    lo: Vec<f64>,
    hi: Vec<f64>,
    /// Child node indices (none for a leaf).
    kids: Option<(usize, usize)>,
}

/// A k-d tree over rows of several memories (module doc).
#[derive(Clone, Debug)]
pub struct KdTree<'a> {
    d: usize,
    memories: Vec<&'a [f64]>,
    /// Every row, in the tree's order.
    order: Vec<RowRef>,
    nodes: Vec<Node>,
}

/// An entry of the search's queue: a node (by its box's distance) or a row (by its own).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Entry {
    dist: f64,
    /// 0 for a node, 1 for a row: at equal distance a node is opened first (it may hold a row
    /// at that distance with a smaller reference).
    kind: u8,
    /// The row, or `(node, 0)`.
    what: RowRef,
}

impl Eq for Entry {}

impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: the heap pops the smallest.
        o.dist
            .total_cmp(&self.dist)
            .then(o.kind.cmp(&self.kind))
            .then(o.what.cmp(&self.what))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl<'a> KdTree<'a> {
    /// The tree over `memories` (row-major `[n_a, d]` each).
    pub fn new(d: usize, memories: Vec<&'a [f64]>) -> Self {
        let mut order: Vec<RowRef> = memories
            .iter()
            .enumerate()
            .flat_map(|(a, m)| (0..m.len() / d.max(1)).map(move |i| (a, i)))
            .collect();
        let mut tree = Self {
            d,
            memories,
            order: Vec::new(),
            nodes: Vec::new(),
        };
        if d > 0 && !order.is_empty() {
            let n = order.len();
            tree.build(&mut order, 0, n);
        }
        tree.order = order;
        tree
    }

    fn row(&self, (a, i): RowRef) -> &[f64] {
        &self.memories[a][i * self.d..(i + 1) * self.d]
    }

    /// Builds the node over `order[start..end]` (split at the median of its widest input);
    /// returns its index.
    fn build(&mut self, order: &mut [RowRef], start: usize, end: usize) -> usize {
        let d = self.d;
        let (mut lo, mut hi) = (vec![f64::INFINITY; d], vec![f64::NEG_INFINITY; d]);
        for &r in &order[start..end] {
            for (k, v) in self.row(r).iter().enumerate() {
                lo[k] = lo[k].min(*v);
                hi[k] = hi[k].max(*v);
            }
        }
        let at = self.nodes.len();
        let widest = (0..d)
            .max_by(|&a, &b| (hi[a] - lo[a]).total_cmp(&(hi[b] - lo[b])))
            .unwrap_or(0);
        let split = end - start > LEAF && hi[widest] > lo[widest];
        self.nodes.push(Node {
            start,
            end,
            lo,
            hi,
            kids: None,
        });
        if split {
            let mid = start + (end - start) / 2;
            let memories = &self.memories;
            let key = |r: &RowRef| memories[r.0][r.1 * d + widest];
            order[start..end].select_nth_unstable_by(mid - start, |p, q| key(p).total_cmp(&key(q)));
            let left = self.build(order, start, mid);
            let right = self.build(order, mid, end);
            self.nodes[at].kids = Some((left, right));
        }
        at
    }

    /// The squared distance of `x` to a node's box in the metric `inv_scale` (0 inside).
    fn box_dist(&self, node: &Node, x: &[f64], inv_scale: &[f64]) -> f64 {
        let mut s = 0.0;
        for k in 0..self.d {
            let g = (node.lo[k] - x[k]).max(x[k] - node.hi[k]).max(0.0) * inv_scale[k];
            s += g * g;
        }
        s
    }

    /// For the `k` agents other than `skip` whose nearest row to `x` is nearest (in the metric
    /// `inv_scale`, as [`super::groups::nearest`] measures it), that row and its squared
    /// distance, nearest first; ties to the smaller `(agent, row)`.
    pub fn nearest_agents(
        &self,
        x: &[f64],
        inv_scale: &[f64],
        skip: usize,
        k: usize,
    ) -> Vec<(f64, RowRef)> {
        let mut out = Vec::new();
        if self.nodes.is_empty() || k == 0 || x.len() != self.d || inv_scale.len() != self.d {
            return out;
        }
        let dist = |r: &[f64]| scaled_sqdist(r, x, inv_scale);
        let mut seen: BTreeSet<usize> = BTreeSet::new();
        let mut heap = BinaryHeap::new();
        let mut best: Vec<(f64, RowRef)> = Vec::new();
        heap.push(Entry {
            dist: self.box_dist(&self.nodes[0], x, inv_scale),
            kind: 0,
            what: (0, 0),
        });
        while let Some(e) = heap.pop() {
            if e.kind == 1 {
                if seen.insert(e.what.0) {
                    out.push((e.dist, e.what));
                    if out.len() == k {
                        break;
                    }
                }
                continue;
            }
            let node = &self.nodes[e.what.0];
            match node.kids {
                Some((l, r)) => {
                    for c in [l, r] {
                        heap.push(Entry {
                            dist: self.box_dist(&self.nodes[c], x, inv_scale),
                            kind: 0,
                            what: (c, 0),
                        });
                    }
                }
                None => {
                    // Only an agent's nearest row in the leaf can be its nearest (ties to the
                    // smaller row, as the heap pops them): one entry per agent.
                    best.clear();
                    for &r in &self.order[node.start..node.end] {
                        if r.0 == skip || seen.contains(&r.0) {
                            continue;
                        }
                        let e = (dist(self.row(r)), r);
                        match best.iter_mut().find(|b| b.1 .0 == r.0) {
                            Some(b) if e.0 < b.0 || (e.0 == b.0 && e.1 < b.1) => *b = e,
                            Some(_) => {}
                            None => best.push(e),
                        }
                    }
                    for &(dist, what) in &best {
                        heap.push(Entry {
                            dist,
                            kind: 1,
                            what,
                        });
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::groups::nearest;
    use crate::rng::Rng;

    #[test]
    fn the_tree_finds_what_a_scan_of_every_memory_finds() {
        let mut rng = Rng::new(11, 0);
        let d = 3;
        // 40 memories of 0..60 rows, some rows repeated (ties), on a coarse grid.
        let memories: Vec<Vec<f64>> = (0..40)
            .map(|_| {
                let n = rng.below(60);
                (0..n * d).map(|_| (rng.below(8) as f64) * 0.5).collect()
            })
            .collect();
        let refs: Vec<&[f64]> = memories.iter().map(Vec::as_slice).collect();
        let tree = KdTree::new(d, refs.clone());
        let inv = [1.0, 0.3, 2.0];
        for t in 0..50 {
            let x: Vec<f64> = (0..d).map(|_| rng.normal() * 2.0).collect();
            let skip = t % 40;
            let k = 1 + t % 15;
            let mut scan: Vec<(f64, RowRef)> = refs
                .iter()
                .enumerate()
                .filter(|&(a, _)| a != skip)
                .filter_map(|(a, m)| {
                    nearest(m, d, &x, &inv, 1)
                        .first()
                        .map(|&(s, i)| (s, (a, i)))
                })
                .collect();
            scan.sort_by(|p, q| p.0.total_cmp(&q.0).then(p.1.cmp(&q.1)));
            scan.truncate(k);
            assert_eq!(tree.nearest_agents(&x, &inv, skip, k), scan, "query {t}");
        }
        assert!(KdTree::new(d, Vec::new())
            .nearest_agents(&[0.0; 3], &inv, 0, 3)
            .is_empty());
    }
}
