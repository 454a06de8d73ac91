//! The ROS 2 layer's hot paths (issue 30's numbers; BENCHMARKS.md §17):
//!
//! 1. decoding and pairing NavSatFix + Temperature messages ([`RowAssembler`]), messages/s;
//! 2. a 100 × 100 map at m = 50 with B = 500 local memory: the agent's answers over the grid
//!    (`Agent::local_answers`, what the node's map job runs) and the PointCloud2 encoding;
//! 3. a recording of 1,000,000 NavSatFix + Temperature pairs read as rows ([`load_bag`]),
//!    against the same rows as CSV (`coolgp_data::load_csv`), MCAP chunks uncompressed and
//!    zstd-compressed.
//!
//! `cargo run --release -p coolgp-ros2 --example ros2_bench [-- --rows N]`
//! Best and median of 5 runs each (3 for the files), single-threaded.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use coolgp::faer::Mat;
use coolgp::local::LocalFit;
use coolgp::{Agent, AgentConfig, LocalConfig, MemoryPolicy, View, Vocabulary};
use coolgp_ros2::extract::encode;
use coolgp_ros2::map::{point_cloud, MapGrid};
use coolgp_ros2::types::lookup;
use coolgp_ros2::{load_bag, RowAssembler, RowSpec};

const FIX: &str = "sensor_msgs/msg/NavSatFix";
const TEMP: &str = "sensor_msgs/msg/Temperature";

fn spec() -> RowSpec {
    RowSpec::parse(
        &[format!("/fix:{FIX}:latitude,longitude")],
        &format!("/temp:{TEMP}:temperature"),
        0.05,
    )
    .expect("spec")
}

/// The k-th pair: (stamp ns, latitude, longitude, temperature).
fn pair(k: usize) -> (i64, f64, f64, f64) {
    let t = 1_700_000_000_000_000_000 + k as i64 * 100_000_000;
    let (lat, lon) = (
        48.0 + 1e-6 * (k % 1000) as f64,
        11.0 + 1e-6 * (k / 1000) as f64,
    );
    (t, lat, lon, 20.0 + (k as f64 * 0.37).sin())
}

fn messages(n: usize) -> Vec<(&'static str, Vec<u8>, i64)> {
    let (fix, temp) = (lookup(FIX).expect("fix"), lookup(TEMP).expect("temp"));
    let mut out = Vec::with_capacity(2 * n);
    for k in 0..n {
        let (t, lat, lon, v) = pair(k);
        let f = encode(fix, t, "gps", &[("latitude", lat), ("longitude", lon)]).expect("fix");
        let m = encode(temp, t + 3_000_000, "t", &[("temperature", v)]).expect("temp");
        out.push(("/fix", f, t));
        out.push(("/temp", m, t + 3_000_000));
    }
    out
}

/// Best and median of `runs` timings of `f`, seconds.
fn time(runs: usize, mut f: impl FnMut()) -> (f64, f64) {
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    (t[0], t[runs / 2])
}

fn decode_and_pair(n: usize) {
    let msgs = messages(n);
    let spec = spec();
    let mut rows = 0;
    let (best, median) = time(5, || {
        let mut a = RowAssembler::new(&spec).expect("assembler");
        for (topic, bytes, t) in &msgs {
            a.push(topic, bytes, *t as f64 * 1e-9);
            while a.pop().is_some() {
                rows += 1;
            }
        }
        a.finish();
    });
    let m = msgs.len() as f64;
    println!(
        "decode + pair: {} messages ({n} rows): best {:.1} ms ({:.2} M msg/s), median {:.1} ms ({:.2} M msg/s)",
        msgs.len(),
        best * 1e3,
        m / best / 1e6,
        median * 1e3,
        m / median / 1e6
    );
    assert!(rows >= n, "every pair makes a row");
}

fn map() {
    let (m, d, b) = (50, 2, 500);
    let vocab = Arc::new(Vocabulary::default_design(m, d, 7).expect("vocabulary"));
    let config = AgentConfig {
        local: LocalConfig {
            capacity: b,
            policy: MemoryPolicy::Recent,
            fit: LocalFit::Agent,
            ..LocalConfig::default()
        },
        ..AgentConfig::default()
    };
    let mut agent = Agent::new(0, vocab, d, config).expect("agent");
    let mut rng = coolgp::rng::Rng::new(5, 0);
    for _ in 0..30 {
        let x = Mat::from_fn(20, d, |_, _| rng.normal());
        let y: Vec<f64> = (0..20)
            .map(|i| (x[(i, 0)] + 0.5 * x[(i, 1)]).sin() + 0.1 * rng.normal())
            .collect();
        agent.handle_block(x.as_ref(), &y).expect("block");
    }
    let names = vec!["a".to_string(), "b".to_string()];
    let grid = MapGrid::parse("a=-2:2:100,b=-2:2:100", &names).expect("grid");
    let rows = grid.rows(None);
    let x = Mat::from_fn(rows.len(), d, |i, j| rows[i][j]);
    // Warm: the memory's factor is computed at the first answer.
    agent
        .local_answers(x.as_ref(), View::Fused)
        .expect("answers");
    let mut bytes = 0;
    let (best, median) = time(5, || {
        let ans = agent
            .local_answers(x.as_ref(), View::Fused)
            .expect("answers");
        let mean: Vec<f64> = ans.iter().map(|a| a.mean()).collect();
        let var: Vec<f64> = ans.iter().map(|a| a.var_f()).collect();
        bytes = point_cloud(&grid, &mean, &var, 0, "map").len();
    });
    println!(
        "map 100 x 100 (m = {m}, B = {b}, {} memory rows): best {:.1} ms, median {:.1} ms ({bytes} bytes)",
        agent.local_points(),
        best * 1e3,
        median * 1e3
    );
}

fn write_bag(path: &Path, n: usize, compression: Option<mcap::Compression>) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    let opts = mcap::WriteOptions::new()
        .compression(compression)
        .profile("ros2");
    let mut w = opts.create(file).expect("writer");
    let (fix, temp) = (lookup(FIX).expect("fix"), lookup(TEMP).expect("temp"));
    let mut channel = |ty: &coolgp_ros2::types::MsgType, topic: &str| {
        let schema = w.add_schema(ty.name, "ros2msg", b"").expect("schema");
        w.add_channel(schema, topic, "cdr", &BTreeMap::new())
            .expect("channel")
    };
    let (cf, ct) = (channel(fix, "/fix"), channel(temp, "/temp"));
    for k in 0..n {
        let (t, lat, lon, v) = pair(k);
        let f = encode(fix, t, "gps", &[("latitude", lat), ("longitude", lon)]).expect("fix");
        let m = encode(temp, t + 3_000_000, "t", &[("temperature", v)]).expect("temp");
        for (ch, data, time) in [(cf, f, t), (ct, m, t + 3_000_000)] {
            let header = mcap::records::MessageHeader {
                channel_id: ch,
                sequence: k as u32,
                log_time: time as u64,
                publish_time: time as u64,
            };
            w.write_to_known_channel(&header, &data).expect("write");
        }
    }
    w.finish().expect("finish");
}

fn write_csv(path: &Path, n: usize) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    writeln!(f, "latitude,longitude,temperature").expect("write");
    for k in 0..n {
        let (_, lat, lon, v) = pair(k);
        writeln!(f, "{lat:?},{lon:?},{v:?}").expect("write");
    }
}

fn files(n: usize) {
    let dir = std::env::temp_dir().join(format!("coolgp-ros2-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let csv = dir.join("rows.csv");
    write_csv(&csv, n);
    let opts = coolgp_data::CsvOptions {
        inputs: Some(vec!["latitude".into(), "longitude".into()]),
        ..coolgp_data::CsvOptions::new("temperature")
    };
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len()) as f64 / 1e6;
    let (best, median) = time(3, || {
        let (ds, _) = coolgp_data::load_csv(&csv, &opts).expect("csv");
        assert_eq!(ds.len(), n);
    });
    println!(
        "CSV, {n} rows ({:.0} MB): best {best:.2} s, median {median:.2} s",
        size(&csv)
    );
    let spec = spec();
    for (name, c) in [
        ("MCAP, chunks uncompressed", None),
        ("MCAP, chunks zstd", Some(mcap::Compression::Zstd)),
    ] {
        let bag = dir.join("run.mcap");
        write_bag(&bag, n, c);
        let (best, median) = time(3, || {
            let (ds, _) = load_bag(&bag, &spec).expect("bag");
            assert_eq!(ds.len(), n);
        });
        println!(
            "{name}, {} messages ({:.0} MB): best {best:.2} s, median {median:.2} s",
            2 * n,
            size(&bag)
        );
    }
    if std::env::var_os("KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        eprintln!("kept {}", dir.display());
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rows = args
        .iter()
        .position(|a| a == "--rows")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    decode_and_pair(100_000);
    map();
    files(rows);
}
