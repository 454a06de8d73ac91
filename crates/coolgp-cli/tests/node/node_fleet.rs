//! Real `coolgp node` processes on 127.0.0.1 (random free ports), each test bounded in time:
//! a path cluster against the in-process reference `T_g = T0 + Σ E_i`, a crash and restart,
//! a hostile peer, push-sum on a ring with a link cut and restored (the fleet projection on
//! nodes: `node_projection`).
//!
//! The nodes run with `--no-learn` so that each `E_i` is a function of the node's blocks only
//! and the reference can be recomputed in-process exactly (with learning, θ and hence `E_i`
//! depend on message timing; the fused == T0 + Σ own identity is checked separately).

use crate::common;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use coolgp::faer::Mat;
use coolgp::model::Fingerprint;
use coolgp::{Agent, AgentConfig, Excess, View};
use coolgp_node::zenoh;
use coolgp_node::zenoh::Wait;

use common::*;

#[test]
fn path_cluster_of_five_matches_the_central_model_and_answers_queries() {
    let _g = serial();
    let t0 = Instant::now();
    let (n, batch) = (5, 10);
    let shares: Vec<_> = (0..n)
        .map(|i| make_rows(100 + i as u64, 40 + 10 * i))
        .collect();
    let total_points: usize = shares.iter().map(Vec::len).sum();
    let vocab = vocab();
    let want = reference(&vocab, &shares, batch);
    let mut fleet = Fleet::new("path", n);
    start_path(&mut fleet, &shares, batch, 40, true, &[]);
    // Reference: spec §7 — on a tree every agent holds T_g = T0 + Σ E_i after diam − 1 rounds.
    let sts = fleet.wait_all("the path to converge", Duration::from_secs(60), |i, s| {
        done_and_exact(s, shares[i].len(), total_points, &want)
    });
    for s in &sts {
        assert_eq!(s.model.fingerprint, vocab.fingerprint().to_string());
        assert_eq!(s.neighbors_heard, s.neighbors.len());
        assert!(
            s.rejected.is_empty(),
            "honest run rejected {:?}",
            s.rejected
        );
        assert!(s.members_alive.len() == n, "members {:?}", s.members_alive);
    }
    // Every node answers `coolgp query` with the central model's predictions.
    let rows = make_rows(7, 6);
    let qcsv = fleet.dir.join("query.csv");
    let mut text = String::from("x2,x1\n"); // columns are matched by name
    for (x, _) in &rows {
        text.push_str(&format!("{},{}\n", x[1], x[0]));
    }
    std::fs::write(&qcsv, text).expect("query csv");
    let mut central = Agent::new(
        0,
        vocab.clone(),
        D,
        AgentConfig {
            learn: false,
            ..AgentConfig::default()
        },
    )
    .expect("agent");
    for rows in &shares {
        for chunk in rows.chunks(batch) {
            let x = Mat::from_fn(chunk.len(), D, |i, j| chunk[i].0[j]);
            let y: Vec<f64> = chunk.iter().map(|r| r.1).collect();
            central.handle_block(x.as_ref(), &y).expect("block");
        }
    }
    let xq = Mat::from_fn(rows.len(), D, |i, j| rows[i].0[j]);
    let want_pred = central.predict(xq.as_ref(), View::Own).expect("predict");
    for i in 0..n {
        let out = Command::new(BIN)
            .args([
                "query",
                "--connect",
                &endpoint(fleet.ports[i]),
                "--fleet",
                &fleet.name,
            ])
            .args([
                "--agent",
                &i.to_string(),
                "--input",
                &qcsv.display().to_string(),
            ])
            .output()
            .expect("coolgp query");
        assert!(
            out.status.success(),
            "query failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).expect("utf8");
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("mean,var_f,var_y"));
        let got: Vec<Vec<f64>> = lines
            .map(|l| l.split(',').map(|v| v.parse().expect("number")).collect())
            .collect();
        assert_eq!(got.len(), rows.len());
        for (r, g) in got.iter().enumerate() {
            assert_eq!(g.len(), 3);
            assert!((g[0] - want_pred.mean[r]).abs() <= 1e-7 * (1.0 + want_pred.mean[r].abs()));
            assert!((g[1] - want_pred.var_f[r]).abs() <= 1e-7 * (1.0 + want_pred.var_f[r]));
            assert!(g[2] >= g[1]);
        }
    }
    // `coolgp status` prints the documented JSON fields.
    let out = Command::new(BIN)
        .args([
            "status",
            "--connect",
            &endpoint(fleet.ports[2]),
            "--fleet",
            &fleet.name,
            "--agent",
            "2",
        ])
        .output()
        .expect("coolgp status");
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    for k in [
        "blocks",
        "points",
        "fleet_points",
        "round",
        "fingerprint",
        "neighbors_heard",
        "rejected",
    ] {
        assert!(v.get(k).is_some(), "status lacks {k}: {v}");
    }
    // Graceful shutdown writes a final checkpoint whose metadata acknowledges every block.
    for (i, node) in fleet.nodes.iter_mut().enumerate() {
        let st = node.sigterm().expect("exit status");
        assert!(st.success(), "node {i} exited with {st:?}");
    }
    for (i, rows) in shares.iter().enumerate() {
        let meta = coolgp_node::checkpoint::read_meta(
            &fleet
                .dir
                .join(format!("state{i}"))
                .join(coolgp_node::checkpoint::FILE),
        )
        .expect("checkpoint meta");
        assert_eq!(meta.points as usize, rows.len());
        assert!(meta.stream.ended);
    }
    eprintln!("path cluster test: {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn a_node_killed_mid_stream_resumes_from_its_checkpoint() {
    let _g = serial();
    let t0 = Instant::now();
    let (n, batch) = (3, 5);
    // Node 1's stream is long (40 blocks at one block per 50 ms round) so it can be killed
    // mid-stream.
    let shares = vec![make_rows(11, 30), make_rows(12, 200), make_rows(13, 25)];
    let total_points: usize = shares.iter().map(Vec::len).sum();
    let vocab = vocab();
    let want = reference(&vocab, &shares, batch);
    let mut fleet = Fleet::new("crash", n);
    let args = start_path(&mut fleet, &shares, batch, 50, true, &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut killed_at = None;
    while Instant::now() < deadline {
        if let Some(s) = fleet.status(1, false) {
            if s.blocks >= 8 {
                assert!(!s.stream_ended, "node 1's stream ended before the kill");
                fleet.nodes[1].kill9();
                killed_at = Some(s.points);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let killed_at = killed_at.expect("node 1 never reached 8 blocks");
    std::thread::sleep(Duration::from_millis(300));
    // Restart with the same flags and state directory.
    fleet.nodes[1] = NodeProc::start(args[1].clone(), fleet.dir.join("node1.log"));
    let sts = fleet.wait_all(
        "the restarted path to converge",
        Duration::from_secs(60),
        |i, s| done_and_exact(s, shares[i].len(), total_points, &want),
    );
    assert!(sts[1].points >= killed_at);
    let log = std::fs::read_to_string(fleet.dir.join("node1.log")).unwrap_or_default();
    assert!(
        log.contains("resumed from checkpoint"),
        "node 1 did not resume:\n{log}"
    );
    eprintln!(
        "crash test: killed at {killed_at} points, {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn an_idle_node_skips_lease_checkpoints_and_resumes_past_its_rounds() {
    // Issue 31: a settled node with nothing new writes no lease checkpoint (in a fleet of
    // 1,000 they were a fifth of the idle CPU), and a node killed after skipping them still
    // resumes past every round it sent (the clock bounds them).
    let _g = serial();
    let shares = vec![make_rows(21, 30), make_rows(22, 30)];
    let total = shares.iter().map(Vec::len).sum::<usize>() as f64;
    let mut fleet = Fleet::new("lease", 2);
    let extra = ["--checkpoint-every", "3", "--local-memory", "0"];
    let args = start_path(&mut fleet, &shares, 10, 40, true, &extra);
    fleet.wait_all("the streams to end", Duration::from_secs(60), |_, s| {
        s.stream_ended && s.fleet_points == total
    });
    // Settled: the fused model holds everything and stops moving.
    std::thread::sleep(Duration::from_millis(500));
    let before = fleet.status(0, false).expect("status");
    std::thread::sleep(Duration::from_millis(1500));
    let after = fleet.status(0, false).expect("status");
    assert!(
        after.round >= before.round + 20,
        "rounds ran: {} -> {}",
        before.round,
        after.round
    );
    assert_eq!(
        after.checkpoints,
        before.checkpoints,
        "lease checkpoints written while nothing changed ({} rounds of 3-round leases)",
        after.round - before.round
    );
    fleet.nodes[0].kill9();
    std::thread::sleep(Duration::from_millis(200));
    fleet.nodes[0] = NodeProc::start(args[0].clone(), fleet.dir.join("node0.log"));
    let resumed = fleet.wait_all("node 0 to resume", Duration::from_secs(30), |i, s| {
        i != 0 || s.fleet_points == total
    });
    assert!(
        resumed[0].round > after.round,
        "resumed at round {} after sending round {}",
        resumed[0].round,
        after.round
    );
    let log = std::fs::read_to_string(fleet.dir.join("node0.log")).unwrap_or_default();
    assert!(log.contains("resumed from checkpoint"), "{log}");
}

#[test]
fn a_hostile_peer_is_rejected_counted_and_harmless() {
    let _g = serial();
    let t0 = Instant::now();
    let (n, batch) = (3, 10);
    let shares: Vec<_> = (0..n).map(|i| make_rows(200 + i as u64, 60)).collect();
    let total_points: usize = shares.iter().map(Vec::len).sum();
    let vocab = vocab();
    let want = reference(&vocab, &shares, batch);
    let mut fleet = Fleet::new("hostile", n);
    start_path(&mut fleet, &shares, batch, 40, false, &[]);
    let fleet_name = fleet.name.clone();
    // The hostile process side: a zenoh session in the fleet's key space. Capture honest
    // messages 0 → 1 for replays.
    let captured: Arc<Mutex<Vec<Vec<u8>>>> = Arc::new(Mutex::new(Vec::new()));
    let cap = captured.clone();
    let cl = fleet.client.as_ref().expect("client");
    let session = cl.session().clone();
    let _sub = session
        .declare_subscriber(format!("coolgp/{fleet_name}/0/msg/1"))
        .callback(move |s| {
            let mut c = cap.lock().unwrap_or_else(|p| p.into_inner());
            if c.len() < 5 {
                c.push(s.payload().to_bytes().into_owned());
            }
        })
        .wait()
        .expect("subscriber");
    fleet.wait_all("nodes up", Duration::from_secs(30), |_, s| {
        s.messages_accepted > 0
    });
    std::thread::sleep(Duration::from_millis(500));
    let put = |from: u64, bytes: Vec<u8>| {
        let key = format!("coolgp/{fleet_name}/{from}/msg/1");
        session
            .put(key, bytes)
            .congestion_control(zenoh::qos::CongestionControl::Block)
            .wait()
            .expect("put");
    };
    let big = u64::MAX - 10;
    let mut nan = Excess::zeros(M);
    nan.d2[3] = f64::NAN;
    put(0, hostile(&vocab, 0, 1, big, nan, None));
    put(0, hostile(&vocab, 0, 1, big, Excess::zeros(M - 1), None));
    // Longer than any valid message: dropped unread.
    put(0, hostile(&vocab, 0, 1, big, Excess::zeros(M + 1), None));
    put(
        0,
        hostile(
            &vocab,
            0,
            1,
            big,
            Excess::zeros(M),
            Some(Fingerprint([0xab; 32])),
        ),
    );
    let mut neg = Excess::zeros(M);
    for i in 0..M {
        neg.d1[(i, i)] = -1.0;
    }
    put(0, hostile(&vocab, 0, 1, big, neg, None));
    let valid = hostile(&vocab, 0, 1, big, Excess::zeros(M), None);
    put(0, valid[..valid.len() / 2].to_vec());
    put(
        0,
        (0..500u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect(),
    );
    // Header says 0, key says 2: a forged key.
    put(2, hostile(&vocab, 0, 1, big, Excess::zeros(M), None));
    // A flood of garbage from one sender must not starve the honest ones.
    for i in 0..300u32 {
        put(99, i.to_le_bytes().repeat(40));
    }
    std::thread::sleep(Duration::from_millis(300));
    // A stranger: well-formed, but not a neighbour.
    put(99, hostile(&vocab, 99, 1, 5, Excess::zeros(M), None));
    // Replays of old honest messages.
    let old = captured.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert!(!old.is_empty(), "no honest message captured");
    for b in &old {
        put(0, b.clone());
    }
    // Reference: spec §9 — every check rejects and leaves the agent unchanged.
    let sts = fleet.wait_all(
        "convergence despite the hostile peer",
        Duration::from_secs(60),
        |i, s| {
            done_and_exact(s, shares[i].len(), total_points, &want)
                && (i != 1
                    || s.rejected.get("stale").copied().unwrap_or(0)
                        + s.rejected.get("duplicate").copied().unwrap_or(0)
                        >= 1)
        },
    );
    let r = &sts[1].rejected;
    for label in [
        "non_finite",
        "shape",
        "fingerprint",
        "not_psd",
        "key_mismatch",
        "unknown_sender",
    ] {
        assert!(
            r.get(label).copied().unwrap_or(0) >= 1,
            "no '{label}' reject counted: {r:?}"
        );
    }
    assert!(
        r.get("decode").copied().unwrap_or(0) >= 2,
        "decode rejects: {r:?}"
    );
    for i in [0, 2] {
        assert!(
            sts[i].rejected.is_empty(),
            "node {i} saw rejects {:?}",
            sts[i].rejected
        );
    }
    eprintln!(
        "hostile test: rejected {r:?}, {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

/// A TCP relay that can cut and restore the link it carries.
struct Proxy {
    port: u16,
    cut: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(upstream: u16) -> Self {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let port = l.local_addr().expect("addr").port();
        let cut = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::new(Mutex::new(Vec::new()));
        let (c2, k2) = (cut.clone(), conns.clone());
        std::thread::spawn(move || {
            for down in l.incoming() {
                let Ok(down) = down else { continue };
                if c2.load(Ordering::SeqCst) {
                    let _ = down.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(up) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let pipe = |mut a: TcpStream, mut b: TcpStream| {
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 1 << 16];
                        loop {
                            match a.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => {
                                    if b.write_all(&buf[..n]).is_err() {
                                        break;
                                    }
                                }
                            }
                        }
                        let _ = a.shutdown(Shutdown::Both);
                        let _ = b.shutdown(Shutdown::Both);
                    });
                };
                let mut k = k2.lock().unwrap_or_else(|p| p.into_inner());
                if let (Ok(d2), Ok(u2)) = (down.try_clone(), up.try_clone()) {
                    k.push(d2);
                    k.push(u2);
                    pipe(
                        down.try_clone().expect("clone"),
                        up.try_clone().expect("clone"),
                    );
                    pipe(up, down);
                }
            }
        });
        Proxy { port, cut, conns }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for c in self
            .conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

#[test]
fn push_sum_ring_with_a_cut_and_restored_link_converges() {
    let _g = serial();
    let t0 = Instant::now();
    let (n, batch) = (5, 5);
    let shares: Vec<_> = (0..n).map(|i| make_rows(300 + i as u64, 100)).collect();
    let vocab = vocab();
    let want = reference(&vocab, &shares, batch);
    let mut fleet = Fleet::new("ring", n);
    // No gossip: each ring link is exactly one TCP connection, so cutting it cuts the link.
    let zcfg = fleet.dir.join("zenoh.json5");
    std::fs::write(&zcfg, "{ scouting: { gossip: { enabled: false } } }\n").expect("zenoh config");
    let proxy = Proxy::start(fleet.ports[0]);
    for (i, rows) in shares.iter().enumerate() {
        let csv = fleet.dir.join(format!("data{i}.csv"));
        write_csv(&csv, rows);
        let nb = [(i + n - 1) % n, (i + 1) % n];
        let mut args = fleet.base_args(i, &nb, batch, 30);
        args.extend(["--data".into(), csv.display().to_string()]);
        args.extend([
            "--fusion".into(),
            "push-sum".into(),
            "--fleet-size".into(),
            n.to_string(),
        ]);
        args.extend(["--zenoh-config".into(), zcfg.display().to_string()]);
        if i > 0 {
            args.extend(["--connect".into(), endpoint(fleet.ports[i - 1])]);
        }
        if i == n - 1 {
            // The link 4 – 0 goes through the proxy.
            args.extend(["--connect".into(), endpoint(proxy.port)]);
        }
        fleet.start(args);
    }
    fleet.connect_client();
    fleet.wait_all("the ring to start", Duration::from_secs(30), |_, s| {
        s.neighbors_heard == 2
    });
    // Cut while the streams are still running: new mass must wait for the link.
    proxy.cut();
    std::thread::sleep(Duration::from_millis(1500));
    let during = fleet.status(0, true).expect("status during the cut");
    let silent = during.heard_ms_ago.get(&4).copied().unwrap_or(0);
    assert!(
        silent >= 1000,
        "node 0 still hears node 4 through the cut link ({silent} ms ago)"
    );
    assert!(during.heard_ms_ago.get(&1).copied().unwrap_or(u64::MAX) < 500);
    proxy.restore();
    // Reference: spec §7 — running-sum push-sum delivers the mass held up by a cut link
    // when it comes back, and converges to T_g geometrically.
    let sts = fleet.wait_all(
        "push-sum to converge after the link came back",
        Duration::from_secs(60),
        |i, s| {
            s.stream_ended && s.points as usize == shares[i].len() && fused_err(s, &want) <= 1e-9
        },
    );
    eprintln!(
        "ring test: error during the cut {:.2e}, final {:.2e}, {:.1} s",
        fused_err(&during, &want),
        sts.iter().map(|s| fused_err(s, &want)).fold(0.0, f64::max),
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn with_learning_every_fused_model_is_the_prior_plus_all_own_excesses() {
    let _g = serial();
    let t0 = Instant::now();
    let (n, batch) = (3, 10);
    let shares: Vec<_> = (0..n).map(|i| make_rows(400 + i as u64, 50)).collect();
    let total_points: usize = shares.iter().map(Vec::len).sum();
    let mut fleet = Fleet::new("learn", n);
    for (i, rows) in shares.iter().enumerate() {
        let csv = fleet.dir.join(format!("data{i}.csv"));
        write_csv(&csv, rows);
        let mut args: Vec<String> = fleet
            .base_args(i, &path_neighbors(i, n), batch, 40)
            .into_iter()
            .filter(|a| a != "--no-learn")
            .collect();
        args.extend(["--data".into(), csv.display().to_string()]);
        if i > 0 {
            args.extend(["--connect".into(), endpoint(fleet.ports[i - 1])]);
        }
        fleet.start(args);
    }
    fleet.connect_client();
    // θ changes only with own blocks, so once the streams end every E_j is fixed and the tree
    // converges to T0 + Σ_j E_j exactly (spec §7), whatever the timing was.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let sts = fleet.wait_all("the streams to end", Duration::from_secs(60), |_, s| {
            s.stream_ended && s.fleet_points == total_points as f64
        });
        let mut sum = Excess::zeros(M);
        for s in &sts {
            sum.add_in_place(&s.own.as_ref().and_then(|o| o.to_excess()).expect("own"));
        }
        let worst = sts.iter().map(|s| fused_err(s, &sum)).fold(0.0, f64::max);
        if worst <= 1e-9 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "fused ≠ T0 + Σ own: {worst:e}\n{}",
            fleet.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "learning identity test: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn holding_unchanged_messages_keeps_fusion_exact_and_sends_less() {
    // --resend-every 8: a node publishes a changed tree message at once and an unchanged one
    // only every 8th round; the fleet still reaches T_g exactly, with fewer messages.
    let _g = serial();
    let (n, batch) = (3, 10);
    let shares: Vec<_> = (0..n).map(|i| make_rows(300 + i as u64, 30)).collect();
    let total_points: usize = shares.iter().map(Vec::len).sum();
    let vocab = vocab();
    let want = reference(&vocab, &shares, batch);
    let mut fleet = Fleet::new("resend", n);
    start_path(
        &mut fleet,
        &shares,
        batch,
        30,
        false,
        &["--resend-every", "8"],
    );
    let sts = fleet.wait_all("the path to converge", Duration::from_secs(60), |i, s| {
        done_and_exact(s, shares[i].len(), total_points, &want) && s.messages_unchanged_held > 0
    });
    for s in &sts {
        assert!(s.rejected.is_empty(), "{:?}", s.rejected);
        // Without holding, a node sends one message per neighbour per round: each message was
        // published or held (or had no publisher yet, at start-up).
        let every_round = s.neighbors.len() as u64 * s.rounds_run;
        assert!(
            s.messages_sent + s.messages_unchanged_held <= every_round,
            "sent {} held {} rounds {}",
            s.messages_sent,
            s.messages_unchanged_held,
            s.rounds_run
        );
        assert!(
            s.messages_sent < every_round,
            "sent {} of {every_round}",
            s.messages_sent
        );
    }
}
