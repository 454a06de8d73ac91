//! Helpers shared by the tests that start real `coolgp node` processes on 127.0.0.1: data,
//! the in-process reference `T_g − T0 = Σ E_i`, node processes, a fleet with a client session
//! (plain or mutual TLS), and a hostile message builder.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use coolgp::faer::Mat;
use coolgp::model::Fingerprint;
use coolgp::protocol::codec::encode;
use coolgp::protocol::{Body, Header, Message};
use coolgp::{Agent, AgentConfig, Excess, Vocabulary};
use coolgp_node::client;
use coolgp_node::{Status, ZenohArgs};

pub const BIN: &str = env!("CARGO_BIN_EXE_coolgp");
pub const M: usize = 10;
pub const D: usize = 2;

/// The tests start many processes on 2 cores: run them one at a time.
pub static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A free loopback port never handed out before in this test process: the OS may give a
/// just-released port again, and two nodes of one fleet must not get the same one.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

pub fn endpoint(port: u16) -> String {
    format!("tcp/127.0.0.1:{port}")
}

pub fn tmp_dir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "coolgp-node-test-{}-{tag}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

/// Deterministic data: `y = sin(x1) + 0.5 x2 + noise`, values round-tripped through text.
pub fn make_rows(seed: u64, n: usize) -> Vec<(Vec<f64>, f64)> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
        | 1;
    let mut u = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let rt = |v: f64| -> f64 { format!("{v}").parse().expect("f64") };
    (0..n)
        .map(|_| {
            let x1 = rt(4.0 * u() - 2.0);
            let x2 = rt(4.0 * u() - 2.0);
            let y = rt(x1.sin() + 0.5 * x2 + 0.1 * (u() - 0.5));
            (vec![x1, x2], y)
        })
        .collect()
}

pub fn write_csv(path: &Path, rows: &[(Vec<f64>, f64)]) {
    let mut s = String::from("x1,x2,y\n");
    for (x, y) in rows {
        s.push_str(&format!("{},{},{}\n", x[0], x[1], y));
    }
    std::fs::write(path, s).expect("write csv");
}

pub fn vocab() -> Arc<Vocabulary> {
    Arc::new(Vocabulary::default_design(M, D, 0).expect("vocab"))
}

/// The own excess `E_i` of agent `id` after absorbing `rows` in blocks of `batch` (learning off).
pub fn own_excess(
    vocab: &Arc<Vocabulary>,
    id: u64,
    rows: &[(Vec<f64>, f64)],
    batch: usize,
) -> Excess {
    let cfg = AgentConfig {
        learn: false,
        seed: id,
        ..AgentConfig::default()
    };
    let mut a = Agent::new(id, vocab.clone(), D, cfg).expect("agent");
    for chunk in rows.chunks(batch) {
        let x = Mat::from_fn(chunk.len(), D, |i, j| chunk[i].0[j]);
        let y: Vec<f64> = chunk.iter().map(|r| r.1).collect();
        a.handle_block(x.as_ref(), &y).expect("block");
    }
    a.own_excess().clone()
}

/// `Σ E_i` (reference: spec §7, `T_g = T0 + Σ_i E_i`).
pub fn reference(vocab: &Arc<Vocabulary>, shares: &[Vec<(Vec<f64>, f64)>], batch: usize) -> Excess {
    let mut total = Excess::zeros(M);
    for (i, rows) in shares.iter().enumerate() {
        total.add_in_place(&own_excess(vocab, i as u64, rows, batch));
    }
    total
}

/// A `coolgp` subcommand running as a child process (stderr to `log`), killed on drop.
pub struct NodeProc {
    pub child: Option<Child>,
    pub cmd: &'static str,
    pub args: Vec<String>,
    pub log: PathBuf,
}

impl NodeProc {
    /// Starts `coolgp node ARGS`, with `--local-memory 0` unless ARGS set the memory: these
    /// tests check the global fused model, and a node's default memory (B = 500) would add its
    /// own correction to its answers (node_local.rs sets its memory).
    pub fn start(mut args: Vec<String>, log: PathBuf) -> Self {
        if !args.iter().any(|a| a == "--local-memory") {
            args.extend(["--local-memory".to_owned(), "0".to_owned()]);
        }
        Self::start_cmd("node", args, log)
    }

    /// Starts `coolgp CMD ARGS` (e.g. `dashboard`).
    pub fn start_cmd(cmd: &'static str, args: Vec<String>, log: PathBuf) -> Self {
        let mut n = NodeProc {
            child: None,
            cmd,
            args,
            log,
        };
        n.spawn();
        n
    }

    pub fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log file");
        let child = Command::new(BIN)
            .arg(self.cmd)
            .args(&self.args)
            .env("RUST_LOG", "info,zenoh=error")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn coolgp");
        self.child = Some(child);
    }

    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn sigterm(&mut self) -> Option<std::process::ExitStatus> {
        let mut c = self.child.take()?;
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(st)) = c.try_wait() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.kill();
        c.wait().ok()
    }
}

impl Drop for NodeProc {
    fn drop(&mut self) {
        self.kill9();
    }
}

pub struct Fleet {
    pub name: String,
    pub dir: PathBuf,
    pub nodes: Vec<NodeProc>,
    pub ports: Vec<u16>,
    pub client: Option<client::BlockingClient>,
    /// The certificate directory of a TLS fleet (`--tls`), `None` for an open fleet.
    pub tls: Option<PathBuf>,
}

/// Runs `coolgp ARGS`, panicking with its stderr unless it succeeds; returns stdout.
pub fn coolgp_ok(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().expect("run coolgp");
    assert!(
        out.status.success(),
        "coolgp {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Fleet {
    pub fn new(tag: &str, n: usize) -> Self {
        Fleet {
            name: format!("t{}-{tag}", std::process::id()),
            dir: tmp_dir(tag),
            nodes: Vec::new(),
            ports: (0..n).map(|_| free_port()).collect(),
            client: None,
            tls: None,
        }
    }

    /// A mutual-TLS fleet: `coolgp certs` for node ids `certs` into `DIR/pki`; every node and
    /// the client use `--tls DIR/pki` and tls/ endpoints.
    pub fn new_tls(tag: &str, n: usize, certs: &[u64]) -> Self {
        let mut f = Self::new(tag, n);
        let pki = f.dir.join("pki");
        let ids: Vec<String> = certs.iter().map(ToString::to_string).collect();
        coolgp_ok(&[
            "certs",
            "--fleet",
            &f.name,
            "--nodes",
            &ids.join(","),
            "--out",
            &pki.display().to_string(),
        ]);
        f.tls = Some(pki);
        f
    }

    /// The endpoint of a node's port: tls/ in a TLS fleet, else tcp/.
    pub fn ep(&self, port: u16) -> String {
        match self.tls {
            Some(_) => format!("tls/127.0.0.1:{port}"),
            None => endpoint(port),
        }
    }

    /// The zenoh flags of a client of this fleet (a reader in a TLS fleet).
    pub fn client_args(&self) -> ZenohArgs {
        ZenohArgs {
            connect: self.ports.iter().map(|p| self.ep(*p)).collect(),
            tls: self.tls.clone(),
            ..ZenohArgs::default()
        }
    }

    pub fn base_args(
        &self,
        id: usize,
        neighbors: &[usize],
        batch: usize,
        round_ms: u64,
    ) -> Vec<String> {
        let mut a: Vec<String> = vec![
            "--id".into(),
            id.to_string(),
            "--fleet".into(),
            self.name.clone(),
            "--inducing".into(),
            M.to_string(),
            "--no-learn".into(),
            "--batch".into(),
            batch.to_string(),
            "--round-ms".into(),
            round_ms.to_string(),
            "--listen".into(),
            self.ep(self.ports[id]),
        ];
        if let Some(dir) = &self.tls {
            a.extend(["--tls".into(), dir.display().to_string()]);
        }
        if !neighbors.is_empty() {
            a.push("--neighbors".into());
            a.push(
                neighbors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        a
    }

    pub fn start(&mut self, args: Vec<String>) {
        let log = self.dir.join(format!("node{}.log", self.nodes.len()));
        self.nodes.push(NodeProc::start(args, log));
    }

    pub fn connect_client(&mut self) {
        let z = self.client_args();
        self.client = Some(client::BlockingClient::connect(&z).expect("client session"));
    }

    pub fn status(&self, id: usize, fused: bool) -> Option<Status> {
        self.client
            .as_ref()?
            .status(&self.name, id as u64, fused, Duration::from_secs(2))
            .ok()
    }

    /// A node's status through a fresh client session, as a user's next `coolgp status` would
    /// ask: under CI's load the shared session once lost its route to one node for good (the
    /// node ran on and logged nothing wrong), which is the client's failure, not the node's.
    pub fn status_fresh(&self, id: usize, fused: bool) -> Option<Status> {
        let cl = client::BlockingClient::connect(&self.client_args()).ok()?;
        let st = cl
            .status(&self.name, id as u64, fused, Duration::from_secs(2))
            .ok();
        if st.is_some() {
            eprintln!("node {id} answered a fresh client session but not the shared one");
        }
        st
    }

    pub fn logs(&self) -> String {
        let mut out = String::new();
        for i in 0..self.nodes.len() {
            let p = self.dir.join(format!("node{i}.log"));
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(15).collect();
            out.push_str(&format!("--- node{i}.log (last lines)\n"));
            for l in tail.into_iter().rev() {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }

    /// Polls until `ok` holds for every node's status (with the fused excess), or panics.
    pub fn wait_all(
        &self,
        what: &str,
        timeout: Duration,
        ok: impl Fn(usize, &Status) -> bool,
    ) -> Vec<Status> {
        let deadline = Instant::now() + timeout;
        let mut last: Vec<Option<Status>> = vec![None; self.ports.len()];
        let mut misses = vec![0_usize; self.ports.len()];
        loop {
            let mut all = true;
            for (i, slot) in last.iter_mut().enumerate() {
                let mut st = self.status(i, true);
                misses[i] = if st.is_some() { 0 } else { misses[i] + 1 };
                if st.is_none() && misses[i] >= 3 {
                    st = self.status_fresh(i, true);
                }
                let good = st.as_ref().is_some_and(|s| ok(i, s));
                *slot = st;
                all &= good;
            }
            if all {
                return last.into_iter().map(|s| s.expect("status")).collect();
            }
            if Instant::now() >= deadline {
                let brief: Vec<String> = last
                    .iter()
                    .map(|s| match s {
                        Some(s) => format!(
                            "id {} points {} fleet_points {} heard {} round {} rejected {:?}",
                            s.model.id,
                            s.points,
                            s.fleet_points,
                            s.neighbors_heard,
                            s.rounds_run,
                            s.rejected
                        ),
                        None => "no status".into(),
                    })
                    .collect();
                panic!(
                    "timed out waiting for {what}:\n{}\n{}",
                    brief.join("\n"),
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(150));
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.nodes.clear();
        self.client = None;
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

pub fn fused_err(s: &Status, want: &Excess) -> f64 {
    s.fused
        .as_ref()
        .and_then(|f| f.to_excess())
        .map_or(f64::INFINITY, |e| e.rel_dist(want))
}

/// The node read its whole share, its fused model counts every point of the fleet, and it is
/// the exact T_g − T0 (spec §7: exact on trees) to 1e-9.
pub fn done_and_exact(s: &Status, share: usize, total_points: usize, want: &Excess) -> bool {
    s.stream_ended
        && s.points as usize == share
        && s.fleet_points == total_points as f64
        && fused_err(s, want) <= 1e-9
}

pub fn path_neighbors(i: usize, n: usize) -> Vec<usize> {
    let mut v = Vec::new();
    if i > 0 {
        v.push(i - 1);
    }
    if i + 1 < n {
        v.push(i + 1);
    }
    v
}

/// Starts a path 0-1-…-(n−1), node i connecting to i−1, each with its own CSV share and the
/// `extra` flags.
pub fn start_path(
    fleet: &mut Fleet,
    shares: &[Vec<(Vec<f64>, f64)>],
    batch: usize,
    round_ms: u64,
    state: bool,
    extra: &[&str],
) -> Vec<Vec<String>> {
    let n = shares.len();
    let mut all_args = Vec::new();
    for (i, rows) in shares.iter().enumerate() {
        let csv = fleet.dir.join(format!("data{i}.csv"));
        write_csv(&csv, rows);
        let mut args = fleet.base_args(i, &path_neighbors(i, n), batch, round_ms);
        args.extend(["--data".into(), csv.display().to_string()]);
        if state {
            args.extend([
                "--state".into(),
                fleet.dir.join(format!("state{i}")).display().to_string(),
            ]);
        }
        if i > 0 {
            args.extend(["--connect".into(), fleet.ep(fleet.ports[i - 1])]);
        }
        args.extend(extra.iter().map(|a| a.to_string()));
        fleet.start(args.clone());
        all_args.push(args);
    }
    fleet.connect_client();
    all_args
}

pub fn hostile(
    vocab: &Vocabulary,
    from: u64,
    to: u64,
    round: u64,
    excess: Excess,
    fp: Option<Fingerprint>,
) -> Vec<u8> {
    encode(&Message {
        header: Header {
            fingerprint: fp.unwrap_or_else(|| vocab.fingerprint()),
            sender: from,
            receiver: to,
            round,
            version: 1,
        },
        body: Body::Tree {
            excess: excess.into(),
            points: 10.0,
        },
        projection: None,
        sites: None,
    })
}
