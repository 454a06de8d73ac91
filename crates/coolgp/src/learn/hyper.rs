//! The four block statistics behind σ_s and σ_n (spec §14) and their closed-form maximiser:
//! what [`crate::learn::BlockElbo`] returns alongside `L_D`, and what a fleet site sums.

/// Floor of the fused σ_s (spec §14).
const MIN_SIGMA_S: f64 = 1e-3;
/// Floor of the fused σ_n² (the prototype's; reached only by degenerate sums).
const MIN_SIGMA_N2: f64 = 1e-6;

/// The four block statistics behind σ_s and σ_n, in unit scale (spec §14):
/// `A = yᵀΨ̄1α`, `B = tr(GΨ̄2) + n`, `YY = yᵀy`, `N = n`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HyperStats {
    /// `A = yᵀΨ̄1α`.
    pub a: f64,
    /// `B = tr(GΨ̄2) + n`.
    pub b: f64,
    /// `YY = yᵀy`.
    pub yy: f64,
    /// `N`: data points.
    pub n: f64,
}

impl HyperStats {
    /// The four numbers in wire order `[A, B, YY, N]`.
    pub fn to_array(self) -> [f64; 4] {
        [self.a, self.b, self.yy, self.n]
    }

    /// From wire order `[A, B, YY, N]`.
    pub fn from_array(v: [f64; 4]) -> Self {
        Self {
            a: v[0],
            b: v[1],
            yy: v[2],
            n: v[3],
        }
    }

    /// `self = a·self + b·o`, number by number.
    pub(crate) fn axpby(&mut self, a: f64, o: &HyperStats, b: f64) {
        self.a = a * self.a + b * o.a;
        self.b = a * self.b + b * o.b;
        self.yy = a * self.yy + b * o.yy;
        self.n = a * self.n + b * o.n;
    }

    /// The closed-form maximiser of the data term with q(u) fixed: `(σ_s, σ_n)`, or `None`
    /// for sums that cannot come from data (`N ≤ 0`, `B ≤ 0`, non-finite).
    pub fn maximiser(&self) -> Option<(f64, f64)> {
        if !(self.n > 0.0 && self.b > 0.0 && self.a.is_finite() && self.yy.is_finite()) {
            return None;
        }
        let ss = (self.a / self.b).max(MIN_SIGMA_S);
        let sn2 = ((self.yy - 2.0 * ss * self.a + ss * ss * self.b) / self.n).max(MIN_SIGMA_N2);
        sn2.is_finite().then(|| (ss, sn2.sqrt()))
    }
}
