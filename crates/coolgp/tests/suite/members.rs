//! Containment of a member (issue 29, docs/MEMBERS.md §2): a withheld agent keeps its own data
//! but sends none of it, so on a tree every other agent converges to the fleet without it,
//! exactly; and the member check's prediction without one agent is the fleet's model without
//! its own excess.

use crate::common;
use std::sync::Arc;

use common::{fleet_config, max_rel, site_flat};
use coolgp::faer::Mat;
use coolgp::learn::Site;
use coolgp::protocol::memory;
use coolgp::rng::Rng;
use coolgp::{Agent, AgentConfig, Excess, FusionRule, Topology, View, Vocabulary};

const D: usize = 2;

fn fleet(topo: &Topology, v: &Arc<Vocabulary>, cfg: &AgentConfig, seed: u64) -> Vec<Agent> {
    let mut rng = Rng::new(seed, 29);
    (0..topo.len())
        .map(|i| {
            let mut a = Agent::new(i as u64, v.clone(), D, cfg.clone()).expect("agent");
            a.set_neighbors(topo.neighbors(i).iter().map(|&j| j as u64))
                .expect("neighbours");
            for _ in 0..1 + i % 3 {
                let x = Mat::from_fn(12, D, |_, _| rng.normal());
                let y: Vec<f64> = (0..12)
                    .map(|r| x[(r, 0)].sin() + 0.1 * rng.normal())
                    .collect();
                a.handle_block(x.as_ref(), &y).expect("block");
            }
            a
        })
        .collect()
}

fn fuse(agents: &mut [Agent], topo: &Topology) {
    for _ in 0..topo.diameter().unwrap_or(1) {
        memory::round(agents).expect("valid");
    }
}

#[test]
fn a_withheld_member_leaves_the_others_with_the_fleet_without_it_exactly() {
    let v = Arc::new(Vocabulary::default_design(9, 2, 11).expect("design"));
    for (name, cfg) in [
        ("per-agent", AgentConfig::default()),
        ("fleet", fleet_config()),
    ] {
        for seed in 0..4 {
            let topo = Topology::random_tree(7, seed);
            let mut agents = fleet(&topo, &v, &cfg, seed);
            // The suspect is an inner node when the tree has one: it must still relay.
            let s = (0..7)
                .max_by_key(|&i| topo.neighbors(i).len())
                .expect("agents");
            fuse(&mut agents, &topo);
            agents[s].set_withheld(true);
            assert!(agents[s].is_withheld());
            fuse(&mut agents, &topo);
            let mut without = Excess::zeros(v.m());
            let mut sites = Site::zeros(agents[0].site().len());
            for a in agents
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != s)
                .map(|p| p.1)
            {
                without.add_in_place(a.own_excess());
                sites.add_in_place(a.site());
            }
            let points: usize = (0..7).filter(|&i| i != s).map(|i| agents[i].n_own()).sum();
            for (i, a) in agents.iter().enumerate() {
                let (e, p) = a.fused_excess();
                let mut want = without.clone();
                if i == s {
                    // The withheld member's own model keeps its data.
                    want.add_in_place(a.own_excess());
                }
                let err = e.rel_dist(&want);
                assert!(err < 1e-12, "{name} seed {seed} agent {i}: {err:e}");
                let want_p = points + if i == s { a.n_own() } else { 0 };
                assert_eq!(p, want_p as f64, "{name} seed {seed} agent {i}");
                if name == "fleet" && i != s {
                    let got = a.fused_sites();
                    let got = got.get(a.site_key()).expect("own group");
                    let err = max_rel(&site_flat(got), &site_flat(&sites));
                    assert!(err < 1e-12, "sites, seed {seed} agent {i}: {err:e}");
                }
            }
            // Readmitted: every agent holds the whole fleet again.
            agents[s].set_withheld(false);
            fuse(&mut agents, &topo);
            let mut all = without.clone();
            all.add_in_place(agents[s].own_excess());
            for a in &agents {
                assert!(
                    a.fused_excess().0.rel_dist(&all) < 1e-12,
                    "{name} readmitted"
                );
            }
        }
    }
}

#[test]
fn the_prediction_without_a_member_is_the_model_of_the_others_and_a_peers_own_model_is_its_own() {
    let v = Arc::new(Vocabulary::default_design(9, 2, 11).expect("design"));
    let topo = Topology::path(4);
    let mut agents = fleet(&topo, &v, &AgentConfig::default(), 3);
    fuse(&mut agents, &topo);
    let x = Mat::from_fn(5, D, |i, j| 0.3 * i as f64 - 0.2 * j as f64);
    // Agent 0 in a fleet where 2 is withheld predicts with the others' data alone: the prior
    // plus E_0 + E_1 + E_3 under its q(W).
    let mut others = Excess::zeros(v.m());
    for i in [0, 1, 3] {
        others.add_in_place(agents[i].own_excess());
    }
    let without = agents[0]
        .predict_given(x.as_ref(), &others)
        .expect("prediction");
    agents[2].set_withheld(true);
    fuse(&mut agents, &topo);
    let want = agents[0]
        .predict(x.as_ref(), View::Fused)
        .expect("prediction");
    assert!(max_rel(&without.mean, &want.mean) < 1e-10);
    assert!(max_rel(&without.var_f, &want.var_f) < 1e-10);
    // A peer's own model from its own excess (how a node checks its rows against a peer).
    let given = agents[1]
        .predict_given(x.as_ref(), agents[1].own_excess())
        .expect("prediction");
    let own = agents[1]
        .predict(x.as_ref(), View::Own)
        .expect("prediction");
    assert!(max_rel(&given.mean, &own.mean) < 1e-12);
    assert!(max_rel(&given.var_f, &own.var_f) < 1e-12);
}

#[test]
fn under_push_sum_a_withheld_member_leaves_the_running_totals_with_30_percent_loss() {
    // Push-sum on a ring with cycles: withholding injects −E_s (and −points, −site) into the
    // mass, so every estimate converges to the fleet's sums without agent s, its own too; new
    // blocks at s while withheld do not enter; readmitted, the sums are the whole fleet's.
    let v = Arc::new(Vocabulary::default_design(9, 2, 11).expect("design"));
    let topo = Topology::ring(8);
    for (name, base) in [
        ("per-agent", AgentConfig::default()),
        ("fleet", fleet_config()),
    ] {
        let cfg = AgentConfig {
            fusion: FusionRule::PushSum {
                agents: 8.0,
                weight: 1.0,
            },
            ..base
        };
        let mut agents = fleet(&topo, &v, &cfg, 5);
        let mut loss = Rng::new(31, 8);
        for _ in 0..50 {
            common::lossy_round(&mut agents, &mut loss, 0.3);
        }
        let s = 3;
        agents[s].set_withheld(true);
        let x = Mat::from_fn(12, D, |i, j| 0.1 * i as f64 - 0.3 * j as f64);
        let y: Vec<f64> = (0..12).map(|r| x[(r, 0)].sin()).collect();
        agents[s]
            .handle_block(x.as_ref(), &y)
            .expect("a block while withheld");
        for _ in 0..800 {
            common::lossy_round(&mut agents, &mut loss, 0.3);
        }
        // Every estimate is the sums of the agents but `skip` (fleet mode: the sites too).
        let sums_hold = |agents: &[Agent], skip: Option<usize>, when: &str| {
            let mut e = Excess::zeros(v.m());
            let mut sites = Site::zeros(agents[0].site().len());
            let mut pts = 0usize;
            for a in agents
                .iter()
                .enumerate()
                .filter(|(i, _)| Some(*i) != skip)
                .map(|p| p.1)
            {
                e.add_in_place(a.own_excess());
                sites.add_in_place(a.site());
                pts += a.n_own();
            }
            let pts = pts as f64;
            for (i, a) in agents.iter().enumerate() {
                let err = a.fused_excess().0.rel_dist(&e);
                assert!(err < 1e-6, "{name}: agent {i} off by {err:e} {when}");
                assert!(
                    (a.fleet_points() - pts).abs() < 1e-6 * pts,
                    "{name}: agent {i} points {when}"
                );
                if name == "fleet" {
                    let got = a.fused_sites();
                    let got = got.get(a.site_key()).expect("own group");
                    let err = max_rel(&site_flat(got), &site_flat(&sites));
                    assert!(err < 1e-6, "{name}: agent {i} sites off by {err:e} {when}");
                }
            }
        };
        sums_hold(&agents, Some(s), "while 3 is withheld");
        agents[s].set_withheld(false);
        for _ in 0..800 {
            common::lossy_round(&mut agents, &mut loss, 0.3);
        }
        sums_hold(&agents, None, "once readmitted");
    }
}

/// One round on `agents` in which every tree message agent `liar` sends carries its excess
/// times `inflate` and claims `claim` times its points.
fn lying_round(agents: &mut [Agent], liar: usize, inflate: f64, claim: f64) {
    for a in agents.iter_mut() {
        a.handle_tick();
    }
    let msgs: Vec<coolgp::Message> = agents
        .iter_mut()
        .flat_map(|a| std::iter::from_fn(|| a.poll_transmit()).collect::<Vec<_>>())
        .collect();
    for mut msg in msgs {
        if msg.header.sender == liar as u64 {
            if let coolgp::protocol::Body::Tree { excess, points } = &mut msg.body {
                *excess = Arc::new(excess.scaled(inflate));
                *points *= claim;
            }
        }
        let to = msg.header.receiver as usize;
        agents[to].handle_message(msg).expect("valid");
    }
}

/// Three agents on a path 0 – 1 – 2 sharing a 9-point design, with `cfg`'s policies.
pub(crate) fn path_of_three(cfg: &AgentConfig) -> Vec<Agent> {
    let v = Arc::new(Vocabulary::default_design(9, 2, 11).expect("design"));
    let topo = Topology::path(3);
    (0..3)
        .map(|i| {
            let mut a = Agent::new(i as u64, v.clone(), D, cfg.clone()).expect("agent");
            a.set_neighbors(topo.neighbors(i).iter().map(|&j| j as u64))
                .expect("neighbours");
            a
        })
        .collect()
}

/// Agent 0's fused mean at 8 places along the field.
fn mean_at_agent_0(agents: &[Agent]) -> Vec<f64> {
    let x = Mat::from_fn(8, D, |i, j| 0.4 * i as f64 - 1.2 + 0.1 * j as f64);
    agents[0]
        .predict(x.as_ref(), View::Fused)
        .expect("prediction")
        .mean
}

/// A path 0 – 1 – 2 on one field; agent 2's rows read 1 too high, and it holds `copies`
/// copies of its 60 rows. Agent 0's fused mean at a few places after fusing with agent 2's
/// messages inflated `inflate` times, under the influence cap `cap`; and the events.
fn mean_at_0(copies: usize, inflate: f64, cap: Option<f64>) -> (Vec<f64>, usize) {
    let cfg = AgentConfig {
        learn: false,
        influence_cap: cap,
        ..AgentConfig::default()
    };
    let mut agents = path_of_three(&cfg);
    let capped = lied_to(&mut agents, copies, inflate);
    (mean_at_agent_0(&agents), capped)
}

/// Each agent of a path 0 – 1 – 2 absorbs its 60 rows of one field (agent 2's read 1 too
/// high, `copies` times over); three rounds in which agent 2's messages carry `inflate` times
/// its sums. The capped events agent 1 raised about agent 2.
fn lied_to(agents: &mut [Agent], copies: usize, inflate: f64) -> usize {
    let mut rng = Rng::new(7, 29);
    for (i, a) in agents.iter_mut().enumerate() {
        let x = Mat::from_fn(60, D, |_, _| rng.normal());
        let y: Vec<f64> = (0..60)
            .map(|r| x[(r, 0)].sin() + 0.1 * rng.normal() + if i == 2 { 1.0 } else { 0.0 })
            .collect();
        let times = if i == 2 { copies } else { 1 };
        for _ in 0..times {
            a.handle_block(x.as_ref(), &y).expect("block");
        }
    }
    for _ in 0..3 {
        lying_round(agents, 2, inflate, 1.0);
    }
    std::iter::from_fn(|| agents[1].poll_event())
        .filter(|e| matches!(e, coolgp::Event::Capped { from: 2, .. }))
        .count()
}

#[test]
fn an_inflating_member_adds_no_more_than_its_rows_times_the_cap() {
    // Issue 29: a member sends its sums x100 with its claimed rows. Uncapped it drags the
    // fleet toward its biased rows; under a cap of 2 it moves agent 0's answers no more than
    // if it had honestly held its rows twice (10% slack: its rows' precision per row is the
    // fleet's only up to sampling).
    let (honest, none) = mean_at_0(1, 1.0, Some(2.0));
    assert_eq!(none, 0, "an honest member is not capped");
    let (twice, _) = mean_at_0(2, 1.0, None);
    let (capped, n) = mean_at_0(1, 100.0, Some(2.0));
    let (uncapped, _) = mean_at_0(1, 100.0, None);
    assert!(n > 0, "the inflated messages were capped");
    let shift = |m: &[f64]| {
        m.iter()
            .zip(&honest)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max)
    };
    let (s2, sc, su) = (shift(&twice), shift(&capped), shift(&uncapped));
    eprintln!(
        "max shift of agent 0's mean: 2x rows {s2:.4}, x100 capped {sc:.4}, x100 uncapped {su:.4}"
    );
    assert!(sc <= 1.1 * s2, "capped {sc} against 2x rows {s2}");
    assert!(su > 2.0 * s2, "uncapped {su} against 2x rows {s2}");
}

/// A path 0 – 1 – 2 streaming 20 rows a round each for `rounds` rounds (agent 2's read 1 too
/// high, and it absorbs `copies` copies of each block); every message agent 2 sends claims
/// `claim` times its rows and carries `claim` times its sums (a member that claims more rows
/// with matching precision). Agent 0's fused mean at a few places, its fleet points, and the
/// row-rate events agent 1 raised about agent 2.
fn streamed(copies: usize, claim: f64, rate: Option<f64>, rounds: usize) -> (Vec<f64>, f64, usize) {
    let cfg = AgentConfig {
        learn: false,
        row_rate: rate,
        ..AgentConfig::default()
    };
    let mut agents = path_of_three(&cfg);
    let mut rng = Rng::new(7, 31);
    let mut rate_capped = 0;
    for _ in 0..rounds {
        for (i, a) in agents.iter_mut().enumerate() {
            let x = Mat::from_fn(20, D, |_, _| rng.normal());
            let y: Vec<f64> = (0..20)
                .map(|r| x[(r, 0)].sin() + 0.1 * rng.normal() + if i == 2 { 1.0 } else { 0.0 })
                .collect();
            for _ in 0..if i == 2 { copies } else { 1 } {
                a.handle_block(x.as_ref(), &y).expect("block");
            }
        }
        lying_round(&mut agents, 2, claim, claim);
        rate_capped += std::iter::from_fn(|| agents[1].poll_event())
            .filter(|e| matches!(e, coolgp::Event::RateCapped { from: 2, .. }))
            .count();
    }
    (
        mean_at_agent_0(&agents),
        agents[0].fleet_points(),
        rate_capped,
    )
}

#[test]
fn a_member_claiming_rows_faster_than_the_row_rate_adds_no_more_than_the_rate() {
    // Issue 29 item 3: claimed rows may grow by at most `--row-rate` a round. Agent 2 gathers
    // 20 rows a round; under a rate of 40 an honest stream is never touched (bit for bit the
    // run without a rate), while claiming 100x its rows (with their precision) it adds no
    // more than the rate allows, and moves agent 0's answers no more than honestly holding
    // its rows twice would (10% slack, as for the influence cap).
    let rounds = 10;
    let (honest, honest_points, n0) = streamed(1, 1.0, Some(40.0), rounds);
    let (free, free_points, _) = streamed(1, 1.0, None, rounds);
    assert_eq!(n0, 0, "an honest stream is not rate-capped");
    assert_eq!(honest, free, "the rate changed an honest run");
    // 600 rows, less agent 2's last block still on its way (two hops).
    assert_eq!(honest_points, free_points);
    assert!(honest_points >= 580.0, "{honest_points}");
    let (twice, _, _) = streamed(2, 1.0, None, rounds);
    let (capped, capped_points, n) = streamed(1, 100.0, Some(40.0), rounds);
    let (uncapped, uncapped_points, _) = streamed(1, 100.0, None, rounds);
    assert!(n > 0, "the inflated claims were capped");
    // Agent 0 holds its own 200 rows, agent 1's 200 and agent 2's side at most 40 a round.
    assert!(
        capped_points <= 400.0 + 40.0 * rounds as f64 + 1e-9,
        "capped {capped_points}"
    );
    assert!(uncapped_points > 10_000.0, "uncapped {uncapped_points}");
    let shift = |m: &[f64]| {
        m.iter()
            .zip(&honest)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max)
    };
    let (s2, sc, su) = (shift(&twice), shift(&capped), shift(&uncapped));
    eprintln!("max shift of agent 0's mean: 2x rows {s2:.4}, 100x claimed under the rate {sc:.4}, uncapped {su:.4}");
    assert!(sc <= 1.1 * s2, "rate-capped {sc} against 2x rows {s2}");
    assert!(su > 2.0 * s2, "uncapped {su} against 2x rows {s2}");
}

/// The path 0 – 1 – 2 of [`mean_at_0`]'s rows in the fleet projection, learning off and no
/// influence flag; agent 2's messages carry `inflate` times its sums with its claimed rows.
/// Agent 0's fused `tr(D1)` and fleet points, and agent 1's capped events about agent 2.
fn ceiling_run(inflate: f64) -> (f64, f64, usize) {
    let cfg = AgentConfig {
        learn: false,
        ..fleet_config()
    };
    let mut agents = path_of_three(&cfg);
    let capped = lied_to(&mut agents, 1, inflate);
    let (fused, points) = agents[0].fused_excess();
    let tr = (0..fused.d1.nrows()).map(|i| fused.d1[(i, i)]).sum();
    (tr, points, capped)
}

#[test]
fn by_default_no_message_carries_more_precision_than_its_rows_can() {
    // Issue 29 item 3, the ceiling: in unit scale each row adds ψ̄2(x) to D1, whose trace is
    // at most m, so a subtree's message may carry at most m per claimed row whatever its data;
    // no flag. Honest messages stay below it; agent 2's sums ×10⁴ with its own 60 rows are
    // scaled down to it, and agent 0's fused precision stays within m per fleet point.
    let m = 9.0;
    let (tr, points, capped) = ceiling_run(1.0);
    assert_eq!(capped, 0, "an honest message was held to the ceiling");
    let per_row = tr / points;
    eprintln!("honest precision per row {per_row:.3} of the ceiling's {m}");
    assert!(per_row < m, "{per_row}");
    assert!(
        per_row * 1e4 > 10.0 * m,
        "the inflation would not exceed the ceiling: the test proves nothing"
    );
    let (tr_l, points_l, capped_l) = ceiling_run(1e4);
    assert!(capped_l > 0, "the inflated messages were not capped");
    assert_eq!(points_l, points, "the claimed rows are kept");
    assert!(
        tr_l <= m * points_l * (1.0 + 1e-9),
        "agent 0 holds {tr_l} of precision over {points_l} rows: above m per row"
    );
}
