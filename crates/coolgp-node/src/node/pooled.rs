//! `--local-fit fleet` on a node: after a round, when the fused model has grown by
//! [`crate::pooled_fit::POOL_GROWTH`] since the last pooled fit ([`due`]), the node gathers every node's memory
//! sample and fits the residual kernel on them ([`crate::pooled_fit`]) on other threads; a
//! later round applies the result. One fit at a time.

use std::sync::Arc;

use coolgp::local::pool::{cold_due, COLD_GROWTH};
use coolgp::local::PoolOptions;
use coolgp::local::{LocalFit, ResidualKernel, ResidualKind};
use coolgp::Vocabulary;
use tokio::sync::oneshot;

use super::Node;
use crate::pooled_fit::{due, fetch_samples, fit, to_sample, Start, SAMPLE_TIMEOUT};

/// The pooled fit's state on a node.
pub(super) struct Pooled {
    /// The agents' initial kernel (the cold start).
    initial: ResidualKernel,
    /// Fused points at the last pooled fit started (0: none yet in this process).
    last_points: f64,
    /// Pooled fits applied by this process (status `local_pooled_fits`).
    pub(super) fits: u64,
    /// The running fit's result, if one runs.
    pending: Option<oneshot::Receiver<Option<Vec<f64>>>>,
}

impl Pooled {
    /// The state for `agent`'s node, `None` unless its memory is on with a learned kernel
    /// fitted by the fleet.
    pub(super) fn for_agent(agent: &coolgp::Agent) -> Option<Self> {
        let local = agent.config().local;
        let on = local.is_on() && local.fit == LocalFit::Fleet;
        (on && local.kernel == ResidualKind::Learned).then(|| Self {
            initial: ResidualKernel::initial(ResidualKind::Learned, agent.projection()),
            last_points: 0.0,
            fits: 0,
            pending: None,
        })
    }
}

impl Node {
    /// Applies a finished pooled fit; starts one when due (module doc).
    pub(super) fn pooled_fit_step(&mut self, session: &zenoh::Session) {
        let Some(p) = self.pooled.as_mut() else {
            return;
        };
        if let Some(rx) = p.pending.as_mut() {
            match rx.try_recv() {
                Err(oneshot::error::TryRecvError::Empty) => return,
                Err(oneshot::error::TryRecvError::Closed) => p.pending = None,
                Ok(result) => {
                    p.pending = None;
                    if let Some(params) = result {
                        match self.agent.set_local_kernel_params(&params) {
                            Ok(()) => {
                                p.fits += 1;
                                tracing::info!(?params, "pooled fit of the residual kernel");
                            }
                            Err(e) => tracing::warn!(error = %e, "pooled fit not applied"),
                        }
                    }
                }
            }
        }
        let now = self.agent.fleet_points();
        if !due(p.last_points, now) || self.agent.local_points() == 0 {
            return;
        }
        let first = self.agent.local().fit_state().0 == 0;
        let start = Start {
            warm: (!first).then(|| self.agent.local().kernel().clone()),
            initial: p.initial.clone(),
            cold: cold_due(p.last_points as u64, now as u64, COLD_GROWTH),
        };
        p.last_points = now;
        let members = self.peers.members.lock().map_or(1, |m| m.len()).max(1);
        let k = 2 * PoolOptions::default().rows.div_ceil(members);
        let (tx, rx) = oneshot::channel();
        p.pending = Some(rx);
        let job = Job {
            session: session.clone(),
            fleet: self.s.fleet.clone(),
            inputs: self.inputs.layout.inputs.clone(),
            scaler: self.inputs.scaler.clone(),
            vocab: self.agent.vocabulary().clone(),
            start,
        };
        tokio::spawn(async move {
            let _ = tx.send(job.run(k).await);
        });
    }
}

/// One pooled fit, off the loop.
struct Job {
    session: zenoh::Session,
    fleet: String,
    inputs: Vec<String>,
    scaler: Option<coolgp_data::Standardizer>,
    vocab: Arc<Vocabulary>,
    start: Start,
}

impl Job {
    /// Gathers the samples (`k` rows asked of each node), converts them, fits on a blocking
    /// thread; `None` if nothing could be fitted.
    async fn run(self, k: usize) -> Option<Vec<f64>> {
        let (rows, dropped) = fetch_samples(&self.session, &self.fleet, k, SAMPLE_TIMEOUT).await;
        for (peer, why) in dropped {
            tracing::warn!(%peer, %why, "pooled fit: sample dropped");
        }
        let samples: Vec<_> = rows
            .iter()
            .filter_map(
                |(id, r)| match to_sample(r, &self.inputs, self.scaler.as_ref()) {
                    Ok(s) => Some(s),
                    Err(why) => {
                        tracing::warn!(agent = id, %why, "pooled fit: sample left out");
                        None
                    }
                },
            )
            .collect();
        tokio::task::spawn_blocking(move || fit(&self.start, &self.vocab, &samples))
            .await
            .ok()
            .flatten()
    }
}
