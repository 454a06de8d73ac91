//! One agent's learning state: its q(W), σ_s, σ_n (θ), the Adam moments, the learner's
//! caches of its data (spec §4) and the ψ workspace, with the counts of what it absorbed.
//!
//! A block is absorbed and differentiated in chunks of rows ([`block_rows`]), so memory does
//! not grow with the block: `L_D`, its gradient and the statistics are sums over points.

use faer::MatRef;

use crate::error::Result;
use crate::learn::adam::{Adam, AdamConfig};
use crate::learn::elbo::{block_loglik_grad_weighted, block_loglik_grad_with, BlockElbo, BlockPsi};
use crate::learn::importance::IsDiagnostics;
use crate::learn::robust::row_weights;
use crate::learn::window::window_loglik_grad_weighted;
use crate::learn::{Learner, UpdateMode};
use crate::model::natural::Posterior;
use crate::model::psi::PsiWorkspace;
use crate::model::{Excess, Projection, ProjectionGrad, Vocabulary};

/// Largest ψ̄2 buffer (numbers) kept per thread between blocks: 32 MiB, one chunk
/// ([`MAX_BLOCK_PSI`]), e.g. a stream-memory site window of 320 points and its newest block
/// at m = 100, which is re-evaluated after every fusion (allocating it anew each time cost the
/// page faults and zero-fills of 25 MB per refresh).
const MAX_KEPT_BLOCK_PSI: usize = 1 << 22;

/// Largest ψ̄2 buffer (numbers) of one chunk of a block: 32 MiB (e.g. 419 rows at m = 100);
/// larger blocks are processed in chunks of rows, so memory does not grow with the block.
const MAX_BLOCK_PSI: usize = 1 << 22;

#[cfg(test)]
thread_local! {
    /// Tests set this to force small chunks.
    pub(crate) static ROWS_PER_CHUNK: std::cell::Cell<Option<usize>> =
        const { std::cell::Cell::new(None) };
}

/// Rows of a block per ψ chunk at m inducing inputs.
pub(crate) fn block_rows(m: usize) -> usize {
    #[cfg(test)]
    if let Some(r) = ROWS_PER_CHUNK.with(std::cell::Cell::get) {
        return r;
    }
    (MAX_BLOCK_PSI / (m * m).max(1)).max(1)
}

/// The block `(x [n, d], y [n])` as consecutive chunks of at most `rows` rows.
fn row_chunks<'a>(
    x: MatRef<'a, f64>,
    y: &'a [f64],
    rows: usize,
) -> impl Iterator<Item = (MatRef<'a, f64>, &'a [f64])> + 'a {
    let rows = rows.max(1);
    (0..y.len()).step_by(rows).map(move |start| {
        let len = rows.min(y.len() - start);
        (x.subrows(start, len), &y[start..start + len])
    })
}

thread_local! {
    /// ψ buffers of the block being absorbed (`n·m²` numbers), reused from block to block by
    /// every agent that runs on this thread: a fleet of agents holds one per thread, not one
    /// per agent.
    static BLOCK_PSI: std::cell::RefCell<BlockPsi> = std::cell::RefCell::new(BlockPsi::default());
}

/// The thread's ψ buffers, taken out of its slot for one block (a nested call would find it
/// empty and allocate its own); give them back with [`keep_block_psi`].
pub(crate) fn take_block_psi() -> BlockPsi {
    BLOCK_PSI.with(|b| std::mem::take(&mut *b.borrow_mut()))
}

/// Returns the ψ buffers to the thread's slot, unless they are large (a big block's `n·m²`
/// would otherwise stay allocated for the thread's lifetime).
pub(crate) fn keep_block_psi(bp: BlockPsi) {
    if bp.psi2.capacity() <= MAX_KEPT_BLOCK_PSI {
        BLOCK_PSI.with(|b| *b.borrow_mut() = bp);
    }
}

/// Why a gradient step was skipped (the [`crate::protocol::Event::StepSkipped`] reason).
pub(crate) type SkipReason = &'static str;

/// The learning state of one agent (module docs).
#[derive(Clone, Debug)]
pub(crate) struct LearnState {
    /// q(W), σ_s, σ_n.
    proj: Projection,
    /// Adam's moments of θ.
    adam: Adam,
    /// The caches of the own data in the update mode.
    learner: Learner,
    /// ψ buffers of the caches' recomputations.
    ws: PsiWorkspace,
    /// Own points absorbed `N_i`.
    n_own: usize,
    /// Own blocks absorbed.
    blocks: u64,
    /// Data version: bumped by every block.
    version: u64,
}

impl LearnState {
    /// The state before any data: the shared initial q(W) `proj`, fresh Adam moments, empty
    /// caches for `mode` (`seed` draws the importance samples).
    pub(crate) fn new(
        vocab: &Vocabulary,
        proj: Projection,
        adam: AdamConfig,
        mode: UpdateMode,
        seed: u64,
    ) -> Self {
        let adam = Adam::new(adam, proj.n_params());
        let learner = Learner::new(vocab, proj.d(), mode, seed);
        Self {
            proj,
            adam,
            learner,
            ws: PsiWorkspace::default(),
            n_own: 0,
            blocks: 0,
            version: 0,
        }
    }

    /// Sets a snapshot's θ, Adam moments, caches and counts `(N_i, blocks, version)`
    /// (checked by the caller).
    pub(crate) fn restore(
        &mut self,
        proj: Projection,
        adam: Adam,
        learner: Learner,
        (n_own, blocks, version): (usize, u64, u64),
    ) {
        self.proj = proj;
        self.adam = adam;
        self.learner = learner;
        self.n_own = n_own;
        self.blocks = blocks;
        self.version = version;
    }

    /// q(W), σ_s, σ_n.
    pub(crate) fn projection(&self) -> &Projection {
        &self.proj
    }

    /// Adam's state.
    pub(crate) fn adam(&self) -> &Adam {
        &self.adam
    }

    /// The learner's caches.
    pub(crate) fn learner(&self) -> &Learner {
        &self.learner
    }

    /// Own points absorbed `N_i`.
    pub(crate) fn n_own(&self) -> usize {
        self.n_own
    }

    /// Own blocks absorbed.
    pub(crate) fn blocks(&self) -> u64 {
        self.blocks
    }

    /// Data version.
    pub(crate) fn version(&self) -> u64 {
        self.version
    }

    /// Replaces q(W), σ_s, σ_n (adopting a fleet's); false if it was already `proj`.
    pub(crate) fn adopt_projection(&mut self, proj: Projection) -> bool {
        if proj == self.proj {
            return false;
        }
        self.proj = proj;
        true
    }

    /// Sets θ from a flat vector ([`Projection::set_flat`]).
    pub(crate) fn set_theta(&mut self, theta: &[f64]) {
        self.proj.set_flat(theta);
    }

    /// Sets q(W) from a sum of natural forms ([`Projection::set_from_natural_sum`]).
    pub(crate) fn set_from_natural_sum(&mut self, sum: &[f64], weight: f64) -> bool {
        self.proj.set_from_natural_sum(sum, weight)
    }

    /// Replaces Adam's moments (a fleet's average).
    pub(crate) fn set_moments(&mut self, m1: Vec<f64>, m2: Vec<f64>) {
        self.adam.m1 = m1;
        self.adam.m2 = m2;
    }

    /// True for the exact mode's caches, which are recomputed under every new q(W).
    pub(crate) fn is_exact(&self) -> bool {
        matches!(self.learner, Learner::Exact(_))
    }

    /// Absorbs the block `(x [n, d], y [n])` under the current q(W) (spec §4), chunk by chunk
    /// of `rows` rows; `bp` is left holding the ψ of the last chunk (all of it for a one-chunk
    /// block), for the gradient step, which runs under the same θ.
    pub(crate) fn absorb(
        &mut self,
        vocab: &Vocabulary,
        x: MatRef<'_, f64>,
        y: &[f64],
        bp: &mut BlockPsi,
        rows: usize,
    ) {
        self.absorb_chunks(vocab, x, y, bp, rows, None);
    }

    /// As [`LearnState::absorb`] under the robust likelihood, in every update mode: each
    /// row's weight against the predictive of q(u) `post` before the block ([`row_weights`],
    /// threshold `c`), from the ψ the absorption computes anyway, then the weighted caches
    /// ([`Learner::absorb_rows`]: weighted statistics, weighted importance sums, or the
    /// weights kept with the exact mode's block). Returns the weights `[n]`, constants for
    /// the gradient step.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn absorb_weighted(
        &mut self,
        vocab: &Vocabulary,
        x: MatRef<'_, f64>,
        y: &[f64],
        bp: &mut BlockPsi,
        rows: usize,
        post: &Posterior,
        c: f64,
    ) -> Vec<f64> {
        let weights = self.absorb_chunks(vocab, x, y, bp, rows, Some((post, c)));
        weights.unwrap_or_default()
    }

    /// The chunks of [`LearnState::absorb`], weighted against `robust = (q(u), c)` when
    /// given; returns the rows' weights then.
    fn absorb_chunks(
        &mut self,
        vocab: &Vocabulary,
        x: MatRef<'_, f64>,
        y: &[f64],
        bp: &mut BlockPsi,
        rows: usize,
        robust: Option<(&Posterior, f64)>,
    ) -> Option<Vec<f64>> {
        let mut weights = robust.map(|_| Vec::with_capacity(y.len()));
        for (xs, ys) in row_chunks(x, y, rows) {
            bp.recompute(vocab, &self.proj, xs);
            let w = robust.map(|(post, c)| row_weights(vocab, &self.proj, post, bp, ys, c));
            self.learner.absorb_rows(vocab, xs, ys, bp, w.as_deref());
            if let (Some(all), Some(w)) = (weights.as_mut(), w) {
                all.extend_from_slice(&w);
            }
        }
        self.count_block(y.len());
        weights
    }

    /// Counts a block of `n` rows: `N_i`, blocks, data version.
    fn count_block(&mut self, n: usize) {
        self.n_own += n;
        self.blocks += 1;
        self.version += 1;
    }

    /// `E_i` from the caches under the current θ, or under its unit scales (σ_s = σ_n = 1)
    /// when `unit_scale`; importance diagnostics where they apply.
    pub(crate) fn excess(
        &mut self,
        vocab: &Vocabulary,
        unit_scale: bool,
    ) -> (Excess, Option<IsDiagnostics>) {
        if unit_scale {
            let unit = self.proj.with_unit_scales();
            self.learner.excess(vocab, &unit, &mut self.ws)
        } else {
            self.learner.excess(vocab, &self.proj, &mut self.ws)
        }
    }

    /// The data term `L_D` of `(x [n, d], y [n])` and its gradient under q(u) `post`, summed
    /// chunk by chunk for more than `rows` rows, each row's term tempered by its weight
    /// `w [n]` when `weights` is given (the robust likelihood). `bp` holds the ψ of the last
    /// chunk (all of it for a one-chunk block). `None` only for an empty block.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn data_term(
        &self,
        vocab: &Vocabulary,
        post: &Posterior,
        x: MatRef<'_, f64>,
        y: &[f64],
        bp: &mut BlockPsi,
        rows: usize,
        weights: Option<&[f64]>,
    ) -> Option<BlockElbo> {
        let term = |xs: MatRef<'_, f64>, ys: &[f64], bp: &BlockPsi, start: usize| match weights {
            None => block_loglik_grad_with(vocab, &self.proj, post, xs, ys, bp),
            Some(w) => block_loglik_grad_weighted(
                vocab,
                &self.proj,
                post,
                xs,
                ys,
                bp,
                &w[start..start + ys.len()],
            ),
        };
        if y.len() <= rows {
            return Some(term(x, y, bp, 0));
        }
        // L_D and its gradient are sums over points: summed chunk by chunk.
        let mut acc: Option<BlockElbo> = None;
        for (k, (xs, ys)) in row_chunks(x, y, rows).enumerate() {
            bp.recompute(vocab, &self.proj, xs);
            let g = term(xs, ys, bp, k * rows.max(1));
            match &mut acc {
                None => acc = Some(g),
                Some(a) => a.add_in_place(&g),
            }
        }
        acc
    }

    /// As [`LearnState::data_term`] for a site window whose last `tail` rows' ψ `bp` holds
    /// (the newest block's, from its absorption under the current q(W)): a window of at most
    /// [`block_rows`] rows computes its older rows' ψ point by point
    /// ([`window_loglik_grad_weighted`], no `n·m²` buffer; bit-identical to recomputing `bp`
    /// over the window first). Each row's term is tempered by its weight `w [n]` when
    /// `weights` is given (the robust likelihood: the weights kept with the window's blocks).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn window_data_term(
        &self,
        vocab: &Vocabulary,
        post: &Posterior,
        x: MatRef<'_, f64>,
        y: &[f64],
        bp: &mut BlockPsi,
        tail: usize,
        weights: Option<&[f64]>,
    ) -> Option<BlockElbo> {
        let rows = block_rows(vocab.m());
        if y.len() <= rows {
            let proj = &self.proj;
            return Some(window_loglik_grad_weighted(
                vocab, proj, post, x, y, bp, tail, weights,
            ));
        }
        self.data_term(vocab, post, x, y, bp, rows, weights)
    }

    /// One Adam step on the per-datum gradient `∇L_D/n − ∇KL_W/kl_den` (spec §6) of a block
    /// of `n` points with data term `elbo`.
    ///
    /// # Errors
    /// The [`SkipReason`] of a non-finite gradient or a failed Adam step (θ unchanged).
    pub(crate) fn gradient_step(
        &mut self,
        elbo: &BlockElbo,
        n: f64,
        kl_den: f64,
    ) -> Result<(), SkipReason> {
        let gl = elbo.grad.to_flat();
        let kl = ProjectionGrad::kl(&self.proj);
        let gk = kl.to_flat();
        let g: Vec<f64> = gl
            .iter()
            .zip(&gk)
            .map(|(l, k)| l / n - k / kl_den)
            .collect();
        if g.iter().any(|v| !v.is_finite()) {
            return Err("gradient");
        }
        let mut theta = self.proj.to_flat();
        match self.adam.step(&mut theta, &g) {
            Ok(()) => {
                self.proj.set_flat(&theta);
                Ok(())
            }
            Err(_) => Err("adam"),
        }
    }
}
