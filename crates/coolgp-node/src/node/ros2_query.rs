//! The node's answers to the ROS 2 point-query service (`--ros2-query-service`,
//! [`coolgp_ros2::service`]): each call's points are answered off the loop from the same
//! source as the map, by the same code: the fleet query ([`super::ros2_side::fleet_predict`],
//! as `coolgp query --all`) with a local memory, else this node's own answer
//! ([`predict_rows`] on a blocking thread, as `coolgp query --agent`). A point that does not
//! parse is answered with its error; the others are answered together.

use std::time::Instant;

use coolgp_ros2::service::{parse_point, Answer};
use tokio::sync::mpsc;

use super::Node;
use crate::query::predict_rows;
use crate::ros2::ServiceCall;
use crate::status::PredictReply;

/// The next call, or never if the node serves none (a closed queue serves none from then).
pub(super) async fn next_call(calls: &mut Option<mpsc::Receiver<ServiceCall>>) -> ServiceCall {
    if let Some(rx) = calls.as_mut() {
        if let Some(call) = rx.recv().await {
            return call;
        }
        *calls = None;
    }
    std::future::pending().await
}

/// The answers at `points` (parsed or refused) from `reply`, which answered the parsed ones
/// in order; or every point refused with `failed`'s reason.
fn answers(
    points: Vec<Result<Vec<f64>, String>>,
    reply: Result<PredictReply, String>,
) -> Vec<Answer> {
    let mut k = 0;
    points
        .into_iter()
        .map(|p| match (p, &reply) {
            (Err(why), _) => Answer::Refused(why),
            (Ok(_), Err(why)) => Answer::Refused(why.clone()),
            (Ok(_), Ok(r)) => {
                let i = k;
                k += 1;
                match (r.mean.get(i), r.var_f.get(i), r.var_y.get(i)) {
                    (Some(&mean), Some(&var_f), Some(&var_y)) => {
                        Answer::Value { mean, var_f, var_y }
                    }
                    _ => Answer::Refused("the query returned fewer answers than points".into()),
                }
            }
        })
        .collect()
}

impl Node {
    /// Answers one call off the loop: its parsed points from the fleet query (on the fleet's
    /// `session`) or this node's model, the response sent back through the call.
    pub(super) fn answer_ros2_call(&self, call: ServiceCall, session: &zenoh::Session) {
        let t0 = Instant::now();
        let inputs = self.inputs.layout.inputs.clone();
        let points: Vec<Result<Vec<f64>, String>> = call
            .names
            .iter()
            .map(|n| parse_point(n, inputs.len()))
            .collect();
        let rows: Vec<Vec<f64>> = points.iter().filter_map(|p| p.clone().ok()).collect();
        let fleet_wide = self.ros2.as_ref().is_some_and(|s| s.fleet);
        let reply = call.reply;
        let n = points.len();
        let finish = move |reply_to: tokio::sync::oneshot::Sender<Vec<Answer>>,
                           predicted: Result<PredictReply, String>| {
            let answered = answers(points, predicted);
            tracing::debug!(
                points = n,
                ms = t0.elapsed().as_secs_f64() * 1e3,
                "ROS 2 query service answered"
            );
            // The client may be gone; nothing to do then.
            let _ = reply_to.send(answered);
        };
        if rows.is_empty() {
            finish(reply, Ok(PredictReply::default()));
        } else if fleet_wide {
            let session = session.clone();
            let fleet = self.s.fleet.clone();
            let roster = self.peers.auth.as_ref().map(|a| a.roster.clone());
            tokio::spawn(async move {
                let predicted = super::ros2_side::fleet_predict(
                    &session,
                    &fleet,
                    inputs,
                    rows,
                    roster.as_ref(),
                )
                .await;
                finish(reply, predicted);
            });
        } else {
            let model = self.query_model();
            tokio::task::spawn_blocking(move || finish(reply, predict_rows(&model, &rows)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_follow_the_points_and_refusals_keep_their_place() {
        let points = vec![Ok(vec![1.0]), Err("bad".to_string()), Ok(vec![2.0])];
        let reply = PredictReply {
            mean: vec![10.0, 20.0],
            var_f: vec![0.1, 0.2],
            var_y: vec![0.5, 0.6],
            ..PredictReply::default()
        };
        let got = answers(points.clone(), Ok(reply));
        assert_eq!(
            got,
            [
                Answer::Value {
                    mean: 10.0,
                    var_f: 0.1,
                    var_y: 0.5
                },
                Answer::Refused("bad".into()),
                Answer::Value {
                    mean: 20.0,
                    var_f: 0.2,
                    var_y: 0.6
                },
            ]
        );
        let failed = answers(points.clone(), Err("no answer".into()));
        assert_eq!(failed[0], Answer::Refused("no answer".into()));
        assert_eq!(failed[1], Answer::Refused("bad".into()));
        let short = answers(points, Ok(PredictReply::default()));
        assert!(matches!(&short[2], Answer::Refused(w) if w.contains("fewer")));
    }
}
