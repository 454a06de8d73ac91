//! Leave-one-out answers (docs/LOCAL.md §10): what an agent would answer at one of its own
//! memory rows `i` had row i never entered its memory, computed from the factor of all n rows.
//!
//! With `A = L Lᵀ`, `y = L⁻¹ e_i` (zero above row i), `z = L⁻¹ r` ([`super::cache`]):
//! `a = [A⁻¹]_ii = ‖y‖²` and `[A⁻¹ r]_i = yᵀz`. The weights of the other rows,
//! `c = A_{−i}⁻¹ k_r(B_{−i}, x_i)`, are `−[A⁻¹]_{:,i} / a` off row i (partitioned inverse;
//! the off-diagonal of A is `K_r`), and `c_i = 0`, so `Lᵀc = L_{i,:}ᵀ − y/a` and
//!
//! ```text
//! residual_mean = r_i − yᵀz / a               (r_i = L_{i,:} z)
//! residual_var  = 1/a − σ_rn²                  (Schur complement of A_{−i})
//! Ψ̄_Bᵀ c        = Gᵀ (L_{i,:}ᵀ − y/a)          (G = L⁻¹ Ψ̄_B)
//! ```
//!
//! and the global part as in [`super::answer`] with that `Ψ̄_Bᵀ c`. One triangular solve per
//! row, O(n²). The global model is the agent's current one: it has absorbed row i (one row of
//! its whole stream), so only the memory's part leaves the row out.

use faer::Mat;

use super::answer::{global_part, global_var, prepared};
use super::{LocalAnswer, LocalModel};
use crate::error::{Error, Result};
use crate::linalg::{dot, mul};
use crate::model::{Posterior, Projection, Vocabulary};

/// An agent's leave-one-out answers at some of its own memory rows.
#[derive(Clone, Debug, PartialEq)]
pub struct HeldOutRows {
    /// The rows' inputs, `[k, d]`.
    pub x: Mat<f64>,
    /// Their targets, `[k]`.
    pub y: Vec<f64>,
    /// The answer at each row by the memory without that row and the current global model.
    pub answers: Vec<LocalAnswer>,
}

/// The leave-one-out answers at memory rows `idx` of a non-empty model (module doc).
///
/// # Errors
/// [`Error::DimensionMismatch`] for an index outside the memory;
/// [`Error::NotPositiveDefinite`] when the memory's A cannot be factored.
pub(crate) fn loo_answers(
    model: &LocalModel,
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    idx: &[usize],
) -> Result<HeldOutRows> {
    let n = model.len();
    if let Some(&bad) = idx.iter().find(|&&i| i >= n) {
        return Err(Error::DimensionMismatch {
            what: "leave-one-out row of the local memory",
            expected: n,
            found: bad,
        });
    }
    let (factor, part) = prepared(model, vocab, proj, post)?;
    let (k, d, mem) = (idx.len(), model.memory().d(), model.memory());
    let x = Mat::from_fn(k, d, |r, j| mem.row(idx[r])[j]);
    let (mean_g, gvar, phi) = global_part(vocab, proj, post, x.as_ref());
    let mut y = Mat::<f64>::zeros(n, k);
    for (r, &i) in idx.iter().enumerate() {
        y[(i, r)] = 1.0;
    }
    factor.solve_lower_in_place(y.as_mut());
    let l = factor.l();
    let z = &part.z;
    // Per row: a = ‖y‖², yᵀz, r_i = L_{i,:} z; the columns of Lᵀc = L_{i,:}ᵀ − y/a.
    let mut stats = Vec::with_capacity(k);
    let mut ltc = Mat::<f64>::zeros(n, k);
    for (r, &i) in idx.iter().enumerate() {
        let yr = y.col_as_slice(r);
        let a = dot(yr, yr);
        let r_i: f64 = (0..=i).map(|c| l[(i, c)] * z[c]).sum();
        stats.push((a, dot(yr, z), r_i));
        let col = ltc.col_as_slice_mut(r);
        for (c, v) in col.iter_mut().enumerate() {
            let own = if c <= i { l[(i, c)] } else { 0.0 };
            *v = own - yr[c] / a;
        }
    }
    let wbar = mul(part.g.transpose(), ltc.as_ref());
    let s = mul(post.t1_inv.as_ref(), wbar.as_ref());
    let kernel = model.kernel();
    let flen = kernel.feature_len(vocab.m());
    let feats = model.features();
    let (ss, noise) = (proj.sigma_s(), kernel.noise_var());
    let answers = idx
        .iter()
        .enumerate()
        .map(|(r, &i)| {
            let (a, yz, r_i) = stats[r];
            let f = &feats[i * flen..(i + 1) * flen];
            let (sr, wr) = (s.col_as_slice(r), wbar.col_as_slice(r));
            LocalAnswer {
                global_mean: mean_g[r],
                global_var: global_var(gvar[r], ss, sr, wr, phi.col_as_slice(r)),
                residual_mean: r_i - yz / a,
                residual_var: (1.0 / a - noise).max(0.0),
                residual_prior: kernel.cov(f, f),
                noise_var: noise,
            }
        })
        .collect();
    Ok(HeldOutRows {
        x,
        y: idx.iter().map(|&i| mem.y()[i]).collect(),
        answers,
    })
}

#[cfg(test)]
mod tests {
    use faer::Mat;

    use super::loo_answers;
    use crate::local::answer::answers;
    use crate::local::tests::{global, worst_gap};
    use crate::local::{LocalConfig, LocalModel, MemoryPolicy, ResidualKind};
    use crate::rng::Rng;

    #[allow(clippy::needless_update)]
    fn check(kind: ResidualKind, point: bool, seed: u64) {
        let mut rng = Rng::new(seed, 91);
        let (d, n) = (3, 14);
        let (vocab, proj, post) = global(point, &mut rng);
        let config = LocalConfig {
            capacity: 64,
            policy: MemoryPolicy::Recent,
            kernel: kind,
            ..LocalConfig::default()
        };
        let x = Mat::from_fn(n, d, |_, _| rng.normal());
        let y: Vec<f64> = (0..n)
            .map(|i| x[(i, 0)].sin() + 0.3 * rng.normal())
            .collect();
        let mut all = LocalModel::new(config, &vocab, &proj, 1);
        all.offer(&vocab, x.as_ref(), &y);
        let params: Vec<f64> = all
            .kernel()
            .params()
            .iter()
            .map(|p| p + 0.2 * rng.normal())
            .collect();
        all.set_kernel_params(&vocab, &params).expect("kernel");
        let idx = [0, 5, n - 1, 7];
        let got = loo_answers(&all, &vocab, &proj, &post, &idx).expect("loo");
        for (r, &i) in idx.iter().enumerate() {
            // The model that never saw row i, answering at x_i.
            let keep: Vec<usize> = (0..n).filter(|&j| j != i).collect();
            let xk = Mat::from_fn(n - 1, d, |a, b| x[(keep[a], b)]);
            let yk: Vec<f64> = keep.iter().map(|&j| y[j]).collect();
            let mut without = LocalModel::new(config, &vocab, &proj, 1);
            without.offer(&vocab, xk.as_ref(), &yk);
            without.set_kernel_params(&vocab, &params).expect("kernel");
            let xi = Mat::from_fn(1, d, |_, b| x[(i, b)]);
            let want = answers(&without, &vocab, &proj, &post, xi.as_ref()).expect("answers");
            let gap = worst_gap(&got.answers[r], &want[0]);
            assert!(
                gap < 1e-10,
                "{kind:?} point {point} row {i}: off by {gap:e}"
            );
            assert_eq!(got.y[r], y[i]);
            assert_eq!(got.x[(r, 2)], x[(i, 2)]);
        }
    }

    #[test]
    fn leave_one_out_answers_equal_a_memory_without_the_row() {
        // Reference: docs/LOCAL.md §10 (the partitioned inverse).
        for seed in 0..3 {
            for kind in [ResidualKind::Learned, ResidualKind::GlobalResidual] {
                check(kind, true, seed);
                check(kind, false, seed);
            }
        }
    }

    #[test]
    fn a_row_outside_the_memory_is_refused() {
        let mut rng = Rng::new(3, 91);
        let (vocab, proj, post) = global(true, &mut rng);
        let config = LocalConfig {
            capacity: 8,
            ..LocalConfig::default()
        };
        let mut model = LocalModel::new(config, &vocab, &proj, 1);
        let x = Mat::from_fn(5, 3, |_, _| rng.normal());
        model.offer(&vocab, x.as_ref(), &[0.1, 0.2, 0.3, 0.4, 0.5]);
        let err = loo_answers(&model, &vocab, &proj, &post, &[5]).expect_err("row 5 of 5");
        assert!(err.to_string().contains("leave-one-out"), "{err}");
    }
}
