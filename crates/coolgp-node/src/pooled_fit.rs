//! The node's side of the fleet-wide fit of the residual kernel (`--local-fit fleet`,
//! docs/LOCAL.md §9, docs/NODE.md): the node asks every node of the fleet for a sample of its
//! memory (one zenoh get over `coolgp/<fleet>/*/predict` with `"fit_sample": k`; each reply
//! carries up to k raw rows and their residuals, in original units), brings the samples into
//! its own standardized units, and fits the kernel on them as the simulator does
//! ([`fit_pooled_selected`]: the warm continuation and, when due, a cold start, chosen by
//! held-out evidence on the odd rows). Every node fits for itself, so nodes that pool the same
//! samples hold the same kernel; the fit runs off the node's loop.

use std::collections::BTreeMap;
use std::time::Duration;

use coolgp::local::pool::{fit_pooled_selected, halves};
use coolgp::local::{FitSample, PoolOptions, ResidualKernel};
use coolgp::Vocabulary;
use coolgp_data::Standardizer;
use zenoh::query::{ConsolidationMode, QueryTarget};

use crate::auth::Signer;
use crate::keys;
use crate::row_auth::sign_request;
use crate::status::{OfferedRows, PredictReply, PredictRequest};

/// A pooled fit is due when the fused model's points have grown by this fraction since the
/// last one (the simulator fits after each of its ~10 fusions of the stream).
pub const POOL_GROWTH: f64 = 0.25;

/// How long a node waits for the fleet's samples.
pub const SAMPLE_TIMEOUT: Duration = Duration::from_millis(2500);

/// How long the fused model must stay unchanged before a node makes a last pooled fit on
/// what it grew since its previous one ([`due`]).
pub const SETTLED_MS: u64 = 2_000;

/// True when a pooled fit is due: the fused model holds points and, since the last pooled fit
/// at `last` fused points (0: none yet), they grew by [`POOL_GROWTH`], or grew at all and then
/// stayed unchanged for [`SETTLED_MS`] (`settled_ms`: how long it has been unchanged), so the
/// fleet's final memories get their fit when the streams end.
pub fn due(last: f64, now: f64, settled_ms: u64) -> bool {
    now > 0.0
        && (last <= 0.0
            || now >= last * (1.0 + POOL_GROWTH)
            || (now > last && settled_ms >= SETTLED_MS))
}

/// A pooled fit's request for samples: the query body and, in a TLS fleet, the attachment
/// that signs it as the requesting member's ([`crate::row_auth`]: nodes of a TLS fleet send
/// rows only for a member's signed request).
#[derive(Clone, Debug)]
pub struct SampleRequest {
    /// The JSON body (`{"fit_sample": k, ...}`).
    pub body: Vec<u8>,
    /// The signature attachment (`None` in an open fleet).
    pub attachment: Option<Vec<u8>>,
}

impl SampleRequest {
    /// Asks every node for up to `k` rows; with `signer` = (the node's key, its id) signs the
    /// request for `fleet` at `at_ms` (unix ms).
    pub fn new(k: usize, fleet: &str, signer: Option<(&Signer, u64)>, at_ms: u64) -> Self {
        let req = PredictRequest {
            fit_sample: Some(k),
            ..PredictRequest::default()
        };
        // A struct of plain fields always serializes.
        let body = serde_json::to_vec(&req).unwrap_or_default();
        let attachment = signer.map(|(s, by)| sign_request(s, fleet, by, at_ms, &body));
        Self { body, attachment }
    }
}

/// Each node's sample in one get: agent id → its offered rows; replies that are not a valid
/// sample are dropped (returned with the reason: the peer is untrusted), and so are refusals
/// (returned with the node's error: e.g. a node that fits its own kernel).
pub async fn fetch_samples(
    session: &zenoh::Session,
    fleet: &str,
    req: &SampleRequest,
    timeout: Duration,
) -> (BTreeMap<u64, OfferedRows>, Vec<(String, String)>) {
    let (mut got, mut dropped) = (BTreeMap::new(), Vec::new());
    let replies = match session
        .get(keys::predict_all(fleet))
        .payload(req.body.clone())
        .attachment(req.attachment.clone())
        .target(QueryTarget::All)
        .consolidation(ConsolidationMode::None)
        .timeout(timeout)
        .await
    {
        Ok(r) => r,
        Err(e) => {
            dropped.push(("the fleet".into(), format!("sending the sample query: {e}")));
            return (got, dropped);
        }
    };
    while let Ok(reply) = replies.recv_async().await {
        let sample = match reply.result() {
            Ok(sample) => sample,
            Err(e) => {
                let why = e.payload().to_bytes();
                dropped.push(("a node".into(), String::from_utf8_lossy(&why).into_owned()));
                continue;
            }
        };
        let key = sample.key_expr().as_str().to_owned();
        let Some(id) = keys::parse_predict(&key) else {
            continue;
        };
        match parse_sample(&sample.payload().to_bytes()) {
            Ok(rows) => {
                got.insert(id, rows);
            }
            Err(why) => dropped.push((format!("agent {id}"), why)),
        }
    }
    (got, dropped)
}

/// The offered rows of a sample reply, checked, or why it is refused.
fn parse_sample(bytes: &[u8]) -> std::result::Result<OfferedRows, String> {
    let reply: PredictReply =
        serde_json::from_slice(bytes).map_err(|e| format!("not a sample document: {e}"))?;
    let rows = reply
        .fit_sample
        .ok_or("the reply carries no sample (a node of an older build?)")?;
    rows.check()?;
    Ok(rows)
}

/// A peer's rows (original units, its column order) as a [`FitSample`] in this node's
/// standardized units: columns matched to `inputs` by name, inputs standardized, residuals
/// divided by y's standard deviation.
///
/// # Errors
/// A missing input column, or a value the sample refuses (non-finite after scaling).
pub fn to_sample(
    rows: &OfferedRows,
    inputs: &[String],
    scaler: Option<&Standardizer>,
) -> std::result::Result<FitSample, String> {
    let idx: Vec<usize> = inputs
        .iter()
        .map(|name| {
            rows.columns
                .iter()
                .position(|c| c == name)
                .ok_or_else(|| format!("the sample has no column '{name}'"))
        })
        .collect::<std::result::Result<_, _>>()?;
    let x = rows
        .x
        .iter()
        .flat_map(|r| {
            idx.iter()
                .enumerate()
                .map(move |(j, &c)| scaler.map_or(r[c], |s| (r[c] - s.mean[j]) / s.std[j]))
        })
        .collect();
    let r = rows
        .y
        .iter()
        .map(|&v| scaler.map_or(v, |s| v / s.y_std))
        .collect();
    FitSample::new(inputs.len(), x, r).map_err(|e| e.to_string())
}

/// What one pooled fit starts from: the warm chain's kernel (`None` at the first fit), the
/// agents' initial kernel (the cold start), and whether a cold candidate is due
/// ([`coolgp::local::pool::cold_due`]).
pub struct Start {
    /// The previous pooled fit's kernel.
    pub warm: Option<ResidualKernel>,
    /// The initial kernel.
    pub initial: ResidualKernel,
    /// Fit a cold candidate too.
    pub cold: bool,
}

/// The pooled fit on `samples` (agent-id order) as the simulator makes it: each sample's even
/// rows fit, its odd rows validate ([`halves`], [`fit_pooled_selected`] with the default
/// [`PoolOptions`]; the choice and the candidates' held-out scores are logged). `None`: no
/// fit (too few rows).
pub fn fit(start: &Start, vocab: &Vocabulary, samples: &[FitSample]) -> Option<Vec<f64>> {
    let (fit, validation): (Vec<FitSample>, Vec<FitSample>) = samples.iter().map(halves).unzip();
    fit_pooled_selected(
        start.warm.as_ref(),
        &start.initial,
        start.cold || start.warm.is_none(),
        vocab,
        &fit,
        &validation,
        &PoolOptions::default(),
    )
    .map(|s| {
        let rows: usize = samples.iter().map(FitSample::len).sum();
        tracing::info!(rows, chosen = ?s.chosen, scores = ?s.scores, params = ?s.params, "pooled fit: chosen");
        s.params
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use coolgp_data::Standardizer;

    #[test]
    fn a_fit_is_due_at_the_first_points_after_a_quarter_more_and_when_settled() {
        assert!(!due(0.0, 0.0, 0));
        assert!(due(0.0, 10.0, 0));
        assert!(!due(100.0, 124.0, SETTLED_MS - 1));
        assert!(due(100.0, 125.0, 0));
        assert!(due(100.0, 101.0, SETTLED_MS), "settled after growing");
        assert!(
            !due(100.0, 100.0, 10 * SETTLED_MS),
            "settled without growing"
        );
    }

    #[test]
    fn a_peer_s_rows_come_into_this_node_s_units_by_column_name() {
        let scaler = Standardizer {
            mean: vec![1.0, 10.0],
            std: vec![2.0, 5.0],
            y_mean: 3.0,
            y_std: 4.0,
        };
        // The peer lists its columns in another order.
        let rows = OfferedRows {
            columns: vec!["b".into(), "a".into()],
            x: vec![vec![20.0, 5.0], vec![10.0, 1.0]],
            y: vec![8.0, -4.0],
        };
        let inputs = vec!["a".to_string(), "b".to_string()];
        let s = to_sample(&rows, &inputs, Some(&scaler)).expect("sample");
        assert_eq!(s.x(), &[2.0, 2.0, 0.0, 0.0]);
        assert_eq!(s.r(), &[2.0, -1.0], "residuals scale by y_std only");
        let e = to_sample(&rows, &["c".to_string()], None).expect_err("no column c");
        assert!(e.contains("no column 'c'"), "{e}");
    }

    #[test]
    fn bad_sample_replies_are_refused_with_a_reason() {
        assert!(parse_sample(b"[]").unwrap_err().contains("not a sample"));
        let empty = serde_json::to_vec(&PredictReply::default()).expect("json");
        assert!(parse_sample(&empty).unwrap_err().contains("no sample"));
        let ragged = PredictReply {
            fit_sample: Some(OfferedRows {
                columns: vec!["a".into()],
                x: vec![vec![1.0, 2.0]],
                y: vec![0.5],
            }),
            ..PredictReply::default()
        };
        let bytes = serde_json::to_vec(&ragged).expect("json");
        assert!(parse_sample(&bytes)
            .unwrap_err()
            .contains("2 values for 1 columns"));
    }
}
