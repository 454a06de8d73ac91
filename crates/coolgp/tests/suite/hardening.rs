//! Hardening (issue 10): extreme inputs, restored caches of the wrong shape, push-sum
//! neighbour changes, and the optimizer step that cannot run. Each is an error or an event,
//! never a panic or a silent change.
//! Reference: spec §9 (validate everything that comes from users, peers or disk), §7
//! (push-sum running sums), §6 (one optimizer step per block).

use crate::common;
use std::sync::Arc;

use common::block;
use coolgp::fuse::sum_excess;
use coolgp::learn::Learner;
use coolgp::model::input_range::MAX_ABS_INPUT;
use coolgp::rng::Rng;
use coolgp::{Agent, AgentConfig, Error, Event, FusionRule, Topology, UpdateMode, Vocabulary};

fn modes() -> [UpdateMode; 3] {
    [
        UpdateMode::Frozen,
        UpdateMode::parse(Some("importance"), Some(5), None).expect("mode"),
        UpdateMode::Exact,
    ]
}

#[test]
fn inputs_whose_psi_would_overflow_are_rejected_before_the_caches() {
    // |x| = 2e154 is finite, but x² overflows: ψ̄1 would be NaN and the frozen cache poisoned
    // for good. The block must be refused and the agent left bit-identical, so that the
    // next valid block gives exactly what an agent that never saw it gives.
    let vocab = Arc::new(Vocabulary::default_design(6, 2, 3).expect("design"));
    for mode in modes() {
        let cfg = AgentConfig {
            mode,
            ..AgentConfig::default()
        };
        let mut rng = Rng::new(8, 1);
        let (x1, y1) = block(&mut rng, 5, 2);
        let (mut bad, yb) = block(&mut rng, 4, 2);
        let (x2, y2) = block(&mut rng, 5, 2);
        bad[(3, 1)] = 2e154;
        assert!(bad[(3, 1)].is_finite() && (bad[(3, 1)] * bad[(3, 1)]).is_infinite());

        let mut a = Agent::new(0, vocab.clone(), 2, cfg.clone()).expect("agent");
        let mut b = Agent::new(0, vocab.clone(), 2, cfg).expect("agent");
        a.handle_block(x1.as_ref(), &y1).expect("block");
        b.handle_block(x1.as_ref(), &y1).expect("block");
        let before = a.snapshot();
        let err = a
            .handle_block(bad.as_ref(), &yb)
            .expect_err("extreme block");
        assert_eq!(
            err,
            Error::OutOfRange {
                what: "inputs",
                index: 7,
                limit: MAX_ABS_INPUT
            },
            "{mode:?}"
        );
        assert_eq!(
            a.snapshot(),
            before,
            "{mode:?}: the rejected block changed the agent"
        );
        // Predicting at such inputs is refused too (it would return NaN).
        assert!(matches!(
            a.predict(bad.as_ref(), coolgp::View::Own),
            Err(Error::OutOfRange { .. })
        ));
        a.handle_block(x2.as_ref(), &y2).expect("block");
        b.handle_block(x2.as_ref(), &y2).expect("block");
        assert_eq!(a.snapshot(), b.snapshot(), "{mode:?}");
        assert!(a.own_excess().d2.iter().all(|v| v.is_finite()));
    }
}

#[test]
fn restore_checks_the_learner_caches() {
    // A checkpoint is data from disk: caches of the wrong shape, or of another mode, are
    // errors on restore, not an out-of-bounds index on the next block.
    let vocab = Arc::new(Vocabulary::default_design(6, 2, 3).expect("design"));
    let mut rng = Rng::new(9, 1);
    let (x, y) = block(&mut rng, 5, 3);
    for mode in modes() {
        let cfg = AgentConfig {
            mode,
            ..AgentConfig::default()
        };
        let mut a = Agent::new(4, vocab.clone(), 3, cfg).expect("agent");
        a.handle_block(x.as_ref(), &y).expect("block");
        let good = a.snapshot();
        let restored = Agent::restore(vocab.clone(), good.clone()).expect("restore");
        assert_eq!(restored.snapshot(), good);

        let mut bad = good.clone();
        match &mut bad.learner {
            Learner::Frozen(st) => st.psi1_y.pop().map(drop).expect("m entries"),
            Learner::Importance(c) => c.a[2] = coolgp::faer::Mat::zeros(5, 6),
            Learner::Exact(blocks) => blocks[0].1.push(0.0),
        }
        let err = Agent::restore(vocab.clone(), bad).expect_err("bad cache shape");
        assert!(
            matches!(err, Error::DimensionMismatch { .. }),
            "{mode:?}: {err:?}"
        );

        let mut nan = good.clone();
        match &mut nan.learner {
            Learner::Frozen(st) => st.psi2[(1, 2)] = f64::NAN,
            Learner::Importance(c) => c.b[0][1] = f64::INFINITY,
            Learner::Exact(blocks) => blocks[0].0[(0, 0)] = f64::NAN,
        }
        let err = Agent::restore(vocab.clone(), nan).expect_err("non-finite cache");
        assert!(matches!(err, Error::NonFinite { .. }), "{mode:?}: {err:?}");

        let mut other = good.clone();
        other.learner = Learner::Exact(Vec::new());
        if mode != UpdateMode::Exact {
            let err = Agent::restore(vocab.clone(), other).expect_err("another mode");
            assert!(matches!(err, Error::InvalidConfig(_)), "{mode:?}: {err:?}");
        }
    }
}

#[test]
fn an_unfactorable_posterior_skips_the_step_with_an_event() {
    // Own T1 = K⁻¹-form prior plus a cache with ψ̄2 = −1e6·I is not positive definite, so no
    // gradient can be taken: the block is absorbed, θ stays, and the agent says why.
    let vocab = Arc::new(Vocabulary::default_design(6, 2, 3).expect("design"));
    let mut a = Agent::new(1, vocab.clone(), 2, AgentConfig::default()).expect("agent");
    let mut s = a.snapshot();
    if let Learner::Frozen(st) = &mut s.learner {
        for j in 0..6 {
            st.psi2[(j, j)] = -1e6;
        }
    }
    a = Agent::restore(vocab, s).expect("restore");
    let theta = a.projection().to_flat();
    let mut rng = Rng::new(3, 3);
    let (x, y) = block(&mut rng, 4, 2);
    a.handle_block(x.as_ref(), &y).expect("block");
    let events: Vec<Event> = std::iter::from_fn(|| a.poll_event()).collect();
    assert!(
        events.contains(&Event::StepSkipped {
            reason: "posterior"
        }),
        "{events:?}"
    );
    assert_eq!(a.projection().to_flat(), theta);
    assert_eq!(a.n_own(), 4, "the data is still absorbed");
}

/// One lossless synchronous round over the whole fleet.
fn round(agents: &mut [Agent]) {
    let msgs: Vec<_> = agents
        .iter_mut()
        .flat_map(|a| {
            a.handle_tick();
            std::iter::from_fn(|| a.poll_transmit()).collect::<Vec<_>>()
        })
        .collect();
    for m in msgs {
        let to = m.header.receiver as usize;
        agents[to].handle_message(m).expect("accepted");
    }
}

#[test]
fn pushsum_refuses_neighbour_changes_once_mass_moves_and_still_converges() {
    // Reference: spec §7 (running-sum push-sum). A neighbour added mid-stream would receive
    // the sender's whole cumulative total (mass created); a removed one would lose what is in
    // flight. The change is refused, the agent is unchanged, and the fleet still converges to
    // T_g = T0 + Σ E_i, with a block absorbed mid-stream.
    let s = 6;
    let topo = Topology::ring(s);
    let vocab = Arc::new(Vocabulary::default_design(5, 2, 17).expect("design"));
    let cfg = AgentConfig {
        fusion: FusionRule::PushSum {
            agents: s as f64,
            weight: 1.0,
        },
        ..AgentConfig::default()
    };
    let mut rng = Rng::new(21, 4);
    let mut agents: Vec<Agent> = (0..s)
        .map(|i| Agent::new(i as u64, vocab.clone(), 2, cfg.clone()).expect("agent"))
        .collect();
    // Before any exchange the links may be set, changed and set again.
    agents[0].set_neighbors([3]).expect("fresh agent");
    for (i, a) in agents.iter_mut().enumerate() {
        a.set_neighbors(topo.neighbors(i).iter().map(|&j| j as u64))
            .expect("fresh agent");
        let (x, y) = block(&mut rng, 3 + i, 2);
        a.handle_block(x.as_ref(), &y).expect("block");
    }
    for _ in 0..5 {
        round(&mut agents);
    }
    let before = agents[0].snapshot();
    let ring: Vec<u64> = agents[0].neighbors().collect();
    let mut added = ring.clone();
    added.push(3);
    for change in [added, vec![ring[0]], vec![]] {
        let err = agents[0]
            .set_neighbors(change.clone())
            .expect_err("change refused");
        assert!(
            matches!(err, Error::InvalidConfig(_)),
            "{change:?}: {err:?}"
        );
        assert_eq!(
            agents[0].snapshot(),
            before,
            "{change:?}: the refusal changed the agent"
        );
    }
    agents[0]
        .set_neighbors(ring.iter().rev().copied())
        .expect("the same set, in another order");
    let (x, y) = block(&mut rng, 7, 2);
    agents[4]
        .handle_block(x.as_ref(), &y)
        .expect("mid-stream block");
    for _ in 0..400 {
        round(&mut agents);
    }
    let exact = sum_excess(5, agents.iter().map(Agent::own_excess));
    let worst = agents
        .iter()
        .map(|a| a.fused_excess().0.rel_dist(&exact))
        .fold(0.0, f64::max);
    // Lossless ring of 6: the error contracts by ≈ 0.67 per round, far below 1e-10 in 400.
    assert!(worst < 1e-10, "worst relative error {worst:e}");
    let points: usize = agents.iter().map(Agent::n_own).sum();
    for a in &agents {
        assert!((a.fleet_points() - points as f64).abs() < 1e-9 * points as f64);
    }
}
