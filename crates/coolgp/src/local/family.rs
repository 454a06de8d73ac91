//! The families of the learned residual kernel (issue 28; docs/LOCAL.md §12a): how its
//! covariance falls with the scaled distance between two rows.
//!
//! Every family has the same parameters `[ln σ_r, ln σ_rn, ln ℓ_1..d]` and features
//! `u = x/ℓ` (per input), `r = ‖u − u'‖`:
//!
//! ```text
//! squared exponential  k = σ_r² exp(−r²/2)
//! Matérn 3/2           k = σ_r² (1 + √3 r) exp(−√3 r)
//! Matérn 5/2           k = σ_r² (1 + √5 r + 5r²/3) exp(−√5 r)
//! ```
//!
//! Write `k = σ_r² f(r)`. With `∂r/∂ln ℓ_k = −u_k²/r` (`u_k` the scaled difference in input
//! k), `∂k/∂ln ℓ_k = σ_r² g(r) u_k²` with `g(r) = −f'(r)/r`:
//!
//! ```text
//! squared exponential  g = exp(−r²/2)                  (= f)
//! Matérn 3/2           g = 3 exp(−√3 r)
//! Matérn 5/2           g = (5/3)(1 + √5 r) exp(−√5 r)
//! ```
//!
//! `g` is finite at `r = 0` (no division by r), where `u_k² = 0`: coincident rows add nothing
//! to a lengthscale's gradient, and nothing is NaN.
//!
//! The fourth family, the **sum** ([`ResidualFamily::Sum`], [`super::sum`]), is not a profile of
//! one distance: `σ_o² δ(a, a') + σ_s² f(r_s) + σ_l² f(r_l)`, a per-agent offset, a short-range
//! and a smooth squared exponential on two lengthscale sets, with `2d + 4` parameters. Its
//! [`ResidualFamily::unit`] and [`ResidualFamily::slope`] are each part's profile (the squared
//! exponential's).

use crate::simd::{dispatch, exp};

const SQRT3: f64 = 1.732_050_807_568_877_2;
const SQRT5: f64 = 2.236_067_977_499_79;

/// The family of the learned residual kernel (module doc). The fleet's fit on neighbourhood
/// groups chooses it with the parameters ([`super::select`]); an agent's own fit keeps its
/// kernel's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ResidualFamily {
    /// `σ_r² exp(−r²/2)`: infinitely smooth (the kernel before issue 28).
    #[default]
    SquaredExponential,
    /// Matérn ν = 3/2: `σ_r² (1 + √3 r) exp(−√3 r)`, once mean-square differentiable.
    Matern32,
    /// Matérn ν = 5/2: `σ_r² (1 + √5 r + 5r²/3) exp(−√5 r)`, twice.
    Matern52,
    /// A per-agent offset plus a short-range and a smooth squared exponential,
    /// `σ_o² δ(a, a') + σ_s² exp(−r_s²/2) + σ_l² exp(−r_l²/2)` ([`super::sum`]; parameters
    /// `[ln σ_s, ln σ_rn, ln ℓ^s_1..d, ln σ_o, ln σ_l, ln ℓ^l_1..d]`).
    Sum,
}

impl ResidualFamily {
    /// Every family, in the order of [`ResidualFamily::name`]'s list.
    pub const ALL: [Self; 4] = [
        Self::SquaredExponential,
        Self::Matern32,
        Self::Matern52,
        Self::Sum,
    ];

    /// The families that are a profile `σ_r² f(r)` of one scaled distance (all but the sum),
    /// with the parameters `[ln σ_r, ln σ_rn, ln ℓ_1..d]`.
    pub const STATIONARY: [Self; 3] = [Self::SquaredExponential, Self::Matern32, Self::Matern52];

    /// The command-line name (`se`, `matern32`, `matern52`, `sum`).
    pub fn name(self) -> &'static str {
        match self {
            Self::SquaredExponential => "se",
            Self::Matern32 => "matern32",
            Self::Matern52 => "matern52",
            Self::Sum => "sum",
        }
    }

    /// The number of parameters on `d` inputs: `2 + d` (`[ln σ_r, ln σ_rn, ln ℓ_1..d]`), or
    /// `2d + 4` for the sum ([`super::sum`]).
    pub fn param_len(self, d: usize) -> usize {
        match self {
            Self::Sum => 2 * d + 4,
            _ => 2 + d,
        }
    }

    /// The indices of the parameters that are log standard deviations (`ln σ`): `[0, 1]`
    /// (σ_r, σ_rn), for the sum also `2 + d`, `3 + d` (σ_o, σ_l). Adding `½ ln c` to each
    /// multiplies every covariance and the noise by c (the calibrated candidates).
    pub fn variance_params(self, d: usize) -> Vec<usize> {
        match self {
            Self::Sum => vec![0, 1, 2 + d, 3 + d],
            _ => vec![0, 1],
        }
    }

    /// Features per row of a learned kernel on `d` inputs: `x/ℓ` (`d`), for the sum
    /// `[x/ℓ^s, x/ℓ^l]` (`2d`).
    pub fn feature_len(self, d: usize) -> usize {
        match self {
            Self::Sum => 2 * d,
            _ => d,
        }
    }

    /// The family of a name ([`ResidualFamily::name`]), `None` for another string.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The Matérn smoothness ν (1.5, 2.5); `None` for the squared exponential (ν → ∞) and
    /// the sum.
    pub fn smoothness(self) -> Option<f64> {
        match self {
            Self::SquaredExponential | Self::Sum => None,
            Self::Matern32 => Some(1.5),
            Self::Matern52 => Some(2.5),
        }
    }

    /// The Matérn family of smoothness `nu` ([`ResidualFamily::smoothness`]); `None` for any
    /// other value.
    pub fn from_smoothness(nu: f64) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.smoothness() == Some(nu))
    }

    /// `f(r)` at `d2 = r²` (module doc): the unit kernel, 1 at `r = 0` (the sum: each part's,
    /// the squared exponential's).
    pub fn unit(self, d2: f64) -> f64 {
        match self {
            Self::SquaredExponential | Self::Sum => (-0.5 * d2).exp(),
            Self::Matern32 => {
                let a = SQRT3 * d2.max(0.0).sqrt();
                (1.0 + a) * (-a).exp()
            }
            Self::Matern52 => {
                let a = SQRT5 * d2.max(0.0).sqrt();
                (1.0 + a + a * a / 3.0) * (-a).exp()
            }
        }
    }

    /// `g(r) = −f'(r)/r` at `d2 = r²` (module doc): `∂k/∂ln ℓ_k = σ_r² g u_k²`; finite at 0.
    pub fn slope(self, d2: f64) -> f64 {
        match self {
            Self::SquaredExponential | Self::Sum => (-0.5 * d2).exp(),
            Self::Matern32 => 3.0 * (-SQRT3 * d2.max(0.0).sqrt()).exp(),
            Self::Matern52 => {
                let a = SQRT5 * d2.max(0.0).sqrt();
                (5.0 / 3.0) * (1.0 + a) * (-a).exp()
            }
        }
    }

    /// `v_i = s · f(√v_i)` in place (`v` squared scaled distances), with the vectorized
    /// exponential: the squared exponential's is the residual kernel's
    /// `scaled_exp_in_place`, bit for bit.
    pub(crate) fn unit_in_place(self, v: &mut [f64], s: f64) {
        match self {
            Self::SquaredExponential | Self::Sum => se_in_place(v, s),
            Self::Matern32 => matern32_in_place(v, s),
            Self::Matern52 => matern52_in_place(v, s),
        }
    }

    /// `g_i = g(√d2_i)` for squared distances `d2` into `g` (same length), with the
    /// vectorized exponential.
    pub(crate) fn slope_into(self, d2: &[f64], g: &mut [f64]) {
        match self {
            Self::SquaredExponential | Self::Sum => {
                g.copy_from_slice(d2);
                se_in_place(g, 1.0);
            }
            Self::Matern32 => matern32_slope(d2, g),
            Self::Matern52 => matern52_slope(d2, g),
        }
    }
}

dispatch! {
    /// `v_i = s · exp(−½ v_i)` in place.
    fn se_in_place(v: &mut [f64], s: f64) {
        for x in v.iter_mut() {
            *x = s * exp(-0.5 * *x);
        }
    }
}

dispatch! {
    /// `v_i = s · (1 + a) exp(−a)`, `a = √3 √v_i`, in place.
    fn matern32_in_place(v: &mut [f64], s: f64) {
        for x in v.iter_mut() {
            let a = SQRT3 * x.max(0.0).sqrt();
            *x = s * (1.0 + a) * exp(-a);
        }
    }
}

dispatch! {
    /// `v_i = s · (1 + a + a²/3) exp(−a)`, `a = √5 √v_i`, in place.
    fn matern52_in_place(v: &mut [f64], s: f64) {
        for x in v.iter_mut() {
            let a = SQRT5 * x.max(0.0).sqrt();
            *x = s * (1.0 + a + a * a / 3.0) * exp(-a);
        }
    }
}

dispatch! {
    /// `g_i = 3 exp(−√3 √d2_i)`.
    fn matern32_slope(d2: &[f64], g: &mut [f64]) {
        for (o, x) in g.iter_mut().zip(d2) {
            *o = 3.0 * exp(-SQRT3 * x.max(0.0).sqrt());
        }
    }
}

dispatch! {
    /// `g_i = (5/3)(1 + a) exp(−a)`, `a = √5 √d2_i`.
    fn matern52_slope(d2: &[f64], g: &mut [f64]) {
        for (o, x) in g.iter_mut().zip(d2) {
            let a = SQRT5 * x.max(0.0).sqrt();
            *o = (5.0 / 3.0) * (1.0 + a) * exp(-a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_of_each_family() {
        // Reference: docs/LOCAL.md §12a; at r = 1: e^{−1/2}, (1 + √3)e^{−√3},
        // (1 + √5 + 5/3)e^{−√5}; every family is 1 at r = 0.
        let want = [
            (ResidualFamily::SquaredExponential, 0.606_530_659_712_633_4),
            (ResidualFamily::Matern32, 0.483_357_724_596_507_7),
            (ResidualFamily::Matern52, 0.523_994_108_831_820_3),
        ];
        for (f, v) in want {
            assert!((f.unit(1.0) - v).abs() < 1e-15, "{f:?}: {}", f.unit(1.0));
            assert_eq!(f.unit(0.0), 1.0);
            let mut col = [1.0, 0.0, 4.0];
            f.unit_in_place(&mut col, 2.0);
            for (c, d2) in col.iter().zip([1.0, 0.0, 4.0]) {
                assert!((c - 2.0 * f.unit(d2)).abs() < 1e-15, "{f:?} {d2}");
            }
        }
    }

    #[test]
    fn the_slope_is_minus_the_derivative_over_r_and_finite_at_zero() {
        // g(r) = −f'(r)/r by central differences in r.
        for f in ResidualFamily::ALL {
            for r in [0.05f64, 0.4, 1.0, 2.5] {
                let h = 1e-6;
                let fd = (f.unit((r + h) * (r + h)) - f.unit((r - h) * (r - h))) / (2.0 * h);
                let g = f.slope(r * r);
                assert!(
                    (g + fd / r).abs() < 1e-7,
                    "{f:?} r = {r}: {g} vs {}",
                    -fd / r
                );
                let mut out = [0.0];
                f.slope_into(&[r * r], &mut out);
                assert!((out[0] - g).abs() < 1e-14);
            }
            assert!(f.slope(0.0).is_finite() && f.slope(0.0) > 0.0, "{f:?}");
        }
    }

    #[test]
    fn names_and_smoothness_round_trip() {
        for f in ResidualFamily::ALL {
            assert_eq!(ResidualFamily::from_name(f.name()), Some(f));
            if let Some(nu) = f.smoothness() {
                assert_eq!(ResidualFamily::from_smoothness(nu), Some(f));
            }
        }
        assert_eq!(ResidualFamily::from_name("rbf"), None);
        assert_eq!(ResidualFamily::from_name("sum"), Some(ResidualFamily::Sum));
        assert_eq!(ResidualFamily::Sum.param_len(3), 10);
        assert_eq!(ResidualFamily::Matern32.param_len(3), 5);
        assert_eq!(ResidualFamily::Sum.variance_params(3), vec![0, 1, 5, 6]);
        assert_eq!(ResidualFamily::from_smoothness(0.5), None);
    }
}
