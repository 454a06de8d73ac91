//! Prints the last `cargo bench -p coolgp` run as Markdown tables: per benchmark the fastest
//! (min) and the median time per iteration over criterion's samples, and the matching rates
//! where the benchmark declares a throughput.
//!
//! `cargo run -p coolgp --release --example bench_table [-- CRITERION_DIR]`
//! (default `target/criterion` of this workspace).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

struct Row {
    id: String,
    min_ns: f64,
    median_ns: f64,
    elements: Option<f64>,
    samples: usize,
}

fn find(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "new") {
                if p.join("benchmark.json").exists() && p.join("sample.json").exists() {
                    out.push(p);
                }
            } else {
                find(&p, out);
            }
        }
    }
}

fn read(p: &Path) -> Value {
    let text = fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default()
}

fn time(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.1} ns")
    } else if ns < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

fn rate(per_s: f64) -> String {
    if per_s >= 1e9 {
        format!("{:.2}e9", per_s / 1e9)
    } else if per_s >= 1e6 {
        format!("{:.1}e6", per_s / 1e6)
    } else if per_s >= 1e3 {
        format!("{:.1}e3", per_s / 1e3)
    } else {
        format!("{per_s:.1}")
    }
}

/// Sort key: the numbers in the id, in order (so m50 < m100 < m200).
fn key(id: &str) -> (Vec<u64>, String) {
    let mut nums = Vec::new();
    let mut cur = String::new();
    for ch in id.chars() {
        if ch.is_ascii_digit() {
            cur.push(ch);
        } else if !cur.is_empty() {
            nums.push(cur.parse().unwrap_or(0));
            cur.clear();
        }
    }
    if !cur.is_empty() {
        nums.push(cur.parse().unwrap_or(0));
    }
    let letters: String = id.chars().filter(|c| !c.is_ascii_digit()).collect();
    (nums, letters)
}

fn unit(group: &str) -> &'static str {
    if group.starts_with("psi2_terms") || group.starts_with("accumulate_block") {
        "terms/s"
    } else if group.starts_with("faer_gemm") {
        "flop/s"
    } else if group.starts_with("tree_round") {
        "messages/s"
    } else {
        "points/s"
    }
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/criterion"));
    let mut found = Vec::new();
    find(&dir, &mut found);
    let mut groups: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for p in found {
        let b = read(&p.join("benchmark.json"));
        let s = read(&p.join("sample.json"));
        let group = b["group_id"].as_str().unwrap_or("?").to_string();
        let id = [b["function_id"].as_str(), b["value_str"].as_str()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("/");
        let mut per: Vec<f64> = floats(&s["times"])
            .iter()
            .zip(floats(&s["iters"]))
            .map(|(t, n)| t / n)
            .collect();
        if per.is_empty() {
            continue;
        }
        per.sort_by(f64::total_cmp);
        let median = if per.len() % 2 == 1 {
            per[per.len() / 2]
        } else {
            0.5 * (per[per.len() / 2 - 1] + per[per.len() / 2])
        };
        let elements = b["throughput"]["Elements"].as_f64();
        groups.entry(group).or_default().push(Row {
            id,
            min_ns: per[0],
            median_ns: median,
            elements,
            samples: per.len(),
        });
    }
    for (group, mut rows) in groups {
        rows.sort_by_key(|r| key(&r.id));
        let u = unit(&group);
        println!("### `{group}`\n");
        println!("| case | min | median | samples | {u} at min | {u} at median |");
        println!("|---|---|---|---|---|---|");
        for r in rows {
            let (a, b) = match r.elements {
                Some(e) => (rate(e / r.min_ns * 1e9), rate(e / r.median_ns * 1e9)),
                None => ("—".into(), "—".into()),
            };
            println!(
                "| {} | {} | {} | {} | {a} | {b} |",
                r.id,
                time(r.min_ns),
                time(r.median_ns),
                r.samples
            );
        }
        println!();
    }
}
