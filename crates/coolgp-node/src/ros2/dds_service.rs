//! The point-query service over DDS (`--ros2-query-service` with `--ros2 dds`): a
//! `ros2-client` server of `rcl_interfaces/srv/GetParameters` (the crate's own serde types of
//! the service, [`GetParametersRequest`] and [`GetParametersResponse`]), requests on
//! `rq/<name>Request`, replies on `rr/<name>Reply`, with the enhanced RPC-over-DDS mapping
//! that Fast DDS (`rmw_fastrtps_cpp`) uses: the request's identity travels as the reply's
//! related sample identity. A thread takes the requests, hands each to the node's loop
//! ([`ServiceCall`]) and writes the answers back as they come.
//!
//! A reply must fit in one datagram: RustDDS fragments a larger sample (DATA_FRAG), and rclpy
//! on Fast DDS never delivers a fragmented service reply (measured: 17 points, 1,232 bytes,
//! arrive; 18 points, 1,304 bytes, never do, while a fragmented 12.8 KB map on a topic does).
//! A reply over [`MAX_REPLY`] bytes is replaced by one value saying so: at most 16 points a
//! call over DDS (rmw_zenoh has no such limit).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use coolgp_ros2::cdr::Endian;
use coolgp_ros2::service::{encode_response, Answer, PARAMETER_DOUBLE_ARRAY, PARAMETER_STRING};
use ros2_client::dds::{Node, Server, ServiceMapping};
use ros2_client::parameters::raw::ParameterValue;
use ros2_client::rcl_interfaces::{GetParametersRequest, GetParametersResponse};
use ros2_client::{QosProfile, ServiceTypeName};
use tokio::sync::{mpsc, oneshot};

use super::{ServiceCall, ServiceCounts, CALL_QUEUE};
use crate::error::{NodeError, Result};

/// The largest reply sent over DDS, in bytes of CDR (what fits one datagram with the reply's
/// inline QoS; 16 points of values).
pub const MAX_REPLY: usize = 1200;

/// The server of the node's point queries.
type QueryServer = Server<GetParametersRequest, GetParametersResponse>;

/// A call handed to the node, waiting for its answers.
type Pending = (ros2_client::RmwRequestId, oneshot::Receiver<Vec<Answer>>);

/// Declares the service `name` (fully qualified) on `node` with QoS `qos`.
///
/// # Errors
/// [`NodeError::Config`] naming what DDS refused.
pub(super) fn declare(node: &mut Node, name: &str, qos: QosProfile) -> Result<QueryServer> {
    let srv = ServiceTypeName::new("rcl_interfaces", "GetParameters");
    node.create_server::<GetParametersRequest, GetParametersResponse>(
        ServiceMapping::Enhanced,
        &super::dds::name(name)?,
        &srv,
        qos.clone(),
        qos,
    )
    .map_err(|e| NodeError::Config(format!("DDS: query service {name}: {e:?}")))
}

/// The answers, or one refusal if their reply would not fit one datagram ([`MAX_REPLY`]).
fn fitting(answers: Vec<Answer>) -> (Vec<Answer>, bool) {
    let size = encode_response(&answers, Endian::Little).len();
    if size <= MAX_REPLY {
        return (answers, true);
    }
    let why = format!(
        "{} points answer in {size} bytes; over DDS a reply must fit one datagram ({MAX_REPLY} \
         bytes, 16 points): split the request",
        answers.len()
    );
    (vec![Answer::Refused(why)], false)
}

/// The answers as the service's response.
fn response(answers: Vec<Answer>) -> GetParametersResponse {
    let values = answers
        .into_iter()
        .map(|a| {
            let (ptype, string_value, double_array) = match a {
                Answer::Value { mean, var_f, var_y } => (
                    PARAMETER_DOUBLE_ARRAY,
                    String::new(),
                    vec![mean, var_f, var_y],
                ),
                Answer::Refused(why) => (PARAMETER_STRING, format!("error: {why}"), Vec::new()),
            };
            ParameterValue {
                ptype,
                boolean_value: false,
                int_value: 0,
                double_value: 0.0,
                string_value,
                byte_array: Vec::new(),
                bool_array: Vec::new(),
                int_array: Vec::new(),
                double_array,
                string_array: Vec::new(),
            }
        })
        .collect();
    GetParametersResponse { values }
}

/// Takes requests into `tx` and writes the answers back, every `every`, until `stop`. A request
/// RustDDS cannot read is counted and logged (the first of a run of failures); a full queue is
/// answered at once, each point refused as busy.
pub(super) fn serve(
    server: QueryServer,
    (tx, counts): (mpsc::Sender<ServiceCall>, Arc<ServiceCounts>),
    stop: &AtomicBool,
    every: std::time::Duration,
) {
    let mut pending: Vec<Pending> = Vec::new();
    let mut failing = false;
    while !stop.load(Ordering::Relaxed) {
        loop {
            match server.receive_request() {
                Ok(Some((id, req))) => {
                    failing = false;
                    let n = req.names.len();
                    let (reply, answer) = oneshot::channel();
                    let call = ServiceCall {
                        names: req.names,
                        reply,
                    };
                    if tx.try_send(call).is_err() {
                        counts.refused.fetch_add(1, Ordering::Relaxed);
                        let why = format!("busy: {CALL_QUEUE} calls are waiting; try again");
                        tracing::warn!(error = %why, "a ROS 2 query-service request refused");
                        let busy = vec![Answer::Refused(why); n];
                        if let Err(e) = server.send_response(id, response(busy)) {
                            tracing::debug!(error = ?e, "refusing a DDS service call");
                        }
                    } else {
                        pending.push((id, answer));
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    counts.refused.fetch_add(1, Ordering::Relaxed);
                    if !failing {
                        tracing::warn!(error = ?e, "a DDS query-service request refused");
                    }
                    failing = true;
                    break;
                }
            }
        }
        pending.retain_mut(|(id, answer)| match answer.try_recv() {
            Ok(answers) => {
                let (answers, fits) = fitting(answers);
                match server.send_response(*id, response(answers)) {
                    Ok(()) if fits => {
                        counts.answered.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(()) => {
                        counts.refused.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!("a DDS query-service reply too large for one datagram");
                    }
                    Err(e) => tracing::debug!(error = ?e, "answering a DDS service call"),
                }
                false
            }
            Err(oneshot::error::TryRecvError::Empty) => true,
            Err(oneshot::error::TryRecvError::Closed) => false,
        });
        std::thread::sleep(every);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coolgp_ros2::cdr::Endian;
    use coolgp_ros2::service::{decode_response, encode_request, encode_response};
    use ros2_client::dds::rustdds::serialization::{
        deserialize_from_cdr_with_rep_id, to_writer_with_rep_id,
    };
    use ros2_client::dds::rustdds::RepresentationIdentifier as Rep;

    /// Our CDR of the service and RustDDS's serde CDR of ros2-client's types agree: requests
    /// in either byte order read alike, responses are the same bytes.
    #[test]
    fn our_cdr_and_rustdds_agree_in_both_byte_orders() {
        let names = ["48.13,11.55", "", "1e-3, 2"];
        for (endian, rep) in [(Endian::Little, Rep::CDR_LE), (Endian::Big, Rep::CDR_BE)] {
            let ours = encode_request(&names, endian);
            let (req, _): (GetParametersRequest, usize) =
                deserialize_from_cdr_with_rep_id(&ours[4..], rep).expect("request");
            assert_eq!(req.names, names);
            let answers = vec![
                Answer::Value {
                    mean: 20.5,
                    var_f: 1e-3,
                    var_y: 0.25,
                },
                Answer::Refused("`x` is not a finite decimal".into()),
            ];
            let mut theirs = endian_header(endian).to_vec();
            to_writer_with_rep_id(&mut theirs, &response(answers.clone()), rep).expect("write");
            assert_eq!(encode_response(&answers, endian), theirs);
            assert_eq!(decode_response(&theirs).expect("response"), answers);
        }
    }

    fn endian_header(e: Endian) -> [u8; 4] {
        let [a, b] = e.representation();
        [a, b, 0, 0]
    }

    #[test]
    fn answers_become_parameter_values() {
        let r = response(vec![
            Answer::Value {
                mean: 1.5,
                var_f: 0.25,
                var_y: 0.5,
            },
            Answer::Refused("no".into()),
        ]);
        assert_eq!(r.values[0].ptype, PARAMETER_DOUBLE_ARRAY);
        assert_eq!(r.values[0].double_array, [1.5, 0.25, 0.5]);
        assert_eq!(r.values[1].ptype, PARAMETER_STRING);
        assert_eq!(r.values[1].string_value, "error: no");
    }

    #[test]
    fn a_reply_too_large_for_a_datagram_is_one_refusal() {
        let value = Answer::Value {
            mean: 1.0,
            var_f: 2.0,
            var_y: 3.0,
        };
        let (sixteen, fits) = fitting(vec![value.clone(); 16]);
        assert!(fits && sixteen.len() == 16);
        let (seventeen, fits) = fitting(vec![value; 17]);
        assert!(!fits);
        assert!(
            matches!(&seventeen[..], [Answer::Refused(w)] if w.contains("split the request")),
            "{seventeen:?}"
        );
    }
}
