//! What agents send each other, and how a receiver validates it (spec §7, §9).

use std::fmt;
use std::sync::Arc;

pub use crate::error::RejectReason;
use crate::fuse::Mass;
use crate::learn::Sites;
use crate::linalg::{max_abs, Cholesky};
use crate::model::{Excess, Fingerprint, Vocabulary};

/// An agent's identity within its fleet.
pub type AgentId = u64;

/// The header every message carries.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// Fingerprint of the sender's vocabulary.
    pub fingerprint: Fingerprint,
    /// Sender.
    pub sender: AgentId,
    /// Intended receiver.
    pub receiver: AgentId,
    /// Sender's round counter (strictly increasing per sender; replays are stale).
    pub round: u64,
    /// Sender's data version (bumped on every block it absorbs).
    pub version: u64,
}

/// The fleet-wide projection sums carried in `shared` projection mode (spec §13): with
/// weights `N_i` (own points), `Σ N_i`, `Σ N_i θ_i` and the Adam moments likewise.
#[derive(Clone, Debug, PartialEq)]
pub struct ProjectionShare {
    /// `Σ N_i`.
    pub weight: f64,
    /// `Σ N_i θ_i`.
    pub theta: Vec<f64>,
    /// `Σ N_i m1_i`.
    pub m1: Vec<f64>,
    /// `Σ N_i m2_i`.
    pub m2: Vec<f64>,
}

impl ProjectionShare {
    /// True for sums of `n` parameters each (θ and both moments), finite, with a
    /// non-negative weight and non-negative second moments (spec §9).
    pub fn is_valid(&self, n: usize) -> bool {
        self.theta.len() == n
            && self.m1.len() == n
            && self.m2.len() == n
            && self.weight.is_finite()
            && self.weight >= 0.0
            && self
                .theta
                .iter()
                .chain(&self.m1)
                .chain(&self.m2)
                .all(|v| v.is_finite())
            && self.m2.iter().all(|v| *v >= 0.0)
    }

    /// `self += other` (same length).
    pub fn add_in_place(&mut self, o: &ProjectionShare) {
        self.weight += o.weight;
        for (a, b) in self.theta.iter_mut().zip(&o.theta) {
            *a += b;
        }
        for (a, b) in self.m1.iter_mut().zip(&o.m1) {
            *a += b;
        }
        for (a, b) in self.m2.iter_mut().zip(&o.m2) {
            *a += b;
        }
    }
}

/// The payload.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// Tree message passing: `D_ij = E_i + Σ_{k≠j} D_ki` and the data points it represents.
    Tree {
        /// The excess D_ij (shared: re-sending an unchanged message copies no matrix).
        excess: Arc<Excess>,
        /// Data points represented in `excess`.
        points: f64,
    },
    /// Running-sum push-sum: the sender's cumulative total σ_j.
    PushSum {
        /// Running total (x, ω, points).
        total: Mass,
    },
    /// Only the fleet projection's site sums (spec §14), which travel more often than q(u):
    /// [`Message::sites`] is required and q(u) is untouched at the receiver.
    Site,
}

/// One message from `header.sender` to `header.receiver`.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// Header.
    pub header: Header,
    /// Payload.
    pub body: Body,
    /// Projection sums (shared projection mode only).
    pub projection: Option<ProjectionShare>,
    /// Site sums of the fleet's q(W) per projection group (fleet projection mode only):
    /// under the tree rule the sums over the sender's side of the edge, under push-sum the
    /// running total of site mass.
    pub sites: Option<Sites>,
}

impl Message {
    /// The excess part of the payload (`None` for a site-only message).
    pub fn excess(&self) -> Option<&Excess> {
        match &self.body {
            Body::Tree { excess, .. } => Some(excess),
            Body::PushSum { total } => Some(&total.x),
            Body::Site => None,
        }
    }
}

impl fmt::Display for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}→{} round {} v{} [{}]",
            self.sender,
            self.receiver,
            self.round,
            self.version,
            self.fingerprint.short()
        )
    }
}

/// Largest `σ_s²/σ_n²` a plausible sender may have; bounds `tr(D1) ≤ points · m · ratio`.
pub const MAX_SIGNAL_TO_NOISE: f64 = 1e8;

/// `max |A − Aᵀ|`, compared in 16×16 tiles so the transposed reads stay in cache.
fn max_asymmetry(a: &faer::Mat<f64>) -> f64 {
    const B: usize = 16;
    let m = a.nrows();
    let mut worst: f64 = 0.0;
    for jb in (0..m).step_by(B) {
        for ib in (jb..m).step_by(B) {
            for j in jb..(jb + B).min(m) {
                let cj = a.col_as_slice(j);
                let lo = ib.max(j + 1);
                let hi = (ib + B).min(m);
                for (i, v) in cj.iter().enumerate().take(hi).skip(lo) {
                    worst = worst.max((v - a.col_as_slice(i)[j]).abs());
                }
            }
        }
    }
    worst
}

/// Validates an excess against the vocabulary (spec §9, checks 2–6).
///
/// # Errors
/// The first failed check.
pub fn validate_excess(vocab: &Vocabulary, e: &Excess, points: f64) -> Result<(), RejectReason> {
    let m = vocab.m();
    if e.d1.nrows() != m || e.d1.ncols() != m || e.d2.len() != m {
        return Err(RejectReason::Shape {
            expected: m,
            found: e.d2.len(),
        });
    }
    if !points.is_finite() {
        return Err(RejectReason::NonFinite);
    }
    if points < 0.0 {
        return Err(RejectReason::Implausible("negative point count"));
    }
    if e.d2.iter().any(|v| !v.is_finite()) {
        return Err(RejectReason::NonFinite);
    }
    if (0..m).any(|j| e.d1.col_as_slice(j).iter().any(|v| !v.is_finite())) {
        return Err(RejectReason::NonFinite);
    }
    let asym = max_asymmetry(&e.d1);
    let scale = max_abs(e.d1.as_ref()).max(1.0);
    if asym > 1e-9 * scale {
        return Err(RejectReason::Asymmetric(asym));
    }
    let trace: f64 = (0..m).map(|i| e.d1[(i, i)]).sum();
    if trace > points.max(1.0) * m as f64 * MAX_SIGNAL_TO_NOISE {
        return Err(RejectReason::Implausible(
            "trace of D1 exceeds points·m·max SNR",
        ));
    }
    // λ_min(D1) ≥ −τ  ⇔  D1 + τI ≻ 0 (up to the boundary), τ = 1e-8·max(1, max|D1|).
    let tau = 1e-8 * scale;
    let mut shifted = e.d1.clone();
    for i in 0..m {
        shifted[(i, i)] += tau;
    }
    if Cholesky::new(shifted.as_ref(), "D1 + τI").is_err() {
        return Err(RejectReason::NotPsd);
    }
    Ok(())
}
