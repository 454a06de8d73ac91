//! `Agent::snapshot` → `Agent::restore` gives an agent that then behaves bit-identically
//! (messages, predictions, state), in the frozen and importance modes, with tree and push-sum
//! fusion. This is what makes the node's checkpoints exact.

use std::sync::Arc;

use coolgp::faer::Mat;
use coolgp::learn::IsNormalization;
use coolgp::protocol::memory;
use coolgp::{Agent, AgentConfig, FusionRule, UpdateMode, View, Vocabulary};

fn block(seed: usize, n: usize, d: usize) -> (Mat<f64>, Vec<f64>) {
    let x = Mat::from_fn(n, d, |i, j| {
        ((seed * 17 + i * 5 + j * 11) as f64 * 0.29).cos() * 1.7
    });
    let y = (0..n)
        .map(|i| x[(i, 0)].sin() - 0.4 * x[(i, d - 1)])
        .collect();
    (x, y)
}

/// A path of three agents after some blocks and rounds; returns them all.
fn fleet(cfg: &AgentConfig, vocab: &Arc<Vocabulary>, rounds: usize) -> Vec<Agent> {
    let d = 3;
    let mut agents: Vec<Agent> = (0..3)
        .map(|i| {
            Agent::new(
                i,
                vocab.clone(),
                d,
                AgentConfig {
                    seed: 10 + i,
                    ..cfg.clone()
                },
            )
            .expect("agent")
        })
        .collect();
    agents[0].set_neighbors([1]).expect("neighbours");
    agents[1].set_neighbors([0, 2]).expect("neighbours");
    agents[2].set_neighbors([1]).expect("neighbours");
    for r in 0..rounds {
        step(&mut agents, r);
    }
    agents
}

fn step(agents: &mut [Agent], r: usize) {
    for (i, a) in agents.iter_mut().enumerate() {
        let (x, y) = block(r * 3 + i, 6, 3);
        a.handle_block(x.as_ref(), &y).expect("block");
        a.handle_tick();
    }
    memory::deliver_all(agents).expect("valid message");
    for a in agents.iter_mut() {
        while a.poll_event().is_some() {}
    }
}

fn check(cfg: AgentConfig) {
    let vocab = Arc::new(Vocabulary::default_design(9, 2, 1).expect("vocab"));
    let mut original = fleet(&cfg, &vocab, 3);
    let mut restored: Vec<Agent> = original
        .iter()
        .map(|a| Agent::restore(vocab.clone(), a.snapshot()).expect("restore"))
        .collect();
    for a in &restored {
        assert_eq!(a.snapshot(), original[a.id() as usize].snapshot());
        assert_eq!(a.own_excess(), original[a.id() as usize].own_excess());
    }
    // Both fleets continue identically, bit for bit.
    for r in 3..6 {
        step(&mut original, r);
        step(&mut restored, r);
        for (a, b) in original.iter().zip(&restored) {
            assert_eq!(a.snapshot(), b.snapshot(), "round {r}, agent {}", a.id());
            assert_eq!(a.fused_excess(), b.fused_excess());
        }
    }
    let (x, _) = block(99, 5, 3);
    for (a, b) in original.iter().zip(&restored) {
        for view in [View::Own, View::Fused] {
            assert_eq!(
                a.predict(x.as_ref(), view).expect("predict"),
                b.predict(x.as_ref(), view).expect("predict")
            );
        }
    }
}

#[test]
fn frozen_mode_restores_bit_identically() {
    check(AgentConfig::default());
}

#[test]
fn importance_mode_restores_bit_identically() {
    check(AgentConfig {
        mode: UpdateMode::Importance {
            samples: 5,
            normalization: IsNormalization::Unnormalized,
        },
        ..AgentConfig::default()
    });
}

#[test]
fn push_sum_restores_bit_identically() {
    check(AgentConfig {
        fusion: FusionRule::PushSum {
            agents: 3.0,
            weight: 1.0,
        },
        ..AgentConfig::default()
    });
}

#[test]
fn restore_refuses_a_snapshot_of_another_shape() {
    let vocab = Arc::new(Vocabulary::default_design(9, 2, 1).expect("vocab"));
    let other = Arc::new(Vocabulary::default_design(7, 2, 1).expect("vocab"));
    let agents = fleet(&AgentConfig::default(), &vocab, 2);
    assert!(Agent::restore(other, agents[1].snapshot()).is_err());
    let mut s = agents[1].snapshot();
    s.mu[(0, 0)] = f64::NAN;
    assert!(Agent::restore(vocab, s).is_err());
}
