//! The robust likelihood in the importance and exact modes (docs/ROBUST.md §2): each row's
//! weight is taken when its block arrives and kept with the caches (folded into the
//! importance sums, stored beside the exact mode's block), so weights 1 are the Gaussian
//! learner bit for bit, the weighted caches are the weighted sums, and a gross outlier moves
//! the mean far less than under the Gaussian likelihood, also after later refits.

use std::sync::Arc;

use faer::Mat;

use crate::learn::elbo::BlockPsi;
use crate::learn::{ImportanceCache, IsNormalization, Learner, Likelihood, UpdateMode};
use crate::model::psi::{accumulate_block, accumulate_block_weighted, PsiWorkspace, UnitStats};
use crate::rng::Rng;

use super::agent_tests::blocks;
use crate::{Agent, AgentConfig, View, Vocabulary};

const IMPORTANCE: UpdateMode = UpdateMode::Importance {
    samples: 32,
    normalization: IsNormalization::SelfNormalized,
};

fn agent(mode: UpdateMode, likelihood: Likelihood) -> Agent {
    let vocab = Arc::new(Vocabulary::default_design(16, 2, 5).expect("design"));
    let cfg = AgentConfig {
        mode,
        likelihood,
        seed: 3,
        ..AgentConfig::default()
    };
    Agent::new(0, vocab, 2, cfg).expect("agent")
}

#[test]
fn weights_of_one_are_the_gaussian_learner_in_the_importance_and_exact_modes() {
    // c = 1e300: every weight exactly 1, so the weighted caches, refits and gradient steps
    // are the Gaussian ones (√1 = 1 and × 1 are exact), block after block, learning on.
    let data = blocks(1, 6, 25);
    for mode in [IMPORTANCE, UpdateMode::Exact] {
        let mut g = agent(mode, Likelihood::Gaussian);
        let mut r = agent(mode, Likelihood::Robust { c: 1e300 });
        for (x, y) in &data {
            g.handle_block(x.as_ref(), y).expect("block");
            r.handle_block(x.as_ref(), y).expect("block");
        }
        if let Learner::Exact(blocks) = r.learner() {
            let w = blocks
                .iter()
                .flat_map(|b| b.2.as_ref().expect("kept weights"));
            assert!(w.copied().all(|v| v == 1.0));
        }
        assert_eq!(g.own_excess(), r.own_excess(), "{mode:?}");
        assert_eq!(g.projection(), r.projection(), "{mode:?}");
        assert_eq!(g.natural_params(View::Own), r.natural_params(View::Own));
        assert_ne!(g.projection(), &g.vocabulary().initial_projection(2));
    }
}

#[test]
fn weighted_caches_are_the_weighted_sums() {
    // Reference: docs/ROBUST.md §1: Ψ̄2 += Σ w ψ̄2, Ψ̄1ᵀy += Σ w y ψ̄1, yᵀy += Σ w y², and per
    // importance sample Ā_t += K̄ᵀ diag(w) K̄, b̄_t += K̄ᵀ(w∘y). Weights in {0, 1} are the
    // unweighted sums of the rows of weight 1; any weights agree with the frozen mode's
    // weighted statistics from the block's ψ; weights 1 are the unweighted sums bit for bit.
    let vocab = Vocabulary::default_design(9, 2, 4).expect("design");
    let mut proj = vocab.initial_projection(2);
    let mut theta = proj.to_flat();
    theta[0] += 0.3;
    proj.set_flat(&theta);
    let (x, y) = blocks(2, 1, 17).remove(0);
    let keep: Vec<usize> = (0..y.len()).filter(|r| r % 3 != 1).collect();
    let w01: Vec<f64> = (0..y.len())
        .map(|r| f64::from(u8::from(r % 3 != 1)))
        .collect();
    let xs = Mat::from_fn(keep.len(), 2, |i, j| x[(keep[i], j)]);
    let ys: Vec<f64> = keep.iter().map(|&r| y[r]).collect();
    let ws = &mut PsiWorkspace::default();
    let stats = |f: &mut dyn FnMut(&mut UnitStats)| {
        let mut s = UnitStats::zeros(9);
        f(&mut s);
        s
    };
    let close = |a: &UnitStats, b: &UnitStats| {
        let d2 = (&a.psi2 - &b.psi2).as_ref().norm_max() / b.psi2.as_ref().norm_max();
        let d1 = a.psi1_y.iter().zip(&b.psi1_y);
        let d1 = d1.fold(0.0f64, |m, (p, q)| m.max((p - q).abs()));
        assert!(d2 < 1e-13 && d1 < 1e-12 && (a.yty - b.yty).abs() < 1e-12);
    };
    // The exact mode's recomputation (accumulate_block_weighted).
    let sub = stats(&mut |s| accumulate_block(&vocab, &proj, xs.as_ref(), &ys, s, ws));
    let zero_one =
        stats(&mut |s| accumulate_block_weighted(&vocab, &proj, x.as_ref(), &y, &w01, s, ws));
    close(&zero_one, &sub);
    let mut rng = Rng::new(5, 1);
    let w: Vec<f64> = (0..y.len()).map(|_| 0.05 + 0.95 * rng.uniform()).collect();
    let exact = stats(&mut |s| accumulate_block_weighted(&vocab, &proj, x.as_ref(), &y, &w, s, ws));
    let bp = BlockPsi::compute(&vocab, &proj, x.as_ref());
    close(
        &exact,
        &stats(&mut |s| bp.accumulate_weighted_into(&y, &w, s)),
    );
    let ones = vec![1.0; y.len()];
    assert_eq!(
        stats(&mut |s| accumulate_block_weighted(&vocab, &proj, x.as_ref(), &y, &ones, s, ws)),
        stats(&mut |s| accumulate_block(&vocab, &proj, x.as_ref(), &y, s, ws))
    );
    // The importance sums.
    let cache = |rows: &Mat<f64>, t: &[f64], w: Option<&[f64]>| {
        let mut c = ImportanceCache::new(&vocab, 2, 4, 7, IsNormalization::SelfNormalized);
        c.absorb_weighted(&vocab, rows.as_ref(), t, w);
        c
    };
    let (a, b) = (cache(&x, &y, Some(&w01)), cache(&xs, &ys, None));
    for t in 0..4 {
        let d = (&a.a[t] - &b.a[t]).as_ref().norm_max() / b.a[t].as_ref().norm_max();
        assert!(d < 1e-13, "Ā_{t} off by {d:e}");
        let d = a.b[t].iter().zip(&b.b[t]).map(|(p, q)| (p - q).abs());
        assert!(d.fold(0.0, f64::max) < 1e-12, "b̄_{t}");
    }
    assert_eq!(cache(&x, &y, Some(&ones)), cache(&x, &y, None));
}

/// The own mean at `x0` of a learning agent after `clean` blocks, then `last`, then `after`.
fn mean_after(
    mode: UpdateMode,
    likelihood: Likelihood,
    stream: [&[(Mat<f64>, Vec<f64>)]; 3],
    x0: &Mat<f64>,
) -> f64 {
    let mut a = agent(mode, likelihood);
    for (x, y) in stream.iter().flat_map(|s| s.iter()) {
        a.handle_block(x.as_ref(), y).expect("block");
    }
    a.predict(x0.as_ref(), View::Own).expect("predict").mean[0]
}

#[test]
fn a_gross_outlier_moves_the_robust_mean_far_less_in_the_importance_and_exact_modes() {
    // Reference: docs/ROBUST.md §2, §3. Ten clean blocks, one whose row 0 is y + 20 (200σ),
    // then three clean blocks, learning on: the exact mode refits every kept block under
    // each new q(W) with its kept weights, the importance mode re-weights its samples. The
    // shift of the own mean at the outlier's input against the same stream without it.
    let clean = blocks(4, 10, 20);
    let (x, y) = blocks(5, 1, 20).remove(0);
    let after = blocks(6, 3, 20);
    let mut bad = vec![(x.clone(), y.clone())];
    bad[0].1[0] += 20.0;
    let good = vec![(x.clone(), y)];
    let x0 = x.subrows(0, 1).to_owned();
    let robust = Likelihood::Robust { c: 2.0 };
    for mode in [IMPORTANCE, UpdateMode::Exact] {
        let shift = |l: Likelihood| {
            let m1 = mean_after(mode, l, [&clean, &bad, &after], &x0);
            let m0 = mean_after(mode, l, [&clean, &good, &after], &x0);
            (m1 - m0).abs()
        };
        let (g, r) = (shift(Likelihood::Gaussian), shift(robust));
        eprintln!(
            "{}: outlier shift gaussian {g:.4}, robust {r:.4}, ratio {:.4}",
            mode.name(),
            r / g
        );
        assert!(
            g > 0.3,
            "{}: the Gaussian learner must feel it: {g}",
            mode.name()
        );
        assert!(
            r < 0.2 * g,
            "{}: robust shift {r} vs Gaussian {g}",
            mode.name()
        );
    }
}

#[test]
fn the_exact_mode_keeps_each_blocks_weights_from_its_arrival() {
    // The outlier's small weight is kept with its block while later blocks and refits move
    // q(W) and q(u): the same bits after three more blocks.
    let mut a = agent(UpdateMode::Exact, Likelihood::Robust { c: 2.0 });
    let mut data = blocks(7, 6, 15);
    data[5].1[2] += 20.0;
    for (x, y) in &data {
        a.handle_block(x.as_ref(), y).expect("block");
    }
    let kept = |a: &Agent| match a.learner() {
        Learner::Exact(b) => b[5].2.clone().expect("weights"),
        other => panic!("{other:?}"),
    };
    let w = kept(&a);
    assert!(w[2] < 0.2, "outlier weight {}", w[2]);
    assert!(
        w.iter().enumerate().all(|(i, &v)| i == 2 || v > 0.5),
        "{w:?}"
    );
    let theta = a.projection().clone();
    for (x, y) in blocks(8, 3, 15) {
        a.handle_block(x.as_ref(), &y).expect("block");
    }
    assert_ne!(a.projection(), &theta, "q(W) moved");
    assert_eq!(kept(&a), w);
}
