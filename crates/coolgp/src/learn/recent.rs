//! The agent's newest own blocks, kept for the fleet projection's site step (improved on spec
//! §14): each step's target is the data term over this window, re-evaluated under the current
//! q(W) and fused q(u), instead of over the newest block alone.
//!
//! A site target `c·(h, ∂ℓ/∂M + h∘M)` scales one block's gradient by `c = N_i/n`; from a block
//! of 10 points that is a noisy estimate of the agent's whole evidence, and damping it over
//! older blocks trades the noise for targets taken under q(W)s and q(u)s long gone. The window
//! averages over more points, all at the current linearization (docs/HISTORY.md; EXPERIMENTS.md, "Fleet
//! projection"). It holds whole blocks: the newest ones whose points reach `points`.
//!
//! Under the robust likelihood (docs/ROBUST.md) each block keeps its rows' weights, computed
//! when it arrived, so every re-evaluation of the window tempers each row by the same weight.

use std::collections::VecDeque;

use faer::{Mat, MatRef};

/// The newest own blocks `(x [n, d], y [n])`, oldest first: as few as hold at least the
/// window's points, the newest always included; each with its rows' weights `w [n]` under
/// the robust likelihood (`None`: every weight 1, the Gaussian likelihood).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecentBlocks {
    blocks: VecDeque<(Mat<f64>, Vec<f64>)>,
    /// One entry per block, in the same order.
    weights: VecDeque<Option<Vec<f64>>>,
    points: usize,
}

impl RecentBlocks {
    /// From stored blocks, oldest first (a snapshot's).
    pub fn from_blocks(blocks: Vec<(Mat<f64>, Vec<f64>)>) -> Self {
        let points = blocks.iter().map(|b| b.1.len()).sum();
        Self {
            weights: blocks.iter().map(|_| None).collect(),
            blocks: blocks.into(),
            points,
        }
    }

    /// Appends the newest block, then drops the oldest blocks while the others still hold at
    /// least `window` points.
    pub fn push(&mut self, x: MatRef<'_, f64>, y: &[f64], window: usize) {
        self.push_weighted(x, y, None, window);
    }

    /// As [`RecentBlocks::push`], the block's rows with their weights `w [n]` (the robust
    /// likelihood; `None`: every weight 1).
    ///
    /// # Panics
    /// If `w` does not hold one weight per row (our own misuse).
    #[track_caller]
    pub fn push_weighted(
        &mut self,
        x: MatRef<'_, f64>,
        y: &[f64],
        w: Option<&[f64]>,
        window: usize,
    ) {
        assert!(w.is_none_or(|w| w.len() == y.len()), "one weight per row");
        self.blocks.push_back((x.to_owned(), y.to_vec()));
        self.weights.push_back(w.map(<[f64]>::to_vec));
        self.points += y.len();
        while self.blocks.len() > 1 {
            let oldest = self.blocks.front().map_or(0, |b| b.1.len());
            if self.points - oldest < window {
                break;
            }
            self.blocks.pop_front();
            self.weights.pop_front();
            self.points -= oldest;
        }
    }

    /// Sets the blocks' weights, oldest first (`None`: every weight 1), e.g. recomputed for a
    /// restored window.
    ///
    /// # Panics
    /// If `weights` does not hold one entry per block and one weight per row (our own misuse).
    #[track_caller]
    pub fn set_weights(&mut self, weights: Vec<Option<Vec<f64>>>) {
        assert_eq!(weights.len(), self.blocks.len(), "one entry per block");
        for ((_, y), w) in self.blocks.iter().zip(&weights) {
            assert!(
                w.as_ref().is_none_or(|w| w.len() == y.len()),
                "one weight per row"
            );
        }
        self.weights = weights.into();
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

    /// Each block's row weights, oldest first (`None`: every weight 1).
    pub fn weights(&self) -> impl Iterator<Item = Option<&[f64]>> {
        self.weights.iter().map(Option::as_deref)
    }

    /// Every block's row weights stacked as [`RecentBlocks::stacked`] stacks the rows (1 for
    /// a block without weights); `None` when no block has weights (the Gaussian likelihood).
    pub fn stacked_weights(&self) -> Option<Vec<f64>> {
        if self.weights.iter().all(Option::is_none) {
            return None;
        }
        let mut out = Vec::with_capacity(self.points);
        for ((_, y), w) in self.blocks.iter().zip(&self.weights) {
            match w {
                Some(w) => out.extend_from_slice(w),
                None => out.extend(std::iter::repeat_n(1.0, y.len())),
            }
        }
        Some(out)
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
    fn weights_stay_with_their_blocks() {
        // Reference: docs/ROBUST.md §2: a row's weight is taken once, when its block arrives,
        // and leaves the window with its block.
        let mut r = RecentBlocks::default();
        let (x, y) = block(0.0, 3);
        r.push(x.as_ref(), &y, 5);
        assert_eq!(
            r.stacked_weights(),
            None,
            "no weights: the Gaussian likelihood"
        );
        let (x, y) = block(10.0, 3);
        r.push_weighted(x.as_ref(), &y, Some(&[0.5, 0.25, 1.0]), 5);
        assert_eq!(
            r.stacked_weights(),
            Some(vec![1.0, 1.0, 1.0, 0.5, 0.25, 1.0])
        );
        let (x, y) = block(20.0, 3);
        r.push_weighted(x.as_ref(), &y, Some(&[0.1, 0.2, 0.3]), 5);
        // The first block left with its (absent) weights.
        assert_eq!(r.len(), 2);
        assert_eq!(
            r.stacked_weights(),
            Some(vec![0.5, 0.25, 1.0, 0.1, 0.2, 0.3])
        );
        assert_eq!(r.stacked().1.len(), 6);
        let mut back = RecentBlocks::from_blocks(r.blocks().cloned().collect());
        assert_eq!(back.stacked_weights(), None);
        back.set_weights(r.weights().map(|w| w.map(<[f64]>::to_vec)).collect());
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
