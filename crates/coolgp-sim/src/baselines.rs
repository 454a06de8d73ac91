//! The server-based references of spec §8 run over the same stream: each batch summary is
//! uploaded once and lost with probability `loss`; the server sums what arrives.

use coolgp::baselines::{Baseline, BaselineKernel};
use coolgp::fuse::sum_excess;
use coolgp::model::Excess;
use coolgp::rng::Rng;
use coolgp::{NaturalParams, Vocabulary};

use crate::eval::{mean_over, server_rmse};
use crate::workload::{Batch, Workload};

/// The server's running sums for one baseline.
#[derive(Clone, Debug)]
pub struct Server {
    /// Which baseline.
    pub which: Baseline,
    /// Σ of received summaries.
    pub received: Excess,
    /// Summaries received.
    pub arrived: usize,
    /// Summaries lost on upload.
    pub lost: usize,
}

impl Server {
    /// An empty server.
    pub fn new(which: Baseline, m: usize) -> Self {
        Self {
            which,
            received: Excess::zeros(m),
            arrived: 0,
            lost: 0,
        }
    }

    /// Uploads the summaries of `batches` (each lost with probability `loss`).
    pub fn upload(
        &mut self,
        vocab: &Vocabulary,
        kern: &BaselineKernel,
        batches: &[&Batch],
        loss: f64,
        rng: &mut Rng,
    ) {
        let summaries: Vec<Option<Excess>> = batches
            .iter()
            .map(|b| {
                let lost = loss > 0.0 && rng.uniform() < loss;
                if lost {
                    None
                } else {
                    kern.local_summary(vocab, self.which, b.x.as_ref(), &b.y)
                        .ok()
                }
            })
            .collect();
        for s in summaries {
            match s {
                Some(e) => {
                    self.arrived += 1;
                    self.received = sum_excess(vocab.m(), [&self.received, &e]);
                }
                None => self.lost += 1,
            }
        }
    }

    /// The server model `(Σ̈, ÿ)`.
    pub fn model(&self, vocab: &Vocabulary) -> NaturalParams {
        NaturalParams::from_excess(vocab, &self.received)
    }
}

/// One baseline replayed over the run's stream (in the run's order, fused every `chunk`
/// batches): its RMSE on the test sets (each capped at `curve_points`) after each chunk, and on
/// the whole test sets at the end (standardized units).
#[allow(clippy::too_many_arguments)]
pub(crate) fn replay(
    which: Baseline,
    kern: &BaselineKernel,
    vocab: &Vocabulary,
    work: &Workload,
    order: &[usize],
    chunk: usize,
    loss: f64,
    curve_points: usize,
    mut rng: Rng,
) -> (Vec<Option<f64>>, Option<f64>) {
    let mut server = Server::new(which, vocab.m());
    let mut curve = Vec::new();
    for part in order.chunks(chunk.max(1)) {
        let bs: Vec<&Batch> = part.iter().map(|&b| &work.batches[b]).collect();
        server.upload(vocab, kern, &bs, loss, &mut rng);
        let beta = kern.mean_weights(&server.model(vocab)).ok();
        curve.push(Some(mean_over(&work.tests, curve_points, |x, y| {
            server_rmse(vocab, kern, beta.as_deref(), x, y)
        })));
    }
    let beta = kern.mean_weights(&server.model(vocab)).ok();
    let fin = Some(mean_over(&work.tests, usize::MAX, |x, y| {
        server_rmse(vocab, kern, beta.as_deref(), x, y)
    }));
    (curve, fin)
}
