//! The residual kernel k_r on the agent's own inputs, and the log marginal likelihood of the
//! memory's residuals under it (with its gradient, for the fit).
//!
//! Two kinds ([`ResidualKind`]):
//! - `Learned`: an ARD kernel of a [`ResidualFamily`] on the scaled distance
//!   `r² = Σ_k (x_k − x'_k)²/ℓ_k²` — the squared exponential `σ_r² exp(−r²/2)` (the default),
//!   Matérn 3/2 or 5/2 ([`super::family`]) — with its own noise σ_rn; parameters
//!   `[ln σ_r, ln σ_rn, ln ℓ_1..d]`; or the sum of a per-agent offset, a short-range and a
//!   smooth squared exponential ([`super::sum`], `2d + 4` parameters).
//! - `GlobalResidual`: the global kernel's own residual at the mean projection W̄,
//!   `k_r(x, x') = σ_s² (k(W̄x, W̄x') − k_xᵀ K⁻¹ k_x')` with `k_x = k(W̄x, Z)` and noise σ_n;
//!   parameters `[ln σ_s, ln σ_n, W̄ (d'·d, row-major)]`, taken from the global q(W) at each fit.
//!
//! Rows enter through *features* computed once per row (Learned: `x_k/ℓ_k`, the sum
//! `[x/ℓ^s, x/ℓ^l]`; GlobalResidual:
//! `[W̄x (d'), k_x (m), K⁻¹k_x (m)]`), so a covariance is O(d) or O(d' + m).

use faer::reborrow::{Reborrow, ReborrowMut};
use faer::{Mat, MatMut, Par};

use super::{ResidualFamily, ResidualKind};
use crate::error::{Error, Result};

use crate::linalg::mat_vec;
use crate::model::kernel::sqdist;
use crate::model::{Projection, Vocabulary};
use crate::simd::dispatch;

/// Bounds of the learned kernel's log parameters (ln σ_r, ln σ_rn, ln ℓ): a fit never leaves them.
pub const LOG_BOUNDS: (f64, f64) = (-12.0, 12.0);

/// A residual kernel: its kind and parameters (plain data, see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct ResidualKernel {
    kind: ResidualKind,
    /// The learned kernel's family (the squared exponential for `GlobalResidual`).
    family: ResidualFamily,
    params: Vec<f64>,
    d: usize,
    dz: usize,
}

impl ResidualKernel {
    /// The initial kernel from the global q(W) `proj`: Learned takes the squared exponential,
    /// σ_r = σ_s, σ_rn = σ_n and `ℓ_k = ½ / ‖W̄_{:,k}‖` (half the global kernel's effective
    /// lengthscale, clamped); GlobalResidual takes W̄, σ_s, σ_n.
    pub fn initial(kind: ResidualKind, proj: &Projection) -> Self {
        let (d, dz) = (proj.d(), proj.d_latent());
        let w = proj.mu();
        let mut params = vec![proj.log_sigma_s(), proj.log_sigma_n()];
        match kind {
            ResidualKind::Learned => params.extend((0..d).map(|k| {
                let norm = (0..dz).map(|i| w[(i, k)] * w[(i, k)]).sum::<f64>().sqrt();
                (0.5 / norm.max(1e-6))
                    .ln()
                    .clamp(LOG_BOUNDS.0, LOG_BOUNDS.1)
            })),
            ResidualKind::GlobalResidual => {
                params.extend((0..dz).flat_map(|i| (0..d).map(move |k| w[(i, k)])))
            }
        }
        Self {
            kind,
            family: ResidualFamily::SquaredExponential,
            params,
            d,
            dz,
        }
    }

    /// A kernel from stored parameters (a restore); a learned one is a squared exponential
    /// ([`ResidualKernel::learned`] for another family).
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] for a parameter vector of the wrong length,
    /// [`Error::NonFinite`] for a non-finite parameter.
    pub fn from_params(kind: ResidualKind, params: Vec<f64>, d: usize, dz: usize) -> Result<Self> {
        let want = match kind {
            ResidualKind::Learned => 2 + d,
            ResidualKind::GlobalResidual => 2 + dz * d,
        };
        crate::error::ensure_dim("local residual kernel parameters", want, params.len())?;
        crate::error::ensure_finite("local residual kernel parameters", &params)?;
        Ok(Self {
            kind,
            family: ResidualFamily::SquaredExponential,
            params,
            d,
            dz,
        })
    }

    /// A learned kernel of `family` on `d` inputs with parameters
    /// `[ln σ_r, ln σ_rn, ln ℓ_1..d]` (the sum: [`super::sum`]'s `2d + 4`).
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] for a parameter vector of another length than
    /// [`ResidualFamily::param_len`], [`Error::NonFinite`] for a non-finite parameter.
    pub fn learned(family: ResidualFamily, params: Vec<f64>, d: usize) -> Result<Self> {
        let want = family.param_len(d);
        crate::error::ensure_dim("local residual kernel parameters", want, params.len())?;
        crate::error::ensure_finite("local residual kernel parameters", &params)?;
        Ok(Self {
            kind: ResidualKind::Learned,
            family,
            params,
            d,
            dz: 0,
        })
    }

    /// A kernel of `kind` from stored parameters in `family` (a restore): a learned kernel
    /// of that family ([`ResidualKernel::learned`]), a `GlobalResidual` kernel as
    /// [`ResidualKernel::from_params`] (its family is the squared exponential's).
    ///
    /// # Errors
    /// As [`ResidualKernel::learned`] and [`ResidualKernel::from_params`].
    pub fn restored(
        kind: ResidualKind,
        family: ResidualFamily,
        params: Vec<f64>,
        (d, dz): (usize, usize),
    ) -> Result<Self> {
        match kind {
            ResidualKind::Learned => Self::learned(family, params, d),
            ResidualKind::GlobalResidual => Self::from_params(kind, params, d, dz),
        }
    }

    /// The raw inputs' width d.
    pub fn d(&self) -> usize {
        self.d
    }

    /// The kind.
    pub fn kind(&self) -> ResidualKind {
        self.kind
    }

    /// The learned kernel's family (the squared exponential for `GlobalResidual`).
    pub fn family(&self) -> ResidualFamily {
        self.family
    }

    /// Sets the family of a learned kernel (a `GlobalResidual` kernel keeps its own).
    pub(crate) fn set_family(&mut self, family: ResidualFamily) {
        if self.kind == ResidualKind::Learned {
            self.family = family;
        }
    }

    /// The parameters (see the module doc).
    pub fn params(&self) -> &[f64] {
        &self.params
    }

    /// Sets the parameters (of the family's length: the caller checked it).
    pub(crate) fn set_params(&mut self, p: &[f64]) {
        self.params.clear();
        self.params.extend_from_slice(p);
    }

    /// `σ_r²` (Learned; the sum's short part σ_s²) or `σ_s²` (GlobalResidual).
    pub fn signal_var(&self) -> f64 {
        (2.0 * self.params[0]).exp()
    }

    /// The observation noise variance of y around f: `σ_rn²` or `σ_n²`.
    pub fn noise_var(&self) -> f64 {
        (2.0 * self.params[1]).exp()
    }

    /// The kernel's inverse lengthscale per input, `[d]`: `1/ℓ_k` (Learned) or `‖W̄_{:,k}‖`
    /// (GlobalResidual), the metric of the spread policy.
    pub fn input_scale(&self) -> Vec<f64> {
        let d = self.d;
        match self.kind {
            // The sum's short part (its first lengthscales).
            ResidualKind::Learned => self.params[2..2 + d].iter().map(|l| (-l).exp()).collect(),
            ResidualKind::GlobalResidual => {
                let w = &self.params[2..];
                (0..d)
                    .map(|k| {
                        (0..self.dz)
                            .map(|i| w[i * d + k].powi(2))
                            .sum::<f64>()
                            .sqrt()
                    })
                    .collect()
            }
        }
    }

    /// Features per row.
    pub fn feature_len(&self, m: usize) -> usize {
        match self.kind {
            ResidualKind::Learned => self.family.feature_len(self.d),
            ResidualKind::GlobalResidual => self.dz + 2 * m,
        }
    }

    /// Appends the features of `x [d]` to `out`.
    pub fn features(&self, vocab: &Vocabulary, x: &[f64], out: &mut Vec<f64>) {
        match self.kind {
            ResidualKind::Learned if self.family == ResidualFamily::Sum => {
                super::sum::features(&self.params, x, out)
            }
            ResidualKind::Learned => {
                out.extend(x.iter().zip(&self.params[2..]).map(|(v, l)| v * (-l).exp()))
            }
            ResidualKind::GlobalResidual => {
                let (d, dz, m) = (self.d, self.dz, vocab.m());
                let w = &self.params[2..];
                let a: Vec<f64> = (0..dz)
                    .map(|i| (0..d).map(|k| w[i * d + k] * x[k]).sum())
                    .collect();
                let z = vocab.z();
                let kx: Vec<f64> = (0..m)
                    .map(|j| {
                        let s: f64 = (0..dz).map(|i| (a[i] - z[(j, i)]).powi(2)).sum();
                        (-0.5 * s).exp()
                    })
                    .collect();
                let kinv_k = mat_vec(vocab.k_inv(), &kx);
                out.extend_from_slice(&a);
                out.extend_from_slice(&kx);
                out.extend_from_slice(&kinv_k);
            }
        }
    }

    /// `k_r(a, b)` of two feature rows (exactly symmetric in its arguments).
    pub fn cov(&self, a: &[f64], b: &[f64]) -> f64 {
        match self.kind {
            ResidualKind::Learned if self.family == ResidualFamily::Sum => {
                super::sum::cov(&self.params, a, b)
            }
            ResidualKind::Learned => self.signal_var() * self.family.unit(sqdist(a, b)),
            ResidualKind::GlobalResidual => {
                let (dz, m) = (self.dz, (a.len() - self.dz) / 2);
                let e = (-0.5 * sqdist(&a[..dz], &b[..dz])).exp();
                let (ka, ia) = (&a[dz..dz + m], &a[dz + m..]);
                let (kb, ib) = (&b[dz..dz + m], &b[dz + m..]);
                let q = 0.5 * (dot(ka, ib) + dot(kb, ia));
                self.signal_var() * (e - q)
            }
        }
    }

    /// `out_i = k_r(row_i, fx)` for the rows of a feature buffer `rows [n, f]` (row-major) and
    /// one feature row `fx`: the Learned kernel's profile (its family's `f(r)`) in one
    /// vectorized pass.
    pub fn cov_column(&self, rows: &[f64], fx: &[f64], out: &mut [f64]) {
        let f = fx.len();
        match self.kind {
            ResidualKind::Learned if self.family == ResidualFamily::Sum => {
                super::sum::cov_column(&self.params, rows, fx, out)
            }
            ResidualKind::Learned => {
                for (o, r) in out.iter_mut().zip(rows.chunks_exact(f)) {
                    *o = sqdist(r, fx);
                }
                self.family.unit_in_place(out, self.signal_var());
            }
            ResidualKind::GlobalResidual => {
                for (o, r) in out.iter_mut().zip(rows.chunks_exact(f)) {
                    *o = self.cov(r, fx);
                }
            }
        }
    }

    /// `out[:, r] = k_r(rows_i, fx_r)` for the rows of a feature buffer `rows [n, f]` and the
    /// feature rows `fxs [q, f]` (both row-major) into `out [n, q]`: [`Self::cov_column`] for
    /// each `fx_r`, bit for bit, with the Learned kernel's squared distances vectorized over
    /// the rows (one transposition of `rows`).
    pub fn cov_columns(&self, rows: &[f64], fxs: &[f64], f: usize, out: &mut Mat<f64>) {
        let n = out.nrows();
        if self.kind != ResidualKind::Learned || f == 0 || self.family == ResidualFamily::Sum {
            for (r, fx) in fxs.chunks_exact(f.max(1)).enumerate() {
                self.cov_column(rows, fx, out.col_as_slice_mut(r));
            }
            return;
        }
        let cols: Vec<f64> = (0..f)
            .flat_map(|k| rows.chunks_exact(f).map(move |row| row[k]))
            .collect();
        for (r, fx) in fxs.chunks_exact(f).enumerate() {
            let o = out.col_as_slice_mut(r);
            o.fill(0.0);
            for (k, &xk) in fx.iter().enumerate() {
                add_squared_differences(o, &cols[k * n..(k + 1) * n], xk);
            }
            self.family.unit_in_place(o, self.signal_var());
        }
    }

    /// The log marginal likelihood `−½ rᵀA⁻¹r − ½ ln|A| − (n/2) ln 2π` of residuals `r [n]` at
    /// raw inputs `x [n·d]` under a Learned kernel of this kernel's family with parameters `p`,
    /// and its gradient in `p`: `½ tr((ααᵀ − A⁻¹) ∂A/∂p)`, `α = A⁻¹r`, with
    /// `∂A/∂ln σ_r = 2σ_r² E`, `∂A/∂ln σ_rn = 2σ_rn² I`, `∂A/∂ln ℓ_k = σ_r² G ∘ D_k`,
    /// `E_ij = f(r_ij)`, `G_ij = g(r_ij)` the family's profile and slope
    /// ([`super::family`]; `G = E` for the squared exponential) and
    /// `D_k,ij = (x_ik − x_jk)²/ℓ_k²`.
    ///
    /// # Errors
    /// [`Error::NotPositiveDefinite`] if A cannot be factored; [`Error::InvalidConfig`] for
    /// a GlobalResidual kernel (nothing to learn).
    pub fn log_marginal(&self, p: &[f64], x: &[f64], r: &[f64]) -> Result<(f64, Vec<f64>)> {
        if self.kind != ResidualKind::Learned {
            return Err(Error::InvalidConfig(
                "the global residual kernel has no parameters to learn".into(),
            ));
        }
        let (d, n) = (self.d, r.len());
        if self.family == ResidualFamily::Sum {
            // All rows one agent's (module doc of `sum`).
            return super::sum::log_marginal(p, d, (x, r), None);
        }
        let (s2, n2) = ((2.0 * p[0]).exp(), (2.0 * p[1]).exp());
        // Inputs scaled by the lengthscales, one column per input (D_k,ij = (xs_ik − xs_jk)²).
        let xs: Vec<Vec<f64>> = (0..d)
            .map(|k| {
                let s = (-p[2 + k]).exp();
                (0..n).map(|i| x[i * d + k] * s).collect()
            })
            .collect();
        let (e, slope) = self.unit_matrices(&xs, n);
        let mut l = Mat::from_fn(n, n, |i, j| {
            if i < j {
                0.0
            } else {
                s2 * e[(i, j)] + if i == j { n2 } else { 0.0 }
            }
        });
        let (lml_parts, ainv) = factor_seq(l.as_mut(), r)?;
        let (alpha, log_det) = (&lml_parts.0, lml_parts.1);
        let lml = -0.5 * dot(r, alpha)
            - 0.5 * log_det
            - 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln();
        // W = ααᵀ − A⁻¹; gradient entries are ½ Σ_ij W_ij ∂A_ij, over the lower triangle with
        // the off-diagonal counted twice (column j: we_i = 2 W_ij E_ij, i > j; W_jj E_jj; and
        // wg the same with G for the lengthscales).
        let mut g = vec![0.0; 2 + d];
        let (mut we, mut wg) = (vec![0.0; n], vec![0.0; n]);
        for j in 0..n {
            let (ac, ec, al) = (
                &ainv.col_as_slice(j)[j..],
                &e.col_as_slice(j)[j..],
                &alpha[j..],
            );
            let we = &mut we[..n - j];
            for (((o, a), ei), ai) in we.iter_mut().zip(ac).zip(ec).zip(al) {
                *o = 2.0 * (ai * alpha[j] - a) * ei;
            }
            we[0] *= 0.5;
            g[1] += alpha[j] * alpha[j] - ac[0];
            g[0] += we.iter().sum::<f64>();
            let wl: &[f64] = match &slope {
                None => we,
                Some(s) => {
                    let (gc, wg) = (&s.col_as_slice(j)[j..], &mut wg[..n - j]);
                    for (((o, a), gi), ai) in wg.iter_mut().zip(ac).zip(gc).zip(al) {
                        *o = 2.0 * (ai * alpha[j] - a) * gi;
                    }
                    wg[0] *= 0.5;
                    wg
                }
            };
            for (gk, xk) in g[2..].iter_mut().zip(&xs) {
                let (c, xk) = (xk[j], &xk[j..]);
                *gk += wl
                    .iter()
                    .zip(xk)
                    .map(|(w, u)| w * (u - c) * (u - c))
                    .sum::<f64>();
            }
        }
        g[0] *= s2;
        g[1] *= n2;
        g[2..].iter_mut().for_each(|v| *v *= 0.5 * s2);
        Ok((lml, g))
    }

    /// The unit kernel matrix `E_ij = f(r_ij)` of the scaled inputs `xs` (one column of `n`
    /// per input) and, for a Matérn family, the slope matrix `G_ij = g(r_ij)` (`None` for the
    /// squared exponential, whose G is E): lower triangles, column by column, vectorized.
    fn unit_matrices(&self, xs: &[Vec<f64>], n: usize) -> (Mat<f64>, Option<Mat<f64>>) {
        let mut e = Mat::<f64>::zeros(n, n);
        let mut slope = (self.family != ResidualFamily::SquaredExponential).then(|| e.clone());
        for j in 0..n {
            let col = &mut e.col_as_slice_mut(j)[j..];
            for xk in xs {
                let (c, xk) = (xk[j], &xk[j..]);
                for (v, u) in col.iter_mut().zip(xk) {
                    *v += (u - c) * (u - c);
                }
            }
            if let Some(s) = slope.as_mut() {
                self.family.slope_into(col, &mut s.col_as_slice_mut(j)[j..]);
            }
            self.family.unit_in_place(col, 1.0);
        }
        (e, slope)
    }
}

/// Factors `a [n, n]` (lower triangle) in place into L and returns `((A⁻¹r, ln|A|), A⁻¹)`
/// (`A⁻¹`'s lower triangle), all sequential (`Par::Seq`: the fit runs inside an agent).
///
/// # Errors
/// [`Error::NotPositiveDefinite`] if A cannot be factored.
#[allow(clippy::type_complexity)]
pub(super) fn factor_seq(mut a: MatMut<'_, f64>, r: &[f64]) -> Result<((Vec<f64>, f64), Mat<f64>)> {
    use faer::dyn_stack::{MemBuffer, MemStack};
    use faer::linalg::cholesky::llt;
    let n = a.nrows();
    if !super::factor::cholesky_seq_in_place(a.rb_mut()) {
        return Err(Error::NotPositiveDefinite {
            what: "local residual A",
            jitter_tried: 0.0,
        });
    }
    let l = a.rb();
    let mut alpha = Mat::from_fn(n, 1, |i, _| r[i]);
    faer::linalg::triangular_solve::solve_lower_triangular_in_place(l, alpha.as_mut(), Par::Seq);
    faer::linalg::triangular_solve::solve_upper_triangular_in_place(
        l.transpose(),
        alpha.as_mut(),
        Par::Seq,
    );
    let log_det = 2.0 * (0..n).map(|i| l[(i, i)].ln()).sum::<f64>();
    let mut ainv = Mat::<f64>::zeros(n, n);
    let mut mem = MemBuffer::new(llt::inverse::inverse_scratch::<f64>(n, Par::Seq));
    llt::inverse::inverse(ainv.as_mut(), l, Par::Seq, MemStack::new(&mut mem));
    Ok(((alpha.col_as_slice(0).to_vec(), log_det), ainv))
}

/// `aᵀb`.
fn dot(a: &[f64], b: &[f64]) -> f64 {
    crate::linalg::dot(a, b)
}

dispatch! {
    /// `o_i += (c_i − x)²`: one input's term of the squared distances of [`ResidualKernel::cov_columns`].
    fn add_squared_differences(o: &mut [f64], c: &[f64], x: f64) {
        for (o, c) in o.iter_mut().zip(c) {
            *o += (c - x) * (c - x);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn the_log_marginal_gradient_matches_finite_differences() {
        // Reference: docs/LOCAL.md §4 (∂L/∂p = ½ tr((ααᵀ − A⁻¹) ∂A/∂p)).
        let mut rng = Rng::new(11, 2);
        let (n, d) = (15, 3);
        let x: Vec<f64> = (0..n * d).map(|_| rng.normal()).collect();
        let r: Vec<f64> = (0..n)
            .map(|i| x[i * d].sin() + 0.3 * rng.normal())
            .collect();
        let proj = Projection::new(
            Mat::from_fn(2, d, |_, _| rng.normal()),
            Mat::from_fn(2, d, |_, _| -1.0),
            0.1,
            -0.5,
        );
        let k = ResidualKernel::initial(ResidualKind::Learned, &proj);
        let p = vec![0.2, -1.1, 0.3, -0.2, 0.5];
        gradient_matches_finite_differences(&k, &p, &x, &r, "se");
        let global = ResidualKernel::initial(ResidualKind::GlobalResidual, &proj);
        assert!(global.log_marginal(global.params(), &x, &r).is_err());
    }

    #[test]
    fn the_matern_log_marginal_gradient_matches_finite_differences_with_coincident_rows() {
        // Reference: docs/LOCAL.md §12a (∂A/∂ln ℓ_k = σ_r² G ∘ D_k, G = g(r) = −f'(r)/r);
        // rows 5 and 9 repeat row 0 (r = 0, where g is finite and D_k = 0).
        let mut rng = Rng::new(14, 2);
        let (n, d) = (15, 3);
        let mut x: Vec<f64> = (0..n * d).map(|_| rng.normal()).collect();
        let first = x[..d].to_vec();
        x[5 * d..6 * d].copy_from_slice(&first);
        x[9 * d..10 * d].copy_from_slice(&first);
        let r: Vec<f64> = (0..n)
            .map(|i| x[i * d].sin() + 0.3 * rng.normal())
            .collect();
        let p = vec![0.2, -1.1, 0.3, -0.2, 0.5];
        for family in ResidualFamily::STATIONARY {
            let k = ResidualKernel::learned(family, p.clone(), d).expect("kernel");
            gradient_matches_finite_differences(&k, &p, &x, &r, family.name());
        }
    }

    /// `k.log_marginal`'s gradient at `p` against central differences (step 1e-5, relative
    /// tolerance 1e-6), every entry finite.
    fn gradient_matches_finite_differences(
        k: &ResidualKernel,
        p: &[f64],
        x: &[f64],
        r: &[f64],
        what: &str,
    ) {
        let (_, g) = k.log_marginal(p, x, r).expect("lml");
        assert!(g.iter().all(|v| v.is_finite()), "{what}: {g:?}");
        let h = 1e-5;
        for i in 0..p.len() {
            let (mut a, mut b) = (p.to_vec(), p.to_vec());
            a[i] += h;
            b[i] -= h;
            let fd = (k.log_marginal(&a, x, r).expect("lml").0
                - k.log_marginal(&b, x, r).expect("lml").0)
                / (2.0 * h);
            assert!(
                (fd - g[i]).abs() < 1e-6 * g[i].abs().max(1.0),
                "{what} parameter {i}: analytic {} vs finite difference {fd}",
                g[i]
            );
        }
    }

    #[test]
    fn each_family_has_its_known_covariance() {
        // Reference: docs/LOCAL.md §12a. σ_r = 1.5, ℓ = (2, 0.5), x − x' = (1.2, 0.2): the
        // scaled distance r = √0.52; k = σ²e^{−r²/2}, σ²(1 + √3 r)e^{−√3 r},
        // σ²(1 + √5 r + 5r²/3)e^{−√5 r} (values from the formulas in double precision).
        let want = [
            (ResidualFamily::SquaredExponential, 1.734_866_068_058_024_1),
            (ResidualFamily::Matern32, 1.451_236_731_985_169_3),
            (ResidualFamily::Matern52, 1.560_892_139_545_880_6),
        ];
        let p = vec![1.5f64.ln(), 0.1f64.ln(), 2.0f64.ln(), 0.5f64.ln()];
        let vocab = Vocabulary::default_design(4, 2, 0).expect("vocabulary");
        for (family, v) in want {
            let k = ResidualKernel::learned(family, p.clone(), 2).expect("kernel");
            let (mut a, mut b) = (Vec::new(), Vec::new());
            k.features(&vocab, &[0.3, -0.1], &mut a);
            k.features(&vocab, &[1.5, 0.1], &mut b);
            let got = k.cov(&a, &b);
            assert!((got - v).abs() < 1e-12, "{family:?}: {got} vs {v}");
            assert!((k.cov(&a, &a) - 2.25).abs() < 1e-12, "σ_r² at r = 0");
            let mut col = [0.0; 2];
            k.cov_column(&[a.clone(), b.clone()].concat(), &b, &mut col);
            assert!((col[0] - v).abs() < 1e-12 && (col[1] - 2.25).abs() < 1e-12);
        }
    }

    #[test]
    fn a_fit_raises_the_log_marginal_likelihood() {
        let mut rng = Rng::new(12, 2);
        let (n, d) = (60, 2);
        let x: Vec<f64> = (0..n * d).map(|_| 2.0 * rng.normal()).collect();
        let r: Vec<f64> = (0..n)
            .map(|i| 0.5 * (1.5 * x[i * d]).sin() + 0.05 * rng.normal())
            .collect();
        let proj = Projection::point(Mat::from_fn(2, d, |_, _| 0.1), 1.0, 0.5);
        let k = ResidualKernel::initial(ResidualKind::Learned, &proj);
        let fitted = super::super::fit::fit_learned(&k, &x, &r, true).expect("fit");
        let mut start = k.params().to_vec();
        let var = r.iter().map(|v| v * v).sum::<f64>() / n as f64;
        start[0] = 0.5 * (0.5 * var).ln();
        start[1] = start[0];
        let before = k.log_marginal(&start, &x, &r).expect("lml").0;
        let after = k.log_marginal(&fitted, &x, &r).expect("lml").0;
        assert!(after > before + 10.0, "lml {before} → {after}");
        // Sixty Adam steps stop early (the regularizer: the start is the global kernel's
        // lengthscales); the noise went down and the unused second input kept a longer
        // lengthscale than the first.
        assert!(
            fitted[1] < (0.1f64).ln() && fitted[3] > fitted[2],
            "{fitted:?}"
        );
        // Same inputs, same fit.
        assert_eq!(
            super::super::fit::fit_learned(&k, &x, &r, true),
            Some(fitted)
        );
    }

    #[test]
    fn cov_columns_equal_cov_column_bit_for_bit() {
        let mut rng = Rng::new(13, 2);
        let d = 3;
        let proj = Projection::new(
            Mat::from_fn(2, d, |_, _| rng.normal()),
            Mat::from_fn(2, d, |_, _| -1.0),
            0.1,
            -0.5,
        );
        let vocab = Vocabulary::default_design(6, 2, 3).expect("vocabulary");
        let matern = |f| {
            let k = ResidualKernel::initial(ResidualKind::Learned, &proj);
            ResidualKernel::learned(f, k.params().to_vec(), d).expect("kernel")
        };
        for k in [
            ResidualKernel::initial(ResidualKind::Learned, &proj),
            ResidualKernel::initial(ResidualKind::GlobalResidual, &proj),
            matern(ResidualFamily::Matern32),
            matern(ResidualFamily::Matern52),
            {
                let mut p = ResidualKernel::initial(ResidualKind::Learned, &proj)
                    .params()
                    .to_vec();
                let long: Vec<f64> = p[2..].iter().map(|l| l + 1.0).collect();
                p.extend([-0.7, 0.2]);
                p.extend(long);
                ResidualKernel::learned(ResidualFamily::Sum, p, d).expect("sum")
            },
        ] {
            let kind = (k.kind(), k.family());
            let feats = |count: usize, rng: &mut Rng| {
                let mut out = Vec::new();
                for _ in 0..count {
                    let x: Vec<f64> = (0..d).map(|_| rng.normal()).collect();
                    k.features(&vocab, &x, &mut out);
                }
                out
            };
            let (rows, fxs) = (feats(37, &mut rng), feats(5, &mut rng));
            let f = fxs.len() / 5;
            let mut out = Mat::zeros(37, 5);
            k.cov_columns(&rows, &fxs, f, &mut out);
            for (r, fx) in fxs.chunks_exact(f).enumerate() {
                let mut col = vec![0.0; 37];
                k.cov_column(&rows, fx, &mut col);
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(out.col_as_slice(r)),
                    bits(&col),
                    "{kind:?}, column {r}"
                );
            }
        }
    }
}
