//! Helpers shared by the `cli` tests: running the built `coolgp` binary, a temporary folder, a
//! small CSV with a station column, and a run's summary.json.

use std::path::PathBuf;
use std::process::{Command, Output};

pub(crate) fn coolgp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_coolgp"))
        .args(args)
        .output()
        .expect("the coolgp binary runs")
}

/// Runs the binary and fails the test with its stderr unless it succeeded.
pub(crate) fn coolgp_ok(args: &[&str]) -> Output {
    let out = coolgp(args);
    assert!(
        out.status.success(),
        "coolgp {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `cmd` on the CSV of [`write_csv`] (target y, inputs a and b), then `extra`.
pub(crate) fn on_csv<'a>(
    cmd: &'a str,
    csv: &'a std::path::Path,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        cmd,
        "--data",
        csv.to_str().expect("utf8"),
        "--target",
        "y",
        "--inputs",
        "a,b",
    ];
    args.extend_from_slice(extra);
    args
}

/// `coolgp node --id 1 --fleet lab --inputs a EXTRA` fails, saying `expected` (with the `node`
/// feature) or naming the feature to build with (without it).
pub(crate) fn node_refuses(extra: &[&str], expected: &str) {
    let mut args = vec!["node", "--id", "1", "--fleet", "lab", "--inputs", "a"];
    args.extend_from_slice(extra);
    let out = coolgp(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    let expected = if cfg!(feature = "node") {
        expected
    } else {
        "cargo build --release --features node"
    };
    assert!(!out.status.success() && err.contains(expected), "{err}");
}

pub(crate) fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("coolgp-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

pub(crate) fn summary(dir: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("summary.json")).expect("summary.json written");
    serde_json::from_str(&text).expect("summary.json is JSON")
}

/// A small CSV: y = sin(a) + cos(b) on a grid, with a station column.
pub(crate) fn write_csv(dir: &std::path::Path, bad_line: Option<&str>) -> PathBuf {
    let mut s = String::from("station,a,b,y\n");
    for i in 0..300 {
        if i == 100 {
            if let Some(bad) = bad_line {
                s.push_str(bad);
                s.push('\n');
            }
        }
        let (a, b) = ((i % 17) as f64 * 0.3, (i % 11) as f64 * 0.4);
        s.push_str(&format!("s{},{a},{b},{}\n", i % 3, a.sin() + b.cos()));
    }
    let p = dir.join("data.csv");
    std::fs::write(&p, s).expect("write csv");
    p
}
