//! How q(u) and q(W) are *updated*: the online modes (spec §4), the ELBO and its gradients
//! (spec §6), the optimizer, an agent's learning state, and the sites of a fleet-wide q(W)
//! (spec §14; one agent's part is its [`FleetSite`]).

pub mod adam;
pub(crate) mod contract;
pub mod elbo;
pub mod fleet_site;
pub mod hyper;
pub mod importance;
pub mod recent;
pub mod robust;
pub mod site;
pub mod sites;
pub(crate) mod state;
pub mod window;

use faer::{Mat, MatRef};

pub use adam::{Adam, AdamConfig};
pub use elbo::{block_loglik_grad, block_loglik_grad_weighted, stochastic_objective, BlockElbo};
pub use fleet_site::{FleetSite, StepCounts, StepData};
pub use hyper::HyperStats;
pub use importance::{ImportanceCache, IsDiagnostics, IsNormalization};
pub use recent::RecentBlocks;
pub use robust::{imq_weight, Likelihood, DEFAULT_ROBUST_C};
pub use site::{Site, SiteConfig, SiteMemory, SiteOptions};
pub use sites::{group_id, GroupId, Sites, MAX_GROUPS, UNGROUPED};

use crate::learn::elbo::BlockPsi;
use crate::model::psi::{accumulate_block, accumulate_block_weighted, PsiWorkspace, UnitStats};
use crate::model::{Excess, Projection, Vocabulary};

/// Which online update an agent runs (spec §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateMode {
    /// Default: unit-scale analytic statistics accumulated under q(W) at arrival (spec §4c).
    /// Memory m² + m; exact for the newest block, stale for older ones.
    Frozen,
    /// The paper's Eq. 3.7 with `samples` prior draws and summed caches (spec §4b).
    /// Degenerates in realistic dimensions; see [`importance`].
    Importance {
        /// Number of samples k.
        samples: usize,
        /// Normalization of the weights.
        normalization: IsNormalization,
    },
    /// Keeps every block and recomputes under the current q(W). Memory grows with the data:
    /// a reference and test oracle only, not for deployment.
    Exact,
}

impl UpdateMode {
    /// The command-line name: `frozen`, `importance` or `exact`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Frozen => "frozen",
            Self::Importance { .. } => "importance",
            Self::Exact => "exact",
        }
    }

    /// Parses the names used by the command line: `mode` ∈ {frozen, importance (or is), exact}
    /// (default frozen), `samples` k (default 20, > 0), `normalization` ∈ {unnormalized,
    /// self-normalized} (default unnormalized).
    ///
    /// # Errors
    /// A message naming the bad value and the accepted ones.
    pub fn parse(
        mode: Option<&str>,
        samples: Option<usize>,
        normalization: Option<&str>,
    ) -> Result<Self, String> {
        Ok(match mode.unwrap_or("frozen") {
            "frozen" => UpdateMode::Frozen,
            "exact" => UpdateMode::Exact,
            "importance" | "is" => {
                let samples = samples.unwrap_or(20);
                if samples == 0 {
                    return Err("--samples must be > 0".into());
                }
                UpdateMode::Importance {
                    samples,
                    normalization: match normalization.unwrap_or("unnormalized") {
                        "unnormalized" => IsNormalization::Unnormalized,
                        "self-normalized" => IsNormalization::SelfNormalized,
                        other => {
                            return Err(format!(
                                "unknown --normalization '{other}': use unnormalized or self-normalized"
                            ))
                        }
                    },
                }
            }
            other => {
                return Err(format!(
                    "unknown --mode '{other}': use frozen, importance or exact"
                ))
            }
        })
    }
}

/// The agent's data caches in the chosen mode.
#[derive(Clone, Debug, PartialEq)]
pub enum Learner {
    /// Frozen-q sums `F1 = Σ ψ̄2`, `F2 = Σ Ψ̄1ᵀy` (unit scale).
    Frozen(UnitStats),
    /// Per-sample sums.
    Importance(ImportanceCache),
    /// Every block kept: `(x [n, d], y [n], w)`, with `w [n]` its rows' weights under the
    /// robust likelihood, taken when the block arrived (`None`: every weight 1, the Gaussian
    /// likelihood), so every recomputation tempers each row by the same weight.
    Exact(Vec<ExactBlock>),
}

/// One block kept by the exact mode: inputs `x [n, d]`, targets `y [n]` and, under the robust
/// likelihood, the rows' weights `w [n]` taken on arrival (`None`: every weight 1).
pub type ExactBlock = (Mat<f64>, Vec<f64>, Option<Vec<f64>>);

impl Learner {
    /// Empty caches for `mode`; `seed` draws the importance samples.
    pub fn new(vocab: &Vocabulary, d: usize, mode: UpdateMode, seed: u64) -> Self {
        match mode {
            UpdateMode::Frozen => Learner::Frozen(UnitStats::zeros(vocab.m())),
            UpdateMode::Importance {
                samples,
                normalization,
            } => Learner::Importance(ImportanceCache::new(vocab, d, samples, seed, normalization)),
            UpdateMode::Exact => Learner::Exact(Vec::new()),
        }
    }

    /// Absorbs one block `(x [n, d], y [n])` (the frozen mode uses the current `proj`).
    pub fn absorb(
        &mut self,
        vocab: &Vocabulary,
        proj: &Projection,
        x: MatRef<'_, f64>,
        y: &[f64],
        ws: &mut PsiWorkspace,
    ) {
        match self {
            Learner::Frozen(stats) => accumulate_block(vocab, proj, x, y, stats, ws),
            Learner::Importance(cache) => cache.absorb(vocab, x, y),
            Learner::Exact(blocks) => blocks.push((x.to_owned(), y.to_vec(), None)),
        }
    }

    /// Absorbs the rows `(x [n, d], y [n])` whose ψ under the current q(W) `bp` holds, each
    /// tempered by its weight `w [n]` when given (the robust likelihood): the frozen mode adds
    /// the (weighted) statistics of `bp`, the importance mode folds the weights into its sums
    /// ([`ImportanceCache::absorb_weighted`]), the exact mode keeps them with the block.
    pub(crate) fn absorb_rows(
        &mut self,
        vocab: &Vocabulary,
        x: MatRef<'_, f64>,
        y: &[f64],
        bp: &BlockPsi,
        w: Option<&[f64]>,
    ) {
        match (self, w) {
            (Learner::Frozen(stats), None) => bp.accumulate_into(y, stats),
            (Learner::Frozen(stats), Some(w)) => bp.accumulate_weighted_into(y, w, stats),
            (Learner::Importance(cache), w) => cache.absorb_weighted(vocab, x, y, w),
            (Learner::Exact(blocks), w) => {
                blocks.push((x.to_owned(), y.to_vec(), w.map(<[f64]>::to_vec)));
            }
        }
    }

    /// The data part `E` under the current θ, with importance diagnostics where they apply.
    pub fn excess(
        &self,
        vocab: &Vocabulary,
        proj: &Projection,
        ws: &mut PsiWorkspace,
    ) -> (Excess, Option<IsDiagnostics>) {
        match self {
            Learner::Frozen(stats) => (
                Excess::from_unit_stats(stats, proj.sigma_s(), proj.sigma_n()),
                None,
            ),
            Learner::Importance(cache) => {
                let (e, d) = cache.excess(vocab, proj);
                (e, Some(d))
            }
            Learner::Exact(blocks) => {
                let mut stats = UnitStats::zeros(vocab.m());
                for (x, y, w) in blocks {
                    match w {
                        None => accumulate_block(vocab, proj, x.as_ref(), y, &mut stats, ws),
                        Some(w) => {
                            accumulate_block_weighted(vocab, proj, x.as_ref(), y, w, &mut stats, ws)
                        }
                    }
                }
                (
                    Excess::from_unit_stats(&stats, proj.sigma_s(), proj.sigma_n()),
                    None,
                )
            }
        }
    }

    /// Numbers held by the caches (the memory the mode uses).
    pub fn memory_f64(&self) -> usize {
        match self {
            Learner::Frozen(s) => s.psi2.nrows() * s.psi2.ncols() + s.psi1_y.len(),
            Learner::Importance(c) => {
                c.a.iter().map(|a| a.nrows() * a.ncols()).sum::<usize>()
                    + c.b.iter().map(Vec::len).sum::<usize>()
                    + c.samples
                        .iter()
                        .map(|w| w.nrows() * w.ncols())
                        .sum::<usize>()
            }
            Learner::Exact(blocks) => blocks
                .iter()
                .map(|(x, y, w)| x.nrows() * x.ncols() + y.len() + w.as_ref().map_or(0, Vec::len))
                .sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_command_line_names_and_explains_errors() {
        assert_eq!(UpdateMode::parse(None, None, None), Ok(UpdateMode::Frozen));
        assert_eq!(
            UpdateMode::parse(Some("exact"), None, None),
            Ok(UpdateMode::Exact)
        );
        assert_eq!(
            UpdateMode::parse(Some("is"), Some(7), Some("self-normalized")),
            Ok(UpdateMode::Importance {
                samples: 7,
                normalization: IsNormalization::SelfNormalized
            })
        );
        assert!(UpdateMode::parse(Some("importance"), Some(0), None).is_err());
        let e = UpdateMode::parse(Some("magic"), None, None).unwrap_err();
        assert!(e.contains("frozen, importance or exact"), "{e}");
        assert!(UpdateMode::parse(Some("is"), None, Some("half")).is_err());
    }
}
