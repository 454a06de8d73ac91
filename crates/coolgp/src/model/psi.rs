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
//! one multiply-add per dimension and one exponential per (j, k) term, on contiguous rows.
//! One *term* of the benchmarks is one such (point, j, k) entry with k ≥ j.

use faer::{Mat, MatRef};

use crate::model::projection::Projection;
use crate::model::Vocabulary;
use crate::simd::{dispatch, exp};

/// Scratch buffers reused across points (no allocation per point).
#[derive(Clone, Debug, Default)]
pub struct PsiWorkspace {
    a: Vec<f64>,
    s: Vec<f64>,
    k: KernelScratch,
    x: Vec<f64>,
}

/// Scratch of the ψ̄2 kernel: `β [d']`, `φ [m]`, one exponent row `[m]`.
#[derive(Clone, Debug, Default)]
struct KernelScratch {
    beta: Vec<f64>,
    phi: Vec<f64>,
    row: Vec<f64>,
}

impl PsiWorkspace {
    fn prepare(&mut self, m: usize, dz: usize, d: usize) {
        self.a.resize(dz, 0.0);
        self.s.resize(dz, 0.0);
        self.k.beta.resize(dz, 0.0);
        self.k.phi.resize(m, 0.0);
        self.k.row.resize(m, 0.0);
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

/// Unit-scale `ψ̄1(x) [m]` from the moments `(a, s)` of one point.
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

dispatch! {
    /// The ψ̄2 kernel: writes or adds the upper triangle (`k ≥ j`) of the unit-scale ψ̄2 of one
    /// point into `out [m, m]` row-major.
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
        let KernelScratch { beta, phi, row } = scratch;
        let mut base = 0.0;
        phi[..m].fill(0.0);
        for i in 0..dz {
            let c = 1.0 + 2.0 * s[i];
            let inv_c = 1.0 / c;
            base -= a[i] * a[i] * inv_c + 0.5 * c.ln();
            beta[i] = 0.5 * (1.0 - inv_c);
            let lin = a[i] * inv_c;
            let quad = 0.25 * (1.0 + inv_c);
            for (p, &z) in phi[..m].iter_mut().zip(&zt[i * m..(i + 1) * m]) {
                *p += z * lin - z * z * quad;
            }
        }
        for j in 0..m {
            let len = m - j;
            let r = &mut row[..len];
            let pj = base + phi[j];
            for (rk, &pk) in r.iter_mut().zip(&phi[j..m]) {
                *rk = pj + pk;
            }
            for i in 0..dz {
                let zi = &zt[i * m + j..(i + 1) * m];
                let coef = zi[0] * beta[i];
                for (rk, &zk) in r.iter_mut().zip(zi) {
                    *rk += coef * zk;
                }
            }
            let o = &mut out[j * m + j..(j + 1) * m];
            match write {
                Write::Overwrite => {
                    for (ok, &rk) in o.iter_mut().zip(r.iter()) {
                        *ok = exp(rk);
                    }
                }
                Write::Accumulate => {
                    for (ok, &rk) in o.iter_mut().zip(r.iter()) {
                        *ok += exp(rk);
                    }
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
    let (m, dz, d) = (vocab.m(), vocab.d_latent(), proj.d());
    assert_eq!(x.ncols(), d);
    assert_eq!(x.nrows(), y.len());
    ws.prepare(m, dz, d);
    let mut upper = vec![0.0; m * m];
    let mut psi1 = vec![0.0; m];
    for (n, &yn) in y.iter().enumerate() {
        for j in 0..d {
            ws.x[j] = x[(n, j)];
        }
        proj.moments_into(&ws.x, &mut ws.a, &mut ws.s);
        psi1_point(vocab, &ws.a, &ws.s, &mut psi1);
        for (acc_j, &p) in acc.psi1_y.iter_mut().zip(&psi1) {
            *acc_j += p * yn;
        }
        psi2_point_upper(
            vocab.z_dim_major(),
            m,
            &ws.a,
            &ws.s,
            &mut ws.k,
            &mut upper,
            Write::Accumulate,
        );
        acc.yty += yn * yn;
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

/// Unit-scale `Ψ̄1 [n, m]` of a set of inputs.
pub fn psi1_matrix(vocab: &Vocabulary, proj: &Projection, x: MatRef<'_, f64>) -> Mat<f64> {
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
    out
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
