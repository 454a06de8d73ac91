//! Bounded time series of the fleet, aligned on the poll ticks (the layout uPlot draws:
//! one time column, then value columns, `null` where a value was absent): one column per
//! node and quantity ([`History`], full mode), or a few fleet-level columns whatever the
//! fleet's size ([`FleetSeries`], brief mode).

use std::collections::{BTreeMap, VecDeque};

use serde_json::{json, Value};

/// One node's values at one tick.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// Data points represented in the node's fused model.
    pub fleet_points: f64,
    /// RMSE of the fused model on the node's holdout, if it has one.
    pub rmse_holdout: Option<f64>,
    /// Messages per second, received plus sent.
    pub msgs_per_s: Option<f64>,
}

#[derive(Clone, Debug, Default)]
struct Series {
    fleet_points: VecDeque<Option<f64>>,
    rmse_holdout: VecDeque<Option<f64>>,
    msgs_per_s: VecDeque<Option<f64>>,
}

impl Series {
    fn padded(len: usize) -> Self {
        let none = || std::iter::repeat_n(None, len).collect();
        Series {
            fleet_points: none(),
            rmse_holdout: none(),
            msgs_per_s: none(),
        }
    }

    fn push(&mut self, p: Option<&Point>) {
        self.fleet_points.push_back(p.map(|p| p.fleet_points));
        self.rmse_holdout.push_back(p.and_then(|p| p.rmse_holdout));
        self.msgs_per_s.push_back(p.and_then(|p| p.msgs_per_s));
    }

    fn pop_front(&mut self) {
        self.fleet_points.pop_front();
        self.rmse_holdout.pop_front();
        self.msgs_per_s.pop_front();
    }

    fn is_empty(&self) -> bool {
        self.fleet_points.iter().all(Option::is_none)
    }
}

/// The last `capacity` ticks of every node's [`Point`].
#[derive(Clone, Debug)]
pub struct History {
    capacity: usize,
    t_unix_s: VecDeque<f64>,
    series: BTreeMap<u64, Series>,
}

impl History {
    /// An empty history keeping at most `capacity` ticks (at least 1).
    pub fn new(capacity: usize) -> Self {
        History {
            capacity: capacity.max(1),
            t_unix_s: VecDeque::new(),
            series: BTreeMap::new(),
        }
    }

    /// Number of ticks held.
    pub fn len(&self) -> usize {
        self.t_unix_s.len()
    }

    /// True before the first tick.
    pub fn is_empty(&self) -> bool {
        self.t_unix_s.is_empty()
    }

    /// Appends one tick at `unix_ms` with the points of the nodes present; a node seen for
    /// the first time gets `null` before this tick; the oldest tick is dropped past capacity.
    pub fn record(&mut self, unix_ms: u64, points: &BTreeMap<u64, Point>) {
        let before = self.t_unix_s.len();
        self.t_unix_s.push_back(unix_ms as f64 / 1000.0);
        for id in points.keys() {
            self.series
                .entry(*id)
                .or_insert_with(|| Series::padded(before));
        }
        for (id, s) in &mut self.series {
            s.push(points.get(id));
        }
        while self.t_unix_s.len() > self.capacity {
            self.t_unix_s.pop_front();
            for s in self.series.values_mut() {
                s.pop_front();
            }
        }
        self.series.retain(|_, s| !s.is_empty());
    }

    /// `{"t": [unix s], "series": {"<id>": {"fleet_points": [..], "rmse_holdout": [..],
    /// "msgs_per_s": [..]}}}`, every array as long as `t`.
    pub fn to_json(&self) -> Value {
        let series: serde_json::Map<String, Value> = self
            .series
            .iter()
            .map(|(id, s)| {
                (
                    id.to_string(),
                    json!({
                        "fleet_points": s.fleet_points,
                        "rmse_holdout": s.rmse_holdout,
                        "msgs_per_s": s.msgs_per_s,
                    }),
                )
            })
            .collect();
        json!({ "t": self.t_unix_s, "series": series })
    }
}

/// The fleet's values at one tick of brief mode (aggregates over the agents' briefs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FleetPoint {
    /// The least `fleet_points` of any agent.
    pub fleet_points_min: f64,
    /// The median `fleet_points` over the agents.
    pub fleet_points_median: f64,
    /// The most `fleet_points` of any agent.
    pub fleet_points_max: f64,
    /// Mean holdout RMSE over the agents that have a holdout.
    pub rmse_holdout_mean: Option<f64>,
    /// Messages per second, received plus sent, summed over the agents.
    pub msgs_per_s: Option<f64>,
}

/// The last `capacity` ticks of the fleet-level series of brief mode: a handful of columns
/// whatever the fleet's size, where [`History`] keeps three per node.
#[derive(Clone, Debug)]
pub struct FleetSeries {
    capacity: usize,
    t_unix_s: VecDeque<f64>,
    points: VecDeque<Option<FleetPoint>>,
}

impl FleetSeries {
    /// An empty series keeping at most `capacity` ticks (at least 1).
    pub fn new(capacity: usize) -> Self {
        FleetSeries {
            capacity: capacity.max(1),
            t_unix_s: VecDeque::new(),
            points: VecDeque::new(),
        }
    }

    /// Number of ticks held.
    pub fn len(&self) -> usize {
        self.t_unix_s.len()
    }

    /// True before the first tick.
    pub fn is_empty(&self) -> bool {
        self.t_unix_s.is_empty()
    }

    /// Forgets every tick (the dashboard left brief mode).
    pub fn clear(&mut self) {
        self.t_unix_s.clear();
        self.points.clear();
    }

    /// Appends one tick at `unix_ms` (`None`: no brief to aggregate); the oldest tick is
    /// dropped past capacity.
    pub fn record(&mut self, unix_ms: u64, point: Option<FleetPoint>) {
        self.t_unix_s.push_back(unix_ms as f64 / 1000.0);
        self.points.push_back(point);
        while self.t_unix_s.len() > self.capacity {
            self.t_unix_s.pop_front();
            self.points.pop_front();
        }
    }

    /// `{"mode": "brief", "t": [unix s], "fleet": {"fleet_points_min": [..],
    /// "fleet_points_median": [..], "fleet_points_max": [..], "rmse_holdout_mean": [..],
    /// "msgs_per_s": [..]}}`, every array as long as `t`.
    pub fn to_json(&self) -> Value {
        let col = |f: fn(&FleetPoint) -> Option<f64>| -> Vec<Option<f64>> {
            self.points.iter().map(|p| p.as_ref().and_then(f)).collect()
        };
        json!({
            "mode": "brief",
            "t": self.t_unix_s,
            "fleet": {
                "fleet_points_min": col(|p| Some(p.fleet_points_min)),
                "fleet_points_median": col(|p| Some(p.fleet_points_median)),
                "fleet_points_max": col(|p| Some(p.fleet_points_max)),
                "rmse_holdout_mean": col(|p| p.rmse_holdout_mean),
                "msgs_per_s": col(|p| p.msgs_per_s),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(fp: f64) -> Point {
        Point {
            fleet_points: fp,
            rmse_holdout: None,
            msgs_per_s: Some(2.0),
        }
    }

    #[test]
    fn series_stay_aligned_and_bounded() {
        let mut h = History::new(3);
        h.record(1000, &BTreeMap::from([(0, pt(1.0))]));
        h.record(2000, &BTreeMap::from([(0, pt(2.0)), (1, pt(5.0))]));
        let j = h.to_json();
        assert_eq!(j["t"], json!([1.0, 2.0]));
        assert_eq!(j["series"]["1"]["fleet_points"], json!([null, 5.0]));
        assert_eq!(j["series"]["0"]["rmse_holdout"], json!([null, null]));
        for k in 3..=5 {
            h.record(k * 1000, &BTreeMap::from([(0, pt(k as f64))]));
        }
        let j = h.to_json();
        assert_eq!(h.len(), 3);
        assert_eq!(j["t"], json!([3.0, 4.0, 5.0]));
        assert_eq!(j["series"]["0"]["fleet_points"], json!([3.0, 4.0, 5.0]));
        // Node 1 has no value left in the window: its series is gone.
        assert!(j["series"].get("1").is_none());
    }

    #[test]
    fn fleet_series_stay_aligned_and_bounded() {
        let mut f = FleetSeries::new(2);
        let p = FleetPoint {
            fleet_points_min: 1.0,
            fleet_points_median: 2.0,
            fleet_points_max: 3.0,
            rmse_holdout_mean: None,
            msgs_per_s: Some(4.0),
        };
        f.record(1000, None);
        f.record(2000, Some(p));
        f.record(3000, Some(p));
        let j = f.to_json();
        assert_eq!(f.len(), 2);
        assert_eq!(j["t"], json!([2.0, 3.0]));
        assert_eq!(j["fleet"]["fleet_points_median"], json!([2.0, 2.0]));
        assert_eq!(j["fleet"]["rmse_holdout_mean"], json!([null, null]));
        f.clear();
        assert!(f.is_empty());
    }
}
