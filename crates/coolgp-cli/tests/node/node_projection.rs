//! The fleet projection (spec §14) on real nodes: one fleet-wide q(W) under the tree rule and
//! push-sum, nodes answering identically and surviving kill -9, projection groups, and peers
//! misconfigured for another mode refused.

use crate::common;
use std::time::{Duration, Instant};

use coolgp_node::status::PROJECTION_RTOL;

use common::*;

/// Every node's fused prediction at `x`, or `None` for a node that does not answer.
fn fused_predictions(fleet: &Fleet, n: usize, x: &[Vec<f64>]) -> Vec<Option<Vec<f64>>> {
    let req = coolgp_node::status::PredictRequest {
        columns: None,
        x: x.to_vec(),
        ..Default::default()
    };
    let client = fleet.client.as_ref().expect("client");
    (0..n)
        .map(|i| {
            client
                .predict(&fleet.name, i as u64, &req, Duration::from_secs(2))
                .ok()
                .map(|p| p.mean.into_iter().chain(p.var_y).collect())
        })
        .collect()
}

fn max_rel_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() / y.abs().max(1.0))
        .fold(0.0, f64::max)
}

/// Waits until every node has read its stream, represents every point (to `points_tol`
/// relative: 0 on a tree, whose sums are exact), and all nodes answer the same query
/// identically (1e-9): nodes holding the same sums predict identically.
fn wait_identical(fleet: &Fleet, total_points: usize, x: &[Vec<f64>], points_tol: f64) -> Vec<f64> {
    let all: Vec<usize> = (0..fleet.ports.len()).collect();
    wait_identical_among(fleet, total_points, x, points_tol, &all)
}

/// [`wait_identical`] for the nodes `among` only (the other nodes must still end their
/// streams and represent every point).
fn wait_identical_among(
    fleet: &Fleet,
    total_points: usize,
    x: &[Vec<f64>],
    points_tol: f64,
    among: &[usize],
) -> Vec<f64> {
    let n = fleet.ports.len();
    let total = total_points as f64;
    fleet.wait_all("the streams to end", Duration::from_secs(60), |_, s| {
        s.stream_ended && (s.fleet_points - total).abs() <= points_tol * total
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let preds = fused_predictions(fleet, n, x);
        if let Some(first) = preds[among[0]].clone() {
            let worst = among
                .iter()
                .map(|&i| &preds[i])
                .map(|p| {
                    p.as_ref()
                        .map_or(f64::INFINITY, |p| max_rel_diff(p, &first))
                })
                .fold(0.0, f64::max);
            if worst <= 1e-9 {
                return first;
            }
            assert!(
                Instant::now() < deadline,
                "fleet projection: nodes still differ by {worst:e}\n{}",
                fleet.logs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Six query points of the fleet-projection tests.
fn query_points() -> Vec<Vec<f64>> {
    (0..6)
        .map(|k| vec![-1.5 + 0.6 * k as f64, 1.0 - 0.4 * k as f64])
        .collect()
}

/// One node's data share: `(x, y)` rows.
type Rows = Vec<(Vec<f64>, f64)>;

/// Starts one learning node per share on `fleet` (batch 10): node i fuses with `neighbors(i)`,
/// connects to node i−1 and gets `extra(i)`; `durable` adds a state directory with a checkpoint
/// every 5 rounds. Returns every node's arguments (to restart one).
fn start_learning(
    fleet: &mut Fleet,
    shares: &[Rows],
    neighbors: &dyn Fn(usize) -> Vec<usize>,
    extra: &dyn Fn(usize) -> Vec<String>,
    durable: bool,
) -> Vec<Vec<String>> {
    let mut all_args = Vec::new();
    for (i, rows) in shares.iter().enumerate() {
        let csv = fleet.dir.join(format!("data{i}.csv"));
        write_csv(&csv, rows);
        let mut args = learning_args(fleet, i, &neighbors(i), 10);
        args.extend(["--data".into(), csv.display().to_string()]);
        if durable {
            args.extend([
                "--state".into(),
                fleet.dir.join(format!("state{i}")).display().to_string(),
                "--checkpoint-every".into(),
                "5".into(),
            ]);
        }
        args.extend(extra(i));
        if i > 0 {
            args.extend(["--connect".into(), endpoint(fleet.ports[i - 1])]);
        }
        fleet.start(args.clone());
        all_args.push(args);
    }
    all_args
}

/// Three learning nodes in `--projection fleet` with `extra` flags, node i connecting to
/// i−1 and fusing with `neighbors(i)`: once their streams end and messages settle they answer
/// a query identically; a kill -9 and restart of node 1 changes nothing. Returns the fleet
/// (still running), the shares and the query points.
fn fleet_survives_a_kill(
    name: &str,
    neighbors: fn(usize) -> Vec<usize>,
    extra: &[&str],
    points_tol: f64,
) -> (Fleet, Vec<Rows>, Vec<Vec<f64>>) {
    let n = 3;
    let shares: Vec<_> = (0..n).map(|i| make_rows(700 + i as u64, 40)).collect();
    let total_points: usize = shares.iter().map(Vec::len).sum();
    let x = query_points();
    let mut fleet = Fleet::new(name, n);
    let flags = |_: usize| {
        ["--projection", "fleet"]
            .iter()
            .chain(extra)
            .map(|a| a.to_string())
            .collect()
    };
    let all_args = start_learning(&mut fleet, &shares, &neighbors, &flags, true);
    fleet.connect_client();
    let before = wait_identical(&fleet, total_points, &x, points_tol);
    let st = fleet.status(0, false).expect("status");
    assert_eq!(st.projection, "fleet");
    // Their q(W) agree within the dashboard's tolerance (digests may differ in the last bits:
    // the nodes add the same sums in different orders).
    let s0 = st.projection_summary.clone().expect("a summary");
    for i in 1..n {
        let s = fleet.status(i, false).expect("status");
        assert!(
            s.projection_summary
                .as_ref()
                .is_some_and(|p| p.agrees_with(&s0, PROJECTION_RTOL)),
            "{name}: node {i} holds another q(W): {:?} vs {s0:?}",
            s.projection_summary
        );
    }
    // Let a checkpoint with the settled inbox be written, then kill -9 the middle node.
    std::thread::sleep(Duration::from_millis(600));
    fleet.nodes[1].kill9();
    std::thread::sleep(Duration::from_millis(300));
    fleet.nodes[1] = NodeProc::start(all_args[1].clone(), fleet.dir.join("node1.log"));
    let after = wait_identical(&fleet, total_points, &x, points_tol);
    let d = max_rel_diff(&after, &before);
    assert!(
        d <= 1e-9,
        "{name}: the restart changed the fleet's predictions by {d:e}"
    );
    (fleet, shares, x)
}

/// A learning node's flags (the common ones without `--no-learn`).
fn learning_args(fleet: &Fleet, i: usize, neighbors: &[usize], batch: usize) -> Vec<String> {
    fleet
        .base_args(i, neighbors, batch, 40)
        .into_iter()
        .filter(|a| a != "--no-learn")
        .collect()
}

#[test]
fn fleet_projection_nodes_answer_identically_and_survive_a_kill() {
    // Spec §14 in the node: three learning nodes on a path in `--projection fleet` answer the
    // same query identically once their streams end and messages settle; per-agent nodes do
    // not. A kill -9 and restart of the middle node changes nothing.
    let _g = serial();
    let t0 = Instant::now();
    let n = 3;
    let (fleet, shares, x) = fleet_survives_a_kill("fleetw", |i| path_neighbors(i, 3), &[], 0.0);
    let total_points: usize = shares.iter().map(Vec::len).sum();
    drop(fleet);

    // The same fleet in the paper's per-agent mode: the nodes' own q(W) differ.
    let mut fleet = Fleet::new("peragent", n);
    start_learning(
        &mut fleet,
        &shares,
        &|i| path_neighbors(i, n),
        &|_| Vec::new(),
        false,
    );
    fleet.connect_client();
    fleet.wait_all("the streams to end", Duration::from_secs(60), |_, s| {
        s.stream_ended && s.fleet_points == total_points as f64
    });
    let preds = fused_predictions(&fleet, n, &x);
    let p0 = preds[0].clone().expect("node 0 answers");
    let p2 = preds[2].clone().expect("node 2 answers");
    assert!(
        max_rel_diff(&p2, &p0) > 1e-6,
        "per-agent nodes should differ in their own q(W)"
    );
    eprintln!(
        "fleet projection node test: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn fleet_projection_under_push_sum_nodes_agree_and_survive_a_kill() {
    // Spec §14 with push-sum (§7 alternative 2): the sites ride in every push-sum message and
    // the node's checkpoint stores the site parts of the push-sum state; three nodes on a
    // triangle (a cycle) answer identically once settled, and a kill -9 changes nothing.
    let _g = serial();
    let t0 = Instant::now();
    let (fleet, _, _) = fleet_survives_a_kill(
        "fleetps",
        |i| (0..3).filter(|&j| j != i).collect(),
        &["--fusion", "push-sum", "--fleet-size", "3"],
        1e-9,
    );
    drop(fleet);
    eprintln!(
        "fleet projection push-sum node test: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn projection_groups_share_q_w_within_a_group_and_fuse_q_u_across() {
    // Spec §14 with groups in the node: a path 0 – 1 – 2 with nodes 0 and 2 in group "a" and
    // node 1 in group "b" (so group a's site sums cross a node of group b). Once settled,
    // nodes 0 and 2 answer identically (same group sums, same fused q(u)) while node 1, with
    // its own q(W), differs; a kill -9 and restart of node 1 changes nothing. A node that
    // fuses only within its group refuses a neighbour of another group.
    let _g = serial();
    let t0 = Instant::now();
    let n = 3;
    let shares: Vec<_> = (0..n).map(|i| make_rows(900 + i as u64, 40)).collect();
    let total_points: usize = shares.iter().map(Vec::len).sum();
    let x = query_points();
    let mut fleet = Fleet::new("groups", n);
    let group = |i: usize, extra: &[&str]| -> Vec<String> {
        let name = if i == 1 { "b" } else { "a" };
        ["--projection", "fleet", "--projection-group", name]
            .iter()
            .chain(extra)
            .map(|a| a.to_string())
            .collect()
    };
    let path = |i| path_neighbors(i, n);
    let all_args = start_learning(&mut fleet, &shares, &path, &|i| group(i, &[]), true);
    fleet.connect_client();
    let before = wait_identical_among(&fleet, total_points, &x, 0.0, &[0, 2]);
    let st = fleet.status(0, false).expect("status");
    assert_eq!(st.projection_group.as_deref(), Some("a"));
    assert!(st.rejected.is_empty(), "rejected {:?}", st.rejected);
    let p1 = fused_predictions(&fleet, n, &x)[1]
        .clone()
        .expect("node 1 answers");
    assert!(
        max_rel_diff(&p1, &before) > 1e-6,
        "node 1 (group b) should predict with its own group's q(W)"
    );
    std::thread::sleep(Duration::from_millis(600));
    fleet.nodes[1].kill9();
    std::thread::sleep(Duration::from_millis(300));
    fleet.nodes[1] = NodeProc::start(all_args[1].clone(), fleet.dir.join("node1.log"));
    let after = wait_identical_among(&fleet, total_points, &x, 0.0, &[0, 2]);
    let d = max_rel_diff(&after, &before);
    assert!(
        d <= 1e-9,
        "the restart changed group a's predictions by {d:e}"
    );
    drop(fleet);

    // `--fuse-groups within`: node 0 (group a) refuses node 1's sums (group b).
    let mut fleet = Fleet::new("within", 2);
    let within = |i| group(i, &["--fuse-groups", "within"]);
    start_learning(
        &mut fleet,
        &shares[..2],
        &|i| path_neighbors(i, 2),
        &within,
        false,
    );
    fleet.connect_client();
    let sts = fleet.wait_all(
        "foreign sums to be refused",
        Duration::from_secs(60),
        |_, s| s.stream_ended && s.rejected.get("foreign_group").copied().unwrap_or(0) > 0,
    );
    for s in &sts {
        assert_eq!(s.neighbors_heard, 0, "nothing of another group is accepted");
    }
    eprintln!(
        "projection groups node test: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn a_mixed_fleet_rejects_misconfigured_peers_as_bad_site_not_oversize() {
    // NODE.md §12: every node of a fleet runs the same projection mode and either names a
    // projection group or none does. On a path 0 – 1 – 2 with node 0 per-agent, node 1 in
    // the fleet projection without a group and node 2 with group "g", every message is of
    // the wrong kind for its receiver: each must reach the agent and be rejected as
    // `bad_site` with a logged reason, never dropped unread as `oversize` (a per-agent node
    // used to allow no site bytes, a node without a group a single site).
    let _g = serial();
    let n = 3;
    let shares: Vec<_> = (0..n).map(|i| make_rows(950 + i as u64, 20)).collect();
    let mut fleet = Fleet::new("mixed", n);
    let flags = |i: usize| -> Vec<String> {
        let f: &[&str] = match i {
            0 => &[],
            1 => &["--projection", "fleet"],
            _ => &["--projection", "fleet", "--projection-group", "g"],
        };
        f.iter().map(|a| a.to_string()).collect()
    };
    start_learning(
        &mut fleet,
        &shares,
        &|i| path_neighbors(i, n),
        &flags,
        false,
    );
    fleet.connect_client();
    let sts = fleet.wait_all(
        "every node to reject its neighbours' messages",
        Duration::from_secs(60),
        |_, s| s.stream_ended && s.rejected.get("bad_site").copied().unwrap_or(0) > 0,
    );
    for s in &sts {
        assert_eq!(
            s.rejected.get("oversize"),
            None,
            "node {} dropped messages unread: {:?}",
            s.model.id,
            s.rejected
        );
        assert_eq!(
            s.neighbors_heard, 0,
            "node {} accepted a message",
            s.model.id
        );
    }
    // The status shows each node's projection and the scales it predicts with.
    let modes: Vec<(&str, Option<&str>)> = sts
        .iter()
        .map(|s| (s.projection.as_str(), s.projection_group.as_deref()))
        .collect();
    assert_eq!(
        modes,
        [("per-agent", None), ("fleet", None), ("fleet", Some("g"))]
    );
    let memories: Vec<Option<&str>> = sts.iter().map(|s| s.site_memory.as_deref()).collect();
    assert_eq!(memories, [None, Some("stream"), Some("stream")]);
    for s in &sts {
        let ok = |v: Option<f64>| v.is_some_and(|v| v.is_finite() && v > 0.0);
        assert!(
            ok(s.sigma_s) && ok(s.sigma_n),
            "{:?} {:?}",
            s.sigma_s,
            s.sigma_n
        );
        assert!(s.projection_summary.is_some());
    }
    // Without --state, a clean shutdown says that nothing is written.
    let code = fleet.nodes[2].sigterm().expect("node 2 exits");
    assert!(code.success(), "{code:?}");
    for i in 0..n {
        let log =
            std::fs::read_to_string(fleet.dir.join(format!("node{i}.log"))).unwrap_or_default();
        assert!(
            log.contains("rejected message") && log.contains("bad_site"),
            "node {i} did not log the reject:\n{log}"
        );
        // The start line names the projection mode and group.
        let started = log
            .lines()
            .find(|l| l.contains("node started"))
            .unwrap_or_default();
        let (projection, group) = [("per-agent", "none"), ("fleet", "none"), ("fleet", "g")][i];
        for (key, value) in [("projection", projection), ("projection_group", group)] {
            assert!(
                started.contains(&format!("{key}={value}"))
                    || started.contains(&format!("{key}=\"{value}\"")),
                "node {i}: {key} {value} in {started}"
            );
        }
    }
    let log = std::fs::read_to_string(fleet.dir.join("node2.log")).unwrap_or_default();
    assert!(
        log.contains("no --state, so no checkpoint is written"),
        "{log}"
    );
    assert!(!log.contains("final checkpoint"), "{log}");
}
