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

use crate::auth::Signer;
use crate::error::{NodeError, Result};
use crate::kernel_auth::{Claim, SuspectsClaim};
use crate::keys;
use crate::request::TrialKernel;
use crate::row_auth::sign_request;
use crate::status::{AnswerParts, ErrorReply, OfferedRows, PredictReply, PredictRequest};
use coolgp::local::calibrate::{held_out_answer, RuleCalibration};
use coolgp::local::{combine, FleetRule, LocalAnswer};

/// A member's key and id that sign a request for rows ([`crate::row_auth`]).
pub type Member<'a> = (&'a Signer, u64);

/// The routes of a routed query (`--route K`, [`crate::routing::routes`]) of rows `x` over
/// `columns`, with each row's owner for calibration rows; `None`: every agent answers.
pub type Router<'a> = dyn Fn(&[Vec<f64>], Option<&[String]>, Option<&[u64]>) -> Option<crate::routing::Routes>
    + Sync
    + 'a;

/// How long one round of the query waits for replies before it is repeated.
const ATTEMPT: Duration = Duration::from_millis(1500);

/// The answers of the agents that replied, and what went wrong with the others.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FleetAnswers {
    /// Per agent id, its answer at each query point (original units); after a routed query,
    /// at the points of [`FleetAnswers::rows`].
    pub answers: BTreeMap<u64, Vec<LocalAnswer>>,
    /// After a routed query (`--route K`, [`crate::routing`]): per agent id, the query points
    /// its answers are at (ascending); an agent absent here answered every point.
    pub rows: BTreeMap<u64, Vec<usize>>,
    /// Replies dropped: `(peer, reason)` (the peer is the reply's key, or its agent id).
    pub dropped: Vec<(String, String)>,
    /// Live members (liveliness tokens) that did not answer in time.
    pub silent: Vec<u64>,
    /// Per agent id, the memory rows it offered, for a held-out request (its `answers` are
    /// then its leave-one-out answers at them).
    pub held_out: BTreeMap<u64, OfferedRows>,
}

impl FleetAnswers {
    /// The ids of the agents that answered.
    pub fn who(&self) -> Vec<u64> {
        self.answers.keys().copied().collect()
    }

    /// The answers at point `i`, as `(agent, answer)` in agent-id order (after a routed
    /// query, of the agents asked about it).
    pub fn at(&self, i: usize) -> impl Iterator<Item = (u64, LocalAnswer)> + '_ {
        self.answers.iter().filter_map(move |(id, v)| {
            let at = match self.rows.get(id) {
                None => i,
                Some(rows) => rows.binary_search(&i).ok()?,
            };
            v.get(at).map(|a| (*id, *a))
        })
    }

    /// The answer of the fleet at each of `n` points: the agents' answers at that point
    /// combined by `rule` (in agent-id order). `None` when no agent answered a point.
    pub fn combined(&self, rule: FleetRule, n: usize) -> Option<Vec<LocalAnswer>> {
        (0..n)
            .map(|i| {
                let at: Vec<LocalAnswer> = self.at(i).map(|(_, a)| a).collect();
                combine(rule, &at)
            })
            .collect()
    }
}

/// What one agent's reply carries: its answers, and for a held-out request its rows.
type Parsed = (Vec<LocalAnswer>, Option<OfferedRows>);

/// One agent's answers from a reply payload for `n` points (`None`: a held-out request, as
/// many points as the rows it offers), or why it is refused.
fn parse_reply(bytes: &[u8], n: Option<usize>) -> std::result::Result<Parsed, String> {
    let reply: PredictReply =
        serde_json::from_slice(bytes).map_err(|e| format!("not a prediction document: {e}"))?;
    let parts: AnswerParts = reply
        .parts
        .ok_or("the reply carries no answer parts (a node of an older build?)")?;
    match n {
        Some(n) => Ok((parts.to_answers(n)?, None)),
        None => {
            let rows = reply
                .held_out
                .ok_or("the reply carries no held-out rows (a node of an older build?)")?;
            rows.check()?;
            Ok((parts.to_answers(rows.y.len())?, Some(rows)))
        }
    }
}

/// Each of `rules`' calibration (docs/LOCAL.md §10, §12: the safety net's weight, the variance
/// scale and the held-out error, [`RuleCalibration::measure`]) from the agents' offered rows
/// and leave-one-out answers (`held`, a held-out request's [`FleetAnswers`]) and every agent's
/// answers at those rows stacked in agent-id order (`at`, a request at the rows of
/// [`FleetAnswers::stacked_rows`]): at each row the owner's leave-one-out answer replaces its
/// own and the rule combines.
pub fn calibration(
    rules: &[FleetRule],
    held: &FleetAnswers,
    at: &FleetAnswers,
) -> Vec<RuleCalibration> {
    rules
        .iter()
        .map(|&rule| {
            let mut combined = Vec::new();
            let mut j = 0;
            for (&owner, rows) in &held.held_out {
                let loo = held.answers.get(&owner);
                for (r, &y) in rows.y.iter().enumerate() {
                    let at_row = at.at(j);
                    // A reply with fewer answers than rows (a malformed peer) gives no row.
                    if let Some(a) = loo
                        .and_then(|l| l.get(r))
                        .and_then(|&l| held_out_answer(rule, at_row, owner, l))
                    {
                        combined.push((a, y));
                    }
                    j += 1;
                }
            }
            RuleCalibration::measure(rule, &combined)
        })
        .collect()
}

impl FleetAnswers {
    /// The offered rows of a held-out request stacked in agent-id order, as one request's
    /// `(columns, x)` in the first agent's column order; rows of an agent whose columns are
    /// another set are left out (named in the returned warnings).
    pub fn stacked_rows(&mut self) -> (Vec<String>, Vec<Vec<f64>>, Vec<String>) {
        let columns = self
            .held_out
            .values()
            .next()
            .map(|h| h.columns.clone())
            .unwrap_or_default();
        let mut warnings = Vec::new();
        self.held_out.retain(|id, h| {
            let same = h.columns == columns;
            if !same {
                warnings.push(format!("agent {id}: other input columns {:?}", h.columns));
            }
            same
        });
        let x = self.held_out.values().flat_map(|h| h.x.clone()).collect();
        (columns, x, warnings)
    }
}

/// The ids of the fleet's live members (liveliness tokens), as far as this session sees
/// them within `timeout`.
pub(crate) async fn members(
    session: &zenoh::Session,
    fleet: &str,
    timeout: Duration,
) -> BTreeSet<u64> {
    // Into an unbounded channel from a callback, not zenoh's default FIFO of 256: zenoh
    // answers a liveliness get from the tokens it knows while the get is being sent, holding
    // the session's lock, so in a host (issue 31: 1,000 tokens known) a full FIFO blocked
    // that send forever, and with the lock every put, query and receive of the host (seen in
    // gdb: `flume::wait_send` under `Session::liveliness_query`, every other thread waiting
    // on the session's RwLock).
    let mut out = BTreeSet::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let sent = session
        .liveliness()
        .get(keys::alive_all(fleet))
        .timeout(timeout)
        .callback(move |reply| {
            if let Some(id) = reply
                .result()
                .ok()
                .and_then(|s| keys::parse_alive(s.key_expr().as_str()))
            {
                let _ = tx.send(id);
            }
        })
        .await;
    if sent.is_err() {
        return out;
    }
    // The channel closes when zenoh drops the callback: the query's end or its timeout.
    while let Some(id) = rx.recv().await {
        out.insert(id);
    }
    out
}

/// Replies a fleet-wide get can hold before its reader takes them (zenoh's default, 256,
/// would block zenoh's receive path while a thousand agents' replies wait for a busy reader:
/// issue 31).
pub const REPLY_BACKLOG: usize = 8192;

/// A get on a fleet-wide `selector` (`coolgp/<fleet>/*/…`) that every matching queryable
/// answers (no consolidation), with an optional payload and attachment, waiting `wait`.
///
/// # Errors
/// [`NodeError::Zenoh`] if the get cannot be sent.
pub(crate) async fn get_all(
    session: &zenoh::Session,
    selector: &str,
    (payload, attachment): (Option<Vec<u8>>, Option<Vec<u8>>),
    wait: Duration,
) -> Result<zenoh::handlers::FifoChannelHandler<zenoh::query::Reply>> {
    let mut get = session
        .get(selector)
        .with(zenoh::handlers::FifoChannel::new(REPLY_BACKLOG))
        // Droppable, as `client::get`'s: never a blocked thread on a full link.
        .congestion_control(zenoh::qos::CongestionControl::Drop)
        .attachment(attachment)
        .target(QueryTarget::All)
        .consolidation(ConsolidationMode::None)
        .timeout(wait);
    if let Some(p) = payload {
        get = get.payload(p);
    }
    get.await.map_err(|e| NodeError::zenoh("sending query", e))
}

/// One round of the query: every reply that arrives within `wait`, into `into`, or until
/// every agent of `want` answered. With several gets (a routed query, one per agent), the
/// replies of all are read as they come, and a pause of [`QUIET`] after the first ends the
/// round: the agents still missing are asked again by name, rather than a lost answer
/// holding the round for the whole of `wait` (issue 31).
async fn ask_once(
    session: &zenoh::Session,
    fleet: &str,
    (gets, signer): (Vec<(String, Vec<u8>)>, Option<Member<'_>>),
    (n, want): (&(dyn Fn(u64) -> Option<usize> + Sync), &BTreeSet<u64>),
    wait: Duration,
    into: &mut FleetAnswers,
) -> Result<()> {
    let at_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let quiet = (gets.len() > 1).then_some(QUIET);
    let mut channels = Vec::with_capacity(gets.len());
    for (selector, body) in gets {
        let attachment = signer.map(|(s, id)| sign_request(s, fleet, id, at_ms, &body));
        channels.push(get_all(session, &selector, (Some(body), attachment), wait).await?);
    }
    // Every agent awaited answered: the get's end (every host's final word) can come a full
    // attempt later under load (issue 31).
    read_merged(channels, quiet, &mut |reply| {
        take_reply(reply, n, into);
        !want.is_empty() && want.iter().all(|w| into.answers.contains_key(w))
    })
    .await;
    Ok(())
}

/// Reads the replies of `channels` (gets sent at once) as they come, each into `take`, until
/// `take` returns true or every get ended; with `quiet`, also when no reply came for that long
/// after the first (the rest are late or lost, and the next round asks them by name rather
/// than waiting out the gets: issue 31).
pub(crate) async fn read_merged(
    channels: Vec<zenoh::handlers::FifoChannelHandler<zenoh::query::Reply>>,
    quiet: Option<Duration>,
    take: &mut (dyn FnMut(&zenoh::query::Reply) -> bool + Send),
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for replies in channels {
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Ok(reply) = replies.recv_async().await {
                if tx.send(reply).is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);
    let mut heard = false;
    loop {
        let next = match quiet {
            Some(q) if heard => match tokio::time::timeout(q, rx.recv()).await {
                Ok(r) => r,
                Err(_) => return,
            },
            _ => rx.recv().await,
        };
        let Some(reply) = next else {
            return;
        };
        heard = true;
        if take(&reply) {
            return;
        }
    }
}

/// A pause in a routed round's replies that ends the round ([`ask_once`]).
const QUIET: Duration = Duration::from_millis(300);

/// One reply into `into`: an answer by its key's agent, or why it was dropped.
fn take_reply(
    reply: &zenoh::query::Reply,
    n: &(dyn Fn(u64) -> Option<usize> + Sync),
    into: &mut FleetAnswers,
) {
    match reply.result() {
        Ok(sample) => {
            let key = sample.key_expr().as_str();
            let Some(id) = keys::parse_predict(key) else {
                into.dropped.push((
                    key.to_owned(),
                    "a reply on a key that names no agent".into(),
                ));
                return;
            };
            match parse_reply(&sample.payload().to_bytes(), n(id)) {
                Ok((a, rows)) => {
                    into.answers.insert(id, a);
                    if let Some(rows) = rows {
                        into.held_out.insert(id, rows);
                    }
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

/// The gets of one round of [`gather`] (selector, body). A plain routed query (no rows asked
/// for) goes to each agent still to answer on its own key, with its rows only; everything
/// else is one get over the fleet, whose request names each agent's rows (`route`: then only
/// of the agents still to answer). Issue 31: a routed query of 1,000 rows sent every one of
/// 1,000 agents the whole request (the rows and every agent's routes), so each parsed it to
/// learn it had nothing to do; the round took 1.0–1.5 s.
///
/// # Errors
/// [`NodeError::Config`] if a request cannot be encoded.
fn round_gets(
    fleet: &str,
    req: &PredictRequest,
    answered: &BTreeMap<u64, Vec<LocalAnswer>>,
) -> Result<Vec<(String, Vec<u8>)>> {
    let encode =
        |r: &PredictRequest| serde_json::to_vec(r).map_err(|e| NodeError::Config(e.to_string()));
    let Some(route) = &req.route else {
        return Ok(vec![(keys::predict_all(fleet), encode(req)?)]);
    };
    let to_ask = route
        .iter()
        .filter(|(id, rows)| !rows.is_empty() && !answered.contains_key(id));
    let for_rows = req.held_out.is_some() || req.fit_sample.is_some() || req.near.is_some();
    if for_rows {
        let again = PredictRequest {
            route: Some(to_ask.map(|(id, rows)| (*id, rows.clone())).collect()),
            ..req.clone()
        };
        return Ok(vec![(keys::predict_all(fleet), encode(&again)?)]);
    }
    to_ask
        .map(|(&id, rows)| {
            let own = PredictRequest {
                x: rows.iter().filter_map(|&r| req.x.get(r).cloned()).collect(),
                route: None,
                ..req.clone()
            };
            Ok((keys::predict(fleet, id), encode(&own)?))
        })
        .collect()
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
    let got = gather(session, fleet, (req, None), timeout).await?;
    if got.answers.is_empty() {
        return Err(NodeError::NoReply {
            key: keys::predict_all(fleet),
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        });
    }
    Ok(got)
}

/// The fitter (the lowest live id) and its status, which carries the fleet's suspects (issue
/// 29, docs/MEMBERS.md §5) and calibration ([`crate::fleet_calibration`]); `None` if no
/// member is live or the fitter does not answer.
pub async fn fitter_status(
    session: &zenoh::Session,
    fleet: &str,
    timeout: Duration,
) -> Option<(u64, crate::status::Status)> {
    let wait = timeout.min(Duration::from_millis(500));
    let fitter = members(session, fleet, wait).await.into_iter().min()?;
    let st = crate::client::fetch_status(session, fleet, fitter, false, timeout).await;
    st.ok().map(|st| (fitter, st))
}

/// The fleet's suspects as the fitter's status `st` reports them. With a `roster` (a TLS
/// fleet) the list counts only if it carries the fitter's signature; an unsigned list gives no
/// suspect (and says so on stderr).
pub fn suspects_in(
    fleet: &str,
    fitter: u64,
    st: &crate::status::Status,
    roster: Option<&crate::auth::Roster>,
) -> Vec<u64> {
    if let Some(r) = roster {
        let claim = SuspectsClaim::of(fleet, fitter, st);
        if !st.suspects.is_empty()
            && !r
                .key(fitter)
                .is_some_and(|k| claim.verifies(&k, &st.suspects_sig))
        {
            eprintln!(
                "warning: agent {fitter}'s list of suspects {:?} is not signed by its key; no answer left out",
                st.suspects
            );
            return Vec::new();
        }
    }
    st.suspects.clone()
}

impl FleetAnswers {
    /// Removes the answers (and offered rows) of `ids`; returns those that had answered.
    pub fn leave_out(&mut self, ids: &[u64]) -> Vec<u64> {
        ids.iter()
            .copied()
            .filter(|id| {
                self.held_out.remove(id);
                self.rows.remove(id);
                self.answers.remove(id).is_some()
            })
            .collect()
    }
}

/// [`fetch_all`] without its error for no answer: what arrived, what was dropped and who
/// stayed silent.
///
/// # Errors
/// [`NodeError::Zenoh`] if the query cannot be sent.
async fn gather(
    session: &zenoh::Session,
    fleet: &str,
    (req, signer): (&PredictRequest, Option<Member<'_>>),
    timeout: Duration,
) -> Result<FleetAnswers> {
    let req = PredictRequest {
        parts: true,
        ..req.clone()
    };
    // Answers expected of agent `id`: its routed rows, every row, or (held out) its offer.
    let n = |id: u64| match (&req.route, req.held_out) {
        (_, Some(_)) => None,
        (Some(route), None) => Some(route.get(&id).map_or(0, Vec::len)),
        (None, None) => Some(req.x.len()),
    };
    // Who must answer: in a routed query only the agents with rows (issue 31: with 1,000
    // agents, waiting for every one of them, and asking all of them again when one was late,
    // made a routed query take 2–5 s); otherwise every live member.
    let awaited = |id: &u64| {
        req.route
            .as_ref()
            .is_none_or(|r| r.get(id).is_some_and(|v| !v.is_empty()))
    };
    let deadline = Instant::now() + timeout;
    let mut got = FleetAnswers::default();
    let mut alive = BTreeSet::new();
    let mut rounds = 0;
    loop {
        rounds += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        let wait = ATTEMPT.min(left).max(Duration::from_millis(100));
        alive.extend(members(session, fleet, wait.min(Duration::from_millis(500))).await);
        let want: BTreeSet<u64> = alive
            .iter()
            .filter(|id| awaited(id) && !got.answers.contains_key(id))
            .copied()
            .collect();
        let mut round = FleetAnswers::default();
        let gets = round_gets(fleet, &req, &got.answers)?;
        ask_once(
            session,
            fleet,
            (gets, signer),
            (&n, &want),
            wait,
            &mut round,
        )
        .await?;
        got.answers.append(&mut round.answers);
        got.held_out.append(&mut round.held_out);
        // Keep the last round's drops only: an agent that answered well later is not named.
        got.dropped = round.dropped;
        // Until a member is seen alive, one more round: a fresh session may see neither all
        // routes nor all tokens at first.
        let everyone = alive
            .iter()
            .filter(|id| awaited(id))
            .all(|id| got.answers.contains_key(id));
        let sure = !alive.is_empty() || rounds >= 2;
        if (!got.answers.is_empty() && everyone && sure) || Instant::now() >= deadline {
            break;
        }
        // A routed query asks again only the agents whose answers are missing (round_gets).
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    got.silent = alive
        .into_iter()
        .filter(|id| awaited(id) && !got.answers.contains_key(id))
        .collect();
    if let Some(route) = &req.route {
        got.rows = got
            .answers
            .keys()
            .map(|id| (*id, route.get(id).cloned().unwrap_or_default()))
            .collect();
    }
    Ok(got)
}

/// The longest [`calibrate`] waits for the nodes' offered rows (a node that does not share
/// them replies with an error, which does not end the wait).
const OFFER_WAIT: Duration = Duration::from_secs(3);

/// What [`calibrate`] measured: each rule's calibration, the rows it was measured on and who
/// offered them.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibrated {
    /// Each rule's weight, variance scale and held-out error (empty: no rows).
    pub rules: Vec<RuleCalibration>,
    /// Rows answered.
    pub rows: usize,
    /// The agents whose rows were used.
    pub owners: Vec<u64>,
}

/// What every request of [`calibrate`] carries besides its rows: the view (`fused`, `own`;
/// `None`: fused) and a trial kernel every agent answers under ([`PredictRequest::trial`]:
/// the fitter's score of a kernel family on the fleet's task, docs/LOCAL.md §12c).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AnswersUnder {
    /// `fused` or `own`.
    pub view: Option<String>,
    /// The residual kernel to answer under (`None`: each agent's own).
    pub trial: Option<TrialKernel>,
}

/// `coolgp query --all --calibrate K` (docs/LOCAL.md §10): asks every agent for up to `k` of
/// its memory rows and its leave-one-out answers there (one get), then every agent for its
/// answers at all those rows (a second), both `under` a view and a trial kernel, and measures each of `rules`' calibration
/// ([`calibration`]: the safety net's weight, the variance scale, the held-out error),
/// without the rows and answers of `suspects` ([`suspects`]). The rows are raw data sent to this querier (only nodes with the
/// pooled fit, `--local-fit fleet`, the default, send them, and in a TLS fleet only to a
/// member's signed request: `signer`, `--sign-as`, signs the request for rows with a
/// member's key; a reader gets none, [`crate::row_auth`]). Warnings (dropped replies, refusals, agents with other
/// columns) go to stderr.
///
/// # Errors
/// [`NodeError::Zenoh`] if a query cannot be sent; as [`fetch_all`] for the second get.
pub async fn calibrate(
    session: &zenoh::Session,
    fleet: &str,
    (under, signer): (AnswersUnder, Option<Member<'_>>),
    ((k, suspects), routed): ((usize, &[u64]), &Router<'_>),
    rules: &[FleetRule],
    timeout: Duration,
) -> Result<Calibrated> {
    let ask = PredictRequest {
        columns: None,
        x: Vec::new(),
        view: under.view,
        trial: under.trial,
        parts: true,
        held_out: Some(k),
        ..PredictRequest::default()
    };
    // Nodes that do not share rows answer with an error: wait for them at most OFFER_WAIT.
    let mut held = gather(session, fleet, (&ask, signer), timeout.min(OFFER_WAIT)).await?;
    // The suspects' rows and answers stay out (issue 29).
    held.leave_out(suspects);
    for (peer, why) in &held.dropped {
        eprintln!("warning: calibration: dropped the reply of {peer}: {why}");
    }
    let (columns, x, warnings) = held.stacked_rows();
    for w in warnings {
        eprintln!("warning: calibration: left out {w}");
    }
    let rows = x.len();
    let owners: Vec<u64> = held.held_out.keys().copied().collect();
    if rows == 0 {
        return Ok(Calibrated {
            rules: Vec::new(),
            rows,
            owners,
        });
    }
    // Each row's owner, in the stacked order (for a routed query: owner and K − 1 others).
    let owner_of: Vec<u64> = held
        .held_out
        .iter()
        .flat_map(|(&id, h)| std::iter::repeat_n(id, h.x.len()))
        .collect();
    let route = routed(&x, Some(&columns), Some(&owner_of));
    let at = PredictRequest {
        columns: Some(columns),
        x,
        held_out: None,
        route,
        ..ask
    };
    let mut answers = fetch_all(session, fleet, &at, timeout).await?;
    answers.leave_out(suspects);
    Ok(Calibrated {
        rules: calibration(rules, &held, &answers),
        rows,
        owners,
    })
}

#[cfg(test)]
#[path = "fleet_query_tests.rs"]
mod tests;
