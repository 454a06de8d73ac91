//! The built `coolgp` binary, run as a user would.

use std::path::PathBuf;
use std::process::{Command, Output};

fn coolgp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_coolgp"))
        .args(args)
        .output()
        .expect("the coolgp binary runs")
}

/// Runs the binary and fails the test with its stderr unless it succeeded.
fn coolgp_ok(args: &[&str]) -> Output {
    let out = coolgp(args);
    assert!(
        out.status.success(),
        "coolgp {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `cmd` on the CSV of [`write_csv`] (target y, inputs a and b), then `extra`.
fn on_csv<'a>(cmd: &'a str, csv: &'a std::path::Path, extra: &[&'a str]) -> Vec<&'a str> {
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
fn node_refuses(extra: &[&str], expected: &str) {
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

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("coolgp-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn summary(dir: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("summary.json")).expect("summary.json written");
    serde_json::from_str(&text).expect("summary.json is JSON")
}

/// A small CSV: y = sin(a) + cos(b) on a grid, with a station column.
fn write_csv(dir: &std::path::Path, bad_line: Option<&str>) -> PathBuf {
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

#[test]
fn demo_writes_the_documented_summary() {
    let dir = tmp("demo");
    let out = coolgp_ok(&["demo", "--quiet", "--out", dir.to_str().expect("utf8")]);
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "alone",
        "fused (per-agent q(W))",
        "fused (fleet q(W))",
        "central learner",
        "Takeaway",
    ] {
        assert!(text.contains(want), "no '{want}' in: {text}");
    }
    let s = summary(&dir);
    for key in [
        "rmse_pre",
        "rmse_post",
        "rmse_central",
        "nlpd_post",
        "nlpd_central",
        "coverage95_post",
        "agents",
        "inducing",
        "points",
        "wall_s",
        "fusion_max_rel_err",
    ] {
        assert!(s.get(key).is_some(), "summary.json lacks {key}: {s}");
    }
    // One agent per wind station; DIR holds the fleet run, DIR/per-agent the per-agent run.
    assert_eq!(s["agents"], 12);
    assert_eq!(s["dataset"], "wind");
    assert_eq!(s["projection"], "fleet");
    assert_eq!(s["stations"].as_array().map(Vec::len), Some(12), "{s}");
    let per = summary(&dir.join("per-agent"));
    assert_eq!(per["projection"], "per-agent");
    let num = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    // The printed table is the summaries': the mean row holds each station alone (per-agent
    // pre-fusion), fused per-agent and fused fleet.
    let mean_row = format!(
        "{:.3}  {:>22.3}  {:>18.3}",
        num(&per, "rmse_pre"),
        num(&per, "rmse_post"),
        num(&s, "rmse_post")
    );
    assert!(text.contains(&mean_row), "no '{mean_row}' in: {text}");
    // Fusion helps every station's model, and the fleet's q(W) more than per-agent q(W).
    assert!(
        num(&s, "rmse_post") < num(&per, "rmse_post")
            && num(&per, "rmse_post") < num(&per, "rmse_pre"),
        "{s} {per}"
    );
    let cov = num(&s, "coverage95_post");
    assert!((0.0..=1.0).contains(&cov), "{cov}");
    assert!(num(&s, "nlpd_central").is_finite(), "{s}");
    for f in [
        "curves.csv",
        "agents.csv",
        "curves.png",
        "curves.svg",
        "agents.png",
    ] {
        assert!(dir.join(f).exists(), "{f} missing");
    }
    // The tables agree with the summary: agents.csv has one row per agent whose blocks and
    // points add up to the stream, and the last row of curves.csv is the final evaluation.
    let table = |f: &str| -> Vec<Vec<f64>> {
        let text = std::fs::read_to_string(dir.join(f)).expect("table");
        text.lines()
            .skip(1)
            .map(|l| {
                l.split(',')
                    .map(|v| v.parse().unwrap_or(f64::NAN))
                    .collect()
            })
            .collect()
    };
    let agents = table("agents.csv");
    assert_eq!(agents.len(), 12);
    let col_sum = |i: usize| agents.iter().map(|r| r[i]).sum::<f64>();
    assert_eq!(Some(col_sum(1)), s["batches"].as_f64());
    assert_eq!(Some(col_sum(2)), s["points"].as_f64());
    let curves = table("curves.csv");
    let last = curves.last().expect("a curve point");
    assert_eq!(Some(last[1]), s["points"].as_f64());
    assert_eq!(Some(last[2]), s["rmse_pre"].as_f64());
    assert_eq!(Some(last[3]), s["rmse_post"].as_f64());
}

#[test]
fn csv_errors_name_file_and_line_and_skip_bad_rows_counts() {
    let dir = tmp("csv");
    let csv = write_csv(&dir, Some("s1,0.5,oops,1.0"));
    let path = csv.to_str().expect("utf8");
    let out = coolgp(&[
        "simulate", "--data", path, "--target", "y", "--agents", "3", "--quiet",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    // header is line 1, the bad row is the 101st data row → line 102
    assert!(
        err.contains("data.csv:102") && err.contains("oops"),
        "{err}"
    );
    let out = coolgp_ok(&[
        "simulate",
        "--data",
        path,
        "--target",
        "y",
        "--inputs",
        "a,b",
        "--agents",
        "3",
        "--inducing",
        "10",
        "--skip-bad-rows",
        "--quiet",
        "--no-baselines",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("skipped 1 malformed rows"));
    let out = coolgp(&["simulate", "--data", path, "--target", "nope", "--quiet"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
}

#[test]
fn same_seed_twice_gives_identical_summary_numbers() {
    let dir = tmp("seed");
    let csv = write_csv(&dir, None);
    let run = |name: &str| {
        let out_dir = dir.join(name);
        coolgp_ok(&on_csv(
            "simulate",
            &csv,
            &[
                "--agent-by",
                "station",
                "--inducing",
                "10",
                "--batch",
                "10",
                "--loss",
                "0.2",
                "--seed",
                "5",
                "--quiet",
                "--out",
                out_dir.to_str().expect("utf8"),
            ],
        ));
        let mut s = summary(&out_dir);
        let o = s.as_object_mut().expect("object");
        o.remove("wall_s");
        o.remove("peak_rss_mb");
        o.remove("phases");
        s
    };
    let (a, b) = (run("a"), run("b"));
    assert_eq!(a, b);
    assert_eq!(a["agents"], 3, "one agent per station");
}

#[test]
fn config_file_fills_flags_and_bad_values_are_explained() {
    let dir = tmp("config");
    let csv = write_csv(&dir, None);
    let cfg = dir.join("run.toml");
    std::fs::write(
        &cfg,
        format!("data = \"{}\"\ntarget = \"y\"\ninputs = [\"a\", \"b\"]\nagents = 4\ninducing = 8\nno-baselines = true\n", csv.display()),
    )
    .expect("write config");
    let out_dir = dir.join("out");
    coolgp_ok(&[
        "simulate",
        "--config",
        cfg.to_str().expect("utf8"),
        "--agents",
        "2",
        "--quiet",
        "--out",
        out_dir.to_str().expect("utf8"),
    ]);
    assert_eq!(
        summary(&out_dir)["agents"],
        2,
        "the flag overrides the file"
    );
    let out = coolgp(&["simulate", "--topology", "moebius", "--quiet"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown topology"));
    let out = coolgp(&[
        "simulate",
        "--topology",
        "ring",
        "--fusion",
        "tree",
        "--quiet",
        "--max-train",
        "400",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("double count"));
}

#[test]
fn vocabulary_file_round_trips_and_detects_edits() {
    let dir = tmp("vocab");
    let f = dir.join("v.json");
    let out = coolgp(&[
        "vocab",
        "--inducing",
        "12",
        "--dim",
        "2",
        "--save",
        f.to_str().expect("utf8"),
    ]);
    assert!(out.status.success());
    let csv = write_csv(&dir, None);
    let run = coolgp(&on_csv(
        "simulate",
        &csv,
        &[
            "--vocab",
            f.to_str().expect("utf8"),
            "--agents",
            "2",
            "--quiet",
            "--no-baselines",
        ],
    ));
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = std::fs::read_to_string(&f).expect("read");
    std::fs::write(&f, text.replacen("\"jitter\": 1e-6", "\"jitter\": 2e-6", 1)).expect("write");
    let run = coolgp(&["simulate", "--vocab", f.to_str().expect("utf8"), "--quiet"]);
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("fingerprint mismatch"),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

#[test]
fn quick_experiment_leaves_a_results_folder() {
    for (name, files) in [
        ("bound", ["bound.csv", "bound.png", "bound.svg"]),
        (
            "projection",
            ["projection.csv", "projection.png", "projection.svg"],
        ),
        ("order", ["order.csv", "order-wind.png", "order-wind.svg"]),
    ] {
        let dir = tmp(&format!("exp-{name}"));
        coolgp_ok(&[
            "experiment",
            name,
            "--quick",
            "--quiet",
            "--out",
            dir.to_str().expect("utf8"),
        ]);
        for f in files {
            let bytes = std::fs::read(dir.join(f)).unwrap_or_else(|e| panic!("{name}: {f}: {e}"));
            if f.ends_with(".png") {
                assert!(
                    bytes.starts_with(b"\x89PNG") && bytes.len() > 1000,
                    "{name}: {f}"
                );
            } else if f.ends_with(".svg") {
                let text = String::from_utf8_lossy(&bytes);
                assert!(
                    text.contains("<svg") && text.contains("</svg>"),
                    "{name}: {f}"
                );
            }
        }
    }
    // The bound experiment (spec §4, Lemma 1): d = 1, 2; q = p and a learned q; k = 10, 100.
    let csv = std::fs::read_to_string(
        std::env::temp_dir()
            .join(format!("coolgp-cli-test-{}-exp-bound", std::process::id()))
            .join("bound.csv"),
    )
    .expect("bound.csv");
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("d,q,k,err_unnormalized,err_self_normalized,ess,log_E_p_w2")
    );
    let rows: Vec<(String, String, f64, [f64; 4])> = lines
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            let num = |i: usize| c[i].parse::<f64>().unwrap_or_else(|e| panic!("{l}: {e}"));
            (
                c[0].into(),
                c[1].into(),
                num(2),
                [num(3), num(4), num(5), num(6)],
            )
        })
        .collect();
    assert_eq!(rows.len(), 8, "2 dimensions × 2 q × 2 k");
    for (d, q, k, [err_un, err_sn, ess, log_m2]) in &rows {
        if q == "q=p" {
            // Every weight is 1: ESS = k, E_p[w²] = 1, and both normalizations agree.
            assert!((ess - k).abs() <= 1e-9 * k, "d {d}: ESS {ess} at k {k}");
            assert_eq!(*log_m2, 0.0);
            assert!((err_un - err_sn).abs() <= 1e-9 * err_un, "d {d} k {k}");
        } else {
            // A learned q: E_p[w²] > 1 and fewer effective samples than drawn.
            assert!(*log_m2 > 0.0 && ess < k, "d {d} {q} k {k}: {ess} {log_m2}");
        }
    }
    // More samples, smaller error (Monte Carlo rate): each (d, q) at k = 100 beats k = 10.
    for pair in rows.chunks(2) {
        assert_eq!((pair[0].2, pair[1].2), (10.0, 100.0), "{pair:?}");
        assert!(
            pair[1].3[0] < pair[0].3[0] && pair[1].3[1] < pair[0].3[1],
            "{pair:?}"
        );
    }
    // The projection comparison has one row per mode, each with finite RMSEs.
    let csv = std::fs::read_to_string(
        std::env::temp_dir()
            .join(format!(
                "coolgp-cli-test-{}-exp-projection",
                std::process::id()
            ))
            .join("projection.csv"),
    )
    .expect("projection.csv");
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    let modes: Vec<&str> = rows.iter().map(|r| r[1]).collect();
    assert_eq!(
        modes,
        [
            "per-agent",
            "shared",
            "shared-plain-proxy",
            "shared-product-proxy",
            "fleet"
        ]
    );
    // Columns seed,projection,rmse_pre,rmse_post,rmse_central,nlpd_post,nlpd_central,
    // coverage95_post,central_update.
    for r in &rows {
        for v in &r[2..8] {
            assert!(v.parse::<f64>().expect("number").is_finite(), "{r:?}");
        }
    }
    // Fusion helps in every mode (paper §5); the central learner (Adam) is one run shared by
    // the first four rows, the fleet's runs the site update; coverage is a fraction.
    let num = |r: &[&str], i: usize| r[i].parse::<f64>().expect("number");
    for r in &rows {
        assert!(num(r, 3) < num(r, 2), "post-fusion not better: {r:?}");
        assert!((0.0..=1.0).contains(&num(r, 7)), "{r:?}");
    }
    assert!(
        rows[..4]
            .iter()
            .all(|r| (num(r, 4), num(r, 6), r[8]) == (num(&rows[0], 4), num(&rows[0], 6), "adam")),
        "{rows:?}"
    );
    assert_eq!(rows[4][8], "sites", "{rows:?}");
    assert_ne!(num(&rows[4], 4), num(&rows[0], 4), "{rows:?}");
}

#[test]
fn vocabulary_from_data_is_deterministic_and_usable() {
    let dir = tmp("vocab-data");
    let csv = write_csv(&dir, None);
    let make = |name: &str| {
        let f = dir.join(name);
        coolgp_ok(&on_csv(
            "vocab",
            &csv,
            &[
                "--inducing",
                "10",
                "--dim",
                "2",
                "--save",
                f.to_str().expect("utf8"),
            ],
        ));
        std::fs::read_to_string(&f).expect("saved")
    };
    assert_eq!(make("v1.json"), make("v2.json"));
    let out = coolgp(&[
        "vocab",
        "--inducing",
        "10",
        "--dim",
        "2",
        "--data",
        csv.to_str().expect("utf8"),
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--target"));
}

#[test]
fn export_writes_the_split_that_simulate_streams() {
    let dir = tmp("export");
    let csv = write_csv(&dir, None);
    let out_dir = dir.join("split");
    let args = ["--test-fraction", "0.2", "--batch", "7"];
    let mut export = on_csv("export", &csv, &args);
    export.extend_from_slice(&["--out", out_dir.to_str().expect("utf8")]);
    coolgp_ok(&export);
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join("split.json")).expect("split.json"),
    )
    .expect("json");
    let train = std::fs::read_to_string(out_dir.join("train.csv")).expect("train.csv");
    let test = std::fs::read_to_string(out_dir.join("test.csv")).expect("test.csv");
    let (n_train, n_test) = (train.lines().count() - 1, test.lines().count() - 1);
    assert_eq!(train.lines().next(), Some("x0,x1,y"));
    assert_eq!(test.lines().next(), Some("x0,x1,y,set"));
    assert_eq!(meta["train_rows"].as_u64(), Some(n_train as u64));
    assert_eq!(meta["test_rows"].as_u64(), Some(n_test as u64));
    assert_eq!(n_train + n_test, 300);
    // Standardized from the training rows: each input column has mean ≈ 0 over train.csv.
    for col in 0..2 {
        let mean: f64 = train
            .lines()
            .skip(1)
            .map(|l| {
                l.split(',')
                    .nth(col)
                    .expect("column")
                    .parse::<f64>()
                    .expect("number")
            })
            .sum::<f64>()
            / n_train as f64;
        assert!(mean.abs() < 1e-9, "column {col} mean {mean}");
    }
    // The same flags in `simulate` stream the same number of points.
    let sim_dir = dir.join("sim");
    let mut sim = on_csv("simulate", &csv, &args);
    sim.extend_from_slice(&[
        "--quiet",
        "--agents",
        "3",
        "--out",
        sim_dir.to_str().expect("utf8"),
    ]);
    coolgp_ok(&sim);
    assert_eq!(summary(&sim_dir)["points"].as_u64(), Some(n_train as u64));
    // Routed by a key column, every training row carries its group (one per station).
    let keyed = dir.join("keyed");
    let mut export = on_csv("export", &csv, &["--agent-by", "station"]);
    export.extend_from_slice(&["--out", keyed.to_str().expect("utf8")]);
    coolgp_ok(&export);
    let train = std::fs::read_to_string(keyed.join("train.csv")).expect("train.csv");
    assert_eq!(train.lines().next(), Some("x0,x1,y,group"));
    let groups: std::collections::BTreeSet<&str> = train
        .lines()
        .skip(1)
        .map(|l| l.rsplit(',').next().expect("group"))
        .collect();
    assert_eq!(groups.len(), 3, "{groups:?}");
    // A missing target is an error that names the flag.
    let out = coolgp(&[
        "export",
        "--out",
        out_dir.to_str().expect("utf8"),
        "--data",
        csv.to_str().expect("utf8"),
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--target"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn simulate_reports_both_projection_modes_side_by_side_on_any_csv() {
    let dir = tmp("both");
    let csv = write_csv(&dir, None);
    let out_dir = dir.join("both");
    let out = coolgp_ok(&on_csv(
        "simulate",
        &csv,
        &[
            "--quiet",
            "--agents",
            "4",
            "--projection",
            "both",
            "--out",
            out_dir.to_str().expect("utf8"),
        ],
    ));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("per-agent") && text.contains("shared") && text.contains("fleet"),
        "{text}"
    );
    let per = summary(&out_dir.join("per-agent"));
    let shared = summary(&out_dir.join("shared"));
    let fleet = summary(&out_dir.join("fleet"));
    // dDTC and dPITC are computed once and reported for every mode; the central learner
    // (Adam) once for per-agent and shared, while the fleet's runs the site update.
    assert_eq!(per["rmse_central"], shared["rmse_central"]);
    assert_eq!(per["nlpd_central"], shared["nlpd_central"]);
    assert_eq!(per["sigma_s_central"], shared["sigma_s_central"]);
    assert!(shared["sigma_n_central"]
        .as_f64()
        .is_some_and(f64::is_finite));
    // Each mode's summary.json says what ran, as a plain `simulate --out` does.
    for (s, name) in [(&per, "per-agent"), (&shared, "shared"), (&fleet, "fleet")] {
        assert_eq!(s["projection"], name);
    }
    assert_eq!(fleet["site"]["memory"], "stream");
    assert_ne!(per["rmse_central"], fleet["rmse_central"]);
    for s in [&shared, &fleet] {
        assert_eq!(per["rmse_ddtc"], s["rmse_ddtc"]);
        assert_eq!(per["rmse_dpitc"], s["rmse_dpitc"]);
    }
    assert!(per["rmse_post"].as_f64().expect("number").is_finite());
    assert_ne!(per["rmse_pre"], shared["rmse_pre"], "the modes must differ");
    assert_ne!(
        per["rmse_post"], fleet["rmse_post"],
        "the modes must differ"
    );
    // summary.csv: one row per mode, with the density scores of each run's summary.json.
    let table = std::fs::read_to_string(out_dir.join("summary.csv")).expect("summary.csv");
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let modes: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(modes, ["per-agent", "shared", "fleet"], "{table}");
    let col = |name: &str| header.iter().position(|h| *h == name).expect(name);
    for (r, s) in rows.iter().zip([&per, &shared, &fleet]) {
        for key in ["nlpd_post", "coverage95_post"] {
            let v: f64 = r[col(key)].parse().expect("number");
            assert_eq!(Some(v), s[key].as_f64(), "{key}: {table}");
        }
        let cov: f64 = r[col("coverage95_post")].parse().expect("number");
        assert!((0.0..=1.0).contains(&cov), "{table}");
        let nc: f64 = r[col("nlpd_central")].parse().expect("number");
        assert!(
            (nc - s["nlpd_central"].as_f64().expect("number")).abs() < 1e-5,
            "{table}"
        );
    }
    assert_eq!(rows[2][col("central_update")], "sites", "{table}");
}

#[test]
fn fleet_only_flags_are_refused_outside_the_fleet_projection_with_the_fix() {
    let dir = tmp("fleet-only");
    let csv = write_csv(&dir, None);
    let stderr_of = |extra: &[&str]| {
        let out = coolgp(&on_csv("simulate", &csv, extra));
        assert!(!out.status.success(), "{extra:?} must fail");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // Silently ignored before: a per-agent run with the fleet's settings.
    let err = stderr_of(&["--quiet", "--site-window", "50", "--fuse-groups", "within"]);
    assert!(
        err.contains("--site-window, --fuse-groups apply to the fleet projection only")
            && err.contains("add --projection fleet"),
        "{err}"
    );
    // A negative value reaches the range check instead of clap's "unexpected argument".
    let err = stderr_of(&["--quiet", "--projection", "fleet", "--site-damping", "-0.1"]);
    assert!(
        err.contains("site damping must be in (0, 1], got -0.1"),
        "{err}"
    );
    node_refuses(
        &["--projection", "fleet", "--site-damping", "-0.1"],
        "site damping must be in (0, 1], got -0.1",
    );
    let err = stderr_of(&["--quiet", "--projection", "fleet", "--site-every", "0"]);
    assert!(err.contains("--site-every 0"), "{err}");
    // A missing grouping column names the flag that asked for it.
    let err = stderr_of(&[
        "--quiet",
        "--projection",
        "fleet",
        "--projection-group",
        "nope",
    ]);
    assert!(
        err.contains("--projection-group nope routes the rows") && err.contains("station, a, b, y"),
        "{err}"
    );
    // The fleet projection takes them, in either stream order, and summary.json records them
    // under the flags' own names.
    for (order, memory) in [("random", "recent"), ("file", "stream")] {
        let out_dir = dir.join(order);
        coolgp_ok(&on_csv(
            "simulate",
            &csv,
            &[
                "--quiet",
                "--agent-by",
                "station",
                "--projection",
                "fleet",
                "--site-window",
                "50",
                "--stream-order",
                order,
                "--site-memory",
                memory,
                "--out",
                out_dir.to_str().expect("utf8"),
            ],
        ));
        let s = summary(&out_dir);
        assert_eq!(s["stream_order"], order);
        assert_eq!(s["projection"], "fleet");
        assert_eq!(s["mode"], "frozen");
        assert_eq!(s["topology"], "random-tree");
        assert_eq!(s["site"]["window_points"], 50);
        assert_eq!(s["site"]["memory"], memory);
        assert_eq!(
            s["site"]["projection_groups"].as_array().map(Vec::len),
            Some(0)
        );
    }
}

#[test]
fn a_separate_test_file_needs_no_routing_column() {
    // --agent-by routes the training rows; the fleet is scored on every test row, so the test
    // CSV needs only the inputs and the target.
    let dir = tmp("test-file");
    let csv = write_csv(&dir, None);
    let test = dir.join("test.csv");
    let mut s = String::from("y,b,a\n");
    for i in 0..40 {
        let (a, b) = (i as f64 * 0.11, i as f64 * 0.07);
        s.push_str(&format!("{},{b},{a}\n", a.sin() + b.cos()));
    }
    std::fs::write(&test, s).expect("write test csv");
    let out_dir = dir.join("out");
    coolgp_ok(&on_csv(
        "simulate",
        &csv,
        &[
            "--quiet",
            "--agent-by",
            "station",
            "--test",
            test.to_str().expect("utf8"),
            "--out",
            out_dir.to_str().expect("utf8"),
        ],
    ));
    let s = summary(&out_dir);
    assert_eq!(s["agents"], 3, "one agent per station");
    assert!(s["rmse_post"].as_f64().is_some_and(f64::is_finite));
}

#[test]
fn sizes_beyond_the_machine_are_refused_naming_the_memory() {
    // One 100000 × 100000 matrix per agent: 80 GB each. Before, the run went on until killed.
    let out = coolgp(&[
        "simulate",
        "--dataset",
        "wind",
        "--inducing",
        "100000",
        "--quiet",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains(
                "--inducing 100000 needs 800 GB for one m × m matrix per agent (10 agents × m² × \
                 8 bytes); this machine has"
            ),
        "{err}"
    );
    node_refuses(
        &["--inducing", "100000"],
        "--inducing 100000 needs 80 GB for one m × m matrix (m² × 8 bytes)",
    );
}

#[test]
fn zero_batches_and_agents_are_refused_before_the_data_is_read() {
    for (flag, dataset) in [
        ("--batch", "wind"),
        ("--agents", "wind"),
        ("--batch", "synthetic"),
    ] {
        let out = coolgp(&["simulate", "--dataset", dataset, flag, "0"]);
        let err = String::from_utf8_lossy(&out.stderr);
        let want = format!("{flag} must be at least 1");
        assert!(!out.status.success() && err.contains(&want), "{err}");
        // Without --quiet a run that read its data says so ("… training rows in …").
        let all = format!("{}{err}", String::from_utf8_lossy(&out.stdout));
        assert!(!all.contains("training rows"), "read the data first: {all}");
    }
    node_refuses(&["--batch", "0"], "--batch must be > 0");
    // The member check's settings (issue 29) too.
    for (flag, value, want) in [
        (
            "--suspects",
            "maybe",
            "unknown --suspects 'maybe': use off, flag or contain",
        ),
        (
            "--influence-cap",
            "0.5",
            "--influence-cap must be 0 (off) or at least 1",
        ),
        // The likelihood (issue 29, item 4).
        (
            "--likelihood",
            "huber",
            "unknown --likelihood 'huber': use gaussian, robust",
        ),
    ] {
        let out = coolgp(&["simulate", "--dataset", "wind", flag, value]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(want), "{err}");
        let all = format!("{}{err}", String::from_utf8_lossy(&out.stdout));
        assert!(!all.contains("training rows"), "read the data first: {all}");
    }
}

#[test]
fn built_in_datasets_take_inputs_and_refuse_a_target_and_errors_say_their_cause_once() {
    // --inputs chooses a built-in set's columns (an unknown one is named); --target is --data's.
    let out = coolgp(&[
        "simulate",
        "--dataset",
        "wind",
        "--inputs",
        "lon,foo",
        "--quiet",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("foo"), "{err}");
    let text = String::from_utf8_lossy(
        &coolgp_ok(&[
            "simulate",
            "--dataset",
            "wind",
            "--inputs",
            "lon,lat",
            "--agents",
            "2",
            "--max-train",
            "400",
            "--no-central",
            "--no-baselines",
            "--local-memory",
            "0",
        ])
        .stdout,
    )
    .to_string();
    assert!(text.contains("2 inputs (lon,lat)"), "{text}");
    for extra in [
        &["--dataset", "wind", "--target", "value"][..],
        &["--dataset", "traffic", "--inputs", "slot"],
        &["--dataset", "synthetic", "--inputs", "x"],
        &["--target", "y"],
    ] {
        let mut args = vec!["simulate", "--quiet"];
        args.extend_from_slice(extra);
        let out = coolgp(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("--data"), "{err}");
    }
    let out = coolgp(&[
        "simulate",
        "--data",
        "/nonexistent/rows.csv",
        "--target",
        "y",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}

#[test]
fn regions_route_rows_and_every_run_scores_the_fleet_query() {
    let dir = tmp("regions");
    let csv = write_csv(&dir, None);
    let out = dir.join("out");
    let run = |extra: &[&str]| {
        let mut args = on_csv("simulate", &csv, &["--quiet", "--no-baselines"]);
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--out", out.to_str().expect("utf8")]);
        let text = String::from_utf8_lossy(&coolgp_ok(&args).stdout).to_string();
        (text, summary(&out))
    };
    let num = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    // Regions over (a, b): one agent each, whose test rows are known (the oracle).
    let (text, s) = run(&["--regions", "a,b", "--agents", "3"]);
    assert!(text.contains("3 regions (k-means over a,b)"), "{text}");
    assert_eq!(s["agents"], 3);
    for rule in ["min-variance", "bcm", "rbcm"] {
        let r = &s["fleet_query_rules"][rule];
        assert!(
            num(r, "rmse").is_finite() && num(r, "nlpd").is_finite(),
            "{s}"
        );
        assert!((0.0..=1.0).contains(&num(r, "coverage95")), "{s}");
    }
    assert_eq!(
        s["rmse_fleet_query"],
        s["fleet_query_rules"][s["fleet_rule"].as_str().unwrap_or("?")]["rmse"]
    );
    assert!(num(&s, "rmse_oracle_local").is_finite(), "{s}");
    // Stations know their test rows too; random routing has no oracle.
    let (_, s) = run(&["--agent-by", "station", "--fleet-rule", "min-variance"]);
    assert_eq!(s["fleet_rule"], "min-variance");
    assert!(num(&s, "rmse_oracle_local").is_finite(), "{s}");
    let (_, s) = run(&["--agents", "4"]);
    assert!(s["rmse_oracle_local"].is_null(), "{s}");
    assert!(num(&s, "rmse_fleet_query").is_finite(), "{s}");
    // Bad regions are refused, naming what to use.
    let mut args = on_csv("simulate", &csv, &["--regions", "c"]);
    args.push("--quiet");
    let err = String::from_utf8_lossy(&coolgp(&args).stderr).to_string();
    assert!(
        err.contains("unknown column 'c'; the input columns are a, b"),
        "{err}"
    );
    let mut args = on_csv(
        "simulate",
        &csv,
        &["--regions", "a", "--agent-by", "station"],
    );
    args.push("--quiet");
    let err = String::from_utf8_lossy(&coolgp(&args).stderr).to_string();
    assert!(err.contains("--regions a with --agent-by station"), "{err}");
}

#[test]
fn local_experiment_writes_finite_figures_and_plots() {
    let dir = tmp("exp-local");
    coolgp_ok(&[
        "experiment",
        "local",
        "--quick",
        "--quiet",
        "--out",
        dir.to_str().expect("utf8"),
    ]);
    for f in [
        "local.csv",
        "local.json",
        "local-wind.png",
        "local-air.svg",
        "local-airline-regions.png",
        "local-cost.png",
        "local-coverage.svg",
    ] {
        let bytes = std::fs::read(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(bytes.len() > 100, "{f}");
    }
    let text = std::fs::read_to_string(dir.join("local.json")).expect("local.json");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&text).expect("JSON rows");
    assert_eq!(rows.len(), 3 * 3, "3 datasets × B ∈ {{0, 50, 100}}");
    let num = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    for r in &rows {
        for k in [
            "rmse_global",
            "rmse_fleet_query",
            "nlpd_fleet_query",
            "rmse_oracle_local",
            "learn_ms_per_block",
            "fleet_query_var_scale",
            "coverage95_fleet_query_raw",
        ] {
            assert!(num(r, k).is_finite(), "{k}: {r}");
        }
        let b = num(r, "memory");
        assert!(num(r, "local_points_mean") <= b, "{r}");
        assert_eq!(num(r, "local_bytes_per_agent") > 0.0, b > 0.0, "{r}");
    }
    let csv = std::fs::read_to_string(dir.join("local.csv")).expect("local.csv");
    assert_eq!(csv.lines().count(), 1 + rows.len());
}

#[test]
fn local_grid_experiment_reports_every_run_and_the_spread() {
    // Issue 28: every set × fit × batch × seed, the summary's spread and the plots.
    let dir = tmp("exp-local-grid");
    coolgp_ok(&[
        "experiment",
        "local-grid",
        "--quick",
        "--quiet",
        "--out",
        dir.to_str().expect("utf8"),
    ]);
    let text = std::fs::read_to_string(dir.join("local-grid.json")).expect("local-grid.json");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&text).expect("JSON rows");
    assert_eq!(
        rows.len(),
        2 * 2 * 2 * 2,
        "2 sets × 2 fits × 2 batches × 2 seeds"
    );
    let num = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    for r in &rows {
        let (g, q, w) = (
            num(r, "rmse_global"),
            num(r, "rmse_fleet_query"),
            num(r, "fleet_query_weight"),
        );
        assert!(
            g.is_finite() && q.is_finite() && (0.0..=1.0).contains(&w),
            "{r}"
        );
        assert!(num(r, "rmse_fleet_query_unweighted").is_finite(), "{r}");
    }
    let summary = std::fs::read_to_string(dir.join("local-grid-summary.csv")).expect("summary");
    assert_eq!(summary.lines().count(), 1 + 2 * 2, "{summary}");
    for line in summary.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let v = |i: usize| f[i].parse::<f64>().unwrap_or(f64::NAN);
        // runs, mean, worst, best: best ≤ mean ≤ worst.
        assert_eq!(v(3), 4.0, "{line}");
        assert!(v(6) <= v(4) && v(4) <= v(5), "{line}");
    }
    for f in [
        "local-grid-wind.png",
        "local-grid-traffic.svg",
        "local-grid.csv",
    ] {
        let bytes = std::fs::read(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(bytes.len() > 100, "{f}");
    }
}

#[test]
fn faults_experiment_marks_each_faulty_station_and_contains_it() {
    // Issue 29: each case with and without containment; the faulty stations marked, no honest
    // one, and containment brings the fleet query back near the clean fleet's.
    let dir = tmp("exp-faults");
    coolgp_ok(&[
        "experiment",
        "faults",
        "--quick",
        "--quiet",
        "--out",
        dir.to_str().expect("utf8"),
    ]);
    let table = std::fs::read_to_string(dir.join("faults.csv")).expect("faults.csv");
    assert_eq!(table.lines().count(), 1 + 6 * 2, "{table}");
    let text = std::fs::read_to_string(dir.join("summary.json")).expect("summary.json");
    let s: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    for c in s["summary"].as_array().expect("cases") {
        let contained = c["suspects_policy"] == "contain";
        let (marked, total) = (c["faulty_marked"].as_u64(), c["faulty_total"].as_u64());
        assert_eq!(marked, if contained { total } else { Some(0) }, "{c}");
        assert_eq!(c["runs_with_an_honest_member_marked"], 0, "{c}");
        let q = c["fleet_query_vs_clean"]["worst"]
            .as_f64()
            .unwrap_or(f64::NAN);
        if contained {
            assert!(q < 2.5, "{c}");
        } else if c["case"] != "clean" {
            assert!(q > 10.0, "{c}");
        }
    }
    for f in ["faults.png", "faults.svg"] {
        assert!(dir.join(f).exists(), "{f}");
    }
}
