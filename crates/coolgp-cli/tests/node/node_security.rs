//! Security and hardening of real `coolgp node` processes on 127.0.0.1 (random free ports,
//! each test bounded in time): mutual TLS with `coolgp certs`, signed messages, readers, and a
//! large predict query that must not stall the round loop.
//!
//! Attackers are zenoh sessions opened by the test itself with the identity under test: a
//! stranger with a certificate from another CA, a plaintext peer, a member holding node 3's
//! certificate and key, and a reader.

use crate::common;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use coolgp::protocol::codec::{self, encoded_len};
use coolgp::protocol::Body;
use coolgp::Excess;
use coolgp_node::auth::{Signer, SIGNATURE_LEN};
use coolgp_node::transport::{self, Role};
use coolgp_node::zenoh;
use coolgp_node::zenoh::Wait;
use coolgp_node::{client, PredictRequest, Status, ZenohArgs};

use common::*;

/// Runs `coolgp ARGS` and kills it after `secs` seconds if it has not exited.
fn run_bounded(args: &[String], secs: u64) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn coolgp");
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    child.wait_with_output().expect("coolgp output")
}

/// A zenoh session of the test with the identity `role` and the flags `z` (mutual TLS with
/// `z.tls`).
pub(crate) fn session_as(z: &ZenohArgs, role: Role) -> zenoh::Session {
    let c = transport::zenoh_config(z, role).expect("zenoh config");
    zenoh::open(c).wait().expect("session")
}

/// Peers the session has a link with.
fn peer_count(s: &zenoh::Session) -> usize {
    s.info().peers_zid().wait().count()
}

pub(crate) fn put(s: &zenoh::Session, key: String, bytes: Vec<u8>) {
    s.put(key, bytes)
        .congestion_control(zenoh::qos::CongestionControl::Block)
        .wait()
        .expect("put");
}

pub(crate) fn signer_from(path: &Path) -> Signer {
    let der = coolgp_node::certs::read_pem(path, "PRIVATE KEY").expect("key file");
    Signer::from_pkcs8(&der, path).expect("Ed25519 key")
}

/// One node's data rows `(x, y)`.
type Rows = Vec<(Vec<f64>, f64)>;

/// Starts a TLS path 0-1-…-(n−1) (certificates for `certs`), waits until every node holds
/// the exact `T_g − T0`; returns the fleet, the reference and the shares.
fn converged_tls_path(tag: &str, n: usize, certs: &[u64], seed: u64) -> (Fleet, Excess, Vec<Rows>) {
    let batch = 10;
    let shares: Vec<_> = (0..n).map(|i| make_rows(seed + i as u64, 40)).collect();
    let total: usize = shares.iter().map(Vec::len).sum();
    let want = reference(&vocab(), &shares, batch);
    let mut fleet = Fleet::new_tls(tag, n, certs);
    start_path(&mut fleet, &shares, batch, 40, false, &[]);
    fleet.wait_all(
        "the TLS path to converge",
        Duration::from_secs(60),
        |i, s| done_and_exact(s, shares[i].len(), total, &want) && s.tls,
    );
    (fleet, want, shares)
}

fn label(s: &Status, l: &str) -> u64 {
    s.rejected.get(l).copied().unwrap_or(0)
}

/// A captured honest tree message with a raised round and its excess and points scaled by 3
/// (still finite, symmetric and PSD): the format-1 bytes.
fn forged_from(signed: &[u8]) -> Vec<u8> {
    let mut v1 = signed[..signed.len() - SIGNATURE_LEN].to_vec();
    v1[3] = 1;
    let mut msg = codec::decode(&v1).expect("an honest message decodes");
    msg.header.round += 1000;
    if let Body::Tree { excess, points } = &mut msg.body {
        *excess = Arc::new(excess.scaled(3.0));
        *points *= 3.0;
    }
    codec::encode(&msg)
}

#[test]
fn a_stranger_with_a_certificate_from_another_ca_gets_no_link_and_changes_nothing() {
    let _g = serial();
    let t0 = Instant::now();
    let (fleet, want, shares) = converged_tls_path("stranger", 2, &[0, 1], 500);
    let total: usize = shares.iter().map(Vec::len).sum();
    // Another CA issuing the very same names: fleet, node ids.
    let other = fleet.dir.join("other-ca");
    coolgp_ok(&[
        "certs",
        "--fleet",
        &fleet.name,
        "--nodes",
        "0,1",
        "--out",
        &other.display().to_string(),
    ]);
    let z = ZenohArgs {
        connect: fleet.ports.iter().map(|p| fleet.ep(*p)).collect(),
        tls: Some(other.clone()),
        ..ZenohArgs::default()
    };
    let stranger = session_as(&z, Role::Node(1));
    let before = fleet.status(0, true).expect("status");
    // It signs with its own node-1 key a forged message "from 1" to 0.
    let forged = hostile(&vocab(), 1, 0, u64::MAX - 1, Excess::zeros(M), None);
    let sealed = signer_from(&other.join("node-1.key")).seal(forged);
    for _ in 0..5 {
        put(
            &stranger,
            format!("coolgp/{}/1/msg/0", fleet.name),
            sealed.clone(),
        );
    }
    let asked = stranger
        .get(format!("coolgp/{}/0/status", fleet.name))
        .timeout(Duration::from_millis(1500))
        .wait()
        .expect("get");
    let replies = std::iter::from_fn(|| asked.recv().ok()).count();
    assert_eq!(replies, 0, "the stranger got a status reply");
    assert_eq!(peer_count(&stranger), 0, "the stranger has a link");
    let after = fleet.status(0, true).expect("status");
    assert!(after.rejected.is_empty(), "{:?}", after.rejected);
    assert_eq!(after.fleet_points, total as f64);
    assert!(fused_err(&after, &want) <= 1e-9);
    assert_eq!(after.fused, before.fused, "the model changed");
    drop(stranger);
    eprintln!("stranger test: {:.1} s", t0.elapsed().as_secs_f64());
}

pub(crate) fn tls_key(fleet: &Fleet, id: u64) -> PathBuf {
    coolgp_node::tls::node_key(fleet.tls.as_ref().expect("TLS fleet"), id)
}

#[test]
fn a_member_forging_another_members_messages_changes_nothing() {
    let _g = serial();
    let t0 = Instant::now();
    // Nodes 0-1-2 run; node 3 is a member (it has a certificate) that forges node 2's messages.
    let (fleet, want, shares) = converged_tls_path("forge", 3, &[0, 1, 2, 3], 600);
    let total: usize = shares.iter().map(Vec::len).sum();
    let z = fleet.client_args();
    let member = session_as(&z, Role::Node(3));
    let captured: Arc<Mutex<Vec<Vec<u8>>>> = Arc::new(Mutex::new(Vec::new()));
    let cap = captured.clone();
    let _sub = member
        .declare_subscriber(format!("coolgp/{}/2/msg/1", fleet.name))
        .callback(move |s| {
            let mut c = cap.lock().unwrap_or_else(|p| p.into_inner());
            if c.len() < 3 {
                c.push(s.payload().to_bytes().into_owned());
            }
        })
        .wait()
        .expect("subscriber");
    let deadline = Instant::now() + Duration::from_secs(20);
    while captured.lock().map_or(0, |c| c.len()) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let honest = captured
        .lock()
        .ok()
        .and_then(|c| c.first().cloned())
        .expect("no message 2 → 1 captured by the member");
    assert_eq!(
        honest[3], 2,
        "messages of a TLS fleet are signed (format 2)"
    );
    let forged = forged_from(&honest);
    let key = format!("coolgp/{}/2/msg/1", fleet.name);
    // Signed with node 3's own key, unsigned, and an honest signature over other bytes.
    let mine = signer_from(&tls_key(&fleet, 3));
    put(&member, key.clone(), mine.seal(forged.clone()));
    put(&member, key.clone(), forged.clone());
    let mut spliced = mine.seal(forged);
    let n = spliced.len();
    spliced[n - SIGNATURE_LEN..].copy_from_slice(&honest[honest.len() - SIGNATURE_LEN..]);
    put(&member, key, spliced);
    let at_forgery = fleet.status(1, false).expect("status");
    // Reference: the forgery leaves node 1 at T_g; node 2's honest messages keep arriving.
    let sts = fleet.wait_all(
        "the forgeries to be rejected",
        Duration::from_secs(30),
        |i, s| {
            let exact = s.fleet_points == total as f64 && fused_err(s, &want) <= 1e-9;
            if i != 1 {
                return exact;
            }
            exact
                && label(s, "signature") >= 3
                && s.messages_accepted >= at_forgery.messages_accepted + 10
                && s.heard_ms_ago.get(&2).is_some_and(|ms| *ms < 1000)
        },
    );
    let r = &sts[1].rejected;
    assert_eq!(r.len(), 1, "only signature rejects expected: {r:?}");
    assert_eq!(label(&sts[1], "stale"), 0);
    for i in [0, 2] {
        assert!(
            sts[i].rejected.is_empty(),
            "node {i}: {:?}",
            sts[i].rejected
        );
    }
    eprintln!(
        "forgery test: rejected {r:?}, {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn a_plaintext_peer_cannot_join_a_tls_fleet() {
    let _g = serial();
    let (fleet, want, _) = converged_tls_path("plain", 2, &[0, 1], 700);
    let before = fleet.status(0, true).expect("status");
    // A plaintext client dialling the tls/ ports with tcp/.
    let z = ZenohArgs {
        connect: fleet.ports.iter().map(|p| endpoint(*p)).collect(),
        ..ZenohArgs::default()
    };
    let plain = client::BlockingClient::connect(&z).expect("a session opens without links");
    for _ in 0..5 {
        put(
            plain.session(),
            format!("coolgp/{}/1/msg/0", fleet.name),
            hostile(&vocab(), 1, 0, u64::MAX - 1, Excess::zeros(M), None),
        );
    }
    let e = plain
        .status(&fleet.name, 0, false, Duration::from_millis(1500))
        .map(|_| ())
        .expect_err("a plaintext client got a status reply");
    assert!(e.to_string().contains("no reply"), "{e}");
    assert_eq!(
        peer_count(plain.session()),
        0,
        "the plaintext peer has a link"
    );
    let after = fleet.status(0, true).expect("status");
    assert!(after.rejected.is_empty(), "{:?}", after.rejected);
    assert_eq!(after.fused, before.fused);
    assert!(fused_err(&after, &want) <= 1e-9);
    // A node of the fleet cannot be started on a plain endpoint while --tls is set.
    let pki = fleet.tls.clone().expect("pki");
    let args: Vec<String> = [
        "node",
        "--id",
        "1",
        "--fleet",
        &fleet.name,
        "--inputs",
        "x1,x2",
        "--tls",
        &pki.display().to_string(),
        "--listen",
        &endpoint(free_port()),
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    let out = run_bounded(&args, 20);
    assert!(!out.status.success(), "a tcp/ listener was accepted");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a tls/ endpoint"), "{err}");
}

#[test]
fn a_reader_can_query_and_read_status_but_not_publish() {
    let _g = serial();
    let (fleet, want, shares) = converged_tls_path("reader", 2, &[0, 1], 800);
    let total: usize = shares.iter().map(Vec::len).sum();
    let pki = fleet.tls.clone().expect("pki");
    let common: Vec<String> = [
        "--tls",
        &pki.display().to_string(),
        "--connect",
        &fleet.ep(fleet.ports[0]),
        "--fleet",
        &fleet.name,
        "--agent",
        "1",
        "--timeout-ms",
        "8000",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    let status_out = run_bounded(&[vec!["status".to_string()], common.clone()].concat(), 20);
    assert!(
        status_out.status.success(),
        "{}",
        String::from_utf8_lossy(&status_out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&status_out.stdout).expect("status JSON");
    assert_eq!(v["tls"], serde_json::Value::Bool(true));
    assert_eq!(v["fleet_points"].as_f64(), Some(total as f64));
    let qcsv = fleet.dir.join("q.csv");
    write_csv(&qcsv, &make_rows(9, 4));
    let q = [
        vec![
            "query".to_string(),
            "--input".into(),
            qcsv.display().to_string(),
        ],
        common,
    ]
    .concat();
    let query_out = run_bounded(&q, 20);
    assert!(
        query_out.status.success(),
        "{}",
        String::from_utf8_lossy(&query_out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&query_out.stdout).lines().count(),
        5
    );
    // The reader publishes "from 1" to 0: signed with its own key, and unsigned.
    let before = fleet.status(0, true).expect("status");
    let reader = fleet.client.as_ref().expect("reader client");
    let forged = hostile(&vocab(), 1, 0, u64::MAX - 1, Excess::zeros(M), None);
    let key = format!("coolgp/{}/1/msg/0", fleet.name);
    put(
        reader.session(),
        key.clone(),
        signer_from(&pki.join("reader.key")).seal(forged.clone()),
    );
    put(reader.session(), key, forged);
    let sts = fleet.wait_all(
        "the reader's messages rejected",
        Duration::from_secs(20),
        |i, s| i != 0 || label(s, "signature") >= 2,
    );
    assert_eq!(sts[0].rejected.len(), 1, "{:?}", sts[0].rejected);
    assert_eq!(sts[0].fused, before.fused, "the model changed");
    assert!(fused_err(&sts[0], &want) <= 1e-9);
}

#[test]
fn a_five_node_tls_fleet_converges_exactly_and_admits_a_node_added_later() {
    let _g = serial();
    let t0 = Instant::now();
    let (n, batch) = (5, 10);
    let shares: Vec<_> = (0..n)
        .map(|i| make_rows(900 + i as u64, 40 + 10 * i))
        .collect();
    let total: usize = shares.iter().map(Vec::len).sum();
    let want = reference(&vocab(), &shares, batch);
    // Certificates for 0..3 only: node 4 is added with `certs --add` while the fleet runs, and
    // node 3 (its neighbour) must accept it without a restart.
    let mut fleet = Fleet::new_tls("tls5", n, &[0, 1, 2, 3]);
    let pki = fleet.tls.clone().expect("pki");
    for (i, rows) in shares.iter().enumerate() {
        let csv = fleet.dir.join(format!("data{i}.csv"));
        write_csv(&csv, rows);
        let mut args = fleet.base_args(i, &path_neighbors(i, n), batch, 40);
        args.extend(["--data".into(), csv.display().to_string()]);
        if i > 0 {
            args.extend(["--connect".into(), fleet.ep(fleet.ports[i - 1])]);
        }
        if i == n - 1 {
            std::thread::sleep(Duration::from_millis(1500));
            coolgp_ok(&["certs", "--add", "4", "--out", &pki.display().to_string()]);
        }
        fleet.start(args);
    }
    fleet.connect_client();
    // Reference: spec §7 — exact on trees, as the plaintext path test.
    let sts = fleet.wait_all(
        "the TLS path to converge",
        Duration::from_secs(60),
        |i, s| done_and_exact(s, shares[i].len(), total, &want),
    );
    let signed_len = (encoded_len(M, None) + SIGNATURE_LEN) as u64;
    for (i, s) in sts.iter().enumerate() {
        assert!(s.tls);
        assert_eq!(s.bytes_sent, s.messages_sent * signed_len, "node {i}");
        // Node 3 may have heard node 4 before its roster reload was due.
        let allowed = if i == 3 { 1 } else { 0 };
        assert!(s.rejected.len() <= allowed, "node {i}: {:?}", s.rejected);
        assert_eq!(s.rejected.len(), usize::from(label(s, "signature") > 0));
    }
    eprintln!(
        "5-node TLS test: node 3 rejected {:?}, {:.1} s",
        sts[3].rejected,
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn rounds_keep_running_while_a_100k_row_query_is_computed() {
    let _g = serial();
    let mut fleet = Fleet::new("bigquery", 1);
    let mut args = fleet.base_args(0, &[], 10, 20);
    // m = 50: a 100k-row prediction takes O(n m²) work, long enough to watch.
    let i = args.iter().position(|a| a == "--inducing").expect("flag");
    args[i + 1] = "50".into();
    args.extend(["--inputs".into(), "x1,x2".into()]);
    fleet.start(args);
    fleet.connect_client();
    fleet.wait_all("the node to start", Duration::from_secs(20), |_, s| {
        s.rounds_run > 0
    });
    let rows: Vec<Vec<f64>> = make_rows(5, 100_000).into_iter().map(|r| r.0).collect();
    let z = fleet.client_args();
    let name = fleet.name.clone();
    let asker = std::thread::spawn(move || {
        let c = client::BlockingClient::connect(&z).expect("client");
        let req = |x: Vec<Vec<f64>>| PredictRequest {
            columns: None,
            x,
            ..Default::default()
        };
        let too_many = c.predict(
            &name,
            0,
            &req(vec![vec![0.0, 0.0]; 100_001]),
            Duration::from_secs(60),
        );
        let big = c.predict(&name, 0, &req(rows), Duration::from_secs(120));
        (too_many.map(|_| ()), big.map(|p| p.mean.len()))
    });
    // While the big query is computed (queries_running = 1, none answered since), the round
    // counter must advance: the loop is not blocked.
    let mut first: Option<Status> = None;
    let mut seen_rounds = 0;
    while !asker.is_finished() {
        if let Some(s) = fleet.status(0, false).filter(|s| s.queries_running == 1) {
            match &first {
                Some(f) if s.queries_answered == f.queries_answered => {
                    seen_rounds = seen_rounds.max(s.rounds_run - f.rounds_run);
                }
                _ => first = Some(s),
            }
        }
        std::thread::sleep(Duration::from_millis(30));
    }
    let (too_many, big) = asker.join().expect("query thread");
    let e = too_many.expect_err("100 001 rows accepted");
    assert!(e.to_string().contains("exceed the limit"), "{e}");
    assert_eq!(big.expect("the big query failed"), 100_000);
    assert!(
        first.is_some(),
        "no status answered while the big query ran (the loop was blocked)"
    );
    assert!(
        seen_rounds >= 3,
        "only {seen_rounds} rounds ran during the big query"
    );
    let s = fleet.status(0, false).expect("status");
    assert_eq!((s.queries_running, s.queries_answered), (0, 2));
    eprintln!("big query: {seen_rounds} rounds ran while it was computed");
}

/// An in-process zenoh router with node `id`'s certificate, listening on `port` and
/// connecting to `connect`.
fn router(fleet: &Fleet, id: u64, port: u16, connect: Option<u16>) -> zenoh::Session {
    let z = ZenohArgs {
        listen: vec![fleet.ep(port)],
        connect: connect.map(|p| fleet.ep(p)).into_iter().collect(),
        tls: fleet.tls.clone(),
        ..ZenohArgs::default()
    };
    let mut c = transport::zenoh_config(&z, Role::Node(id)).expect("router config");
    c.insert_json5("mode", "\"router\"").expect("router mode");
    zenoh::open(c).wait().expect("router")
}

#[test]
fn signatures_hold_through_zenoh_routers() {
    let _g = serial();
    let t0 = Instant::now();
    let (n, batch) = (2, 10);
    let shares: Vec<_> = (0..n).map(|i| make_rows(1000 + i as u64, 40)).collect();
    let total: usize = shares.iter().map(Vec::len).sum();
    let want = reference(&vocab(), &shares, batch);
    // Two sites: node 0 behind router A, node 1 behind router B, the routers linked (they hold
    // the fleet certificates of nodes 8 and 9). Without gossip each node's only link is to its
    // site's router, so every message 0 <-> 1 crosses both routers.
    let mut fleet = Fleet::new_tls("routers", n, &[0, 1, 8, 9]);
    let (pa, pb) = (free_port(), free_port());
    let router_a = router(&fleet, 8, pa, None);
    let router_b = router(&fleet, 9, pb, Some(pa));
    let zcfg = fleet.dir.join("no-gossip.json5");
    std::fs::write(&zcfg, "{ scouting: { gossip: { enabled: false } } }\n").expect("config");
    for (i, rows) in shares.iter().enumerate() {
        let csv = fleet.dir.join(format!("data{i}.csv"));
        write_csv(&csv, rows);
        let mut args = fleet.base_args(i, &path_neighbors(i, n), batch, 40);
        args.extend(["--data".into(), csv.display().to_string()]);
        args.extend(["--connect".into(), fleet.ep(if i == 0 { pa } else { pb })]);
        args.extend(["--zenoh-config".into(), zcfg.display().to_string()]);
        fleet.start(args);
    }
    // The reader reaches node 1 only through the routers (and node 0, a peer of its own site,
    // directly: a router does not relay between two peers of its own site).
    let z = ZenohArgs {
        connect: vec![fleet.ep(pa), fleet.ep(fleet.ports[0])],
        tls: fleet.tls.clone(),
        ..ZenohArgs::default()
    };
    fleet.client = Some(client::BlockingClient::connect(&z).expect("reader"));
    fleet.wait_all(
        "convergence through the routers",
        Duration::from_secs(60),
        |i, s| done_and_exact(s, shares[i].len(), total, &want),
    );
    // Router B holds a fleet certificate but not node 1's key: its "from 1" is rejected.
    let forged = hostile(&vocab(), 1, 0, u64::MAX - 1, Excess::zeros(M), None);
    let pki = fleet.tls.clone().expect("pki");
    put(
        &router_b,
        format!("coolgp/{}/1/msg/0", fleet.name),
        signer_from(&coolgp_node::tls::node_key(&pki, 9)).seal(forged),
    );
    let sts = fleet.wait_all(
        "the router's forgery rejected",
        Duration::from_secs(20),
        |i, s| {
            done_and_exact(s, shares[i].len(), total, &want)
                && (i != 0 || label(s, "signature") == 1)
        },
    );
    assert_eq!(sts[0].rejected.len(), 1, "{:?}", sts[0].rejected);
    assert!(sts[1].rejected.is_empty(), "{:?}", sts[1].rejected);
    drop(fleet);
    let _ = router_b.close().wait();
    let _ = router_a.close().wait();
    eprintln!("routers test: {:.1} s", t0.elapsed().as_secs_f64());
}
