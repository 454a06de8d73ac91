//! Issue 31: many agents in one process (`coolgp host FILE`, one zenoh session). A host's
//! agents learn the same models as the same agents as separate processes (against the
//! in-process reference `T_g = T0 + Σ E_i`, as node_fleet.rs); a file naming an agent twice,
//! a missing data file or a session key inside an agent is refused, naming the agent; a host
//! killed with -9 mid-stream resumes every agent it hosts with nothing lost; a hostile
//! message to one hosted agent changes none of the others.

use crate::common;
use std::process::Command;
use std::time::{Duration, Instant};

use coolgp::Excess;
use coolgp_node::status::Status;
use coolgp_node::zenoh::Wait;

use common::*;

/// Agents in these tests (a path 0 − 1 − 2).
const N: usize = 3;

/// Writes the agents' CSVs and a host file for them (the shared keys of `base_args`, a path,
/// `--state` dirs when `durable`; `extra` appended to the top level); returns its path.
fn host_file(
    fleet: &Fleet,
    shares: &[Vec<(Vec<f64>, f64)>],
    batch: usize,
    round_ms: u64,
    durable: bool,
    extra: &str,
) -> String {
    let mut text = format!(
        "fleet = \"{}\"\ninducing = {M}\nno-learn = true\nbatch = {batch}\nround-ms = {round_ms}\n\
         local-memory = 0\nlisten = [\"{}\"]\n{extra}\n",
        fleet.name,
        fleet.ep(fleet.ports[0]),
    );
    for (i, rows) in shares.iter().enumerate() {
        let csv = fleet.dir.join(format!("data{i}.csv"));
        write_csv(&csv, rows);
        let nb: Vec<String> = path_neighbors(i, shares.len())
            .iter()
            .map(ToString::to_string)
            .collect();
        text.push_str(&format!(
            "\n[[agent]]\nid = {i}\ndata = \"{}\"\nneighbors = [{}]\n",
            csv.display(),
            nb.join(", ")
        ));
        if durable {
            let st = fleet.dir.join(format!("state{i}"));
            text.push_str(&format!("state = \"{}\"\n", st.display()));
        }
    }
    let path = fleet.dir.join("host.toml");
    std::fs::write(&path, text).expect("host file");
    path.display().to_string()
}

/// Starts `coolgp host FILE` as the fleet's one process and connects the client.
fn start_host(fleet: &mut Fleet, file: &str) {
    let log = fleet.dir.join("node0.log");
    fleet
        .nodes
        .push(NodeProc::start_cmd("host", vec![file.to_owned()], log));
    fleet.connect_client();
}

/// Polls every hosted agent's status (with the fused excess) until `ok` holds for each.
fn wait_agents(fleet: &Fleet, what: &str, ok: impl Fn(usize, &Status) -> bool) -> Vec<Status> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let sts: Vec<Option<Status>> = (0..N).map(|i| fleet.status(i, true)).collect();
        if sts
            .iter()
            .enumerate()
            .all(|(i, s)| s.as_ref().is_some_and(|s| ok(i, s)))
        {
            return sts.into_iter().flatten().collect();
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            fleet.logs()
        );
        std::thread::sleep(Duration::from_millis(150));
    }
}

fn fused(s: &Status) -> Excess {
    s.fused
        .as_ref()
        .and_then(|f| f.to_excess())
        .expect("fused excess")
}

#[test]
fn a_hosts_agents_learn_what_separate_nodes_learn() {
    let _g = serial();
    let t0 = Instant::now();
    let shares: Vec<Vec<(Vec<f64>, f64)>> = (0..N).map(|i| make_rows(700 + i as u64, 40)).collect();
    let total: usize = shares.iter().map(Vec::len).sum();
    let want = reference(&vocab(), &shares, 10);
    // The agents as three processes.
    let mut apart = Fleet::new("hsep", N);
    start_path(&mut apart, &shares, 10, 40, false, &[]);
    let sep = apart.wait_all("separate nodes exact", Duration::from_secs(60), |i, s| {
        done_and_exact(s, shares[i].len(), total, &want)
    });
    drop(apart);
    // The same agents in one host.
    let mut hosted = Fleet::new("host", 1);
    let file = host_file(&hosted, &shares, 10, 40, false, "");
    start_host(&mut hosted, &file);
    let host = wait_agents(&hosted, "hosted agents exact", |i, s| {
        done_and_exact(s, shares[i].len(), total, &want)
    });
    for i in 0..N {
        assert_eq!(host[i].model.id, i as u64);
        let d = fused(&host[i]).rel_dist(&fused(&sep[i]));
        assert!(
            d <= 1e-12,
            "agent {i}: hosted and separate fused models differ by {d:e}"
        );
    }
    // The host's log names each agent's lines.
    let log = std::fs::read_to_string(hosted.dir.join("node0.log")).unwrap_or_default();
    assert!(
        log.contains("host started") && log.contains("agent{id=2}"),
        "{log}"
    );
    eprintln!(
        "host vs separate nodes: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn a_host_file_that_names_an_agent_twice_or_lacks_its_data_is_refused_by_name() {
    let _g = serial();
    let fleet = Fleet::new("hbad", 1);
    let shares: Vec<Vec<(Vec<f64>, f64)>> = (0..N).map(|i| make_rows(710 + i as u64, 10)).collect();
    let file = host_file(&fleet, &shares, 10, 40, false, "");
    let text = std::fs::read_to_string(&file).expect("host file");
    let run = |text: &str| -> String {
        std::fs::write(&file, text).expect("host file");
        let out = Command::new(BIN)
            .args(["host", &file])
            .output()
            .expect("coolgp host");
        assert!(!out.status.success(), "a bad host file started: {text}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let twice = text.replace("id = 2", "id = 1");
    let e = run(&twice);
    assert!(e.contains("agent 1 is named twice"), "{e}");
    let missing = text.replace("data2.csv", "nope.csv");
    let e = run(&missing);
    assert!(e.contains("agent 2:") && e.contains("nope.csv"), "{e}");
    let session_key = format!("{text}connect = [\"tcp/127.0.0.1:1\"]\n");
    let e = run(&session_key);
    assert!(
        e.contains("agent 2:") && e.contains("`connect` belongs to the host"),
        "{e}"
    );
    let none = "fleet = \"x\"\n";
    let e = run(none);
    assert!(e.contains("no [[agent]] table"), "{e}");
    let unknown = text.replace("id = 0", "id = 0\nneighbours = [1]");
    let e = run(&unknown);
    assert!(e.contains("agent 0:") && e.contains("neighbours"), "{e}");
}

#[test]
fn a_host_killed_mid_stream_resumes_every_agent_with_nothing_lost() {
    let _g = serial();
    let t0 = Instant::now();
    let shares: Vec<Vec<(Vec<f64>, f64)>> =
        (0..N).map(|i| make_rows(720 + i as u64, 200)).collect();
    let total: usize = shares.iter().map(Vec::len).sum();
    let want = reference(&vocab(), &shares, 10);
    let mut fleet = Fleet::new("hcrash", 1);
    // One block per 100 ms round: 20 blocks each, about 2 s of stream.
    let file = host_file(&fleet, &shares, 10, 100, true, "checkpoint-every = 2");
    start_host(&mut fleet, &file);
    wait_agents(&fleet, "every agent part-way", |_, s| {
        s.blocks >= 3 && !s.stream_ended
    });
    fleet.nodes[0].kill9();
    fleet.nodes[0].spawn();
    let sts = wait_agents(&fleet, "every agent resumed and exact", |i, s| {
        done_and_exact(s, shares[i].len(), total, &want)
    });
    for s in &sts {
        assert_eq!(s.blocks, 20, "agent {}: every block once", s.model.id);
    }
    // Each agent resumed from its own checkpoint, not from the start of its stream.
    let log = std::fs::read_to_string(fleet.dir.join("node0.log")).unwrap_or_default();
    for i in 0..N {
        let line = log.lines().find(|l| {
            l.contains(&format!("agent{{id={i}}}")) && l.contains("resumed from checkpoint")
        });
        assert!(
            line.is_some_and(|l| !l.contains("blocks=0")),
            "agent {i}:\n{log}"
        );
    }
    eprintln!("host crash test: {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn a_hostile_message_to_one_hosted_agent_changes_none_of_the_others() {
    let _g = serial();
    let shares: Vec<Vec<(Vec<f64>, f64)>> = (0..N).map(|i| make_rows(730 + i as u64, 40)).collect();
    let total: usize = shares.iter().map(Vec::len).sum();
    let want = reference(&vocab(), &shares, 10);
    let mut fleet = Fleet::new("hhostile", 1);
    let file = host_file(&fleet, &shares, 10, 40, false, "");
    start_host(&mut fleet, &file);
    wait_agents(&fleet, "exact", |i, s| {
        done_and_exact(s, shares[i].len(), total, &want)
    });
    let session = fleet.client.as_ref().expect("client").session().clone();
    let put = |from: u64, to: u64, bytes: Vec<u8>| {
        session
            .put(format!("coolgp/{}/{from}/msg/{to}", fleet.name), bytes)
            .wait()
            .expect("put");
    };
    // To agent 1 only: a NaN excess from its neighbour 0, garbage, and a forged sender.
    let mut nan = Excess::zeros(M);
    nan.d2[3] = f64::NAN;
    let v = vocab();
    put(0, 1, hostile(&v, 0, 1, u64::MAX - 10, nan, None));
    put(0, 1, (0..300u32).map(|i| (i * 7) as u8).collect());
    put(
        2,
        1,
        hostile(&v, 0, 1, u64::MAX - 10, Excess::zeros(M), None),
    );
    let sts = wait_agents(&fleet, "agent 1's rejections", |i, s| {
        i != 1 || s.rejected.values().sum::<u64>() >= 3
    });
    for (i, s) in sts.iter().enumerate() {
        assert!(
            done_and_exact(s, shares[i].len(), total, &want),
            "agent {i} moved"
        );
        if i != 1 {
            assert!(s.rejected.is_empty(), "agent {i} rejected {:?}", s.rejected);
        }
    }
}
