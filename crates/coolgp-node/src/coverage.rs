//! What a node advertises for fleets at scale (issue 31, docs/NODE.md §15): where its memory
//! rows lie ([`CoverageJson`], in its status and its brief), and the brief status every node
//! answers to one fleet-wide request (`coolgp/<fleet>/*/status?brief`, [`Brief`]), which
//! `coolgp status --all`, the routed `coolgp query --all --route K` and the dashboard read
//! instead of one status call per agent.

use coolgp::local::{CoverBox, Coverage};
use coolgp_data::Standardizer;
use serde::{Deserialize, Serialize};

/// One box of a coverage in original units ([`coolgp::local::CoverBox`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BoxJson {
    /// Smallest value of each input column over the box's rows.
    pub lo: Vec<f64>,
    /// Largest value of each input column over the box's rows.
    pub hi: Vec<f64>,
    /// Rows in the box.
    pub rows: usize,
}

/// Where an agent's memory rows lie ([`coolgp::local::coverage`]) in original units: boxes
/// over its input `columns`, and the metric's `scale` per column (per original unit: the
/// residual kernel's inverse lengthscale divided by the column's standard deviation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoverageJson {
    /// The agent's input columns, in its order.
    pub columns: Vec<String>,
    /// The metric's scale per column, per original unit.
    pub scale: Vec<f64>,
    /// The boxes.
    pub boxes: Vec<BoxJson>,
}

impl CoverageJson {
    /// `c` (the agent's standardized units) in original units: `x = mean + std · x_std`, so
    /// bounds map by that and the scale divides by `std`.
    pub fn of(c: &Coverage, columns: &[String], scaler: Option<&Standardizer>) -> Self {
        let mean = |j: usize| scaler.map_or(0.0, |s| s.mean[j]);
        let std = |j: usize| scaler.map_or(1.0, |s| s.std[j]);
        Self {
            columns: columns.to_vec(),
            scale: c
                .scale()
                .iter()
                .enumerate()
                .map(|(j, s)| s / std(j))
                .collect(),
            boxes: c
                .boxes()
                .iter()
                .map(|b| BoxJson {
                    lo: b
                        .lo
                        .iter()
                        .enumerate()
                        .map(|(j, v)| mean(j) + std(j) * v)
                        .collect(),
                    hi: b
                        .hi
                        .iter()
                        .enumerate()
                        .map(|(j, v)| mean(j) + std(j) * v)
                        .collect(),
                    rows: b.rows,
                })
                .collect(),
        }
    }

    /// The coverage over the query's columns `query` (`None`: the query's columns are the
    /// agent's, in its order): each box and scale reordered to the query's columns, so a
    /// query row is measured as it is. `None` when the agent has a column the query lacks
    /// (it cannot be routed to), or the document is not a valid coverage (a peer's reply is
    /// untrusted).
    pub fn over(&self, query: Option<&[String]>) -> Option<Coverage> {
        let d = self.columns.len();
        let idx: Vec<usize> = match query {
            None => (0..d).collect(),
            Some(q) => self
                .columns
                .iter()
                .map(|c| q.iter().position(|n| n == c))
                .collect::<Option<_>>()?,
        };
        let width = query.map_or(d, <[String]>::len);
        // A query column the agent lacks: scale 0, and bounds wide open (it does not count).
        let mut scale = vec![0.0; width];
        for (j, &q) in idx.iter().enumerate() {
            scale[q] = *self.scale.get(j)?;
        }
        let boxes = self
            .boxes
            .iter()
            .map(|b| {
                if b.lo.len() != d || b.hi.len() != d {
                    return None;
                }
                let (mut lo, mut hi) = (vec![0.0; width], vec![0.0; width]);
                for (j, &q) in idx.iter().enumerate() {
                    lo[q] = b.lo[j];
                    hi[q] = b.hi[j];
                }
                Some(CoverBox {
                    lo,
                    hi,
                    rows: b.rows,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Coverage::from_parts(scale, boxes)
    }
}

/// The brief status of one node: what fleet-wide views need, from one request
/// (`coolgp/<fleet>/*/status?brief`; module doc).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Brief {
    /// The agent's id.
    pub id: u64,
    /// Blocks acknowledged (in a checkpoint).
    pub blocks: u64,
    /// Points acknowledged.
    pub points: u64,
    /// Its data stream has ended.
    #[serde(default)]
    pub stream_ended: bool,
    /// Points the fused model represents.
    pub fleet_points: f64,
    /// The agent's round.
    pub round: u64,
    /// Rows in the local memory.
    pub local_points: usize,
    /// The agent withholds its own data (a suspect, issue 29).
    pub withheld: bool,
    /// Messages and bytes sent, messages received, rejected and dropped.
    pub messages_sent: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Messages received.
    pub messages_received: u64,
    /// Messages rejected, all reasons.
    pub rejected: u64,
    /// Messages dropped by the inbound queues.
    pub inbound_dropped: u64,
    /// RMSE on `--holdout` rows, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rmse_holdout: Option<f64>,
    /// Where its memory rows lie (absent without a memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<CoverageJson>,
    /// Its own evidence of the member check (status `member`; what the fitter judges).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<crate::status::MemberJson>,
}

/// The fleet at a glance: aggregates of the briefs of `coolgp status --all`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetBrief {
    /// Agents that replied.
    pub agents: usize,
    /// Their ids, ascending.
    pub ids: Vec<u64>,
    /// Points acknowledged, summed.
    pub points: u64,
    /// The smallest and largest `fleet_points` (equal when every agent holds the fleet).
    pub fleet_points_min: f64,
    /// Largest `fleet_points`.
    pub fleet_points_max: f64,
    /// Agents whose `fleet_points` equal the sum of `points`.
    pub agents_with_every_point: usize,
    /// Agents whose data stream has ended.
    pub streams_ended: usize,
    /// Rounds, smallest and largest.
    pub round_min: u64,
    /// Largest round.
    pub round_max: u64,
    /// Agents that withhold their data (suspects).
    pub withheld: Vec<u64>,
    /// Messages and bytes sent, summed.
    pub messages_sent: u64,
    /// Bytes sent, summed.
    pub bytes_sent: u64,
    /// Messages rejected and dropped, summed.
    pub rejected: u64,
    /// Messages dropped by inbound queues, summed.
    pub inbound_dropped: u64,
    /// Agents advertising a coverage.
    pub with_coverage: usize,
    /// Mean of the agents' holdout RMSE, where given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rmse_holdout_mean: Option<f64>,
}

/// The sum of a counter over `briefs`, saturating: the counts are the nodes' own claims, and a
/// hostile one near `u64::MAX` must not wrap the fleet's total.
fn total(briefs: &[Brief], count: impl Fn(&Brief) -> u64) -> u64 {
    briefs.iter().map(count).fold(0, u64::saturating_add)
}

impl FleetBrief {
    /// The aggregates of `briefs` (any order).
    pub fn of(briefs: &[Brief]) -> Self {
        let points = total(briefs, |b| b.points);
        let fp = briefs.iter().map(|b| b.fleet_points);
        let holdout: Vec<f64> = briefs.iter().filter_map(|b| b.rmse_holdout).collect();
        let mut ids: Vec<u64> = briefs.iter().map(|b| b.id).collect();
        ids.sort_unstable();
        let mut withheld: Vec<u64> = briefs.iter().filter(|b| b.withheld).map(|b| b.id).collect();
        withheld.sort_unstable();
        Self {
            agents: briefs.len(),
            ids,
            points,
            fleet_points_min: fp.clone().fold(f64::INFINITY, f64::min),
            fleet_points_max: fp.fold(f64::NEG_INFINITY, f64::max),
            agents_with_every_point: briefs
                .iter()
                .filter(|b| (b.fleet_points - points as f64).abs() < 0.5)
                .count(),
            streams_ended: briefs.iter().filter(|b| b.stream_ended).count(),
            round_min: briefs.iter().map(|b| b.round).min().unwrap_or(0),
            round_max: briefs.iter().map(|b| b.round).max().unwrap_or(0),
            withheld,
            messages_sent: total(briefs, |b| b.messages_sent),
            bytes_sent: total(briefs, |b| b.bytes_sent),
            rejected: total(briefs, |b| b.rejected),
            inbound_dropped: total(briefs, |b| b.inbound_dropped),
            with_coverage: briefs.iter().filter(|b| b.coverage.is_some()).count(),
            rmse_holdout_mean: (!holdout.is_empty())
                .then(|| holdout.iter().sum::<f64>() / holdout.len() as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fleet_s_counts_saturate_rather_than_wrap() {
        use crate::routing::tests::brief;
        let mut hostile = brief(1, Some(0.0));
        (hostile.points, hostile.messages_sent) = (u64::MAX - 1, u64::MAX);
        let mut honest = brief(2, Some(1.0));
        (honest.points, honest.messages_sent) = (5, 7);
        let f = FleetBrief::of(&[hostile, honest]);
        assert_eq!((f.points, f.messages_sent), (u64::MAX, u64::MAX));
    }

    fn coverage() -> Coverage {
        Coverage::from_parts(
            vec![1.0, 2.0],
            vec![CoverBox {
                lo: vec![-1.0, 0.0],
                hi: vec![1.0, 0.5],
                rows: 3,
            }],
        )
        .expect("coverage")
    }

    #[test]
    fn a_coverage_in_original_units_measures_original_rows_as_the_agent_would() {
        let scaler = Standardizer {
            mean: vec![10.0, -2.0],
            std: vec![2.0, 0.5],
            y_mean: 0.0,
            y_std: 1.0,
        };
        let cols = vec!["a".to_string(), "b".to_string()];
        let json = CoverageJson::of(&coverage(), &cols, Some(&scaler));
        assert_eq!(json.boxes[0].lo, vec![8.0, -2.0]);
        assert_eq!(json.scale, vec![0.5, 4.0]);
        let std_row = [1.7, -0.4];
        let orig = [10.0 + 2.0 * 1.7, -2.0 + 0.5 * -0.4];
        let want = coverage().distance(&std_row);
        let got = json.over(None).expect("valid").distance(&orig);
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        // The query names its columns in another order, with one more the agent lacks.
        let q = ["extra".to_string(), "b".to_string(), "a".to_string()];
        let got = json
            .over(Some(&q))
            .expect("valid")
            .distance(&[123.0, orig[1], orig[0]]);
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        // A query without one of the agent's columns cannot be routed to it.
        assert!(json.over(Some(&q[..2])).is_none());
        // A hostile document is refused, not trusted.
        let mut bad = json.clone();
        bad.boxes[0].lo.pop();
        assert!(bad.over(None).is_none());
        bad = json.clone();
        bad.scale[0] = f64::NAN;
        assert!(bad.over(None).is_none());
    }

    #[test]
    fn the_fleet_brief_sums_and_spans_the_agents() {
        let brief = |id, points, fleet_points, round, withheld| Brief {
            id,
            blocks: 1,
            points,
            stream_ended: true,
            fleet_points,
            round,
            local_points: 0,
            withheld,
            messages_sent: 2,
            bytes_sent: 10,
            messages_received: 2,
            rejected: 1,
            inbound_dropped: 0,
            rmse_holdout: Some(id as f64),
            coverage: None,
            member: None,
        };
        let f = FleetBrief::of(&[brief(3, 5, 10.0, 7, false), brief(1, 5, 8.0, 9, true)]);
        assert_eq!(f.agents, 2);
        assert_eq!(f.ids, vec![1, 3]);
        assert_eq!(f.points, 10);
        assert_eq!((f.fleet_points_min, f.fleet_points_max), (8.0, 10.0));
        assert_eq!((f.agents_with_every_point, f.streams_ended), (1, 2));
        assert_eq!((f.round_min, f.round_max), (7, 9));
        assert_eq!(f.withheld, vec![1]);
        assert_eq!((f.messages_sent, f.bytes_sent, f.rejected), (4, 20, 2));
        assert_eq!(f.rmse_holdout_mean, Some(2.0));
    }
}
