//! Settings `coolgp simulate` and `coolgp node` refuse before any work, each saying why and the
//! fix: fleet-only flags, sizes beyond the machine, zero counts, built-in sets' columns.

use crate::common::{coolgp, coolgp_ok, node_refuses, on_csv, summary, tmp, write_csv};

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
