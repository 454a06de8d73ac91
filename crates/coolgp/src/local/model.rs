//! [`LocalModel`]: the memory, the residual kernel and the rows' features, kept in step; the
//! factor of `A = K_r(B, B) + σ_rn² I`, brought up to date when an answer needs it
//! ([`LazyFactor`]); and the schedule of the kernel's fits.

use std::sync::Arc;

use faer::{Mat, MatRef};

use super::cache::Cache;
use super::factor::{Factor, LazyFactor, Rows};
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
    /// Each row's id (ascending: rows enter at the end with the next id).
    ids: Vec<u64>,
    /// The id of the next row to enter.
    next_id: u64,
    /// The factor of A, brought up to date on demand.
    lazy: LazyFactor,
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
        m.recompute_features(vocab);
        m.ids = (0..m.len() as u64).collect();
        m.next_id = m.len() as u64;
        m.update_factor()?;
        Ok(m)
    }

    /// The model of these parts without features or factor (exact for an empty memory).
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
            ids: Vec::new(),
            next_id: 0,
            lazy: LazyFactor::default(),
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

    /// The factor of A, brought up to date (see [`LazyFactor`]: incremental when fewer than
    /// half the rows are new since the last update, one factorization otherwise).
    ///
    /// # Errors
    /// [`crate::Error::NotPositiveDefinite`] if A cannot be factored (the memory is then
    /// unused until its rows or kernel change).
    pub fn factor(&self) -> Result<Arc<Factor>> {
        self.lazy.current(self.factor_rows())
    }

    /// [`LocalModel::factor`] through `&mut self` (no lock): the explicit "bring up to date"
    /// step for a caller that holds the model mutably.
    ///
    /// # Errors
    /// As [`LocalModel::factor`].
    pub fn update_factor(&mut self) -> Result<Arc<Factor>> {
        let rows = Rows {
            ids: &self.ids,
            feats: &self.feats,
            kernel: &self.kernel,
            version: self.version,
        };
        self.lazy.current_mut(rows)
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

    /// True when A of every row can be factored (brings the factor up to date; false only
    /// when the factorization fails).
    pub fn is_factored(&self) -> bool {
        self.factor().is_ok()
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

    /// Offers a checked block `(x [b, d], y [b])`: the memory keeps what its policy says and
    /// the rows' features follow; the factor is left behind ([`LocalModel::factor`] brings it
    /// up to date). Returns true when the kernel is due for a fit ([`LocalModel::fit_due`]).
    pub fn offer(&mut self, vocab: &Vocabulary, x: MatRef<'_, f64>, y: &[f64]) -> bool {
        let plan = self.memory.offer(x, y);
        self.version += 1;
        self.since_fit += plan.add.len() as u64;
        retain_rows(&mut self.feats, self.flen, &plan.remove);
        retain_ids(&mut self.ids, &plan.remove);
        let mut xr = vec![0.0; x.ncols()];
        for &r in &plan.add {
            for (j, v) in xr.iter_mut().enumerate() {
                *v = x[(r, j)];
            }
            self.kernel.features(vocab, &xr, &mut self.feats);
            self.ids.push(self.next_id);
            self.next_id += 1;
        }
        self.fit_due()
    }

    /// True when the kernel is due for a fit: the memory reached [`FIRST_FIT_ROWS`] rows,
    /// doubled since the last fit or became full, or `capacity` rows entered since the last
    /// fit.
    pub fn fit_due(&self) -> bool {
        let (n, cap) = (self.len(), self.config.capacity);
        n >= FIRST_FIT_ROWS.min(cap).max(1)
            && (self.last_fit == 0
                || (n < cap && n >= 2 * self.last_fit)
                || (n == cap && self.last_fit < cap)
                || self.since_fit >= cap as u64)
    }

    /// Sets the kernel's parameters and recomputes the rows' features; the factor is redone
    /// (one full factorization) when next needed; the fit schedule restarts from here.
    ///
    /// # Errors
    /// None today (a factorization failure shows when the factor is next needed: the memory
    /// is then unused until its rows or kernel change); kept for callers that refactor.
    pub fn set_kernel_params(&mut self, vocab: &Vocabulary, params: &[f64]) -> Result<()> {
        self.kernel.set_params(params);
        self.flen = self.kernel.feature_len(vocab.m());
        self.memory.set_scale(self.kernel.input_scale());
        self.last_fit = self.len();
        self.since_fit = 0;
        self.recompute_features(vocab);
        Ok(())
    }

    /// [`LocalModel::set_kernel_params`] with the learned kernel's family too (a
    /// `GlobalResidual` kernel keeps its own).
    ///
    /// # Errors
    /// [`crate::Error::DimensionMismatch`] for a learned kernel's parameters of another length
    /// than the family's ([`super::ResidualFamily::param_len`]).
    pub fn set_kernel(
        &mut self,
        vocab: &Vocabulary,
        family: super::ResidualFamily,
        params: &[f64],
    ) -> Result<()> {
        if self.kernel.kind() == super::ResidualKind::Learned {
            let want = family.param_len(self.kernel.d());
            crate::error::ensure_dim("local residual kernel parameters", want, params.len())?;
        }
        self.kernel.set_family(family);
        self.set_kernel_params(vocab, params)
    }

    /// [`LocalModel::set_kernel`] that keeps the fit schedule ([`LocalModel::fit_state`]): the
    /// fleet's consensus of per-agent fits ([`super::consensus`]) changes the kernel the agent
    /// answers and refits from, not when it refits on its own rows.
    ///
    /// # Errors
    /// As [`LocalModel::set_kernel`].
    pub fn adopt_kernel(
        &mut self,
        vocab: &Vocabulary,
        family: super::ResidualFamily,
        params: &[f64],
    ) -> Result<()> {
        let schedule = (self.last_fit, self.since_fit);
        self.set_kernel(vocab, family, params)?;
        (self.last_fit, self.since_fit) = schedule;
        Ok(())
    }

    /// Recomputes every row's features under the current kernel; the factor starts afresh.
    fn recompute_features(&mut self, vocab: &Vocabulary) {
        self.version += 1;
        self.feats.clear();
        for i in 0..self.len() {
            self.kernel
                .features(vocab, self.memory.row(i), &mut self.feats);
        }
        self.lazy.invalidate();
    }

    /// The rows as the lazy factor sees them.
    fn factor_rows(&self) -> Rows<'_> {
        Rows {
            ids: &self.ids,
            feats: &self.feats,
            kernel: &self.kernel,
            version: self.version,
        }
    }

    /// `(full factorizations, incremental updates)` of A so far (a test counter).
    pub fn factor_counts(&self) -> (u64, u64) {
        self.lazy.counts()
    }
}

/// Deletes entries `remove` (ascending) of `ids`.
fn retain_ids(ids: &mut Vec<u64>, remove: &[usize]) {
    let mut next = remove.iter().peekable();
    let mut i = 0;
    ids.retain(|_| {
        let gone = next.peek() == Some(&&i);
        if gone {
            next.next();
        }
        i += 1;
        !gone
    });
}
