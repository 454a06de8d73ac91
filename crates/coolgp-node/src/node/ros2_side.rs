//! The node's ROS 2 side in the loop: each `--ros2-map-every` seconds, the map and the
//! health. The map is computed off the loop: the fleet query over the grid (as `coolgp query
//! --all`, on the fleet's session, default with a local memory) or this node's own answers
//! (on a blocking thread). The map goes out as `--ros2-map-format` says: a PointCloud2 or a
//! grid_map GridMap (whose single resolution the configuration checked at start-up).

use std::time::{Duration, Instant};

use coolgp_ros2::diagnostics::{diagnostic_array, Level, Status};
use coolgp_ros2::grid_map::MapFormat;
use coolgp_ros2::map::MapGrid;

use super::Node;
use crate::query::{predict_rows, QueryModel};
use crate::ros2::Ros2Link;

/// A map being computed: its bytes and the milliseconds it took, or why it failed.
type MapJob = tokio::task::JoinHandle<Result<(Vec<u8>, f64), String>>;

/// The link, the grid and the schedule.
pub(crate) struct Ros2Side {
    pub(crate) link: Ros2Link,
    grid: Option<MapGrid>,
    /// The map and the query service show the fleet query (else this node's own answer).
    pub(super) fleet: bool,
    every: Duration,
    next: Instant,
    job: Option<MapJob>,
}

impl Ros2Side {
    pub(crate) fn new(link: Ros2Link, grid: Option<MapGrid>, every: f64, fleet: bool) -> Self {
        Self {
            link,
            grid,
            fleet,
            every: Duration::from_secs_f64(every),
            next: Instant::now(),
            job: None,
        }
    }
}

/// How long a fleet map waits for the nodes' answers.
const FLEET_MAP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The fleet query's answers at `rows` (inputs named `inputs`): the nodes nearest each row
/// answer, combined by the default rule and calibration, suspects left out, as `coolgp query
/// --all` answers. The map and the query service (`--ros2-query-service`) both ask this way.
pub(super) async fn fleet_predict(
    session: &zenoh::Session,
    fleet: &str,
    inputs: Vec<String>,
    rows: Vec<Vec<f64>>,
    roster: Option<&crate::auth::Roster>,
) -> Result<crate::status::PredictReply, String> {
    let req = crate::status::PredictRequest {
        columns: Some(inputs),
        x: rows,
        ..crate::status::PredictRequest::default()
    };
    // No rule named: the fitter's calibration (rule, weight, variance scale) where it has
    // published one, as `coolgp query --all` applies it (docs/NODE.md).
    let ask = (None, (None, None), Some(crate::config::DEFAULT_ROUTE));
    let mut notes = Vec::new();
    let reply = crate::fleet_answers(
        session,
        fleet,
        &req,
        ask,
        FLEET_MAP_TIMEOUT,
        roster,
        &mut notes,
    )
    .await
    .map_err(|e| e.to_string())?;
    for n in notes {
        tracing::debug!(note = %n, "fleet query for ROS 2");
    }
    Ok(reply)
}

/// The fleet query's map over `grid` at `rows` ([`fleet_predict`]), as `format`'s bytes, and
/// the milliseconds.
async fn fleet_map(
    session: &zenoh::Session,
    fleet: &str,
    inputs: Vec<String>,
    (grid, rows, format): (&MapGrid, Vec<Vec<f64>>, MapFormat),
    roster: Option<&crate::auth::Roster>,
) -> Result<(Vec<u8>, f64), String> {
    let t0 = Instant::now();
    let reply = fleet_predict(session, fleet, inputs, rows, roster).await?;
    let bytes = format
        .encode(grid, &reply.mean, &reply.var_f, now_ns(), "map")
        .map_err(|e| e.to_string())?;
    Ok((bytes, t0.elapsed().as_secs_f64() * 1e3))
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// The map of `model` over `grid` at `rows`, as `format`'s bytes, and the milliseconds.
fn compute_map(
    model: &QueryModel,
    (grid, rows, format): (&MapGrid, &[Vec<f64>], MapFormat),
    frame: &str,
) -> Result<(Vec<u8>, f64), String> {
    let t0 = Instant::now();
    let reply = predict_rows(model, rows)?;
    let bytes = format
        .encode(grid, &reply.mean, &reply.var_f, now_ns(), frame)
        .map_err(|e| e.to_string())?;
    Ok((bytes, t0.elapsed().as_secs_f64() * 1e3))
}

impl Node {
    /// Publishes a finished map, starts the next when due, and the diagnostics with it.
    pub(super) async fn ros2_step(&mut self, session: &zenoh::Session) {
        let Some(side) = self.ros2.as_mut() else {
            return;
        };
        if side.job.as_ref().is_some_and(|j| j.is_finished()) {
            if let Some(job) = side.job.take() {
                match job.await {
                    Ok(Ok((bytes, ms))) => {
                        side.link.status.last_map_ms = Some(ms);
                        if let Err(e) = side.link.publish_map(bytes).await {
                            tracing::warn!(error = %e, "publishing the map failed");
                        }
                    }
                    Ok(Err(e)) => tracing::warn!(error = %e, "computing the map failed"),
                    Err(e) => tracing::warn!(error = %e, "the map task failed"),
                }
            }
        }
        if Instant::now() < side.next {
            return;
        }
        side.next = Instant::now() + side.every;
        side.link.flush_if_quiet();
        let grid = if side.job.is_none() {
            side.grid.clone()
        } else {
            None
        };
        let fleet_wide = side.fleet;
        let format = side.link.map_format;
        if let Some(grid) = grid {
            let rows = grid.rows(self.intake.latest_x.as_deref());
            if rows.iter().flatten().all(|v| v.is_finite()) && self.agent.n_own() > 0 {
                let job = if fleet_wide {
                    let session = session.clone();
                    let fleet = self.s.fleet.clone();
                    let inputs = self.inputs.layout.inputs.clone();
                    let roster = self.peers.auth.as_ref().map(|a| a.roster.clone());
                    tokio::spawn(async move {
                        let map = (&grid, rows, format);
                        fleet_map(&session, &fleet, inputs, map, roster.as_ref()).await
                    })
                } else {
                    let model = self.query_model();
                    tokio::task::spawn_blocking(move || {
                        compute_map(&model, (&grid, &rows, format), "map")
                    })
                };
                if let Some(side) = self.ros2.as_mut() {
                    side.job = Some(job);
                }
            }
        }
        let msg = self.diagnostics();
        if let Some(side) = self.ros2.as_mut() {
            if let Err(e) = side.link.publish_diagnostics(msg).await {
                tracing::warn!(error = %e, "publishing diagnostics failed");
            }
        }
    }

    /// The node's health as a DiagnosticArray.
    fn diagnostics(&self) -> Vec<u8> {
        let st = self
            .ros2
            .as_ref()
            .map(|s| s.link.status())
            .unwrap_or_default();
        let rejected: u64 = self.peers.rejects.counts.values().sum();
        let (dropped, _) = self.peers.inbound.dropped();
        let refused = st.bad_cdr + st.non_finite + st.stamp_backwards + st.wrong_type;
        let level = if refused + rejected > 0 || st.rows_dropped > 0 {
            Level::Warn
        } else {
            Level::Ok
        };
        let values = [
            ("points", self.agent.n_own() as u64),
            ("fleet_points", self.agent.fleet_points() as u64),
            (
                "peers",
                self.peers.members.lock().map_or(0, |m| m.len() as u64),
            ),
            ("rejected", rejected),
            ("dropped", dropped + st.rows_dropped),
            ("ros2_messages", st.messages),
            ("ros2_rows", st.rows),
            ("ros2_refused", refused),
            ("ros2_unpaired", st.unpaired_inputs + st.unpaired_targets),
            ("maps", st.maps),
        ];
        let status = Status {
            level,
            name: format!("coolgp: {}", st.node),
            message: format!(
                "{} points, {} fleet points, {refused} ROS 2 messages refused, {rejected} peer \
                 messages rejected",
                self.agent.n_own(),
                self.agent.fleet_points()
            ),
            hardware_id: self.s.id.to_string(),
            values: values
                .iter()
                .map(|(k, v)| ((*k).to_string(), v.to_string()))
                .collect(),
        };
        diagnostic_array(&[status], now_ns(), "")
    }
}
