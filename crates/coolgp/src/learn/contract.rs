//! The per-point contractions of the block gradient (spec §6): `G∘ψ̄2` against `1`, `z_i`
//! and `z_i z_iᵀ` ([`g_psi2_contractions`]) and the fixed-order sums they are built from. Every
//! sum is taken in a fixed order, the same on every dispatch path, so results are bit-identical
//! with and without AVX2 / AVX-512.

use crate::model::Vocabulary;
use crate::simd::dispatch;

/// Dot product with four fixed-order partial sums (vectorizable, deterministic).
#[inline(always)]
pub(crate) fn dot4(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f64; 4];
    let mut ca = a.chunks_exact(4);
    let mut cb = b.chunks_exact(4);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for l in 0..4 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut tail = 0.0;
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        tail += x * y;
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

dispatch! {
    /// Per point, from the upper triangle of `ψ̄2 [m, m]` and `G [m, m]` (row-major):
    /// `h_j = Σ_k G_jk ψ̄2_jk` into `h [m]`, `q_i = Σ_jk G_jk ψ̄2_jk z_ji z_ki` into `q [d']`,
    /// and `total = Σ_jk G_jk ψ̄2_jk`. `zl` is Z laid out for the kernel ([`ZLayout`]).
    /// Cost (d'_8 + 3)·m²/2 with d'_8 = d' rounded up to a multiple of 8; every sum is taken
    /// in a fixed order (the partial sums of [`sum_fixed`] and [`row_times_z`]), so every
    /// dispatch path gives the same bits. For d' ≤ 8 each row is one pass
    /// ([`offdiag_row`]), bit-identical to the passes of [`contract_row_groups`].
    pub(crate) fn g_psi2_contractions(psi2: &[f64], g: &[f64], zl: &ZLayout, m: usize, out: &mut Contractions) {
        let Contractions { h, q, t, total: out_total } = out;
        h[..m].fill(0.0);
        q.fill(0.0);
        let mut total = 0.0;
        let zg = &zl.groups[..];
        let one_group = zg.len() == GROUP * m;
        #[cfg(target_arch = "x86_64")]
        if one_group && !zl.quads.is_empty() && crate::simd::has_avx2() {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            *out_total = unsafe { rows_in_quads(psi2, g, zl, m, h, q) };
            return;
        }
        for j in 0..m {
            let row = j * m + j..(j + 1) * m;
            let diag = g[row.start] * psi2[row.start];
            if one_group {
                let (g, p) = (&g[row.start + 1..row.end], &psi2[row.start + 1..row.end]);
                let (off, v) = offdiag_row(g, p, &mut h[j + 1..m], &zg[(j + 1) * GROUP..]);
                total += finish_row(h, q, zg, j, diag, off, v);
            } else {
                let (gr, pr) = (&g[row.clone()], &psi2[row]);
                let (off, _) = contract_row_groups(gr, pr, &mut h[j..m], zg, m, j, t, q);
                h[j] += diag + off;
                total += diag + 2.0 * off;
            }
        }
        *out_total = total;
    }
}

/// The end of row `j` of [`g_psi2_contractions`] for d' ≤ 8, from its diagonal term `diag`,
/// its off-diagonal sum `off` and `v = Σ_{k>j} t_jk z_k`: `h_j` and `q` take the row's part;
/// returns the row's part of the total, `diag + 2·off`.
#[inline(always)]
fn finish_row(
    h: &mut [f64],
    q: &mut [f64],
    zg: &[f64],
    j: usize,
    diag: f64,
    off: f64,
    v: [f64; GROUP],
) -> f64 {
    h[j] += diag + off;
    let zj = &zg[j * GROUP..(j + 1) * GROUP];
    for (l, qi) in q.iter_mut().enumerate() {
        *qi += zj[l] * (zj[l] * diag + 2.0 * v[l]);
    }
    diag + 2.0 * off
}

/// The rows of [`g_psi2_contractions`] for d' ≤ 8 on AVX2 ([`offdiag_row_quads`]; `h` and
/// `q` zeroed); returns the total. The same bits as the rows of [`offdiag_row`].
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_in_quads(
    psi2: &[f64],
    g: &[f64],
    zl: &ZLayout,
    m: usize,
    h: &mut [f64],
    q: &mut [f64],
) -> f64 {
    let mut total = 0.0;
    for j in 0..m {
        let row = j * m + j..(j + 1) * m;
        let diag = g[row.start] * psi2[row.start];
        let (gr, pr) = (&g[row.start + 1..row.end], &psi2[row.start + 1..row.end]);
        // SAFETY: the caller's CPU supports AVX2.
        let (off, v) = unsafe { offdiag_row_quads(gr, pr, &mut h[j + 1..m], zl.quads_from(j + 1)) };
        total += finish_row(h, q, &zl.groups, j, diag, off, v);
    }
    total
}

/// One row `j` of [`g_psi2_contractions`] for d' ≤ 8, in one pass: from `g`, `p` (row `j` of
/// G and ψ̄2 at `k > j`) the products `t_k = G_jk ψ̄2_jk` are added to `h [k > j]`, and
/// `(Σ_k t_k, Σ_k t_k z_k [8])` are returned, each in the order of [`sum_fixed`] and
/// [`row_times_z`] (sixteen, then four partial sums; four over `k mod 4`), so the bits are
/// those of the three separate passes. `z` is the group of Z from row `j + 1` on.
#[inline(always)]
fn offdiag_row(g: &[f64], p: &[f64], h: &mut [f64], z: &[f64]) -> (f64, [f64; GROUP]) {
    let n = g.len();
    let (p, h, z) = (&p[..n], &mut h[..n], &z[..n * GROUP]);
    let mut acc16 = [0.0f64; 16];
    let mut rz = [[0.0f64; GROUP]; 4];
    let mut k = 0;
    while k + 16 <= n {
        let mut t = [0.0f64; 16];
        for l in 0..16 {
            t[l] = g[k + l] * p[k + l];
            acc16[l] += t[l];
            h[k + l] += t[l];
        }
        let zk = &z[k * GROUP..(k + 16) * GROUP];
        for l in 0..16 {
            for c in 0..GROUP {
                rz[l % 4][c] += t[l] * zk[l * GROUP + c];
            }
        }
        k += 16;
    }
    let mut acc4 = [0.0f64; 4];
    for l in 0..4 {
        acc4[l] = (acc16[l] + acc16[l + 4]) + (acc16[l + 8] + acc16[l + 12]);
    }
    while k + 4 <= n {
        let zk = &z[k * GROUP..(k + 4) * GROUP];
        for l in 0..4 {
            let t = g[k + l] * p[k + l];
            acc4[l] += t;
            h[k + l] += t;
            for c in 0..GROUP {
                rz[l][c] += t * zk[l * GROUP + c];
            }
        }
        k += 4;
    }
    let mut t = [0.0f64; 3];
    let r = n - k;
    for l in 0..r {
        t[l] = g[k + l] * p[k + l];
        h[k + l] += t[l];
        for c in 0..GROUP {
            rz[l][c] += t[l] * z[(k + l) * GROUP + c];
        }
    }
    let tail: f64 = t[..r].iter().sum();
    let mut v = [0.0; GROUP];
    for c in 0..GROUP {
        v[c] = (rz[0][c] + rz[1][c]) + (rz[2][c] + rz[3][c]);
    }
    ((acc4[0] + acc4[1]) + (acc4[2] + acc4[3]) + tail, v)
}

/// [`offdiag_row`] with Z in quads from row `j + 1` on (`zq`, [`ZLayout::quads_from`]) and
/// the same bits, on AVX2: the partial sum of `k mod 4 = r` is lane `r` of a four-lane
/// accumulator per latent dimension, so a quad of products `t` costs one multiply and one
/// add per dimension, with no broadcast of each `t_k`; the products, the partial sums and the
/// `h` update are vector operations, the last 1–3 entries masked (their lanes past the row
/// add `t = 0` to the `Σ t_k z_k` sums: a no-op, as a sum that starts at +0 is never −0).
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn offdiag_row_quads(
    g: &[f64],
    p: &[f64],
    h: &mut [f64],
    zq: &[f64],
) -> (f64, [f64; GROUP]) {
    use std::arch::x86_64::{
        __m256d, _mm256_add_pd, _mm256_loadu_pd, _mm256_maskload_pd, _mm256_maskstore_pd,
        _mm256_mul_pd, _mm256_setr_epi64x, _mm256_setzero_pd, _mm256_storeu_pd,
    };
    /// `rz[c] += t·z[4c .. 4c + 4]` for the eight latent dimensions of one quad.
    #[inline(always)]
    unsafe fn quad(rz: &mut [__m256d; GROUP], t: __m256d, z: *const f64) {
        for (c, r) in rz.iter_mut().enumerate() {
            // SAFETY: the caller's quad holds 32 numbers.
            let prod = unsafe { _mm256_mul_pd(t, _mm256_loadu_pd(z.add(4 * c))) };
            *r = _mm256_add_pd(*r, prod);
        }
    }
    let n = g.len();
    let (p, h) = (&p[..n], &mut h[..n]);
    let zq = &zq[..n.div_ceil(4) * QUAD];
    let (gp, pp, hp, zp) = (g.as_ptr(), p.as_ptr(), h.as_mut_ptr(), zq.as_ptr());
    let mut acc = [_mm256_setzero_pd(); 4];
    let mut rz = [_mm256_setzero_pd(); GROUP];
    let mut k = 0;
    // SAFETY (every block below): the entries read and written are below n (masked past
    // it), and quad k/4 of zq exists for every k < n.
    while k + 16 <= n {
        for (l, a) in acc.iter_mut().enumerate() {
            let o = k + 4 * l;
            unsafe {
                let t = _mm256_mul_pd(_mm256_loadu_pd(gp.add(o)), _mm256_loadu_pd(pp.add(o)));
                *a = _mm256_add_pd(*a, t);
                _mm256_storeu_pd(hp.add(o), _mm256_add_pd(_mm256_loadu_pd(hp.add(o)), t));
                quad(&mut rz, t, zp.add((o / 4) * QUAD));
            }
        }
        k += 16;
    }
    // acc4[l] = (acc16[l] + acc16[l + 4]) + (acc16[l + 8] + acc16[l + 12]).
    let mut acc4 = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3]));
    while k + 4 <= n {
        unsafe {
            let t = _mm256_mul_pd(_mm256_loadu_pd(gp.add(k)), _mm256_loadu_pd(pp.add(k)));
            acc4 = _mm256_add_pd(acc4, t);
            _mm256_storeu_pd(hp.add(k), _mm256_add_pd(_mm256_loadu_pd(hp.add(k)), t));
            quad(&mut rz, t, zp.add((k / 4) * QUAD));
        }
        k += 4;
    }
    let r = n - k;
    let mut t = [0.0f64; 4];
    if r > 0 {
        let on = |l: usize| if l < r { -1 } else { 0 };
        let mask = _mm256_setr_epi64x(on(0), on(1), on(2), on(3));
        unsafe {
            let tv = _mm256_mul_pd(
                _mm256_maskload_pd(gp.add(k), mask),
                _mm256_maskload_pd(pp.add(k), mask),
            );
            let hv = _mm256_add_pd(_mm256_maskload_pd(hp.add(k), mask), tv);
            _mm256_maskstore_pd(hp.add(k), mask, hv);
            quad(&mut rz, tv, zp.add((k / 4) * QUAD));
            _mm256_storeu_pd(t.as_mut_ptr(), tv);
        }
    }
    let tail: f64 = t[..r].iter().sum();
    let mut a4 = [0.0f64; 4];
    let mut v = [0.0; GROUP];
    // SAFETY: each store writes four f64 into an array of four.
    unsafe { _mm256_storeu_pd(a4.as_mut_ptr(), acc4) };
    for (vc, rc) in v.iter_mut().zip(rz) {
        let mut a = [0.0f64; 4];
        unsafe { _mm256_storeu_pd(a.as_mut_ptr(), rc) };
        *vc = (a[0] + a[1]) + (a[2] + a[3]);
    }
    ((a4[0] + a4[1]) + (a4[2] + a4[3]) + tail, v)
}

/// Numbers in one quad of [`ZLayout`]: four inducing inputs × eight latent dimensions.
const QUAD: usize = 4 * GROUP;

/// One row `j` of [`g_psi2_contractions`] for any d', in passes: `g`, `p` are row `j` of G
/// and ψ̄2 at `k ≥ j`, `h` is `h [k ≥ j]`; adds `t_k` to `h [k > j]` and the row's part of `q`,
/// returns the off-diagonal sum (and an unused zero vector).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn contract_row_groups(
    g: &[f64],
    p: &[f64],
    h: &mut [f64],
    zg: &[f64],
    m: usize,
    j: usize,
    t: &mut [f64],
    q: &mut [f64],
) -> (f64, [f64; GROUP]) {
    let dz = q.len();
    let tr = &mut t[..m - j];
    for ((tk, &gk), &pk) in tr.iter_mut().zip(g).zip(p) {
        *tk = gk * pk;
    }
    let diag = tr[0];
    let off = sum_fixed(&tr[1..]);
    for (hk, &tk) in h[1..].iter_mut().zip(&tr[1..]) {
        *hk += tk;
    }
    for (grp, zgrp) in zg.chunks_exact(GROUP * m).enumerate() {
        // v_l = Σ_{k>j} t_jk z_k,l for the 8 columns of this group.
        let v = row_times_z(&tr[1..], &zgrp[(j + 1) * GROUP..]);
        let zj = &zgrp[j * GROUP..(j + 1) * GROUP];
        let lanes = GROUP.min(dz - grp * GROUP);
        for (l, qi) in q[grp * GROUP..grp * GROUP + lanes].iter_mut().enumerate() {
            *qi += zj[l] * (zj[l] * diag + 2.0 * v[l]);
        }
    }
    (off, [0.0; GROUP])
}

/// Per point, the sums over `j` of the weights `w [m]` and `h [m]` against each latent
/// dimension of Z: `w·z_i` and `h·z_i` as [`dot4`] computes them, `Σ_j w_j z_ji²` and
/// `Σ_j h_j z_ji²` in order from −0.0 (as `Iterator::sum`), each `[d']`.
pub(crate) struct ZSums {
    /// `Σ_j w_j z_ji`.
    pub(crate) wz: Vec<f64>,
    /// `Σ_j w_j z_ji²`.
    pub(crate) wzz: Vec<f64>,
    /// `Σ_j h_j z_ji`.
    pub(crate) hz: Vec<f64>,
    /// `Σ_j h_j z_ji²`.
    pub(crate) hzz: Vec<f64>,
}

impl ZSums {
    /// Zeros for `dz` latent dimensions.
    pub(crate) fn new(dz: usize) -> Self {
        Self {
            wz: vec![0.0; dz],
            wzz: vec![0.0; dz],
            hz: vec![0.0; dz],
            hzz: vec![0.0; dz],
        }
    }
}

dispatch! {
    /// [`ZSums`] of `w [m]` and `h [m]` for every dimension of `zg` ([`z_groups`]), eight
    /// dimensions at a time: each dimension's sums take the operations, in the order, of
    /// [`dot4`] and of a sequential sum, so the bits are those of one dimension at a time.
    pub(crate) fn z_sums(w: &[f64], h: &[f64], zg: &[f64], m: usize, out: &mut ZSums) {
        let dz = out.wz.len();
        let (w, h) = (&w[..m], &h[..m]);
        for (grp, zgrp) in zg.chunks_exact(GROUP * m).enumerate() {
            let mut dw = [[0.0f64; GROUP]; 4];
            let mut dh = [[0.0f64; GROUP]; 4];
            let mut sw = [-0.0f64; GROUP];
            let mut sh = [-0.0f64; GROUP];
            let mut tw = [0.0f64; GROUP];
            let mut th = [0.0f64; GROUP];
            let n4 = m / 4 * 4;
            for (j, z) in zgrp.chunks_exact(GROUP).enumerate() {
                let (wj, hj) = (w[j], h[j]);
                let (dwc, dhc) = if j < n4 {
                    (&mut dw[j % 4], &mut dh[j % 4])
                } else {
                    (&mut tw, &mut th)
                };
                for l in 0..GROUP {
                    let (a, b) = (wj * z[l], hj * z[l]);
                    dwc[l] += a;
                    dhc[l] += b;
                    sw[l] += a * z[l];
                    sh[l] += b * z[l];
                }
            }
            let lanes = GROUP.min(dz - grp * GROUP);
            for l in 0..lanes {
                let i = grp * GROUP + l;
                out.wz[i] = (dw[0][l] + dw[1][l]) + (dw[2][l] + dw[3][l]) + tw[l];
                out.hz[i] = (dh[0][l] + dh[1][l]) + (dh[2][l] + dh[3][l]) + th[l];
                out.wzz[i] = sw[l];
                out.hzz[i] = sh[l];
            }
        }
    }
}

/// Columns of Z per group in [`z_groups`].
const GROUP: usize = 8;

/// Z `[m, d']` rearranged as `[⌈d'/8⌉, m, 8]` (column groups of 8, zero-padded), so that the
/// 8 coordinates of one inducing input in one group are contiguous.
pub(crate) fn z_groups(vocab: &Vocabulary) -> Vec<f64> {
    let (m, dz) = (vocab.m(), vocab.d_latent());
    let z = vocab.z();
    let groups = dz.div_ceil(GROUP);
    let mut out = vec![0.0; groups * m * GROUP];
    for grp in 0..groups {
        for k in 0..m {
            for l in 0..GROUP.min(dz - grp * GROUP) {
                out[(grp * m + k) * GROUP + l] = z[(k, grp * GROUP + l)];
            }
        }
    }
    out
}

/// Z laid out for [`g_psi2_contractions`] and [`z_sums`]: the column groups of [`z_groups`],
/// and for d' ≤ 8 the same numbers in quads for the one-pass rows ([`ZLayout::quads_from`]).
pub(crate) struct ZLayout {
    /// [`z_groups`] `[⌈d'/8⌉, m, 8]`.
    pub(crate) groups: Vec<f64>,
    /// d' ≤ 8: for each phase `f ∈ 0..4`, `[m/4 + 2]` quads `[8][4]`, quad `Q` holding
    /// `z_{f+4Q+r, c}` at `(c, r)` (zero past m); empty for d' > 8.
    quads: Vec<f64>,
    /// Quads per phase.
    per_phase: usize,
}

impl ZLayout {
    /// The layouts of `vocab`'s Z.
    pub(crate) fn new(vocab: &Vocabulary) -> Self {
        let groups = z_groups(vocab);
        let m = vocab.m();
        if groups.len() != GROUP * m {
            return Self {
                groups,
                quads: Vec::new(),
                per_phase: 0,
            };
        }
        let per_phase = m / 4 + 2;
        let mut quads = vec![0.0; 4 * per_phase * QUAD];
        for f in 0..4 {
            for k in (f..m).step_by(4) {
                for r in 0..4.min(m - k) {
                    let base = (f * per_phase + (k - f) / 4) * QUAD;
                    for c in 0..GROUP {
                        quads[base + 4 * c + r] = groups[(k + r) * GROUP + c];
                    }
                }
            }
        }
        Self {
            groups,
            quads,
            per_phase,
        }
    }

    /// The quads of the inducing inputs `s, s+1, …` (d' ≤ 8): quad `q` holds `s+4q .. s+4q+4`.
    #[track_caller]
    fn quads_from(&self, s: usize) -> &[f64] {
        let f = s % 4;
        &self.quads[(f * self.per_phase + s / 4) * QUAD..(f + 1) * self.per_phase * QUAD]
    }
}

/// `Σ_k t_k z_k` for rows `z_k [8]` stored contiguously in `z [len(t)·8]`: four partial sums
/// over `k mod 4`, combined as `(s0 + s1) + (s2 + s3)`.
#[inline(always)]
fn row_times_z(t: &[f64], z: &[f64]) -> [f64; GROUP] {
    let mut acc = [[0.0f64; GROUP]; 4];
    let mut tc = t.chunks_exact(4);
    let mut zc = z[..t.len() * GROUP].chunks_exact(4 * GROUP);
    for (tt, zz) in (&mut tc).zip(&mut zc) {
        for c in 0..4 {
            for l in 0..GROUP {
                acc[c][l] += tt[c] * zz[c * GROUP + l];
            }
        }
    }
    for (c, (&tk, zz)) in tc
        .remainder()
        .iter()
        .zip(zc.remainder().chunks_exact(GROUP))
        .enumerate()
    {
        for l in 0..GROUP {
            acc[c][l] += tk * zz[l];
        }
    }
    let mut v = [0.0; GROUP];
    for l in 0..GROUP {
        v[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]);
    }
    v
}

/// Outputs and scratch of [`g_psi2_contractions`].
pub(crate) struct Contractions {
    /// `h_j = Σ_k G_jk ψ̄2_jk [m]`.
    pub(crate) h: Vec<f64>,
    /// `q_i = Σ_jk G_jk ψ̄2_jk z_ji z_ki [d']`.
    pub(crate) q: Vec<f64>,
    /// Scratch `[m]`.
    pub(crate) t: Vec<f64>,
    /// `Σ_jk G_jk ψ̄2_jk`.
    pub(crate) total: f64,
}

/// Sum in a fixed order: sixteen partial sums over chunks of 16, then four over chunks of 4,
/// then the last 0–3 terms (vectorizes; deterministic).
#[inline(always)]
fn sum_fixed(a: &[f64]) -> f64 {
    let mut acc = [0.0f64; 16];
    let mut c = a.chunks_exact(16);
    for x in &mut c {
        for l in 0..16 {
            acc[l] += x[l];
        }
    }
    let mut acc4 = [0.0f64; 4];
    for l in 0..4 {
        acc4[l] = (acc[l] + acc[l + 4]) + (acc[l + 8] + acc[l + 12]);
    }
    let mut c4 = c.remainder().chunks_exact(4);
    for x in &mut c4 {
        for l in 0..4 {
            acc4[l] += x[l];
        }
    }
    let tail: f64 = c4.remainder().iter().sum();
    (acc4[0] + acc4[1]) + (acc4[2] + acc4[3]) + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use crate::simd::at_level;
    use faer::Mat;

    /// The contractions row by row in passes ([`contract_row_groups`] for every d'): the
    /// reference of the one-pass rows.
    fn contractions_in_passes(p: &[f64], g: &[f64], zg: &[f64], m: usize, dz: usize) -> Vec<u64> {
        let (mut h, mut q, mut t, mut total) = (vec![0.0; m], vec![0.0; dz], vec![0.0; m], 0.0);
        for j in 0..m {
            let row = j * m + j..(j + 1) * m;
            let diag = g[row.start] * p[row.start];
            let (gr, pr) = (&g[row.clone()], &p[row]);
            let (off, _) = contract_row_groups(gr, pr, &mut h[j..m], zg, m, j, &mut t, &mut q);
            h[j] += diag + off;
            total += diag + 2.0 * off;
        }
        let mut bits: Vec<u64> = h.iter().chain(&q).map(|v| v.to_bits()).collect();
        bits.push(total.to_bits());
        bits
    }

    #[test]
    fn one_pass_contractions_are_the_passes_bit_for_bit() {
        // Reference: the three passes (sum_fixed, the h update, row_times_z) per row.
        let mut rng = Rng::new(3, 7);
        for dz in [1usize, 2, 3, 8] {
            for m in (1usize..=70).chain([99, 100, 101, 128]) {
                let z = Mat::from_fn(m, dz, |_, _| rng.normal());
                let vocab = Vocabulary::new(z, 1).expect("vocabulary");
                let zl = ZLayout::new(&vocab);
                let zg = &zl.groups;
                let p: Vec<f64> = (0..m * m).map(|_| rng.uniform()).collect();
                let g: Vec<f64> = (0..m * m).map(|_| rng.normal()).collect();
                let want = contractions_in_passes(&p, &g, zg, m, dz);
                for level in [2, 1, 0] {
                    let mut ct = Contractions {
                        h: vec![0.0; m],
                        q: vec![0.0; dz],
                        t: vec![0.0; m],
                        total: 0.0,
                    };
                    at_level(level, || g_psi2_contractions(&p, &g, &zl, m, &mut ct));
                    let mut bits: Vec<u64> =
                        ct.h.iter().chain(&ct.q).map(|v| v.to_bits()).collect();
                    bits.push(ct.total.to_bits());
                    assert_eq!(bits, want, "m {m} d' {dz} level {level}");
                }
            }
        }
    }

    #[test]
    fn z_sums_are_the_per_dimension_sums_bit_for_bit() {
        // Reference: the sums one dimension at a time, as the gradient took them before.
        let mut rng = Rng::new(9, 2);
        for dz in [1usize, 3, 8, 9, 17] {
            for m in [1usize, 2, 3, 4, 5, 7, 8, 13, 50, 100] {
                let z = Mat::from_fn(m, dz, |_, _| rng.normal());
                let vocab = Vocabulary::new(z, 1).expect("vocabulary");
                let zg = z_groups(&vocab);
                let zt = vocab.z_dim_major();
                let w: Vec<f64> = (0..m).map(|_| rng.normal()).collect();
                let h: Vec<f64> = (0..m).map(|_| rng.normal()).collect();
                for level in [2, 1, 0] {
                    let mut out = ZSums::new(dz);
                    at_level(level, || z_sums(&w, &h, &zg, m, &mut out));
                    for i in 0..dz {
                        let zi = &zt[i * m..(i + 1) * m];
                        let wzz: f64 = w.iter().zip(zi).map(|(w, z)| w * z * z).sum();
                        let hzz: f64 = h.iter().zip(zi).map(|(a, b)| a * b * b).sum();
                        assert_eq!(out.wz[i].to_bits(), dot4(&w, zi).to_bits(), "m {m} i {i}");
                        assert_eq!(out.hz[i].to_bits(), dot4(&h, zi).to_bits());
                        assert_eq!(out.wzz[i].to_bits(), wzz.to_bits());
                        assert_eq!(out.hzz[i].to_bits(), hzz.to_bits());
                    }
                }
            }
        }
    }

    #[test]
    fn contractions_agree_on_every_path_and_with_the_definition() {
        let mut rng = Rng::new(8, 1);
        for &(m, dz) in &[
            (1usize, 1usize),
            (5, 2),
            (13, 3),
            (33, 8),
            (40, 9),
            (50, 17),
        ] {
            let z = Mat::from_fn(m, dz, |_, _| rng.normal());
            let vocab = Vocabulary::new(z, 1).expect("vocabulary");
            let zl = ZLayout::new(&vocab);
            let sym = |rng: &mut Rng| {
                let a = Mat::from_fn(m, m, |_, _| rng.normal());
                Mat::from_fn(m, m, |j, k| a[(j, k)] + a[(k, j)])
            };
            let (p, g) = (sym(&mut rng), sym(&mut rng));
            let g_rows: Vec<f64> = (0..m * m).map(|t| g[(t / m, t % m)]).collect();
            // Upper triangle only; the lower holds garbage the kernel must not read.
            let p_rows: Vec<f64> = (0..m * m)
                .map(|t| {
                    if t % m >= t / m {
                        p[(t / m, t % m)]
                    } else {
                        f64::NAN
                    }
                })
                .collect();
            let run = |level: u8| {
                let mut ct = Contractions {
                    h: vec![0.0; m],
                    q: vec![0.0; dz],
                    t: vec![0.0; m],
                    total: 0.0,
                };
                at_level(level, || {
                    g_psi2_contractions(&p_rows, &g_rows, &zl, m, &mut ct)
                });
                let mut bits: Vec<u64> = ct.h.iter().chain(&ct.q).map(|v| v.to_bits()).collect();
                bits.push(ct.total.to_bits());
                (bits, ct.h, ct.q, ct.total)
            };
            let (b2, h, q, total) = run(2);
            assert_eq!(run(1).0, b2, "AVX2 differs, m {m} d' {dz}");
            assert_eq!(run(0).0, b2, "baseline differs, m {m} d' {dz}");
            let z = vocab.z();
            let mut want_total = 0.0;
            let mut scale = 0.0;
            for j in 0..m {
                let hj: f64 = (0..m).map(|k| g[(j, k)] * p[(j, k)]).sum();
                let hs: f64 = (0..m).map(|k| (g[(j, k)] * p[(j, k)]).abs()).sum();
                assert!((h[j] - hj).abs() <= 1e-12 * hs, "h[{j}]");
                want_total += hj;
                scale += hs;
            }
            assert!((total - want_total).abs() <= 1e-12 * scale);
            for i in 0..dz {
                let (mut want, mut s) = (0.0, 0.0);
                for j in 0..m {
                    for k in 0..m {
                        let t = g[(j, k)] * p[(j, k)] * z[(j, i)] * z[(k, i)];
                        want += t;
                        s += t.abs();
                    }
                }
                assert!(
                    (q[i] - want).abs() <= 1e-12 * s,
                    "q[{i}] {} vs {want}",
                    q[i]
                );
            }
        }
    }
}
