//! `coolgp demo` and `coolgp experiment … --quick`: the results folders they leave (summary,
//! tables, plots) and the figures in them.

use crate::common::{coolgp_ok, summary, tmp};

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
    // Clean, four faults, two faulty, and the two fleets without the faulty stations.
    assert_eq!(table.lines().count(), 1 + 8 * 2, "{table}");
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
        let faulty = total.is_some_and(|t| t > 0);
        if contained {
            assert!(q < 2.5, "{c}");
        } else if faulty {
            assert!(q > 10.0, "{c}");
        }
        // The faulty cases are also measured against the fleet without their faulty stations.
        let floor = c["fleet_query_vs_without_the_faulty"]["mean"].as_f64();
        assert_eq!(floor.is_some_and(f64::is_finite), faulty, "{c}");
    }
    for f in ["faults.png", "faults.svg"] {
        assert!(dir.join(f).exists(), "{f}");
    }
}
