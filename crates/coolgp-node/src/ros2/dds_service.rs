//! The point-query service over DDS (`--ros2-query-service` with `--ros2 dds`): a
//! `ros2-client` server of `rcl_interfaces/srv/GetParameters` (the crate's own serde types of
//! the service, [`GetParametersRequest`] and [`GetParametersResponse`]), requests on
//! `rq/<name>Request`, replies on `rr/<name>Reply`, with the enhanced RPC-over-DDS mapping
//! that Fast DDS (`rmw_fastrtps_cpp`) uses: the request's identity travels as the reply's
//! related sample identity, a parameter of the reply's inline QoS. A thread takes the
//! requests, hands each to the node's loop ([`ServiceCall`]) and writes the answers back as
//! they come.
//!
//! A reply that does not fit one datagram (on a 1,500-byte MTU, more than 17 points) leaves
//! RustDDS as DATA_FRAG submessages, each with that inline QoS. The published RustDDS
//! (0.15.1) writes a stray byte (speedy's `Option` tag) in front of a DATA_FRAG's inline QoS,
//! so Fast DDS reads a parameter list that overruns the submessage and drops every fragment:
//! rclpy never got a reply of 18 points or more. The workspace builds RustDDS with that one
//! line fixed (`vendor/rustdds`, `vendor/README.md`): rclpy on Fast DDS gets 1,000 points in
//! about 8 ms. Over DDS as over rmw_zenoh a call asks at most [`MAX_POINTS`] points; a larger
//! request is answered at once with one value saying so.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use coolgp_ros2::service::{
    Answer, ServiceError, MAX_POINTS, PARAMETER_DOUBLE_ARRAY, PARAMETER_STRING,
};
use ros2_client::dds::{Node, Server, ServiceMapping};
use ros2_client::parameters::raw::ParameterValue;
use ros2_client::rcl_interfaces::{GetParametersRequest, GetParametersResponse};
use ros2_client::{QosProfile, ServiceTypeName};
use tokio::sync::{mpsc, oneshot};

use super::{ServiceCall, ServiceCounts, CALL_QUEUE};
use crate::error::{NodeError, Result};

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

/// A request's `names` handed to the node (its answers to come on the receiver), or the
/// answers refusing it: one value if it asks more than [`MAX_POINTS`] points (as rmw_zenoh's
/// side refuses it whole), each point refused as busy if `tx` is full.
fn admit(
    names: Vec<String>,
    tx: &mpsc::Sender<ServiceCall>,
) -> std::result::Result<oneshot::Receiver<Vec<Answer>>, Vec<Answer>> {
    let n = names.len();
    if n > MAX_POINTS {
        let why = ServiceError::TooMany { asked: n }.to_string();
        return Err(vec![Answer::Refused(why)]);
    }
    let (reply, answer) = oneshot::channel();
    match tx.try_send(ServiceCall { names, reply }) {
        Ok(()) => Ok(answer),
        Err(_) => {
            let why = format!("busy: {CALL_QUEUE} calls are waiting; try again");
            Err(vec![Answer::Refused(why); n])
        }
    }
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
/// RustDDS cannot read is counted and logged (the first of a run of failures); one [`admit`]
/// refuses is answered at once, counted and logged.
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
                    match admit(req.names, &tx) {
                        Ok(answer) => pending.push((id, answer)),
                        Err(refusal) => {
                            counts.refused.fetch_add(1, Ordering::Relaxed);
                            if let Some(Answer::Refused(why)) = refusal.first() {
                                tracing::warn!(error = %why, "a DDS query-service request refused");
                            }
                            if let Err(e) = server.send_response(id, response(refusal)) {
                                tracing::debug!(error = ?e, "refusing a DDS service call");
                            }
                        }
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
                match server.send_response(*id, response(answers)) {
                    Ok(()) => {
                        counts.answered.fetch_add(1, Ordering::Relaxed);
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
    fn a_request_is_queued_or_refused_whole_or_busy() {
        let (tx, mut rx) = mpsc::channel(1);
        let names = |n: usize| vec!["1,2".to_string(); n];
        // 1,000 points go to the node (over DDS as over rmw_zenoh: no limit below MAX_POINTS).
        let _answer = admit(names(1000), &tx).expect("queued");
        assert_eq!(rx.try_recv().expect("a call").names.len(), 1000);
        let too_many = admit(names(MAX_POINTS + 1), &tx).expect_err("refused");
        assert!(
            matches!(&too_many[..], [Answer::Refused(w)] if w.contains("at most 100000")),
            "{too_many:?}"
        );
        let _first = admit(names(2), &tx).expect("queued");
        let busy = admit(names(3), &tx).expect_err("the queue is full");
        assert_eq!(busy.len(), 3);
        assert!(matches!(&busy[0], Answer::Refused(w) if w.starts_with("busy")));
    }
}
