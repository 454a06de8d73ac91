//! The block composite likelihood of the learned residual kernel over groups of nearby rows
//! (issue 28; docs/LOCAL.md §11), and the groups' leave-one-out score.
//!
//! With groups `b = 1..G` of rows `x_b [g_b, d]`, residuals `r_b [g_b]` and
//! `A_b = σ_r² E_b + σ_rn² I` (`E_b` the group's unit ARD kernel of a [`ResidualFamily`],
//! `E_ij = f(r_ij)`, `r_ij` the distance of the rows scaled by the lengthscales):
//!
//! ```text
//! CL(p)      = Σ_b [ −½ r_bᵀ A_b⁻¹ r_b − ½ ln|A_b| − (g_b/2) ln 2π ]
//! ∂CL/∂p     = Σ_b ½ tr((α_b α_bᵀ − A_b⁻¹) ∂A_b/∂p),   α_b = A_b⁻¹ r_b
//! ```
//!
//! with `∂A_b/∂ln σ_r = 2σ_r² E_b`, `∂A_b/∂ln σ_rn = 2σ_rn² I` and
//! `∂A_b,ij/∂ln ℓ_k = σ_r² g(r_ij) (x_ik − x_jk)²/ℓ_k²` (`g = −f'/r`, [`super::family`]; the
//! derivatives of [`super::kernel::ResidualKernel::log_marginal`], block by block): each
//! block is exact, the blocks are treated as independent. It costs `O(Σ g_b³)` a step instead of
//! the pooled fit's `O(n³)`, so a fit sees thousands of rows for the price of a few hundred.
//!
//! The score of a kernel on held-out groups is the leave-one-out predictive density of every
//! row given the rest of its group (the closed form of Sundararajan & Keerthi 2001):
//! `μ_i = r_i − α_i/[A⁻¹]_ii`, `v_i = 1/[A⁻¹]_ii` (with the noise), so
//! `ln N(r_i; μ_i, v_i) = −½ ln 2π + ½ ln [A⁻¹]_ii − ½ α_i²/[A⁻¹]_ii`.
//!
//! Each row carries the agent it came from ([`Groups::push_from`]); the sum family
//! ([`super::sum`]) uses it for its per-agent offset (`σ_o² δ(a, a')` within a block), the other
//! families ignore it.

use super::pool::HeldOut;
use super::ResidualFamily;
use crate::error::{ensure_dim, ensure_finite, Result};

/// Groups of rows: inputs `[n, d]` row-major, residuals `[n]`, each row's agent `[n]`, and
/// where each group starts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Groups {
    d: usize,
    x: Vec<f64>,
    r: Vec<f64>,
    agents: Vec<u64>,
    starts: Vec<usize>,
}

impl Groups {
    /// No group, rows of width `d`.
    pub fn new(d: usize) -> Self {
        Self {
            d,
            starts: vec![0],
            ..Self::default()
        }
    }

    /// Appends one group of `r.len()` rows `x [g·d]`, all of one agent (agent 0; for rows of
    /// several agents, [`Groups::push_from`]); a group of fewer than 2 rows is left out (it
    /// says nothing about a covariance).
    ///
    /// # Errors
    /// [`crate::Error::DimensionMismatch`] if `x` does not hold `r.len()` rows of `d`,
    /// [`crate::Error::NonFinite`] for a non-finite value.
    pub fn push(&mut self, x: &[f64], r: &[f64]) -> Result<()> {
        self.push_from(x, r, &vec![0; r.len()])
    }

    /// [`Groups::push`] with each row's agent `agents [g]` (any ids; equal ids are one agent).
    ///
    /// # Errors
    /// As [`Groups::push`], and [`crate::Error::DimensionMismatch`] if `agents` does not hold
    /// one id per row.
    pub fn push_from(&mut self, x: &[f64], r: &[f64], agents: &[u64]) -> Result<()> {
        ensure_dim("local fit group rows", r.len() * self.d, x.len())?;
        ensure_dim("local fit group agents", r.len(), agents.len())?;
        ensure_finite("local fit group rows", x)?;
        ensure_finite("local fit group residuals", r)?;
        if r.len() >= 2 {
            self.x.extend_from_slice(x);
            self.r.extend_from_slice(r);
            self.agents.extend_from_slice(agents);
            self.starts.push(self.r.len());
        }
        Ok(())
    }

    /// Groups held.
    pub fn len(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// True with no group.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows over all groups.
    pub fn rows(&self) -> usize {
        self.r.len()
    }

    /// The rows' width d.
    pub fn d(&self) -> usize {
        self.d
    }

    /// Group `b`: `(x [g·d], r [g])`.
    pub fn group(&self, b: usize) -> (&[f64], &[f64]) {
        let (s, e) = (self.starts[b], self.starts[b + 1]);
        (&self.x[s * self.d..e * self.d], &self.r[s..e])
    }

    /// Group `b`'s rows' agents `[g]`.
    pub fn group_agents(&self, b: usize) -> &[u64] {
        &self.agents[self.starts[b]..self.starts[b + 1]]
    }

    /// Every residual, in group order.
    pub fn residuals(&self) -> &[f64] {
        &self.r
    }
}

/// `CL(p)` and its gradient over `groups` (module doc) under a kernel of `family`,
/// `p = [ln σ_r, ln σ_rn, ln ℓ_1..d]` (the sum: [`super::sum`]'s `2d + 4`, each block with its
/// rows' agents). `None` if a block cannot be factored or `p` has the wrong length.
pub fn log_likelihood(
    family: ResidualFamily,
    p: &[f64],
    groups: &Groups,
) -> Option<(f64, Vec<f64>)> {
    if p.len() != family.param_len(groups.d) {
        return None;
    }
    if family == ResidualFamily::Sum {
        return sum_log_likelihood(p, groups);
    }
    let mut total = 0.0;
    let mut grad = vec![0.0; p.len()];
    let mut ws = Workspace::new(family);
    for b in 0..groups.len() {
        let (x, r) = groups.group(b);
        total += ws.block(p, x, r, groups.d)?;
        // G = E for the squared exponential (bit for bit the kernel before the families).
        let slope = match family {
            ResidualFamily::SquaredExponential => &ws.e,
            _ => &ws.slope,
        };
        let (s2, n2) = ((2.0 * p[0]).exp(), (2.0 * p[1]).exp());
        let g = r.len();
        // W = ααᵀ − A⁻¹; ½ Σ_ij W_ij ∂A_ij over the lower triangle (W and ∂A symmetric: the
        // off-diagonal counted twice).
        for i in 0..g {
            let xi = &x[i * groups.d..];
            for j in 0..=i {
                let w = ws.alpha[i] * ws.alpha[j] - ws.ainv[i * g + j];
                let e = ws.e[i * g + j];
                if i == j {
                    grad[0] += s2 * w * e;
                    grad[1] += n2 * w;
                    continue;
                }
                grad[0] += 2.0 * s2 * w * e;
                let xj = &x[j * groups.d..];
                let gs = s2 * w * slope[i * g + j];
                for k in 0..groups.d {
                    let u = (xi[k] - xj[k]) * ws.inv_len[k];
                    grad[2 + k] += gs * u * u;
                }
            }
        }
    }
    Some((total, grad))
}

/// The leave-one-out score of `p` under a kernel of `family` on `groups`: every row's
/// `ln N(r_i; μ_i, v_i)` given the rest of its group, summed, and the mean of
/// `(r_i − μ_i)²/v_i` (module doc). `None` if a block cannot be factored, `p` has the wrong
/// length, or there is no group.
pub fn loo_score(family: ResidualFamily, p: &[f64], groups: &Groups) -> Option<HeldOut> {
    if p.len() != family.param_len(groups.d) || groups.is_empty() {
        return None;
    }
    let mut ws = Workspace::new(family);
    let (mut ld, mut sq) = (0.0, 0.0);
    let half_ln_2pi = 0.5 * (2.0 * std::f64::consts::PI).ln();
    for b in 0..groups.len() {
        let (x, r) = groups.group(b);
        let g = r.len();
        if family == ResidualFamily::Sum {
            ws.sum_block(p, x, r, groups.d, groups.group_agents(b))?;
        } else {
            ws.block(p, x, r, groups.d)?;
        }
        for i in 0..g {
            let a = ws.ainv[i * g + i];
            if a <= 0.0 {
                return None;
            }
            let e2 = ws.alpha[i] * ws.alpha[i] / a;
            ld += -half_ln_2pi + 0.5 * a.ln() - 0.5 * e2;
            sq += e2;
        }
    }
    let n = groups.rows() as f64;
    (ld.is_finite() && sq.is_finite()).then_some(HeldOut {
        log_density: ld,
        msr: sq / n,
    })
}

/// [`log_likelihood`] of the sum family ([`super::sum`], `p` of length `2d + 4`): each block
/// with its rows' agents, A and its gradient (`½ Σ_ij W_ij ∂A_ij/∂p`, `W = ααᵀ − A⁻¹`, the
/// lower triangle with the off-diagonal counted twice; [`super::sum::log_marginal`]'s terms)
/// in one [`Workspace`], no allocation per block.
fn sum_log_likelihood(p: &[f64], groups: &Groups) -> Option<(f64, Vec<f64>)> {
    let d = groups.d;
    let (mut total, mut grad) = (0.0, vec![0.0; p.len()]);
    let mut ws = Workspace::new(ResidualFamily::Sum);
    for b in 0..groups.len() {
        let (x, r) = groups.group(b);
        let agents = groups.group_agents(b);
        total += ws.sum_block(p, x, r, d, agents)?;
        let g = r.len();
        let ainv = |i: usize, j: usize| ws.ainv[i * g + j];
        let units = (&ws.pairs[..], &ws.pair_slopes[..]);
        super::sum::add_gradient(p, (x, d), Some(agents), (&ws.alpha, ainv), units, &mut grad);
    }
    total.is_finite().then_some((total, grad))
}

/// One block's quantities, reused across blocks (no allocation per block once the largest
/// block has been seen).
#[derive(Default)]
struct Workspace {
    family: ResidualFamily,
    inv_len: Vec<f64>,
    e: Vec<f64>,
    /// `g(r_ij)` (Matérn families only; the squared exponential's is `e`).
    slope: Vec<f64>,
    l: Vec<f64>,
    linv: Vec<f64>,
    ainv: Vec<f64>,
    alpha: Vec<f64>,
    /// The lower triangle's squared scaled distances, then its unit kernel (pair
    /// `i(i+1)/2 + j`), each exponential vectorized once per block.
    pairs: Vec<f64>,
    /// The lower triangle's Matérn slopes (pair order as `pairs`).
    pair_slopes: Vec<f64>,
}

impl Workspace {
    /// An empty workspace for kernels of `family`.
    fn new(family: ResidualFamily) -> Self {
        Self {
            family,
            ..Self::default()
        }
    }

    /// Fills `e` (unit kernel), `slope` (Matérn: `g(r)`), `ainv` (A⁻¹, full) and `alpha`
    /// (A⁻¹r) for the block `x [g·d]`, `r [g]`; returns its log likelihood. `None` if A is
    /// not positive definite.
    fn block(&mut self, p: &[f64], x: &[f64], r: &[f64], d: usize) -> Option<f64> {
        let g = r.len();
        let (s2, n2) = ((2.0 * p[0]).exp(), (2.0 * p[1]).exp());
        self.inv_len.clear();
        self.inv_len.extend(p[2..].iter().map(|l| (-l).exp()));
        self.e.resize(g * g, 0.0);
        self.l.resize(g * g, 0.0);
        let matern = self.family != ResidualFamily::SquaredExponential;
        if matern {
            self.slope.resize(g * g, 0.0);
        }
        self.pairs.clear();
        for i in 0..g {
            for j in 0..=i {
                let d2: f64 = (0..d)
                    .map(|k| {
                        let u = (x[i * d + k] - x[j * d + k]) * self.inv_len[k];
                        u * u
                    })
                    .sum();
                self.pairs.push(d2);
            }
        }
        if matern {
            self.pair_slopes.resize(self.pairs.len(), 0.0);
            self.family.slope_into(&self.pairs, &mut self.pair_slopes);
        }
        self.family.unit_in_place(&mut self.pairs, 1.0);
        let mut t = 0;
        for i in 0..g {
            for j in 0..=i {
                let e = self.pairs[t];
                if matern {
                    let s = self.pair_slopes[t];
                    self.slope[i * g + j] = s;
                    self.slope[j * g + i] = s;
                }
                self.e[i * g + j] = e;
                self.e[j * g + i] = e;
                self.l[i * g + j] = s2 * e + if i == j { n2 } else { 0.0 };
                t += 1;
            }
        }
        self.solve(r, g)
    }

    /// The sum family's block ([`super::sum`]'s kernel, the rows' `agents [g]`): `pairs` gets
    /// the short part's unit kernel and `pair_slopes` the long part's (pair `i(i+1)/2 + j`),
    /// `inv_len` the short then the long inverse lengthscales (`2d`), A into `l`, then as
    /// [`Self::block`]: A⁻¹, α and the log likelihood, with no allocation once sized.
    fn sum_block(
        &mut self,
        p: &[f64],
        x: &[f64],
        r: &[f64],
        d: usize,
        agents: &[u64],
    ) -> Option<f64> {
        let g = r.len();
        if agents.len() != g {
            return None;
        }
        let v = |k: usize| (2.0 * p[k]).exp();
        let (s2, n2, o2, l2) = (v(0), v(1), v(2 + d), v(3 + d));
        self.inv_len.clear();
        self.inv_len.extend(p[2..2 + d].iter().map(|l| (-l).exp()));
        self.inv_len
            .extend(p[4 + d..4 + 2 * d].iter().map(|l| (-l).exp()));
        let (is, il) = self.inv_len.split_at(d);
        super::sum::unit_pairs(x, d, (is, il), (&mut self.pairs, &mut self.pair_slopes));
        self.l.clear();
        self.l.resize(g * g, 0.0);
        let mut t = 0;
        for i in 0..g {
            for j in 0..=i {
                let offset = if agents[i] == agents[j] { o2 } else { 0.0 };
                let noise = if i == j { n2 } else { 0.0 };
                self.l[i * g + j] = s2 * self.pairs[t] + l2 * self.pair_slopes[t] + offset + noise;
                t += 1;
            }
        }
        self.solve(r, g)
    }

    /// From A's lower triangle in `l [g, g]`: its Cholesky factor in place, `ainv` (A⁻¹,
    /// full), `alpha` (A⁻¹r); returns the log likelihood. `None` if A is not positive
    /// definite.
    fn solve(&mut self, r: &[f64], g: usize) -> Option<f64> {
        if !cholesky(&mut self.l, g) {
            return None;
        }
        // L⁻¹ by forward substitution (lower), then A⁻¹ = L⁻ᵀ L⁻¹.
        let linv = &mut self.linv;
        linv.clear();
        linv.resize(g * g, 0.0);
        for c in 0..g {
            for i in c..g {
                let mut s = if i == c { 1.0 } else { 0.0 };
                for k in c..i {
                    s -= self.l[i * g + k] * linv[k * g + c];
                }
                linv[i * g + c] = s / self.l[i * g + i];
            }
        }
        self.ainv.resize(g * g, 0.0);
        for i in 0..g {
            for j in 0..=i {
                let s: f64 = (i..g).map(|k| linv[k * g + i] * linv[k * g + j]).sum();
                self.ainv[i * g + j] = s;
                self.ainv[j * g + i] = s;
            }
        }
        self.alpha.clear();
        self.alpha
            .extend((0..g).map(|i| (0..g).map(|j| self.ainv[i * g + j] * r[j]).sum::<f64>()));
        let log_det = 2.0 * (0..g).map(|i| self.l[i * g + i].ln()).sum::<f64>();
        let quad: f64 = r.iter().zip(&self.alpha).map(|(a, b)| a * b).sum();
        let lml = -0.5 * quad - 0.5 * log_det - 0.5 * g as f64 * (2.0 * std::f64::consts::PI).ln();
        lml.is_finite().then_some(lml)
    }
}

/// In-place Cholesky of the lower triangle of `a [g, g]` (row-major); false if not positive
/// definite.
fn cholesky(a: &mut [f64], g: usize) -> bool {
    for j in 0..g {
        let mut s = a[j * g + j];
        for k in 0..j {
            s -= a[j * g + k] * a[j * g + k];
        }
        if s <= 0.0 || !s.is_finite() {
            return false;
        }
        let ljj = s.sqrt();
        a[j * g + j] = ljj;
        for i in j + 1..g {
            let mut s = a[i * g + j];
            for k in 0..j {
                s -= a[i * g + k] * a[j * g + k];
            }
            a[i * g + j] = s / ljj;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::kernel::ResidualKernel;
    use crate::rng::Rng;

    /// Groups of random rows; with `coincident`, each group's second row repeats its first
    /// (r = 0 between them: the Matérn slope's special point).
    fn groups(seed: u64, sizes: &[usize], d: usize, coincident: bool) -> Groups {
        let mut rng = Rng::new(seed, 1);
        let mut g = Groups::new(d);
        for &n in sizes {
            let mut x: Vec<f64> = (0..n * d).map(|_| rng.normal()).collect();
            if coincident && n >= 2 {
                let first = x[..d].to_vec();
                x[d..2 * d].copy_from_slice(&first);
            }
            let r: Vec<f64> = (0..n)
                .map(|i| x[i * d].sin() + 0.3 * rng.normal())
                .collect();
            g.push(&x, &r).expect("group");
        }
        g
    }

    const P: [f64; 5] = [0.1, -0.9, 0.2, -0.3, 0.5];

    #[test]
    fn each_block_is_the_exact_log_marginal_and_the_sum_is_the_composite() {
        // Reference: docs/LOCAL.md §11, §12a (every family).
        for family in ResidualFamily::STATIONARY {
            let gs = groups(3, &[5, 9, 1, 16], 3, true);
            assert_eq!(gs.len(), 3, "a single row is left out");
            let k = ResidualKernel::learned(family, P.to_vec(), 3).expect("k");
            let (mut want, mut want_g) = (0.0, vec![0.0; 5]);
            for b in 0..gs.len() {
                let (x, r) = gs.group(b);
                let (l, g) = k.log_marginal(&P, x, r).expect("exact");
                want += l;
                want_g.iter_mut().zip(&g).for_each(|(a, b)| *a += b);
            }
            let (got, got_g) = log_likelihood(family, &P, &gs).expect("composite");
            assert!(
                (got - want).abs() < 1e-9 * want.abs(),
                "{family:?}: {got} {want}"
            );
            for (a, b) in got_g.iter().zip(&want_g) {
                assert!(
                    (a - b).abs() < 1e-8 * (1.0 + b.abs()),
                    "{family:?}: {got_g:?} {want_g:?}"
                );
            }
        }
    }

    #[test]
    fn the_gradient_matches_finite_differences() {
        // Reference: docs/LOCAL.md §12a: ∂A_ij/∂ln ℓ_k = σ_r² g(r_ij) u_k²; coincident rows
        // (r = 0) in every group.
        for (family, coincident) in ResidualFamily::STATIONARY
            .into_iter()
            .flat_map(|f| [(f, false), (f, true)])
        {
            let gs = groups(5, &[7, 12], 3, coincident);
            let (_, g) = log_likelihood(family, &P, &gs).expect("composite");
            assert!(g.iter().all(|v| v.is_finite()), "{family:?}: {g:?}");
            for i in 0..P.len() {
                let h = 1e-6;
                let (mut a, mut b) = (P.to_vec(), P.to_vec());
                a[i] += h;
                b[i] -= h;
                let fd = (log_likelihood(family, &a, &gs).expect("a").0
                    - log_likelihood(family, &b, &gs).expect("b").0)
                    / (2.0 * h);
                assert!(
                    (fd - g[i]).abs() < 1e-6 * (1.0 + fd.abs()),
                    "{family:?} {coincident} {i}: {fd} {}",
                    g[i]
                );
            }
        }
    }

    #[test]
    fn the_leave_one_out_score_equals_refitting_without_the_row() {
        for family in ResidualFamily::STATIONARY {
            let gs = groups(9, &[6, 4], 3, false);
            let k = ResidualKernel::learned(family, P.to_vec(), 3).expect("k");
            let vocab = crate::model::Vocabulary::default_design(4, 2, 0).expect("vocab");
            let (mut ld, mut sq, mut n) = (0.0, 0.0, 0);
            for b in 0..gs.len() {
                let (x, r) = gs.group(b);
                for i in 0..r.len() {
                    let keep: Vec<usize> = (0..r.len()).filter(|&j| j != i).collect();
                    let xf: Vec<f64> = keep
                        .iter()
                        .flat_map(|&j| x[j * 3..j * 3 + 3].to_vec())
                        .collect();
                    let rf: Vec<f64> = keep.iter().map(|&j| r[j]).collect();
                    let h = crate::local::pool::held_out(
                        &k,
                        &vocab,
                        (&xf, &rf),
                        (&x[i * 3..i * 3 + 3], &r[i..=i]),
                    )
                    .expect("exact");
                    ld += h.log_density;
                    sq += h.msr;
                    n += 1;
                }
            }
            let got = loo_score(family, &P, &gs).expect("loo");
            assert!(
                (got.log_density - ld).abs() < 1e-9 * ld.abs(),
                "{family:?}: {got:?} {ld}"
            );
            assert!((got.msr - sq / n as f64).abs() < 1e-9, "{got:?}");
        }
    }

    #[test]
    fn bad_rows_are_refused_and_bad_parameters_give_none() {
        let se = ResidualFamily::SquaredExponential;
        let mut g = Groups::new(2);
        assert!(g.push(&[1.0, 2.0, 3.0], &[0.0, 1.0]).is_err());
        assert!(g.push(&[1.0, f64::NAN, 3.0, 4.0], &[0.0, 1.0]).is_err());
        assert!(g
            .push_from(&[1.0, 2.0, 3.0, 4.0], &[0.0, 1.0], &[1])
            .is_err());
        assert!(g.is_empty());
        g.push(&[0.0, 0.0, 0.0, 0.0], &[1.0, 1.0]).expect("push");
        assert!(
            log_likelihood(se, &[0.0, 0.0, 0.0], &g).is_none(),
            "wrong length"
        );
        // Two identical rows and no noise: A is singular.
        for family in ResidualFamily::ALL {
            assert!(log_likelihood(family, &[0.0, -40.0, 0.0, 0.0], &g).is_none());
        }
        assert!(loo_score(se, &[0.0, 0.0, 0.0, 0.0], &Groups::new(2)).is_none());
    }
}
