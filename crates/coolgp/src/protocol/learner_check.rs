//! Checks that a restored learner's caches fit the agent they are restored into (spec §4,
//! §9): a checkpoint is data from disk, so a wrong shape must be an error, never an
//! out-of-bounds index on the next block.

use faer::Mat;

use crate::error::{ensure_dim, ensure_finite, Error, Result};
use crate::learn::{Learner, UpdateMode};

/// Checks a learner against the update mode and the sizes `m` (inducing inputs), `dz` (d')
/// and `d` (input dimension) of the agent.
///
/// # Errors
/// [`Error::InvalidConfig`] when the learner is of another mode (or another sample count or
/// normalization) than `mode`, [`Error::DimensionMismatch`] for a cache of the wrong shape,
/// [`Error::NonFinite`] for NaN or infinity in a cache; [`Error::InvalidConfig`] for an exact
/// block's robust weight outside `[0, 1]`.
pub(crate) fn check_learner(
    learner: &Learner,
    mode: UpdateMode,
    m: usize,
    dz: usize,
    d: usize,
) -> Result<()> {
    match (learner, mode) {
        (Learner::Frozen(st), UpdateMode::Frozen) => {
            check_mat("frozen ψ̄2 cache (m)", &st.psi2, m, m)?;
            ensure_dim("frozen Ψ̄1ᵀy cache (m)", m, st.psi1_y.len())?;
            ensure_finite("frozen Ψ̄1ᵀy cache", &st.psi1_y)?;
            ensure_finite("frozen yᵀy", &[st.yty])
        }
        (
            Learner::Importance(c),
            UpdateMode::Importance {
                samples,
                normalization,
            },
        ) => {
            if c.normalization != normalization {
                return Err(Error::InvalidConfig(
                    "snapshot importance normalization differs from the agent's".into(),
                ));
            }
            ensure_dim("importance samples", samples, c.samples.len())?;
            ensure_dim("importance Ā caches (one per sample)", samples, c.a.len())?;
            ensure_dim("importance b̄ caches (one per sample)", samples, c.b.len())?;
            for w in &c.samples {
                check_mat("importance sample W_t", w, dz, d)?;
            }
            for a in &c.a {
                check_mat("importance Ā cache (m)", a, m, m)?;
            }
            for b in &c.b {
                ensure_dim("importance b̄ cache (m)", m, b.len())?;
                ensure_finite("importance b̄ cache", b)?;
            }
            Ok(())
        }
        (Learner::Exact(blocks), UpdateMode::Exact) => {
            for (x, y, w) in blocks {
                ensure_dim("exact block columns (d)", d, x.ncols())?;
                ensure_dim("exact block targets (one per row)", x.nrows(), y.len())?;
                check_mat("exact block inputs", x, x.nrows(), d)?;
                ensure_finite("exact block targets", y)?;
                if let Some(w) = w {
                    ensure_dim("exact block weights (one per row)", y.len(), w.len())?;
                    if let Some(i) = w.iter().position(|v| !(0.0..=1.0).contains(v)) {
                        return Err(Error::InvalidConfig(format!(
                            "snapshot exact block weight {i} is {}, not in [0, 1]",
                            w[i]
                        )));
                    }
                }
            }
            Ok(())
        }
        _ => Err(Error::InvalidConfig(
            "snapshot learner is of another update mode than its configuration".into(),
        )),
    }
}

/// Checks the shape `[rows, cols]` of a cached matrix and that it is finite.
fn check_mat(what: &'static str, a: &Mat<f64>, rows: usize, cols: usize) -> Result<()> {
    ensure_dim(what, rows, a.nrows())?;
    ensure_dim(what, cols, a.ncols())?;
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            if !a[(i, j)].is_finite() {
                return Err(Error::NonFinite {
                    what,
                    index: i * a.ncols() + j,
                });
            }
        }
    }
    Ok(())
}
