//! `coolgp query --all`: one zenoh `get` over every agent's predict key
//! (`coolgp/<fleet>/*/predict`), the replies collected and checked, and the agents' answers
//! combined at each point by a fleet rule on the querier's side ([`combine`]).
//!
//! Who should answer is the fleet's liveliness (`coolgp/<fleet>/*/alive`): the query is
//! repeated until every live member has answered or the timeout passes (a fresh session may
//! not yet know every route). Replies are untrusted: a reply that is not a prediction
//! document with the answers' parts, of the wrong length, or with a value that is not finite
//! is dropped with a warning naming the peer.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use zenoh::query::{ConsolidationMode, QueryTarget};

use crate::error::{NodeError, Result};
use crate::keys;
use crate::status::{AnswerParts, ErrorReply, PredictReply, PredictRequest};
use coolgp::local::{combine, FleetRule, LocalAnswer};

/// How long one round of the query waits for replies before it is repeated.
const ATTEMPT: Duration = Duration::from_millis(1500);

/// The answers of the agents that replied, and what went wrong with the others.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FleetAnswers {
    /// Per agent id, its answer at each query point (original units).
    pub answers: BTreeMap<u64, Vec<LocalAnswer>>,
    /// Replies dropped: `(peer, reason)` (the peer is the reply's key, or its agent id).
    pub dropped: Vec<(String, String)>,
    /// Live members (liveliness tokens) that did not answer in time.
    pub silent: Vec<u64>,
}

impl FleetAnswers {
    /// The ids of the agents that answered.
    pub fn who(&self) -> Vec<u64> {
        self.answers.keys().copied().collect()
    }

    /// The answer of the fleet at each of `n` points: the agents' answers at that point
    /// combined by `rule` (in agent-id order). `None` when no agent answered.
    pub fn combined(&self, rule: FleetRule, n: usize) -> Option<Vec<LocalAnswer>> {
        (0..n)
            .map(|i| {
                let at: Vec<LocalAnswer> = self.answers.values().map(|a| a[i]).collect();
                combine(rule, &at)
            })
            .collect()
    }
}

/// One agent's answers from a reply payload for `n` points, or why it is refused.
fn parse_reply(bytes: &[u8], n: usize) -> std::result::Result<Vec<LocalAnswer>, String> {
    let reply: PredictReply =
        serde_json::from_slice(bytes).map_err(|e| format!("not a prediction document: {e}"))?;
    let parts: AnswerParts = reply
        .parts
        .ok_or("the reply carries no answer parts (a node of an older build?)")?;
    parts.to_answers(n)
}

/// The ids of the fleet's live members (liveliness tokens), as far as this session sees
/// them within `timeout`.
async fn members(session: &zenoh::Session, fleet: &str, timeout: Duration) -> BTreeSet<u64> {
    let mut out = BTreeSet::new();
    let Ok(replies) = session
        .liveliness()
        .get(keys::alive_all(fleet))
        .timeout(timeout)
        .await
    else {
        return out;
    };
    while let Ok(r) = replies.recv_async().await {
        if let Some(id) = r
            .result()
            .ok()
            .and_then(|s| keys::parse_alive(s.key_expr().as_str()))
        {
            out.insert(id);
        }
    }
    out
}

/// One round of the query: every reply that arrives within `wait`, into `into`.
async fn ask_once(
    session: &zenoh::Session,
    fleet: &str,
    body: &[u8],
    n: usize,
    wait: Duration,
    into: &mut FleetAnswers,
) -> Result<()> {
    let replies = session
        .get(keys::predict_all(fleet))
        .payload(body.to_vec())
        .target(QueryTarget::All)
        .consolidation(ConsolidationMode::None)
        .timeout(wait)
        .await
        .map_err(|e| NodeError::zenoh("sending query", e))?;
    while let Ok(reply) = replies.recv_async().await {
        match reply.result() {
            Ok(sample) => {
                let key = sample.key_expr().as_str();
                let Some(id) = keys::parse_predict(key) else {
                    into.dropped.push((
                        key.to_owned(),
                        "a reply on a key that names no agent".into(),
                    ));
                    continue;
                };
                match parse_reply(&sample.payload().to_bytes(), n) {
                    Ok(a) => {
                        into.answers.insert(id, a);
                    }
                    Err(e) => into.dropped.push((format!("agent {id}"), e)),
                }
            }
            Err(err) => {
                let bytes = err.payload().to_bytes();
                let message = serde_json::from_slice::<ErrorReply>(&bytes)
                    .map(|e| e.error)
                    .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned());
                // An error reply carries no key: the peer is named by what it said.
                into.dropped
                    .push(("a node".to_owned(), format!("error reply: {message}")));
            }
        }
    }
    Ok(())
}

/// Asks every agent of `fleet` for its answers at `req`'s points (the request is sent with
/// `parts` on), until every live member answered or `timeout` passed.
///
/// # Errors
/// [`NodeError::NoReply`] if no agent answered usefully; [`NodeError::Zenoh`] if the query
/// cannot be sent.
pub async fn fetch_all(
    session: &zenoh::Session,
    fleet: &str,
    req: &PredictRequest,
    timeout: Duration,
) -> Result<FleetAnswers> {
    let req = PredictRequest {
        parts: true,
        ..req.clone()
    };
    let body = serde_json::to_vec(&req).map_err(|e| NodeError::Config(e.to_string()))?;
    let n = req.x.len();
    let deadline = Instant::now() + timeout;
    let mut got = FleetAnswers::default();
    let mut alive = BTreeSet::new();
    let mut rounds = 0;
    loop {
        rounds += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        let wait = ATTEMPT.min(left).max(Duration::from_millis(100));
        alive.extend(members(session, fleet, wait.min(Duration::from_millis(500))).await);
        let mut round = FleetAnswers::default();
        ask_once(session, fleet, &body, n, wait, &mut round).await?;
        got.answers.append(&mut round.answers);
        // Keep the last round's drops only: an agent that answered well later is not named.
        got.dropped = round.dropped;
        // Until a member is seen alive, one more round: a fresh session may see neither all
        // routes nor all tokens at first.
        let everyone = alive.iter().all(|id| got.answers.contains_key(id));
        let sure = !alive.is_empty() || rounds >= 2;
        if (!got.answers.is_empty() && everyone && sure) || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    got.silent = alive
        .into_iter()
        .filter(|id| !got.answers.contains_key(id))
        .collect();
    if got.answers.is_empty() {
        return Err(NodeError::NoReply {
            key: keys::predict_all(fleet),
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        });
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(mean: f64, var: f64) -> LocalAnswer {
        LocalAnswer {
            global_mean: mean,
            global_var: var,
            residual_mean: 0.0,
            residual_var: 0.0,
            residual_prior: 0.0,
            noise_var: 0.1,
        }
    }

    #[test]
    fn malformed_replies_are_refused_with_a_reason() {
        let good = PredictReply {
            mean: vec![1.0],
            var_f: vec![0.5],
            var_y: vec![0.6],
            parts: Some(AnswerParts::from_answers(&[answer(1.0, 0.5)])),
        };
        let bytes = serde_json::to_vec(&good).expect("json");
        assert_eq!(parse_reply(&bytes, 1), Ok(vec![answer(1.0, 0.5)]));
        assert!(parse_reply(&bytes, 2)
            .unwrap_err()
            .contains("1 values for 2 points"));
        assert!(parse_reply(b"{\"mean\": [1]}", 1)
            .unwrap_err()
            .contains("not a prediction document"));
        let bare = PredictReply {
            parts: None,
            ..good
        };
        let bytes = serde_json::to_vec(&bare).expect("json");
        assert!(parse_reply(&bytes, 1)
            .unwrap_err()
            .contains("no answer parts"));
    }

    #[test]
    fn the_fleet_answer_combines_the_agents_answers_point_by_point() {
        let mut f = FleetAnswers::default();
        f.answers
            .insert(2, vec![answer(1.0, 0.5), answer(2.0, 0.1)]);
        f.answers
            .insert(7, vec![answer(3.0, 0.2), answer(4.0, 0.3)]);
        let c = f.combined(FleetRule::MinVariance, 2).expect("answers");
        assert_eq!(c, vec![answer(3.0, 0.2), answer(2.0, 0.1)]);
        assert_eq!(f.who(), vec![2, 7]);
        assert_eq!(
            FleetAnswers::default().combined(FleetRule::MinVariance, 1),
            None
        );
    }
}
