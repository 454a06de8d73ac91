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
    /// Summaries that could not be computed (dPITC's `Λ_b` did not factor): never uploaded,
    /// counted apart from the network's losses.
    pub failed: usize,
}

/// What became of one baseline's batch summaries (`summary.json`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Uploads {
    /// Summaries the server received.
    pub arrived: usize,
    /// Summaries lost by the network.
    pub lost: usize,
    /// Summaries that could not be computed (dPITC: `Λ_b` not positive definite).
    pub failed: usize,
}

impl Server {
    /// An empty server.
    pub fn new(which: Baseline, m: usize) -> Self {
        Self {
            which,
            received: Excess::zeros(m),
            arrived: 0,
            lost: 0,
            failed: 0,
        }
    }

    /// The upload counters.
    pub fn uploads(&self) -> Uploads {
        Uploads {
            arrived: self.arrived,
            lost: self.lost,
            failed: self.failed,
        }
    }

    /// Uploads the summaries of `batches` (each lost with probability `loss`; one that cannot
    /// be computed counts as `failed`, not as lost).
    pub fn upload(
        &mut self,
        vocab: &Vocabulary,
        kern: &BaselineKernel,
        batches: &[&Batch],
        loss: f64,
        rng: &mut Rng,
    ) {
        for b in batches {
            // The coin is drawn first, for every batch, so the loss pattern does not depend
            // on which summaries fail.
            let lost = loss > 0.0 && rng.uniform() < loss;
            match kern.local_summary(vocab, self.which, b.x.as_ref(), &b.y) {
                Err(_) => self.failed += 1,
                Ok(_) if lost => self.lost += 1,
                Ok(e) => {
                    self.arrived += 1;
                    self.received = sum_excess(vocab.m(), [&self.received, &e]);
                }
            }
        }
    }

    /// The server model `(Σ̈, ÿ)`.
    pub fn model(&self, vocab: &Vocabulary) -> NaturalParams {
        NaturalParams::from_excess(vocab, &self.received)
    }
}

/// What [`replay`] returns: the curve, the final RMSE and the upload counters.
pub(crate) type Replay = (Vec<Option<f64>>, Option<f64>, Uploads);

/// One baseline replayed over the run's stream (in the run's order, fused every `chunk`
/// batches): its RMSE on the test sets (each capped at `curve_points`) after each chunk, and on
/// the whole test sets at the end (standardized units), and the upload counters.
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
) -> Replay {
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
    (curve, fin, server.uploads())
}

#[cfg(test)]
mod tests {
    use super::*;
    use coolgp::faer::Mat;

    #[test]
    fn failed_summaries_are_counted_apart_from_lost_uploads() {
        // dPITC's Λ_b = k_ff + σ_n²I − K_bU K⁻¹ K_Ub with σ_n = 0 and a batch whose rows are
        // all equal is singular (rank one), so its summary cannot be computed: that is a
        // failure of the baseline, not a network loss (spec §8's loss model).
        let vocab = Vocabulary::default_design(5, 2, 1).expect("design");
        let kern = |sigma_n: f64| BaselineKernel {
            w0: Mat::from_fn(2, 2, |i, j| if i == j { 1.0 } else { 0.0 }),
            sigma_s: 1.0,
            sigma_n,
        };
        let same = Batch {
            group: None,
            x: Mat::from_fn(4, 2, |_, j| 0.3 + j as f64),
            y: vec![1.0; 4],
        };
        let varied = Batch {
            group: None,
            x: Mat::from_fn(4, 2, |i, j| 0.3 * i as f64 - j as f64),
            y: vec![1.0, 0.5, 0.0, -0.5],
        };
        let batches = [&same, &varied, &same];
        let mut rng = Rng::new(1, 1);
        let mut server = Server::new(Baseline::Dpitc, vocab.m());
        server.upload(&vocab, &kern(0.0), &batches, 0.0, &mut rng);
        assert_eq!(
            server.uploads(),
            Uploads {
                arrived: 1,
                lost: 0,
                failed: 2
            }
        );
        // With noise every summary is computed and arrives.
        let mut server = Server::new(Baseline::Dpitc, vocab.m());
        server.upload(&vocab, &kern(0.1), &batches, 0.0, &mut rng);
        assert_eq!(server.uploads().arrived, 3);
        // dDTC needs no factorization: the same batches all arrive.
        let mut server = Server::new(Baseline::Ddtc, vocab.m());
        server.upload(&vocab, &kern(0.0), &batches[..2], 0.0, &mut rng);
        assert_eq!(server.uploads().failed, 0);
    }
}
