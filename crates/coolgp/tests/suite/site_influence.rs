//! Bounded influence on the fleet projection's q(W) site sums (issue 29 item 3,
//! docs/MEMBERS.md §6): whatever a tree message's q(u) part is scaled by (the ceiling, the
//! influence cap, the row rate), its site sums are scaled by too, and so are the sender's
//! following site-only messages until its next tree message.
//!
//! Reference: spec §14 (the fleet's q(W) is the prior plus a sum of sites, `M = λ/(1 + Λ)`),
//! spec §7 (tree messages), `members::bound::Scaling`.

use crate::common;
use std::sync::Arc;

use common::{fleet_config, site_flat};
use coolgp::faer::Mat;
use coolgp::learn::Sites;
use coolgp::protocol::Body;
use coolgp::rng::Rng;
use coolgp::{Agent, AgentConfig, Event, Message};

const D: usize = 2;

/// Three agents on a path 0 – 1 – 2 sharing a 9-point design, in the fleet projection mode
/// (learning on: the sites step with every block) under `cap` (`--influence-cap`).
fn path_of_three(cap: Option<f64>) -> Vec<Agent> {
    crate::members::path_of_three(&AgentConfig {
        influence_cap: cap,
        ..fleet_config()
    })
}

/// What agent 2 does to every message it sends: its tree messages' excess times `excess`,
/// every message's site sums (Λ, λ, A, B, YY, n) times `sites`, its claimed rows kept.
#[derive(Clone, Copy)]
struct Lie {
    excess: f64,
    sites: f64,
}

const HONEST: Lie = Lie {
    excess: 1.0,
    sites: 1.0,
};

fn lie_in(msg: &mut Message, lie: Lie) {
    if let Body::Tree { excess, .. } = &mut msg.body {
        *excess = Arc::new(excess.scaled(lie.excess));
    }
    if let Some(s) = &mut msg.sites {
        *s = Sites::from_pairs(s.iter().map(|(g, x)| (g, x.reweighted(lie.sites, 1.0))));
    }
}

/// Delivers every queued message, agent 2's after `lie`; returns the capped events (either
/// kind) agent 1 raised about agent 2.
fn deliver(agents: &mut [Agent], lie: Lie) -> usize {
    deliver_with(agents, |msg| lie_in(msg, lie));
    std::iter::from_fn(|| agents[1].poll_event())
        .filter(|e| matches!(e, Event::Capped { from: 2, .. }))
        .count()
}

/// Delivers every queued message, agent 2's after `alter`.
fn deliver_with(agents: &mut [Agent], alter: impl Fn(&mut Message)) {
    let msgs: Vec<Message> = agents
        .iter_mut()
        .flat_map(|a| std::iter::from_fn(|| a.poll_transmit()).collect::<Vec<_>>())
        .collect();
    for mut msg in msgs {
        if msg.header.sender == 2 {
            alter(&mut msg);
        }
        let to = msg.header.receiver as usize;
        agents[to].handle_message(msg).expect("valid");
    }
}

/// Each agent absorbs 60 rows (agent 2's of another function, read 1 too high, `copies`
/// times over).
fn absorb(agents: &mut [Agent], rng: &mut Rng, copies: usize) {
    for (i, a) in agents.iter_mut().enumerate() {
        let x = Mat::from_fn(60, D, |_, _| rng.normal());
        let y: Vec<f64> = (0..60)
            .map(|r| {
                let f = if i == 2 {
                    1.0 + 2.0 * x[(r, 1)].sin()
                } else {
                    x[(r, 0)].sin()
                };
                f + 0.1 * rng.normal()
            })
            .collect();
        for _ in 0..if i == 2 { copies } else { 1 } {
            a.handle_block(x.as_ref(), &y).expect("block");
        }
    }
}

/// Agent 0's q(W) mean `M [d', d]`, flattened.
fn mean_w(a: &Agent) -> Vec<f64> {
    let mu = a.projection().mu();
    (0..mu.ncols())
        .flat_map(|j| (0..mu.nrows()).map(move |i| mu[(i, j)]))
        .collect()
}

/// What agent 0 holds after a path 0 – 1 – 2 in which agent 2 holds `copies` copies of its
/// rows and lies by `lie`, under `cap`: its q(W) mean after three tree rounds, then after
/// one more block each and three rounds of site-only messages (no tree message); the capped
/// events agent 1 raised about agent 2; agent 0's fused site sums at the end; agent 2's own
/// q(u) precision per row `tr(E_2)/N_2` when it first sends (unit scale); the precision
/// `Σ Λ` of agent 0's fused sites at the end, the faded pseudo-site of q0 included.
struct Run {
    after_tree: Vec<f64>,
    after_sites: Vec<f64>,
    capped: usize,
    site: Vec<f64>,
    rho2: f64,
    precision: f64,
}

fn run(copies: usize, lie: Lie, cap: Option<f64>) -> Run {
    let mut agents = path_of_three(cap);
    let mut rng = Rng::new(7, 29);
    absorb(&mut agents, &mut rng, copies);
    let e2 = agents[2].own_excess();
    let rho2 = (0..e2.d1.nrows()).map(|i| e2.d1[(i, i)]).sum::<f64>() / agents[2].n_own() as f64;
    let mut capped = 0;
    for _ in 0..3 {
        for a in agents.iter_mut() {
            a.handle_tick();
        }
        capped += deliver(&mut agents, lie);
    }
    let after_tree = mean_w(&agents[0]);
    absorb(&mut agents, &mut rng, copies);
    for _ in 0..3 {
        for a in agents.iter_mut() {
            a.handle_site_tick();
        }
        capped += deliver(&mut agents, lie);
    }
    Run {
        after_tree,
        after_sites: mean_w(&agents[0]),
        capped,
        site: site_flat(&agents[0].fused_site()),
        rho2,
        precision: agents[0].fused_site().prec.iter().sum(),
    }
}

/// `max |a − b|`.
fn shift(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn an_honest_fleet_projection_run_is_untouched_by_the_bounds() {
    // Honest messages are never capped, so their site sums pass bit for bit: the run under a
    // cap of 2 is the run without one (the ceiling is on in both).
    let free = run(1, HONEST, None);
    let capped = run(1, HONEST, Some(2.0));
    assert_eq!(
        free.capped + capped.capped,
        0,
        "an honest member was capped"
    );
    assert_eq!(free.after_tree, capped.after_tree);
    assert_eq!(free.after_sites, capped.after_sites);
    assert_eq!(free.site, capped.site);
}

/// The largest move of agent 0's q(W) mean from `honest`'s, after the tree messages and
/// after the site-only messages.
fn moved(r: &Run, honest: &Run) -> [f64; 2] {
    [
        shift(&r.after_tree, &honest.after_tree),
        shift(&r.after_sites, &honest.after_sites),
    ]
}

/// Asserts `bounded` moved agent 0's q(W) mean no more than `reference` (10% slack) and
/// `unbounded` more than `gap` times as far, after either kind of message.
fn assert_within(
    what: &str,
    bounded: [f64; 2],
    reference: [f64; 2],
    (unbounded, gap): ([f64; 2], f64),
) {
    for (i, when) in ["after the tree messages", "after the site-only messages"]
        .iter()
        .enumerate()
    {
        let (b, r, u) = (bounded[i], reference[i], unbounded[i]);
        eprintln!("{what}, {when}: agent 0's q(W) mean moved {b:.4} bounded, {r:.4} reference, {u:.4} sites unbounded");
        assert!(b <= 1.1 * r, "{what}, {when}: {b} against {r}");
        assert!(u > gap * r, "{what}, {when}: unbounded {u} against {r}");
    }
}

#[test]
fn an_inflating_member_moves_the_fleets_q_w_no_more_than_the_cap_allows() {
    // Issue 29 item 3: agent 2 sends its q(u) excess and its sites x100, its claimed rows
    // kept. The ceiling holds its excess to m per row, then a cap of 2 to twice the rest's
    // precision per row: a total factor f with 100·f = 2·ρ_rest/ρ_2, where ρ is q(u)'s
    // precision per row (ψ̄2 depends on the inputs, drawn alike here, not on the targets: so
    // ρ_rest ≈ ρ_2). Its sites get the same f, so they count 100·f ≈ 2 times its honest sums,
    // and agent 0's q(W) mean moves as far as had agent 2 sent its sums (q(u) and sites)
    // twice, uncapped (10% slack for ρ_rest/ρ_2). Its site-only messages after the capped
    // tree messages get the same factor. Had only q(u) been capped (before issue 29 item 3),
    // its sites would count 100 times.
    let cap = Some(2.0);
    let lie = |excess, sites| Lie { excess, sites };
    let honest = run(1, HONEST, cap);
    let capped = run(1, lie(100.0, 100.0), cap);
    assert!(capped.capped > 0, "the inflated messages were capped");
    let twice_sums = run(1, lie(2.0, 2.0), None);
    assert_eq!(twice_sums.capped, 0);
    let q_u_only = run(1, lie(2.0, 100.0), None);
    report_rows(2, &honest);
    assert_within(
        "cap 2",
        moved(&capped, &honest),
        moved(&twice_sums, &honest),
        (moved(&q_u_only, &honest), 4.0),
    );
}

/// Prints how far agent 2 honestly holding its rows `copies` times moves agent 0's q(W)
/// mean from `honest` (no yardstick for q(W): docs/MEMBERS.md §6).
fn report_rows(copies: usize, honest: &Run) {
    let rows = moved(&run(copies, HONEST, None), honest);
    eprintln!(
        "agent 2 honestly holding its rows {copies} times moved agent 0's q(W) mean {:.4}, {:.4}",
        rows[0], rows[1]
    );
}

#[test]
fn by_default_an_inflating_members_sites_are_held_with_its_q_u_to_the_ceiling() {
    // The ceiling (always on in the fleet projection without groups) holds a message to m
    // precision per claimed row: agent 2's q(u) excess x10⁴ is scaled by f = m/(10⁴·ρ_2), so
    // its sums, sites included, count k = 10⁴·f = m/ρ_2 times its honest sums (ρ_2: its
    // honest q(u) precision per row; k ≈ 4.4 here). Agent 0's q(W) mean moves no more than
    // had agent 2 sent its sums k times, after the tree messages and after the site-only
    // messages that follow them; sites x10⁴ with only q(u) held would move it far more.
    let m = 9.0;
    let honest = run(1, HONEST, None);
    let k = m / honest.rho2;
    eprintln!(
        "agent 2's honest q(u) precision per row {:.3}: k = {k:.3}",
        honest.rho2
    );
    assert!(k > 2.0 && k < 5.0, "{k}");
    let held = run(
        1,
        Lie {
            excess: 1e4,
            sites: 1e4,
        },
        None,
    );
    assert!(
        held.capped > 0,
        "the inflated messages were held to the ceiling"
    );
    let k_sums = run(
        1,
        Lie {
            excess: k,
            sites: k,
        },
        None,
    );
    let q_u_only = run(
        1,
        Lie {
            excess: k,
            sites: 1e4,
        },
        None,
    );
    report_rows(5, &honest);
    assert_within(
        "the ceiling",
        moved(&held, &honest),
        moved(&k_sums, &honest),
        (moved(&q_u_only, &honest), 2.0),
    );
    // The mean saturates at agent 2's own as its weight grows; the precision it adds does not.
    let (p, pk, pu) = (held.precision, k_sums.precision, q_u_only.precision);
    eprintln!(
        "agent 0's fused site precision: honest {:.1}, held {p:.1}, k times {pk:.1}, sites unbounded {pu:.1}",
        honest.precision
    );
    assert!(p <= pk * (1.0 + 1e-9), "{p} against {pk}");
    assert!(pu > 100.0 * pk, "{pu} against {pk}");
}

/// A path 0 – 1 – 2 in the fleet projection under a row rate of 40 a round, each agent
/// streaming 20 rows a round for 10 rounds; every tree message agent 2 sends claims `claim`
/// times its rows and carries `claim` times its sums, sites and site points included.
/// Agent 0's fleet points (q(u)) and the points of its fused sites, and the row-rate events
/// agent 1 raised about agent 2.
fn rate_run(claim: f64) -> (f64, f64, usize) {
    let cfg = AgentConfig {
        row_rate: Some(40.0),
        ..fleet_config()
    };
    let mut agents = crate::members::path_of_three(&cfg);
    let mut rng = Rng::new(7, 31);
    let mut events = 0;
    for _ in 0..10 {
        for a in agents.iter_mut() {
            let x = Mat::from_fn(20, D, |_, _| rng.normal());
            let y: Vec<f64> = (0..20).map(|r| x[(r, 0)].sin()).collect();
            a.handle_block(x.as_ref(), &y).expect("block");
            a.handle_tick();
        }
        deliver_with(&mut agents, |msg| {
            if let Body::Tree { excess, points } = &mut msg.body {
                *excess = Arc::new(excess.scaled(claim));
                *points *= claim;
            }
            if let Some(s) = &mut msg.sites {
                *s = Sites::from_pairs(s.iter().map(|(g, x)| (g, x.reweighted(claim, claim))));
            }
        });
        events += std::iter::from_fn(|| agents[1].poll_event())
            .filter(|e| matches!(e, Event::RateCapped { from: 2, .. }))
            .count();
    }
    let a0 = &agents[0];
    let site_points = a0
        .fused_sites()
        .get(a0.site_key())
        .map_or(0.0, |s| s.points);
    (a0.fleet_points(), site_points, events)
}

#[test]
fn a_member_claiming_rows_faster_than_the_rate_claims_no_more_site_points_either() {
    // The row rate scales a message's claimed rows and its excess by allowed/claimed; its
    // sites get the same factor on Λ, λ, (A, B, YY, n) and on their points, so the points
    // that fade the q0 pseudo-site (exp(−N/N0)) stay the rows q(u) accepted.
    let (points, site_points, none) = rate_run(1.0);
    assert_eq!(none, 0, "an honest stream was rate-capped");
    assert_eq!(points, site_points, "honest sites count the rows q(u) does");
    let (points, site_points, n) = rate_run(100.0);
    eprintln!("claiming 100x: agent 0 holds {points} rows in q(u), {site_points} in its sites");
    assert!(n > 0, "the inflated claims were rate-capped");
    assert!(points <= 400.0 + 40.0 * 10.0 + 1e-9, "{points}");
    assert!(
        (site_points - points).abs() <= 1e-9 * points,
        "{site_points} against {points}"
    );
}
