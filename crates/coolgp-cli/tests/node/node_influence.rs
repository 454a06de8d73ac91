//! Bounded influence on real nodes (issue 29, docs/MEMBERS.md §6): nodes 0 – 1 – 2 on a TLS
//! path; node 3, a member with a certificate, is node 2's other neighbour and sends its own
//! sums by hand, signed with its key. Inflated ×100, capped by `--influence-cap` (node 2's
//! precision-per-row check) or slowed by `--row-rate` (its claimed rows' growth per round).

use crate::common;
use crate::node_security::{put, session_as, signer_from, tls_key};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coolgp::protocol::codec;
use coolgp::protocol::Body;
use coolgp_node::transport::Role;
use coolgp_node::PredictRequest;

use common::*;

/// Rows per block of every node.
const BATCH: usize = 10;

/// Starts nodes 0 – 1 – 2 (40 rows each, node 2 also neighbour of the hand-driven node 3) with
/// `extra` flags on every node; returns the fleet and `send(scale, points)`, which sends node
/// 3's own excess (its 40 rows, read 1 too high) times `scale`, claiming `points` rows.
fn liar_fleet(tag: &str, extra: &[&str]) -> (Fleet, impl FnMut(f64, f64)) {
    let shares: Vec<_> = (0..3).map(|i| make_rows(700 + i as u64, 40)).collect();
    let mut fleet = Fleet::new_tls(tag, 3, &[0, 1, 2, 3]);
    for (i, rows) in shares.iter().enumerate() {
        let csv = fleet.dir.join(format!("data{i}.csv"));
        write_csv(&csv, rows);
        let nb = if i == 2 {
            vec![1, 3]
        } else {
            path_neighbors(i, 3)
        };
        let mut args = fleet.base_args(i, &nb, BATCH, 40);
        args.extend(["--data".into(), csv.display().to_string()]);
        args.extend(extra.iter().map(|s| s.to_string()));
        if i > 0 {
            args.extend(["--connect".into(), fleet.ep(fleet.ports[i - 1])]);
        }
        fleet.start(args);
    }
    fleet.connect_client();
    let liar: Vec<_> = make_rows(703, 40)
        .into_iter()
        .map(|(x, y)| (x, y + 1.0))
        .collect();
    let e3 = own_excess(&vocab(), 3, &liar, BATCH);
    let member = session_as(&fleet.client_args(), Role::Node(3));
    let signer = signer_from(&tls_key(&fleet, 3));
    let key = format!("coolgp/{}/3/msg/2", fleet.name);
    let mut round = 0u64;
    let send = move |scale: f64, points: f64| {
        round += 1;
        let msg = coolgp::Message {
            header: coolgp::protocol::Header {
                fingerprint: vocab().fingerprint(),
                sender: 3,
                receiver: 2,
                round,
                version: 1,
            },
            body: Body::Tree {
                excess: Arc::new(e3.scaled(scale)),
                points,
            },
            projection: None,
            sites: None,
        };
        put(&member, key.clone(), signer.seal(codec::encode(&msg)));
    };
    (fleet, send)
}

/// Node 0's fused mean at a few places once its fused model represents `points` rows, while
/// `send` keeps the liar's message coming; with `capped`, also once node 2 has capped it.
fn mean_at_0_when(fleet: &Fleet, points: f64, capped: bool, send: &mut dyn FnMut()) -> Vec<f64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        send();
        std::thread::sleep(Duration::from_millis(150));
        let ok0 = fleet
            .status(0, false)
            .is_some_and(|s| s.fleet_points == points);
        let ok2 = !capped
            || fleet
                .status(2, false)
                .is_some_and(|s| s.capped.contains_key(&3));
        if ok0 && ok2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "node 0 never held {points} points"
        );
    }
    // A few more rounds, then node 0's answers.
    std::thread::sleep(Duration::from_millis(400));
    let x: Vec<Vec<f64>> = (0..7)
        .map(|k| vec![-1.5 + 0.5 * k as f64, 0.3 - 0.1 * k as f64])
        .collect();
    let req = PredictRequest {
        columns: None,
        x,
        ..Default::default()
    };
    let client = fleet.client.as_ref().expect("client");
    client
        .predict(&fleet.name, 0, &req, Duration::from_secs(2))
        .expect("node 0 answers")
        .mean
}

#[test]
fn a_member_inflating_its_own_signed_sums_adds_no_more_than_the_cap_allows() {
    // --influence-cap 2: honest, as if it held its rows twice, and x100 with its rows' count.
    // Inflated, it moves node 0's answers no more than holding its rows twice would (10%
    // slack).
    let _g = serial();
    let t0 = Instant::now();
    let (fleet, mut send) = liar_fleet("inflate", &["--influence-cap", "2"]);
    let honest = mean_at_0_when(&fleet, 160.0, false, &mut || send(1.0, 40.0));
    let twice = mean_at_0_when(&fleet, 200.0, false, &mut || send(2.0, 80.0));
    assert!(
        fleet.status(2, false).is_some_and(|s| s.capped.is_empty()),
        "an honest member is not capped"
    );
    let inflated = mean_at_0_when(&fleet, 160.0, true, &mut || send(100.0, 40.0));
    let shift = |m: &[f64]| {
        m.iter()
            .zip(&honest)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max)
    };
    let (s2, s100) = (shift(&twice), shift(&inflated));
    eprintln!(
        "inflating member: node 0 moved {s100:.4} (x100, capped at node 2) against {s2:.4} (rows twice); {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(s2 > 0.0, "holding its rows twice must move the fleet");
    assert!(s100 <= 1.1 * s2, "x100 moved {s100}, rows twice {s2}");
}

#[test]
fn a_member_claiming_rows_faster_than_the_row_rate_is_slowed_to_it() {
    // --row-rate 200 (rows a round a side may add): the honest stream (10 rows a round a node,
    // 10x below the rate, so a node whose rounds stall under load is not capped) is never
    // touched; node 3 claiming 1,000x its rows with their precision grows node 0's fused
    // points by at most 200 a round of node 2's, not at once to 40,120.
    let _g = serial();
    let rate = 200.0;
    let (fleet, mut send) = liar_fleet("rate", &["--row-rate", "200"]);
    mean_at_0_when(&fleet, 160.0, false, &mut || send(1.0, 40.0));
    // The rate counts node 2's rounds since it last accepted node 3's message: one honest
    // message more, then node 2's round clock.
    send(1.0, 40.0);
    std::thread::sleep(Duration::from_millis(100));
    let st2 = fleet.status(2, false).expect("node 2");
    assert!(st2.capped.is_empty(), "an honest stream is not slowed");
    let (r0, t0) = (st2.rounds_run, Instant::now());
    let mut most = 0.0f64;
    while t0.elapsed() < Duration::from_millis(1_500) {
        send(1_000.0, 40_000.0);
        std::thread::sleep(Duration::from_millis(100));
        if let Some(s) = fleet.status(0, false) {
            most = most.max(s.fleet_points);
        }
    }
    let st2 = fleet.status(2, false).expect("node 2");
    let rounds = (st2.rounds_run - r0) as f64;
    eprintln!(
        "row rate: node 0 held at most {most} points over {rounds} rounds of node 2 (claimed \
         40,120; allowed 160 + {rate} a round)"
    );
    assert!(
        st2.capped.get(&3).is_some_and(|&n| n > 0),
        "{:?}",
        st2.capped
    );
    assert!(most > 160.0, "the claim still grows, at the rate");
    assert!(
        most <= 160.0 + rate * (rounds + 4.0),
        "{most} points after {rounds} rounds"
    );
}
