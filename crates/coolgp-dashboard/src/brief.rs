//! Brief mode (issue 31): the dashboard's picture of a fleet too large for one `status` call
//! per agent. Each poll is one fleet-wide request for every agent's brief
//! ([`coolgp_node::routing::briefs`]); what the page gets is the briefs without their
//! coverage, the fleet's aggregates ([`FleetBrief`], as `coolgp status --all`), and
//! fleet-level series. Briefs carry no neighbours, so the edges are unknown in this mode.
//!
//! Sans-IO like [`crate::fleet`]: the watcher feeds the replies, the clock comes in as
//! arguments.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use coolgp_node::coverage::{Brief, FleetBrief};
use serde::Serialize;
use serde_json::{json, Value};

use crate::history::FleetPoint;
use crate::problem::{self, Problem};

/// Default of `--full-status-limit`: up to this many members, one full status per member.
pub const DEFAULT_FULL_STATUS_LIMIT: usize = 64;

/// Problems of one kind beyond this many are one fleet-wide line that names the first few
/// agents, so that 1,000 silent agents are one line, not 1,000.
pub const PROBLEMS_LISTED: usize = 10;

/// What the dashboard asks the nodes each poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// One full `status` per member: the network, per-node tables and series.
    Full,
    /// One request for every agent's brief: aggregates, a grid, fleet-level series.
    Brief,
}

impl Mode {
    /// The mode for `members` live members under `--full-status-limit limit` (0: always
    /// brief).
    pub fn for_fleet(members: usize, limit: usize) -> Mode {
        if limit == 0 || members > limit {
            Mode::Brief
        } else {
            Mode::Full
        }
    }
}

/// An agent's latest brief and when it came.
#[derive(Clone, Debug)]
struct Held {
    brief: Brief,
    at: Instant,
}

/// Everything brief mode knows: the latest brief of each member, who did not answer the
/// last request, and the replies that were refused.
#[derive(Clone, Debug, Default)]
pub struct BriefPicture {
    held: BTreeMap<u64, Held>,
    /// Members without a brief in the last reply.
    silent: BTreeSet<u64>,
    /// Replies of the last request that were not briefs of their key's agent.
    refused: Vec<String>,
    /// Why the last request could not be sent.
    failed: Option<String>,
    /// Messages per second, received plus sent, over the agents with two successive briefs.
    msgs_per_s: Option<f64>,
}

/// Messages an agent has received plus sent.
fn traffic(b: &Brief) -> u64 {
    b.messages_sent.saturating_add(b.messages_received)
}

/// The median of `v` (sorted ascending, not empty).
fn median(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// One [`Problem`] per agent in `each` when there are at most [`PROBLEMS_LISTED`], else one
/// fleet-wide line: `"{count} agents {what}: {first ids}, …"`.
fn listed(out: &mut Vec<Problem>, each: Vec<Problem>, what: &str) {
    if each.len() <= PROBLEMS_LISTED {
        out.extend(each);
        return;
    }
    let ids: Vec<String> = each
        .iter()
        .filter_map(|p| p.node)
        .take(PROBLEMS_LISTED)
        .map(|id| id.to_string())
        .collect();
    out.push(Problem {
        node: None,
        message: format!(
            "{} agents {what}: {}, … (the table lists them first)",
            each.len(),
            ids.join(", ")
        ),
    });
}

impl BriefPicture {
    /// The reply to one brief request at `now`: the briefs of the `members` (others are
    /// ignored, as a status is only asked of members in full mode), without their
    /// coverage; `refused` names the replies that were not briefs. A member without a brief
    /// in it is silent (its last brief, if any, is kept).
    pub fn replies(
        &mut self,
        briefs: BTreeMap<u64, Brief>,
        refused: Vec<String>,
        members: &BTreeSet<u64>,
        now: Instant,
    ) {
        let mut rate: Option<f64> = None;
        let answered: BTreeSet<u64> = briefs.keys().copied().collect();
        for (id, mut brief) in briefs {
            if !members.contains(&id) {
                continue;
            }
            brief.coverage = None;
            if let Some(prev) = self.held.get(&id) {
                let dt = now.saturating_duration_since(prev.at).as_secs_f64();
                // A restarted agent's counters go back: it adds nothing this tick.
                if let (Some(d), true) =
                    (traffic(&brief).checked_sub(traffic(&prev.brief)), dt > 0.0)
                {
                    *rate.get_or_insert(0.0) += d as f64 / dt;
                }
            }
            self.held.insert(id, Held { brief, at: now });
        }
        self.held.retain(|id, _| members.contains(id));
        self.silent = members
            .iter()
            .filter(|id| !answered.contains(id))
            .copied()
            .collect();
        self.refused = refused;
        self.failed = None;
        self.msgs_per_s = rate;
    }

    /// The brief request could not be sent: every member counts as silent this poll.
    pub fn request_failed(&mut self, message: String, members: &BTreeSet<u64>) {
        self.silent.clone_from(members);
        self.refused.clear();
        self.failed = Some(message);
        self.msgs_per_s = None;
    }

    /// Node `id` left the fleet.
    pub fn forget(&mut self, id: u64) {
        self.held.remove(&id);
        self.silent.remove(&id);
    }

    /// Members that did not answer the last request.
    pub fn silent(&self) -> &BTreeSet<u64> {
        &self.silent
    }

    /// Replies of the last request that were refused (not briefs of their key's agent).
    pub fn refused(&self) -> &[String] {
        &self.refused
    }

    /// The fleet's aggregates over the latest brief of each member.
    pub fn aggregates(&self) -> FleetBrief {
        let briefs: Vec<Brief> = self.held.values().map(|h| h.brief.clone()).collect();
        FleetBrief::of(&briefs)
    }

    fn sorted_fleet_points(&self) -> Vec<f64> {
        let mut fp: Vec<f64> = self.held.values().map(|h| h.brief.fleet_points).collect();
        fp.sort_by(f64::total_cmp);
        fp
    }

    /// Convergence from the aggregates `agg` (of [`Self::aggregates`]): total own points, the
    /// least, median and most `fleet_points`, and whether every member answered and
    /// represents all the points. Briefs carry no q(W) digest: `projection_known` is false.
    pub fn convergence(&self, agg: &FleetBrief) -> Value {
        let fp = self.sorted_fleet_points();
        let (min, med, max) = match (fp.first(), fp.last()) {
            (Some(lo), Some(hi)) => (*lo, median(&fp), *hi),
            _ => (0.0, 0.0, 0.0),
        };
        json!({
            "total_points": agg.points,
            "min_fleet_points": min,
            "median_fleet_points": med,
            "max_fleet_points": max,
            "nodes": agg.agents,
            "agents_with_every_point": agg.agents_with_every_point,
            "all_represent_all": agg.agents > 0
                && self.silent.is_empty()
                && self.failed.is_none()
                && agg.agents_with_every_point == agg.agents,
            "streams_ended": agg.streams_ended,
            "round_min": agg.round_min,
            "round_max": agg.round_max,
            "withheld": agg.withheld.len(),
            "projection_known": false,
        })
    }

    /// The fleet-level values of this tick for the series (`None` before the first brief).
    pub fn point(&self) -> Option<FleetPoint> {
        let fp = self.sorted_fleet_points();
        let (lo, hi) = (*fp.first()?, *fp.last()?);
        let holdout: Vec<f64> = self
            .held
            .values()
            .filter_map(|h| h.brief.rmse_holdout)
            .collect();
        Some(FleetPoint {
            fleet_points_min: lo,
            fleet_points_median: median(&fp),
            fleet_points_max: hi,
            rmse_holdout_mean: (!holdout.is_empty())
                .then(|| holdout.iter().sum::<f64>() / holdout.len() as f64),
            msgs_per_s: self.msgs_per_s,
        })
    }

    /// What the operator should look at: a request that failed or replies refused, silent
    /// members, suspects (with their evidence), rejected and dropped messages; each kind
    /// listed per agent up to [`PROBLEMS_LISTED`], as one line beyond.
    pub fn problems(&self, now: Instant) -> Vec<Problem> {
        let mut out = Vec::new();
        let fleet_wide = |message| Problem {
            node: None,
            message,
        };
        if let Some(f) = &self.failed {
            out.push(fleet_wide(format!("the brief status request failed: {f}")));
        }
        let refused = self.refused.iter().take(PROBLEMS_LISTED);
        out.extend(
            refused
                .map(|r| fleet_wide(format!("refused a reply to the brief status request: {r}"))),
        );
        if self.refused.len() > PROBLEMS_LISTED {
            let more = self.refused.len() - PROBLEMS_LISTED;
            out.push(fleet_wide(format!("and {more} more refused replies")));
        }
        let silent = self
            .silent
            .iter()
            .map(|id| {
                let last = self.held.get(id).map_or("never answered".into(), |h| {
                    let s = now.saturating_duration_since(h.at).as_secs_f64();
                    format!("last brief {s:.1} s ago")
                });
                Problem {
                    node: Some(*id),
                    message: format!("did not answer the brief status request ({last})"),
                }
            })
            .collect();
        listed(&mut out, silent, "did not answer the brief status request");
        let briefs = || self.held.values().map(|h| &h.brief);
        let suspects = briefs()
            .filter(|b| b.withheld)
            .map(|b| problem::suspect(b.id, b.member.as_ref()))
            .collect();
        listed(
            &mut out,
            suspects,
            "are suspects of the member check and withhold their data",
        );
        let rejected = briefs()
            .filter(|b| b.rejected > 0)
            .map(|b| Problem {
                node: Some(b.id),
                message: format!("has rejected {} message(s) since it started", b.rejected),
            })
            .collect();
        listed(&mut out, rejected, "have rejected messages");
        let dropped = briefs()
            .filter(|b| b.inbound_dropped > 0)
            .map(|b| Problem {
                node: Some(b.id),
                message: format!(
                    "dropped {} inbound message(s): its queues were full",
                    b.inbound_dropped
                ),
            })
            .collect();
        listed(&mut out, dropped, "dropped inbound messages");
        out
    }

    /// The members' latest briefs as columns, one array per field, every array in the order
    /// of `"id"` (ascending): the field names once instead of once per agent keeps 1,000
    /// agents near 100 kB. The coverage and the member evidence are left out (a suspect's
    /// evidence is in its problem).
    fn columns(&self) -> Value {
        let col = |f: fn(&Brief) -> Value| -> Value {
            Value::Array(self.held.values().map(|h| f(&h.brief)).collect())
        };
        json!({
            "id": col(|b| json!(b.id)),
            "blocks": col(|b| json!(b.blocks)),
            "points": col(|b| json!(b.points)),
            "stream_ended": col(|b| json!(b.stream_ended)),
            "fleet_points": col(|b| json!(b.fleet_points)),
            "round": col(|b| json!(b.round)),
            "local_points": col(|b| json!(b.local_points)),
            "withheld": col(|b| json!(b.withheld)),
            "messages_sent": col(|b| json!(b.messages_sent)),
            "bytes_sent": col(|b| json!(b.bytes_sent)),
            "messages_received": col(|b| json!(b.messages_received)),
            "rejected": col(|b| json!(b.rejected)),
            "inbound_dropped": col(|b| json!(b.inbound_dropped)),
            "rmse_holdout": col(|b| json!(b.rmse_holdout)),
        })
    }

    /// The brief-mode fields of `/api/fleet`: `"agents"` (each member's latest brief as
    /// columns: `{"id": [..], "points": [..], "fleet_points": [..], …}`), `"silent"` (`[{"id", "last_brief_ms_ago"}]`), `"refused_replies"`,
    /// `"aggregates"` ([`FleetBrief`]), `"convergence"` and `"rates"`.
    pub fn fields(&self, now: Instant) -> serde_json::Map<String, Value> {
        let agg = self.aggregates();
        let agents = self.columns();
        let silent: Vec<Value> = self
            .silent
            .iter()
            .map(|id| {
                let ago = self.held.get(id).map(|h| {
                    let age = now.saturating_duration_since(h.at).as_millis();
                    u64::try_from(age).unwrap_or(u64::MAX)
                });
                json!({ "id": id, "last_brief_ms_ago": ago })
            })
            .collect();
        let mut m = serde_json::Map::new();
        m.insert("convergence".into(), self.convergence(&agg));
        m.insert("agents".into(), json!(agents));
        m.insert("silent".into(), json!(silent));
        m.insert("refused_replies".into(), json!(self.refused));
        m.insert("aggregates".into(), json!(agg));
        m.insert("rates".into(), json!({ "msgs_per_s": self.msgs_per_s }));
        m
    }
}
