//! The local memory in an agent's snapshot: plain data, restored by one factorization.

use faer::Mat;

use super::kernel::ResidualKernel;
use super::memory::Memory;
use super::{LocalModel, ResidualFamily};
use crate::error::{Error, Result};
use crate::model::Vocabulary;

/// The local memory and residual kernel of an agent, as plain data (the settings are the
/// agent's [`crate::AgentConfig::local`]).
#[derive(Clone, Debug, PartialEq)]
pub struct LocalSnapshot {
    /// Memory rows `x [n, d]`, in memory order.
    pub x: Mat<f64>,
    /// Memory targets `y [n]`.
    pub y: Vec<f64>,
    /// Rows offered so far (the policy's whole state: the reservoir's draws derive from it
    /// and the agent's seed; the spread policy's neighbours from the rows).
    pub seen: u64,
    /// The residual kernel's parameters ([`ResidualKernel::params`]).
    pub params: Vec<f64>,
    /// The learned kernel's family ([`ResidualKernel::family`]; the squared exponential for
    /// a `GlobalResidual` kernel).
    pub family: ResidualFamily,
    /// Memory rows at the last fit of the kernel (0: none yet).
    pub last_fit: u64,
    /// Rows inserted since the last fit.
    pub since_fit: u64,
}

impl LocalModel {
    /// The plain-data image of the memory; `None` when the memory is off.
    pub fn snapshot(&self) -> Option<LocalSnapshot> {
        if !self.config().is_on() {
            return None;
        }
        let (last_fit, since_fit) = self.fit_state();
        Some(LocalSnapshot {
            x: self.rows(),
            y: self.memory().y().to_vec(),
            seen: self.memory().seen(),
            params: self.kernel().params().to_vec(),
            family: self.kernel().family(),
            last_fit: last_fit as u64,
            since_fit,
        })
    }

    /// Replaces this (new, empty) model by the memory of a snapshot, for the same settings
    /// and input width; factors A once. `None` (a snapshot without memory) keeps `self`.
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] for a memory row of the wrong width, targets that do not
    /// match the rows, more rows than the capacity or kernel parameters of the wrong length;
    /// [`Error::NonFinite`] for a non-finite row, target or parameter;
    /// [`Error::InvalidConfig`] for a memory in the snapshot of an agent whose memory is off.
    pub(crate) fn restore_in_place(
        &mut self,
        vocab: &Vocabulary,
        seed: u64,
        s: Option<LocalSnapshot>,
    ) -> Result<()> {
        let Some(s) = s else {
            return Ok(());
        };
        let config = *self.config();
        let d = self.memory().d();
        if !config.is_on() {
            return Err(Error::InvalidConfig(
                "snapshot has a local memory but the agent's local memory is off (capacity 0)"
                    .into(),
            ));
        }
        let n = s.y.len();
        if s.x.ncols() != d {
            return Err(Error::DimensionMismatch {
                what: "snapshot local memory row width (d)",
                expected: d,
                found: s.x.ncols(),
            });
        }
        crate::error::ensure_dim(
            "snapshot local memory targets (one per row)",
            s.x.nrows(),
            n,
        )?;
        if n > config.capacity {
            return Err(Error::DimensionMismatch {
                what: "snapshot local memory rows (at most the capacity)",
                expected: config.capacity,
                found: n,
            });
        }
        let x: Vec<f64> = (0..n)
            .flat_map(|i| (0..d).map(move |j| (i, j)))
            .map(|(i, j)| s.x[(i, j)])
            .collect();
        crate::error::ensure_finite("snapshot local memory rows", &x)?;
        crate::error::ensure_finite("snapshot local memory targets", &s.y)?;
        let dims = (d, vocab.d_latent());
        let kernel = ResidualKernel::restored(config.kernel, s.family, s.params, dims)?;
        let memory = Memory::from_rows(config.policy, config.capacity, d, seed, (x, s.y, s.seen));
        let last_fit = usize::try_from(s.last_fit)
            .unwrap_or(usize::MAX)
            .min(config.capacity);
        *self = LocalModel::from_parts(config, vocab, memory, kernel, (last_fit, s.since_fit))?;
        Ok(())
    }
}
