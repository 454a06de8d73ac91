//! The dashboard's picture of a fleet, sans-IO: membership (liveliness), the latest status
//! of each member, traffic rates, neighbour edges, convergence and problems, and the JSON
//! document of `GET /api/fleet`. The watcher feeds it; the clock comes in as arguments.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use coolgp_node::status::{ProjectionSummary, PROJECTION_RTOL};
use coolgp_node::Status;
use serde::Serialize;
use serde_json::{json, Value};

use crate::history::{History, Point};

/// Ticks of history kept (15 minutes at the default 1 s poll).
pub const HISTORY_TICKS: usize = 900;
/// Notices kept for the page.
pub const NOTICES: usize = 30;
/// Relative tolerance of "a node represents all N points" (push-sum converges geometrically;
/// trees are exact).
pub const POINTS_RTOL: f64 = 1e-9;

/// Traffic of one node per second, from two successive statuses (node clock: `uptime_ms`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Rates {
    /// Messages received per second.
    pub msgs_in_per_s: f64,
    /// Messages sent per second.
    pub msgs_out_per_s: f64,
    /// Payload bytes received per second.
    pub bytes_in_per_s: f64,
    /// Payload bytes sent per second.
    pub bytes_out_per_s: f64,
}

impl Rates {
    /// Rates between `prev` and `cur`, `None` if the node restarted (uptime or a counter went
    /// back) or no time passed.
    pub fn between(prev: &Status, cur: &Status) -> Option<Rates> {
        let dt = cur.uptime_ms.checked_sub(prev.uptime_ms)? as f64 / 1000.0;
        if dt <= 0.0 {
            return None;
        }
        let per_s = |a: u64, b: u64| b.checked_sub(a).map(|d| d as f64 / dt);
        Some(Rates {
            msgs_in_per_s: per_s(prev.messages_received, cur.messages_received)?,
            msgs_out_per_s: per_s(prev.messages_sent, cur.messages_sent)?,
            bytes_in_per_s: per_s(prev.bytes_received, cur.bytes_received)?,
            bytes_out_per_s: per_s(prev.bytes_sent, cur.bytes_sent)?,
        })
    }
}

/// The latest readable status of a member.
#[derive(Clone, Debug)]
struct NodeView {
    /// The document exactly as the node sent it (fields this build does not know included).
    raw: Value,
    status: Status,
    at: Instant,
    rates: Option<Rates>,
}

/// A line for the page's notice list (and the log).
#[derive(Clone, Debug, Serialize)]
struct Notice {
    unix_ms: u64,
    level: &'static str,
    text: String,
}

/// Something the operator should see now.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Problem {
    /// The node concerned, `None` for the dashboard's own connection or the fleet.
    pub node: Option<u64>,
    /// What is wrong, in words.
    pub message: String,
}

/// Nodes of one projection group that hold the same q(W): within [`PROJECTION_RTOL`] by
/// their summaries, or with the same digest when either node sends no summary (an older
/// node). The first node's summary and digest stand for the class.
#[derive(Debug)]
struct ProjectionClass<'a> {
    digest: &'a str,
    summary: Option<&'a ProjectionSummary>,
    ids: Vec<u64>,
}

impl ProjectionClass<'_> {
    /// True when `node` holds this class's q(W).
    fn holds(&self, node: &ProjectionClass<'_>) -> bool {
        match (self.summary, node.summary) {
            (Some(a), Some(b)) => a.agrees_with(b, PROJECTION_RTOL),
            _ => self.digest == node.digest,
        }
    }
}

/// Everything the dashboard knows about one fleet.
#[derive(Debug)]
pub struct FleetState {
    fleet: String,
    endpoints: Vec<String>,
    stale: Duration,
    members: BTreeSet<u64>,
    nodes: BTreeMap<u64, NodeView>,
    unreadable: BTreeMap<u64, String>,
    peers: Option<usize>,
    fleets_seen: Option<Vec<String>>,
    notices: VecDeque<Notice>,
    history: History,
}

impl FleetState {
    /// An empty picture of `fleet`, reached through `endpoints`; a status older than `stale`
    /// marks its node stale.
    pub fn new(fleet: &str, endpoints: &[String], stale: Duration) -> Self {
        FleetState {
            fleet: fleet.to_string(),
            endpoints: endpoints.to_vec(),
            stale,
            members: BTreeSet::new(),
            nodes: BTreeMap::new(),
            unreadable: BTreeMap::new(),
            peers: None,
            fleets_seen: None,
            notices: VecDeque::new(),
            history: History::new(HISTORY_TICKS),
        }
    }

    /// The fleet watched.
    pub fn fleet(&self) -> &str {
        &self.fleet
    }

    /// Ids whose liveliness token is visible.
    pub fn members(&self) -> impl Iterator<Item = u64> + '_ {
        self.members.iter().copied()
    }

    fn notice(&mut self, unix_ms: u64, level: &'static str, text: String) {
        match level {
            "warn" => tracing::warn!(fleet = %self.fleet, "{text}"),
            _ => tracing::info!(fleet = %self.fleet, "{text}"),
        }
        self.notices.push_back(Notice {
            unix_ms,
            level,
            text,
        });
        while self.notices.len() > NOTICES {
            self.notices.pop_front();
        }
    }

    /// A liveliness token appeared.
    pub fn member_joined(&mut self, id: u64, unix_ms: u64) {
        if self.members.insert(id) {
            self.fleets_seen = None;
            self.notice(unix_ms, "info", format!("node {id} joined"));
        }
    }

    /// A liveliness token disappeared: the node left, crashed or lost connectivity.
    pub fn member_left(&mut self, id: u64, unix_ms: u64) {
        if self.members.remove(&id) {
            self.nodes.remove(&id);
            self.unreadable.remove(&id);
            self.notice(
                unix_ms,
                "warn",
                format!("node {id} left (its liveliness token is gone)"),
            );
        }
    }

    /// How many zenoh peers the dashboard's session is connected to.
    pub fn set_peers(&mut self, peers: usize, unix_ms: u64) {
        let before = self.peers.replace(peers);
        if peers == 0 && before != Some(0) {
            let msg = self.no_peer_message();
            self.notice(unix_ms, "warn", msg);
        } else if peers > 0 && before.is_none_or(|b| b == 0) {
            self.notice(
                unix_ms,
                "info",
                format!("connected to {peers} zenoh peer(s)"),
            );
        }
    }

    /// The fleets found on the network while this one has no member (`None`: not looked).
    pub fn set_fleets_seen(&mut self, fleets: Option<Vec<String>>, unix_ms: u64) {
        let changed = fleets.is_some() && fleets != self.fleets_seen;
        self.fleets_seen = fleets;
        if changed {
            let msg = self.no_member_message();
            self.notice(unix_ms, "warn", msg);
        }
    }

    /// A reply of node `id`'s status queryable: parsed, checked, and its rates computed.
    /// Anything else than a status document of this fleet and id marks the node unreadable.
    pub fn status_reply(&mut self, id: u64, bytes: &[u8], now: Instant, unix_ms: u64) {
        let raw: Value = match serde_json::from_slice(bytes) {
            Ok(v) => v,
            Err(e) => return self.status_failed(id, format!("status is not JSON: {e}"), unix_ms),
        };
        let status: Status = match serde_json::from_value(raw.clone()) {
            Ok(s) => s,
            Err(e) => {
                let msg = format!("status is not a coolgp status document: {e}");
                return self.status_failed(id, msg, unix_ms);
            }
        };
        if status.model.fleet != self.fleet || status.model.id != id {
            let msg = format!(
                "status at node {id}'s key says fleet '{}' id {}",
                status.model.fleet, status.model.id
            );
            return self.status_failed(id, msg, unix_ms);
        }
        if self.unreadable.remove(&id).is_some() {
            self.notice(unix_ms, "info", format!("node {id}: status readable again"));
        }
        let rates = match self.nodes.get(&id) {
            Some(prev) => Rates::between(&prev.status, &status).or(prev.rates),
            None => None,
        };
        self.nodes.insert(
            id,
            NodeView {
                raw,
                status,
                at: now,
                rates,
            },
        );
    }

    /// Node `id` did not answer, or answered with something unusable; logged once per
    /// distinct message. Its last good status (if any) is kept and turns stale.
    pub fn status_failed(&mut self, id: u64, message: String, unix_ms: u64) {
        if !self.members.contains(&id) {
            return;
        }
        if self.unreadable.get(&id) != Some(&message) {
            self.notice(unix_ms, "warn", format!("node {id}: {message}"));
            self.unreadable.insert(id, message);
        }
    }

    fn is_stale(&self, v: &NodeView, now: Instant) -> bool {
        now.saturating_duration_since(v.at) > self.stale
    }

    /// Undirected neighbour edges `[a, b]` (`a < b`) between alive members, from the
    /// members' configured `neighbors`, sorted.
    pub fn edges(&self) -> Vec<[u64; 2]> {
        let mut e = BTreeSet::new();
        for (id, v) in &self.nodes {
            for nb in &v.status.neighbors {
                if nb != id && self.members.contains(nb) {
                    e.insert([(*id).min(*nb), (*id).max(*nb)]);
                }
            }
        }
        e.into_iter().collect()
    }

    fn no_peer_message(&self) -> String {
        if self.endpoints.is_empty() {
            "not connected to any zenoh peer: give a node's endpoint with --connect".into()
        } else {
            format!(
                "not connected to any zenoh peer: nothing answers at {} (is a node listening there? check --connect)",
                self.endpoints.join(", ")
            )
        }
    }

    fn no_member_message(&self) -> String {
        let seen = self.fleets_seen.as_deref().unwrap_or_default();
        if seen.is_empty() {
            format!(
                "no node of fleet '{}' is alive, and no coolgp node is visible on this network",
                self.fleet
            )
        } else {
            format!(
                "no node of fleet '{}' is alive; fleets seen: {} (check --fleet)",
                self.fleet,
                seen.join(", ")
            )
        }
    }

    /// What the operator should look at, most basic first.
    pub fn problems(&self, now: Instant) -> Vec<Problem> {
        let mut out = Vec::new();
        let fleet_wide = |message| Problem {
            node: None,
            message,
        };
        if self.peers == Some(0) {
            out.push(fleet_wide(self.no_peer_message()));
        } else if self.members.is_empty() && self.fleets_seen.is_some() {
            out.push(fleet_wide(self.no_member_message()));
        }
        for (id, msg) in &self.unreadable {
            out.push(Problem {
                node: Some(*id),
                message: msg.clone(),
            });
        }
        for (id, v) in &self.nodes {
            if self.is_stale(v, now) && !self.unreadable.contains_key(id) {
                out.push(Problem {
                    node: Some(*id),
                    message: format!(
                        "no status for {:.1} s",
                        now.saturating_duration_since(v.at).as_secs_f64()
                    ),
                });
            }
            let rejected: u64 = v.status.rejected.values().sum();
            if rejected > 0 {
                out.push(Problem {
                    node: Some(*id),
                    message: format!(
                        "has rejected {rejected} message(s) since it started: {:?}",
                        v.status.rejected
                    ),
                });
            }
            out.extend(member_problems(*id, &v.status));
            for nb in &v.status.neighbors {
                if !self.members.contains(nb) {
                    out.push(Problem {
                        node: Some(*id),
                        message: format!("lists neighbour {nb}, which is not alive"),
                    });
                }
            }
        }
        out
    }

    /// Convergence: total own points, the least `fleet_points`, whether every readable node
    /// represents all of them, which nodes share which q(W) digest (bit-identical), and which
    /// hold the same q(W) within [`PROJECTION_RTOL`] (`projection_classes`, from the nodes'
    /// [`ProjectionSummary`]s; by digest for a node that sends none).
    fn convergence(&self) -> Value {
        let total: u64 = self.nodes.values().map(|v| v.status.points).sum();
        let total_f = total as f64;
        let min_fp = self
            .nodes
            .values()
            .map(|v| v.status.fleet_points)
            .fold(f64::INFINITY, f64::min);
        let all = !self.nodes.is_empty()
            && self.unreadable.is_empty()
            && self
                .nodes
                .values()
                .all(|v| (v.status.fleet_points - total_f).abs() <= POINTS_RTOL * total_f.max(1.0));
        let mut digests: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        // Projection groups (spec §14 with groups): one q(W) per group, so "the same q(W)"
        // means one class within each group ("" = no group).
        let mut by_group: BTreeMap<&str, Vec<ProjectionClass<'_>>> = BTreeMap::new();
        let mut modes = BTreeSet::new();
        for (id, v) in &self.nodes {
            let digest = v.status.projection_digest.as_str();
            if !digest.is_empty() {
                digests.entry(digest).or_default().push(*id);
                let node = ProjectionClass {
                    digest,
                    summary: v.status.projection_summary.as_ref(),
                    ids: vec![*id],
                };
                let classes = by_group
                    .entry(v.status.projection_group.as_deref().unwrap_or(""))
                    .or_default();
                match classes.iter_mut().find(|c| c.holds(&node)) {
                    Some(c) => c.ids.push(*id),
                    None => classes.push(node),
                }
            }
            if let Some(m) = v.raw.get("projection").and_then(Value::as_str) {
                modes.insert(m.to_string());
            }
        }
        let classes: Vec<&Vec<u64>> = by_group.values().flatten().map(|c| &c.ids).collect();
        json!({
            "total_points": total,
            "min_fleet_points": if self.nodes.is_empty() { 0.0 } else { min_fp },
            "nodes": self.nodes.len(),
            "all_represent_all": all,
            "projection_modes": modes,
            "projection_groups": by_group.len(),
            "same_projection": !digests.is_empty()
                && by_group.values().all(|c| c.len() == 1)
                && digests.values().map(Vec::len).sum::<usize>() == self.nodes.len(),
            "projection_digests": digests,
            "projection_classes": classes,
            "projection_rtol": PROJECTION_RTOL,
        })
    }

    /// Appends the readable, fresh nodes' values to the history.
    pub fn record_history(&mut self, now: Instant, unix_ms: u64) {
        let points: BTreeMap<u64, Point> = self
            .nodes
            .iter()
            .filter(|(_, v)| !self.is_stale(v, now))
            .map(|(id, v)| {
                let p = Point {
                    fleet_points: v.status.fleet_points,
                    rmse_holdout: v.status.rmse_holdout,
                    msgs_per_s: v.rates.map(|r| r.msgs_in_per_s + r.msgs_out_per_s),
                };
                (*id, p)
            })
            .collect();
        self.history.record(unix_ms, &points);
    }

    /// The document of `GET /api/history`.
    pub fn history_json(&self) -> Value {
        self.history.to_json()
    }

    /// The document of `GET /api/fleet` (and of each server-sent event):
    /// `{"fleet", "nodes": [status as sent by each readable member, by id], "edges": [[a, b]],
    /// "members", "node_meta": {"<id>": {"age_ms", "stale", "rates"}}, "unreadable":
    /// [{"id", "error"}], "convergence", "problems", "notices", "connected_peers",
    /// "endpoints", "updated_unix_ms"}`.
    pub fn snapshot(&self, now: Instant, unix_ms: u64) -> Value {
        let nodes: Vec<&Value> = self.nodes.values().map(|v| &v.raw).collect();
        let meta: serde_json::Map<String, Value> = self
            .nodes
            .iter()
            .map(|(id, v)| {
                let age = now.saturating_duration_since(v.at);
                (
                    id.to_string(),
                    json!({
                        "age_ms": u64::try_from(age.as_millis()).unwrap_or(u64::MAX),
                        "stale": self.is_stale(v, now),
                        "rates": v.rates,
                    }),
                )
            })
            .collect();
        let unreadable: Vec<Value> = self
            .unreadable
            .iter()
            .map(|(id, e)| json!({ "id": id, "error": e }))
            .collect();
        json!({
            "fleet": self.fleet,
            "nodes": nodes,
            "edges": self.edges(),
            "members": self.members,
            "node_meta": meta,
            "unreadable": unreadable,
            "convergence": self.convergence(),
            "problems": self.problems(now),
            "notices": self.notices,
            "connected_peers": self.peers,
            "endpoints": self.endpoints,
            "updated_unix_ms": unix_ms,
        })
    }
}

/// What the member check (issue 29) says of node `id` by its own status: withheld as a
/// suspect (with its evidence), and messages it scaled down by its influence cap.
fn member_problems(id: u64, s: &Status) -> Vec<Problem> {
    let mut out = Vec::new();
    if s.withheld {
        let evidence = s.member.map_or(String::new(), |m| {
            let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
            format!(
                " (score {}, z2 {} on {} of {} rows)",
                f(m.score),
                f(m.z2),
                m.informed,
                m.rows
            )
        });
        out.push(Problem {
            node: Some(id),
            message: format!(
                "is a suspect of the member check{evidence}: its own data is withheld from the fleet"
            ),
        });
    }
    if !s.capped.is_empty() {
        out.push(Problem {
            node: Some(id),
            message: format!(
                "scaled down messages that carried more precision than its influence cap allows, per sender: {:?}",
                s.capped
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_withheld_suspect_and_capped_messages_are_problems() {
        let (mut f, now) = path_of_three();
        let mut v: Value =
            serde_json::from_slice(&status_json("f", 2, 10, 30.0, &[1])).expect("json");
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
}
