//! The request of the `predict` queryable (`coolgp/<fleet>/<agent>/predict`) and its trial
//! kernel ([`TrialKernel`]): the fitter of a fleet that explores several kernel families
//! scores each on the fleet query's own task by asking every member to answer under it
//! (docs/LOCAL.md §12c, docs/NODE.md §13 "Its family").

use coolgp::local::kernel::LOG_BOUNDS;
use coolgp::local::{ResidualFamily, ResidualKind};
use coolgp::Agent;
use serde::{Deserialize, Serialize};

/// The request of `coolgp/<fleet>/<agent>/predict`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// Also reply with each answer's parts ([`crate::status::PredictReply::parts`]): what a querier needs to
    /// combine several agents' answers (`coolgp query --all`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parts: bool,
    /// Instead of answering at `x`: offer up to this many of the agent's own memory rows and
    /// its leave-one-out answers there ([`crate::status::PredictReply::held_out`], the parts of those
    /// answers; `coolgp query --all --calibrate`, docs/LOCAL.md §10). The rows are raw data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_out: Option<usize>,
    /// Instead of answering at `x`: offer up to this many memory rows, evenly spaced, with
    /// their residuals against the agent's global mean ([`crate::status::PredictReply::fit_sample`]; a node
    /// with `--local-fit fleet` pools them to fit the residual kernel, docs/LOCAL.md §9). The
    /// rows are raw data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit_sample: Option<usize>,
    /// Instead of answering at `x`: offer, for each row of `x` (the fitter's anchors), the
    /// agent's memory rows nearest to it, with their residuals ([`crate::status::PredictReply::fit_sample`],
    /// `k` rows per row of `x` in `x`'s order; the fit on neighbourhood groups, docs/LOCAL.md
    /// §11). The rows are raw data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub near: Option<NearRequest>,
    /// A routed query (`coolgp query --all --route K`, issue 31): per agent id, the rows of
    /// `x` it answers (in that order); an agent not named, or named with no row, does not
    /// reply. On a request for rows (`held_out`, `fit_sample`, `near`: a pooled fit asking a
    /// bounded set of members) an agent not named does not reply, one named answers (`near`:
    /// at the listed rows only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<std::collections::BTreeMap<u64, Vec<usize>>>,
    /// Answer under this residual kernel instead of the agent's own ([`TrialKernel`]; the
    /// fitter's score of a kernel family on the fleet query's own task, docs/LOCAL.md §12c):
    /// the answers at `x` or, with `held_out`, the leave-one-out answers, as the agent would
    /// give them had it set that kernel; nothing of the agent changes. Admitted as a request
    /// for rows is ([`crate::row_auth`]), refused with `fit_sample` or `near`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trial: Option<TrialKernel>,
}

/// A request for memory rows near given rows ([`PredictRequest::near`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NearRequest {
    /// Rows per row of `x` (at most [`MAX_NEAR_ROWS`]).
    pub k: usize,
    /// The metric's scale of each column of `x`, in original units: rows are near when
    /// `Σ_j ((x_j − x'_j)/scale_j)²` is small.
    pub scale: Vec<f64>,
}

/// The most rows a node offers per row of a [`NearRequest`].
pub const MAX_NEAR_ROWS: usize = 16;

/// A residual kernel to answer under ([`PredictRequest::trial`]). Untrusted peer input: an
/// agent checks it against its own memory ([`TrialKernel::checked`]) and answers under it on a
/// copy of itself ([`TrialKernel::applied`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialKernel {
    /// The family's name ([`ResidualFamily::name`]: `se`, `matern32`, `matern52`, `sum`).
    pub family: String,
    /// Its log parameters, [`ResidualFamily::param_len`] of the memory's input width, each
    /// within [`LOG_BOUNDS`] (`[ln σ_r, ln σ_rn, ln ℓ_1..d]`; the sum's `2d + 4`).
    pub params: Vec<f64>,
}

/// Why an agent refuses a [`TrialKernel`] (the error reply's text; nothing of the agent
/// changed).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TrialKernelError {
    /// The agent has no learned residual kernel to replace (its memory is off, or its kernel
    /// is the global model's).
    #[error("trial kernel: this agent has no learned residual kernel (memory off or global)")]
    NotLearned,
    /// A family name this build does not know.
    #[error("trial kernel: unknown family '{0}': use {families}", families = known_families())]
    UnknownFamily(String),
    /// Another number of parameters than the family's for the memory's input width.
    #[error(
        "trial kernel: {found} parameters for family {family} over {d} inputs, expected \
         {expected}"
    )]
    ParamCount {
        /// The family's name.
        family: &'static str,
        /// The memory's input width.
        d: usize,
        /// The family's parameter count there.
        expected: usize,
        /// The count sent.
        found: usize,
    },
    /// A parameter that is not finite.
    #[error("trial kernel: parameter {index} is not finite ({value})")]
    NonFinite {
        /// Its position.
        index: usize,
        /// Its value.
        value: f64,
    },
    /// A log parameter outside [`LOG_BOUNDS`] (no fit ever leaves them).
    #[error(
        "trial kernel: log parameter {index} = {value} is outside [{lo}, {hi}]",
        lo = LOG_BOUNDS.0,
        hi = LOG_BOUNDS.1
    )]
    OutOfBounds {
        /// Its position.
        index: usize,
        /// Its value.
        value: f64,
    },
    /// A trial kernel on a request for rows (`fit_sample`, `near`), whose residuals no
    /// kernel changes.
    #[error("trial kernel: applies to answers and held-out answers, not to fit_sample or near")]
    ForRows,
    /// The agent could not take it (its own error).
    #[error("trial kernel: {0}")]
    Refused(String),
}

/// The family names this build knows, comma-separated.
fn known_families() -> String {
    let names: Vec<&str> = ResidualFamily::ALL.iter().map(|f| f.name()).collect();
    names.join(", ")
}

impl TrialKernel {
    /// The trial of `family` with `params`.
    pub fn new(family: ResidualFamily, params: &[f64]) -> Self {
        Self {
            family: family.name().to_owned(),
            params: params.to_vec(),
        }
    }

    /// The family and parameters, checked against `agent`: a learned residual kernel to
    /// replace, a known family, its parameter count for the memory's input width, every
    /// parameter finite and within [`LOG_BOUNDS`].
    ///
    /// # Errors
    /// The first [`TrialKernelError`] found, naming what is wrong.
    pub fn checked(&self, agent: &Agent) -> Result<ResidualFamily, TrialKernelError> {
        let local = agent.local();
        if !agent.config().local.is_on() || local.kernel().kind() != ResidualKind::Learned {
            return Err(TrialKernelError::NotLearned);
        }
        let family = ResidualFamily::from_name(&self.family)
            .ok_or_else(|| TrialKernelError::UnknownFamily(self.family.clone()))?;
        let d = local.memory().d();
        let expected = family.param_len(d);
        if self.params.len() != expected {
            return Err(TrialKernelError::ParamCount {
                family: family.name(),
                d,
                expected,
                found: self.params.len(),
            });
        }
        for (index, &value) in self.params.iter().enumerate() {
            if !value.is_finite() {
                return Err(TrialKernelError::NonFinite { index, value });
            }
            if !(LOG_BOUNDS.0..=LOG_BOUNDS.1).contains(&value) {
                return Err(TrialKernelError::OutOfBounds { index, value });
            }
        }
        Ok(family)
    }

    /// A copy of `agent` that answers under this kernel ([`TrialKernel::checked`], then
    /// [`Agent::set_local_kernel`] on the copy); `agent` is unchanged.
    ///
    /// Cost, per request: a copy of the agent and one refactor of its memory under the
    /// kernel (the rows' features and one Cholesky factorization, O(n³/3) for its n ≤
    /// capacity rows), as a pooled fit's kernel costs when taken; bounded as every query by
    /// [`crate::query::MAX_CONCURRENT_QUERIES`], and admitted only as a request for rows is.
    ///
    /// # Errors
    /// As [`TrialKernel::checked`]; [`TrialKernelError::Refused`] with the agent's own error.
    pub fn applied(&self, agent: &Agent) -> Result<Agent, TrialKernelError> {
        let family = self.checked(agent)?;
        let mut trial = agent.clone();
        trial
            .set_local_kernel(family, &self.params)
            .map_err(|e| TrialKernelError::Refused(e.to_string()))?;
        Ok(trial)
    }
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
