//! The shared projection mode (spec §13): after fusion every agent adopts the N_own-weighted
//! average of θ and of the Adam moments.

use std::sync::Arc;

use coolgp::faer::Mat;
use coolgp::rng::Rng;
use coolgp::{Agent, AgentConfig, FusionRule, ProjectionMode, Vocabulary};

#[test]
fn adoption_gives_every_agent_the_point_weighted_average() {
    let vocab = Arc::new(Vocabulary::default_design(8, 2, 3).expect("design"));
    let cfg = AgentConfig {
        projection: ProjectionMode::Shared,
        fusion: FusionRule::Tree,
        ..AgentConfig::default()
    };
    let mut agents: Vec<Agent> = (0..3)
        .map(|i| Agent::new(i, vocab.clone(), 2, cfg.clone()).expect("agent"))
        .collect();
    agents[0].set_neighbors([1]);
    agents[1].set_neighbors([0, 2]);
    agents[2].set_neighbors([1]);
    let mut rng = Rng::new(9, 0);
    // Unequal amounts of data: 1, 2 and 3 blocks of 7 points.
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
    let total: f64 = n.iter().sum();
    let want: Vec<f64> = (0..thetas[0].len())
        .map(|p| (0..3).map(|i| n[i] * thetas[i][p]).sum::<f64>() / total)
        .collect();
    // diameter 2: initial messages + 1 update
    for _ in 0..2 {
        let msgs: Vec<_> = agents
            .iter_mut()
            .flat_map(|a| {
                a.handle_tick();
                std::iter::from_fn(|| a.poll_transmit()).collect::<Vec<_>>()
            })
            .collect();
        for m in msgs {
            let to = m.header.receiver as usize;
            agents[to].handle_message(m).expect("valid");
        }
    }
    for a in &mut agents {
        assert!(a.adopt_fleet_projection());
        let got = a.projection().to_flat();
        for (g, w) in got.iter().zip(&want) {
            // log σ is clamped to [log 1e-3, log 3]; the averages here are inside.
            assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{g} vs {w}");
        }
    }
}
