//! The local correction against a dense computation (docs/LOCAL.md §3): the error
//! `e = f* − mean` as a linear map of the jointly Gaussian vector `(v, δ*, r_B, r*, ε_B)`,
//! its variance with dense matrices and a plain inverse, independent of the incremental factor.

use faer::Mat;

use super::answer::answers;
use super::{LocalAnswer, LocalConfig, LocalModel, MemoryPolicy, ResidualKind};
use crate::linalg::{mat_vec, mul, Cholesky};
use crate::model::predict::predict;
use crate::model::psi::{psi1_matrix, PointPsi};
use crate::model::{NaturalParams, Posterior, Projection, Vocabulary};
use crate::rng::Rng;

/// A random q(u) posterior: `T1 = K + G Gᵀ`, `T2` random.
pub(super) fn posterior(vocab: &Vocabulary, rng: &mut Rng) -> Posterior {
    let m = vocab.m();
    let g = Mat::from_fn(m, m + 2, |_, _| 0.7 * rng.normal());
    let mut t1 = mul(g.as_ref(), g.transpose());
    for j in 0..m {
        for i in 0..m {
            t1[(i, j)] += vocab.k()[(i, j)];
        }
    }
    crate::linalg::symmetrize(&mut t1);
    let t = NaturalParams {
        t1,
        t2: (0..m).map(|_| rng.normal()).collect(),
    };
    t.posterior(vocab).expect("posterior")
}

/// Plain inverse of a symmetric positive definite matrix.
fn inv(a: &Mat<f64>) -> Mat<f64> {
    Cholesky::new(a.as_ref(), "dense").expect("spd").inverse()
}

/// The dense error variance and mean of the estimator at one query row.
pub(super) fn dense(
    model: &LocalModel,
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    xs: &[f64],
) -> (f64, f64, f64) {
    let (n, m, ss) = (model.len(), vocab.m(), proj.sigma_s());
    let kern = model.kernel();
    let feat = |x: &[f64]| {
        let mut f = Vec::new();
        kern.features(vocab, x, &mut f);
        f
    };
    let fb: Vec<Vec<f64>> = (0..n).map(|i| feat(model.memory().row(i))).collect();
    let fs = feat(xs);
    // Joint residual covariance over (B, *).
    let all: Vec<&Vec<f64>> = fb.iter().chain(std::iter::once(&fs)).collect();
    let kj = Mat::from_fn(n + 1, n + 1, |i, j| kern.cov(all[i], all[j]));
    let noise = kern.noise_var();
    let a = Mat::from_fn(n, n, |i, j| kj[(i, j)] + if i == j { noise } else { 0.0 });
    let ainv = inv(&a);
    let kb: Vec<f64> = (0..n).map(|i| kj[(i, n)]).collect();
    let c = mat_vec(ainv.as_ref(), &kb);
    // Global part: Φ_B, φ*, μ, var_f − ρ.
    let phi_b = psi1_matrix(vocab, proj, model.rows().as_ref()).expect("psi1");
    let xm = Mat::from_fn(1, xs.len(), |_, j| xs[j]);
    let phi_s = psi1_matrix(vocab, proj, xm.as_ref()).expect("psi1");
    let pred = predict(vocab, proj, post, xm.as_ref()).expect("predict");
    let mut pp = PointPsi::new(vocab, xs.len());
    pp.eval(vocab, proj, xs);
    let kinv = inv(&vocab.k().to_owned());
    let tr: f64 = (0..m)
        .flat_map(|j| (0..m).map(move |k| (j, k)))
        .map(|(j, k)| kinv[(j, k)] * pp.psi2[j * m + k])
        .sum();
    let rho = (ss * ss * (1.0 - tr)).max(0.0);
    let sigma = inv(&post.t1_inv.to_owned()); // T1
    let sigma = inv(&sigma); // Σ = T1⁻¹ by two plain inverses
    let phis: Vec<f64> = (0..m).map(|j| ss * phi_s[(0, j)]).collect();
    let u_var: f64 = (0..m)
        .flat_map(|j| (0..m).map(move |k| (j, k)))
        .map(|(j, k)| phis[j] * sigma[(j, k)] * phis[k])
        .sum();
    let delta_var = pred.var_f[0] - rho - u_var;
    // ζ = (v [m], δ*, r_B [n], r*, ε_B [n]); e = ℓᵀζ.
    let dim = m + 1 + n + 1 + n;
    let mut cov = Mat::<f64>::zeros(dim, dim);
    for j in 0..m {
        for k in 0..m {
            cov[(j, k)] = sigma[(j, k)];
        }
    }
    cov[(m, m)] = delta_var;
    for i in 0..=n {
        for j in 0..=n {
            cov[(m + 1 + i, m + 1 + j)] = kj[(i, j)];
        }
    }
    for i in 0..n {
        cov[(m + 2 + n + i, m + 2 + n + i)] = noise;
    }
    let mut l = vec![0.0; dim];
    for j in 0..m {
        let pb: f64 = (0..n).map(|i| c[i] * ss * phi_b[(i, j)]).sum();
        l[j] = phis[j] - pb;
    }
    l[m] = 1.0;
    for i in 0..n {
        l[m + 1 + i] = -c[i];
        l[m + 2 + n + i] = -c[i];
    }
    l[m + 1 + n] = 1.0;
    let var = crate::linalg::dot(&l, &mat_vec(cov.as_ref(), &l));
    // Mean: μ* + cᵀ(y_B − μ_B).
    let mu_b = mat_vec(phi_b.as_ref(), &post.alpha);
    let y = model.memory().y();
    let res: f64 = (0..n).map(|i| c[i] * (y[i] - ss * mu_b[i])).sum();
    (
        pred.mean[0] + res,
        var,
        kj[(n, n)] - crate::linalg::dot(&kb, &c),
    )
}

/// A global model for the tests on d = 3 inputs: m = 7 inducing inputs in d' = 2, a point
/// (`point`) or real q(W) and a random q(u), drawn from `rng` in that order.
pub(super) fn global(point: bool, rng: &mut Rng) -> (Vocabulary, Projection, Posterior) {
    let (m, dz, d) = (7, 2, 3);
    let vocab = Vocabulary::default_design(m, dz, 3).expect("design");
    let w = Mat::from_fn(dz, d, |_, _| 0.5 * rng.normal());
    let proj = if point {
        Projection::point(w, 1.3, 0.4)
    } else {
        Projection::new(
            w,
            Mat::from_fn(dz, d, |_, _| -1.2 + 0.3 * rng.normal()),
            0.2,
            -0.9,
        )
    };
    let post = posterior(&vocab, rng);
    (vocab, proj, post)
}

// `..LocalConfig::default()`: LocalConfig gains fields (helper `pool`'s `fit`).
#[allow(clippy::needless_update)]
fn check(kind: ResidualKind, point: bool, seed: u64) {
    let mut rng = Rng::new(seed, 77);
    let (d, n) = (3, 12);
    let (vocab, proj, post) = global(point, &mut rng);
    let config = LocalConfig {
        capacity: n,
        policy: MemoryPolicy::Recent,
        kernel: kind,
        ..LocalConfig::default()
    };
    let mut model = LocalModel::new(config, &vocab, &proj, 1);
    let x = Mat::from_fn(n + 5, d, |_, _| rng.normal());
    let y: Vec<f64> = (0..n + 5).map(|_| rng.normal()).collect();
    model.offer(&vocab, x.as_ref(), &y);
    assert_eq!(model.len(), n);
    let xq = Mat::from_fn(6, d, |_, _| 1.2 * rng.normal());
    let got = answers(&model, &vocab, &proj, &post, xq.as_ref()).expect("answers");
    // The second call reads the memory's part from the cache: the same bits.
    let again = answers(&model, &vocab, &proj, &post, xq.as_ref()).expect("answers");
    assert_eq!(got, again);
    for (r, a) in got.iter().enumerate() {
        let xs: Vec<f64> = (0..d).map(|j| xq[(r, j)]).collect();
        let (mean, var, res_var) = dense(&model, &vocab, &proj, &post, &xs);
        let tol = 1e-10;
        assert!(
            (a.mean() - mean).abs() < tol,
            "{kind:?} point {point}: mean {} vs {mean}",
            a.mean()
        );
        assert!(
            (a.var_f() - var).abs() < tol,
            "{kind:?} point {point}: var {} vs {var}",
            a.var_f()
        );
        assert!((a.residual_var - res_var).abs() < tol, "residual var");
    }
}

#[test]
fn mean_and_variance_equal_the_dense_error_variance() {
    // Reference: docs/LOCAL.md §3 (the estimator and its error variance).
    for seed in 0..3 {
        for kind in [ResidualKind::Learned, ResidualKind::GlobalResidual] {
            check(kind, true, seed);
            check(kind, false, seed);
        }
    }
}

#[test]
fn a_point_projection_has_no_w_part() {
    // For a point q(W), var_f − ρ = φ*ᵀ Σ φ*: the δ* of the dense model has variance 0 (to
    // the clamp floor of σ_ij that `Projection::point` keeps: ~1e-7 relative).
    let mut rng = Rng::new(4, 1);
    let vocab = Vocabulary::default_design(6, 2, 3).expect("design");
    let proj = Projection::point(Mat::from_fn(2, 2, |_, _| 0.5 * rng.normal()), 1.1, 0.3);
    let post = posterior(&vocab, &mut rng);
    let xs = [0.3, -0.4];
    let xm = Mat::from_fn(1, 2, |_, j| xs[j]);
    let pred = predict(&vocab, &proj, &post, xm.as_ref()).expect("predict");
    let phi = psi1_matrix(&vocab, &proj, xm.as_ref()).expect("psi1");
    let kinv = vocab.k_inv();
    let ss = proj.sigma_s();
    let (mut q, mut tr) = (0.0, 0.0);
    for j in 0..6 {
        for k in 0..6 {
            q += phi[(0, j)] * post.t1_inv[(j, k)] * phi[(0, k)];
            tr += phi[(0, j)] * kinv[(j, k)] * phi[(0, k)];
        }
    }
    let rho = ss * ss * (1.0 - tr);
    let gap = pred.var_f[0] - rho - ss * ss * q;
    assert!(
        gap.abs() < 1e-6 * pred.var_f[0],
        "var_f {} rho {rho} u {} gap {gap:e}",
        pred.var_f[0],
        ss * ss * q
    );
}

/// The largest absolute difference between two answers' six numbers.
pub(super) fn worst_gap(a: &LocalAnswer, w: &LocalAnswer) -> f64 {
    [
        a.global_mean - w.global_mean,
        a.global_var - w.global_var,
        a.residual_mean - w.residual_mean,
        a.residual_var - w.residual_var,
        a.residual_prior - w.residual_prior,
        a.noise_var - w.noise_var,
    ]
    .iter()
    .fold(0.0f64, |s, v| s.max(v.abs()))
}

/// Offers a random stream to a model under `policy`, answering after a block with
/// probability `p_answer` and moving the kernel when a fit is due; after every block the
/// lazily kept answers equal those of a model factored afresh (1e-10).
#[allow(clippy::needless_update)]
fn lazy_equals_fresh(policy: MemoryPolicy, kind: ResidualKind, p_answer: f64, seed: u64) {
    // Reference: docs/LOCAL.md §8 (the lazy factor: same A, another order of operations).
    let mut rng = Rng::new(seed, 31);
    let (m, dz, d, cap) = (6, 2, 2, 30);
    let vocab = Vocabulary::default_design(m, dz, 3).expect("design");
    let proj = Projection::point(Mat::from_fn(dz, d, |_, _| 0.6 * rng.normal()), 1.1, 0.3);
    let post = posterior(&vocab, &mut rng);
    let config = LocalConfig {
        capacity: cap,
        policy,
        kernel: kind,
        ..LocalConfig::default()
    };
    let mut model = LocalModel::new(config, &vocab, &proj, seed);
    let xq = Mat::from_fn(4, d, |_, _| rng.normal());
    for step in 0..60 {
        let b = 1 + rng.below(12);
        let x = Mat::from_fn(b, d, |_, _| 1.5 * rng.normal());
        let y: Vec<f64> = (0..b)
            .map(|i| x[(i, 0)].sin() + 0.1 * rng.normal())
            .collect();
        if model.offer(&vocab, x.as_ref(), &y) {
            // A fit: move the kernel's parameters a little.
            let p: Vec<f64> = model
                .kernel()
                .params()
                .iter()
                .map(|v| v + 0.05 * rng.normal())
                .collect();
            model.set_kernel_params(&vocab, &p).expect("kernel");
        }
        assert!(model.len() <= cap);
        if rng.uniform() >= p_answer {
            continue;
        }
        let got = answers(&model, &vocab, &proj, &post, xq.as_ref()).expect("answers");
        let fresh = LocalModel::from_parts(
            config,
            &vocab,
            model.memory().clone(),
            model.kernel().clone(),
            model.fit_state(),
        )
        .expect("factor");
        let want = answers(&fresh, &vocab, &proj, &post, xq.as_ref()).expect("answers");
        for (a, w) in got.iter().zip(&want) {
            let worst = worst_gap(a, w);
            assert!(
                worst < 1e-10,
                "{policy:?} {kind:?} step {step}: off by {worst:e}"
            );
        }
    }
}

#[test]
fn answers_after_lazy_updates_equal_a_fresh_factor() {
    for policy in MemoryPolicy::ALL {
        for kind in [ResidualKind::Learned, ResidualKind::GlobalResidual] {
            for (p_answer, seed) in [(1.0, 1), (0.3, 2), (0.05, 3)] {
                lazy_equals_fresh(policy, kind, p_answer, seed);
            }
        }
    }
}

#[test]
fn an_off_memory_has_no_policy_kernel_or_fit_in_effect() {
    let off = LocalConfig {
        capacity: 0,
        policy: MemoryPolicy::Reservoir,
        kernel: ResidualKind::GlobalResidual,
        fit: super::LocalFit::Fleet,
    };
    assert_eq!(off.in_effect(), LocalConfig::default());
    assert_ne!(off, LocalConfig::default());
    let on = LocalConfig { capacity: 5, ..off };
    assert_eq!(on.in_effect(), on);
}
