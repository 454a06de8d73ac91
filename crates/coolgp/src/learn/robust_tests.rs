//! The robust likelihood through the agent: weights 1 are the Gaussian update, a gross
//! outlier moves the robust posterior far less, and the weighted gradient is the derivative
//! of the weighted `L_D` (docs/ROBUST.md).

use std::sync::Arc;

use faer::Mat;

use crate::learn::elbo::{block_loglik_grad_weighted, block_loglik_grad_with, BlockPsi};
use crate::learn::Likelihood;
use crate::model::psi::UnitStats;
use crate::rng::Rng;
use crate::{Agent, AgentConfig, View, Vocabulary};

fn field(x: f64, z: f64) -> f64 {
    (2.0 * x).sin() + 0.5 * z
}

/// `blocks` blocks of `n` rows in `[−2, 2]²` with noise 0.1.
pub(super) fn blocks(seed: u64, blocks: usize, n: usize) -> Vec<(Mat<f64>, Vec<f64>)> {
    let mut rng = Rng::new(seed, 3);
    (0..blocks)
        .map(|_| {
            let x = Mat::from_fn(n, 2, |_, _| 4.0 * rng.uniform() - 2.0);
            let y = (0..n)
                .map(|r| field(x[(r, 0)], x[(r, 1)]) + 0.1 * rng.normal())
                .collect();
            (x, y)
        })
        .collect()
}

fn agent(likelihood: Likelihood, learn: bool) -> Agent {
    let vocab = Arc::new(Vocabulary::default_design(16, 2, 5).expect("design"));
    let cfg = AgentConfig {
        likelihood,
        learn,
        ..AgentConfig::default()
    };
    Agent::new(0, vocab, 2, cfg).expect("agent")
}

#[test]
fn weights_of_one_are_the_gaussian_update() {
    // A threshold so large that every weight is exactly 1: the same q(u) and θ as the
    // Gaussian likelihood, block after block, learning on (the weighted ELBO and gradient).
    let data = blocks(1, 6, 25);
    let (mut g, mut r) = (
        agent(Likelihood::Gaussian, true),
        agent(Likelihood::Robust { c: 1e300 }, true),
    );
    for (x, y) in &data {
        g.handle_block(x.as_ref(), y).expect("block");
        r.handle_block(x.as_ref(), y).expect("block");
    }
    let e = r.own_excess().rel_dist(g.own_excess());
    assert!(e <= 1e-12, "excess off by {e:e}");
    for (a, b) in g
        .projection()
        .to_flat()
        .iter()
        .zip(r.projection().to_flat())
    {
        assert!((a - b).abs() <= 1e-12 * a.abs().max(1.0), "θ {a} vs {b}");
    }
    assert_ne!(g.projection(), &g.vocabulary().initial_projection(2));
}

#[test]
fn weighted_statistics_and_data_term_with_unit_weights_are_bit_identical() {
    let vocab = Vocabulary::default_design(9, 2, 4).expect("design");
    let proj = vocab.initial_projection(2);
    let (x, y) = blocks(2, 1, 17).remove(0);
    let bp = BlockPsi::compute(&vocab, &proj, x.as_ref());
    let ones = vec![1.0; y.len()];
    let (mut a, mut b) = (UnitStats::zeros(9), UnitStats::zeros(9));
    bp.accumulate_into(&y, &mut a);
    bp.accumulate_weighted_into(&y, &ones, &mut b);
    assert_eq!(a, b);
    let mut ag = agent(Likelihood::Gaussian, false);
    let (x0, y0) = blocks(3, 1, 30).remove(0);
    ag.handle_block(x0.as_ref(), &y0).expect("block");
    let post = ag.posterior(View::Own).expect("posterior");
    let g = block_loglik_grad_with(&vocab, &proj, &post, x.as_ref(), &y, &bp);
    let w = block_loglik_grad_weighted(&vocab, &proj, &post, x.as_ref(), &y, &bp, &ones);
    assert_eq!(g.value.to_bits(), w.value.to_bits());
    assert_eq!(g.grad.to_flat(), w.grad.to_flat());
    assert_eq!(g.hyper, w.hyper);
}

/// The posterior mean at `x0` after `clean` blocks and then `last`.
fn mean_after(
    likelihood: Likelihood,
    clean: &[(Mat<f64>, Vec<f64>)],
    last: (&Mat<f64>, &[f64]),
    x0: &Mat<f64>,
) -> f64 {
    let mut a = agent(likelihood, false);
    for (x, y) in clean {
        a.handle_block(x.as_ref(), y).expect("block");
    }
    a.handle_block(last.0.as_ref(), last.1).expect("block");
    a.predict(x0.as_ref(), View::Own).expect("predict").mean[0]
}

#[test]
fn a_gross_outlier_moves_the_robust_mean_far_less() {
    // Reference: docs/ROBUST.md §3. Ten clean blocks, then one whose row 0 is y + 20 (200σ).
    // The shift of the posterior mean at that input against the same block without the
    // outlier: measured 0.084 (robust, c = 2) / 0.767 (Gaussian) = 0.110.
    let clean = blocks(4, 10, 20);
    let (x, y) = blocks(5, 1, 20).remove(0);
    let mut bad = y.clone();
    bad[0] += 20.0;
    let x0 = x.subrows(0, 1).to_owned();
    let robust = Likelihood::Robust { c: 2.0 };
    let shift = |l: Likelihood| {
        (mean_after(l, &clean, (&x, &bad), &x0) - mean_after(l, &clean, (&x, &y), &x0)).abs()
    };
    let (g, r) = (shift(Likelihood::Gaussian), shift(robust));
    eprintln!(
        "outlier shift: gaussian {g:.4}, robust {r:.4}, ratio {:.4}",
        r / g
    );
    assert!(g > 0.3, "the Gaussian update must feel the outlier: {g}");
    assert!(r < 0.2 * g, "robust shift {r} vs Gaussian {g}");
}

#[test]
fn weighted_gradient_matches_central_differences() {
    // Reference: spec §6 with each row's term of L_D tempered by a constant weight.
    let mut rng = Rng::new(8, 1);
    let mut ag = agent(Likelihood::Gaussian, false);
    let vocab = ag.vocabulary().clone();
    let (x0, y0) = blocks(6, 1, 30).remove(0);
    ag.handle_block(x0.as_ref(), &y0).expect("block");
    let mut proj = vocab.initial_projection(2);
    let mut theta = proj.to_flat();
    let nm = 4;
    for (i, t) in theta.iter_mut().enumerate() {
        // M perturbed; log Σ kept inside its clamp; the scales moved.
        *t += if i < nm {
            0.3 * rng.normal()
        } else {
            0.1 * rng.normal()
        };
    }
    proj.set_flat(&theta);
    let post = crate::model::NaturalParams::from_excess(&vocab, ag.own_excess())
        .posterior(&vocab)
        .expect("posterior");
    let (x, y) = blocks(9, 1, 11).remove(0);
    let w: Vec<f64> = (0..y.len()).map(|_| 0.05 + 0.95 * rng.uniform()).collect();
    let f_at = |th: &[f64]| {
        let mut p = proj.clone();
        p.set_flat(th);
        assert_eq!(p.to_flat(), th, "set_flat clamped a perturbed θ");
        let bp = BlockPsi::compute(&vocab, &p, x.as_ref());
        block_loglik_grad_weighted(&vocab, &p, &post, x.as_ref(), &y, &bp, &w).value
    };
    let bp = BlockPsi::compute(&vocab, &proj, x.as_ref());
    let g = block_loglik_grad_weighted(&vocab, &proj, &post, x.as_ref(), &y, &bp, &w)
        .grad
        .to_flat();
    let gmax = g.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    let h = 1e-5;
    let mut worst: f64 = 0.0;
    for i in 0..theta.len() {
        let (mut tp, mut tm) = (theta.clone(), theta.clone());
        tp[i] += h;
        tm[i] -= h;
        let fd = (f_at(&tp) - f_at(&tm)) / (2.0 * h);
        worst = worst.max((fd - g[i]).abs() / g[i].abs().max(1e-3 * gmax));
    }
    assert!(worst < 1e-6, "worst relative error {worst:e}");
    // The weights matter: the unweighted gradient differs by far more than the tolerance.
    let u = block_loglik_grad_with(&vocab, &proj, &post, x.as_ref(), &y, &bp)
        .grad
        .to_flat();
    let diff = u
        .iter()
        .zip(&g)
        .fold(0.0f64, |a, (p, q)| a.max((p - q).abs()));
    assert!(diff > 1e-3 * gmax, "{diff}");
}

#[test]
fn the_agent_takes_robust_in_every_mode_and_refuses_a_bad_threshold() {
    // docs/ROBUST.md §2: every update mode keeps each row's weight from its arrival.
    let vocab = Arc::new(Vocabulary::default_design(6, 2, 7).expect("design"));
    let robust = Likelihood::Robust { c: 2.0 };
    let importance = crate::UpdateMode::parse(Some("importance"), None, None).expect("mode");
    for (mode, projection) in [
        (crate::UpdateMode::Exact, crate::ProjectionMode::PerAgent),
        (crate::UpdateMode::Exact, crate::ProjectionMode::Fleet),
        (importance, crate::ProjectionMode::PerAgent),
    ] {
        let cfg = AgentConfig {
            likelihood: robust,
            mode,
            projection,
            ..AgentConfig::default()
        };
        Agent::new(0, vocab.clone(), 2, cfg).expect("robust in this mode");
    }
    let cfg = AgentConfig {
        likelihood: Likelihood::Robust { c: f64::NAN },
        ..AgentConfig::default()
    };
    assert!(Agent::new(0, vocab.clone(), 2, cfg).is_err());
}

/// An agent with a local memory of `capacity` rows (issue 19) and `likelihood`, not learning.
fn agent_with_memory(likelihood: Likelihood, capacity: usize) -> Agent {
    let vocab = Arc::new(Vocabulary::default_design(16, 2, 5).expect("design"));
    let cfg = AgentConfig {
        likelihood,
        learn: false,
        local: crate::local::LocalConfig {
            capacity,
            ..crate::local::LocalConfig::default()
        },
        ..AgentConfig::default()
    };
    Agent::new(0, vocab, 2, cfg).expect("agent")
}

#[test]
fn a_gross_outlier_stays_out_of_the_robust_memory_and_spares_the_local_answer() {
    // Ten clean blocks, then a block whose first row reads 20 too high (200 σ of the noise).
    // The Gaussian agent's memory keeps it and its residual GP bends its answer there; the
    // robust agent screens the block against its own answer (docs/ROBUST.md §2a): the row
    // stays out, the block's clean rows go in.
    let data = blocks(5, 10, 25);
    let (mut g, mut r) = (
        agent_with_memory(Likelihood::Gaussian, 400),
        agent_with_memory(Likelihood::Robust { c: 3.0 }, 400),
    );
    for (x, y) in &data {
        g.handle_block(x.as_ref(), y).expect("block");
        r.handle_block(x.as_ref(), y).expect("block");
    }
    let (x, mut y) = blocks(6, 1, 25).remove(0);
    let truth = field(x[(0, 0)], x[(0, 1)]);
    y[0] += 20.0;
    g.handle_block(x.as_ref(), &y).expect("block");
    r.handle_block(x.as_ref(), &y).expect("block");
    let stored = |a: &Agent| a.local().memory().y().iter().any(|&v| v == y[0]);
    assert!(stored(&g), "the Gaussian memory keeps every row");
    assert!(!stored(&r), "the outlier entered the robust memory");
    let (ng, nr) = (g.local_points(), r.local_points());
    assert_eq!(ng, 275);
    assert!(
        nr >= 270 && nr < ng,
        "the robust memory holds {nr} of {ng} rows: clean rows were dropped"
    );
    let at = x.as_ref().subrows(0, 1);
    let err = |a: &Agent| {
        let p = a.predict_local(at, View::Fused).expect("answer");
        (p.mean[0] - truth).abs()
    };
    let (eg, er) = (err(&g), err(&r));
    assert!(
        er < 0.1 * eg && er < 0.3,
        "local answer at the outlier's input off by {er} (robust) against {eg} (Gaussian)"
    );
}
