//! [`LocalModel`]: the memory, the residual kernel, the rows' features and the factor of
//! `A = K_r(B, B) + σ_rn² I`, kept in step, and the schedule of the kernel's fits.

use faer::{Mat, MatRef};

use super::cache::Cache;
use super::factor::Factor;
use super::kernel::ResidualKernel;
use super::memory::{retain_rows, Memory};
use super::LocalConfig;
use crate::error::Result;
use crate::model::{Projection, Vocabulary};

/// Rows of the memory before the first fit of the residual kernel (or the capacity if smaller).
pub const FIRST_FIT_ROWS: usize = 16;

/// One agent's local memory and residual GP.
#[derive(Clone, Debug)]
pub struct LocalModel {
    config: LocalConfig,
    memory: Memory,
    kernel: ResidualKernel,
    /// The rows' kernel features, `[n, flen]` row-major.
    feats: Vec<f64>,
    flen: usize,
    factor: Factor,
    /// Memory rows at the last fit (0: none yet).
    last_fit: usize,
    /// Rows inserted since the last fit.
    since_fit: u64,
    /// Bumped by every change of the rows or the kernel (the prediction cache's key).
    version: u64,
    /// The memory's part of predictions under the last model version.
    cache: Cache,
}

impl LocalModel {
    /// An empty model for inputs of width `proj.d()`, its kernel initialized from the global
    /// q(W) `proj` ([`ResidualKernel::initial`]); `seed` drives the reservoir.
    pub fn new(config: LocalConfig, vocab: &Vocabulary, proj: &Projection, seed: u64) -> Self {
        let kernel = ResidualKernel::initial(config.kernel, proj);
        let memory = Memory::new(config.policy, config.capacity, proj.d(), seed);
        Self::unfactored(config, vocab, memory, kernel, (0, 0))
    }

    /// A model holding a restored memory, kernel and fit schedule, factored once.
    ///
    /// # Errors
    /// [`crate::Error::NotPositiveDefinite`] if A cannot be factored.
    pub(crate) fn from_parts(
        config: LocalConfig,
        vocab: &Vocabulary,
        memory: Memory,
        kernel: ResidualKernel,
        schedule: (usize, u64),
    ) -> Result<Self> {
        let mut m = Self::unfactored(config, vocab, memory, kernel, schedule);
        m.refactor(vocab)?;
        Ok(m)
    }

    /// The model of these parts with an empty factor (exact for an empty memory).
    fn unfactored(
        config: LocalConfig,
        vocab: &Vocabulary,
        mut memory: Memory,
        kernel: ResidualKernel,
        (last_fit, since_fit): (usize, u64),
    ) -> Self {
        let flen = kernel.feature_len(vocab.m());
        memory.set_scale(kernel.input_scale());
        Self {
            config,
            memory,
            kernel,
            feats: Vec::new(),
            flen,
            factor: Factor::default(),
            last_fit,
            since_fit,
            version: 0,
            cache: Cache::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &LocalConfig {
        &self.config
    }

    /// Rows in the memory.
    pub fn len(&self) -> usize {
        self.memory.len()
    }

    /// True with no row.
    pub fn is_empty(&self) -> bool {
        self.memory.is_empty()
    }

    /// The memory.
    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    /// The residual kernel.
    pub fn kernel(&self) -> &ResidualKernel {
        &self.kernel
    }

    /// The factor of A.
    pub fn factor(&self) -> &Factor {
        &self.factor
    }

    /// `(rows at the last fit, rows inserted since)`.
    pub fn fit_state(&self) -> (usize, u64) {
        (self.last_fit, self.since_fit)
    }

    /// The memory's rows as a matrix `x [n, d]`.
    pub fn rows(&self) -> Mat<f64> {
        let d = self.memory.d();
        let x = self.memory.x();
        Mat::from_fn(self.len(), d, |i, j| x[i * d + j])
    }

    /// True when the factor holds every row (false only after a failed factorization).
    pub fn is_factored(&self) -> bool {
        self.factor.len() == self.memory.len()
    }

    /// The version of rows and kernel (bumped by every change).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The prediction cache.
    pub(crate) fn cache(&self) -> &Cache {
        &self.cache
    }

    /// Every row's features, `[n, f]` row-major.
    pub(crate) fn features(&self) -> &[f64] {
        &self.feats
    }

    /// Features of row `i`.
    pub(crate) fn feature(&self, i: usize) -> &[f64] {
        &self.feats[i * self.flen..(i + 1) * self.flen]
    }

    /// Offers a checked block `(x [b, d], y [b])`: the memory keeps what its policy says and
    /// the factor follows by row deletions and appends. Returns true when the kernel is due
    /// for a fit: the memory reached [`FIRST_FIT_ROWS`] rows, doubled since the last fit or
    /// became full, or `capacity` rows entered since the last fit.
    pub fn offer(&mut self, vocab: &Vocabulary, x: MatRef<'_, f64>, y: &[f64]) -> bool {
        let in_step = self.factor.len() == self.memory.len();
        let plan = self.memory.offer(x, y);
        self.version += 1;
        self.since_fit += plan.add.len() as u64;
        if !in_step {
            // A failed factorization left the factor empty: try afresh with the new rows.
            let _ = self.refactor(vocab);
            return self.fit_due();
        }
        let f = self.flen;
        self.factor.remove_rows(&plan.remove);
        retain_rows(&mut self.feats, f, &plan.remove);
        let n = self.factor.len();
        let mut xr = vec![0.0; x.ncols()];
        for &r in &plan.add {
            for (j, v) in xr.iter_mut().enumerate() {
                *v = x[(r, j)];
            }
            self.kernel.features(vocab, &xr, &mut self.feats);
        }
        let k = plan.add.len();
        let (old, new) = self.feats.split_at(n * f);
        let mut cross = Mat::<f64>::zeros(n, k);
        for j in 0..k {
            self.kernel
                .cov_column(old, feature_row(new, f, j), cross.col_as_slice_mut(j));
        }
        let noise = self.kernel.noise_var();
        let block = Mat::from_fn(k, k, |i, j| {
            self.kernel
                .cov(feature_row(new, f, i), feature_row(new, f, j))
                + if i == j { noise } else { 0.0 }
        });
        if self.factor.append(cross.as_ref(), block.as_ref()).is_err() {
            let _ = self.refactor(vocab);
        }
        self.fit_due()
    }

    /// True when the kernel is due for a fit (see [`LocalModel::offer`]).
    pub fn fit_due(&self) -> bool {
        let (n, cap) = (self.len(), self.config.capacity);
        n >= FIRST_FIT_ROWS.min(cap).max(1)
            && (self.last_fit == 0
                || (n < cap && n >= 2 * self.last_fit)
                || (n == cap && self.last_fit < cap)
                || self.since_fit >= cap as u64)
    }

    /// Sets the kernel's parameters, recomputes the rows' features and refactors A (the only
    /// full factorization besides a restore); the fit schedule restarts from here.
    ///
    /// # Errors
    /// [`crate::Error::NotPositiveDefinite`] if A cannot be factored (the memory is then
    /// unused until the next fit).
    pub fn set_kernel_params(&mut self, vocab: &Vocabulary, params: &[f64]) -> Result<()> {
        self.kernel.set_params(params);
        self.memory.set_scale(self.kernel.input_scale());
        self.last_fit = self.len();
        self.since_fit = 0;
        self.refactor(vocab)
    }

    /// Recomputes every row's features and factors A afresh.
    fn refactor(&mut self, vocab: &Vocabulary) -> Result<()> {
        self.version += 1;
        let n = self.len();
        self.feats.clear();
        for i in 0..n {
            self.kernel
                .features(vocab, self.memory.row(i), &mut self.feats);
        }
        let noise = self.kernel.noise_var();
        let mut a = Mat::<f64>::zeros(n, n);
        for j in 0..n {
            // The lower triangle is read: rows j.. of column j.
            let f = self.flen;
            let col = &mut a.col_as_slice_mut(j)[j..];
            self.kernel
                .cov_column(&self.feats[j * f..], self.feature(j), col);
            col[0] += noise;
        }
        self.factor.refactor(a.as_ref()).map(drop)
    }
}

/// Row `i` of a row-major buffer of width `f`.
fn feature_row(rows: &[f64], f: usize, i: usize) -> &[f64] {
    &rows[i * f..(i + 1) * f]
}
