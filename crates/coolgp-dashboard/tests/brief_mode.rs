//! Brief mode of the dashboard's fleet picture (issue 31, item 4) at 1,000 synthetic agents:
//! the threshold switch, convergence from the fleet aggregates, problems from the briefs,
//! fleet-level history, and the size of the `/api/fleet` document.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use coolgp_dashboard::brief::{Mode, PROBLEMS_LISTED};
use coolgp_dashboard::fleet::HISTORY_TICKS;
use coolgp_dashboard::FleetState;
use coolgp_node::coverage::{BoxJson, Brief, CoverageJson};
use coolgp_node::status::MemberJson;
use serde_json::{json, Value};

const AGENTS: u64 = 1000;
/// Own points of each agent.
const OWN: u64 = 250;

/// Agent `id`'s brief: every agent holds the whole fleet's points unless `fleet_points` says
/// otherwise; counters that grow with `tick`; a coverage and member evidence as a real agent
/// with a memory and the member check sends them (the heaviest brief).
fn brief(id: u64, fleet_points: f64, tick: u64) -> Brief {
    Brief {
        id,
        blocks: 25,
        points: OWN,
        stream_ended: true,
        fleet_points,
        round: 1000 + tick,
        local_points: 250,
        withheld: false,
        messages_sent: 10_000 + 5 * tick,
        bytes_sent: 123_456_789,
        messages_received: 10_000 + 5 * tick,
        rejected: 0,
        inbound_dropped: 0,
        rmse_holdout: Some(0.125),
        coverage: Some(CoverageJson {
            columns: vec!["x1".into(), "x2".into()],
            scale: vec![1.5, 0.25],
            boxes: vec![
                BoxJson {
                    lo: vec![-1.0, 0.0],
                    hi: vec![1.0, 2.0],
                    rows: 125,
                };
                8
            ],
        }),
        member: Some(MemberJson {
            rows: 64,
            informed: 60,
            score: Some(0.0123),
            z2: Some(1.05),
        }),
    }
}

fn total() -> f64 {
    (AGENTS * OWN) as f64
}

/// A picture of `AGENTS` members (limit 64), switched to brief mode.
fn fleet_of_a_thousand() -> FleetState {
    let mut f = FleetState::new("big", &["tcp/127.0.0.1:1".into()], Duration::from_secs(5))
        .with_full_status_limit(64);
    f.set_peers(10, 0);
    for id in 0..AGENTS {
        f.member_joined(id, 0);
    }
    assert_eq!(f.choose_mode(0), Mode::Brief);
    f
}

fn all_briefs(tick: u64) -> BTreeMap<u64, Brief> {
    (0..AGENTS)
        .map(|id| (id, brief(id, total(), tick)))
        .collect()
}

fn problem_lines(doc: &Value) -> Vec<String> {
    doc["problems"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| format!("{}: {}", p["node"], p["message"].as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_thousand_converged_briefs_make_a_light_document() {
    let mut f = fleet_of_a_thousand();
    let now = Instant::now();
    f.brief_replies(all_briefs(0), vec![], now, 0);
    let doc = f.snapshot(now, 0);
    assert_eq!(doc["mode"], json!("brief"));
    let agents = &doc["agents"];
    for col in [
        "id",
        "points",
        "fleet_points",
        "withheld",
        "rejected",
        "rmse_holdout",
    ] {
        assert_eq!(
            agents[col].as_array().map(Vec::len),
            Some(AGENTS as usize),
            "{col}"
        );
    }
    assert_eq!(agents["id"][999], json!(999));
    assert_eq!(agents["fleet_points"][999], json!(total()));
    assert_eq!(doc["edges"], json!([]));
    assert_eq!(doc["edges_known"], json!(false));
    assert!(doc.get("nodes").is_none(), "no raw status in brief mode");
    // The coverage the agents sent is not carried to the page.
    assert!(agents.get("coverage").is_none() && agents.get("member").is_none());
    // Convergence from the aggregates: 1,000 x 250 points, held by every agent.
    let c = &doc["convergence"];
    assert_eq!(c["total_points"], json!(AGENTS * OWN));
    assert_eq!(c["nodes"], json!(AGENTS));
    assert_eq!(c["agents_with_every_point"], json!(AGENTS));
    assert_eq!(c["all_represent_all"], json!(true), "{c}");
    assert_eq!(doc["aggregates"]["points"], json!(AGENTS * OWN));
    assert_eq!(doc["problems"], json!([]));

    let bytes = doc.to_string().len();
    eprintln!("brief-mode /api/fleet of {AGENTS} agents: {bytes} bytes");
    assert!(bytes < 150_000, "{bytes} bytes");
    // The history of one tick is a handful of numbers, not one series per agent.
    f.record_history(now, 1000);
    let h = f.history_json().to_string().len();
    assert!(h < 1_000, "{h} bytes");
}

#[test]
fn half_fused_fleets_show_least_median_and_most_points() {
    let mut f = fleet_of_a_thousand();
    let now = Instant::now();
    // Agent i holds (i + 1) x 250 points: least 250, most all, median 500.5 x 250.
    let briefs = (0..AGENTS)
        .map(|id| (id, brief(id, ((id + 1) * OWN) as f64, 0)))
        .collect();
    f.brief_replies(briefs, vec![], now, 0);
    let c = &f.snapshot(now, 0)["convergence"];
    assert_eq!(c["min_fleet_points"], json!(OWN as f64));
    assert_eq!(c["max_fleet_points"], json!(total()));
    assert_eq!(c["median_fleet_points"], json!(500.5 * OWN as f64));
    assert_eq!(c["agents_with_every_point"], json!(1));
    assert_eq!(c["all_represent_all"], json!(false));
}

#[test]
fn a_suspect_a_silent_agent_and_dropped_messages_are_problems() {
    let mut f = fleet_of_a_thousand();
    let now = Instant::now();
    let mut briefs = all_briefs(0);
    briefs.remove(&17);
    if let Some(b) = briefs.get_mut(&3) {
        b.withheld = true;
        b.member = Some(MemberJson {
            rows: 64,
            informed: 60,
            score: Some(25.1),
            z2: Some(40.0),
        });
    }
    if let Some(b) = briefs.get_mut(&5) {
        b.rejected = 4;
        b.inbound_dropped = 2;
    }
    f.brief_replies(
        briefs,
        vec!["coolgp/big/9/status: not a brief".into()],
        now,
        0,
    );
    let doc = f.snapshot(now, 0);
    let p = problem_lines(&doc);
    let has = |start: &str, part: &str| p.iter().any(|l| l.starts_with(start) && l.contains(part));
    assert!(
        has(
            "17: ",
            "did not answer the brief status request (never answered)"
        ),
        "{p:?}"
    );
    assert!(
        has("3: ", "is a suspect of the member check (score 25.100"),
        "{p:?}"
    );
    assert!(has("5: ", "has rejected 4 message(s)"), "{p:?}");
    assert!(has("5: ", "dropped 2 inbound message(s)"), "{p:?}");
    assert!(
        has(
            "null: ",
            "refused a reply to the brief status request: coolgp/big/9"
        ),
        "{p:?}"
    );
    assert_eq!(p.len(), 5, "{p:?}");
    assert_eq!(
        doc["silent"],
        json!([{"id": 17, "last_brief_ms_ago": null}])
    );
    assert_eq!(doc["convergence"]["all_represent_all"], json!(false));
    assert_eq!(doc["aggregates"]["withheld"], json!([3]));

    // Node 17 answers again; then 400 agents fall silent: one line for them, not 400.
    f.brief_replies(all_briefs(1), vec![], now + Duration::from_secs(1), 1);
    assert_eq!(f.snapshot(now, 1)["problems"], json!([]));
    let later = now + Duration::from_secs(3);
    let briefs = (400..AGENTS)
        .map(|id| (id, brief(id, total(), 2)))
        .collect();
    f.brief_replies(briefs, vec![], later, 2);
    let p = problem_lines(&f.snapshot(later, 2));
    assert_eq!(p.len(), 1, "{p:?}");
    let first: Vec<String> = (0..PROBLEMS_LISTED).map(|i| i.to_string()).collect();
    assert!(
        p[0].starts_with("null: 400 agents did not answer the brief status request: ")
            && p[0].contains(&first.join(", ")),
        "{p:?}"
    );
    // Their last briefs still count (as a stale status does in full mode).
    assert_eq!(f.snapshot(later, 2)["convergence"]["nodes"], json!(AGENTS));
    // A request that cannot be sent is said so, and every member is silent.
    f.briefs_failed("no route".into(), 3);
    let p = problem_lines(&f.snapshot(later, 3));
    assert!(
        p[0].contains("the brief status request failed: no route"),
        "{p:?}"
    );
}

#[test]
fn history_is_fleet_level_and_bounded() {
    let mut f = fleet_of_a_thousand();
    let t0 = Instant::now();
    let ticks = HISTORY_TICKS as u64 + 10;
    for k in 0..ticks {
        // Each agent sends and receives 5 more messages a second: 10 x 1,000 per second.
        let now = t0 + Duration::from_secs(k);
        f.brief_replies(all_briefs(k), vec![], now, 1000 * k);
        f.record_history(now, 1000 * k);
    }
    let h = f.history_json();
    assert_eq!(h["mode"], json!("brief"));
    assert_eq!(h["t"].as_array().map(Vec::len), Some(HISTORY_TICKS));
    assert!(h.get("series").is_none(), "no per-agent series: {h}");
    let msgs = &h["fleet"]["msgs_per_s"];
    assert_eq!(msgs.as_array().map(Vec::len), Some(HISTORY_TICKS));
    assert_eq!(msgs[HISTORY_TICKS - 1], json!(10.0 * AGENTS as f64));
    let fp = &h["fleet"]["fleet_points_median"];
    assert_eq!(fp[HISTORY_TICKS - 1], json!(total()));
    assert_eq!(h["fleet"]["rmse_holdout_mean"][0], json!(0.125));
    assert_eq!(
        f.snapshot(t0, 0)["rates"]["msgs_per_s"],
        json!(10.0 * AGENTS as f64)
    );
    let bytes = h.to_string().len();
    assert!(bytes < 200_000, "{bytes} bytes of history");
}

#[test]
fn the_limit_switches_between_full_and_brief() {
    let mut f = FleetState::new("f", &[], Duration::from_secs(5)).with_full_status_limit(3);
    for id in 0..3 {
        f.member_joined(id, 0);
    }
    assert_eq!(f.choose_mode(0), Mode::Full, "3 members, limit 3");
    assert_eq!(f.snapshot(Instant::now(), 0)["mode"], json!("full"));
    f.member_joined(3, 1);
    assert_eq!(f.choose_mode(1), Mode::Brief, "4 members, limit 3");
    let now = Instant::now();
    let briefs = (0..4).map(|id| (id, brief(id, 1000.0, 0))).collect();
    f.brief_replies(briefs, vec![], now, 1);
    let doc = f.snapshot(now, 1);
    assert_eq!(doc["mode"], json!("brief"));
    assert_eq!(doc["full_status_limit"], json!(3));
    assert!(
        doc["notices"]
            .to_string()
            .contains("above --full-status-limit 3: brief mode"),
        "{doc}"
    );
    // Back to 3 members: full mode again, with no brief left behind.
    f.member_left(3, 2);
    assert_eq!(f.choose_mode(2), Mode::Full);
    let doc = f.snapshot(now, 2);
    assert_eq!(doc["mode"], json!("full"));
    assert_eq!(doc["nodes"], json!([]));
    assert!(doc.get("agents").is_none());
    assert_eq!(f.history_json()["mode"], json!("full"));
    // 0: brief even before any member is seen.
    let mut g = FleetState::new("f", &[], Duration::from_secs(5)).with_full_status_limit(0);
    assert_eq!(g.choose_mode(0), Mode::Brief);
}
