//! JSON documents of the `status` and `predict` queryables (stable field names; the Python
//! example and `coolgp status` read them).

use std::collections::BTreeMap;

use coolgp::model::Projection;
use coolgp::Excess;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::checkpoint::ModelIdentity;

/// An excess `D = (D1, D2)` in JSON: the upper triangle of D1 row by row (as on the wire),
/// D2, and the data points it represents.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExcessJson {
    /// Inducing inputs m.
    pub m: usize,
    /// `D1[i][j]` for `i ≤ j`, row by row (`m(m+1)/2` values).
    pub d1_upper: Vec<f64>,
    /// `D2` (`m` values).
    pub d2: Vec<f64>,
    /// Data points represented.
    pub points: f64,
}

impl ExcessJson {
    /// From an excess and its point count.
    pub fn new(e: &Excess, points: f64) -> Self {
        let m = e.m();
        let mut d1_upper = Vec::with_capacity(m * (m + 1) / 2);
        for i in 0..m {
            for j in i..m {
                d1_upper.push(e.d1[(i, j)]);
            }
        }
        Self {
            m,
            d1_upper,
            d2: e.d2.clone(),
            points,
        }
    }

    /// Back to an excess (D1 mirrored), `None` if the lengths do not fit `m`.
    pub fn to_excess(&self) -> Option<Excess> {
        let m = self.m;
        if self.d1_upper.len() != m * (m + 1) / 2 || self.d2.len() != m {
            return None;
        }
        let mut e = Excess::zeros(m);
        let mut k = 0;
        for i in 0..m {
            for j in i..m {
                e.d1[(i, j)] = self.d1_upper[k];
                e.d1[(j, i)] = self.d1_upper[k];
                k += 1;
            }
        }
        e.d2.clone_from(&self.d2);
        Some(e)
    }
}

/// The reply of `coolgp/<fleet>/<agent>/status`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// Fleet, id and model.
    #[serde(flatten)]
    pub model: ModelIdentity,
    /// `tree` or `push-sum`.
    pub fusion: String,
    /// Projection mode: `per-agent` or `fleet` (spec §14).
    #[serde(default)]
    pub projection: String,
    /// Projection group name (fleet projection with `--projection-group`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection_group: Option<String>,
    /// Own blocks acknowledged (in a durable checkpoint; absorbed if no `--state`).
    pub blocks: u64,
    /// Own data points acknowledged.
    pub points: u64,
    /// Data rows skipped as unusable.
    pub rows_skipped: u64,
    /// The data stream has ended (no `--follow`).
    pub stream_ended: bool,
    /// Checkpoints are written (`--state` given).
    pub durable: bool,
    /// Data points represented in the fused model (exact on trees after convergence).
    pub fleet_points: f64,
    /// The agent's round counter (carried in message headers; strictly increasing).
    pub round: u64,
    /// Rounds run by this process.
    pub rounds_run: u64,
    /// Configured neighbours.
    pub neighbors: Vec<u64>,
    /// Neighbours from which a message has been accepted.
    pub neighbors_heard: usize,
    /// Milliseconds since the last accepted message, per sender (this process only).
    pub heard_ms_ago: BTreeMap<u64, u64>,
    /// Fleet members whose liveliness token is visible.
    pub members_alive: Vec<u64>,
    /// Rejected messages by reason label.
    pub rejected: BTreeMap<String, u64>,
    /// Messages accepted.
    pub messages_accepted: u64,
    /// Messages received (all, before validation).
    pub messages_received: u64,
    /// Payload bytes received.
    pub bytes_received: u64,
    /// Messages dropped unread from a full per-sender queue.
    pub inbound_dropped: u64,
    /// Messages sent.
    pub messages_sent: u64,
    /// Payload bytes sent.
    pub bytes_sent: u64,
    /// Unchanged tree messages held back by `--resend-every` (not in `messages_sent`).
    #[serde(default)]
    pub messages_unchanged_held: u64,
    /// Checkpoints written by this process.
    pub checkpoints: u64,
    /// Size of the last checkpoint in bytes.
    pub checkpoint_bytes: u64,
    /// Milliseconds since this process wrote its last checkpoint (`None`: none yet).
    #[serde(default)]
    pub checkpoint_age_ms: Option<u64>,
    /// Short digest of the q(W) (and σ_s, σ_n) the node predicts with: equal digests mean
    /// bit-identical projections (see [`projection_digest`]).
    #[serde(default)]
    pub projection_digest: String,
    /// When the last own block was absorbed (ms since the Unix epoch).
    pub last_block_unix_ms: Option<u64>,
    /// When the fused model last changed by more than 1e-12 relative (ms since the epoch).
    pub fused_changed_unix_ms: Option<u64>,
    /// RMSE of the fused model on `--holdout`, in original units.
    pub rmse_holdout: Option<f64>,
    /// Time since the process started, in ms.
    pub uptime_ms: u64,
    /// Mutual TLS and signed messages (`--tls`); false: an open fleet.
    #[serde(default)]
    pub tls: bool,
    /// Predict queries being computed now (off the round loop).
    #[serde(default)]
    pub queries_running: u64,
    /// Predict queries answered.
    #[serde(default)]
    pub queries_answered: u64,
    /// Predict queries refused as busy (too many running at once).
    #[serde(default)]
    pub queries_refused_busy: u64,
    /// The fused excess (only when asked with `?fused`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fused: Option<ExcessJson>,
    /// The own excess `E_i` (only when asked with `?fused`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own: Option<ExcessJson>,
}

/// The first 8 bytes, in hex, of SHA-256 over the little-endian bits of θ = (M, log Σ, log σ_s,
/// log σ_n) in [`Projection::to_flat`] order: two nodes hold the same q(W) iff (up to a
/// 2⁻⁶⁴ collision) their digests are equal.
pub fn projection_digest(p: &Projection) -> String {
    let mut h = Sha256::new();
    for v in p.to_flat() {
        h.update(v.to_bits().to_le_bytes());
    }
    h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The request of `coolgp/<fleet>/<agent>/predict`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PredictRequest {
    /// Column names of `x` (matched to the agent's inputs by name; extra columns ignored).
    /// Without names, columns are taken in the agent's input order.
    #[serde(default)]
    pub columns: Option<Vec<String>>,
    /// Rows of inputs in original units.
    pub x: Vec<Vec<f64>>,
    /// `fused` (default) or `own`.
    #[serde(default)]
    pub view: Option<String>,
}

/// The reply of `coolgp/<fleet>/<agent>/predict`, in original units.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PredictReply {
    /// Predictive mean.
    pub mean: Vec<f64>,
    /// Variance of f.
    pub var_f: Vec<f64>,
    /// Variance of y (var_f + noise).
    pub var_y: Vec<f64>,
}

/// The payload of an error reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorReply {
    /// What went wrong.
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use coolgp::faer::Mat;

    fn proj(v: f64) -> Projection {
        Projection::new(
            Mat::from_fn(2, 3, |i, j| (i + 2 * j) as f64 + v),
            Mat::from_fn(2, 3, |_, _| -1.0),
            0.1,
            -2.0,
        )
    }

    #[test]
    fn projection_digest_tells_projections_apart() {
        let a = projection_digest(&proj(0.0));
        assert_eq!(a.len(), 16);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(a, projection_digest(&proj(0.0)));
        // One ulp in one mean entry is a different q(W).
        assert_ne!(a, projection_digest(&proj(f64::EPSILON)));
    }
}
