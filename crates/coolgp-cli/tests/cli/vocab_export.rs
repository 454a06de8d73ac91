//! `coolgp vocab` (a saved vocabulary's round trip and fingerprint, one drawn from data) and
//! `coolgp export` (the train/test split that `simulate` streams).

use crate::common::{coolgp, coolgp_ok, on_csv, summary, tmp, write_csv};

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
