//! The incremental Cholesky factor of the memory's `A = K_r(B, B) + σ_rn² I`: rows appended on
//! insert (a forward solve, O(n²) per row, batched over a block's rows), rows and columns
//! deleted on evict (a rank-one update of the trailing block per row, O(n²), batched as one
//! rank-r update), a full factorization only when the kernel changes.
//!
//! The factor is maintained lazily ([`LazyFactor`]): learning only records the memory's rows;
//! the factor is brought up to date when an answer needs it, by the incremental operations
//! when fewer than half the rows are new since the last update, by one factorization
//! otherwise (docs/LOCAL.md §8).

use std::sync::{Arc, Mutex, PoisonError};

use faer::reborrow::ReborrowMut;
use faer::{Mat, MatMut, MatRef, Par};

use super::kernel::ResidualKernel;
use crate::error::{Error, Result};
use crate::linalg::Cholesky;

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

    /// Appends one row (see [`Factor::append`]): `col [n]` = the new point's covariances with
    /// the rows factored, `diag` its own `A` entry.
    ///
    /// # Errors
    /// As [`Factor::append`].
    pub fn push(&mut self, col: &[f64], diag: f64) -> Result<()> {
        let cross = Mat::from_fn(self.n, 1, |i, _| col[i]);
        self.append(cross.as_ref(), Mat::from_fn(1, 1, |_, _| diag).as_ref())
    }

    /// Appends k rows: `cross [n, k]` = their covariances with the rows factored, `block [k, k]`
    /// their own `A` (lower triangle read). The new rows of L are `[L21, L22]` with
    /// `L21ᵀ = L⁻¹ cross` (one triangular solve, O(n² k)) and `L22 = chol(block − L21 L21ᵀ)`.
    ///
    /// # Errors
    /// [`crate::Error::NotPositiveDefinite`] if the Schur complement cannot be factored (then
    /// the factor is unchanged; the caller refactors).
    pub fn append(&mut self, cross: MatRef<'_, f64>, block: MatRef<'_, f64>) -> Result<()> {
        let (n, k) = (self.n, block.nrows());
        debug_assert_eq!((cross.nrows(), cross.ncols()), (n, k));
        if k == 0 {
            return Ok(());
        }
        let mut x = cross.to_owned();
        self.solve_lower_in_place(x.as_mut());
        let mut s = block.to_owned();
        crate::linalg::mul_add(s.as_mut(), x.transpose(), x.as_ref(), -1.0);
        let chol = Cholesky::new(s.as_ref(), "local memory A (new rows)")?;
        self.reserve(n + k);
        let l22 = chol.l();
        for j in 0..n {
            for i in 0..k {
                self.l[(n + i, j)] = x[(j, i)];
            }
        }
        for j in 0..k {
            let col = self.l.col_as_slice_mut(n + j);
            col[..n + j].fill(0.0);
            for i in j..k {
                col[n + i] = l22[(i, j)];
            }
        }
        self.n = n + k;
        Ok(())
    }

    /// Deletes row and column `i` ([`Factor::remove_rows`] of one row).
    ///
    /// # Panics
    /// If `i ≥ len()` (our own misuse).
    #[track_caller]
    pub fn remove(&mut self, i: usize) {
        self.remove_rows(&[i]);
    }

    /// Deletes the rows and columns `rows` (ascending, distinct). With `i1 = rows[0]`, the
    /// kept rows' part of L is `[T E]` after dropping the deleted rows: `T` (the kept columns,
    /// lower triangular) and `E` (the deleted columns), so the new factor is `T` with its block
    /// from `i1` on updated by the rank-r term `E Eᵀ` (faer's blocked rank-r update, O(r n²)).
    ///
    /// # Panics
    /// If a row is out of range or the rows are not ascending (our own misuse).
    #[track_caller]
    pub fn remove_rows(&mut self, rows: &[usize]) {
        let Some(&i1) = rows.first() else {
            return;
        };
        let n = self.n;
        assert!(
            rows.windows(2).all(|w| w[0] < w[1]) && rows[rows.len() - 1] < n,
            "factor rows {rows:?} of {n}"
        );
        let mut gone = vec![false; n];
        rows.iter().for_each(|&i| gone[i] = true);
        let keep: Vec<usize> = (0..n).filter(|&i| !gone[i]).collect();
        let nk = keep.len();
        // E: the deleted columns at the kept rows from i1 on (rows before i1 are all kept).
        let mut e = Mat::from_fn(nk - i1, rows.len(), |t, c| self.l[(keep[i1 + t], rows[c])]);
        // Compact in place: new (ii, jj) ← old (keep[ii], keep[jj]) for ii ≥ jj; every source
        // lies at or after its destination in column-major order, so none is overwritten first.
        for jj in 0..nk {
            let from = jj.max(i1);
            for ii in from..nk {
                self.l[(ii, jj)] = self.l[(keep[ii], keep[jj])];
            }
        }
        self.n = nk;
        if nk > i1 {
            let t = self.l.as_mut().submatrix_mut(i1, i1, nk - i1, nk - i1);
            let mut alpha = faer::Col::<f64>::ones(rows.len());
            // The update of a positive definite factor by a positive semidefinite term never
            // fails.
            let _ = faer::linalg::cholesky::llt::update::rank_r_update_clobber(
                t,
                e.as_mut(),
                alpha.as_diagonal_mut(),
            );
        }
    }

    /// Factors `a [n, n]` afresh (lower triangle read), sequentially, with the bounded jitter
    /// schedule of [`Cholesky::with_jitter`] (`a`, then `a + τ I`, `τ = 1e-10 · mean(diag a)
    /// · 10^t`, `t < 4`); returns the jitter used.
    ///
    /// # Errors
    /// [`crate::Error::NotPositiveDefinite`] when every try fails; the factor is then empty.
    pub fn refactor(&mut self, a: MatRef<'_, f64>) -> Result<f64> {
        let n = a.nrows();
        self.n = 0;
        self.reserve(n);
        let mean_diag = (0..n).map(|i| a[(i, i)]).sum::<f64>() / n.max(1) as f64;
        let (mut tau, mut next) = (0.0, 1e-10 * mean_diag.abs().max(f64::MIN_POSITIVE));
        for _ in 0..=4 {
            for j in 0..n {
                for i in 0..n {
                    self.l[(i, j)] = if i >= j { a[(i, j)] } else { 0.0 };
                }
                self.l[(j, j)] += tau;
            }
            if cholesky_seq_in_place(self.l.as_mut().submatrix_mut(0, 0, n, n)) {
                self.n = n;
                return Ok(tau);
            }
            (tau, next) = (next, 10.0 * next);
        }
        Err(Error::NotPositiveDefinite {
            what: "local memory A",
            jitter_tried: tau,
        })
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

/// Factors a symmetric positive definite `a` (lower triangle) in place into its lower
/// Cholesky factor, sequentially (`Par::Seq`: inside an agent); false if a pivot is not
/// positive.
pub(crate) fn cholesky_seq_in_place(mut a: MatMut<'_, f64>) -> bool {
    use faer::dyn_stack::{MemBuffer, MemStack};
    use faer::linalg::cholesky::llt::factor;
    let n = a.nrows();
    let scratch = factor::cholesky_in_place_scratch::<f64>(n, Par::Seq, Default::default());
    let mut mem = MemBuffer::new(scratch);
    let ok = factor::cholesky_in_place(
        a.rb_mut(),
        Default::default(),
        Par::Seq,
        MemStack::new(&mut mem),
        Default::default(),
    )
    .is_ok();
    // The factorization uses the strict upper triangle as workspace (faer's `Llt::new` zeroes
    // it too).
    for j in 1..n {
        for i in 0..j {
            a[(i, j)] = 0.0;
        }
    }
    ok
}

/// The memory's rows as a [`LazyFactor`] must factor them: each row's id (ascending: rows
/// enter at the end of the memory and get ever larger ids), its kernel features `feats [n, f]`
/// (row-major), the kernel and the model's version.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rows<'a> {
    /// Row ids, ascending.
    pub ids: &'a [u64],
    /// Features `[n, f]`, row-major.
    pub feats: &'a [f64],
    /// The residual kernel.
    pub kernel: &'a ResidualKernel,
    /// The model's version (a failed factorization is not retried at the same version).
    pub version: u64,
}

impl Rows<'_> {
    fn len(&self) -> usize {
        self.ids.len()
    }

    fn feature(&self, i: usize) -> &[f64] {
        let f = self.feats.len() / self.len().max(1);
        &self.feats[i * f..(i + 1) * f]
    }
}

/// The factor of the rows last brought up to date, their ids, and counters.
#[derive(Clone, Debug, Default)]
struct Synced {
    factor: Arc<Factor>,
    /// Ids of the rows factored, ascending (the factor's row order).
    ids: Vec<u64>,
    /// The version at which the last factorization failed (not retried before a change).
    failed: Option<u64>,
    /// Full factorizations so far (a test counter).
    refactors: u64,
    /// Incremental updates so far (a test counter).
    updates: u64,
}

/// A [`Factor`] of the memory's rows brought up to date on demand (interior mutability:
/// answers take `&self`; a [`Mutex`], so the model stays `Send + Sync`).
///
/// The rule (docs/LOCAL.md §8): with `n` rows now, of which `k` entered since the last update,
/// the factor follows by row deletions and one batched append when `2k < n`, and is factored
/// afresh otherwise (most of the memory turned over: one O(n³/3) factorization is cheaper
/// than `k` appends and deletions of O(n²) each). With an answer after every block of fewer
/// than n/2 rows the incremental path is always the one taken; a row that enters and leaves
/// between two answers costs nothing.
#[derive(Debug, Default)]
pub(crate) struct LazyFactor(Mutex<Synced>);

impl Clone for LazyFactor {
    fn clone(&self) -> Self {
        let s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        Self(Mutex::new(s.clone()))
    }
}

impl LazyFactor {
    /// Forgets every row (the kernel changed: the next update factors afresh).
    pub fn invalidate(&mut self) {
        let s = self.0.get_mut().unwrap_or_else(PoisonError::into_inner);
        s.ids.clear();
        s.failed = None;
        Arc::make_mut(&mut s.factor).clear();
    }

    /// `(full factorizations, incremental updates)` so far.
    pub fn counts(&self) -> (u64, u64) {
        let s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        (s.refactors, s.updates)
    }

    /// The factor of `rows`, brought up to date by the rule of [`LazyFactor`].
    ///
    /// # Errors
    /// [`Error::NotPositiveDefinite`] if A cannot be factored (the factor is then empty, and
    /// not tried again before the version changes).
    pub fn current(&self, rows: Rows<'_>) -> Result<Arc<Factor>> {
        let mut s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        sync(&mut s, rows)?;
        Ok(s.factor.clone())
    }

    /// [`LazyFactor::current`] without locking (`&mut self`).
    ///
    /// # Errors
    /// As [`LazyFactor::current`].
    pub fn current_mut(&mut self, rows: Rows<'_>) -> Result<Arc<Factor>> {
        let s = self.0.get_mut().unwrap_or_else(PoisonError::into_inner);
        sync(s, rows)?;
        Ok(s.factor.clone())
    }
}

/// Brings `s` up to date with `rows` (see [`LazyFactor`]).
fn sync(s: &mut Synced, rows: Rows<'_>) -> Result<()> {
    let not_pd = Error::NotPositiveDefinite {
        what: "local memory A",
        jitter_tried: 0.0,
    };
    if s.ids == rows.ids {
        return match s.failed {
            Some(v) if v == rows.version => Err(not_pd),
            _ => Ok(()),
        };
    }
    if s.failed == Some(rows.version) {
        return Err(not_pd);
    }
    // Both id lists ascend and rows enter with larger ids than any factored: the factored rows
    // still present are a prefix of `rows`, the rest entered since.
    let mut remove = Vec::new();
    let mut kept = 0;
    for (i, id) in s.ids.iter().enumerate() {
        if rows.ids.get(kept) == Some(id) {
            kept += 1;
        } else {
            remove.push(i);
        }
    }
    let n = rows.len();
    let k = n - kept;
    if s.failed.is_none() && kept > 0 && 2 * k < n && s.ids.len() == s.factor.len() {
        let f = Arc::make_mut(&mut s.factor);
        f.remove_rows(&remove);
        if append_rows(f, rows, kept).is_ok() {
            s.ids = rows.ids.to_vec();
            s.updates += 1;
            return Ok(());
        }
    }
    s.refactors += 1;
    s.ids.clear();
    match refactor_rows(Arc::make_mut(&mut s.factor), rows) {
        Ok(()) => {
            s.ids = rows.ids.to_vec();
            s.failed = None;
            Ok(())
        }
        Err(e) => {
            s.failed = Some(rows.version);
            Err(e)
        }
    }
}

/// Appends rows `kept..` of `rows` to a factor of rows `..kept`.
fn append_rows(f: &mut Factor, rows: Rows<'_>, kept: usize) -> Result<()> {
    let (n, kernel) = (rows.len(), rows.kernel);
    let k = n - kept;
    let width = rows.feats.len() / n.max(1);
    let old = &rows.feats[..kept * width];
    let mut cross = Mat::<f64>::zeros(kept, k);
    kernel.cov_columns(old, &rows.feats[kept * width..], width, &mut cross);
    let noise = kernel.noise_var();
    let block = Mat::from_fn(k, k, |i, j| {
        kernel.cov(rows.feature(kept + i), rows.feature(kept + j))
            + if i == j { noise } else { 0.0 }
    });
    f.append(cross.as_ref(), block.as_ref())
}

/// Factors A of `rows` afresh.
fn refactor_rows(f: &mut Factor, rows: Rows<'_>) -> Result<()> {
    factor_features(f, rows.kernel, rows.feats, rows.len())
}

/// Factors `A = K_r(B, B) + σ_rn² I` of the `n` rows whose kernel features are
/// `feats [n, f]` (row-major) afresh into `f`, with the jitter schedule of
/// [`Factor::refactor`].
///
/// # Errors
/// [`crate::Error::NotPositiveDefinite`] when every try fails; `f` is then empty.
pub(crate) fn factor_features(
    f: &mut Factor,
    kernel: &ResidualKernel,
    feats: &[f64],
    n: usize,
) -> Result<()> {
    let width = feats.len() / n.max(1);
    let noise = kernel.noise_var();
    let mut a = Mat::<f64>::zeros(n, n);
    for j in 0..n {
        // The lower triangle is read: rows j.. of column j.
        let col = &mut a.col_as_slice_mut(j)[j..];
        kernel.cov_column(&feats[j * width..], &feats[j * width..(j + 1) * width], col);
        col[0] += noise;
    }
    f.refactor(a.as_ref()).map(drop)
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
        // A random sequence of appends (one row or several) and deletions (one row at a random
        // position or a random subset); after each step the factor equals a fresh Cholesky of
        // the remaining points' A (1e-10).
        let mut rng = Rng::new(5, 9);
        let mut pts: Vec<f64> = Vec::new();
        let mut f = Factor::default();
        let noise = 0.05;
        let kern = |a: f64, b: f64| (-0.5 * (a - b) * (a - b)).exp();
        for step in 0..400 {
            let u = rng.uniform();
            if pts.len() > 2 && (u < 0.3 || pts.len() >= 40) {
                let i = rng.below(pts.len());
                pts.remove(i);
                f.remove(i);
            } else if pts.len() > 4 && u < 0.45 {
                // A random subset of rows at once.
                let rows: Vec<usize> = (0..pts.len()).filter(|_| rng.uniform() < 0.3).collect();
                for &i in rows.iter().rev() {
                    pts.remove(i);
                }
                f.remove_rows(&rows);
            } else if u < 0.7 {
                let p = 3.0 * rng.normal();
                let col: Vec<f64> = pts.iter().map(|&q| kern(p, q)).collect();
                f.push(&col, 1.0 + noise).expect("positive pivot");
                pts.push(p);
            } else {
                let new: Vec<f64> = (0..1 + rng.below(5)).map(|_| 3.0 * rng.normal()).collect();
                let cross = Mat::from_fn(pts.len(), new.len(), |i, j| kern(pts[i], new[j]));
                let block = Mat::from_fn(new.len(), new.len(), |i, j| {
                    kern(new[i], new[j]) + if i == j { noise } else { 0.0 }
                });
                f.append(cross.as_ref(), block.as_ref())
                    .expect("positive definite");
                pts.extend(new);
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
