//! The robust likelihood under the fleet projection (spec §14, docs/ROBUST.md §2): each row's
//! weight, taken when its block arrives, stays with the row in the site window, so weights 1
//! are the Gaussian fleet, an outlier kept in the window keeps its small weight at every
//! re-evaluation, the weighted window gradient is the derivative of the weighted `L_D`, and
//! tree fusion stays exact.

use std::sync::Arc;

use faer::Mat;

use crate::fuse::Topology;
use crate::learn::elbo::BlockPsi;
use crate::learn::window::window_loglik_grad_weighted;
use crate::learn::{Likelihood, Site, SiteConfig};
use crate::model::psi::UnitStats;
use crate::model::{Excess, NaturalParams};
use crate::protocol::memory;
use crate::rng::Rng;
use crate::{Agent, AgentConfig, ProjectionMode, View, Vocabulary};

const D: usize = 2;

fn field(x: f64, z: f64) -> f64 {
    (2.0 * x).sin() + 0.5 * z
}

/// One block of `n` rows in `[−2, 2]²` with noise 0.1.
fn block(rng: &mut Rng, n: usize) -> (Mat<f64>, Vec<f64>) {
    let x = Mat::from_fn(n, D, |_, _| 4.0 * rng.uniform() - 2.0);
    let y = (0..n)
        .map(|r| field(x[(r, 0)], x[(r, 1)]) + 0.1 * rng.normal())
        .collect();
    (x, y)
}

fn vocab() -> Arc<Vocabulary> {
    Arc::new(Vocabulary::default_design(16, 2, 5).expect("design"))
}

/// The fleet projection with the test suite's site settings (a q0 pseudo-site that fades
/// within a few blocks), a 40-point window, and `likelihood`.
fn fleet_cfg(likelihood: Likelihood) -> AgentConfig {
    AgentConfig {
        projection: ProjectionMode::Fleet,
        site: SiteConfig {
            prior_points: 50.0,
            scale_prior_points: 50.0,
            window_points: 40,
            ..SiteConfig::default()
        },
        likelihood,
        ..AgentConfig::default()
    }
}

fn fleet(topo: &Topology, likelihood: Likelihood) -> Vec<Agent> {
    (0..topo.len())
        .map(|i| {
            let mut a = Agent::new(i as u64, vocab(), D, fleet_cfg(likelihood)).expect("agent");
            a.set_neighbors(topo.neighbors(i).iter().map(|&j| j as u64))
                .expect("neighbours");
            a
        })
        .collect()
}

/// `blocks` blocks of 10 rows to each agent, one round after each; the data of seed `seed`
/// (`bad` adds 20 to row 0 of agent 0's block `bad.0` when given).
fn stream(agents: &mut [Agent], seed: u64, blocks: usize, bad: Option<usize>) {
    let mut rng = Rng::new(seed, 3);
    for b in 0..blocks {
        for (i, a) in agents.iter_mut().enumerate() {
            let (x, mut y) = block(&mut rng, 10);
            if i == 0 && bad == Some(b) {
                y[0] += 20.0;
            }
            a.handle_block(x.as_ref(), &y).expect("block");
        }
        memory::round(agents).expect("valid");
    }
}

#[test]
fn weights_of_one_are_the_gaussian_fleet_projection() {
    // c = 1e300: every weight exactly 1, so the weighted statistics, window terms and site
    // steps are the Gaussian ones (× 1 is exact): the same own excesses, sites and q(W) as
    // the Gaussian fleet after 8 blocks per agent and fusion rounds in between.
    let topo = Topology::path(3);
    let mut g = fleet(&topo, Likelihood::Gaussian);
    let mut r = fleet(&topo, Likelihood::Robust { c: 1e300 });
    stream(&mut g, 1, 8, None);
    stream(&mut r, 1, 8, None);
    for (a, b) in g.iter().zip(&r) {
        assert!(b.fleet_site().recent().len() > 1, "the window was stacked");
        assert!(b
            .fleet_site()
            .recent()
            .weights()
            .all(|w| w.expect("kept weights").iter().all(|&v| v == 1.0)));
        assert_eq!(a.own_excess(), b.own_excess());
        assert_eq!(a.site(), b.site());
        assert_eq!(a.projection(), b.projection());
        assert_eq!(a.fused_site(), b.fused_site());
    }
    assert_ne!(g[0].projection(), &g[0].vocabulary().initial_projection(D));
}

/// Agent 0's fused mean at `x0` and the fleet's σ_n after a 2-agent fleet's stream of 14
/// blocks each, with an outlier in agent 0's block `bad`.
fn after_stream(likelihood: Likelihood, bad: Option<usize>, x0: &Mat<f64>) -> (f64, f64) {
    let mut agents = fleet(&Topology::path(2), likelihood);
    stream(&mut agents, 4, 14, bad);
    let a = &agents[0];
    let mean = a.predict(x0.as_ref(), View::Fused).expect("predict").mean[0];
    (mean, a.projection().sigma_n())
}

#[test]
fn a_gross_outlier_moves_the_robust_fleet_projection_far_less() {
    // Reference: docs/ROBUST.md §3 under the fleet projection. A 2-agent fleet, 14 blocks of
    // 10 rows each with a round after each; agent 0's block 10 has row 0 at y + 20 (200σ).
    // The outlier stays in agent 0's 40-point window for the next three blocks, whose site
    // steps re-evaluate it with its kept weight. Against the same stream without the
    // outlier: the shift of agent 0's fused mean at that row's input, and of the fleet's σ_n.
    let mut rng = Rng::new(4, 3);
    let mut x0 = Mat::zeros(1, D);
    // Row 0 of agent 0's block 10: the 21st block drawn (two agents per step).
    for _ in 0..20 {
        block(&mut rng, 10);
    }
    let (xb, _) = block(&mut rng, 10);
    x0.as_mut().copy_from(xb.as_ref().subrows(0, 1));
    let robust = Likelihood::Robust { c: 2.0 };
    let shift = |l: Likelihood| {
        let (m1, s1) = after_stream(l, Some(10), &x0);
        let (m0, s0) = after_stream(l, None, &x0);
        ((m1 - m0).abs(), (s1 - s0).abs())
    };
    let ((gm, gs), (rm, rs)) = (shift(Likelihood::Gaussian), shift(robust));
    eprintln!(
        "fleet outlier shift: mean gaussian {gm:.4}, robust {rm:.4} (ratio {:.4}); \
         σ_n gaussian {gs:.4}, robust {rs:.4}",
        rm / gm
    );
    assert!(gm > 0.05, "the Gaussian fleet must feel the outlier: {gm}");
    assert!(rm < 0.2 * gm, "robust mean shift {rm} vs Gaussian {gm}");
    assert!(rs < 0.2 * gs, "robust σ_n shift {rs} vs Gaussian {gs}");
}

#[test]
fn the_window_keeps_each_rows_weight_from_its_arrival() {
    // The weights a block's rows got on arrival stay with them in the window: the outlier's
    // weight is small (≈ c/|r|) and does not change while later blocks arrive and fusions
    // move q(u).
    let mut agents = fleet(&Topology::path(2), Likelihood::Robust { c: 2.0 });
    stream(&mut agents, 4, 11, Some(10));
    let kept = |a: &Agent| -> Vec<f64> {
        let w: Vec<Vec<f64>> = (a.fleet_site().recent().weights())
            .map(|w| w.expect("weights").to_vec())
            .collect();
        w.last().expect("a block").clone()
    };
    let w = kept(&agents[0]);
    assert!(w[0] < 0.2, "outlier weight {}", w[0]);
    assert!(w[1..].iter().all(|&v| v > 0.5), "{w:?}");
    // Two more blocks each (still in the 40-point window): the outlier block's weights are
    // the same bits.
    stream(&mut agents, 9, 2, None);
    let blocks: Vec<Vec<f64>> = (agents[0].fleet_site().recent().weights())
        .map(|w| w.expect("weights").to_vec())
        .collect();
    assert_eq!(blocks[blocks.len() - 3], w);
}

#[test]
fn the_weighted_window_gradient_matches_central_differences() {
    // Reference: spec §6 with each row's term of L_D tempered by a constant weight, on a site
    // window whose older rows' ψ are computed point by point (learn::window).
    let vocab = vocab();
    let mut rng = Rng::new(8, 2);
    let (x0, y0) = block(&mut rng, 30);
    let mut proj = vocab.initial_projection(D);
    let mut stats = UnitStats::zeros(vocab.m());
    BlockPsi::compute(&vocab, &proj, x0.as_ref()).accumulate_into(&y0, &mut stats);
    let e = Excess::from_unit_stats(&stats, proj.sigma_s(), proj.sigma_n());
    let post = NaturalParams::from_excess(&vocab, &e)
        .posterior(&vocab)
        .expect("posterior");
    let mut theta = proj.to_flat();
    for t in theta.iter_mut() {
        *t += 0.1 * rng.normal();
    }
    proj.set_flat(&theta);
    let (x, y) = block(&mut rng, 12);
    let w: Vec<f64> = (0..y.len()).map(|_| 0.05 + 0.95 * rng.uniform()).collect();
    let tail = 4;
    let eval = |p: &crate::model::Projection| {
        let mut bp = BlockPsi::compute(&vocab, p, x.as_ref().subrows(12 - tail, tail));
        window_loglik_grad_weighted(&vocab, p, &post, x.as_ref(), &y, &mut bp, tail, Some(&w))
    };
    let g = eval(&proj).grad.to_flat();
    let gmax = g.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    let h = 1e-5;
    let mut worst: f64 = 0.0;
    for i in 0..theta.len() {
        let at = |d: f64| {
            let mut t = theta.clone();
            t[i] += d;
            let mut p = proj.clone();
            p.set_flat(&t);
            assert_eq!(p.to_flat(), t, "set_flat clamped a perturbed θ");
            eval(&p).value
        };
        let fd = (at(h) - at(-h)) / (2.0 * h);
        worst = worst.max((fd - g[i]).abs() / g[i].abs().max(1e-3 * gmax));
    }
    assert!(worst < 1e-6, "worst relative error {worst:e}");
}

#[test]
fn robust_fleet_projection_agents_fuse_exactly_on_trees() {
    // Reference: spec §7, §14 (mirrors tests/suite/fleet_sites.rs
    // `site_sums_are_exact_over_random_trees`): each agent's weights depend on when messages
    // arrived, but its own excess and site are fixed once taken, so after `diameter` rounds
    // with no new data every agent holds Σ_i s_i (plus the faded pseudo-site) and Σ_i E_i.
    for seed in 0..4 {
        let n = 4 + 3 * seed as usize;
        let topo = Topology::random_tree(n, seed);
        let mut agents = fleet(&topo, Likelihood::Robust { c: 3.0 });
        let mut rng = Rng::new(seed, 5);
        for step in 0..3 {
            for (i, a) in agents.iter_mut().enumerate() {
                for _ in 0..(1 + (i + step) % 3) {
                    let (x, mut y) = block(&mut rng, 10);
                    if i % 2 == 0 {
                        y[3] -= 15.0;
                    }
                    a.handle_block(x.as_ref(), &y).expect("block");
                }
            }
            memory::round(&mut agents).expect("valid");
        }
        for _ in 0..topo.diameter().unwrap_or(1) {
            memory::round(&mut agents).expect("valid");
        }
        let mut total = Site::zeros(agents[0].site().len());
        let mut excess = Excess::zeros(agents[0].vocabulary().m());
        for a in &agents {
            total.add_in_place(a.site());
            excess.add_in_place(a.own_excess());
        }
        let cfg = fleet_cfg(Likelihood::Gaussian).site;
        let pseudo = Site::pseudo(&agents[0].vocabulary().initial_projection(D), &cfg);
        let want = total.with_pseudo(&pseudo, &cfg);
        let theta0 = agents[0].projection().to_flat();
        for a in &agents {
            let e = a.fused_site().rel_dist(&want);
            assert!(e <= 1e-12, "seed {seed}: sites off by {e:e}");
            let e = a.fused_excess().0.rel_dist(&excess);
            assert!(e <= 1e-12, "seed {seed}: q(u) sums off by {e:e}");
            let t = a.projection().to_flat();
            let d = t
                .iter()
                .zip(&theta0)
                .fold(0.0f64, |m, (p, q)| m.max((p - q).abs() / q.abs().max(1.0)));
            assert!(d <= 1e-12, "seed {seed}: q(W) off by {d:e}");
        }
        // The outliers were down-weighted where they arrived.
        let low = (agents[0].fleet_site().recent().weights())
            .flat_map(|w| w.expect("weights").to_vec())
            .fold(1.0f64, f64::min);
        assert!(low < 0.5, "seed {seed}: smallest kept weight {low}");
    }
}

#[test]
fn a_restored_robust_fleet_agent_keeps_its_window_weights_or_takes_them_again() {
    // A snapshot keeps the window's rows and their weights (docs/ROBUST.md §2): the restored
    // window is the original's bit for bit. Without them (a checkpoint written before they
    // were stored) the restore weighs the rows against the restored predictive: the q(u),
    // the site and the rows are the original's bit for bit and every row has a weight in
    // (0, 1]; the outlier's is small again. Weights that do not fit are refused.
    let mut agents = fleet(&Topology::path(2), Likelihood::Robust { c: 2.0 });
    stream(&mut agents, 4, 11, Some(10));
    let a = &agents[0];
    let snap = a.snapshot();
    let stored = snap.recent_weights.clone().expect("kept weights");
    assert_eq!(stored.len(), a.fleet_site().recent().len());
    let back = Agent::restore(a.vocabulary().clone(), snap.clone()).expect("restore");
    assert_eq!(back.fleet_site().recent(), a.fleet_site().recent());
    let old = crate::protocol::AgentSnapshot {
        recent_weights: None,
        ..snap.clone()
    };
    let back = Agent::restore(a.vocabulary().clone(), old).expect("restore");
    assert_eq!(back.own_excess(), a.own_excess());
    assert_eq!(back.site(), a.site());
    assert_eq!(
        back.fleet_site().recent().stacked(),
        a.fleet_site().recent().stacked()
    );
    let (w, orig) = (
        back.fleet_site()
            .recent()
            .stacked_weights()
            .expect("weights"),
        a.fleet_site().recent().stacked_weights().expect("weights"),
    );
    assert_eq!(w.len(), orig.len());
    assert!(w.iter().all(|&v| v > 0.0 && v <= 1.0));
    let outlier = w.len() - 10;
    assert!(w[outlier] < 0.2, "outlier weight {}", w[outlier]);
    for bad in [
        stored[1..].to_vec(),
        std::iter::once(Some(vec![0.5; 3]))
            .chain(stored[1..].iter().cloned())
            .collect(),
        std::iter::once(Some(vec![
            f64::NAN;
            stored[0].as_ref().map_or(10, Vec::len)
        ]))
        .chain(stored[1..].iter().cloned())
        .collect(),
    ] {
        let s = crate::protocol::AgentSnapshot {
            recent_weights: Some(bad),
            ..snap.clone()
        };
        assert!(Agent::restore(a.vocabulary().clone(), s).is_err());
    }
    // A Gaussian fleet agent's window carries no weights before and after, and refuses some.
    let mut g = fleet(&Topology::path(2), Likelihood::Gaussian);
    stream(&mut g, 4, 3, None);
    let snap = g[0].snapshot();
    assert_eq!(snap.recent_weights, None);
    let back = Agent::restore(g[0].vocabulary().clone(), snap.clone()).expect("restore");
    assert_eq!(back.fleet_site().recent(), g[0].fleet_site().recent());
    assert_eq!(back.fleet_site().recent().stacked_weights(), None);
    let s = crate::protocol::AgentSnapshot {
        recent_weights: Some(vec![None; snap.recent.len()]),
        ..snap
    };
    assert!(Agent::restore(g[0].vocabulary().clone(), s).is_err());
}
