//! `coolgp dashboard` against real `coolgp node` processes on 127.0.0.1: the API lists the
//! fleet, its points and its path edges; a killed node drops out of the membership; a node
//! answering garbage, an unknown fleet and an unreachable endpoint are reported on the page's
//! document and in the log while the dashboard keeps running; bad HTTP is refused.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use coolgp_node::client::BlockingClient;
use coolgp_node::zenoh::Wait;
use coolgp_node::ZenohArgs;
use serde_json::{json, Value};

use crate::common;
use common::*;

/// Sends `request` to the dashboard and returns the whole response (head and body).
fn http(port: u16, request: &[u8]) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(request).ok()?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    Some(String::from_utf8_lossy(&out).into_owned())
}

fn get(port: u16, path: &str) -> Option<(String, String)> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    let text = http(port, req.as_bytes())?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((head.to_string(), body.to_string()))
}

fn fleet_doc(port: u16) -> Option<Value> {
    let (head, body) = get(port, "/api/fleet")?;
    if !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    serde_json::from_str(&body).ok()
}

/// A running `coolgp dashboard` on a free loopback port, polling every 300 ms.
struct Dashboard {
    proc: NodeProc,
    port: u16,
}

impl Dashboard {
    fn start(dir: &Path, tag: &str, args: &[String]) -> Self {
        let port = free_port();
        let mut a: Vec<String> = ["--listen", &format!("127.0.0.1:{port}")]
            .iter()
            .map(ToString::to_string)
            .collect();
        a.extend(["--poll-ms", "300", "--stale-ms", "3000"].map(String::from));
        a.extend(args.iter().cloned());
        let log = dir.join(format!("dashboard-{tag}.log"));
        Dashboard {
            proc: NodeProc::start_cmd("dashboard", a, log),
            port,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.proc.log).unwrap_or_default()
    }

    fn alive(&mut self) -> bool {
        self.proc
            .child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Polls `/api/fleet` until `ok` holds, or panics with the last document and the log.
    fn wait(&self, what: &str, timeout: Duration, ok: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + timeout;
        let mut last = None;
        while Instant::now() < deadline {
            if let Some(doc) = fleet_doc(self.port) {
                if ok(&doc) {
                    return doc;
                }
                last = Some(doc);
            }
            std::thread::sleep(Duration::from_millis(150));
        }
        panic!(
            "timed out waiting for {what}\nlast /api/fleet: {}\ndashboard log:\n{}",
            last.map_or("none".into(), |d| d.to_string()),
            self.log()
        );
    }
}

fn problems_text(doc: &Value) -> String {
    doc["problems"].to_string()
}

fn ids(v: &Value) -> Vec<u64> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

/// A zenoh peer posing as node 7 of `fleet`: its liveliness token is real, its status is not
/// JSON. Returns the session (the token and queryable live as long as it does).
fn garbage_node(fleet: &str, port: u16) -> (BlockingClient, Vec<Box<dyn std::any::Any>>) {
    let z = ZenohArgs {
        listen: vec![endpoint(port)],
        ..ZenohArgs::default()
    };
    let c = BlockingClient::connect(&z).expect("fake node session");
    let s = c.session().clone();
    let q = s
        .declare_queryable(format!("coolgp/{fleet}/7/status"))
        .callback(|q| {
            let _ = q
                .reply(q.key_expr().clone(), b"{not a status".to_vec())
                .wait();
        })
        .wait()
        .expect("queryable");
    let t = s
        .liveliness()
        .declare_token(format!("coolgp/{fleet}/7/alive"))
        .wait()
        .expect("token");
    (c, vec![Box::new(q), Box::new(t)])
}

#[test]
fn dashboard_shows_a_path_of_three_and_follows_membership() {
    let _g = serial();
    let t0 = Instant::now();
    let (n, batch) = (3, 10);
    let shares: Vec<_> = (0..n).map(|i| make_rows(500 + i as u64, 40)).collect();
    let total: usize = shares.iter().map(Vec::len).sum();
    let mut fleet = Fleet::new("dash", n);
    start_path(&mut fleet, &shares, batch, 40, false, &[]);
    let fake_port = free_port();
    let (fake, fake_decls) = garbage_node(&fleet.name, fake_port);
    let mut dash = Dashboard::start(
        &fleet.dir,
        "main",
        &[
            "--fleet".into(),
            fleet.name.clone(),
            "--connect".into(),
            endpoint(fleet.ports[0]),
            "--connect".into(),
            endpoint(fake_port),
        ],
    );

    // The three honest nodes, all holding the fleet's total, and the path's two edges; node 7
    // is a member whose status cannot be read.
    let doc = dash.wait(
        "3 converged nodes and the unreadable node 7",
        Duration::from_secs(60),
        |d| {
            let nodes = d["nodes"].as_array().cloned().unwrap_or_default();
            nodes.len() == n
                && nodes
                    .iter()
                    .all(|s| s["fleet_points"].as_f64() == Some(total as f64))
                && d["edges"] == json!([[0, 1], [1, 2]])
                && d["unreadable"].to_string().contains("status is not JSON")
        },
    );
    assert_eq!(doc["fleet"], json!(fleet.name));
    assert_eq!(ids(&doc["members"]), vec![0, 1, 2, 7]);
    let nodes = doc["nodes"].as_array().cloned().unwrap_or_default();
    let own: u64 = nodes.iter().filter_map(|s| s["points"].as_u64()).sum();
    assert_eq!(own, total as u64);
    assert_eq!(doc["convergence"]["total_points"], json!(total));
    for s in &nodes {
        let digest = s["projection_digest"].as_str().unwrap_or_default();
        assert!(
            digest.len() == 16 && digest.chars().all(|c| c.is_ascii_hexdigit()),
            "{s}"
        );
    }
    // A member that cannot be read keeps the fleet from counting as converged.
    assert_eq!(doc["convergence"]["all_represent_all"], json!(false));
    assert_eq!(doc["unreadable"][0]["id"], json!(7));
    assert!(
        dash.log().contains("node 7: status is not JSON"),
        "{}",
        dash.log()
    );
    drop(fake_decls);
    drop(fake);
    let doc = dash.wait("node 7 to leave", Duration::from_secs(15), |d| {
        ids(&d["members"]) == vec![0, 1, 2]
    });
    assert_eq!(doc["convergence"]["all_represent_all"], json!(true));
    assert_eq!(doc["unreadable"], json!([]));

    // The page, its files, and the event stream.
    let (head, body) = get(dash.port, "/").expect("index");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.contains("Content-Security-Policy: default-src 'self'"),
        "{head}"
    );
    assert!(body.contains("<svg id=\"net\""));
    let (_, hist) = get(dash.port, "/api/history").expect("history");
    let hist: Value = serde_json::from_str(&hist).expect("history is JSON");
    let ticks = hist["t"].as_array().map_or(0, Vec::len);
    assert!(ticks >= 2, "{hist}");
    for id in ["0", "1", "2"] {
        let fp = &hist["series"][id]["fleet_points"];
        assert_eq!(fp.as_array().map(Vec::len), Some(ticks), "{hist}");
        assert_eq!(fp[ticks - 1], json!(total as f64), "{hist}");
    }
    let (_, js) = get(dash.port, "/app.js").expect("app.js");
    assert!(js.contains("data-fleet-points"));
    let mut sse = TcpStream::connect(("127.0.0.1", dash.port)).expect("connect");
    sse.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    sse.write_all(b"GET /api/events HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("request");
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    // Read until one whole `fleet` event (it may span several reads).
    let whole_event = |t: &str| {
        t.split("event: fleet\ndata: ")
            .nth(1)
            .is_some_and(|rest| rest.contains("\n\n"))
    };
    while !whole_event(&text) {
        match sse.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(k) => text.push_str(&String::from_utf8_lossy(&buf[..k])),
        }
    }
    assert!(text.contains("Content-Type: text/event-stream"), "{text}");
    let data = text
        .split("event: fleet\ndata: ")
        .nth(1)
        .and_then(|r| r.split("\n\n").next())
        .expect("an event");
    let ev: Value = serde_json::from_str(data).expect("event is JSON");
    assert_eq!(ev["fleet"], json!(fleet.name));
    drop(sse);

    // Bad HTTP is refused and harmless.
    let status_line = |r: Option<String>| r.unwrap_or_default().lines().next().map(String::from);
    assert_eq!(
        status_line(http(dash.port, b"POST /api/fleet HTTP/1.1\r\n\r\n")).as_deref(),
        Some("HTTP/1.1 405 Method Not Allowed")
    );
    assert_eq!(
        status_line(http(dash.port, b"\x16\x03\x01garbage\r\n\r\n")).as_deref(),
        Some("HTTP/1.1 400 Bad Request")
    );
    let huge = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
    assert_eq!(
        status_line(http(dash.port, huge.as_bytes())).as_deref(),
        Some("HTTP/1.1 400 Bad Request")
    );
    assert!(get(dash.port, "/nope").is_some_and(|(h, _)| h.starts_with("HTTP/1.1 404")));

    // An unknown fleet on the same network: named, with the fleets that are there.
    let other = Dashboard::start(
        &fleet.dir,
        "unknown",
        &[
            "--fleet".into(),
            "nosuch".into(),
            "--connect".into(),
            endpoint(fleet.ports[0]),
        ],
    );
    let doc = other.wait("the unknown-fleet message", Duration::from_secs(20), |d| {
        problems_text(d).contains("no node of fleet 'nosuch' is alive")
    });
    assert!(
        problems_text(&doc).contains(&format!("fleets seen: {}", fleet.name)),
        "{doc}"
    );
    assert!(other.log().contains("no node of fleet 'nosuch' is alive"));
    drop(other);

    // Kill node 2: its token goes, and with it its edge and its points.
    let killed = Instant::now();
    fleet.nodes[2].kill9();
    let doc = dash.wait("node 2 to drop out", Duration::from_secs(15), |d| {
        ids(&d["members"]) == vec![0, 1]
    });
    let gone_after = killed.elapsed();
    assert_eq!(doc["edges"], json!([[0, 1]]));
    assert_eq!(doc["nodes"].as_array().map(Vec::len), Some(2));
    assert!(
        problems_text(&doc).contains("lists neighbour 2, which is not alive"),
        "{doc}"
    );
    assert!(dash.log().contains("node 2 left"), "{}", dash.log());
    assert!(dash.alive(), "the dashboard exited:\n{}", dash.log());
    eprintln!(
        "dashboard test: node 2 dropped out {:.2} s after kill -9; {:.1} s in all",
        gone_after.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn an_unreachable_endpoint_is_reported_and_bad_flags_are_refused() {
    let _g = serial();
    let dir = tmp_dir("dash-bad");
    let nothing = free_port();
    let mut dash = Dashboard::start(
        &dir,
        "unreachable",
        &[
            "--fleet".into(),
            "f".into(),
            "--connect".into(),
            endpoint(nothing),
        ],
    );
    let want = format!("nothing answers at {}", endpoint(nothing));
    let doc = dash.wait("the no-peer message", Duration::from_secs(20), |d| {
        problems_text(d).contains(&want)
    });
    assert_eq!(doc["nodes"], json!([]));
    assert!(dash.log().contains(&want), "{}", dash.log());
    assert!(dash.alive(), "the dashboard exited:\n{}", dash.log());
    drop(dash);
    for (args, says) in [
        (vec!["--fleet", "a/b"], "fleet name 'a/b'"),
        (
            vec!["--fleet", "f", "--connect", "nonsense"],
            "connect/endpoints",
        ),
        (vec!["--fleet", "f", "--poll-ms", "1"], "--poll-ms"),
    ] {
        let out = Command::new(BIN)
            .arg("dashboard")
            .args(["--listen", "127.0.0.1:0"])
            .args(&args)
            .output()
            .expect("run coolgp dashboard");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_tls_dashboard_connects_as_reader_and_a_plain_one_sees_nothing() {
    // Issue 10 + 11: with --tls DIR the dashboard joins a mutual-TLS fleet as the fleet's
    // reader and shows its nodes; without the certificates it gets no link at all.
    let _g = serial();
    let (n, batch) = (2, 10);
    let shares: Vec<_> = (0..n).map(|i| make_rows(900 + i as u64, 30)).collect();
    let total: usize = shares.iter().map(Vec::len).sum();
    let mut fleet = Fleet::new_tls("dashtls", n, &[0, 1]);
    start_path(&mut fleet, &shares, batch, 40, false, &[]);
    let pki = fleet.tls.clone().expect("a TLS fleet");
    let dash = Dashboard::start(
        &fleet.dir,
        "tls",
        &[
            "--fleet".into(),
            fleet.name.clone(),
            "--connect".into(),
            fleet.ep(fleet.ports[0]),
            "--tls".into(),
            pki.display().to_string(),
        ],
    );
    let doc = dash.wait("2 nodes over TLS", Duration::from_secs(60), |d| {
        let nodes = d["nodes"].as_array().cloned().unwrap_or_default();
        nodes.len() == n
            && nodes
                .iter()
                .all(|s| s["fleet_points"].as_f64() == Some(total as f64))
    });
    assert_eq!(doc["edges"], json!([[0, 1]]));
    let plain = Dashboard::start(
        &fleet.dir,
        "plain",
        &[
            "--fleet".into(),
            fleet.name.clone(),
            "--connect".into(),
            endpoint(fleet.ports[0]),
        ],
    );
    std::thread::sleep(Duration::from_secs(3));
    let doc = plain.wait(
        "the plain dashboard's page",
        Duration::from_secs(10),
        |_| true,
    );
    assert_eq!(doc["nodes"].as_array().map_or(0, Vec::len), 0, "{doc}");
}

#[test]
fn above_the_full_status_limit_the_dashboard_reads_briefs() {
    // Issue 31: with more members than --full-status-limit, one brief request per poll for
    // the whole fleet; the document carries the briefs and the fleet's aggregates.
    let _g = serial();
    let (n, batch) = (3, 10);
    let shares: Vec<_> = (0..n).map(|i| make_rows(700 + i as u64, 30)).collect();
    let total: usize = shares.iter().map(Vec::len).sum();
    let mut fleet = Fleet::new("dashbrief", n);
    start_path(&mut fleet, &shares, batch, 40, false, &[]);
    let dash = Dashboard::start(
        &fleet.dir,
        "brief",
        &[
            "--fleet".into(),
            fleet.name.clone(),
            "--connect".into(),
            endpoint(fleet.ports[0]),
            "--full-status-limit".into(),
            "1".into(),
        ],
    );
    let doc = dash.wait(
        "brief mode with 3 converged agents",
        Duration::from_secs(60),
        |d| {
            d["mode"] == json!("brief")
                && ids(&d["agents"]["id"]) == vec![0, 1, 2]
                && d["convergence"]["all_represent_all"] == json!(true)
        },
    );
    let fp = doc["agents"]["fleet_points"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(fp.iter().all(|v| v.as_f64() == Some(total as f64)), "{doc}");
    let agg = &doc["aggregates"];
    assert_eq!(agg["agents"], json!(n), "{doc}");
    assert_eq!(ids(&agg["ids"]), vec![0, 1, 2]);
    assert_eq!(agg["points"], json!(total));
    assert_eq!(agg["fleet_points_min"], json!(total as f64));
    assert_eq!(agg["agents_with_every_point"], json!(n));
    assert_eq!(agg["withheld"], json!([]));
    assert_eq!(doc["convergence"]["total_points"], json!(total));
    assert_eq!(
        doc["convergence"]["median_fleet_points"],
        json!(total as f64)
    );
    assert_eq!(doc["edges_known"], json!(false));
    assert_eq!(doc["silent"], json!([]));
    assert_eq!(doc["full_status_limit"], json!(1));
    assert!(doc.get("nodes").is_none(), "{doc}");
    assert!(doc["notices"].to_string().contains("brief mode"), "{doc}");
    // The history is fleet-level: least, median and most fleet_points, not one per node.
    let (_, hist) = get(dash.port, "/api/history").expect("history");
    let hist: Value = serde_json::from_str(&hist).expect("history is JSON");
    assert_eq!(hist["mode"], json!("brief"), "{hist}");
    let med = hist["fleet"]["fleet_points_median"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(med.last(), Some(&json!(total as f64)), "{hist}");
    assert!(hist.get("series").is_none(), "{hist}");
}
