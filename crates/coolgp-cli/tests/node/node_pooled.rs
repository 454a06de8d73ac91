//! Issues 28 and 31 in the node: the fleet's pooled fit of the residual kernel (a fitter added
//! later, the place lengthscale learned from pooled samples), calibrated and routed
//! `coolgp query --all`, and requests for rows answered only by the members they name.

use crate::common;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

use coolgp::local::{combine, FleetRule, ResidualFamily};
use coolgp_node::{client, ZenohArgs};

use crate::node_local::{
    answer, close, memory_path, own_answers, query, query_csv, query_err, regional_shares, same,
    LOCAL,
};

#[test]
fn a_fitter_added_with_certs_add_gets_rows_and_its_kernel_taken_beyond_its_neighbours() {
    // Path 0 – 1 – 2 over TLS with certificates for nodes 1 and 2 only. Node 0 is added with
    // `certs --add 0` while they run: as the lowest live id it becomes the fitter. Node 2
    // never hears from it directly (no message would make it re-read its roster), yet it must
    // answer node 0's signed requests for rows and take node 0's kernel, at its first fit
    // although node 1 fitted before.
    let _g = serial();
    let n = 3;
    let mut fleet = Fleet::new_tls("late0", n, &[1, 2]);
    let pki = fleet.tls.clone().expect("pki");
    let shares = regional_shares(n, 990);
    let total: usize = shares.iter().map(Vec::len).sum();
    // Start order 1, 2, 0: the logs are numbered by start (node{k}.log).
    let order = [1, 2, 0];
    for (k, &i) in order.iter().enumerate() {
        let csv = fleet.dir.join(format!("data{i}.csv"));
        write_csv(&csv, &shares[i]);
        let mut args = fleet.base_args(i, &path_neighbors(i, n), 10, 40);
        args.extend(["--data".into(), csv.display().to_string()]);
        if i != 1 {
            args.extend(["--connect".into(), fleet.ep(fleet.ports[1])]);
        }
        args.extend(LOCAL.iter().map(ToString::to_string));
        if k == 2 {
            std::thread::sleep(Duration::from_millis(1500));
            coolgp_ok(&["certs", "--add", "0", "--out", &pki.display().to_string()]);
        }
        fleet.start(args);
    }
    fleet.connect_client();
    let log = |id: usize| {
        let k = order.iter().position(|&i| i == id).expect("started");
        std::fs::read_to_string(fleet.dir.join(format!("node{k}.log"))).unwrap_or_default()
    };
    fleet.wait_all(
        "the streams to end and a pooled fit everywhere",
        Duration::from_secs(60),
        |_, s| s.stream_ended && s.fleet_points == total as f64 && s.local_pooled_fits >= 1,
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let kernel = |i| fleet.status(i, false).map(|s| s.local_kernel);
        let (k0, k2) = (kernel(0), kernel(2));
        // Three anchor samples, and all three nodes answered the signed request for rows near
        // the anchors (the fit on neighbourhood groups, docs/LOCAL.md §11).
        let near = log(0).contains("nodes=3") && log(0).contains("neighbourhood groups: chosen");
        if k0.is_some() && k0 == k2 && log(0).contains("samples=3") && near {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "node 2 did not take node 0's kernel fitted on three samples: {k0:?} {k2:?}\n{}",
            fleet.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!log(2).contains("kernel refused"), "node 2:\n{}", log(2));
}

/// Node i is a station at its own place `x1 = i − 1` with 40 rows on days `x2` spread over
/// [−3, 3]: `y = 0.3·x1 + sin(3·x2)` plus a little noise from `make_rows`' second input.
fn station_shares(n: usize, seed: u64) -> Vec<Vec<(Vec<f64>, f64)>> {
    (0..n)
        .map(|i| {
            make_rows(seed + i as u64, 40)
                .into_iter()
                .enumerate()
                .map(|(r, (x, _))| {
                    let (place, day) = (i as f64 - 1.0, -3.0 + 6.0 * (r as f64 + 0.5) / 40.0);
                    let y = 0.3 * place + (3.0 * day).sin() + 0.05 * x[1];
                    (vec![place, day], y)
                })
                .collect()
        })
        .collect()
}

#[test]
fn nodes_with_the_fleet_fit_pool_their_samples_and_learn_the_place_lengthscale() {
    // Issue 19, docs/LOCAL.md §9 on real nodes: every row of a station shares its place, so a
    // node's own likelihood is flat in the place's lengthscale and `--local-fit agent` leaves
    // it at its start, the same on every node; with `--local-fit fleet` node 0 fits on the
    // samples it asks of every node (one get over the fleet's predict keys), moving it, and
    // the others take its kernel.
    let _g = serial();
    let t0 = Instant::now();
    let shares = station_shares(3, 970);
    let total: usize = shares.iter().map(Vec::len).sum();
    let mut place = Vec::new();
    for fit in ["agent", "fleet"] {
        let mut fleet = Fleet::new(&format!("pool{fit}"), 3);
        let extra = ["--local-memory", "30", "--local-fit", fit];
        start_path(&mut fleet, &shares, 10, 40, false, &extra);
        let st = fleet.wait_all(
            "the streams and a pooled fit",
            Duration::from_secs(60),
            |_, s| {
                s.stream_ended
                    && s.fleet_points == total as f64
                    && s.local_points == 30
                    && s.local_pooled_fits >= 1
            },
        );
        for s in &st {
            // [ln σ_r, ln σ_rn, ln ℓ_place, ln ℓ_day], and ν for a Matérn kernel (LOCAL.md §12a).
            let k = &s.local_kernel;
            let matern = k.len() == 5 && [1.5, 2.5].contains(&k[4]);
            assert!(k.len() == 4 || matern, "{k:?}");
            if fit == "agent" {
                // Each node fitted on its own rows and took the fitter's consensus of those
                // fits (docs/LOCAL.md §12b); it shares no row.
                assert!(s.local_fitted_rows > 0, "{s:?}");
            }
        }
        // With the fleet fit, node 0 fits and the others take its kernel: once settled, the
        // fleet holds one kernel. With own fits, every node holds node 0's consensus of the
        // three nodes' own kernels.
        let mut st = st;
        let settled = |st: &[coolgp_node::Status]| match fit {
            "agent" => st.iter().all(|s| {
                !s.local_consensus.is_empty() && s.local_consensus == st[0].local_consensus
            }),
            _ => st.iter().all(|s| s.local_kernel == st[0].local_kernel),
        };
        for _ in 0..20 {
            if st.len() == 3 && settled(&st) {
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
            st = (0..3).filter_map(|i| fleet.status(i, false)).collect();
        }
        assert!(st.len() == 3 && settled(&st), "{}", fleet.logs());
        if fit == "agent" {
            let logs = fleet.logs();
            assert!(
                logs.contains("consensus of the members' own kernels kernels=3"),
                "{logs}"
            );
            assert!(
                !logs.contains("pooled fit: anchors"),
                "no row is asked for: {logs}"
            );
        }
        if fit == "fleet" {
            assert!(
                st.len() == 3 && st.iter().all(|s| s.local_kernel == st[0].local_kernel),
                "one kernel for the fleet: {:?}",
                st.iter().map(|s| &s.local_kernel).collect::<Vec<_>>()
            );
            // The fitter fitted on neighbourhood groups of all three nodes' rows
            // (docs/LOCAL.md §11), not the spaced fallback.
            let logs = fleet.logs();
            assert!(
                logs.contains("neighbourhood groups: chosen") && !logs.contains("no rows near"),
                "{logs}"
            );
        }
        place.push(st.iter().map(|s| s.local_kernel[2]).collect::<Vec<f64>>());
        // The fleet query answers either way.
        let input = query_csv(&fleet);
        let (rows, _) = query(&fleet, &["--all", "--input", &input]);
        assert!(rows.iter().flatten().all(|v| v.is_finite()), "{rows:?}");
        if fit == "fleet" {
            calibrated_query(&fleet, &input);
        }
    }
    let (own, pooled) = (&place[0], &place[1]);
    assert!(
        own.iter().all(|v| *v == own[0]),
        "agent fits and their consensus leave ln ℓ_place at its common start: {own:?}"
    );
    assert!(
        pooled.iter().all(|v| (v - own[0]).abs() > 1e-3),
        "pooled fits move ln ℓ_place: {pooled:?} against {own:?}"
    );
    eprintln!(
        "pooled fit test: {:.1} s; ln ℓ_place own {own:?}, pooled {pooled:?}",
        t0.elapsed().as_secs_f64()
    );
}

/// `coolgp query --all --calibrate 20` on three nodes that share their rows (30 in memory
/// each): under a named rule the combined answer is the uncalibrated one with its residual
/// correction weighted and every variance scaled (weight and scale printed on stderr;
/// docs/LOCAL.md §10, §12), retried while the models move; without a rule, `auto` names the
/// rule it chose.
fn calibrated_query(fleet: &Fleet, input: &str) {
    let number_after = |stderr: &str, key: &str| -> f64 {
        let tail = stderr.split(key).nth(1).expect("the figure on stderr");
        tail.split_whitespace()
            .next()
            .and_then(|v| v.trim_end_matches(')').parse().ok())
            .expect("a number")
    };
    let mut calibrated = false;
    for _ in 0..5 {
        let rbcm = ["--all", "--input", input, "--parts", "--fleet-rule", "rbcm"];
        let (raw, _) = query(fleet, &rbcm);
        let args = [&rbcm[..], &["--calibrate", "20"]].concat();
        let (cal, stderr) = query(fleet, &args);
        assert!(
            stderr.contains("from 60 leave-one-out memory rows of agent(s) [0, 1, 2]")
                && stderr.contains("calibration: rule rbcm"),
            "{stderr}"
        );
        let (s, w) = (
            number_after(&stderr, "variance x"),
            number_after(&stderr, "(weight "),
        );
        assert!((1.0 / 16.0..=16.0).contains(&s), "scale {s}");
        assert!((0.0..=1.0).contains(&w), "weight {w}");
        calibrated = weighted_and_scaled(&raw, &cal, w, s);
        if calibrated {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(
        calibrated,
        "--calibrate is not the raw answer weighted and scaled"
    );
    let (_, stderr) = query(fleet, &["--all", "--input", input, "--calibrate", "20"]);
    assert!(
        stderr.contains("calibration: rule "),
        "auto names its rule: {stderr}"
    );
    let stderr = query_err(fleet, &["--all", "--input", input, "--fleet-rule", "auto"]);
    assert!(stderr.contains("give --calibrate K"), "{stderr}");
}

/// Whether the answers `cal` are the uncalibrated `raw` ones (both with `--parts`) with the
/// residual correction weighted by `w` and every variance scaled by `s` (docs/LOCAL.md §10,
/// §12). Columns: mean, var_f, var_y, global_mean, global_var, residual_mean, residual_var,
/// residual_prior, noise_var.
fn weighted_and_scaled(raw: &[Vec<f64>], cal: &[Vec<f64>], w: f64, s: f64) -> bool {
    raw.len() == cal.len()
        && raw.iter().zip(cal).all(|(r, c)| {
            let var_f = s * (r[4] + w * r[6] + (1.0 - w) * r[7]);
            close(c[0], r[3] + w * r[5])
                && (c[1] / var_f - 1.0).abs() < 1e-4
                && (c[2] / (var_f + s * r[8]) - 1.0).abs() < 1e-4
        })
}

#[test]
fn the_fitter_publishes_its_calibration_and_query_all_applies_it_by_default() {
    // Issue 28 item 5: the fitter (node 0) measures every rule on the fleet's held-out memory
    // rows after its pooled fits and reports the best in its status; `query --all` without
    // `--fleet-rule` or `--calibrate` combines by that rule, weighted and scaled as measured;
    // a named rule is used as given, uncalibrated.
    let _g = serial();
    let shares = station_shares(3, 970);
    let total: usize = shares.iter().map(Vec::len).sum();
    let mut fleet = Fleet::new("fitcal", 3);
    let extra = ["--local-memory", "30"];
    start_path(&mut fleet, &shares, 10, 40, false, &extra);
    fleet.wait_all(
        "the streams, a pooled fit and the fitter's calibration",
        Duration::from_secs(90),
        |i, s| {
            s.stream_ended
                && s.fleet_points == total as f64
                && s.local_pooled_fits >= 1
                && (i != 0 || s.fleet_calibration.is_some())
        },
    );
    for i in 1..3 {
        let st = fleet.status(i, false).expect("status");
        assert!(st.fleet_calibration.is_none(), "only the fitter measures");
    }
    let input = query_csv(&fleet);
    let mut applied = false;
    for _ in 0..10 {
        let c = fleet
            .status(0, false)
            .and_then(|s| s.fleet_calibration)
            .expect("the fitter's calibration");
        let rule = FleetRule::from_name(&c.rule).expect("a known rule");
        // Every node offers all its 30 memory rows (768 / 3 members, at most 64 each).
        assert_eq!(c.rows, 90, "{c:?}");
        assert!((0.0..=1.0).contains(&c.weight) && (1.0 / 16.0..=16.0).contains(&c.scale));
        let named = [
            "--all",
            "--input",
            &input,
            "--parts",
            "--fleet-rule",
            rule.name(),
        ];
        let (raw, named_err) = query(&fleet, &named);
        assert!(!named_err.contains("calibration"), "{named_err}");
        let (cal, stderr) = query(&fleet, &["--all", "--input", &input, "--parts"]);
        let said = format!(
            "calibration: agent 0's (the fitter, after its pooled fit {})",
            c.fit
        );
        assert!(
            stderr.contains(&said) && stderr.contains(&format!("combined by {}", rule.name())),
            "{stderr}"
        );
        applied = weighted_and_scaled(&raw, &cal, c.weight, c.scale);
        if applied {
            break;
        }
        // The models or the calibration moved between the two queries: ask again.
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(
        applied,
        "the default query is not the fitter's rule weighted and scaled"
    );
}

#[test]
fn routed_queries_ask_the_agents_whose_coverage_is_nearest() {
    // Issue 31: `coolgp status --all` gives every node's brief (its coverage among it) from
    // one request; `query --all --route K` with K at least the fleet is the unrouted query
    // bit for bit, and with K = 1 each row is the rule over the one node whose region holds
    // it (node i's rows lie around x1 = 2i − 2).
    let _g = serial();
    let t0 = Instant::now();
    let (fleet, _) = memory_path(
        "route",
        970,
        false,
        &["--local-memory", "30", "--local-fit", "agent"],
    );
    let mut cmd = Command::new(BIN);
    cmd.args(["status", "--all", "--fleet", &fleet.name]);
    for p in &fleet.ports {
        cmd.args(["--connect", &fleet.ep(*p)]);
    }
    let out = cmd.output().expect("coolgp status --all");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["fleet"]["agents"], 3, "{doc}");
    assert_eq!(doc["fleet"]["ids"], serde_json::json!([0, 1, 2]));
    assert_eq!(doc["fleet"]["points"], 120);
    assert_eq!(doc["fleet"]["agents_with_every_point"], 3);
    assert_eq!(doc["fleet"]["with_coverage"], 3);
    for a in doc["agents"].as_array().expect("agents") {
        let c = &a["coverage"];
        assert_eq!(c["columns"], serde_json::json!(["x1", "x2"]), "{a}");
        let boxes = c["boxes"].as_array().expect("boxes");
        let rows: u64 = boxes
            .iter()
            .map(|b| b["rows"].as_u64().expect("rows"))
            .sum();
        assert_eq!((boxes.len(), rows), (8, 30), "{a}");
    }
    let input = query_csv(&fleet);
    let mut ok = false;
    for _ in 0..5 {
        let own = own_answers(&fleet, &input);
        let ask = |k: &str| {
            query(
                &fleet,
                &["--all", "--input", &input, "--parts", "--route", k],
            )
        };
        let (every, _) = ask("0");
        let (wide, stderr) = ask("3");
        assert!(!stderr.contains("routed:"), "{stderr}");
        let (one, stderr) = ask("1");
        assert!(
            stderr.contains("routed: each row to the 1 agents nearest it by coverage, of 3 (7 answers for 7 rows"),
            "{stderr}"
        );
        // Rows at x1 = −3, −2 lie in node 0's region, 0 in node 1's, 2, 3 in node 2's.
        let owner = [(0, 0), (1, 0), (3, 1), (5, 2), (6, 2)];
        let routed = owner.iter().all(|&(r, a)| {
            combine(FleetRule::Rbcm, &[answer(&own[a][r])]).is_some_and(|w| same(&one[r], &w))
        });
        if every == wide && routed {
            ok = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(
        ok,
        "routed answers are not the nearest nodes' (or K = 3 is not K = 0)"
    );
    eprintln!("routed query test: {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn requests_for_rows_go_only_to_the_members_they_name() {
    // Issue 31, item 3: a pooled fit in a large fleet asks a bounded set of members. A
    // request for rows with a route is answered only by the agents it names (the others stay
    // silent), and a request for rows near given ones is answered at the rows the route
    // lists for each agent, exactly as the unrouted request answers there.
    use coolgp_node::pooled_fit::{fetch_samples, SampleRequest};
    use coolgp_node::status::{NearRequest, PredictRequest};
    use std::collections::BTreeMap;
    let _g = serial();
    let (fleet, _) = memory_path("rowroute", 980, false, LOCAL);
    let z = ZenohArgs {
        connect: fleet.ports.iter().map(|p| fleet.ep(*p)).collect(),
        ..ZenohArgs::default()
    };
    let c = client::BlockingClient::connect(&z).expect("client session");
    let ask = |req: &PredictRequest| {
        let r = SampleRequest::of(req, &fleet.name, None, 0);
        let (got, dropped) = c.block_on(fetch_samples(
            c.session(),
            &fleet.name,
            &r,
            Duration::from_secs(5),
        ));
        assert!(dropped.is_empty(), "{dropped:?}");
        got
    };
    let sample = |route: Option<BTreeMap<u64, Vec<usize>>>| PredictRequest {
        fit_sample: Some(4),
        route,
        ..PredictRequest::default()
    };
    let all = ask(&sample(None));
    assert_eq!(all.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2]);
    let named = ask(&sample(Some([(1, Vec::new())].into())));
    assert_eq!(named.keys().copied().collect::<Vec<_>>(), vec![1]);
    assert_eq!(
        named[&1].x, all[&1].x,
        "the named agent offers what it offers unrouted"
    );
    let near = |route: Option<BTreeMap<u64, Vec<usize>>>| PredictRequest {
        columns: Some(vec!["x1".into(), "x2".into()]),
        x: vec![vec![-2.0, 0.0], vec![2.0, 0.5]],
        near: Some(NearRequest {
            k: 2,
            scale: vec![1.0, 1.0],
        }),
        route,
        ..PredictRequest::default()
    };
    let every = ask(&near(None));
    let routed = ask(&near(Some([(0, vec![1]), (2, vec![0, 1])].into())));
    assert_eq!(routed.keys().copied().collect::<Vec<_>>(), vec![0, 2]);
    assert_eq!(
        routed[&0].x,
        every[&0].x[2..4],
        "agent 0: the rows near the second row only"
    );
    assert_eq!(routed[&2].x, every[&2].x, "agent 2: both rows");
    assert_eq!(routed[&0].y, every[&0].y[2..4]);
}

/// The scores, incumbent, groups' family and chosen family of the fitter's log line "pooled
/// fit: families on the fleet's task" (`scores=["se=0.01", "sum=0.02"] incumbent="se"
/// groups="sum" chosen="se"`).
type FamilyLine = (
    Vec<(ResidualFamily, f64)>,
    Option<ResidualFamily>,
    ResidualFamily,
    ResidualFamily,
);

/// [`FamilyLine`] of `line`, `None` if a field is missing or unknown.
fn family_line(line: &str) -> Option<FamilyLine> {
    let field = |key: &str| -> Option<&str> {
        let at = line.find(&format!(" {key}="))? + key.len() + 2;
        line[at..]
            .split_whitespace()
            .next()
            .map(|v| v.trim_matches('"'))
    };
    let family = |key: &str| field(key).and_then(ResidualFamily::from_name);
    let list = line.split("scores=[").nth(1)?.split(']').next()?;
    let scores = list
        .split(',')
        .map(|s| {
            let (f, m) = s.trim().trim_matches('"').split_once('=')?;
            Some((ResidualFamily::from_name(f)?, m.parse().ok()?))
        })
        .collect::<Option<Vec<_>>>()?;
    Some((
        scores,
        family("incumbent"),
        family("groups")?,
        family("chosen")?,
    ))
}

#[test]
fn the_fitter_chooses_the_family_on_the_fleet_s_task() {
    // docs/LOCAL.md §12c on real nodes: with `--local-families se,sum` the fitter scores both
    // families' candidates on the fleet query's own task (every member answers the
    // calibration under each as a trial kernel), logs the scores, and the fleet holds the
    // family the core's rule picks from them.
    use coolgp::local::select::family_on_scores;
    use coolgp_node::kernel_auth::kernel_of_words;
    let _g = serial();
    let t0 = Instant::now();
    let shares = station_shares(3, 970);
    let total: usize = shares.iter().map(Vec::len).sum();
    let mut fleet = Fleet::new("famtask", 3);
    let extra = ["--local-memory", "30", "--local-families", "se,sum"];
    start_path(&mut fleet, &shares, 10, 40, false, &extra);
    fleet.wait_all(
        "the streams and a pooled fit",
        Duration::from_secs(60),
        |_, s| s.stream_ended && s.fleet_points == total as f64 && s.local_pooled_fits >= 1,
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let log = std::fs::read_to_string(fleet.dir.join("node0.log")).unwrap_or_default();
        let tag = "pooled fit: families on the fleet's task";
        let last = log.lines().rev().find(|l| l.contains(tag));
        // Every node's family (d = 2: a squared exponential has 4 parameters).
        let held: Vec<Option<ResidualFamily>> = (0..3)
            .map(|i| {
                let words = fleet.status(i, false)?.local_kernel;
                kernel_of_words(&words, 4).ok().map(|(f, _)| f)
            })
            .collect();
        if let Some(line) = last {
            let (scores, incumbent, groups, chosen) =
                family_line(line).unwrap_or_else(|| panic!("unparsed: {line}"));
            let mut families: Vec<&str> = scores.iter().map(|s| s.0.name()).collect();
            families.sort_unstable();
            assert_eq!(families, ["se", "sum"], "{line}");
            assert!(
                scores.iter().all(|s| s.1.is_finite() && s.1 > 0.0),
                "{line}"
            );
            let rule = family_on_scores(&scores, incumbent).unwrap_or(groups);
            assert_eq!(rule, chosen, "{line}");
            if held.iter().all(|f| *f == Some(chosen)) {
                eprintln!("{line}");
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no scores on the fleet's task, or the fleet holds {held:?} against them\n{}",
            fleet.logs()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!(
        "family on the fleet's task: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}
