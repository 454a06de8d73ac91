//! Tests of [`super::FleetState`] in full mode (one status per member).
use super::*;

#[test]
fn a_withheld_suspect_and_capped_messages_are_problems() {
    let (mut f, now) = path_of_three();
    let mut v: Value = serde_json::from_slice(&status_json("f", 2, 10, 30.0, &[1])).expect("json");
    v["withheld"] = json!(true);
    v["suspects"] = json!([2]);
    v["member"] = json!({"rows": 64, "informed": 60, "score": 25.1, "z2": 40.0});
    f.status_reply(2, &serde_json::to_vec(&v).expect("json"), now, 0);
    let mut w: Value =
        serde_json::from_slice(&status_json("f", 1, 10, 30.0, &[0, 2])).expect("json");
    w["capped"] = json!({"2": 7});
    f.status_reply(1, &serde_json::to_vec(&w).expect("json"), now, 0);
    let p = f.problems(now);
    let text: Vec<String> = p
        .iter()
        .map(|p| format!("{:?}: {}", p.node, p.message))
        .collect();
    assert!(
        text.iter()
            .any(|t| t.starts_with("Some(2): is a suspect") && t.contains("score 25.100")),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|t| t.starts_with("Some(1): scaled down") && t.contains("2: 7")),
        "{text:?}"
    );
    assert_eq!(p.len(), 2, "{text:?}");
}

/// A status document of `fleet`/`id` as a node would send it.
fn status_json(fleet: &str, id: u64, points: u64, fleet_points: f64, nb: &[u64]) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "fleet": fleet, "id": id, "fingerprint": "ab", "m": 10, "d_latent": 2,
        "inputs": ["x1", "x2"], "target": "y", "fusion": "tree", "blocks": 1,
        "points": points, "rows_skipped": 0, "stream_ended": true, "durable": false,
        "fleet_points": fleet_points, "round": 5, "rounds_run": 5, "neighbors": nb,
        "neighbors_heard": nb.len(), "heard_ms_ago": {}, "members_alive": [],
        "rejected": {}, "messages_accepted": 3, "messages_received": 3 + points,
        "bytes_received": 100, "inbound_dropped": 0, "messages_sent": 4,
        "bytes_sent": 200, "checkpoints": 0, "checkpoint_bytes": 0,
        "last_block_unix_ms": null, "fused_changed_unix_ms": null, "rmse_holdout": null,
        "uptime_ms": 1000 * points, "projection_digest": "00ff",
    }))
    .expect("json")
}

fn path_of_three() -> (FleetState, Instant) {
    let mut f = FleetState::new("f", &["tcp/127.0.0.1:1".into()], Duration::from_secs(5));
    let now = Instant::now();
    f.set_peers(3, 0);
    for (id, nb) in [(0, vec![1]), (1, vec![0, 2]), (2, vec![1])] {
        f.member_joined(id, 0);
        f.status_reply(id, &status_json("f", id, 10, 30.0, &nb), now, 0);
    }
    (f, now)
}

#[test]
fn a_path_has_two_edges_and_converges() {
    let (f, now) = path_of_three();
    let s = f.snapshot(now, 0);
    assert_eq!(s["nodes"].as_array().map(Vec::len), Some(3));
    assert_eq!(s["edges"], json!([[0, 1], [1, 2]]));
    assert_eq!(s["convergence"]["total_points"], json!(30));
    assert_eq!(s["convergence"]["all_represent_all"], json!(true));
    assert_eq!(s["convergence"]["same_projection"], json!(true));
    assert_eq!(s["problems"], json!([]));
}

#[test]
fn with_projection_groups_the_same_q_w_means_one_digest_per_group() {
    let now = Instant::now();
    let mut f = FleetState::new("f", &["tcp/127.0.0.1:1".into()], Duration::from_secs(5));
    f.set_peers(3, 0);
    let status = |id: u64, group: &str, digest: &str| {
        let mut v: Value =
            serde_json::from_slice(&status_json("f", id, 10, 30.0, &[])).expect("json");
        v["projection_group"] = json!(group);
        v["projection_digest"] = json!(digest);
        serde_json::to_vec(&v).expect("json")
    };
    for (id, group, digest) in [(0, "a", "aa"), (1, "b", "bb"), (2, "a", "aa")] {
        f.member_joined(id, 0);
        f.status_reply(id, &status(id, group, digest), now, 0);
    }
    let c = &f.snapshot(now, 0)["convergence"];
    assert_eq!(c["projection_groups"], json!(2));
    assert_eq!(c["same_projection"], json!(true), "one q(W) per group");
    f.status_reply(2, &status(2, "a", "cc"), now, 0);
    let c = &f.snapshot(now, 0)["convergence"];
    assert_eq!(c["same_projection"], json!(false), "group a holds two q(W)");
}

#[test]
fn summaries_within_the_tolerance_are_the_same_q_w_though_the_digests_differ() {
    // Fleet-projection nodes sum the same site sums in different orders: their q(W)
    // agree to ~1e-14, not bit for bit, so the digests differ but the summaries agree.
    let now = Instant::now();
    let mut f = FleetState::new("f", &["tcp/127.0.0.1:1".into()], Duration::from_secs(5));
    f.set_peers(3, 0);
    let status = |id: u64, digest: &str, summary: Option<[f64; 4]>| {
        let mut v: Value =
            serde_json::from_slice(&status_json("f", id, 10, 20.0, &[])).expect("json");
        v["projection"] = json!("fleet");
        v["projection_digest"] = json!(digest);
        if let Some(fs) = summary {
            v["projection_summary"] = json!({"params": 14, "functionals": fs, "scale": 25.0});
        }
        serde_json::to_vec(&v).expect("json")
    };
    let base = [3.5, -1.25, 7.0, 0.5];
    let near = base.map(|x| x * (1.0 + 1e-14));
    let far = base.map(|x| x * (1.0 + 1e-6));
    for (id, digest, summary) in [(0, "807d", base), (1, "d61f", near)] {
        f.member_joined(id, 0);
        f.status_reply(id, &status(id, digest, Some(summary)), now, 0);
    }
    let c = &f.snapshot(now, 0)["convergence"];
    assert_eq!(c["same_projection"], json!(true), "{c}");
    assert_eq!(c["projection_classes"], json!([[0, 1]]));
    assert_eq!(
        c["projection_digests"].as_object().map(|d| d.len()),
        Some(2)
    );
    // A difference of 1e-6 is another q(W).
    f.status_reply(1, &status(1, "d61f", Some(far)), now, 0);
    let c = &f.snapshot(now, 0)["convergence"];
    assert_eq!(c["same_projection"], json!(false), "{c}");
    assert_eq!(c["projection_classes"], json!([[0], [1]]));
    // A node without a summary (an older node) is compared by digest.
    f.status_reply(1, &status(1, "807d", None), now, 0);
    let c = &f.snapshot(now, 0)["convergence"];
    assert_eq!(c["same_projection"], json!(true), "{c}");
    f.status_reply(1, &status(1, "d61f", None), now, 0);
    let c = &f.snapshot(now, 0)["convergence"];
    assert_eq!(c["same_projection"], json!(false), "{c}");
}

#[test]
fn a_node_that_leaves_takes_its_edges_and_its_points() {
    let (mut f, now) = path_of_three();
    f.member_left(2, 1);
    let s = f.snapshot(now, 1);
    assert_eq!(s["members"], json!([0, 1]));
    assert_eq!(s["edges"], json!([[0, 1]]));
    // Node 1 still counts 30 points of which only 20 are alive now.
    assert_eq!(s["convergence"]["total_points"], json!(20));
    assert_eq!(s["convergence"]["all_represent_all"], json!(false));
    let p = s["problems"].to_string();
    assert!(p.contains("lists neighbour 2, which is not alive"), "{p}");
}

#[test]
fn malformed_and_foreign_statuses_are_reported_not_shown() {
    let (mut f, now) = path_of_three();
    f.member_joined(7, 0);
    f.status_reply(7, b"{not json", now, 0);
    f.member_joined(8, 0);
    f.status_reply(8, br#"{"fleet": "f", "id": 8}"#, now, 0);
    f.member_joined(9, 0);
    f.status_reply(9, &status_json("other", 9, 1, 1.0, &[]), now, 0);
    let s = f.snapshot(now, 0);
    assert_eq!(s["nodes"].as_array().map(Vec::len), Some(3));
    let bad = s["unreadable"].to_string();
    assert!(bad.contains("status is not JSON"), "{bad}");
    assert!(bad.contains("not a coolgp status document"), "{bad}");
    assert!(bad.contains("says fleet 'other' id 9"), "{bad}");
    assert_eq!(s["convergence"]["all_represent_all"], json!(false));
    // Logged once per distinct message, not once per poll.
    let n = f.notices.len();
    f.status_reply(7, b"{not json", now, 0);
    assert_eq!(f.notices.len(), n);
}

#[test]
fn no_peer_and_unknown_fleet_are_explained() {
    let mut f = FleetState::new("nope", &["tcp/127.0.0.1:9".into()], Duration::from_secs(5));
    let now = Instant::now();
    f.set_peers(0, 0);
    let p = f.problems(now);
    assert!(
        p[0].message.contains("nothing answers at tcp/127.0.0.1:9"),
        "{p:?}"
    );
    f.set_peers(2, 0);
    assert!(f.problems(now).is_empty());
    f.set_fleets_seen(Some(vec!["demo".into()]), 0);
    let p = f.problems(now);
    assert!(p[0].message.contains("fleet 'nope'"), "{p:?}");
    assert!(p[0].message.contains("fleets seen: demo"), "{p:?}");
}

#[test]
fn stale_nodes_and_rates() {
    let (mut f, t0) = path_of_three();
    let later = t0 + Duration::from_secs(2);
    f.status_reply(0, &status_json("f", 0, 12, 30.0, &[1]), later, 0);
    let s = f.snapshot(later + Duration::from_secs(4), 0);
    // Node 0: uptime 10 s → 12 s, received 13 → 15 messages: 1 per second.
    assert_eq!(s["node_meta"]["0"]["rates"]["msgs_in_per_s"], json!(1.0));
    assert_eq!(s["node_meta"]["0"]["stale"], json!(false));
    assert_eq!(s["node_meta"]["1"]["stale"], json!(true));
    assert!(s["problems"].to_string().contains("no status for 6.0 s"));
}
