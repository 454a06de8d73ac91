//! Issue 19 in the node: `coolgp query --all` (every agent asked with one zenoh get, their
//! answers combined by the fleet rule on the querier's side) against the rule applied to each
//! node's own answer (`--agent`), and a local memory that survives kill -9.

use crate::common;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// Extra flags of every node in these tests (the local memory, once the core has it).
const LOCAL: &[&str] = &[];

/// `coolgp query` with `args` (and the fleet's endpoints): the CSV's rows as numbers, and
/// stderr.
fn query(fleet: &Fleet, args: &[&str]) -> (Vec<Vec<f64>>, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(["query", "--fleet", &fleet.name]);
    for p in &fleet.ports {
        cmd.args(["--connect", &fleet.ep(*p)]);
    }
    if let Some(dir) = &fleet.tls {
        cmd.args(["--tls", &dir.display().to_string()]);
    }
    let out = cmd.args(args).output().expect("coolgp query");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "query {args:?} failed: {stderr}");
    let text = String::from_utf8(out.stdout).expect("utf8");
    let mut lines = text.lines();
    let header = lines.next().expect("header");
    let width = header.split(',').count();
    let rows: Vec<Vec<f64>> = lines
        .map(|l| l.split(',').map(|v| v.parse().expect("number")).collect())
        .collect();
    assert!(rows.iter().all(|r| r.len() == width), "{text}");
    (rows, stderr)
}

/// An answer's parts from a `--parts` row (columns 3..9).
#[derive(Clone, Copy, Debug)]
struct Parts([f64; 6]);

impl Parts {
    fn of(row: &[f64]) -> Self {
        let mut p = [0.0; 6];
        p.copy_from_slice(&row[3..9]);
        Parts(p)
    }
    fn var_y(&self) -> f64 {
        self.0[1] + self.0[3] + self.0[5]
    }
}

/// The fleet rule by brute force over the agents' answers at one point: min-variance picks
/// the answer with the smallest var_y (ties: the first in agent order).
fn min_variance(at: &[Parts]) -> Parts {
    let mut best = at[0];
    for a in &at[1..] {
        if a.var_y() < best.var_y() {
            best = *a;
        }
    }
    best
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()))
}

#[test]
fn query_all_returns_the_fleet_rule_over_the_nodes_own_answers() {
    let _g = serial();
    let t0 = Instant::now();
    let n = 3;
    // Each node holds its own region of the input space (locality: the fleet query matters).
    let shares: Vec<_> = (0..n)
        .map(|i| {
            make_rows(900 + i as u64, 40)
                .into_iter()
                .map(|(x, y)| (vec![x[0] / 3.0 + 2.0 * i as f64 - 2.0, x[1]], y))
                .collect::<Vec<_>>()
        })
        .collect();
    let total: usize = shares.iter().map(Vec::len).sum();
    let mut fleet = Fleet::new("qall", n);
    start_path(&mut fleet, &shares, 10, 40, false, LOCAL);
    fleet.wait_all("the streams to end", Duration::from_secs(60), |_, s| {
        s.stream_ended && s.fleet_points == total as f64
    });
    let qcsv = fleet.dir.join("query.csv");
    let mut text = String::from("x1,x2\n");
    for k in 0..7 {
        text.push_str(&format!("{},{}\n", -3.0 + k as f64, 0.5 - 0.2 * k as f64));
    }
    std::fs::write(&qcsv, text).expect("query csv");
    let input = qcsv.display().to_string();
    // Let the fused models settle, then ask each node and the fleet, twice if the models
    // moved in between (the answers must come from the same state).
    let mut ok = false;
    for _ in 0..5 {
        let own: Vec<Vec<Vec<f64>>> = (0..n)
            .map(|i| {
                query(
                    &fleet,
                    &["--agent", &i.to_string(), "--input", &input, "--parts"],
                )
                .0
            })
            .collect();
        let (all, stderr) = query(&fleet, &["--all", "--input", &input, "--parts"]);
        assert!(
            stderr.contains("answers from agent(s) [0, 1, 2]"),
            "stderr: {stderr}"
        );
        assert!(stderr.contains("min-variance"), "stderr: {stderr}");
        assert_eq!(all.len(), 7);
        ok = all.iter().enumerate().all(|(r, row)| {
            let at: Vec<Parts> = own.iter().map(|rows| Parts::of(&rows[r])).collect();
            let want = min_variance(&at);
            let got = Parts::of(row);
            (0..6).all(|k| close(got.0[k], want.0[k]))
                && close(row[0], want.0[0] + want.0[2])
                && close(row[2], want.var_y())
        });
        if ok {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(
        ok,
        "query --all is not the fleet rule over the nodes' own answers"
    );
    // Without --parts the three columns only; an unknown rule is refused by name.
    let (rows, _) = query(&fleet, &["--all", "--input", &input]);
    assert_eq!(rows[0].len(), 3);
    let out = Command::new(BIN)
        .args([
            "query",
            "--fleet",
            &fleet.name,
            "--all",
            "--fleet-rule",
            "vote",
        ])
        .args(["--input", &input, "--connect", &fleet.ep(fleet.ports[0])])
        .output()
        .expect("coolgp query");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("vote"));
    eprintln!("query --all test: {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn query_all_says_when_no_agent_answered() {
    let _g = serial();
    let fleet = Fleet::new("qnone", 1);
    let dir = fleet.dir.join("q.csv");
    std::fs::write(&dir, "x1,x2\n0,0\n").expect("csv");
    let out = Command::new(BIN)
        .args([
            "query",
            "--fleet",
            &fleet.name,
            "--all",
            "--timeout-ms",
            "1200",
        ])
        .args(["--input", &dir.display().to_string()])
        .output()
        .expect("coolgp query");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("coolgp/{}/*/predict", fleet.name)),
        "stderr: {stderr}"
    );
}
