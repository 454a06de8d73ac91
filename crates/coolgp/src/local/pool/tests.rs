//! Tests of the pooled fit: shares, the held-out score against a dense exact GP, the
//! calibrated candidate's closed form, the selection and the cold candidate's schedule.

use super::*;

#[test]
fn shares_sum_to_the_total_and_differ_by_at_most_one() {
    for (total, agents) in [(512, 12), (512, 70), (512, 1000), (7, 3), (0, 4)] {
        let s = shares(total, agents);
        assert_eq!(s.len(), agents);
        assert_eq!(s.iter().sum::<usize>(), total);
        let (lo, hi) = (s.iter().min(), s.iter().max());
        assert!(hi.zip(lo).is_none_or(|(h, l)| h - l <= 1), "{s:?}");
    }
    assert_eq!(spaced(10, 4), vec![0, 2, 5, 7]);
}

#[test]
fn the_cold_candidate_is_due_at_powers_of_the_growth() {
    assert!(cold_due(0, 115, COLD_GROWTH), "the first fit");
    // Wind's fusions: 115, 235, 475, 955, 1915, 3835, 7088 rows: cold past 256, 1024, 4096.
    let due: Vec<bool> = [115, 235, 475, 955, 1915, 3835, 7088]
        .windows(2)
        .map(|w| cold_due(w[0], w[1], 4))
        .collect();
    assert_eq!(due, [false, true, false, true, false, true]);
    assert!(!cold_due(256, 256, 4) && cold_due(255, 256, 4));
    assert!(
        (0..5).all(|k| cold_due(100 + k, 101 + k, 1)),
        "growth 1: always"
    );
    assert!(!cold_due(u64::MAX - 1, u64::MAX, 4), "no overflow");
}

/// Two agents' samples of `y = sin(2 x₀) + 0.05 ε` on [−3, 3]² (input 1 unused), split
/// into fit and validation halves as the fleet splits them.
fn pooled_sine() -> (Vec<FitSample>, Vec<FitSample>) {
    let mut rng = crate::rng::Rng::new(7, 3);
    let agent = |rng: &mut crate::rng::Rng| {
        let x: Vec<f64> = (0..160).map(|_| -3.0 + 6.0 * rng.uniform()).collect();
        let r = x
            .chunks_exact(2)
            .map(|v| (2.0 * v[0]).sin() + 0.05 * rng.normal())
            .collect();
        halves(&FitSample::new(2, x, r).expect("sample"))
    };
    (0..2).map(|_| agent(&mut rng)).unzip()
}

fn learned(p: &[f64]) -> ResidualKernel {
    ResidualKernel::from_params(ResidualKind::Learned, p.to_vec(), 2, 0).expect("kernel")
}

/// A vocabulary for the calls that take one (a learned kernel's features do not use it).
fn vocab() -> Vocabulary {
    Vocabulary::default_design(4, 2, 0).expect("vocabulary")
}

/// [`held_out`] of the learned kernel with parameters `p` on the pooled `fit`, `val`.
fn score(p: &[f64], fit: &[FitSample], val: &[FitSample]) -> Option<HeldOut> {
    let ((x, r), (xv, rv)) = (pooled(fit, 2), pooled(val, 2));
    held_out(&learned(p), &vocab(), (&x, &r), (&xv, &rv))
}

#[test]
fn the_selection_keeps_the_candidate_the_validation_rows_prefer() {
    let (fit, val) = pooled_sine();
    assert_eq!((fit[0].len(), val[1].len()), (40, 40));
    let (opts, vocab) = (PoolOptions::default(), vocab());
    // Lengthscales e⁻⁸ cannot be fitted back in 60 steps: a kernel that sees no
    // correlation predicts 0 ± the whole variance; lengthscale 1 finds the sine.
    let (good, bad) = (
        learned(&[0.0, -1.0, 0.0, 0.0]),
        learned(&[0.0, -1.0, -8.0, -8.0]),
    );
    let pick = |warm: &ResidualKernel, initial: &ResidualKernel| {
        fit_pooled_selected(Some(warm), initial, true, &vocab, &fit, &val, &opts).expect("a fit")
    };
    let a = pick(&good, &bad);
    assert_eq!(a.chosen, Candidate::Warm, "{:?}", a.scores);
    let b = pick(&bad, &good);
    assert_eq!(b.chosen, Candidate::Cold, "{:?}", b.scores);
    let (w, c) = (b.scores[0].1, b.scores[1].1);
    assert!(c.log_density > w.log_density + 20.0, "{:?}", b.scores);
    assert!((0.5..1.5).contains(&c.msr), "{:?}", b.scores);
    // Deterministic, and a fleet without a previous fit has the cold candidate alone.
    assert_eq!(pick(&bad, &good), b);
    let first = fit_pooled_selected(None, &good, false, &vocab, &fit, &val, &opts).expect("a fit");
    assert_eq!(first.scores.len(), 1);
    // Without the cold candidate (not due), the warm chain's continuation alone.
    let warm_only =
        fit_pooled_selected(Some(&bad), &good, false, &vocab, &fit, &val, &opts).expect("fit");
    assert_eq!(warm_only.scores.len(), 1);
    let chain = fit_pooled(&bad, &fit, false, &opts).expect("fit");
    assert_eq!(
        (warm_only.chosen, warm_only.params),
        (Candidate::Warm, chain)
    );
    assert_eq!((first.chosen, &first.params), (Candidate::Cold, &b.params));
}

#[test]
fn the_calibrated_candidate_scales_the_variance_to_the_held_out_error() {
    let (fit, val) = pooled_sine();
    // A noise 100 times too small: the validation errors are ~100 σ.
    let p = [0.0, (5e-4f64).ln(), 0.0, 0.0];
    let h = score(&p, &fit, &val).expect("score");
    assert!(h.msr > 10.0, "{h:?}");
    let sel = fit_pooled_selected(
        Some(&learned(&p)),
        &learned(&p),
        true,
        &vocab(),
        &[],
        &val,
        &PoolOptions::default(),
    );
    assert!(sel.is_none(), "no fit rows, no fit");
    let mut q = p;
    q[..2].iter_mut().for_each(|v| *v += 0.5 * h.msr.ln());
    let c = score(&q, &fit, &val).expect("score");
    assert!((c.msr - 1.0).abs() < 1e-9, "{c:?}");
    assert!(c.log_density > h.log_density, "{h:?} → {c:?}");
}

/// The dense score: A, k*, k** from the kernel's covariances, a plain inverse of A.
fn dense_score(
    kernel: &ResidualKernel,
    vocab: &Vocabulary,
    fit: (&[f64], &[f64]),
    val: (&[f64], &[f64]),
) -> (f64, f64) {
    let d = kernel.input_scale().len();
    let feat = |x: &[f64]| {
        let mut f = Vec::new();
        kernel.features(vocab, x, &mut f);
        f
    };
    let fx: Vec<Vec<f64>> = fit.0.chunks_exact(d).map(feat).collect();
    let fv: Vec<Vec<f64>> = val.0.chunks_exact(d).map(feat).collect();
    let (n, noise) = (fx.len(), kernel.noise_var());
    let a = faer::Mat::from_fn(n, n, |i, j| {
        kernel.cov(&fx[i], &fx[j]) + if i == j { noise } else { 0.0 }
    });
    let ainv = crate::linalg::Cholesky::new(a.as_ref(), "dense")
        .expect("spd")
        .inverse();
    let (mut ld, mut z2) = (0.0, 0.0);
    for (v, &y) in fv.iter().zip(val.1) {
        let k: Vec<f64> = fx.iter().map(|f| kernel.cov(f, v)).collect();
        let c = crate::linalg::mat_vec(ainv.as_ref(), &k);
        let (mean, var) = (dot(&c, fit.1), kernel.cov(v, v) - dot(&c, &k) + noise);
        let e2 = (y - mean) * (y - mean) / var;
        ld -= 0.5 * ((2.0 * std::f64::consts::PI * var).ln() + e2);
        z2 += e2;
    }
    (ld, z2 / fv.len() as f64)
}

#[test]
fn the_held_out_score_is_the_dense_exact_gp_s_for_either_kernel() {
    let (fit, val) = pooled_sine();
    let ((x, r), (xv, rv)) = (pooled(&fit[..1], 2), pooled(&val[..1], 2));
    let (x, r, xv, rv) = (&x[..40], &r[..20], &xv[..30], &rv[..15]);
    let proj = crate::model::Projection::point(
        faer::Mat::from_fn(2, 2, |i, j| 0.4 + 0.3 * i as f64 - 0.2 * j as f64),
        0.8,
        0.3,
    );
    let vocab = Vocabulary::default_design(6, 2, 3).expect("vocabulary");
    for kernel in [
        learned(&[0.1, -1.2, 0.3, 0.9]),
        ResidualKernel::initial(ResidualKind::GlobalResidual, &proj),
    ] {
        let h = held_out(&kernel, &vocab, (x, r), (xv, rv)).expect("score");
        let (ld, msr) = dense_score(&kernel, &vocab, (x, r), (xv, rv));
        assert!(
            (h.log_density - ld).abs() < 1e-10 * ld.abs().max(1.0),
            "{h:?} {ld}"
        );
        assert!((h.msr - msr).abs() < 1e-10 * msr.max(1.0), "{h:?} {msr}");
    }
    assert!(held_out(&learned(&[0.0; 4]), &vocab, (&x[..39], r), (xv, rv)).is_none());
}

#[test]
fn the_calibrated_score_follows_in_closed_form() {
    // Reference: HeldOut::scaled (ld − ½ n ln c + ½ (1 − 1/c) Σ e², msr / c) against the
    // score of the kernel with σ_r², σ_rn² times c, computed afresh.
    // A small, well-conditioned problem (the re-score's own rounding stays below 1e-10):
    // 20 fit rows, 15 validation rows.
    let (fit, val) = pooled_sine();
    let ((x, r), (xv, rv)) = (pooled(&fit[..1], 2), pooled(&val[..1], 2));
    let (x, r, xv, rv) = (&x[..40], &r[..20], &xv[..30], &rv[..15]);
    let vocab = vocab();
    let small = |p: &[f64]| held_out(&learned(p), &vocab, (x, r), (xv, rv)).expect("score");
    for p in [[0.0, (0.01f64).ln(), 0.0, 0.0], [-0.3, -1.0, 0.4, 1.5]] {
        let h = small(&p);
        for c in [h.msr, 3.7, 0.25] {
            let mut q = p;
            q[..2].iter_mut().for_each(|v| *v += 0.5 * c.ln());
            let fresh = small(&q);
            let closed = h.scaled(c, rv.len());
            let tol = 1e-10 * fresh.log_density.abs().max(1.0);
            assert!(
                (closed.log_density - fresh.log_density).abs() < tol,
                "c {c}: {closed:?} vs {fresh:?}"
            );
            assert!((closed.msr - fresh.msr).abs() < 1e-10 * fresh.msr.max(1.0));
        }
    }
    // The selection's calibrated candidate carries the closed form's score: validation
    // residuals four times the fit rows' leave every fitted candidate overconfident.
    let p = [0.0, -1.0, 0.0, 0.0];
    let loud: Vec<FitSample> = val
        .iter()
        .map(|v| FitSample::new(2, v.x().to_vec(), v.r().iter().map(|r| 4.0 * r).collect()))
        .collect::<Result<_>>()
        .expect("samples");
    let sel = fit_pooled_selected(
        Some(&learned(&p)),
        &learned(&p),
        true,
        &vocab,
        &fit,
        &loud,
        &PoolOptions::default(),
    )
    .expect("a fit");
    assert_eq!(sel.chosen, Candidate::Calibrated, "{:?}", sel.scores);
    // Not due, but the warm continuation's held-out msr is off: the cold start is fitted.
    let off = fit_pooled_selected(
        Some(&learned(&p)),
        &learned(&p),
        false,
        &vocab,
        &fit,
        &loud,
        &PoolOptions::default(),
    )
    .expect("a fit");
    assert!(off.scores[0].1.msr > COLD_ABOVE, "{:?}", off.scores);
    assert_eq!(off.scores[1].0, Candidate::Cold, "{:?}", off.scores);
    let calibrated = sel.scores.iter().find(|s| s.0 == Candidate::Calibrated);
    let (_, c) = calibrated.expect("a calibrated candidate");
    assert_eq!(c.msr, 1.0, "{:?}", sel.scores);
}
