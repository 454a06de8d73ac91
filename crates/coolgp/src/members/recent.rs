//! The rows a member is checked on when it keeps no local memory (`--local-memory 0`): its
//! newest [`RECENT_ROWS`] absorbed rows, in a ring. The check (docs/MEMBERS.md §1) reads a
//! member's memory when it has one and these rows otherwise, so a fleet without memory is
//! checked and contained too. They are the agent's own rows, as its memory's are; they are
//! not checkpointed (a restored agent refills them within a few blocks).

use faer::{Mat, MatRef};

/// Rows kept for the check without memory: [`super::CheckOptions`]'s default `rows`.
pub const RECENT_ROWS: usize = 64;

/// A ring of an agent's newest rows (`x [len, d]`, `y [len]`), oldest overwritten first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecentRows {
    /// Input dimension (0 until the first row).
    d: usize,
    /// Row-major inputs, `len · d` values.
    x: Vec<f64>,
    /// Targets.
    y: Vec<f64>,
    /// The slot the next row overwrites once the ring is full.
    next: usize,
}

impl RecentRows {
    /// No rows.
    pub fn new() -> Self {
        Self::default()
    }

    /// Rows held (at most [`RECENT_ROWS`]).
    pub fn len(&self) -> usize {
        self.y.len()
    }

    /// No rows held.
    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }

    /// Keeps the rows of a block (`x [n, d]`, `y [n]`): the newest [`RECENT_ROWS`] of all
    /// rows seen. A block of another input dimension than the rows held replaces them.
    pub fn push(&mut self, x: MatRef<'_, f64>, y: &[f64]) {
        let d = x.ncols();
        if d != self.d {
            *self = Self {
                d,
                ..Self::default()
            };
        }
        for (i, &v) in y.iter().enumerate().take(x.nrows()) {
            if self.y.len() < RECENT_ROWS {
                self.x.extend((0..d).map(|j| x[(i, j)]));
                self.y.push(v);
            } else {
                let k = self.next;
                (0..d).for_each(|j| self.x[k * d + j] = x[(i, j)]);
                self.y[k] = v;
                self.next = (k + 1) % RECENT_ROWS;
            }
        }
    }

    /// Row `k`'s inputs (`d` values). Panics if `k ≥ len`.
    pub fn row(&self, k: usize) -> &[f64] {
        &self.x[k * self.d..(k + 1) * self.d]
    }

    /// The rows `rows` (indices below [`Self::len`]) as `(x [k, d], y [k])`.
    pub fn take(&self, rows: &[usize]) -> (Mat<f64>, Vec<f64>) {
        let x = Mat::from_fn(rows.len(), self.d, |k, j| self.row(rows[k])[j]);
        (x, rows.iter().map(|&k| self.y[k]).collect())
    }

    /// Input dimension (0 before the first row).
    pub fn d(&self) -> usize {
        self.d
    }
}

#[cfg(test)]
mod tests {
    use super::{RecentRows, RECENT_ROWS};
    use faer::Mat;

    #[test]
    fn the_ring_keeps_the_newest_rows() {
        let mut r = RecentRows::new();
        assert!(r.is_empty());
        // 150 rows in blocks of 7: row t is (t, −t) with target t.
        let mut t = 0usize;
        while t < 150 {
            let n = 7.min(150 - t);
            let x = Mat::from_fn(n, 2, |i, j| {
                let v = (t + i) as f64;
                if j == 0 {
                    v
                } else {
                    -v
                }
            });
            let y: Vec<f64> = (0..n).map(|i| (t + i) as f64).collect();
            r.push(x.as_ref(), &y);
            t += n;
        }
        assert_eq!(r.len(), RECENT_ROWS);
        let (x, y) = r.take(&(0..RECENT_ROWS).collect::<Vec<_>>());
        let mut kept: Vec<usize> = y.iter().map(|&v| v as usize).collect();
        kept.sort_unstable();
        assert_eq!(kept, (150 - RECENT_ROWS..150).collect::<Vec<_>>());
        for k in 0..RECENT_ROWS {
            assert_eq!(x[(k, 0)], y[k]);
            assert_eq!(x[(k, 1)], -y[k]);
        }
    }

    #[test]
    fn another_dimension_starts_over() {
        let mut r = RecentRows::new();
        r.push(Mat::<f64>::zeros(3, 2).as_ref(), &[1.0, 2.0, 3.0]);
        r.push(Mat::<f64>::zeros(1, 4).as_ref(), &[9.0]);
        assert_eq!((r.len(), r.d()), (1, 4));
    }
}
