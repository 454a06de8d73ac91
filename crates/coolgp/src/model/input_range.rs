//! The range of inputs the ψ statistics can take (spec §9: validate own data before it
//! touches any cache).
//!
//! The ψ statistics square the inputs and their projected moments `a = M x`,
//! `s = (Σ∘Σ)(x∘x)` (spec §2): an input of |x| ≈ 1e154 is finite, but `x²` overflows, ψ̄1
//! becomes NaN, and a NaN absorbed into the frozen cache poisons it for good. Such inputs are
//! refused up front. The bound [`MAX_ABS_INPUT`] leaves every square (≤ 1e200) and every
//! product of the gradients far from overflow; real inputs are standardized, |x| of order 1.

use faer::MatRef;

use crate::error::{Error, Result};
use crate::model::Projection;

/// Largest |value| accepted for an input and for its projected moments `a_i`, `s_i`.
pub const MAX_ABS_INPUT: f64 = 1e100;

/// Checks that every input of `x [n, d]` and its moments under `proj` are at most
/// [`MAX_ABS_INPUT`] in absolute value. Cost O(n d d'), small next to ψ̄2's O(n m² d').
///
/// # Errors
/// [`Error::OutOfRange`] naming the first offending input (flat index `row·d + column`) or
/// projected row; [`Error::DimensionMismatch`] if `x` does not have q(W)'s d columns.
pub fn check_input_range(proj: &Projection, x: MatRef<'_, f64>) -> Result<()> {
    crate::error::ensure_dim("input columns (d)", proj.d(), x.ncols())?;
    let (d, dz) = (x.ncols(), proj.d_latent());
    let mut row = vec![0.0; d];
    let (mut a, mut s) = (vec![0.0; dz], vec![0.0; dz]);
    let within = |v: f64| v.abs() <= MAX_ABS_INPUT;
    for r in 0..x.nrows() {
        for (j, v) in row.iter_mut().enumerate() {
            *v = x[(r, j)];
            if !within(*v) {
                return Err(Error::OutOfRange {
                    what: "inputs",
                    index: r * d + j,
                    limit: MAX_ABS_INPUT,
                });
            }
        }
        proj.moments_into(&row, &mut a, &mut s);
        if !a.iter().chain(&s).all(|v| within(*v)) {
            return Err(Error::OutOfRange {
                what: "projected inputs (row)",
                index: r,
                limit: MAX_ABS_INPUT,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Vocabulary;
    use faer::Mat;

    #[test]
    fn large_inputs_and_large_moments_are_out_of_range() {
        let vocab = Vocabulary::default_design(5, 2, 1).expect("design");
        let proj = vocab.initial_projection(3);
        let ok = Mat::from_fn(2, 3, |i, j| (i + j) as f64);
        assert_eq!(check_input_range(&proj, ok.as_ref()), Ok(()));
        let mut big = ok.clone();
        big[(1, 2)] = -1e154;
        assert_eq!(
            check_input_range(&proj, big.as_ref()),
            Err(Error::OutOfRange {
                what: "inputs",
                index: 5,
                limit: MAX_ABS_INPUT
            })
        );
        // Inputs at the bound pass on their own but their moment s = Σσ²x² does not when
        // σ² > 1/3 (three columns at 1e100: s ≥ 3σ²·1e200 > 1e100).
        let edge = Mat::from_fn(1, 3, |_, _| MAX_ABS_INPUT);
        assert!(matches!(
            check_input_range(&proj, edge.as_ref()),
            Err(Error::OutOfRange { index: 0, .. })
        ));
    }
}
