//! JSON documents of the `status` and `predict` queryables (stable field names; the Python
//! example and `coolgp status` read them).

use std::collections::BTreeMap;

use coolgp::model::Projection;
use coolgp::Excess;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::checkpoint::ModelIdentity;
pub use crate::request::{NearRequest, PredictRequest, TrialKernel, MAX_NEAR_ROWS};
use coolgp::local::LocalAnswer;

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
    /// Fleet projection: the site memory, `recent` or `stream` (`--site-memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site_memory: Option<String>,
    /// The local memory's capacity B (`--local-memory`; 0: off).
    #[serde(default)]
    pub local_memory: usize,
    /// Rows in the local memory now (at most `local_memory`).
    #[serde(default)]
    pub local_points: usize,
    /// Pooled fits of the residual kernel applied by this process (`--local-fit fleet`;
    /// 0 otherwise).
    #[serde(default)]
    pub local_pooled_fits: u64,
    /// The residual kernel's words now (learned: `[ln σ_r, ln σ_rn, ln ℓ_1..d]`, followed by
    /// the smoothness ν (1.5 or 2.5) for a Matérn family, [`crate::kernel_auth::kernel_words`];
    /// `global`: `[ln σ_s, ln σ_n, W̄]`; empty with the memory off).
    #[serde(default)]
    pub local_kernel: Vec<f64>,
    /// With `--tls`: the node's Ed25519 signature of `local_kernel` with its id and
    /// `local_pooled_fits` ([`crate::kernel_auth`]); empty in an open fleet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub local_kernel_sig: Vec<u8>,
    /// `--local-fit agent`: rows in the memory at this node's last fit of the residual
    /// kernel on its own rows (0: none yet); the fitter's consensus takes the kernels of
    /// the members with a fit (docs/LOCAL.md §12b).
    #[serde(default)]
    pub local_fitted_rows: usize,
    /// `--local-fit agent`: the consensus of the members' own kernels this node last made
    /// or took, as [`Status::local_kernel`]'s words (empty: none); its followers take it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub local_consensus: Vec<f64>,
    /// With `--tls`: the node's signature of `local_consensus` with its id and
    /// `local_pooled_fits` ([`crate::kernel_auth::ConsensusClaim`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub local_consensus_sig: Vec<u8>,
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
    /// Times the routes to and from a live but silent neighbour were declared again
    /// (lost zenoh routes, issue 31).
    #[serde(default)]
    pub routes_redeclared: u64,
    /// Messages a live but silent neighbour answered to this node's pull (a status query
    /// `?msg=<id>` after the routes were declared again: lost zenoh routes, issue 31).
    #[serde(default)]
    pub messages_pulled: u64,
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
    /// A numeric summary of the same q(W), σ_s, σ_n that the dashboard compares within
    /// [`PROJECTION_RTOL`] ([`ProjectionSummary`]); absent from older nodes' statuses and when
    /// a parameter is not finite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection_summary: Option<ProjectionSummary>,
    /// The signal standard deviation σ_s the node predicts with (in the fleet projection
    /// mode the fleet's, or its projection group's), in original units (`--standardize`).
    #[serde(default)]
    pub sigma_s: Option<f64>,
    /// The noise standard deviation σ_n the node predicts with, in original units.
    #[serde(default)]
    pub sigma_n: Option<f64>,
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
    /// The node as a ROS 2 participant (`--ros2`): messages, rows, refusals, maps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ros2: Option<crate::ros2::Ros2Status>,
    /// The member check (issue 29, docs/MEMBERS.md §5): this node's own memory rows against
    /// the fleet's model without it, in original units (absent without memory rows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<MemberJson>,
    /// The fleet's suspects as last judged by the fitter (this node, or taken from the
    /// fitter's signed status).
    #[serde(default)]
    pub suspects: Vec<u64>,
    /// The fitter whose verdict `suspects` is, and its check count (0: none yet).
    #[serde(default)]
    pub member_checks: u64,
    /// The node whose verdict `suspects` is.
    #[serde(default)]
    pub suspects_by: Option<u64>,
    /// With `--tls`, the judging node's signature of `suspects` ([`crate::kernel_auth`]).
    #[serde(default)]
    pub suspects_sig: Vec<u8>,
    /// The fleet rule and calibration this node measured as the fitter (issue 28,
    /// [`crate::fleet_calibration`]); `coolgp query --all` applies the fitter's by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet_calibration: Option<crate::fleet_calibration::FleetCalibration>,
    /// With `--tls`, this node's signature of `fleet_calibration`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fleet_calibration_sig: Vec<u8>,
    /// This node withholds its own data from its messages (it is a suspect, contained).
    #[serde(default)]
    pub withheld: bool,
    /// This process's rounds run (`rounds_run`) when the node last began to withhold its data.
    #[serde(default)]
    pub withheld_since_round: Option<u64>,
    /// Messages scaled down by the influence cap (`--influence-cap`), per sender (issue 29).
    #[serde(default)]
    pub capped: BTreeMap<u64, u64>,
    /// The own excess `E_i` (only when asked with `?fused`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own: Option<ExcessJson>,
    /// Where the memory rows lie (issue 31, [`crate::coverage`]; absent without a memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<crate::coverage::CoverageJson>,
}

/// A node's evidence in its status (docs/MEMBERS.md §1; [`coolgp::members::Evidence`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemberJson {
    /// Rows checked.
    pub rows: usize,
    /// Rows the others know.
    pub informed: usize,
    /// Median squared error of the others' model at the informed rows (original units²;
    /// `null` without informed rows).
    pub score: Option<f64>,
    /// Median squared error over the predictive variance (`null` without informed rows).
    pub z2: Option<f64>,
}

/// The first 8 bytes, in hex, of SHA-256 over the little-endian bits of θ = (M, log Σ, log σ_s,
/// log σ_n) in [`Projection::to_flat`] order: two nodes hold bit-identical q(W) iff (up to a
/// 2⁻⁶⁴ collision) their digests are equal. Nodes that hold the same fleet sums but added
/// them in different orders differ in the last bits: compare their [`ProjectionSummary`].
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

/// Relative tolerance within which two nodes' q(W) count as the same in the dashboard
/// ([`ProjectionSummary::agrees_with`]).
pub const PROJECTION_RTOL: f64 = 1e-9;

/// Number of linear functionals in a [`ProjectionSummary`].
pub const SUMMARY_FUNCTIONALS: usize = 4;

/// A small numeric summary of a q(W), σ_s, σ_n, for comparing nodes *within a tolerance*
/// (the [`projection_digest`] tells only bit-identical projections apart, and nodes that sum
/// the same site sums in different floating-point orders agree to ~1e-15, not bit for bit).
///
/// With θ = (M, log Σ, log σ_s, log σ_n) in [`Projection::to_flat`] order (`n = 2·d'·d + 2`
/// numbers), the summary holds `f_j = Σ_k w_jk θ_k` for `j < 4` and the scale `‖θ‖₁`, with
/// fixed pseudo-random weights `w_jk ∈ [−1, 1)` (SplitMix64 of `(j, k)`, the same in every
/// process). Two summaries agree when every `|f_j − f'_j| ≤ rtol · max(‖θ‖₁, ‖θ'‖₁)`:
///
/// - **Equal projections agree.** `|f_j − f'_j| ≤ ‖θ − θ'‖₁`, so projections whose parameters
///   differ by rounding (~1e-15 of ‖θ‖₁, plus the summary's own rounding, `n·ε·‖θ‖₁`) agree
///   at `rtol` = 1e-9 for any realistic n.
/// - **Different projections are told apart.** If one parameter differs by `|δ_k| = r · rtol ·
///   ‖θ‖₁`, then for any values of the other weights `f_j − f'_j` falls within the tolerance
///   only if `w_jk` lands in an interval of length `2 · rtol · ‖θ‖₁`, which has probability
///   at most `1/r` for a weight uniform on [−1, 1); the four functionals have independent
///   weights, so the difference goes unnoticed with probability at most `r⁻⁴` (1e-12 at
///   r = 1000). The weights are fixed, but the differences between nodes' projections come
///   from their data and message timing, not from the weights, so this is the chance of a
///   miss. Differences within a factor of a few of the tolerance may go unnoticed.
///
/// A relative change `c` of a variance σ_ij² moves θ's `log σ_ij` by `c/2`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProjectionSummary {
    /// Number of parameters summarized, `2·d'·d + 2` (projections of other shapes never agree).
    pub params: usize,
    /// `f_j = Σ_k w_jk θ_k`, [`SUMMARY_FUNCTIONALS`] values.
    pub functionals: Vec<f64>,
    /// `‖θ‖₁ = Σ_k |θ_k|`, the scale of the tolerance.
    pub scale: f64,
}

/// Weight `w_jk ∈ [−1, 1)` of functional `j` on parameter `k`: SplitMix64 of `(j, k)`.
fn summary_weight(j: usize, k: usize) -> f64 {
    let mut z = ((j as u64) << 48 ^ k as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    // The top 53 bits as a uniform number in [0, 1), mapped to [−1, 1).
    (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
}

impl ProjectionSummary {
    /// The summary of `p`, `None` if a parameter is not finite (JSON cannot carry it; the
    /// dashboard then compares the digest).
    pub fn of(p: &Projection) -> Option<Self> {
        let theta = p.to_flat();
        if !theta.iter().all(|v| v.is_finite()) {
            return None;
        }
        let functionals = (0..SUMMARY_FUNCTIONALS)
            .map(|j| {
                theta
                    .iter()
                    .enumerate()
                    .map(|(k, v)| summary_weight(j, k) * v)
                    .sum()
            })
            .collect();
        Some(Self {
            params: theta.len(),
            functionals,
            scale: theta.iter().map(|v| v.abs()).sum(),
        })
    }

    /// True when the two summaries describe the same q(W) within `rtol` relative to the larger
    /// `‖θ‖₁` (type docs: what that guarantees). Summaries of other shapes or with non-finite
    /// values never agree.
    pub fn agrees_with(&self, other: &Self, rtol: f64) -> bool {
        let tol = rtol * self.scale.max(other.scale);
        self.params == other.params
            && self.functionals.len() == other.functionals.len()
            && !self.functionals.is_empty()
            && tol.is_finite()
            && self
                .functionals
                .iter()
                .zip(&other.functionals)
                .all(|(a, b)| (a - b).abs() <= tol)
    }
}

/// An agent's memory rows offered to a peer, in original units: for calibration
/// ([`PredictRequest::held_out`]: `y` the targets; the reply's answers are its leave-one-out
/// answers at them) or for the pooled fit ([`PredictRequest::fit_sample`]: `y` the residuals
/// against the agent's global mean, scaled to original units).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OfferedRows {
    /// The agent's input column names (the order of each row of `x`).
    pub columns: Vec<String>,
    /// The rows' inputs.
    pub x: Vec<Vec<f64>>,
    /// The rows' targets.
    pub y: Vec<f64>,
}

impl OfferedRows {
    /// `Err` naming the defect if the rows are ragged, of another count than `y`, or not
    /// finite (a peer's reply is untrusted).
    ///
    /// # Errors
    /// A message for the querier's warning.
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.x.len() != self.y.len() {
            return Err(format!(
                "{} held-out rows for {} targets",
                self.x.len(),
                self.y.len()
            ));
        }
        let width = self.columns.len();
        if let Some(i) = self.x.iter().position(|r| r.len() != width) {
            return Err(format!(
                "held-out row {i} has {} values for {width} columns",
                self.x[i].len()
            ));
        }
        let finite = |v: &f64| v.is_finite();
        if let Some(i) =
            (0..self.y.len()).find(|&i| !self.x[i].iter().all(finite) || !self.y[i].is_finite())
        {
            return Err(format!("held-out row {i} is not finite"));
        }
        Ok(())
    }
}

/// The reply of `coolgp/<fleet>/<agent>/predict`, in original units.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PredictReply {
    /// Predictive mean.
    pub mean: Vec<f64>,
    /// Variance of f.
    pub var_f: Vec<f64>,
    /// Variance of y (var_f + noise).
    pub var_y: Vec<f64>,
    /// The parts of each answer, when the request asked for them ([`PredictRequest::parts`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<AnswerParts>,
    /// The memory rows offered, when the request asked for them ([`PredictRequest::held_out`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_out: Option<OfferedRows>,
    /// The pooled fit's sample, when the request asked for it ([`PredictRequest::fit_sample`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit_sample: Option<OfferedRows>,
}

/// The parts of an agent's answers at n query points, column by column (n values each), in
/// original units: the global fused model's mean and variance of f, the local residual GP's
/// posterior mean and variance and its prior variance, and the observation noise (a
/// [`LocalAnswer`] per point). `mean = global_mean + residual_mean`, `var_f = global_var +
/// residual_var`, `var_y = var_f + noise_var`. This is all a query reveals of the agent: its
/// moments at the asked points, never its rows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AnswerParts {
    /// μ_g(x*): the global model's mean.
    pub global_mean: Vec<f64>,
    /// The global part's variance of f.
    pub global_var: Vec<f64>,
    /// The residual GP's posterior mean at x* (0 without a memory).
    pub residual_mean: Vec<f64>,
    /// The residual GP's posterior variance at x* (0 without a memory).
    pub residual_var: Vec<f64>,
    /// The residual GP's prior variance k_r(x*, x*) (0 without a memory).
    pub residual_prior: Vec<f64>,
    /// The observation noise variance.
    pub noise_var: Vec<f64>,
}

impl AnswerParts {
    /// The columns of `answers`.
    pub fn from_answers(answers: &[LocalAnswer]) -> Self {
        let col = |f: fn(&LocalAnswer) -> f64| answers.iter().map(f).collect();
        Self {
            global_mean: col(|a| a.global_mean),
            global_var: col(|a| a.global_var),
            residual_mean: col(|a| a.residual_mean),
            residual_var: col(|a| a.residual_var),
            residual_prior: col(|a| a.residual_prior),
            noise_var: col(|a| a.noise_var),
        }
    }

    /// The answers, one per point: `Err` naming the defect if the columns do not all hold
    /// `n` values, or a value is not finite, or a variance is negative (a peer's reply is
    /// untrusted).
    ///
    /// # Errors
    /// A message for the querier's warning.
    pub fn to_answers(&self, n: usize) -> std::result::Result<Vec<LocalAnswer>, String> {
        let cols = [
            ("global_mean", &self.global_mean, false),
            ("global_var", &self.global_var, true),
            ("residual_mean", &self.residual_mean, false),
            ("residual_var", &self.residual_var, true),
            ("residual_prior", &self.residual_prior, true),
            ("noise_var", &self.noise_var, true),
        ];
        for (name, col, variance) in cols {
            if col.len() != n {
                return Err(format!("{name} has {} values for {n} points", col.len()));
            }
            if let Some(i) = col
                .iter()
                .position(|v| !v.is_finite() || (variance && *v < 0.0))
            {
                return Err(format!("{name}[{i}] = {} is not a valid value", col[i]));
            }
        }
        Ok((0..n)
            .map(|i| LocalAnswer {
                global_mean: self.global_mean[i],
                global_var: self.global_var[i],
                residual_mean: self.residual_mean[i],
                residual_var: self.residual_var[i],
                residual_prior: self.residual_prior[i],
                noise_var: self.noise_var[i],
            })
            .collect())
    }
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

    /// `p` with every parameter θ_k scaled by `1 + rel·s_k` (`s_k` = ±1, alternating), or
    /// only θ_`only` when given.
    fn perturbed(p: &Projection, rel: f64, only: Option<usize>) -> Projection {
        let theta: Vec<f64> = p
            .to_flat()
            .iter()
            .enumerate()
            .map(|(k, v)| {
                let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
                if only.is_none_or(|o| o == k) {
                    v * (1.0 + rel * sign)
                } else {
                    *v
                }
            })
            .collect();
        let mut q = p.clone();
        q.set_flat(&theta);
        q
    }

    fn summary(p: &Projection) -> ProjectionSummary {
        ProjectionSummary::of(p).expect("finite parameters")
    }

    #[test]
    fn projection_summaries_agree_to_rounding_and_tell_real_differences_apart() {
        let a = proj(0.3);
        let sa = summary(&a);
        assert_eq!(sa.params, a.n_params());
        assert_eq!(sa.functionals.len(), SUMMARY_FUNCTIONALS);
        // 1e-14 relative in every parameter (what different summation orders leave): the
        // digests differ, the summaries agree, both ways round.
        let near = perturbed(&a, 1e-14, None);
        assert_ne!(projection_digest(&a), projection_digest(&near));
        assert!(sa.agrees_with(&summary(&near), PROJECTION_RTOL));
        assert!(summary(&near).agrees_with(&sa, PROJECTION_RTOL));
        // 1e-6 relative in every parameter, or in any single one: different.
        assert!(!sa.agrees_with(&summary(&perturbed(&a, 1e-6, None)), PROJECTION_RTOL));
        for k in 0..a.n_params() {
            let far = summary(&perturbed(&a, 1e-6, Some(k)));
            assert!(!sa.agrees_with(&far, PROJECTION_RTOL), "parameter {k}");
            assert!(!far.agrees_with(&sa, PROJECTION_RTOL), "parameter {k}");
        }
        // Another shape never agrees; a non-finite parameter gives no summary.
        let wide = Projection::new(
            Mat::from_fn(2, 4, |_, _| 0.0),
            Mat::from_fn(2, 4, |_, _| -1.0),
            0.1,
            -2.0,
        );
        assert!(!sa.agrees_with(&summary(&wide), 1.0));
        let bad = Projection::new(
            Mat::from_fn(2, 3, |_, _| f64::NAN),
            Mat::from_fn(2, 3, |_, _| -1.0),
            0.1,
            -2.0,
        );
        assert_eq!(ProjectionSummary::of(&bad), None);
    }

    #[test]
    fn answer_parts_round_trip_and_refuse_bad_columns() {
        let a = LocalAnswer {
            global_mean: 1.0,
            global_var: 0.5,
            residual_mean: -0.25,
            residual_var: 0.125,
            residual_prior: 2.0,
            noise_var: 0.01,
        };
        let b = LocalAnswer {
            global_mean: -3.0,
            ..a
        };
        let parts = AnswerParts::from_answers(&[a, b]);
        let json = serde_json::to_string(&parts).expect("json");
        let back: AnswerParts = serde_json::from_str(&json).expect("parse");
        assert_eq!(back.to_answers(2), Ok(vec![a, b]));
        assert!(back
            .to_answers(3)
            .unwrap_err()
            .contains("2 values for 3 points"));
        let mut bad = parts.clone();
        bad.residual_var[1] = -1.0;
        assert!(bad.to_answers(2).unwrap_err().contains("residual_var[1]"));
        let mut bad = parts;
        bad.global_mean[0] = f64::INFINITY;
        assert!(bad.to_answers(2).unwrap_err().contains("global_mean[0]"));
        // JSON cannot carry NaN: a null is a malformed reply.
        let null = json.replacen("1.0", "null", 1);
        assert!(serde_json::from_str::<AnswerParts>(&null).is_err());
    }

    #[test]
    fn a_projection_summary_round_trips_through_json() {
        let s = ProjectionSummary::of(&proj(0.3)).expect("finite");
        let json = serde_json::to_value(&s).expect("json");
        let back: ProjectionSummary = serde_json::from_value(json).expect("round trip");
        assert_eq!(back, s);
    }
}
