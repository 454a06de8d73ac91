//! The server-based baselines of the paper's fault-tolerance experiment (spec §8): dDTC
//! (Gal, van der Wilk & Rasmussen 2014) and dPITC (Chen et al. 2013), with a common fixed
//! `W0`, `σ_s`, `σ_n` and the same Z as COOL-GP.
//!
//! Kernels: `k_ff(x,x') = σ_s² exp(−½‖W0(x−x')‖²)`, `K_bU = k_fu(X_b, Z; W0) [n_b, m]`.
//! Each batch b yields a local summary `(Σ̇_b [m, m], ẏ_b [m])`; the server sums the received
//! ones, `Σ̈ = K + Σ_b Σ̇_b`, `ÿ = Σ_b ẏ_b` — which is exactly a COOL-GP [`NaturalParams`] in
//! K-form, so the shared predictive reuses the same machinery:
//! `mean = k_*U Σ̈⁻¹ÿ`, `var_f = σ_s² − k_*U (K⁻¹ − Σ̈⁻¹) k_U*`.

use faer::{Mat, MatRef};

use crate::error::Result;
use crate::linalg::{mul, symmetrize, Cholesky};
use crate::model::kernel::sqdist;
use crate::model::predict::kernel_means;
use crate::model::{Excess, NaturalParams, Prediction, Vocabulary};

/// Which server-based baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Baseline {
    /// Distributed DTC / Titsias: `Σ̇_b = K_bUᵀK_bU/σ_n²`, `ẏ_b = K_bUᵀy_b/σ_n²`.
    Ddtc,
    /// Distributed PITC: `Λ_b = k_ff(X_b,X_b) + σ_n²I − K_bU K⁻¹ K_bUᵀ`,
    /// `Σ̇_b = K_bUᵀΛ_b⁻¹K_bU`, `ẏ_b = K_bUᵀΛ_b⁻¹y_b`.
    Dpitc,
}

/// The fixed hyperparameters both baselines share.
#[derive(Clone, Debug, PartialEq)]
pub struct BaselineKernel {
    /// `W0 [d', d]`.
    pub w0: Mat<f64>,
    /// Signal std σ_s.
    pub sigma_s: f64,
    /// Noise std σ_n.
    pub sigma_n: f64,
}

impl BaselineKernel {
    /// `K_XU = σ_s exp(−½‖W0 x − z_j‖²) [n, m]`.
    pub fn k_fu(&self, vocab: &Vocabulary, x: MatRef<'_, f64>) -> Mat<f64> {
        let v = mul(x, self.w0.transpose());
        let z = vocab.z();
        let zr: Vec<Vec<f64>> = (0..z.nrows())
            .map(|j| (0..z.ncols()).map(|i| z[(j, i)]).collect())
            .collect();
        let mut out = Mat::zeros(x.nrows(), vocab.m());
        let mut vr = vec![0.0; v.ncols()];
        for r in 0..x.nrows() {
            for (i, e) in vr.iter_mut().enumerate() {
                *e = v[(r, i)];
            }
            for (j, zj) in zr.iter().enumerate() {
                out[(r, j)] = self.sigma_s * (-0.5 * sqdist(&vr, zj)).exp();
            }
        }
        out
    }

    /// `k_ff(X, X) [n, n]`.
    pub fn k_ff(&self, x: MatRef<'_, f64>) -> Mat<f64> {
        let v = mul(x, self.w0.transpose());
        let rows: Vec<Vec<f64>> = (0..v.nrows())
            .map(|r| (0..v.ncols()).map(|i| v[(r, i)]).collect())
            .collect();
        let s2 = self.sigma_s * self.sigma_s;
        Mat::from_fn(x.nrows(), x.nrows(), |a, b| {
            s2 * (-0.5 * sqdist(&rows[a], &rows[b])).exp()
        })
    }

    /// The local summary `(Σ̇_b, ẏ_b)` of one batch, as an [`Excess`].
    ///
    /// # Errors
    /// [`crate::Error::NotPositiveDefinite`] if dPITC's `Λ_b` does not factor.
    pub fn local_summary(
        &self,
        vocab: &Vocabulary,
        which: Baseline,
        x: MatRef<'_, f64>,
        y: &[f64],
    ) -> Result<Excess> {
        let kbu = self.k_fu(vocab, x);
        let m = vocab.m();
        let ymat = Mat::from_fn(y.len(), 1, |i, _| y[i]);
        let (mut d1, d2) = match which {
            Baseline::Ddtc => {
                let sn2 = self.sigma_n * self.sigma_n;
                let d1 = Mat::from_fn(m, m, |_, _| 0.0)
                    + mul(kbu.transpose(), kbu.as_ref()) * faer::Scale(1.0 / sn2);
                let d2 = mul(kbu.transpose(), ymat.as_ref());
                (d1, (0..m).map(|j| d2[(j, 0)] / sn2).collect::<Vec<_>>())
            }
            Baseline::Dpitc => {
                let n = y.len();
                let q = mul(kbu.as_ref(), vocab.chol_k().solve(kbu.transpose()).as_ref());
                let mut lam = self.k_ff(x);
                for i in 0..n {
                    lam[(i, i)] += self.sigma_n * self.sigma_n;
                }
                lam -= &q;
                symmetrize(&mut lam);
                let cl = Cholesky::new(lam.as_ref(), "Λ_b")?;
                let li_kbu = cl.solve(kbu.as_ref());
                let li_y = cl.solve(ymat.as_ref());
                let d1 = mul(kbu.transpose(), li_kbu.as_ref());
                let d2 = mul(kbu.transpose(), li_y.as_ref());
                (d1, (0..m).map(|j| d2[(j, 0)]).collect::<Vec<_>>())
            }
        };
        symmetrize(&mut d1);
        Ok(Excess { d1, d2 })
    }

    /// The predictive mean `K_fu β`, `β = Σ̈⁻¹ ÿ`, of the server's model at `x [n, d]` (batched,
    /// for RMSE; the same numbers as [`BaselineKernel::predict`]'s mean to rounding).
    ///
    /// # Errors
    /// [`crate::Error::NotPositiveDefinite`] if Σ̈ does not factor.
    pub fn predict_mean(
        &self,
        vocab: &Vocabulary,
        server: &NaturalParams,
        x: MatRef<'_, f64>,
    ) -> Result<Vec<f64>> {
        self.mean_at(vocab, &self.mean_weights(server)?, x)
    }

    /// `β = Σ̈⁻¹ ÿ [m]` of the server's model (factor once, then [`BaselineKernel::mean_at`]
    /// for each set of inputs).
    ///
    /// # Errors
    /// [`crate::Error::NotPositiveDefinite`] if Σ̈ does not factor.
    pub fn mean_weights(&self, server: &NaturalParams) -> Result<Vec<f64>> {
        Ok(Cholesky::new(server.t1.as_ref(), "Σ̈")?.solve_vec(&server.t2))
    }

    /// The predictive mean `K_fu β` at `x [n, d]` (batched).
    ///
    /// # Errors
    /// [`crate::Error::DimensionMismatch`] as [`kernel_means`].
    pub fn mean_at(
        &self,
        vocab: &Vocabulary,
        beta: &[f64],
        x: MatRef<'_, f64>,
    ) -> Result<Vec<f64>> {
        Ok(
            kernel_means(vocab, self.w0.as_ref(), None, self.sigma_s, &[beta], x)?
                .pop()
                .unwrap_or_default(),
        )
    }

    /// The shared predictive from the server's sums `Σ̈ = K + Σ Σ̇`, `ÿ = Σ ẏ`.
    ///
    /// # Errors
    /// [`crate::Error::NotPositiveDefinite`] if Σ̈ does not factor.
    pub fn predict(
        &self,
        vocab: &Vocabulary,
        server: &NaturalParams,
        x: MatRef<'_, f64>,
    ) -> Result<Prediction> {
        let cs = Cholesky::new(server.t1.as_ref(), "Σ̈")?;
        let beta = cs.solve_vec(&server.t2);
        let sig_inv = cs.inverse();
        let k_inv = vocab.k_inv();
        let m = vocab.m();
        let b = Mat::from_fn(m, m, |i, j| k_inv[(i, j)] - sig_inv[(i, j)]);
        let ksu = self.k_fu(vocab, x);
        let kb = mul(ksu.as_ref(), b.as_ref());
        let s2 = self.sigma_s * self.sigma_s;
        let sn2 = self.sigma_n * self.sigma_n;
        let mut p = Prediction {
            mean: Vec::with_capacity(x.nrows()),
            var_f: Vec::with_capacity(x.nrows()),
            var_y: Vec::with_capacity(x.nrows()),
        };
        for r in 0..x.nrows() {
            let mean: f64 = (0..m).map(|j| ksu[(r, j)] * beta[j]).sum();
            let q: f64 = (0..m).map(|j| kb[(r, j)] * ksu[(r, j)]).sum();
            let vf = (s2 - q).max(0.0);
            p.mean.push(mean);
            p.var_f.push(vf);
            p.var_y.push(vf + sn2);
        }
        Ok(p)
    }
}
