//! The agent as a protocol participant: validation of received messages and of own data,
//! run-to-run determinism, and the importance-weight diagnostics it reports.
//! Reference: spec §7 (message header and payload), §9 (validation of every received
//! message), §4b (IS diagnostics, degeneracy), §10 (per-agent algorithm).

use crate::common;
use std::sync::Arc;

use common::block;
use coolgp::learn::{ImportanceCache, IsNormalization};
use coolgp::linalg::min_eigenvalue;
use coolgp::protocol::{memory, Body, Message};
use coolgp::rng::Rng;
use coolgp::{
    Agent, AgentConfig, Error, Event, Excess, NaturalParams, Topology, UpdateMode, View, Vocabulary,
};

// ---------------------------------------------------------------------------------------------
// helpers

fn bits_t(t: &NaturalParams) -> Vec<u64> {
    let m = t.t2.len();
    (0..m)
        .flat_map(|i| (0..m).map(move |j| (i, j)))
        .map(|(i, j)| t.t1[(i, j)].to_bits())
        .chain(t.t2.iter().map(|v| v.to_bits()))
        .collect()
}

fn bits_e(e: &Excess) -> Vec<u64> {
    bits_t(&NaturalParams {
        t1: e.d1.clone(),
        t2: e.d2.clone(),
    })
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Everything the validation must leave untouched, bit for bit.
#[derive(Debug, PartialEq)]
struct Snapshot {
    fused: Vec<u64>,
    own: Vec<u64>,
    fleet_points: u64,
    theta: Vec<u64>,
    n_own: usize,
}

fn snapshot(a: &Agent) -> Snapshot {
    Snapshot {
        fused: bits_t(&a.natural_params(View::Fused)),
        own: bits_e(a.own_excess()),
        fleet_points: a.fleet_points().to_bits(),
        theta: bits(&a.projection().to_flat()),
        n_own: a.n_own(),
    }
}

fn drain_events(a: &mut Agent) -> Vec<Event> {
    std::iter::from_fn(|| a.poll_event()).collect()
}

fn excess_mut(msg: &mut Message) -> &mut Excess {
    match &mut msg.body {
        Body::Tree { excess, .. } => Arc::make_mut(excess),
        Body::PushSum { total } => &mut total.x,
        Body::Site => panic!("a site-only message has no excess"),
    }
}

/// A pair of neighbours 0 – 1 (tree rule), both with data; returns them and a valid message
/// from 0 to 1 (round 1).
fn pair() -> (Arc<Vocabulary>, Agent, Agent, Message) {
    let vocab = Arc::new(Vocabulary::default_design(5, 2, 31).expect("design"));
    let mut a = Agent::new(0, vocab.clone(), 2, AgentConfig::default()).expect("agent");
    let mut b = Agent::new(1, vocab.clone(), 2, AgentConfig::default()).expect("agent");
    a.set_neighbors([1]).expect("neighbours");
    b.set_neighbors([0]).expect("neighbours");
    let mut rng = Rng::new(700, 1);
    let (x, y) = block(&mut rng, 8, 2);
    a.handle_block(x.as_ref(), &y).expect("block");
    let (x, y) = block(&mut rng, 6, 2);
    b.handle_block(x.as_ref(), &y).expect("block");
    a.handle_tick();
    let msg = a.poll_transmit().expect("one message to agent 1");
    assert!(a.poll_transmit().is_none());
    drain_events(&mut b);
    (vocab, a, b, msg)
}

/// Delivers `msg` to `b` and checks it is rejected with `label`, reported as one
/// `Event::Rejected` with the same reason, and leaves `b` bit-identical.
#[track_caller]
fn expect_reject(b: &mut Agent, msg: Message, label: &str) {
    let before = snapshot(b);
    let from = msg.header.sender;
    let reason = b
        .handle_message(msg)
        .expect_err("the message must be rejected");
    assert_eq!(reason.label(), label, "reason {reason}");
    let events = drain_events(b);
    assert_eq!(events.len(), 1, "{events:?}");
    match &events[0] {
        Event::Rejected { from: f, reason: r } => {
            assert_eq!(*f, from);
            assert_eq!(r, &reason);
        }
        e => panic!("expected Event::Rejected, got {e:?}"),
    }
    assert_eq!(
        snapshot(b),
        before,
        "rejected message ({label}) changed the agent"
    );
}

// ---------------------------------------------------------------------------------------------
// received messages

#[test]
fn invalid_messages_are_rejected_and_leave_the_agent_unchanged() {
    // Reference: spec §9 ("Validate every received message": config hash, shapes (m×m, m),
    // finite entries, max|D1 − D1ᵀ| ≤ 1e-9·max(1, max|D1|), λ_min(D1) ≥ −1e-8·max(1, max|D1|);
    // "Reject (keep the previous message) on failure") and §7 (header: sender, round; "the
    // receiver keeps the last one it received").
    let (vocab, mut a, mut b, good) = pair();
    let m = vocab.m();

    // Foreign vocabulary: same m and d', another design seed.
    let foreign = Vocabulary::default_design(m, 2, 32).expect("design");
    assert_ne!(foreign.fingerprint(), vocab.fingerprint());
    let mut msg = good.clone();
    msg.header.fingerprint = foreign.fingerprint();
    expect_reject(&mut b, msg, "fingerprint");

    // NaN and infinity, in D1 and in D2.
    let mut msg = good.clone();
    excess_mut(&mut msg).d1[(1, 2)] = f64::NAN;
    expect_reject(&mut b, msg, "non_finite");
    let mut msg = good.clone();
    excess_mut(&mut msg).d2[3] = f64::NAN;
    expect_reject(&mut b, msg, "non_finite");
    let mut msg = good.clone();
    excess_mut(&mut msg).d1[(0, 0)] = f64::INFINITY;
    expect_reject(&mut b, msg, "non_finite");

    // Wrong shape: an excess for m + 1 inducing inputs, and one with only D2 too short.
    let mut msg = good.clone();
    *excess_mut(&mut msg) = Excess::zeros(m + 1);
    expect_reject(&mut b, msg, "shape");
    let mut msg = good.clone();
    excess_mut(&mut msg).d2.pop();
    expect_reject(&mut b, msg, "shape");

    // Asymmetric D1: one off-diagonal entry moved by 1e-6·scale (threshold 1e-9·scale).
    let mut msg = good.clone();
    {
        let e = excess_mut(&mut msg);
        let scale = (0..m)
            .flat_map(|i| (0..m).map(move |j| (i, j)))
            .fold(1.0f64, |s, (i, j)| s.max(e.d1[(i, j)].abs()));
        e.d1[(0, 1)] += 1e-6 * scale;
    }
    expect_reject(&mut b, msg, "asymmetric");

    // Not PSD, with a positive diagonal: a 2×2 minor [[a, c], [c, b]] with c² > ab gives a
    // negative eigenvalue that a diagonal check would miss.
    let mut msg = good.clone();
    {
        let e = excess_mut(&mut msg);
        let c = 2.0 * (e.d1[(0, 0)] * e.d1[(1, 1)]).sqrt() + 1.0;
        e.d1[(0, 1)] += c;
        e.d1[(1, 0)] += c;
        let lmin = min_eigenvalue(e.d1.as_ref()).expect("eigenvalues");
        assert!(lmin < -0.5, "λ_min = {lmin}");
        assert!((0..m).all(|i| e.d1[(i, i)] > 0.0));
    }
    expect_reject(&mut b, msg, "not_psd");

    // Unknown sender (not a configured neighbour) and wrong receiver.
    let mut msg = good.clone();
    msg.header.sender = 9;
    expect_reject(&mut b, msg, "unknown_sender");
    let mut msg = good.clone();
    msg.header.receiver = 5;
    expect_reject(&mut b, msg, "wrong_receiver");

    // A push-sum payload at a tree-rule agent.
    let mut msg = good.clone();
    msg.body = Body::PushSum {
        total: coolgp::fuse::Mass::zeros(m),
    };
    expect_reject(&mut b, msg, "wrong_kind");

    // The valid message is accepted and changes the fused view (so the snapshots above could
    // have detected a change).
    let before = snapshot(&b);
    b.handle_message(good.clone()).expect("valid message");
    assert_ne!(snapshot(&b).fused, before.fused);
    assert!(matches!(
        drain_events(&mut b).as_slice(),
        [Event::FusedUpdated { .. }]
    ));

    // Replays: the same round again, then an older round after a newer one was accepted.
    expect_reject(&mut b, good.clone(), "stale");
    a.handle_tick();
    let newer = a.poll_transmit().expect("round-2 message");
    assert_eq!(newer.header.round, 2);
    b.handle_message(newer.clone()).expect("newer round");
    drain_events(&mut b);
    expect_reject(&mut b, good, "stale");
    expect_reject(&mut b, newer, "stale");
}

// ---------------------------------------------------------------------------------------------
// own data

#[test]
fn invalid_blocks_are_rejected_and_leave_the_agent_unchanged() {
    // Reference: spec §10 ("on block (X, y)": X is n×d, y has n entries) and the crate's
    // contract that user data never panics the core (errors are DimensionMismatch / NonFinite).
    let (_, _, mut b, _) = pair();
    let mut rng = Rng::new(701, 2);
    let before = snapshot(&b);
    let blocks = b.blocks();

    let (x3, y3) = block(&mut rng, 4, 3);
    let err = b.handle_block(x3.as_ref(), &y3).unwrap_err();
    assert!(
        matches!(
            err,
            Error::DimensionMismatch {
                what: "input columns",
                expected: 2,
                found: 3
            }
        ),
        "{err:?}"
    );

    let (x, mut y) = block(&mut rng, 4, 2);
    y.push(0.5);
    let err = b.handle_block(x.as_ref(), &y).unwrap_err();
    assert!(
        matches!(
            err,
            Error::DimensionMismatch {
                expected: 4,
                found: 5,
                ..
            }
        ),
        "{err:?}"
    );

    let (mut x, y) = block(&mut rng, 4, 2);
    x[(2, 1)] = f64::NAN;
    let err = b.handle_block(x.as_ref(), &y).unwrap_err();
    assert!(
        matches!(
            err,
            Error::NonFinite {
                what: "inputs",
                index: 5
            }
        ),
        "{err:?}"
    );

    let (x, mut y) = block(&mut rng, 4, 2);
    y[3] = f64::NAN;
    let err = b.handle_block(x.as_ref(), &y).unwrap_err();
    assert!(
        matches!(
            err,
            Error::NonFinite {
                what: "targets",
                index: 3
            }
        ),
        "{err:?}"
    );

    let (x, mut y) = block(&mut rng, 4, 2);
    y[0] = f64::NEG_INFINITY;
    assert!(matches!(
        b.handle_block(x.as_ref(), &y),
        Err(Error::NonFinite { .. })
    ));

    assert_eq!(snapshot(&b), before);
    assert_eq!(b.blocks(), blocks);

    // A valid block does change the agent (the snapshot is sensitive).
    let (x, y) = block(&mut rng, 4, 2);
    b.handle_block(x.as_ref(), &y).expect("valid block");
    let after = snapshot(&b);
    assert_eq!(after.n_own, before.n_own + 4);
    assert_ne!(after.own, before.own);
}

// ---------------------------------------------------------------------------------------------
// determinism

/// A path of three agents fed the same seeded stream, with communication rounds in between.
fn run_fleet(mode: UpdateMode, agent_seed: u64) -> Vec<Agent> {
    let vocab = Arc::new(Vocabulary::default_design(6, 2, 41).expect("design"));
    let topo = Topology::path(3);
    let mut agents: Vec<Agent> = (0..3)
        .map(|i| {
            let cfg = AgentConfig {
                mode,
                seed: agent_seed + i as u64,
                ..AgentConfig::default()
            };
            let mut a = Agent::new(i as u64, vocab.clone(), 2, cfg).expect("agent");
            a.set_neighbors(topo.neighbors(i).iter().map(|&j| j as u64))
                .expect("neighbours");
            a
        })
        .collect();
    let mut rng = Rng::new(800, 3);
    for step in 0..12 {
        let who = rng.below(3);
        let n = 2 + rng.below(6);
        let (x, y) = block(&mut rng, n, 2);
        agents[who].handle_block(x.as_ref(), &y).expect("block");
        if step % 3 == 2 {
            memory::round(&mut agents).expect("valid message");
        }
    }
    agents
}

fn fleet_bits(agents: &[Agent]) -> Vec<Vec<u64>> {
    agents
        .iter()
        .flat_map(|a| {
            [
                bits_t(&a.natural_params(View::Own)),
                bits_t(&a.natural_params(View::Fused)),
                bits(&a.projection().to_flat()),
            ]
        })
        .collect()
}

#[test]
fn identical_fleets_are_bit_identical() {
    // Reference: spec §4b ("draw once P = {W_t} … seeded; store the seed or the samples") and
    // §10 (the per-agent algorithm is a deterministic function of config, seed and data): the
    // sans-IO core uses no OS randomness, so runs must agree bit for bit.
    let importance = UpdateMode::Importance {
        samples: 48,
        normalization: IsNormalization::SelfNormalized,
    };
    for mode in [UpdateMode::Frozen, importance] {
        let a = fleet_bits(&run_fleet(mode, 5));
        let b = fleet_bits(&run_fleet(mode, 5));
        assert_eq!(a, b, "{mode:?}: two identical runs differ");
    }
    // The agent seed matters in importance mode (it draws the W_t), so the comparison above is
    // not vacuous: a different seed gives a different q(u).
    let a = fleet_bits(&run_fleet(importance, 5));
    let c = fleet_bits(&run_fleet(importance, 6));
    assert_ne!(a, c);
}

// ---------------------------------------------------------------------------------------------
// importance diagnostics

fn importance_agent(dz: usize, d: usize, samples: usize) -> Agent {
    let vocab = Arc::new(Vocabulary::default_design(4, dz, 51).expect("design"));
    let cfg = AgentConfig {
        mode: UpdateMode::Importance {
            samples,
            normalization: IsNormalization::Unnormalized,
        },
        seed: 9,
        ..AgentConfig::default()
    };
    Agent::new(0, vocab, d, cfg).expect("agent")
}

/// Feeds `blocks` blocks and returns the ImportanceWeights diagnostics of each block.
fn diagnostics_per_block(
    agent: &mut Agent,
    blocks: usize,
) -> Vec<Vec<coolgp::learn::IsDiagnostics>> {
    let d = agent.projection().d();
    let mut rng = Rng::new(900 + d as u64, 4);
    (0..blocks)
        .map(|_| {
            let (x, y) = block(&mut rng, 5, d);
            agent.handle_block(x.as_ref(), &y).expect("block");
            drain_events(agent)
                .into_iter()
                .filter_map(|e| match e {
                    Event::ImportanceWeights(diag) => Some(diag),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

#[test]
fn importance_mode_reports_weights_on_every_block() {
    // Reference: spec §4b ("ESS … (always report it)") and §9 ("If max log w > 700, or
    // ESS < 2, flag the estimate as degenerate").
    let k = 200;
    // d = d' = 1 with the initial σ = 0.1: E_p[w²] ≈ 7, so ESS ≈ k/7 — healthy.
    let mut low = importance_agent(1, 1, k);
    for diags in diagnostics_per_block(&mut low, 4) {
        assert!(!diags.is_empty(), "no ImportanceWeights event for a block");
        for dg in diags {
            assert_eq!(dg.samples, k);
            assert!(dg.ess.is_finite() && dg.ess >= 1.0 && dg.ess <= k as f64 + 1e-9);
            assert!(!dg.degenerate, "d = 1 flagged degenerate: {dg:?}");
            assert!(dg.ess > 10.0, "d = 1: ESS {}", dg.ess);
        }
    }
    // The frozen mode reports no importance weights.
    let vocab = Arc::new(Vocabulary::default_design(4, 1, 51).expect("design"));
    let mut frozen = Agent::new(0, vocab, 1, AgentConfig::default()).expect("agent");
    assert!(diagnostics_per_block(&mut frozen, 2)
        .iter()
        .all(Vec::is_empty));
}

#[test]
fn importance_weights_degenerate_in_d6_with_concentrated_q() {
    // Reference: spec §4b ("Degeneracy: this is the main finding": E_p[w²] is exponential in
    // d·d'; with σ_ij = 0.3 and d = d' = 6 it is ≥ 6e13, ESS ≈ 1.2 at k = 1000) and §9 (flag
    // ESS < 2 as degenerate). The shared initial q(W) has σ_ij = 0.1, more concentrated still.
    let k = 200;
    let mut agent = importance_agent(6, 6, k);
    let log_e_w2 = ImportanceCache::log_second_moment(agent.projection());
    assert!(
        log_e_w2 > 60.0,
        "log E_p[w²] = {log_e_w2} (predicted ESS ≈ k/E_p[w²] ≪ 1)"
    );
    for diags in diagnostics_per_block(&mut agent, 3) {
        assert!(!diags.is_empty(), "no ImportanceWeights event for a block");
        for dg in diags {
            assert_eq!(dg.samples, k);
            assert!(dg.degenerate, "d = 6 not flagged degenerate: {dg:?}");
            assert!(dg.ess < 2.0, "ESS {}", dg.ess);
        }
    }
}
