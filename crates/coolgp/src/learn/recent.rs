//! The agent's newest own blocks, kept for the fleet projection's site step (improved on spec
//! §14): each step's target is the data term over this window, re-evaluated under the current
//! q(W) and fused q(u), instead of over the newest block alone.
//!
//! A site target `c·(h, ∂ℓ/∂M + h∘M)` scales one block's gradient by `c = N_i/n`; from a block
//! of 10 points that is a noisy estimate of the agent's whole evidence, and damping it over
//! older blocks trades the noise for targets taken under q(W)s and q(u)s long gone. The window
//! averages over more points, all at the current linearization (docs/HISTORY.md; EXPERIMENTS.md, "Fleet
//! projection"). It holds whole blocks: the newest ones whose points reach `points`.

use std::collections::VecDeque;

use faer::{Mat, MatRef};

/// The newest own blocks `(x [n, d], y [n])`, oldest first: as few as hold at least the
/// window's points, the newest always included.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecentBlocks {
    blocks: VecDeque<(Mat<f64>, Vec<f64>)>,
    points: usize,
}

impl RecentBlocks {
    /// From stored blocks, oldest first (a snapshot's).
    pub fn from_blocks(blocks: Vec<(Mat<f64>, Vec<f64>)>) -> Self {
        let points = blocks.iter().map(|b| b.1.len()).sum();
        Self {
            blocks: blocks.into(),
            points,
        }
    }

    /// Appends the newest block, then drops the oldest blocks while the others still hold at
    /// least `window` points.
    pub fn push(&mut self, x: MatRef<'_, f64>, y: &[f64], window: usize) {
        self.blocks.push_back((x.to_owned(), y.to_vec()));
        self.points += y.len();
        while self.blocks.len() > 1 {
            let oldest = self.blocks.front().map_or(0, |b| b.1.len());
            if self.points - oldest < window {
                break;
            }
            self.blocks.pop_front();
            self.points -= oldest;
        }
    }

    /// Blocks held.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// True when no block is held.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Points held.
    pub fn points(&self) -> usize {
        self.points
    }

    /// The blocks, oldest first.
    pub fn blocks(&self) -> impl Iterator<Item = &(Mat<f64>, Vec<f64>)> {
        self.blocks.iter()
    }

    /// Every block's rows stacked, oldest first: `(x [Σn, d], y [Σn])`.
    pub fn stacked(&self) -> (Mat<f64>, Vec<f64>) {
        let d = self.blocks.front().map_or(0, |b| b.0.ncols());
        let mut x = Mat::zeros(self.points, d);
        let mut y = Vec::with_capacity(self.points);
        for (xb, yb) in &self.blocks {
            let start = y.len();
            x.as_mut()
                .subrows_mut(start, xb.nrows())
                .copy_from(xb.as_ref());
            y.extend_from_slice(yb);
        }
        (x, y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(first: f64, n: usize) -> (Mat<f64>, Vec<f64>) {
        let x = Mat::from_fn(n, 2, |i, j| first + i as f64 + 0.5 * j as f64);
        let y = (0..n).map(|i| first + i as f64).collect();
        (x, y)
    }

    #[test]
    fn the_window_keeps_the_fewest_newest_blocks_that_reach_its_points() {
        let mut r = RecentBlocks::default();
        for k in 0..5 {
            let (x, y) = block(10.0 * k as f64, 10);
            r.push(x.as_ref(), &y, 25);
        }
        // 30 points: dropping the oldest would leave 20 < 25.
        assert_eq!((r.len(), r.points()), (3, 30));
        let (x, y) = r.stacked();
        assert_eq!((x.nrows(), x.ncols(), y.len()), (30, 2, 30));
        assert_eq!(y[0], 20.0, "oldest first: block 2");
        assert_eq!(y[29], 49.0, "newest last: block 4");
        assert_eq!(x[(29, 1)], 49.5);
        // A block larger than the window replaces everything before it.
        let (x, y) = block(100.0, 40);
        r.push(x.as_ref(), &y, 25);
        assert_eq!((r.len(), r.points()), (1, 40));
        // Restoring from the blocks gives the same window.
        let back = RecentBlocks::from_blocks(r.blocks().cloned().collect());
        assert_eq!(back, r);
    }

    #[test]
    fn a_window_of_zero_points_keeps_only_the_newest_block() {
        let mut r = RecentBlocks::default();
        for k in 0..3 {
            let (x, y) = block(k as f64, 4);
            r.push(x.as_ref(), &y, 0);
        }
        assert_eq!((r.len(), r.points()), (1, 4));
    }
}
