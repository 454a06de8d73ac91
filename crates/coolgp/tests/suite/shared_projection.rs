//! The shared projection modes (spec §13): after fusion every agent adopts the N_own-weighted
//! average of θ and of the Adam moments (`Shared`), or one of the spec's two proxies: the plain
//! average (`SharedPlainProxy`) or the product of the agents' q(W) (`SharedProductProxy`).

use std::sync::Arc;

use coolgp::faer::Mat;
use coolgp::protocol::memory;
use coolgp::rng::Rng;
use coolgp::{Agent, AgentConfig, FusionRule, ProjectionMode, Vocabulary};

/// Three agents on a path with 1, 2 and 3 blocks of 7 points, then enough tree rounds for
/// every agent to hold the fleet's projection sums. Returns the agents, their θ before
/// adoption and their point counts.
fn fleet(mode: ProjectionMode) -> (Vec<Agent>, Vec<Vec<f64>>, Vec<f64>) {
    let vocab = Arc::new(Vocabulary::default_design(8, 2, 3).expect("design"));
    let cfg = AgentConfig {
        projection: mode,
        fusion: FusionRule::Tree,
        ..AgentConfig::default()
    };
    let mut agents: Vec<Agent> = (0..3)
        .map(|i| Agent::new(i, vocab.clone(), 2, cfg.clone()).expect("agent"))
        .collect();
    agents[0].set_neighbors([1]).expect("neighbours");
    agents[1].set_neighbors([0, 2]).expect("neighbours");
    agents[2].set_neighbors([1]).expect("neighbours");
    let mut rng = Rng::new(9, 0);
    for (i, a) in agents.iter_mut().enumerate() {
        for _ in 0..=i {
            let x = Mat::from_fn(7, 2, |_, _| rng.normal());
            let y: Vec<f64> = (0..7)
                .map(|r| x[(r, 0)].sin() + 0.1 * rng.normal())
                .collect();
            a.handle_block(x.as_ref(), &y).expect("block");
        }
    }
    let n: Vec<f64> = agents.iter().map(|a| a.n_own() as f64).collect();
    let thetas: Vec<Vec<f64>> = agents.iter().map(|a| a.projection().to_flat()).collect();
    assert_ne!(
        thetas[0], thetas[2],
        "agents must have learned different θ first"
    );
    // diameter 2: initial messages + 1 update
    for _ in 0..2 {
        memory::round(&mut agents).expect("valid");
    }
    (agents, thetas, n)
}

fn assert_adopts(agents: &mut [Agent], want: &[f64]) {
    for a in agents.iter_mut() {
        assert!(a.adopt_fleet_projection());
        let got = a.projection().to_flat();
        for (g, w) in got.iter().zip(want) {
            // log σ is clamped to [log 1e-3, log 3]; the values here are inside.
            assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{g} vs {w}");
        }
    }
}

#[test]
fn adoption_gives_every_agent_the_point_weighted_average() {
    let (mut agents, thetas, n) = fleet(ProjectionMode::Shared);
    let total: f64 = n.iter().sum();
    let want: Vec<f64> = (0..thetas[0].len())
        .map(|p| (0..3).map(|i| n[i] * thetas[i][p]).sum::<f64>() / total)
        .collect();
    assert_adopts(&mut agents, &want);
}

#[test]
fn plain_proxy_gives_the_unweighted_average() {
    let (mut agents, thetas, _) = fleet(ProjectionMode::SharedPlainProxy);
    let want: Vec<f64> = (0..thetas[0].len())
        .map(|p| (0..3).map(|i| thetas[i][p]).sum::<f64>() / 3.0)
        .collect();
    assert_adopts(&mut agents, &want);
}

#[test]
fn product_proxy_multiplies_the_agents_gaussians() {
    let (mut agents, thetas, _) = fleet(ProjectionMode::SharedProductProxy);
    // θ = [vec(M), vec(log Σ), log σ_s, log σ_n] with d' = d = 2: 4 means, 4 log σ.
    let k = 4;
    let mut want = vec![0.0; thetas[0].len()];
    for e in 0..k {
        let prec: Vec<f64> = thetas.iter().map(|t| (-2.0 * t[k + e]).exp()).collect();
        let p: f64 = prec.iter().sum();
        want[e] = thetas.iter().zip(&prec).map(|(t, q)| t[e] * q).sum::<f64>() / p;
        want[k + e] = -0.5 * p.ln();
        // The product is more confident than every factor.
        assert!(thetas.iter().all(|t| want[k + e] < t[k + e]));
    }
    for e in 2 * k..2 * k + 2 {
        want[e] = thetas.iter().map(|t| t[e]).sum::<f64>() / 3.0;
    }
    assert_adopts(&mut agents, &want);
}

#[test]
fn proxies_need_tree_fusion_like_the_shared_mode() {
    let vocab = Arc::new(Vocabulary::default_design(4, 1, 3).expect("design"));
    for mode in [
        ProjectionMode::Shared,
        ProjectionMode::SharedPlainProxy,
        ProjectionMode::SharedProductProxy,
    ] {
        let cfg = AgentConfig {
            projection: mode,
            fusion: FusionRule::PushSum {
                agents: 2.0,
                weight: 1.0,
            },
            ..AgentConfig::default()
        };
        assert!(Agent::new(0, vocab.clone(), 1, cfg).is_err(), "{mode:?}");
    }
}

#[test]
fn product_proxy_refuses_a_fleet_sum_with_a_negative_precision() {
    // A neighbour's share passes validation (finite numbers) but carries negative precisions:
    // the product would be meaningless, so adoption refuses and q(W) is left as it was.
    let (mut agents, _, _) = fleet(ProjectionMode::SharedProductProxy);
    agents[0].handle_tick();
    let mut msg = agents[0].poll_transmit().expect("a message to agent 1");
    while agents[0].poll_transmit().is_some() {}
    let share = msg.projection.as_mut().expect("a projection share");
    let k = (share.theta.len() - 2) / 2;
    for p in &mut share.theta[k..2 * k] {
        *p = -1e9;
    }
    agents[1]
        .handle_message(msg)
        .expect("finite content is accepted");
    let before = agents[1].projection().clone();
    assert!(!agents[1].adopt_fleet_projection());
    assert_eq!(agents[1].projection(), &before);
}
