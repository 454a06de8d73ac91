//! Neighbourhood groups for the fleet's fit of the residual kernel (issue 28; docs/LOCAL.md
//! §11): anchor rows spread over the agents' memories, each with its nearest rows in its own
//! memory and the nearest row of each of the nearest other agents.
//!
//! Why: a uniform sample of a few hundred rows drawn from memories spread over years rarely
//! holds two rows of one day at two stations, so a fit on it sees short-range residual
//! structure (the same day at nearby stations) only by luck (docs/LOCAL.md §9). A group puts
//! rows close to one another into one covariance on purpose, so every fit sees it; the groups
//! are scored and fitted by the block (composite) likelihood of [`super::composite`].
//!
//! The metric is the inputs over their spread in the memories, `Σ_k ((x_k − x'_k)/s_k)²`
//! with `s_k` input k's standard deviation over every memory row: the same for every
//! candidate kernel, so the sample does not follow the chain it feeds. Pure and deterministic
//! (rows are chosen by index; ties go to the lower agent, then the lower row).

use super::kdtree::KdTree;
use super::pool::{shares, spaced};

/// How the groups are built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupOptions {
    /// Anchor rows in all, over the agents ([`shares`]); the fleet fits on the even ones and
    /// scores on the odd ones of each agent.
    pub anchors: usize,
    /// Nearest rows of the anchor's own memory in its group.
    pub own: usize,
    /// Nearest other agents whose nearest row joins the group (each agent at most one row).
    pub others: usize,
}

/// The default: 256 anchors (128 fit groups, 128 scored), 2 own rows and 13 other agents'
/// rows (groups of at most 16 rows). Measured in docs/LOCAL.md §11.
pub const GROUP_OPTIONS: GroupOptions = GroupOptions {
    anchors: 256,
    own: 2,
    others: 13,
};

impl Default for GroupOptions {
    fn default() -> Self {
        GROUP_OPTIONS
    }
}

/// A memory row of one agent: `(agent index, row index in its memory)`.
pub type RowRef = (usize, usize);

/// The agents' memory inputs and the metric's scales (module doc).
#[derive(Clone, Debug)]
pub struct Neighbourhood<'a> {
    d: usize,
    memories: Vec<&'a [f64]>,
    inv_scale: Vec<f64>,
    /// Every row, for the search of the other agents' nearest rows.
    tree: KdTree<'a>,
}

impl<'a> Neighbourhood<'a> {
    /// The memories `[n_a, d]` (row-major) of the agents, in agent order. An input that does not
    /// vary over all the rows gets scale 1. A memory whose length is not a multiple of `d` is
    /// taken as empty.
    pub fn new(d: usize, memories: Vec<&'a [f64]>) -> Self {
        let memories: Vec<&[f64]> = memories
            .into_iter()
            .map(|m| {
                if d > 0 && m.len() % d == 0 {
                    m
                } else {
                    &m[..0]
                }
            })
            .collect();
        let n: usize = memories.iter().map(|m| m.len() / d.max(1)).sum();
        let inv_scale = (0..d)
            .map(|k| {
                let col = || {
                    memories
                        .iter()
                        .flat_map(|m| m.chunks_exact(d).map(|r| r[k]))
                };
                let mean = col().sum::<f64>() / n.max(1) as f64;
                let var = col().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n.max(1) as f64;
                if var > 0.0 && var.is_finite() {
                    1.0 / var.sqrt()
                } else {
                    1.0
                }
            })
            .collect();
        Self {
            d,
            tree: KdTree::new(d, memories.clone()),
            memories,
            inv_scale,
        }
    }

    /// Rows held by agent `a`.
    pub fn rows(&self, a: usize) -> usize {
        self.memories.get(a).map_or(0, |m| m.len() / self.d.max(1))
    }

    /// Row `i` of agent `a`.
    pub fn row(&self, (a, i): RowRef) -> &[f64] {
        &self.memories[a][i * self.d..(i + 1) * self.d]
    }

    /// The anchors: each agent's share of `opts.anchors` ([`shares`]), evenly spaced in its
    /// memory ([`spaced`]), split into the fit anchors (each agent's even ones) and the scored
    /// ones (its odd ones).
    pub fn anchors(&self, opts: &GroupOptions) -> (Vec<RowRef>, Vec<RowRef>) {
        let m = self.memories.len();
        let (mut fit, mut score) = (Vec::new(), Vec::new());
        for (a, k) in shares(opts.anchors, m).into_iter().enumerate() {
            for (j, i) in spaced(self.rows(a), k).into_iter().enumerate() {
                match j % 2 {
                    0 => fit.push((a, i)),
                    _ => score.push((a, i)),
                }
            }
        }
        (fit, score)
    }

    /// The group of `anchor`: the anchor, its `opts.own` nearest rows in its own memory, and
    /// the nearest row of each of the `opts.others` agents whose nearest row is nearest
    /// (module doc). The own rows by a scan of the own memory, the others' by the k-d tree
    /// over every memory ([`KdTree::nearest_agents`]: the scan of every memory's result).
    ///
    /// With `kernel` (a kernel's inverse lengthscales, the warm chain's), the anchor's
    /// `opts.own` nearest own rows in *that* metric join too (those not in the group yet): the
    /// rows the kernel claims are correlated with the anchor, so that the likelihood can
    /// refute a claim the fixed metric's neighbours cannot test (on wind at B = 2,000 a chain
    /// drifted to "the same day of the year in any year": every group's rows were of nearby
    /// days, so no group could tell, docs/LOCAL.md §11).
    pub fn group(
        &self,
        anchor: RowRef,
        opts: &GroupOptions,
        kernel: Option<&[f64]>,
    ) -> Vec<RowRef> {
        let x = self.row(anchor);
        let mut group = vec![anchor];
        if let Some(m) = self.memories.get(anchor.0) {
            let a = anchor.0;
            let own = nearest(m, self.d, x, &self.inv_scale, opts.own + 1);
            let own = own.into_iter().filter(|&(_, i)| i != anchor.1);
            group.extend(own.take(opts.own).map(|(_, i)| (a, i)));
            if let Some(inv) = kernel.filter(|k| k.len() == self.d) {
                let claimed = nearest(m, self.d, x, inv, opts.own + group.len());
                let fresh: Vec<RowRef> = claimed
                    .into_iter()
                    .map(|(_, i)| (a, i))
                    .filter(|r| !group.contains(r))
                    .take(opts.own)
                    .collect();
                group.extend(fresh);
            }
        }
        // The other agents' nearest rows, nearest first (the k-d tree: no scan of every memory).
        let others = self
            .tree
            .nearest_agents(x, &self.inv_scale, anchor.0, opts.others);
        group.extend(others.iter().map(|&(_, r)| r));
        group
    }

    /// `1/s_k` per input: the metric's inverse scales.
    pub fn inv_scale(&self) -> &[f64] {
        &self.inv_scale
    }
}

/// `Σ_k ((r_k − x_k) · inv_scale_k)²`: the squared distance of the groups' metric (the one
/// arithmetic of [`nearest`] and the k-d tree, so both rank rows alike, bit for bit).
pub fn scaled_sqdist(r: &[f64], x: &[f64], inv_scale: &[f64]) -> f64 {
    r.iter()
        .zip(x)
        .zip(inv_scale)
        .map(|((u, v), s)| ((u - v) * s) * ((u - v) * s))
        .sum()
}

/// The `k` rows of `rows [n, d]` (row-major) nearest to `x [d]` in the metric
/// `Σ_j ((x_j − r_j)·inv_scale_j)²`, nearest first (ties: the lower index), with their squared
/// distances: a memory's rows near a query row (the neighbourhood groups, and a node's
/// answer to a request for rows near the fitter's anchors).
pub fn nearest(
    rows: &[f64],
    d: usize,
    x: &[f64],
    inv_scale: &[f64],
    k: usize,
) -> Vec<(f64, usize)> {
    if d == 0 || k == 0 {
        return Vec::new();
    }
    let dist = |r: &[f64]| scaled_sqdist(r, x, inv_scale);
    if k == 1 {
        // The nearest row alone (every other agent's row in a group): one pass, no list.
        let best = rows
            .chunks_exact(d)
            .enumerate()
            .map(|(i, r)| (dist(r), i))
            .reduce(|b, c| if c.0.total_cmp(&b.0).is_lt() { c } else { b });
        return best.into_iter().collect();
    }
    let mut all: Vec<(f64, usize)> = rows
        .chunks_exact(d)
        .enumerate()
        .map(|(i, r)| (dist(r), i))
        .collect();
    let k = k.min(all.len());
    let by = |p: &(f64, usize), q: &(f64, usize)| p.0.total_cmp(&q.0).then(p.1.cmp(&q.1));
    if k < all.len() {
        all.select_nth_unstable_by(k, by);
        all.truncate(k);
    }
    all.sort_by(by);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three agents at places 0, 1, 5 (input 0), each with rows on days 0..n (input 1).
    fn stations(n: usize) -> Vec<Vec<f64>> {
        [0.0, 1.0, 5.0]
            .iter()
            .map(|&p| (0..n).flat_map(|t| [p, t as f64]).collect())
            .collect()
    }

    #[test]
    fn a_group_holds_the_same_day_at_the_other_agents_and_the_nearest_own_days() {
        let s = stations(40);
        let hood = Neighbourhood::new(2, s.iter().map(|m| m.as_slice()).collect());
        let opts = GroupOptions {
            anchors: 6,
            own: 2,
            others: 1,
        };
        let g = hood.group((0, 10), &opts, None);
        // Own: days 9 and 11 (equally near; the lower row first); others: agent 1's day 10
        // (agent 2 at place 5 is farther).
        assert_eq!(g, vec![(0, 10), (0, 9), (0, 11), (1, 10)]);
        let all = GroupOptions { others: 5, ..opts };
        assert_eq!(hood.group((2, 3), &all, None)[3..], [(1, 3), (0, 3)]);
    }

    #[test]
    fn anchors_are_spread_over_the_agents_and_split_even_odd() {
        let s = stations(40);
        let hood = Neighbourhood::new(2, s.iter().map(|m| m.as_slice()).collect());
        let (fit, score) = hood.anchors(&GroupOptions {
            anchors: 12,
            own: 0,
            others: 0,
        });
        assert_eq!(fit.len() + score.len(), 12);
        for a in 0..3 {
            assert_eq!(fit.iter().filter(|r| r.0 == a).count(), 2);
            assert_eq!(score.iter().filter(|r| r.0 == a).count(), 2);
        }
        assert!(fit.iter().all(|r| !score.contains(r)));
    }

    #[test]
    fn a_constant_input_and_a_ragged_memory_do_not_break_the_metric() {
        let a = [1.0, 2.0, 1.0, 3.0];
        let ragged = [1.0, 2.0, 3.0];
        let hood = Neighbourhood::new(2, vec![&a, &ragged]);
        assert_eq!(hood.rows(1), 0);
        assert_eq!(hood.inv_scale[0], 1.0);
        assert_eq!(
            hood.group((0, 0), &GroupOptions::default(), None),
            vec![(0, 0), (0, 1)]
        );
    }

    #[test]
    fn nearest_rows_are_sorted_with_ties_to_the_lower_index() {
        let rows = [0.0, 3.0, 1.0, -1.0, 5.0, 2.0];
        let got = nearest(&rows, 1, &[1.0], &[1.0], 3);
        assert_eq!(got, vec![(0.0, 2), (1.0, 0), (1.0, 5)]);
        assert_eq!(nearest(&rows, 1, &[1.0], &[2.0], 1), vec![(0.0, 2)]);
        assert_eq!(nearest(&rows, 1, &[1.0], &[1.0], 10).len(), 6);
        assert!(nearest(&rows, 1, &[1.0], &[1.0], 0).is_empty());
    }

    #[test]
    fn the_kernel_s_claimed_neighbours_join_the_group() {
        // One agent, rows on days 0..40 with a day-of-year input (day mod 10): the fixed metric's
        // nearest own rows of day 12 are days 11 and 13; a kernel that ignores the day and
        // looks at the day of the year claims days 2 and 22 (same day of the year).
        let m: Vec<f64> = (0..40).flat_map(|t| [t as f64, (t % 10) as f64]).collect();
        let hood = Neighbourhood::new(2, vec![m.as_slice()]);
        let opts = GroupOptions {
            anchors: 4,
            own: 2,
            others: 0,
        };
        assert_eq!(
            hood.group((0, 12), &opts, None),
            vec![(0, 12), (0, 11), (0, 13)]
        );
        let g = hood.group((0, 12), &opts, Some(&[1e-3, 10.0]));
        assert_eq!(g, vec![(0, 12), (0, 11), (0, 13), (0, 2), (0, 22)]);
    }
}
