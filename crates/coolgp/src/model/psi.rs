//! Psi statistics in closed form (spec §2), at unit scale (σ_s = 1): multiply ψ̄1 by σ_s and
//! ψ̄2 by σ_s² for the scaled statistics.
//!
//! For one input x with `a = M x`, `s = (Σ∘Σ)(x∘x)` (each `[d']`):
//!
//! ```text
//! ψ̄1_j  = exp Σ_i [ −½ log(1+s_i) − (a_i − z_ji)² / (2(1+s_i)) ]
//! ψ̄2_jk = exp( −¼‖z_j − z_k‖² + Σ_i [ −½ log(1+2s_i) − (a_i − z̄_jk,i)² / (1+2s_i) ] )
//! ```
//!
//! The ψ̄2 exponent is evaluated in the expanded form
//! `base + φ_j + φ_k + Σ_i z_ji β_i z_ki` with `c_i = 1+2s_i`, `β_i = (1 − 1/c_i)/2`,
//! `φ_j = Σ_i [z_ji a_i / c_i − z_ji² (1 + 1/c_i)/4]`, `base = −Σ_i [a_i²/c_i + ½ log c_i]`:
//! one fused multiply-add per dimension and one exponential (`simd::exp_fma`) per
//! (j, k) term, 16 consecutive k at a time in registers. One *term* of the benchmarks is one
//! such (point, j, k) entry with k ≥ j.

use faer::{Mat, MatRef};

use crate::model::projection::Projection;
use crate::model::Vocabulary;
use crate::simd::{dispatch, exp, exp_fma};

/// Scratch buffers reused across points (no allocation per point).
#[derive(Clone, Debug, Default)]
pub struct PsiWorkspace {
    a: Vec<f64>,
    s: Vec<f64>,
    k: KernelScratch,
    x: Vec<f64>,
}

/// Lanes of one ψ̄2 chunk: the kernel evaluates `LANES` consecutive `k` of one row `j` in
/// registers (four AVX2 or two AVX-512 vectors: independent dependency chains through the
/// exponential), so no exponent row goes through memory. A row's last 1–16 entries take one
/// chunk of 16, 8 or 4 lanes.
const LANES: usize = 16;

/// Scratch of the ψ̄2 kernel: `β [d']`, `φ [m + LANES]`, the per-row coefficients `z_j∘β [d']`
/// and a zero-padded copy of `Zᵀ [d', m + LANES]` (the padding feeds the lanes past `m` of a
/// row's last chunk, which are computed and discarded).
#[derive(Clone, Debug, Default)]
struct KernelScratch {
    beta: Vec<f64>,
    phi: Vec<f64>,
    coef: Vec<f64>,
    zp: Vec<f64>,
}

impl PsiWorkspace {
    fn prepare(&mut self, m: usize, dz: usize, d: usize) {
        self.a.resize(dz, 0.0);
        self.s.resize(dz, 0.0);
        self.k.beta.resize(dz, 0.0);
        self.k.phi.resize(m + LANES, 0.0);
        self.k.coef.resize(dz, 0.0);
        self.k.zp.resize(dz * (m + LANES), 0.0);
        self.x.resize(d, 0.0);
    }
}

/// How the ψ̄2 kernel writes its m×m upper triangle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    /// `out = ψ̄2(x)`.
    Overwrite,
    /// `out += ψ̄2(x)`.
    Accumulate,
}

dispatch! {
    /// Unit-scale `ψ̄1(x) [m]` from the moments `(a, s)` of one point (no fused multiply-add:
    /// the same bits on every path and as before the AVX2 dispatch).
    pub fn psi1_point(vocab: &Vocabulary, a: &[f64], s: &[f64], out: &mut [f64]) {
        let m = vocab.m();
        let zt = vocab.z_dim_major();
        let mut base = 0.0;
        for &si in s {
            base -= 0.5 * (1.0 + si).ln();
        }
        out[..m].fill(base);
        for (i, (&ai, &si)) in a.iter().zip(s).enumerate() {
            let inv = 1.0 / (2.0 * (1.0 + si));
            for (o, &z) in out[..m].iter_mut().zip(&zt[i * m..(i + 1) * m]) {
                let t = ai - z;
                *o -= t * t * inv;
            }
        }
        for o in out[..m].iter_mut() {
            *o = exp(*o);
        }
    }
}

dispatch! {
    /// The ψ̄2 kernel: writes or adds the upper triangle (`k ≥ j`) of the unit-scale ψ̄2 of one
    /// point into `out [m, m]` row-major.
    ///
    /// Every entry is `exp_fma(fma(…fma(z_j0 β_0, z_k0, (base + φ_j) + φ_k)…))`, the d'-sum
    /// fused and taken in order `i = 0, 1, …`: the same IEEE operations in the same order on
    /// every code path, whatever the chunk an entry falls in (the unit tests check this bit for
    /// bit, AVX-512 and AVX2 against baseline and against an entry-by-entry reference). Row
    /// `j` is processed in chunks of [`LANES`] consecutive `k`, each kept in registers from
    /// the d'-sum through the exponential to the store.
    fn psi2_point_upper(
        zt: &[f64],
        m: usize,
        a: &[f64],
        s: &[f64],
        scratch: &mut KernelScratch,
        out: &mut [f64],
        write: Write,
    ) {
        let dz = a.len();
        let mp = m + LANES;
        let KernelScratch {
            beta,
            phi,
            coef,
            zp,
        } = scratch;
        let (beta, coef) = (&mut beta[..dz], &mut coef[..dz]);
        let (phi, zp) = (&mut phi[..mp], &mut zp[..dz * mp]);
        let mut base = 0.0;
        phi.fill(0.0);
        for i in 0..dz {
            let c = 1.0 + 2.0 * s[i];
            let inv_c = 1.0 / c;
            base -= a[i] * a[i] * inv_c + 0.5 * c.ln();
            beta[i] = 0.5 * (1.0 - inv_c);
            let lin = a[i] * inv_c;
            let quad = 0.25 * (1.0 + inv_c);
            let zi = &zt[i * m..(i + 1) * m];
            for (p, &z) in phi[..m].iter_mut().zip(zi) {
                *p += z * lin - z * z * quad;
            }
            let zpi = &mut zp[i * mp..(i + 1) * mp];
            zpi[..m].copy_from_slice(zi);
            zpi[m..].fill(0.0);
        }
        for j in 0..m {
            let pj = base + phi[j];
            for i in 0..dz {
                coef[i] = zp[i * mp + j] * beta[i];
            }
            let row = &mut out[j * m..(j + 1) * m];
            let mut k = j;
            while k + LANES / 2 < m {
                let len = LANES.min(m - k);
                chunk::<LANES>(pj, &phi[k..], coef, &zp[k..], mp, &mut row[k..k + len], write);
                k += LANES;
            }
            if k + LANES / 4 < m {
                chunk::<{ LANES / 2 }>(pj, &phi[k..], coef, &zp[k..], mp, &mut row[k..], write);
            } else if k < m {
                chunk::<{ LANES / 4 }>(pj, &phi[k..], coef, &zp[k..], mp, &mut row[k..], write);
            }
        }
    }
}

/// `N` consecutive entries `k, …, k+N−1` of one ψ̄2 row, in registers: `exp(pj + φ_k +
/// Σ_i coef_i z_ki)` with the d'-sum fused and in order, written or added to the first
/// `out.len() ≤ N` entries (the lanes past `m` read the zero padding and are discarded).
/// `zp` is the padded `Zᵀ` offset to column `k`, with row stride `mp`.
#[inline(always)]
fn chunk<const N: usize>(
    pj: f64,
    phi: &[f64],
    coef: &[f64],
    zp: &[f64],
    mp: usize,
    out: &mut [f64],
    write: Write,
) {
    let ph = &phi[..N];
    let mut r = [0.0; N];
    for l in 0..N {
        r[l] = pj + ph[l];
    }
    for (&c, zrow) in coef.iter().zip(zp.chunks(mp)) {
        let z = &zrow[..N];
        for l in 0..N {
            r[l] = c.mul_add(z[l], r[l]);
        }
    }
    let mut e = [0.0; N];
    for l in 0..N {
        e[l] = exp_fma(r[l]);
    }
    if out.len() == N {
        match write {
            Write::Overwrite => out.copy_from_slice(&e),
            Write::Accumulate => {
                for l in 0..N {
                    out[l] += e[l];
                }
            }
        }
    } else {
        let len = out.len();
        match write {
            Write::Overwrite => out.copy_from_slice(&e[..len]),
            Write::Accumulate => {
                for (o, &v) in out.iter_mut().zip(&e[..len]) {
                    *o += v;
                }
            }
        }
    }
}

/// Unit-scale statistics of a set of points: `Ψ̄2 = Σ_n ψ̄2(x_n) [m, m]`, `Ψ̄1ᵀy [m]`,
/// plus `n` and `yᵀy`.
#[derive(Clone, Debug, PartialEq)]
pub struct UnitStats {
    /// `Σ_n ψ̄2(x_n) [m, m]`, symmetric.
    pub psi2: Mat<f64>,
    /// `Ψ̄1ᵀ y [m]`.
    pub psi1_y: Vec<f64>,
    /// Number of points.
    pub n: usize,
    /// `yᵀy`.
    pub yty: f64,
}

impl UnitStats {
    /// All zeros for m inducing inputs.
    pub fn zeros(m: usize) -> Self {
        Self {
            psi2: Mat::zeros(m, m),
            psi1_y: vec![0.0; m],
            n: 0,
            yty: 0.0,
        }
    }

    /// `self += other`.
    pub fn add_in_place(&mut self, other: &UnitStats) {
        self.psi2 += &other.psi2;
        for (a, b) in self.psi1_y.iter_mut().zip(&other.psi1_y) {
            *a += b;
        }
        self.n += other.n;
        self.yty += other.yty;
    }
}

/// Accumulates the unit-scale statistics of the block `(x [n, d], y [n])` under `proj` into
/// `acc` (frozen mode, spec §4c). Cost O(n m² d' / 2) for ψ̄2, O(n m d') for ψ̄1.
///
/// # Panics
/// If shapes disagree (callers validate user data first).
#[track_caller]
pub fn accumulate_block(
    vocab: &Vocabulary,
    proj: &Projection,
    x: MatRef<'_, f64>,
    y: &[f64],
    acc: &mut UnitStats,
    ws: &mut PsiWorkspace,
) {
    accumulate_rows(vocab, proj, x, y, None, acc, ws);
}

/// As [`accumulate_block`] with row weights `w [n]` (the robust likelihood,
/// [`crate::learn::robust`]): adds `Σ_n w_n ψ̄2(x_n)`, `Σ_n w_n y_n ψ̄1(x_n)`, `Σ_n w_n y_n²`
/// and n (the rows, unweighted). All weights 1 give [`accumulate_block`] bit for bit.
///
/// # Panics
/// If shapes disagree or `w` does not hold one weight per row (our own misuse).
#[track_caller]
pub fn accumulate_block_weighted(
    vocab: &Vocabulary,
    proj: &Projection,
    x: MatRef<'_, f64>,
    y: &[f64],
    w: &[f64],
    acc: &mut UnitStats,
    ws: &mut PsiWorkspace,
) {
    assert_eq!(w.len(), y.len(), "one weight per row");
    accumulate_rows(vocab, proj, x, y, Some(w), acc, ws);
}

/// [`accumulate_block`], each row's terms times its weight when `w` is given. Unweighted,
/// ψ̄2 is added in place by the kernel; weighted, each point's ψ̄2 is written to a buffer and
/// added times `w_n` (`v + 1·e = v + e`: the same bits at weight 1).
#[track_caller]
fn accumulate_rows(
    vocab: &Vocabulary,
    proj: &Projection,
    x: MatRef<'_, f64>,
    y: &[f64],
    w: Option<&[f64]>,
    acc: &mut UnitStats,
    ws: &mut PsiWorkspace,
) {
    let (m, dz, d) = (vocab.m(), vocab.d_latent(), proj.d());
    assert_eq!(x.ncols(), d);
    assert_eq!(x.nrows(), y.len());
    ws.prepare(m, dz, d);
    let mut upper = vec![0.0; m * m];
    let mut point = vec![0.0; if w.is_some() { m * m } else { 0 }];
    let mut psi1 = vec![0.0; m];
    for (n, &yn) in y.iter().enumerate() {
        for j in 0..d {
            ws.x[j] = x[(n, j)];
        }
        proj.moments_into(&ws.x, &mut ws.a, &mut ws.s);
        psi1_point(vocab, &ws.a, &ws.s, &mut psi1);
        let wn = w.map_or(1.0, |w| w[n]);
        let wy = wn * yn;
        for (acc_j, &p) in acc.psi1_y.iter_mut().zip(&psi1) {
            *acc_j += p * wy;
        }
        let zt = vocab.z_dim_major();
        if w.is_none() {
            psi2_point_upper(
                zt,
                m,
                &ws.a,
                &ws.s,
                &mut ws.k,
                &mut upper,
                Write::Accumulate,
            );
        } else {
            psi2_point_upper(zt, m, &ws.a, &ws.s, &mut ws.k, &mut point, Write::Overwrite);
            for j in 0..m {
                let row = j * m + j..(j + 1) * m;
                for (u, v) in upper[row.clone()].iter_mut().zip(&point[row]) {
                    *u += wn * v;
                }
            }
        }
        acc.yty += wy * yn;
    }
    acc.n += y.len();
    for j in 0..m {
        for k in j..m {
            let v = upper[j * m + k];
            acc.psi2[(j, k)] += v;
            if k != j {
                acc.psi2[(k, j)] += v;
            }
        }
    }
}

/// One point's moments `(a, s) [d']` (kept in `ws`, see [`PsiWorkspace::moments`]), its
/// unit-scale `ψ̄1(x)` into `psi1 [m]` and the upper triangle (`k ≥ j`) of its `ψ̄2(x)` into
/// `psi2_upper [m, m]` row-major; the strict lower triangle is not touched.
pub fn point_upper(
    vocab: &Vocabulary,
    proj: &Projection,
    x: &[f64],
    ws: &mut PsiWorkspace,
    psi1: &mut [f64],
    psi2_upper: &mut [f64],
) {
    let (m, dz) = (vocab.m(), vocab.d_latent());
    ws.prepare(m, dz, x.len());
    proj.moments_into(x, &mut ws.a, &mut ws.s);
    psi1_point(vocab, &ws.a, &ws.s, psi1);
    psi2_point_upper(
        vocab.z_dim_major(),
        m,
        &ws.a,
        &ws.s,
        &mut ws.k,
        psi2_upper,
        Write::Overwrite,
    );
}

impl PsiWorkspace {
    /// Moments `(a, s) [d']` of the last point evaluated with this workspace.
    pub fn moments(&self) -> (&[f64], &[f64]) {
        (&self.a, &self.s)
    }
}

/// Unit-scale `Ψ̄1 [n, m]` of a set of inputs `x [n, d]`.
///
/// # Errors
/// [`crate::Error::DimensionMismatch`] when `x` does not have `d` columns or q(W) does not
/// have the vocabulary's d' rows.
pub fn psi1_matrix(
    vocab: &Vocabulary,
    proj: &Projection,
    x: MatRef<'_, f64>,
) -> crate::Result<Mat<f64>> {
    check_shapes(vocab, proj, x)?;
    let (m, dz, d) = (vocab.m(), vocab.d_latent(), proj.d());
    let mut ws = PsiWorkspace::default();
    ws.prepare(m, dz, d);
    let mut out = Mat::zeros(x.nrows(), m);
    let mut row = vec![0.0; m];
    for n in 0..x.nrows() {
        for j in 0..d {
            ws.x[j] = x[(n, j)];
        }
        proj.moments_into(&ws.x, &mut ws.a, &mut ws.s);
        psi1_point(vocab, &ws.a, &ws.s, &mut row);
        for j in 0..m {
            out[(n, j)] = row[j];
        }
    }
    Ok(out)
}

/// Checks that `x [n, d]` fits q(W) `[d', d]` and q(W) fits the vocabulary's d'.
///
/// # Errors
/// [`crate::Error::DimensionMismatch`] naming the size that does not fit.
pub(crate) fn check_shapes(
    vocab: &Vocabulary,
    proj: &Projection,
    x: MatRef<'_, f64>,
) -> crate::Result<()> {
    crate::error::ensure_dim("q(W) rows (d')", vocab.d_latent(), proj.mu().nrows())?;
    crate::error::ensure_dim("input columns (d)", proj.d(), x.ncols())
}

/// Per-point evaluator of the full (symmetric) unit-scale `ψ̄2(x) [m, m]` and `ψ̄1(x) [m]`,
/// reusing its buffers; for prediction and gradients.
#[derive(Clone, Debug)]
pub struct PointPsi {
    ws: PsiWorkspace,
    /// `ψ̄1(x) [m]` of the last point.
    pub psi1: Vec<f64>,
    /// `ψ̄2(x) [m, m]` of the last point, row-major, both triangles filled.
    pub psi2: Vec<f64>,
    m: usize,
}

impl PointPsi {
    /// Buffers for a vocabulary and an input dimension.
    pub fn new(vocab: &Vocabulary, d: usize) -> Self {
        let m = vocab.m();
        let mut ws = PsiWorkspace::default();
        ws.prepare(m, vocab.d_latent(), d);
        Self {
            ws,
            psi1: vec![0.0; m],
            psi2: vec![0.0; m * m],
            m,
        }
    }

    /// Moments `(a, s)` of the last point.
    pub fn moments(&self) -> (&[f64], &[f64]) {
        (&self.ws.a, &self.ws.s)
    }

    /// Evaluates ψ̄1 and ψ̄2 at `x [d]`.
    pub fn eval(&mut self, vocab: &Vocabulary, proj: &Projection, x: &[f64]) {
        let m = self.m;
        proj.moments_into(x, &mut self.ws.a, &mut self.ws.s);
        psi1_point(vocab, &self.ws.a, &self.ws.s, &mut self.psi1);
        psi2_point_upper(
            vocab.z_dim_major(),
            m,
            &self.ws.a,
            &self.ws.s,
            &mut self.ws.k,
            &mut self.psi2,
            Write::Overwrite,
        );
        for j in 0..m {
            for k in (j + 1)..m {
                self.psi2[k * m + j] = self.psi2[j * m + k];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use crate::simd::at_level;

    fn vocab(m: usize, dz: usize, seed: u64) -> Vocabulary {
        let mut rng = Rng::new(seed, 1);
        Vocabulary::new(Mat::from_fn(m, dz, |_, _| rng.normal()), seed).expect("vocabulary")
    }

    /// The kernel's arithmetic written entry by entry, in the documented order.
    fn reference_upper(zt: &[f64], m: usize, a: &[f64], s: &[f64]) -> Vec<f64> {
        let dz = a.len();
        let mut base = 0.0;
        let mut beta = vec![0.0; dz];
        let mut phi = vec![0.0; m];
        for i in 0..dz {
            let c = 1.0 + 2.0 * s[i];
            let inv_c = 1.0 / c;
            base -= a[i] * a[i] * inv_c + 0.5 * c.ln();
            beta[i] = 0.5 * (1.0 - inv_c);
            for (j, p) in phi.iter_mut().enumerate() {
                let z = zt[i * m + j];
                *p += z * (a[i] * inv_c) - z * z * (0.25 * (1.0 + inv_c));
            }
        }
        let mut out = vec![f64::NAN; m * m];
        for j in 0..m {
            for k in j..m {
                let mut r = (base + phi[j]) + phi[k];
                for i in 0..dz {
                    r = (zt[i * m + j] * beta[i]).mul_add(zt[i * m + k], r);
                }
                out[j * m + k] = exp_fma(r);
            }
        }
        out
    }

    /// ψ̄2_jk in the closed form of the module docs, with `f64::exp`.
    fn closed_form(z: MatRef<'_, f64>, a: &[f64], s: &[f64], j: usize, k: usize) -> f64 {
        let mut e = 0.0;
        for i in 0..a.len() {
            let (zj, zk) = (z[(j, i)], z[(k, i)]);
            let c = 1.0 + 2.0 * s[i];
            let zbar = 0.5 * (zj + zk);
            e += -0.25 * (zj - zk) * (zj - zk) - 0.5 * c.ln() - (a[i] - zbar).powi(2) / c;
        }
        e.exp()
    }

    fn kernel(v: &Vocabulary, a: &[f64], s: &[f64], out: &mut [f64], write: Write) {
        let mut ws = PsiWorkspace::default();
        ws.prepare(v.m(), v.d_latent(), 1);
        psi2_point_upper(v.z_dim_major(), v.m(), a, s, &mut ws.k, out, write);
    }

    #[test]
    fn psi2_kernel_is_bit_identical_on_every_path_and_matches_the_closed_form() {
        let mut rng = Rng::new(5, 9);
        for &dz in &[1usize, 2, 3, 8] {
            for &m in &[
                1usize, 2, 3, 4, 5, 7, 8, 9, 12, 13, 15, 16, 17, 20, 24, 25, 31, 33, 50,
            ] {
                let v = vocab(m, dz, (m * 10 + dz) as u64);
                let a: Vec<f64> = (0..dz).map(|_| rng.normal()).collect();
                let s: Vec<f64> = (0..dz).map(|_| 0.3 * rng.uniform()).collect();
                let want = reference_upper(v.z_dim_major(), m, &a, &s);
                let prior: Vec<f64> = (0..m * m).map(|_| rng.uniform()).collect();
                for level in [2, 1, 0] {
                    let mut over = vec![f64::NAN; m * m];
                    let mut acc = prior.clone();
                    at_level(level, || {
                        kernel(&v, &a, &s, &mut over, Write::Overwrite);
                        kernel(&v, &a, &s, &mut acc, Write::Accumulate);
                    });
                    for j in 0..m {
                        for k in 0..m {
                            let t = j * m + k;
                            if k < j {
                                assert!(over[t].is_nan(), "lower triangle written");
                                assert_eq!(acc[t].to_bits(), prior[t].to_bits());
                                continue;
                            }
                            assert_eq!(over[t].to_bits(), want[t].to_bits(), "m {m} dz {dz}");
                            assert_eq!(acc[t].to_bits(), (prior[t] + want[t]).to_bits());
                            let cf = closed_form(v.z(), &a, &s, j, k);
                            assert!((over[t] - cf).abs() <= 1e-13 * cf.max(1e-300), "{cf}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn psi1_is_bit_identical_on_every_path() {
        let mut rng = Rng::new(6, 2);
        for &(m, dz) in &[(1usize, 1usize), (7, 2), (20, 3), (33, 8)] {
            let v = vocab(m, dz, 3);
            let a: Vec<f64> = (0..dz).map(|_| rng.normal()).collect();
            let s: Vec<f64> = (0..dz).map(|_| 0.3 * rng.uniform()).collect();
            let bits: Vec<Vec<u64>> = [2, 1, 0]
                .iter()
                .map(|&level| {
                    let mut out = vec![0.0; m];
                    at_level(level, || psi1_point(&v, &a, &s, &mut out));
                    out.iter().map(|x| x.to_bits()).collect()
                })
                .collect();
            assert_eq!(bits[0], bits[2]);
            assert_eq!(bits[1], bits[2]);
        }
    }
}
