//! Communication graphs: constructors, diameter, tree test, spanning trees (spec §7).

use std::collections::VecDeque;

use crate::rng::Rng;

/// An undirected graph over agents `0..n`, adjacency lists sorted (deterministic iteration).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    adj: Vec<Vec<usize>>,
}

impl Topology {
    /// From an edge list; duplicate edges and self-loops are dropped.
    ///
    /// # Panics
    /// If an endpoint is `≥ n` (our misuse).
    #[track_caller]
    pub fn from_edges(n: usize, edges: impl IntoIterator<Item = (usize, usize)>) -> Self {
        let mut adj = vec![Vec::new(); n];
        for (a, b) in edges {
            assert!(a < n && b < n, "edge ({a}, {b}) outside 0..{n}");
            if a != b {
                adj[a].push(b);
                adj[b].push(a);
            }
        }
        for l in &mut adj {
            l.sort_unstable();
            l.dedup();
        }
        Self { adj }
    }

    /// 0 – 1 – … – (n−1).
    pub fn path(n: usize) -> Self {
        Self::from_edges(n, (1..n).map(|i| (i - 1, i)))
    }

    /// Star with centre 0.
    pub fn star(n: usize) -> Self {
        Self::from_edges(n, (1..n).map(|i| (0, i)))
    }

    /// Ring 0 – 1 – … – (n−1) – 0.
    pub fn ring(n: usize) -> Self {
        let mut e: Vec<_> = (1..n).map(|i| (i - 1, i)).collect();
        if n > 2 {
            e.push((n - 1, 0));
        }
        Self::from_edges(n, e)
    }

    /// Complete graph.
    pub fn complete(n: usize) -> Self {
        Self::from_edges(n, (0..n).flat_map(|a| ((a + 1)..n).map(move |b| (a, b))))
    }

    /// A near-square grid (rows × cols ≥ n, row-major, last row partial).
    pub fn grid(n: usize) -> Self {
        let cols = (n as f64).sqrt().ceil().max(1.0) as usize;
        let mut e = Vec::new();
        for i in 0..n {
            if (i + 1) % cols != 0 && i + 1 < n {
                e.push((i, i + 1));
            }
            if i + cols < n {
                e.push((i, i + cols));
            }
        }
        Self::from_edges(n, e)
    }

    /// A uniformly random recursive tree: node i attaches to a uniform node < i.
    pub fn random_tree(n: usize, seed: u64) -> Self {
        let mut rng = Rng::new(seed, 0x7EE);
        Self::from_edges(n, (1..n).map(|i| (rng.below(i), i)))
    }

    /// Random geometric graph in the unit square with radius `r`, made connected by adding the
    /// shortest edge between components (so every generated graph is usable).
    pub fn random_geometric(n: usize, r: f64, seed: u64) -> Self {
        let pts = Self::random_points(n, seed);
        let mut e = Vec::new();
        for a in 0..n {
            for b in (a + 1)..n {
                if dist2(pts[a], pts[b]) <= r * r {
                    e.push((a, b));
                }
            }
        }
        let mut g = Self::from_edges(n, e);
        g.connect_components(&pts);
        g
    }

    /// Minimum spanning tree (Prim, Euclidean) of random points in the unit square: the
    /// minimum spanning tree of the complete random geometric graph.
    pub fn geometric_mst(n: usize, seed: u64) -> Self {
        let pts = Self::random_points(n, seed);
        let mut in_tree = vec![false; n];
        let mut best = vec![(f64::INFINITY, 0usize); n];
        let mut edges = Vec::new();
        if n == 0 {
            return Self::from_edges(0, edges);
        }
        in_tree[0] = true;
        for v in 1..n {
            best[v] = (dist2(pts[0], pts[v]), 0);
        }
        for _ in 1..n {
            let (v, _) = (0..n)
                .filter(|&v| !in_tree[v])
                .map(|v| (v, best[v].0))
                .fold((usize::MAX, f64::INFINITY), |acc, x| {
                    if x.1 < acc.1 {
                        x
                    } else {
                        acc
                    }
                });
            in_tree[v] = true;
            edges.push((best[v].1, v));
            for u in 0..n {
                if !in_tree[u] {
                    let dd = dist2(pts[v], pts[u]);
                    if dd < best[u].0 {
                        best[u] = (dd, v);
                    }
                }
            }
        }
        Self::from_edges(n, edges)
    }

    fn random_points(n: usize, seed: u64) -> Vec<(f64, f64)> {
        let mut rng = Rng::new(seed, 0x6E0);
        (0..n).map(|_| (rng.uniform(), rng.uniform())).collect()
    }

    fn connect_components(&mut self, pts: &[(f64, f64)]) {
        loop {
            let comp = self.components();
            let k = comp.iter().copied().max().map_or(0, |c| c + 1);
            if k <= 1 {
                return;
            }
            let mut best = (f64::INFINITY, 0, 0);
            for a in 0..pts.len() {
                for b in 0..pts.len() {
                    if comp[a] == 0 && comp[b] != 0 {
                        let dd = dist2(pts[a], pts[b]);
                        if dd < best.0 {
                            best = (dd, a, b);
                        }
                    }
                }
            }
            self.adj[best.1].push(best.2);
            self.adj[best.2].push(best.1);
            self.adj[best.1].sort_unstable();
            self.adj[best.2].sort_unstable();
        }
    }

    /// Component label of each node (0 is the component of node 0).
    pub fn components(&self) -> Vec<usize> {
        let n = self.len();
        let mut comp = vec![usize::MAX; n];
        let mut next = 0;
        for s in 0..n {
            if comp[s] != usize::MAX {
                continue;
            }
            comp[s] = next;
            let mut q = VecDeque::from([s]);
            while let Some(v) = q.pop_front() {
                for &u in &self.adj[v] {
                    if comp[u] == usize::MAX {
                        comp[u] = next;
                        q.push_back(u);
                    }
                }
            }
            next += 1;
        }
        comp
    }

    /// Number of agents.
    pub fn len(&self) -> usize {
        self.adj.len()
    }

    /// True when there are no agents.
    pub fn is_empty(&self) -> bool {
        self.adj.is_empty()
    }

    /// Sorted neighbours of `i`.
    pub fn neighbors(&self, i: usize) -> &[usize] {
        &self.adj[i]
    }

    /// Number of undirected edges.
    pub fn edge_count(&self) -> usize {
        self.adj.iter().map(Vec::len).sum::<usize>() / 2
    }

    /// Connected?
    pub fn is_connected(&self) -> bool {
        self.components().iter().all(|&c| c == 0)
    }

    /// A connected graph with n − 1 edges.
    pub fn is_tree(&self) -> bool {
        self.edge_count() + 1 == self.len() && self.is_connected()
    }

    /// A forest: every component is a tree (`n − components` edges).
    pub fn is_forest(&self) -> bool {
        let comps = self.components().into_iter().max().map_or(0, |c| c + 1);
        self.edge_count() + comps == self.len()
    }

    /// The disjoint union of `graphs[k]` placed on the agents `parts[k]` (graph node `j` of
    /// part `k` is agent `parts[k][j]`) over `n` agents; no edge joins two parts. This is how
    /// a fleet fuses only inside groups: one graph per group.
    ///
    /// # Panics
    /// If a part and its graph differ in size or an agent is `≥ n` (our misuse).
    #[track_caller]
    pub fn disjoint_union(n: usize, parts: &[Vec<usize>], graphs: &[Topology]) -> Self {
        assert_eq!(parts.len(), graphs.len(), "one graph per part");
        let mut edges = Vec::new();
        for (part, g) in parts.iter().zip(graphs) {
            assert_eq!(part.len(), g.len(), "part and graph sizes differ");
            for (a, nb) in g.adj.iter().enumerate() {
                edges.extend(nb.iter().filter(|&&b| a < b).map(|&b| (part[a], part[b])));
            }
        }
        Self::from_edges(n, edges)
    }

    /// BFS hop distances from `s` (`usize::MAX` when unreachable).
    pub fn distances(&self, s: usize) -> Vec<usize> {
        let mut dist = vec![usize::MAX; self.len()];
        dist[s] = 0;
        let mut q = VecDeque::from([s]);
        while let Some(v) = q.pop_front() {
            for &u in &self.adj[v] {
                if dist[u] == usize::MAX {
                    dist[u] = dist[v] + 1;
                    q.push_back(u);
                }
            }
        }
        dist
    }

    /// The diameter: edges on the longest shortest path (a single node has 0). Tree message
    /// passing is exact after `diameter − 1` updates following the initial messages (spec §7).
    /// `None` if disconnected.
    pub fn diameter(&self) -> Option<usize> {
        let mut best = 0;
        for s in 0..self.len() {
            let d = self.distances(s);
            if d.contains(&usize::MAX) {
                return None;
            }
            best = best.max(d.into_iter().max().unwrap_or(0));
        }
        Some(best)
    }

    /// BFS spanning tree from the minimum id: parent = the neighbour with the smallest
    /// (hop distance, id) (spec §7, robust alternative 1).
    pub fn bfs_spanning_tree(&self) -> Self {
        let n = self.len();
        if n == 0 {
            return self.clone();
        }
        let dist = self.distances(0);
        let mut edges = Vec::new();
        for v in 1..n {
            if dist[v] == usize::MAX {
                continue;
            }
            if let Some(&p) = self.adj[v]
                .iter()
                .filter(|&&u| dist[u] + 1 == dist[v])
                .min()
            {
                edges.push((p, v));
            }
        }
        Self::from_edges(n, edges)
    }
}

fn dist2(a: (f64, f64), b: (f64, f64)) -> f64 {
    (a.0 - b.0).powi(2) + (a.1 - b.1).powi(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_and_diameters() {
        assert_eq!(Topology::path(4).diameter(), Some(3));
        assert_eq!(Topology::star(4).diameter(), Some(2));
        assert!(Topology::path(5).is_tree());
        assert!(!Topology::ring(5).is_tree());
        assert_eq!(Topology::grid(9).edge_count(), 12);
        for seed in 0..5 {
            assert!(Topology::random_tree(30, seed).is_tree());
            assert!(Topology::geometric_mst(30, seed).is_tree());
            let g = Topology::random_geometric(30, 0.2, seed);
            assert!(g.is_connected());
            assert!(g.bfs_spanning_tree().is_tree());
        }
    }

    #[test]
    fn a_disjoint_union_of_trees_is_a_forest_with_no_edge_across_parts() {
        let parts = vec![vec![0, 2, 4, 6], vec![1, 3, 5]];
        let graphs = vec![Topology::path(4), Topology::star(3)];
        let g = Topology::disjoint_union(7, &parts, &graphs);
        assert_eq!(g.edge_count(), 3 + 2);
        assert!(g.is_forest() && !g.is_tree() && !g.is_connected());
        assert_eq!(g.neighbors(2), &[0, 4]);
        assert_eq!(g.neighbors(1), &[3, 5]);
        let comp = g.components();
        assert!(parts[0].iter().all(|&a| comp[a] == comp[0]));
        assert!(parts[1].iter().all(|&a| comp[a] != comp[0]));
        let ring = Topology::disjoint_union(7, &parts, &[Topology::ring(4), Topology::star(3)]);
        assert!(!ring.is_forest());
    }
}
