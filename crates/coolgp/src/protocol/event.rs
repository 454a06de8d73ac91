//! What an agent reports to its driver.

use crate::learn::IsDiagnostics;
use crate::protocol::message::{AgentId, RejectReason};

/// Something the driver may want to log, count or act on.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// A factorization needed jitter beyond the vocabulary's (never stored in the state).
    Jitter {
        /// Which matrix.
        what: &'static str,
        /// The jitter added.
        jitter: f64,
    },
    /// A received message was rejected; the agent is unchanged.
    Rejected {
        /// Claimed sender.
        from: AgentId,
        /// Why.
        reason: RejectReason,
    },
    /// The importance estimate was recomputed (reported every time, spec §4b); check
    /// `degenerate`.
    ImportanceWeights(IsDiagnostics),
    /// A block was absorbed but its optimizer step was skipped, so θ (q(W), σ_s, σ_n) did not
    /// move: `reason` is "posterior" when neither the fused nor the own T1 could be factored,
    /// "gradient" when the gradient was not finite, "adam" when the optimizer state does not
    /// fit θ. The data stays absorbed; the next block tries again.
    StepSkipped {
        /// Why the step was skipped.
        reason: &'static str,
    },
    /// A neighbour's message carried more precision per claimed row than its rows can carry
    /// (the ceiling, [`crate::members::bound::ceiling_factor`]) or than
    /// [`crate::AgentConfig::influence_cap`] allows, and was scaled down by `factor` before
    /// it was absorbed (issue 29).
    Capped {
        /// The sender.
        from: AgentId,
        /// The factor in (0, 1) its excess was scaled by.
        factor: f64,
    },
    /// A neighbour's message claimed more new rows than [`crate::AgentConfig::row_rate`]
    /// allows since its last accepted one; its claimed rows and its excess were scaled down
    /// to `allowed` before it was absorbed (issue 29).
    RateCapped {
        /// The sender.
        from: AgentId,
        /// The rows it claimed.
        claimed: f64,
        /// The rows it was scaled down to.
        allowed: f64,
    },
    /// The fused view changed after an accepted message.
    FusedUpdated {
        /// Data points represented in the fused model.
        fleet_points: f64,
    },
}
