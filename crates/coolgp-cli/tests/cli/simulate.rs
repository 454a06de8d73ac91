//! `coolgp simulate` on a CSV: bad rows named by file and line, determinism, config files,
//! the projection modes side by side, a separate test file, and routing by regions.

use crate::common::{coolgp, coolgp_ok, on_csv, summary, tmp, write_csv};

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
