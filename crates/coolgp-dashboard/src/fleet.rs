//! The dashboard's picture of a fleet, sans-IO: membership (liveliness), the latest status
//! of each member, traffic rates, neighbour edges, convergence and problems, and the JSON
//! document of `GET /api/fleet`. The watcher feeds it; the clock comes in as arguments.
//! Above `--full-status-limit` members it holds briefs instead of statuses
//! ([`crate::brief`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use coolgp_node::status::{ProjectionSummary, PROJECTION_RTOL};
use coolgp_node::Status;
use serde::Serialize;
use serde_json::{json, Value};

use crate::brief::{BriefPicture, Mode, DEFAULT_FULL_STATUS_LIMIT};
use crate::history::{FleetSeries, History, Point};
use crate::problem;
pub use crate::problem::Problem;
use coolgp_node::coverage::Brief;

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
    full_status_limit: usize,
    mode: Mode,
    brief: BriefPicture,
    series: FleetSeries,
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
            full_status_limit: DEFAULT_FULL_STATUS_LIMIT,
            mode: Mode::Full,
            brief: BriefPicture::default(),
            series: FleetSeries::new(HISTORY_TICKS),
        }
    }

    /// The same picture with `--full-status-limit limit`: above `limit` members (always, for
    /// 0) the watcher asks for briefs ([`Self::choose_mode`]).
    pub fn with_full_status_limit(mut self, limit: usize) -> Self {
        self.full_status_limit = limit;
        self
    }

    /// The mode of the last [`Self::choose_mode`] (full until then).
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Picks the mode of the next poll from the membership; on a change, says so and drops
    /// the other mode's picture (a stale status of a fleet now watched by briefs, or the
    /// reverse, would mislead).
    pub fn choose_mode(&mut self, unix_ms: u64) -> Mode {
        let mode = Mode::for_fleet(self.members.len(), self.full_status_limit);
        if mode != self.mode {
            self.mode = mode;
            let (n, limit) = (self.members.len(), self.full_status_limit);
            let text = match mode {
                Mode::Brief => {
                    self.nodes.clear();
                    self.unreadable.clear();
                    format!("{n} members, above --full-status-limit {limit}: brief mode (one request for every agent's brief per poll)")
                }
                Mode::Full => {
                    self.brief = BriefPicture::default();
                    self.series.clear();
                    format!("{n} members, at most --full-status-limit {limit}: full mode (one status per member per poll)")
                }
            };
            self.notice(unix_ms, "info", text);
        }
        mode
    }

    /// The reply to one brief request (brief mode): the `briefs` by id, and the replies
    /// refused as not briefs of their key's agent (`refused`, logged once per distinct
    /// message). Members without a brief in it are silent.
    pub fn brief_replies(
        &mut self,
        briefs: BTreeMap<u64, Brief>,
        refused: Vec<String>,
        now: Instant,
        unix_ms: u64,
    ) {
        let before = self.brief.silent().clone();
        let new_refusals: Vec<String> = refused
            .iter()
            .filter(|r| !self.brief.refused().contains(r))
            .cloned()
            .collect();
        self.brief.replies(briefs, refused, &self.members, now);
        for r in new_refusals {
            self.notice(unix_ms, "warn", format!("refused a brief: {r}"));
        }
        let newly: Vec<u64> = self.brief.silent().difference(&before).copied().collect();
        if !newly.is_empty() {
            let first: Vec<String> = newly.iter().take(10).map(u64::to_string).collect();
            let more = if newly.len() > 10 { ", …" } else { "" };
            let text = format!(
                "{} agent(s) did not answer the brief status request: {}{more}",
                newly.len(),
                first.join(", ")
            );
            self.notice(unix_ms, "warn", text);
        }
    }

    /// The brief request could not be sent (brief mode).
    pub fn briefs_failed(&mut self, message: String, unix_ms: u64) {
        self.notice(
            unix_ms,
            "warn",
            format!("the brief status request failed: {message}"),
        );
        self.brief.request_failed(message, &self.members);
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
            self.brief.forget(id);
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
        if self.mode == Mode::Brief {
            out.extend(self.brief.problems(now));
            return out;
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

    /// Appends the readable, fresh nodes' values to the history (brief mode: the fleet-level
    /// values of the latest briefs).
    pub fn record_history(&mut self, now: Instant, unix_ms: u64) {
        if self.mode == Mode::Brief {
            self.series.record(unix_ms, self.brief.point());
            return;
        }
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

    /// The document of `GET /api/history`: per node in full mode (`"mode": "full"`, see
    /// [`History::to_json`]), fleet-level in brief mode ([`FleetSeries::to_json`]).
    pub fn history_json(&self) -> Value {
        match self.mode {
            Mode::Brief => self.series.to_json(),
            Mode::Full => {
                let mut v = self.history.to_json();
                v["mode"] = json!("full");
                v
            }
        }
    }

    /// The document of `GET /api/fleet` (and of each server-sent event):
    /// `{"fleet", "nodes": [status as sent by each readable member, by id], "edges": [[a, b]],
    /// "members", "node_meta": {"<id>": {"age_ms", "stale", "rates"}}, "unreadable":
    /// [{"id", "error"}], "convergence", "problems", "notices", "connected_peers",
    /// "endpoints", "updated_unix_ms", "mode": "full", "full_status_limit"}`; in brief mode
    /// [`Self::brief_snapshot`].
    pub fn snapshot(&self, now: Instant, unix_ms: u64) -> Value {
        if self.mode == Mode::Brief {
            return self.brief_snapshot(now, unix_ms);
        }
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
            "mode": Mode::Full,
            "full_status_limit": self.full_status_limit,
        })
    }

    /// The document of `GET /api/fleet` in brief mode: `{"mode": "brief", "fleet",
    /// "members", "agents": {"id": [..], "points": [..], "fleet_points": [..], …} (the briefs
    /// as columns, without coverage), "silent": [{"id", "last_brief_ms_ago"}],
    /// "refused_replies", "aggregates" (as `coolgp status --all`),
    /// "convergence", "rates": {"msgs_per_s"}, "edges": [], "edges_known": false, "problems",
    /// "notices", "connected_peers", "endpoints", "updated_unix_ms", "full_status_limit"}`.
    /// Light at 1,000 agents: no raw status, no `members_alive` lists, no coverage.
    pub fn brief_snapshot(&self, now: Instant, unix_ms: u64) -> Value {
        let mut doc = self.brief.fields(now);
        let common = json!({
            "mode": Mode::Brief,
            "fleet": self.fleet,
            "members": self.members,
            // Briefs carry no neighbours: the page says so instead of drawing a network.
            "edges": [],
            "edges_known": false,
            "problems": self.problems(now),
            "notices": self.notices,
            "connected_peers": self.peers,
            "endpoints": self.endpoints,
            "updated_unix_ms": unix_ms,
            "full_status_limit": self.full_status_limit,
        });
        if let Value::Object(c) = common {
            doc.extend(c);
        }
        Value::Object(doc)
    }
}

/// What the member check (issue 29) says of node `id` by its own status: withheld as a
/// suspect (with its evidence), and messages it scaled down by its influence cap.
fn member_problems(id: u64, s: &Status) -> Vec<Problem> {
    let mut out = Vec::new();
    if s.withheld {
        out.push(problem::suspect(id, s.member.as_ref()));
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
mod tests;
