//! The block expected log-likelihood `L_D` and its analytic gradients (spec §3, §6).
//!
//! ```text
//! L_D = −(n/2) log(2π σ_n²) − Q/(2σ_n²),  Q = yᵀy − 2yᵀΨ1α + tr(GΨ2) + nσ_s²      (3.1)
//! ∂L_D/∂M = (gᵃ)ᵀX,  ∂L_D/∂logΣ = 2Σ∘Σ∘((gˢ)ᵀ(X∘X)),
//! ∂L_D/∂logσ_s = (yᵀΨ1α − tr(GΨ2) − nσ_s²)/σ_n²,  ∂L_D/∂logσ_n = −n + Q/σ_n²
//! ```
//! with q(u) (α, G) held fixed. The ψ2 sums use `h = H·1`, `H = c2∘ψ2(x_n)`, so no
//! m×m×d' temporary is formed (spec §6).

use faer::{Mat, MatRef};

use crate::learn::contract::{dot4, g_psi2_contractions, z_sums, Contractions, ZLayout, ZSums};
use crate::learn::hyper::HyperStats;
use crate::model::natural::Posterior;
use crate::model::projection::{Projection, ProjectionGrad};
use crate::model::psi::{point_upper, PsiWorkspace, UnitStats};
use crate::model::Vocabulary;

/// `L_D` of one block and its gradient with respect to θ.
#[derive(Clone, Debug)]
pub struct BlockElbo {
    /// `L_D` (3.1).
    pub value: f64,
    /// `∇_θ L_D`.
    pub grad: ProjectionGrad,
    /// The block's σ_s, σ_n statistics `(A, B, YY, n)` in unit scale (spec §14).
    pub hyper: HyperStats,
}

const LOG_2PI: f64 = 1.837_877_066_409_345_5;

impl BlockElbo {
    /// `self += o`: `L_D`, its gradient and the statistics are sums over points, so the terms
    /// of two disjoint sets of rows add up to those of their union.
    pub fn add_in_place(&mut self, o: &BlockElbo) {
        self.value += o.value;
        let g = &mut self.grad;
        g.mu += &o.grad.mu;
        g.log_sigma += &o.grad.log_sigma;
        g.log_sigma_s += o.grad.log_sigma_s;
        g.log_sigma_n += o.grad.log_sigma_n;
        let h = &mut self.hyper;
        h.a += o.hyper.a;
        h.b += o.hyper.b;
        h.yy += o.hyper.yy;
        h.n += o.hyper.n;
    }
}

/// Unit-scale psi statistics of every point of a block, computed once and used both to
/// absorb the block (frozen mode) and for the gradient step that follows (spec §10). The
/// buffers are reused from block to block ([`BlockPsi::recompute`]).
#[derive(Clone, Debug, Default)]
pub struct BlockPsi {
    m: usize,
    dz: usize,
    ws: PsiWorkspace,
    /// `ψ̄1 [n, m]` row-major.
    pub psi1: Vec<f64>,
    /// `ψ̄2 [n, m, m]` row-major, upper triangles (`k ≥ j`) only: the strict lower triangle
    /// of each point's `[m, m]` slot is unspecified (ψ̄2 is symmetric). It may hold more
    /// than `n` slots (the buffer is reused and never shrinks); those past `n` are unspecified.
    pub psi2: Vec<f64>,
    /// Moments `a [n, d']` row-major.
    pub a: Vec<f64>,
    /// Moments `s [n, d']` row-major.
    pub s: Vec<f64>,
}

impl BlockPsi {
    /// Evaluates every row of `x [n, d]` under `proj`. Memory `n·m²` numbers.
    pub fn compute(vocab: &Vocabulary, proj: &Projection, x: MatRef<'_, f64>) -> Self {
        let mut out = Self::default();
        out.recompute(vocab, proj, x);
        out
    }

    /// As [`BlockPsi::compute`], reusing this value's buffers.
    pub fn recompute(&mut self, vocab: &Vocabulary, proj: &Projection, x: MatRef<'_, f64>) {
        self.resize(vocab, x.nrows());
        self.fill_rows(vocab, proj, x, 0..x.nrows());
    }

    /// As [`BlockPsi::recompute`] for `x [n, d]` when this value already holds the ψ of its
    /// last `tail` rows under the same `proj` (the caller's contract: as computed for them
    /// alone): those rows are moved, not recomputed, with bit-identical results. Falls back to
    /// a full recompute if the held rows' count or shapes do not fit.
    pub fn recompute_keeping_tail(
        &mut self,
        vocab: &Vocabulary,
        proj: &Projection,
        x: MatRef<'_, f64>,
        tail: usize,
    ) {
        let (m, dz, n) = (vocab.m(), vocab.d_latent(), x.nrows());
        let held = self.m == m && self.dz == dz && self.n() == tail && self.psi1.len() == tail * m;
        if !held || tail > n {
            return self.recompute(vocab, proj, x);
        }
        let head = n - tail;
        self.resize(vocab, n);
        self.psi1.copy_within(0..tail * m, head * m);
        self.psi2.copy_within(0..tail * m * m, head * m * m);
        self.a.copy_within(0..tail * dz, head * dz);
        self.s.copy_within(0..tail * dz, head * dz);
        self.fill_rows(vocab, proj, x, 0..head);
    }

    fn resize(&mut self, vocab: &Vocabulary, n: usize) {
        let (m, dz) = (vocab.m(), vocab.d_latent());
        (self.m, self.dz) = (m, dz);
        self.psi1.resize(n * m, 0.0);
        // ψ̄2 only grows: every row read is written first, so zero-filling a window's rows
        // again at each re-evaluation (and the page faults of a new buffer) is saved.
        if self.psi2.len() < n * m * m {
            self.psi2.reserve_exact(n * m * m - self.psi2.len());
            self.psi2.resize(n * m * m, 0.0);
        }
        self.a.resize(n * dz, 0.0);
        self.s.resize(n * dz, 0.0);
    }

    /// ψ of the rows `rows` of `x` into their slots (buffers already sized).
    fn fill_rows(
        &mut self,
        vocab: &Vocabulary,
        proj: &Projection,
        x: MatRef<'_, f64>,
        rows: std::ops::Range<usize>,
    ) {
        let (m, dz, d) = (self.m, self.dz, proj.d());
        let mut xr = vec![0.0; d];
        for r in rows {
            for (j, v) in xr.iter_mut().enumerate() {
                *v = x[(r, j)];
            }
            point_upper(
                vocab,
                proj,
                &xr,
                &mut self.ws,
                &mut self.psi1[r * m..(r + 1) * m],
                &mut self.psi2[r * m * m..(r + 1) * m * m],
            );
            let (a, s) = self.ws.moments();
            self.a[r * dz..(r + 1) * dz].copy_from_slice(a);
            self.s[r * dz..(r + 1) * dz].copy_from_slice(s);
        }
    }

    /// True if this value holds exactly `rows` rows' ψ at `m` inducing inputs, `dz` latent
    /// dimensions.
    pub(crate) fn holds(&self, m: usize, dz: usize, rows: usize) -> bool {
        self.m == m && self.dz == dz && self.n() == rows && self.psi1.len() == rows * m
    }

    /// The ψ workspace, taken out (give it back with [`BlockPsi::set_workspace`]).
    pub(crate) fn take_workspace(&mut self) -> PsiWorkspace {
        std::mem::take(&mut self.ws)
    }

    /// Puts the ψ workspace back.
    pub(crate) fn set_workspace(&mut self, ws: PsiWorkspace) {
        self.ws = ws;
    }

    /// Number of points.
    pub fn n(&self) -> usize {
        self.a.len() / self.dz.max(1)
    }

    /// As [`BlockPsi::accumulate_into`] with row weights `w [n]` (the robust likelihood,
    /// [`crate::learn::robust`]): adds `Σ_n w_n ψ̄2(x_n)`, `Σ_n w_n y_n ψ̄1(x_n)`, n (the rows,
    /// unweighted) and `Σ_n w_n y_n²`.
    ///
    /// # Panics
    /// If `w` is shorter than `y` (our own misuse).
    #[track_caller]
    pub fn accumulate_weighted_into(&self, y: &[f64], w: &[f64], stats: &mut UnitStats) {
        assert!(w.len() >= y.len(), "one weight per row");
        self.accumulate(y, Some(w), stats);
    }

    /// Adds `Σ_n ψ̄2(x_n)`, `Ψ̄1ᵀy`, n and yᵀy to `stats` (frozen mode, spec §4c).
    pub fn accumulate_into(&self, y: &[f64], stats: &mut UnitStats) {
        self.accumulate(y, None, stats);
    }

    /// The sums of [`BlockPsi::accumulate_into`], each row's terms times its weight `w_n`
    /// (1 without weights: the same numbers bit for bit), n unweighted.
    fn accumulate(&self, y: &[f64], w: Option<&[f64]>, stats: &mut UnitStats) {
        let m = self.m;
        let mut sum = vec![0.0; m * m];
        let n = self.n();
        for (r, &yn) in y.iter().enumerate().take(n) {
            let wn = w.map_or(1.0, |w| w[r]);
            let p = &self.psi2[r * m * m..(r + 1) * m * m];
            for j in 0..m {
                let row = j * m + j..(j + 1) * m;
                for (acc, v) in sum[row.clone()].iter_mut().zip(&p[row]) {
                    *acc += wn * v;
                }
            }
            let wy = wn * yn;
            for (acc, p) in stats.psi1_y.iter_mut().zip(&self.psi1[r * m..(r + 1) * m]) {
                *acc += p * wy;
            }
            stats.yty += wy * yn;
        }
        stats.n += y.len().min(n);
        for j in 0..m {
            for k in j..m {
                let v = sum[j * m + k];
                stats.psi2[(j, k)] += v;
                if k != j {
                    stats.psi2[(k, j)] += v;
                }
            }
        }
    }
}

/// `L_D` and `∇_θ L_D` for the block `(x [n, d], y [n])` under q(u) = `post`.
pub fn block_loglik_grad(
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    x: MatRef<'_, f64>,
    y: &[f64],
) -> BlockElbo {
    let bp = BlockPsi::compute(vocab, proj, x);
    block_loglik_grad_with(vocab, proj, post, x, y, &bp)
}

/// As [`block_loglik_grad`], with the block's psi statistics already computed under `proj`.
pub fn block_loglik_grad_with(
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    x: MatRef<'_, f64>,
    y: &[f64],
    bp: &BlockPsi,
) -> BlockElbo {
    loglik_grad_rows(vocab, proj, post, x, y, bp, None, None)
}

/// As [`block_loglik_grad_with`] with each row's term of `L_D` tempered by its weight
/// `w [n]` (the robust likelihood, [`crate::learn::robust`]; the weights are constants):
///
/// ```text
/// L_D^w = −(Σw/2) log(2π σ_n²) − Q_w/(2σ_n²),
/// Q_w = Σ_n w_n (y_n² − 2y_n ψ1(x_n)α + tr(Gψ2(x_n)) + σ_s²)
/// ```
/// and its gradient `Σ_n w_n ∇ℓ_n`; the statistics `(A, B, YY, n)` are the weighted sums
/// (`n = Σw`). All weights 1 give [`block_loglik_grad_with`] bit for bit.
///
/// # Panics
/// If `w` is shorter than `y` (our own misuse).
#[track_caller]
pub fn block_loglik_grad_weighted(
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    x: MatRef<'_, f64>,
    y: &[f64],
    bp: &BlockPsi,
    w: &[f64],
) -> BlockElbo {
    assert!(w.len() >= y.len(), "one weight per row");
    loglik_grad_rows(vocab, proj, post, x, y, bp, None, Some(w))
}

/// The ψ of one point, computed on the fly by [`crate::learn::window::window_loglik_grad`].
struct OnePoint {
    psi1: Vec<f64>,
    psi2: Vec<f64>,
    x: Vec<f64>,
    head: usize,
}

impl OnePoint {
    fn new(m: usize, d: usize, head: usize) -> Self {
        let on = usize::from(head > 0);
        Self {
            psi1: vec![0.0; on * m],
            psi2: vec![0.0; on * m * m],
            x: vec![0.0; d],
            head,
        }
    }

    /// `(ψ̄1 [m], ψ̄2 [m, m] upper, a [d'], s [d'])` of row `r` of `x`: computed now with the
    /// workspace of `fresh` for `r < head`, else `bp`'s row `r − head`.
    fn row<'a>(
        &'a mut self,
        vocab: &Vocabulary,
        proj: &Projection,
        x: MatRef<'_, f64>,
        r: usize,
        bp: &'a BlockPsi,
        fresh: Option<&'a mut (usize, &mut PsiWorkspace)>,
    ) -> (&'a [f64], &'a [f64], &'a [f64], &'a [f64]) {
        let (m, dz) = (vocab.m(), vocab.d_latent());
        match fresh {
            Some((_, ws)) if r < self.head => {
                for (j, v) in self.x.iter_mut().enumerate() {
                    *v = x[(r, j)];
                }
                point_upper(vocab, proj, &self.x, ws, &mut self.psi1, &mut self.psi2);
                let (a, s) = ws.moments();
                (&self.psi1[..], &self.psi2[..], a, s)
            }
            _ => {
                let q = r - self.head;
                (
                    &bp.psi1[q * m..(q + 1) * m],
                    &bp.psi2[q * m * m..(q + 1) * m * m],
                    &bp.a[q * dz..(q + 1) * dz],
                    &bp.s[q * dz..(q + 1) * dz],
                )
            }
        }
    }
}

/// [`block_loglik_grad_with`] over the rows of `x`; with `fresh = Some((head, ws))` the first
/// `head` rows' ψ are computed point by point with `ws` and row `r ≥ head` is `bp`'s row
/// `r − head`. With `weights = Some(w)` row `r`'s term is tempered by `w[r]`
/// ([`block_loglik_grad_weighted`]); `None` is the Gaussian likelihood.
#[allow(clippy::too_many_arguments)]
pub(crate) fn loglik_grad_rows(
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    x: MatRef<'_, f64>,
    y: &[f64],
    bp: &BlockPsi,
    mut fresh: Option<(usize, &mut PsiWorkspace)>,
    weights: Option<&[f64]>,
) -> BlockElbo {
    let (m, dz, d) = (vocab.m(), vocab.d_latent(), proj.d());
    let mut one = OnePoint::new(m, d, fresh.as_ref().map_or(0, |f| f.0));
    let n = y.len();
    let ss = proj.sigma_s();
    let sn2 = proj.sigma_n() * proj.sigma_n();
    let zl = ZLayout::new(vocab);
    let alpha = &post.alpha;
    // Row-major G for the contraction kernel.
    let mut g = vec![0.0; m * m];
    for j in 0..m {
        for k in 0..m {
            g[j * m + k] = post.g[(j, k)];
        }
    }
    let mut ga = Mat::<f64>::zeros(n, dz);
    let mut gs = Mat::<f64>::zeros(n, dz);
    let mut ct = Contractions {
        h: vec![0.0; m],
        q: vec![0.0; dz],
        t: vec![0.0; m],
        total: 0.0,
    };
    let mut w1 = vec![0.0; m];
    let mut zs = ZSums::new(dz);
    let (mut y_psi_alpha, mut tr_g_psi2, mut yty) = (0.0, 0.0, 0.0);
    let mut hyper = HyperStats::default();
    // c2 = −G/(2σ_n²) and ψ2 = σ_s² ψ̄2, so H = c·(G∘ψ̄2) with c = −σ_s²/(2σ_n²).
    let c = -ss * ss / (2.0 * sn2);
    for r in 0..n {
        let (psi1, psi2, a, s) = one.row(vocab, proj, x, r, bp, fresh.as_mut());
        let yn = y[r];
        // The robust likelihood's weight of this row (1: Gaussian; × 1 is exact).
        let wr = weights.map_or(1.0, |w| w[r]);
        yty += wr * yn * yn;
        // ψ1 = σ_s ψ̄1; w1_j = c1_nj ψ1_nj with c1_nj = y_n α_j / σ_n².
        let mut w1_tot = 0.0;
        for j in 0..m {
            w1[j] = yn * alpha[j] / sn2 * ss * psi1[j];
            w1_tot += w1[j];
        }
        let a_unit = wr * (yn * dot4(psi1, alpha));
        y_psi_alpha += ss * a_unit;
        hyper.a += a_unit;
        g_psi2_contractions(psi2, &g, &zl, m, &mut ct);
        let (trg, h, q) = (ct.total, &ct.h, &ct.q);
        tr_g_psi2 += ss * ss * (wr * trg);
        hyper.b += wr * trg;
        let htot = c * trg;
        z_sums(&w1, h, &zl.groups, m, &mut zs);
        for i in 0..dz {
            let (ai, si) = (a[i], s[i]);
            // ψ1 part
            let (w1z, w1zz) = (zs.wz[i], zs.wzz[i]);
            let s1 = 1.0 + si;
            let mut gai = -(ai * w1_tot - w1z) / s1;
            let mut gsi =
                -w1_tot / (2.0 * s1) + (ai * ai * w1_tot - 2.0 * ai * w1z + w1zz) / (2.0 * s1 * s1);
            // ψ2 part with H = c·G∘ψ̄2: Σ_j h_j z_ji, Σ_j h_j z_ji², z_iᵀ H z_i
            let hz1 = c * zs.hz[i];
            let hz2 = c * zs.hzz[i];
            let zhz = c * q[i];
            let c2 = 1.0 + 2.0 * si;
            gai += -2.0 / c2 * (ai * htot - hz1);
            gsi += -htot / c2
                + 2.0 / (c2 * c2) * (ai * ai * htot - 2.0 * ai * hz1 + 0.5 * hz2 + 0.5 * zhz);
            ga[(r, i)] = wr * gai;
            gs[(r, i)] = wr * gsi;
        }
    }
    // Σ_n w_n: the rows' count under the Gaussian likelihood.
    let nf = weights.map_or(n as f64, |w| w[..n].iter().sum());
    hyper.b += nf;
    hyper.yy = yty;
    hyper.n = nf;
    let q = yty - 2.0 * y_psi_alpha + tr_g_psi2 + nf * ss * ss;
    let value = -0.5 * nf * (LOG_2PI + sn2.ln()) - 0.5 * q / sn2;
    let sigma2 = proj.sigma2();
    let mut dmu = Mat::zeros(dz, d);
    let mut dls = Mat::zeros(dz, d);
    for i in 0..dz {
        for j in 0..d {
            let (mut a1, mut a2) = (0.0, 0.0);
            for r in 0..n {
                let xv = x[(r, j)];
                a1 += ga[(r, i)] * xv;
                a2 += gs[(r, i)] * xv * xv;
            }
            dmu[(i, j)] = a1;
            dls[(i, j)] = 2.0 * sigma2[(i, j)] * a2;
        }
    }
    BlockElbo {
        value,
        grad: ProjectionGrad {
            mu: dmu,
            log_sigma: dls,
            log_sigma_s: (y_psi_alpha - tr_g_psi2 - nf * ss * ss) / sn2,
            log_sigma_n: -nf + q / sn2,
        },
        hyper,
    }
}

/// The paper's unbiased stochastic objective `c·L_D* − KL_u − KL_W` with `c = N_own/n*`
/// (spec §6), and its gradient (KL_u does not depend on θ).
pub fn stochastic_objective(
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    x: MatRef<'_, f64>,
    y: &[f64],
    scale: f64,
) -> BlockElbo {
    let b = block_loglik_grad(vocab, proj, post, x, y);
    let kl = ProjectionGrad::kl(proj);
    let value = scale * b.value - post.kl(vocab) - proj.kl();
    let grad = ProjectionGrad {
        mu: Mat::from_fn(proj.d_latent(), proj.d(), |i, j| {
            scale * b.grad.mu[(i, j)] - kl.mu[(i, j)]
        }),
        log_sigma: Mat::from_fn(proj.d_latent(), proj.d(), |i, j| {
            scale * b.grad.log_sigma[(i, j)] - kl.log_sigma[(i, j)]
        }),
        log_sigma_s: scale * b.grad.log_sigma_s,
        log_sigma_n: scale * b.grad.log_sigma_n,
    };
    BlockElbo {
        value,
        grad,
        hyper: b.hyper,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn keeping_the_tails_psi_gives_the_full_recompute_bit_for_bit() {
        let vocab = Vocabulary::default_design(7, 2, 3).expect("design");
        let proj = vocab.initial_projection(3);
        let mut rng = Rng::new(4, 4);
        let x = faer::Mat::from_fn(9, 3, |_, _| rng.normal());
        let full = BlockPsi::compute(&vocab, &proj, x.as_ref());
        // The last 4 rows' ψ alone, then the whole window keeping them.
        let mut bp = BlockPsi::compute(&vocab, &proj, x.as_ref().subrows(5, 4));
        bp.recompute_keeping_tail(&vocab, &proj, x.as_ref(), 4);
        let m = vocab.m();
        assert_eq!(
            (bp.psi1.clone(), bp.a.clone(), bp.s.clone()),
            (full.psi1, full.a, full.s)
        );
        for r in 0..9 {
            for j in 0..m {
                for k in j..m {
                    let i = r * m * m + j * m + k;
                    assert_eq!(bp.psi2[i], full.psi2[i], "row {r} ({j}, {k})");
                }
            }
        }
        // Held rows that do not fit the tail: a full recompute.
        let mut other = BlockPsi::compute(&vocab, &proj, x.as_ref().subrows(0, 3));
        other.recompute_keeping_tail(&vocab, &proj, x.as_ref(), 4);
        assert_eq!(other.psi1, bp.psi1);
    }
}
