//! Robust learning where no member is at fault (issue 29, item 4; docs/ROBUST.md): each row
//! of a block enters the conjugate update with a weight `w_n ∈ (0, 1]` from its standardized
//! residual against the agent's predictive *before* the block is absorbed,
//!
//! ```text
//! r_n = (y_n − μ(x_n)) / sqrt(var_y(x_n)),   w_n = (1 + r_n²/c²)^(−1/2)
//! ```
//!
//! (RCGP's inverse multi-quadric weight, Altamirano et al. 2024), and its Gaussian likelihood
//! term is tempered by `w_n`: precision `w_n/σ_n²`, so the block adds `Σ_n w_n ψ2(x_n)/σ_n²`
//! to T1 and `Σ_n w_n y_n ψ1(x_n)/σ_n²` to T2 (generalized Bayes, still conjugate: q(u)'s
//! natural parameters and the messages keep their size and meaning). The same weights, held
//! constant within the block, scale the rows' terms of `L_D` and its gradient
//! ([`crate::learn::elbo::block_loglik_grad_weighted`]). Every cache that is re-evaluated
//! later keeps each row's weight from its arrival: the importance mode folds it into its
//! per-sample sums ([`crate::learn::ImportanceCache::absorb_weighted`]), the exact mode keeps
//! it beside its block ([`crate::learn::Learner::Exact`]), and under the fleet projection the
//! site window keeps it with the row ([`crate::learn::RecentBlocks`]), so every
//! re-evaluation tempers the row by the weight it got on arrival.

use crate::learn::elbo::BlockPsi;
use crate::model::natural::Posterior;
use crate::model::predict::{upper_dot, upper_weights};
use crate::model::{Projection, Vocabulary};

/// The default threshold c of the robust likelihood (measured: docs/ROBUST.md).
pub const DEFAULT_ROBUST_C: f64 = 3.0;

/// The likelihood through which a block's rows enter q(u) and `L_D`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Likelihood {
    /// Every row a Gaussian term with noise σ_n² (the paper; the default).
    #[default]
    Gaussian,
    /// Each row's Gaussian term tempered by its inverse multi-quadric weight (module docs).
    Robust {
        /// Threshold c on the standardized residual (finite, > 0): a row at `|r| = c` gets
        /// weight `1/√2`.
        c: f64,
    },
}

impl Likelihood {
    /// The names the command line knows, in the order of `--help`.
    pub const NAMES: [&'static str; 2] = ["gaussian", "robust"];

    /// The command-line name: `gaussian` or `robust`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Gaussian => "gaussian",
            Self::Robust { .. } => "robust",
        }
    }

    /// The likelihood of a command-line name, with threshold `c` for `robust` (default
    /// [`DEFAULT_ROBUST_C`]); `c` given with `gaussian` is refused (it would be ignored).
    ///
    /// # Errors
    /// A message naming the bad value and the accepted ones.
    pub fn parse(name: Option<&str>, c: Option<f64>) -> Result<Self, String> {
        let out = match name.unwrap_or("gaussian") {
            "gaussian" if c.is_some() => {
                return Err("--robust-c needs --likelihood robust".into());
            }
            "gaussian" => Self::Gaussian,
            "robust" => Self::Robust {
                c: c.unwrap_or(DEFAULT_ROBUST_C),
            },
            other => {
                return Err(format!(
                    "unknown --likelihood '{other}': use {}",
                    Self::NAMES.join(" or ")
                ))
            }
        };
        out.validate()?;
        Ok(out)
    }

    /// Checks the threshold.
    ///
    /// # Errors
    /// A message for a threshold c that is not finite and > 0.
    pub fn validate(self) -> Result<(), String> {
        match self {
            Self::Robust { c } if !(c.is_finite() && c > 0.0) => {
                Err(format!("--robust-c must be finite and > 0, got {c}"))
            }
            _ => Ok(()),
        }
    }
}

/// RCGP's inverse multi-quadric weight `(1 + r²/c²)^(−1/2)` of a standardized residual `r`:
/// 1 at `r = 0` (and exactly 1 for `c = ∞`), `≈ c/|r|` for `|r| ≫ c`.
pub fn imq_weight(r: f64, c: f64) -> f64 {
    let t = r / c;
    1.0 / (1.0 + t * t).sqrt()
}

/// The weights `w [n]` of the `n` rows whose ψ `bp` holds (under `proj`), with targets
/// `y [n]`, against the predictive of q(u) `post` (spec §5: `μ = ψ1 α`, `var_y = σ_s² −
/// tr(Bψ2) + αᵀψ2α − μ² + σ_n²`), threshold `c`. A row whose residual is not finite (a
/// degenerate predictive) keeps weight 1.
///
/// # Panics
/// If `bp` holds fewer than `y.len()` rows or another m than `vocab`'s (our own misuse).
#[track_caller]
pub(crate) fn row_weights(
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    bp: &BlockPsi,
    y: &[f64],
    c: f64,
) -> Vec<f64> {
    let m = vocab.m();
    assert!(bp.psi1.len() >= y.len() * m, "ψ of the rows");
    let (ss, sn2) = (proj.sigma_s(), proj.sigma_n() * proj.sigma_n());
    let w = upper_weights(m, |j, k| {
        post.alpha[j] * post.alpha[k] - 0.5 * (post.b[(j, k)] + post.b[(k, j)])
    });
    y.iter()
        .enumerate()
        .map(|(r, &yn)| {
            let psi1 = &bp.psi1[r * m..(r + 1) * m];
            let psi2 = &bp.psi2[r * m * m..(r + 1) * m * m];
            let mean = ss * crate::linalg::dot(psi1, &post.alpha);
            let q = upper_dot(psi2, &w, m) * ss * ss;
            let var_y = (ss * ss + q - mean * mean).max(0.0) + sn2;
            let res = (yn - mean) / var_y.sqrt();
            if res.is_finite() {
                imq_weight(res, c)
            } else {
                1.0
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "robust_tests.rs"]
mod agent_tests;

#[cfg(test)]
#[path = "robust_fleet_tests.rs"]
mod fleet_tests;

#[cfg(test)]
#[path = "robust_modes_tests.rs"]
mod modes_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_refuses_bad_thresholds() {
        assert_eq!(Likelihood::parse(None, None), Ok(Likelihood::Gaussian));
        assert_eq!(
            Likelihood::parse(Some("robust"), None),
            Ok(Likelihood::Robust {
                c: DEFAULT_ROBUST_C
            })
        );
        assert_eq!(
            Likelihood::parse(Some("robust"), Some(3.0)),
            Ok(Likelihood::Robust { c: 3.0 })
        );
        let e = Likelihood::parse(Some("student"), None).expect_err("unknown");
        assert!(e.contains("gaussian or robust"), "{e}");
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(
                Likelihood::parse(Some("robust"), Some(bad)).is_err(),
                "{bad}"
            );
        }
        assert!(Likelihood::parse(Some("gaussian"), Some(2.0)).is_err());
    }

    #[test]
    fn the_weight_is_one_at_zero_and_decays_like_c_over_r() {
        assert_eq!(imq_weight(0.0, 2.0), 1.0);
        assert_eq!(imq_weight(5.0, f64::INFINITY), 1.0);
        assert!((imq_weight(2.0, 2.0) - 0.5f64.sqrt()).abs() < 1e-15);
        let w = imq_weight(1e4, 2.0);
        assert!((w * 1e4 / 2.0 - 1.0).abs() < 1e-6, "{w}");
    }
}
