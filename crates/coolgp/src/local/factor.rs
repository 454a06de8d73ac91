//! The incremental Cholesky factor of the memory's `A = K_r(B, B) + σ_rn² I`: one row appended
//! on insert (a forward solve, O(n²)), one row and column deleted on evict (a rank-one update of
//! the trailing block, O(n²)), a full factorization only when the kernel changes.

use faer::{Mat, MatMut, MatRef, Par};

use crate::error::Result;
use crate::linalg::Cholesky;

/// Smallest pivot accepted on append, relative to the new diagonal entry (rounding guard; the
/// noise term keeps the exact pivot ≥ σ_rn²).
const MIN_PIVOT: f64 = 1e-12;

/// A lower factor `A = L Lᵀ` of n ≤ capacity rows, stored column-major in a square buffer that
/// grows by doubling.
#[derive(Clone, Debug)]
pub struct Factor {
    l: Mat<f64>,
    n: usize,
}

impl Default for Factor {
    fn default() -> Self {
        Self {
            l: Mat::zeros(0, 0),
            n: 0,
        }
    }
}

impl Factor {
    /// Rows factored.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True with no row.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The lower factor `L [n, n]`.
    pub fn l(&self) -> MatRef<'_, f64> {
        self.l.as_ref().submatrix(0, 0, self.n, self.n)
    }

    /// Empties the factor (keeps the buffer).
    pub fn clear(&mut self) {
        self.n = 0;
    }

    fn reserve(&mut self, n: usize) {
        if n <= self.l.nrows() {
            return;
        }
        let cap = n.max(2 * self.l.nrows()).max(8);
        let mut l = Mat::zeros(cap, cap);
        l.as_mut()
            .submatrix_mut(0, 0, self.n, self.n)
            .copy_from(self.l());
        self.l = l;
    }

    /// Appends a row: `col [n]` = the new point's covariances with the rows factored, `diag` its
    /// own `A` entry. The new row of L is `L⁻¹ col` and its pivot `√(diag − ‖L⁻¹ col‖²)`
    /// (floored at [`MIN_PIVOT`]·diag against rounding).
    pub fn push(&mut self, col: &[f64], diag: f64) {
        let n = self.n;
        debug_assert_eq!(col.len(), n);
        self.reserve(n + 1);
        let mut v = col.to_vec();
        // Column-oriented forward substitution (contiguous columns of L).
        for j in 0..n {
            let lj = self.l.col_as_slice(j);
            let vj = v[j] / lj[j];
            v[j] = vj;
            for (a, b) in v[j + 1..].iter_mut().zip(&lj[j + 1..n]) {
                *a -= vj * b;
            }
        }
        let sq: f64 = v.iter().map(|a| a * a).sum();
        let pivot = (diag - sq).max(MIN_PIVOT * diag.abs().max(f64::MIN_POSITIVE));
        for (j, a) in v.iter().enumerate() {
            self.l[(n, j)] = *a;
        }
        self.l[(n, n)] = pivot.sqrt();
        for i in 0..n {
            self.l[(i, n)] = 0.0;
        }
        self.n = n + 1;
    }

    /// Deletes row and column `i`: the trailing block `L33` becomes the factor of
    /// `L33 L33ᵀ + l32 l32ᵀ` (a rank-one update by Givens-like steps), the rows below move up.
    ///
    /// # Panics
    /// If `i ≥ len()` (our own misuse).
    #[track_caller]
    pub fn remove(&mut self, i: usize) {
        let n = self.n;
        assert!(i < n, "factor row {i} of {n}");
        // x = l32: column i below the diagonal.
        let mut x: Vec<f64> = self.l.col_as_slice(i)[i + 1..n].to_vec();
        // Shift: columns j < i lose row i; columns j > i move to j − 1 and lose row i.
        for j in 0..i {
            self.l.col_as_slice_mut(j).copy_within(i + 1..n, i);
        }
        for j in i + 1..n {
            let src: Vec<f64> = self.l.col_as_slice(j)[j..n].to_vec();
            let dst = self.l.col_as_slice_mut(j - 1);
            dst[j - 1..n - 1].copy_from_slice(&src);
        }
        self.n = n - 1;
        // Rank-one update of the trailing block rows/cols i..n−1.
        let m = self.n;
        for (k, xk) in (i..m).zip(0..) {
            let col = self.l.col_as_slice_mut(k);
            let lkk = col[k];
            let xv = x[xk];
            let r = lkk.hypot(xv);
            let (c, s) = (r / lkk, xv / lkk);
            col[k] = r;
            for (a, b) in col[k + 1..m].iter_mut().zip(&mut x[xk + 1..]) {
                *a = (*a + s * *b) / c;
                *b = c * *b - s * *a;
            }
        }
        for j in 0..m {
            self.l[(m, j)] = 0.0;
        }
    }

    /// Factors `a [n, n]` afresh (lower triangle read), with the bounded jitter schedule.
    ///
    /// # Errors
    /// [`crate::Error::NotPositiveDefinite`] when every try fails; the factor is then empty.
    pub fn refactor(&mut self, a: MatRef<'_, f64>) -> Result<f64> {
        let n = a.nrows();
        self.n = 0;
        let chol = Cholesky::with_jitter(a, "local memory A", 1e-10, 4)?;
        self.reserve(n);
        let l = chol.l();
        for j in 0..n {
            for i in 0..n {
                self.l[(i, j)] = if i >= j { l[(i, j)] } else { 0.0 };
            }
        }
        self.n = n;
        Ok(chol.jitter)
    }

    /// `rhs ← L⁻¹ rhs` for `rhs [n, q]`.
    pub fn solve_lower_in_place(&self, rhs: MatMut<'_, f64>) {
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(self.l(), rhs, Par::Seq);
    }

    /// `rhs ← L⁻ᵀ rhs` for `rhs [n, q]`.
    pub fn solve_upper_in_place(&self, rhs: MatMut<'_, f64>) {
        faer::linalg::triangular_solve::solve_upper_triangular_in_place(
            self.l().transpose(),
            rhs,
            Par::Seq,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn spd(pts: &[f64], noise: f64) -> Mat<f64> {
        let n = pts.len();
        Mat::from_fn(n, n, |i, j| {
            let d = pts[i] - pts[j];
            (-0.5 * d * d).exp() + if i == j { noise } else { 0.0 }
        })
    }

    #[test]
    fn inserts_and_evicts_equal_a_fresh_factor() {
        // A random sequence of appends and deletions at random positions; after each step the
        // factor equals a fresh Cholesky of the remaining points' A (1e-10).
        let mut rng = Rng::new(5, 9);
        let mut pts: Vec<f64> = Vec::new();
        let mut f = Factor::default();
        let noise = 0.05;
        for step in 0..300 {
            if pts.len() > 2 && (rng.uniform() < 0.45 || pts.len() >= 40) {
                let i = rng.below(pts.len());
                pts.remove(i);
                f.remove(i);
            } else {
                let p = 3.0 * rng.normal();
                let col: Vec<f64> = pts
                    .iter()
                    .map(|q| (-0.5 * (p - q) * (p - q)).exp())
                    .collect();
                f.push(&col, 1.0 + noise);
                pts.push(p);
            }
            let want = Cholesky::new(spd(&pts, noise).as_ref(), "A").expect("spd");
            let (got, want) = (f.l(), want.l());
            let mut worst: f64 = 0.0;
            for j in 0..pts.len() {
                for i in 0..pts.len() {
                    let w = if i >= j { want[(i, j)] } else { 0.0 };
                    worst = worst.max((got[(i, j)] - w).abs());
                }
            }
            assert!(worst < 1e-10, "step {step}: factor off by {worst:e}");
        }
    }
}
