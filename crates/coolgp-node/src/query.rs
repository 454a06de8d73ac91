//! Predict queries, answered off the round loop.
//!
//! The loop only takes a copy of the model (the [`Agent`], its input columns and the
//! standardization) and a permit; parsing the request, predicting and replying run on other
//! threads. At most [`MAX_CONCURRENT_QUERIES`] run at once (more are refused at once with a
//! "busy" error reply), and one query carries at most [`MAX_QUERY_ROWS`] rows and
//! [`MAX_QUERY_BYTES`] bytes. Fusion rounds therefore keep their period while a large query
//! runs; the reply reflects the model as it was when the query arrived.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use coolgp::faer::Mat;
use coolgp::{Agent, View};
use coolgp_data::Standardizer;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use zenoh::query::Query;

use crate::request::TrialKernelError;
use crate::row_auth::RowPolicy;
use crate::status::{
    AnswerParts, ErrorReply, OfferedRows, PredictReply, PredictRequest, MAX_NEAR_ROWS,
};
use coolgp::local::calibrate::offered_rows;
use coolgp::local::groups::nearest;
use coolgp::local::{FitSample, LocalAnswer};

/// Most rows one predict query may carry.
pub const MAX_QUERY_ROWS: usize = 100_000;
/// Most bytes one predict query may carry.
pub const MAX_QUERY_BYTES: usize = 64 << 20;
/// The reply to a request for raw memory rows from a node that does not share them.
pub const NOT_SHARED: &str = "this node does not send its memory rows (it was started with \
     --local-fit agent; a node with --local-fit fleet, the default, pools rows with the fleet)";

/// Most predict queries computed at once; more are refused as busy.
pub const MAX_CONCURRENT_QUERIES: usize = 2;

/// What a query needs of the node: a copy of the model at the time it arrived.
pub struct QueryModel {
    /// The agent (a clone: the loop goes on changing its own).
    pub agent: Agent,
    /// The agent's input column names, in order.
    pub inputs: Vec<String>,
    /// Fleet-wide standardization, if any.
    pub scaler: Option<Standardizer>,
    /// The node's own predict key, which replies carry (a query may name many agents with a
    /// wildcard, `coolgp query --all`: the reply's key tells the querier who answered).
    pub key: String,
    /// The node's agent id (a routed query names the rows each agent answers).
    pub id: u64,
    /// Who may receive raw memory rows (`held_out`, `fit_sample`): nobody from a node started
    /// with `--local-fit agent`; under `--local-fit fleet` (the default) whoever asks in an
    /// open fleet, a member's signed request with `--tls` ([`crate::row_auth`]).
    pub rows: RowPolicy,
}

/// Counters of predict queries (reported in `status`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueryCounts {
    /// Being computed now.
    pub running: u64,
    /// Answered (with predictions or an error about the request).
    pub answered: u64,
    /// Refused at once because [`MAX_CONCURRENT_QUERIES`] were running.
    pub refused_busy: u64,
}

/// The predict-query runner of a node.
pub struct Queries {
    permits: Arc<Semaphore>,
    limit: usize,
    answered: Arc<AtomicU64>,
    refused: AtomicU64,
}

impl Default for Queries {
    fn default() -> Self {
        Self::new(MAX_CONCURRENT_QUERIES)
    }
}

impl Queries {
    /// A runner computing at most `limit` (≥ 1) queries at once.
    pub fn new(limit: usize) -> Self {
        let limit = limit.max(1);
        Self {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
            answered: Arc::new(AtomicU64::new(0)),
            refused: AtomicU64::new(0),
        }
    }

    /// The counters.
    pub fn counts(&self) -> QueryCounts {
        QueryCounts {
            running: (self.limit - self.permits.available_permits()) as u64,
            answered: self.answered.load(Ordering::Relaxed),
            refused_busy: self.refused.load(Ordering::Relaxed),
        }
    }

    /// A permit to compute one query, `None` (counted as refused) if [`Queries::new`]'s limit
    /// is running; the query counts as running until the permit is dropped.
    pub fn admit(&self) -> Option<OwnedSemaphorePermit> {
        let p = self.permits.clone().try_acquire_owned().ok();
        if p.is_none() {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        p
    }

    /// Called on the loop: refuses `q` at once if busy, else answers it on another thread
    /// with the model `model()` returns (called only when the query is taken).
    pub fn submit(&self, q: Query, model: impl FnOnce() -> QueryModel) {
        let Some(permit) = self.admit() else {
            let error = format!(
                "busy: {} predict queries are running; try again",
                self.limit
            );
            tokio::spawn(async move { reply(q, None, Err(error)).await });
            return;
        };
        let payload = match q.payload() {
            Some(p) if p.len() > MAX_QUERY_BYTES => Err(format!(
                "query of {} bytes exceeds {MAX_QUERY_BYTES}",
                p.len()
            )),
            Some(p) => Ok(p.to_bytes().into_owned()),
            None => Err("empty query: send a JSON body {\"x\": [[...]]}".to_string()),
        };
        let attachment = q.attachment().map(|a| a.to_bytes().into_owned());
        let model = payload.is_ok().then(model);
        let key = model.as_ref().map(|m| m.key.clone());
        let answered = self.answered.clone();
        tokio::spawn(async move {
            let result = match (payload, model) {
                (Ok(bytes), Some(model)) => tokio::task::spawn_blocking(move || {
                    predict(&model, &bytes, attachment.as_deref())
                })
                .await
                .unwrap_or_else(|e| Err(format!("prediction failed: {e}"))),
                (Err(e), _) => Err(e),
                (Ok(_), None) => Err("no model".to_string()),
            };
            match result {
                // Not asked: dropping the query sends zenoh's final reply, nothing else.
                Ok(None) => drop(q),
                Ok(Some(r)) => reply(q, key, Ok(r)).await,
                Err(e) => reply(q, key, Err(e)).await,
            }
            answered.fetch_add(1, Ordering::Relaxed);
            drop(permit);
        });
    }
}

/// Replies to `q` on `key` (the node's predict key; the query's own key if `None`).
async fn reply(q: Query, key: Option<String>, result: std::result::Result<PredictReply, String>) {
    let sent = match result {
        Ok(r) => match serde_json::to_vec(&r) {
            Ok(b) => match key {
                Some(k) => q.reply(k, b).await,
                None => q.reply(q.key_expr().clone(), b).await,
            },
            Err(e) => q.reply_err(e.to_string()).await,
        },
        Err(error) => {
            let body = serde_json::to_vec(&ErrorReply { error }).unwrap_or_default();
            q.reply_err(body).await
        }
    };
    if let Err(e) = sent {
        tracing::debug!(error = %e, "predict reply failed");
    }
}

/// Parses a request body and predicts with `model`, in original units; a request for rows is
/// answered only if `model.rows` admits it with the query's `attachment` ([`RowPolicy::admit`]).
/// `Ok(None)`: a routed request for rows that does not name this agent (issue 31: a pooled
/// fit asks a bounded set of members), which is not answered at all.
///
/// # Errors
/// A message for the client: bad JSON, too many rows, missing columns, ragged rows, an
/// unknown view, a request for rows (or a trial kernel) the node refuses, a trial kernel that
/// is not one for its memory ([`TrialKernelError`]), or the agent's own error.
pub fn predict(
    model: &QueryModel,
    body: &[u8],
    attachment: Option<&[u8]>,
) -> std::result::Result<Option<PredictReply>, String> {
    let req: PredictRequest =
        serde_json::from_slice(body).map_err(|e| format!("bad request JSON: {e}"))?;
    if req.x.len() > MAX_QUERY_ROWS {
        return Err(format!(
            "{} rows exceed the limit of {MAX_QUERY_ROWS}",
            req.x.len()
        ));
    }
    let d = model.inputs.len();
    let idx: Vec<usize> = match &req.columns {
        Some(cols) => model
            .inputs
            .iter()
            .map(|name| {
                cols.iter().position(|c| c == name).ok_or_else(|| {
                    format!("missing input column '{name}' (inputs: {:?})", model.inputs)
                })
            })
            .collect::<std::result::Result<_, _>>()?,
        None => (0..d).collect(),
    };
    let width = req.columns.as_ref().map_or(d, Vec::len);
    if let Some((i, r)) = req.x.iter().enumerate().find(|(_, r)| r.len() != width) {
        return Err(format!("row {i} has {} values, expected {width}", r.len()));
    }
    let mut x = Mat::from_fn(req.x.len(), d, |i, j| req.x[i][idx[j]]);
    if let Some(sc) = &model.scaler {
        sc.apply_x(&mut x).map_err(|e| e.to_string())?;
    }
    let view = match req.view.as_deref().unwrap_or("fused") {
        "fused" => View::Fused,
        "own" => View::Own,
        other => return Err(format!("unknown view '{other}': use fused or own")),
    };
    // A routed request for rows names the agents asked and, for rows near given ones, which
    // of those rows each answers; the others stay silent.
    // A routed query's agent with no row to answer stays silent too (issue 31: a thousand
    // empty replies per routed query).
    let routed = req.route.as_ref().map(|r| r.get(&model.id));
    let for_rows = req.held_out.is_some() || req.fit_sample.is_some() || req.near.is_some();
    let no_rows = !for_rows && matches!(routed, Some(Some(rows)) if rows.is_empty());
    if matches!(routed, Some(None)) || no_rows {
        return Ok(None);
    }
    // A trial kernel is admitted as a request for rows is: under a kernel of the asker's
    // choice the answers can tell more of the memory than under the agent's own, and each
    // costs a refactor.
    if for_rows || req.trial.is_some() {
        admit_rows(model, body, attachment)?;
    }
    let trial = trial_model(model, &req)?;
    let model = trial.as_ref().unwrap_or(model);
    if let Some(k) = req.held_out {
        return held_out(model, k.min(MAX_QUERY_ROWS), view).map(Some);
    }
    if let Some(k) = req.fit_sample {
        return fit_sample(model, k.min(MAX_QUERY_ROWS)).map(Some);
    }
    // A routed query (`coolgp query --all --route K`) or request for rows near given ones:
    // only the rows listed for this agent.
    if let Some(rows) = routed {
        let rows = rows.map_or(&[][..], Vec::as_slice);
        if let Some(&r) = rows.iter().find(|&&r| r >= x.nrows()) {
            return Err(format!(
                "route: row {r} past the query's {} rows",
                x.nrows()
            ));
        }
        x = Mat::from_fn(rows.len(), d, |i, j| x[(rows[i], j)]);
    }
    if let Some(near) = &req.near {
        let scale: Vec<f64> = idx
            .iter()
            .map(|&c| near.scale.get(c).copied().unwrap_or(f64::NAN))
            .collect();
        return near_rows(model, x.as_ref(), &scale, near.k.min(MAX_NEAR_ROWS)).map(Some);
    }
    // The global fused model and, with a local memory, its residual GP's correction.
    let answers = model
        .agent
        .local_answers(x.as_ref(), view)
        .map_err(|e| e.to_string())?;
    Ok(Some(reply_of(&answers, model.scaler.as_ref(), req.parts)))
}

/// `Ok` if `model.rows` admits a request for rows with query body `body` and `attachment`
/// ([`RowPolicy::admit`]); the refusal (logged) otherwise.
fn admit_rows(
    model: &QueryModel,
    body: &[u8],
    attachment: Option<&[u8]>,
) -> std::result::Result<(), String> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let Err(e) = model.rows.admit(body, attachment, now_ms) else {
        return Ok(());
    };
    if e == crate::row_auth::RowRequestError::NotShared {
        tracing::debug!(error = %e, "a request for memory rows refused");
    } else {
        tracing::warn!(error = %e, "a request for memory rows refused");
    }
    Err(e.to_string())
}

/// With `req.trial`, a copy of `model` whose agent answers under that kernel
/// ([`crate::request::TrialKernel::applied`]: checked, one refactor of the copy's memory); `None` without.
///
/// # Errors
/// The trial kernel's refusal ([`TrialKernelError`]), also on a request for rows.
fn trial_model(
    model: &QueryModel,
    req: &PredictRequest,
) -> std::result::Result<Option<QueryModel>, String> {
    let Some(t) = &req.trial else {
        return Ok(None);
    };
    if req.fit_sample.is_some() || req.near.is_some() {
        return Err(TrialKernelError::ForRows.to_string());
    }
    let agent = t.applied(&model.agent).map_err(|e| e.to_string())?;
    Ok(Some(QueryModel {
        agent,
        inputs: model.inputs.clone(),
        scaler: model.scaler.clone(),
        key: model.key.clone(),
        id: model.id,
        rows: model.rows.clone(),
    }))
}

/// The fused answers at `rows` (original units, in the model's input order): the global
/// fused model and, with a local memory, its residual GP's correction; a map's points.
///
/// # Errors
/// A row of the wrong width, or the agent's own error.
pub fn predict_rows(
    model: &QueryModel,
    rows: &[Vec<f64>],
) -> std::result::Result<PredictReply, String> {
    let d = model.inputs.len();
    if let Some(r) = rows.iter().find(|r| r.len() != d) {
        return Err(format!("a row has {} values, expected {d}", r.len()));
    }
    let mut x = Mat::from_fn(rows.len(), d, |i, j| rows[i][j]);
    if let Some(sc) = &model.scaler {
        sc.apply_x(&mut x).map_err(|e| e.to_string())?;
    }
    let answers = model
        .agent
        .local_answers(x.as_ref(), View::Fused)
        .map_err(|e| e.to_string())?;
    Ok(reply_of(&answers, model.scaler.as_ref(), false))
}

/// Up to `k` of the agent's memory rows ([`offered_rows`]) in original units and its
/// leave-one-out answers there, with their parts (docs/LOCAL.md §10).
///
/// # Errors
/// The agent's own error (e.g. a memory that cannot be factored).
fn held_out(model: &QueryModel, k: usize, view: View) -> std::result::Result<PredictReply, String> {
    let a = &model.agent;
    let rows = offered_rows(a.local_points(), k);
    let h = a.local_held_out(&rows, view).map_err(|e| e.to_string())?;
    let sc = model.scaler.as_ref();
    let x = (0..h.y.len())
        .map(|r| {
            (0..h.x.ncols())
                .map(|j| unscale_x(sc, j, h.x[(r, j)]))
                .collect()
        })
        .collect();
    let y =
        h.y.iter()
            .map(|&v| sc.map_or(v, |s| s.unscale_y(v)))
            .collect();
    let mut reply = reply_of(&h.answers, sc, true);
    reply.held_out = Some(OfferedRows {
        columns: model.inputs.clone(),
        x,
        y,
    });
    Ok(reply)
}

/// Input `j`'s standardized value `v` in original units.
fn unscale_x(sc: Option<&Standardizer>, j: usize, v: f64) -> f64 {
    sc.map_or(v, |s| s.mean[j] + s.std[j] * v)
}

/// The pooled fit's sample of the agent ([`Agent::local_fit_sample`]: up to `k` evenly spaced
/// memory rows and their residuals against its global mean) in original units: inputs
/// unstandardized, residuals times y's standard deviation (docs/LOCAL.md §9).
///
/// # Errors
/// The agent's own error.
fn fit_sample(model: &QueryModel, k: usize) -> std::result::Result<PredictReply, String> {
    let s = model.agent.local_fit_sample(k).map_err(|e| e.to_string())?;
    Ok(PredictReply {
        fit_sample: Some(offered(model, &s)),
        ..PredictReply::default()
    })
}

/// The fit on neighbourhood groups' request (docs/LOCAL.md §11): for each row of `x` (this
/// agent's standardized units), the `k` memory rows nearest to it in the metric whose scale
/// per input, in original units, is `scale`, with their residuals; in original units (as
/// [`fit_sample`]), `k` rows per row of `x` in its order (fewer only with fewer memory rows).
///
/// # Errors
/// A scale that is not finite and positive; the agent's own error.
fn near_rows(
    model: &QueryModel,
    x: coolgp::faer::MatRef<'_, f64>,
    scale: &[f64],
    k: usize,
) -> std::result::Result<PredictReply, String> {
    if let Some(j) = scale.iter().position(|s| !(s.is_finite() && *s > 0.0)) {
        return Err(format!(
            "near: the scale of input '{}' must be finite and positive",
            model.inputs.get(j).map_or("?", String::as_str)
        ));
    }
    let sc = model.scaler.as_ref();
    // x_std = (x − mean)/std, so (Δx/scale)² = (Δx_std · std/scale)².
    let inv: Vec<f64> = scale
        .iter()
        .enumerate()
        .map(|(j, s)| sc.map_or(1.0, |c| c.std[j]) / s)
        .collect();
    let mem = model.agent.local().memory();
    let d = mem.d();
    let mut rows = Vec::with_capacity(x.nrows() * k);
    let mut q = vec![0.0; d];
    for i in 0..x.nrows() {
        q.iter_mut().enumerate().for_each(|(j, v)| *v = x[(i, j)]);
        rows.extend(nearest(mem.x(), d, &q, &inv, k).into_iter().map(|(_, r)| r));
    }
    let s = model
        .agent
        .local_fit_rows(&rows)
        .map_err(|e| e.to_string())?;
    Ok(PredictReply {
        fit_sample: Some(offered(model, &s)),
        ..PredictReply::default()
    })
}

/// A sample in this agent's standardized units as offered rows in original units: inputs
/// unstandardized, residuals times y's standard deviation.
fn offered(model: &QueryModel, s: &FitSample) -> OfferedRows {
    let (d, sc) = (s.d(), model.scaler.as_ref());
    let x = (0..s.len())
        .map(|i| (0..d).map(|j| unscale_x(sc, j, s.x()[i * d + j])).collect())
        .collect();
    let y = s
        .r()
        .iter()
        .map(|&r| sc.map_or(r, |c| r * c.y_std))
        .collect();
    OfferedRows {
        columns: model.inputs.clone(),
        x,
        y,
    }
}

/// `answers` in original units (the standardization undone): the reply's mean and variances,
/// and with `parts` each answer's parts (means shifted and scaled by y's standard deviation,
/// the residual mean only scaled, variances scaled by its square).
pub fn reply_of(
    answers: &[LocalAnswer],
    scaler: Option<&Standardizer>,
    parts: bool,
) -> PredictReply {
    let (unscale, s) = match scaler {
        Some(sc) => (Some(sc), sc.y_std),
        None => (None, 1.0),
    };
    let v = s * s;
    let mean = |a: &LocalAnswer| unscale.map_or(a.mean(), |sc| sc.unscale_y(a.mean()));
    let parts = parts.then(|| {
        let original: Vec<LocalAnswer> = answers
            .iter()
            .map(|a| LocalAnswer {
                global_mean: unscale.map_or(a.global_mean, |sc| sc.unscale_y(a.global_mean)),
                global_var: a.global_var * v,
                residual_mean: a.residual_mean * s,
                residual_var: a.residual_var * v,
                residual_prior: a.residual_prior * v,
                noise_var: a.noise_var * v,
            })
            .collect();
        AnswerParts::from_answers(&original)
    });
    PredictReply {
        mean: answers.iter().map(mean).collect(),
        var_f: answers.iter().map(|a| a.var_f() * v).collect(),
        var_y: answers.iter().map(|a| a.var_y() * v).collect(),
        parts,
        held_out: None,
        fit_sample: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_the_limit_run_at_once() {
        let q = Queries::new(2);
        let a = q.admit().expect("first");
        let b = q.admit().expect("second");
        assert!(q.admit().is_none(), "a third while two run");
        assert_eq!(
            q.counts(),
            QueryCounts {
                running: 2,
                answered: 0,
                refused_busy: 1
            }
        );
        drop(a);
        let c = q.admit().expect("a slot is free again");
        assert_eq!(q.counts().running, 2);
        drop((b, c));
        assert_eq!(q.counts().running, 0);
    }
}
