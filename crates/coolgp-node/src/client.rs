//! One-shot clients: `coolgp query` and `coolgp status` (and the tools and tests that reuse
//! [`open`] or [`BlockingClient`]), open or as the `reader` of a TLS fleet.

use std::time::{Duration, Instant};
use zenoh::qos::CongestionControl;

use crate::config::ZenohArgs;
use crate::error::{NodeError, Result};
use crate::keys;
use crate::status::{ErrorReply, PredictReply, PredictRequest, Status};
use crate::transport::{self, Role};

/// How long one attempt waits for a reply; the call retries until its deadline (a fresh
/// session may not yet know the queryable's route).
const ATTEMPT: Duration = Duration::from_millis(1500);

/// Sends a query to `selector` and returns the first reply's payload, retrying until
/// `timeout`.
///
/// # Errors
/// [`NodeError::NoReply`] after the deadline, [`NodeError::Remote`] if the node answered
/// with an error.
pub async fn get(
    session: &zenoh::Session,
    selector: &str,
    payload: Option<Vec<u8>>,
    timeout: Duration,
) -> Result<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let attempt = ATTEMPT.min(left).max(Duration::from_millis(100));
        // Droppable (the reply too: it takes the query's): a full link drops the query, which
        // times out and is asked again, instead of blocking the runtime thread that sends it
        // (issue 31: a host's threads all blocked on full links, and with them every agent).
        let mut b = session
            .get(selector)
            .congestion_control(CongestionControl::Drop)
            .timeout(attempt);
        if let Some(p) = &payload {
            b = b.payload(p.clone());
        }
        let replies = b.await.map_err(|e| NodeError::zenoh("sending query", e))?;
        if let Ok(reply) = replies.recv_async().await {
            match reply.result() {
                Ok(sample) => return Ok(sample.payload().to_bytes().into_owned()),
                Err(err) => {
                    let bytes = err.payload().to_bytes();
                    let message = serde_json::from_slice::<ErrorReply>(&bytes)
                        .map(|e| e.error)
                        .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned());
                    return Err(NodeError::Remote {
                        key: selector.into(),
                        message,
                    });
                }
            }
        }
        if Instant::now() >= deadline {
            return Err(NodeError::NoReply {
                key: selector.into(),
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Fetches an agent's status.
///
/// # Errors
/// As [`get`], or [`NodeError::Remote`] for a reply that is not a status document.
pub async fn fetch_status(
    session: &zenoh::Session,
    fleet: &str,
    agent: u64,
    with_fused: bool,
    timeout: Duration,
) -> Result<Status> {
    let key = keys::status(fleet, agent);
    let selector = if with_fused {
        format!("{key}?fused=true")
    } else {
        key.clone()
    };
    let bytes = get(session, &selector, None, timeout).await?;
    serde_json::from_slice(&bytes).map_err(|e| NodeError::Remote {
        key,
        message: format!("not a status document: {e}"),
    })
}

/// Fetches an agent's own excess `E_i` alone (`status?own`: what the member check reads of
/// its peers, without the rest of the status).
///
/// # Errors
/// As [`get`], or [`NodeError::Remote`] for a reply that is not an excess document.
pub async fn fetch_own(
    session: &zenoh::Session,
    fleet: &str,
    agent: u64,
    timeout: Duration,
) -> Result<crate::status::ExcessJson> {
    let key = keys::status(fleet, agent);
    let bytes = get(session, &format!("{key}?own=true"), None, timeout).await?;
    serde_json::from_slice(&bytes).map_err(|e| NodeError::Remote {
        key,
        message: format!("not an excess document: {e}"),
    })
}

/// Asks an agent for predictions at `req`.
///
/// # Errors
/// As [`get`].
pub async fn fetch_predictions(
    session: &zenoh::Session,
    fleet: &str,
    agent: u64,
    req: &PredictRequest,
    timeout: Duration,
) -> Result<PredictReply> {
    let key = keys::predict(fleet, agent);
    let body = serde_json::to_vec(req).map_err(|e| NodeError::Config(e.to_string()))?;
    let bytes = get(session, &key, Some(body), timeout).await?;
    serde_json::from_slice(&bytes).map_err(|e| NodeError::Remote {
        key,
        message: format!("not a prediction document: {e}"),
    })
}

/// Opens a client session (peer mode, never listening unless `--listen`); with `--tls DIR`
/// it connects over mutual TLS as the fleet's `reader` (`DIR/reader.pem`, `DIR/reader.key`).
///
/// # Errors
/// [`NodeError::Zenoh`].
pub async fn open(z: &ZenohArgs) -> Result<zenoh::Session> {
    transport::open(z, Role::Client).await
}

/// Formats predictions as the CSV that `coolgp query` prints (`mean,var_f,var_y`, one header;
/// with the answers' parts, their six columns after these).
pub fn predictions_csv(p: &PredictReply) -> String {
    let mut out = String::from("mean,var_f,var_y");
    if p.parts.is_some() {
        out.push_str(",global_mean,global_var,residual_mean,residual_var,residual_prior,noise_var");
    }
    out.push('\n');
    for (i, ((m, f), y)) in p.mean.iter().zip(&p.var_f).zip(&p.var_y).enumerate() {
        out.push_str(&format!("{m},{f},{y}"));
        if let Some(q) = &p.parts {
            let cols = [
                &q.global_mean,
                &q.global_var,
                &q.residual_mean,
                &q.residual_var,
                &q.residual_prior,
                &q.noise_var,
            ];
            for c in cols {
                match c.get(i) {
                    Some(v) => out.push_str(&format!(",{v}")),
                    None => out.push(','),
                }
            }
        }
        out.push('\n');
    }
    out
}

/// A client session with its own small runtime, for synchronous programs, tools and tests.
pub struct BlockingClient {
    rt: tokio::runtime::Runtime,
    session: Option<zenoh::Session>,
}

impl BlockingClient {
    /// Opens a client session (see [`open`]).
    ///
    /// # Errors
    /// [`NodeError::Zenoh`] or [`NodeError::Io`] if the runtime cannot start.
    pub fn connect(z: &ZenohArgs) -> Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| NodeError::io("starting the async runtime", "", e))?;
        let session = rt.block_on(open(z))?;
        Ok(Self {
            rt,
            session: Some(session),
        })
    }

    /// The zenoh session (e.g. to publish or subscribe directly).
    ///
    /// # Panics
    /// Never: the session lives as long as the client.
    pub fn session(&self) -> &zenoh::Session {
        self.session
            .as_ref()
            .expect("the session lives as long as the client")
    }

    /// Runs a future on the client's runtime.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// As [`fetch_status`].
    ///
    /// # Errors
    /// As [`fetch_status`].
    pub fn status(
        &self,
        fleet: &str,
        agent: u64,
        with_fused: bool,
        timeout: Duration,
    ) -> Result<Status> {
        self.rt.block_on(fetch_status(
            self.session(),
            fleet,
            agent,
            with_fused,
            timeout,
        ))
    }

    /// As [`fetch_predictions`].
    ///
    /// # Errors
    /// As [`fetch_predictions`].
    pub fn predict(
        &self,
        fleet: &str,
        agent: u64,
        req: &PredictRequest,
        timeout: Duration,
    ) -> Result<PredictReply> {
        self.rt.block_on(fetch_predictions(
            self.session(),
            fleet,
            agent,
            req,
            timeout,
        ))
    }
}

impl Drop for BlockingClient {
    fn drop(&mut self) {
        if let Some(s) = self.session.take() {
            let _ = self.rt.block_on(async { s.close().await });
        }
    }
}
