//! The sum family of the learned residual kernel (issue 28 item 2; docs/LOCAL.md §12a, "The
//! sum"): a per-agent offset, a shared short-range anomaly and a smooth part.
//!
//! On rows `(x, a)`, `x [d]` the inputs and `a` the agent the row belongs to:
//!
//! ```text
//! k((x, a), (x', a')) = σ_o² δ(a, a') + σ_s² exp(−r_s²/2) + σ_l² exp(−r_l²/2),   noise σ_rn²
//! r_s² = Σ_k (x_k − x'_k)²/(ℓ^s_k)²,   r_l² = Σ_k (x_k − x'_k)²/(ℓ^l_k)²
//! p = [ln σ_s, ln σ_rn, ln ℓ^s_1..d, ln σ_o, ln σ_l, ln ℓ^l_1..d]          (2d + 4)
//! ```
//!
//! The first `2 + d` entries mean what they mean in every other family (the short part's scale
//! and lengthscales stand where the single kernel's are), so a sum kernel's
//! [`super::ResidualKernel::input_scale`] (the spread policy's metric, the claimed rows of a
//! group) is its short part's. The derivatives of `A = K + σ_rn² I`:
//!
//! ```text
//! ∂A/∂ln σ_s = 2σ_s² E_s      ∂A/∂ln ℓ^s_k = σ_s² E_s ∘ D^s_k     ∂A/∂ln σ_rn = 2σ_rn² I
//! ∂A/∂ln σ_o = 2σ_o² S        ∂A/∂ln σ_l  = 2σ_l² E_l             ∂A/∂ln ℓ^l_k = σ_l² E_l ∘ D^l_k
//! ```
//!
//! with `E_s, E_l` the parts' unit kernels, `D_k,ij = (x_ik − x_jk)²/ℓ_k²` and
//! `S_ij = δ(a_i, a_j)`; the log likelihood's gradient is `½ tr((ααᵀ − A⁻¹) ∂A/∂p)` as in
//! every family ([`super::kernel::ResidualKernel::log_marginal`]).
//!
//! **Where the agent id comes from.** In the fleet's fit on neighbourhood groups each row
//! carries its agent ([`super::composite::Groups::push_from`]): a group mixes rows of the
//! anchor's agent with the nearest rows of other agents, so the offset is identified by how
//! much more an agent's own rows agree than rows of other agents at the same distance. Inside
//! one agent's own residual GP (its memory, its answers, its own fit) every row is the agent's,
//! and a query point is taken to be "of" the answering agent: the offset is then a constant
//! `σ_o²` added to every covariance, prior variance included ([`cov`]; features carry no id).
//! The exact fits on rows without ids (an agent's own fit, §9's spaced pooled fit) take all
//! rows as one agent's.

use faer::Mat;

use super::kernel::factor_seq;
use super::ResidualFamily;
use crate::error::Result;

/// The sum kernel's scales and inverse lengthscales, read from `p` (module doc).
struct Parts<'a> {
    d: usize,
    s2: f64,
    n2: f64,
    o2: f64,
    l2: f64,
    p: &'a [f64],
}

impl<'a> Parts<'a> {
    /// `p` of length `2d + 4` (the caller checked it).
    fn new(p: &'a [f64], d: usize) -> Self {
        Self {
            d,
            s2: (2.0 * p[0]).exp(),
            n2: (2.0 * p[1]).exp(),
            o2: (2.0 * p[2 + d]).exp(),
            l2: (2.0 * p[3 + d]).exp(),
            p,
        }
    }

    /// The short and long parts' inverse lengthscales.
    fn inv_len(&self) -> (Vec<f64>, Vec<f64>) {
        let d = self.d;
        let inv = |s: &[f64]| s.iter().map(|l| (-l).exp()).collect::<Vec<f64>>();
        (inv(&self.p[2..2 + d]), inv(&self.p[4 + d..4 + 2 * d]))
    }
}

/// Features of a raw row `x [d]` under the sum kernel `p`: `[x/ℓ^s, x/ℓ^l]` (`2d`), appended
/// to `out`.
pub(crate) fn features(p: &[f64], x: &[f64], out: &mut Vec<f64>) {
    let d = x.len();
    out.extend(x.iter().zip(&p[2..2 + d]).map(|(v, l)| v * (-l).exp()));
    out.extend(
        x.iter()
            .zip(&p[4 + d..4 + 2 * d])
            .map(|(v, l)| v * (-l).exp()),
    );
}

/// `k(a, b)` of two feature rows ([`features`]) of one agent: `σ_o² + σ_s² f(r_s) + σ_l² f(r_l)`
/// (module doc: inside an agent's own GP every row and the query are its own). Exactly
/// symmetric.
pub(crate) fn cov(p: &[f64], a: &[f64], b: &[f64]) -> f64 {
    let d = a.len() / 2;
    let parts = Parts::new(p, d);
    let (ds, dl) = (sqdist(&a[..d], &b[..d]), sqdist(&a[d..], &b[d..]));
    parts.o2 + parts.s2 * (-0.5 * ds).exp() + parts.l2 * (-0.5 * dl).exp()
}

/// `out_i = k(row_i, fx)` ([`cov`]) for the feature rows `rows [n, 2d]` (row-major), each part's
/// exponential vectorized.
pub(crate) fn cov_column(p: &[f64], rows: &[f64], fx: &[f64], out: &mut [f64]) {
    let f = fx.len();
    let d = f / 2;
    let parts = Parts::new(p, d);
    let mut long = vec![0.0; out.len()];
    for ((o, l), r) in out.iter_mut().zip(&mut long).zip(rows.chunks_exact(f)) {
        *o = sqdist(&r[..d], &fx[..d]);
        *l = sqdist(&r[d..], &fx[d..]);
    }
    let se = ResidualFamily::SquaredExponential;
    se.unit_in_place(out, parts.s2);
    se.unit_in_place(&mut long, parts.l2);
    for (o, l) in out.iter_mut().zip(&long) {
        *o = parts.o2 + *o + l;
    }
}

/// [`solve_units`] without the unit kernels: `(log likelihood, α, A⁻¹)`.
#[cfg(test)]
fn solve(
    p: &[f64],
    d: usize,
    (x, r): (&[f64], &[f64]),
    agents: Option<&[u64]>,
) -> Result<(f64, Vec<f64>, Mat<f64>)> {
    solve_units(p, d, (x, r), agents).map(|(lml, alpha, ainv, _)| (lml, alpha, ainv))
}

/// The log likelihood `−½ rᵀA⁻¹r − ½ ln|A| − (n/2) ln 2π` of residuals `r [n]` at raw rows
/// `x [n·d]` of agents `agents [n]` (`None`: all one agent's) under the sum kernel `p`, with
/// `α = A⁻¹r`, `A⁻¹` (lower triangle) and the two parts' unit kernels of every pair
/// ([`unit_pairs`]): one dense factorization.
///
/// # Errors
/// [`crate::Error::NotPositiveDefinite`] if A cannot be factored.
#[allow(clippy::type_complexity)]
fn solve_units(
    p: &[f64],
    d: usize,
    (x, r): (&[f64], &[f64]),
    agents: Option<&[u64]>,
) -> Result<(f64, Vec<f64>, Mat<f64>, (Vec<f64>, Vec<f64>))> {
    let n = r.len();
    let parts = Parts::new(p, d);
    let (is, il) = parts.inv_len();
    let (mut es, mut el) = (Vec::new(), Vec::new());
    unit_pairs(x, d, (&is, &il), (&mut es, &mut el));
    let mut a = Mat::from_fn(n, n, |i, j| {
        if i < j {
            return 0.0;
        }
        let t = i * (i + 1) / 2 + j;
        let same = agents.is_none_or(|a| a[i] == a[j]);
        let offset = if same { parts.o2 } else { 0.0 };
        parts.s2 * es[t] + parts.l2 * el[t] + offset + if i == j { parts.n2 } else { 0.0 }
    });
    let ((alpha, log_det), ainv) = factor_seq(a.as_mut(), r)?;
    let quad: f64 = r.iter().zip(&alpha).map(|(a, b)| a * b).sum();
    let lml = -0.5 * quad - 0.5 * log_det - 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln();
    Ok((lml, alpha, ainv, (es, el)))
}

/// The short and long parts' unit kernels `exp(−½ Σ_k ((x_ik − x_jk)·inv_k)²)` of every pair
/// `i ≥ j` of the raw rows `x [n·d]` into `es`, `el` (cleared first), at `i(i+1)/2 + j` (the
/// lower triangle row by row), each part's exponential vectorized once for all pairs.
pub(crate) fn unit_pairs(
    x: &[f64],
    d: usize,
    (is, il): (&[f64], &[f64]),
    (es, el): (&mut Vec<f64>, &mut Vec<f64>),
) {
    let n = x.len() / d.max(1);
    es.clear();
    el.clear();
    for i in 0..n {
        let xi = &x[i * d..(i + 1) * d];
        for j in 0..=i {
            let xj = &x[j * d..(j + 1) * d];
            let (mut s, mut l) = (0.0, 0.0);
            for k in 0..d {
                let diff = xi[k] - xj[k];
                s += (diff * is[k]) * (diff * is[k]);
                l += (diff * il[k]) * (diff * il[k]);
            }
            es.push(s);
            el.push(l);
        }
    }
    let se = ResidualFamily::SquaredExponential;
    se.unit_in_place(es, 1.0);
    se.unit_in_place(el, 1.0);
}

/// Adds to `g [2d + 4]` the gradient `½ Σ_ij W_ij ∂A_ij/∂p` of the sum kernel `p` at the
/// rows `x [n·d]` of `agents` (`None`: one agent's), `W = ααᵀ − A⁻¹`, over the lower
/// triangle with the off-diagonal counted twice (module doc), from `α`, `A⁻¹`'s lower
/// triangle `ainv(i, j)` (`i ≥ j`) and the parts' unit kernels ([`unit_pairs`]). O(n² d).
pub(crate) fn add_gradient(
    p: &[f64],
    (x, d): (&[f64], usize),
    agents: Option<&[u64]>,
    (alpha, ainv): (&[f64], impl Fn(usize, usize) -> f64),
    (units_s, units_l): (&[f64], &[f64]),
    g: &mut [f64],
) {
    let parts = Parts::new(p, d);
    let (is, il) = parts.inv_len();
    let n = alpha.len();
    let mut t = 0;
    for i in 0..n {
        let xi = &x[i * d..(i + 1) * d];
        for j in 0..=i {
            let (es, el) = (units_s[t], units_l[t]);
            t += 1;
            let c = if i == j { 0.5 } else { 1.0 };
            let w = c * (alpha[i] * alpha[j] - ainv(i, j));
            g[0] += 2.0 * parts.s2 * w * es;
            g[3 + d] += 2.0 * parts.l2 * w * el;
            if agents.is_none_or(|a| a[i] == a[j]) {
                g[2 + d] += 2.0 * parts.o2 * w;
            }
            if i == j {
                g[1] += 2.0 * parts.n2 * w;
                continue;
            }
            let xj = &x[j * d..(j + 1) * d];
            for k in 0..d {
                let diff = xi[k] - xj[k];
                let (us, ul) = (diff * is[k], diff * il[k]);
                g[2 + k] += parts.s2 * w * es * us * us;
                g[4 + d + k] += parts.l2 * w * el * ul * ul;
            }
        }
    }
}

/// [`solve_units`]'s log likelihood and its gradient in `p` (module doc):
/// `½ Σ_ij W_ij ∂A_ij/∂p`, `W = ααᵀ − A⁻¹`, over the lower triangle with the off-diagonal
/// counted twice. O(n³/3 + n² d).
///
/// # Errors
/// As [`solve_units`].
pub fn log_marginal(
    p: &[f64],
    d: usize,
    (x, r): (&[f64], &[f64]),
    agents: Option<&[u64]>,
) -> Result<(f64, Vec<f64>)> {
    let (lml, alpha, ainv, (units_s, units_l)) = solve_units(p, d, (x, r), agents)?;
    let mut g = vec![0.0; 2 * d + 4];
    let ainv = |i: usize, j: usize| ainv[(i, j)];
    add_gradient(
        p,
        (x, d),
        agents,
        (&alpha, ainv),
        (&units_s, &units_l),
        &mut g,
    );
    Ok((lml, g))
}

/// The parameters of a start: the short part at `short` (log lengthscales `[d]`), the smooth
/// part at `long` (log lengthscales `[d]`), the residuals' variance `var` split as
/// `σ_rn² = var/2`, `σ_s² = σ_o² = σ_l² = var/6`.
pub fn start(short: &[f64], long: &[f64], var: f64) -> Vec<f64> {
    let third = 0.5 * (var / 6.0).max(1e-12).ln();
    let half = 0.5 * (var / 2.0).max(1e-12).ln();
    let mut p = vec![third, half];
    p.extend_from_slice(short);
    p.extend([third, third]);
    p.extend_from_slice(long);
    p
}

/// `Σ_k (a_k − b_k)²`.
fn sqdist(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(u, v)| (u - v) * (u - v)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::composite::{self, Groups};
    use crate::local::kernel::ResidualKernel;
    use crate::model::Vocabulary;
    use crate::rng::Rng;

    /// `[ln σ_s, ln σ_rn, ln ℓ^s (3), ln σ_o, ln σ_l, ln ℓ^l (3)]`.
    const P: [f64; 10] = [0.1, -0.9, -0.5, 0.2, -0.8, -0.3, 0.4, 0.6, 1.0, 0.9];

    fn rows(seed: u64, n: usize, d: usize) -> (Vec<f64>, Vec<f64>, Vec<u64>) {
        let mut rng = Rng::new(seed, 4);
        let mut x: Vec<f64> = (0..n * d).map(|_| rng.normal()).collect();
        // Row 3 repeats row 0 (r = 0 in both parts) at another agent.
        let first = x[..d].to_vec();
        x[3 * d..4 * d].copy_from_slice(&first);
        let r = (0..n)
            .map(|i| x[i * d].sin() + 0.3 * rng.normal())
            .collect();
        let agents = (0..n as u64).map(|i| i % 3).collect();
        (x, r, agents)
    }

    #[test]
    fn the_gradient_matches_finite_differences_with_and_without_agents() {
        // Reference: docs/LOCAL.md §12a, the sum (∂A/∂p of the module doc).
        let (d, n) = (3, 14);
        let (x, r, agents) = rows(21, n, d);
        for ids in [Some(&agents[..]), None] {
            let (_, g) = log_marginal(&P, d, (&x, &r), ids).expect("lml");
            for i in 0..P.len() {
                let h = 1e-5;
                let (mut a, mut b) = (P.to_vec(), P.to_vec());
                a[i] += h;
                b[i] -= h;
                let fd = (log_marginal(&a, d, (&x, &r), ids).expect("a").0
                    - log_marginal(&b, d, (&x, &r), ids).expect("b").0)
                    / (2.0 * h);
                assert!(
                    (fd - g[i]).abs() < 1e-6 * g[i].abs().max(1.0),
                    "{ids:?} parameter {i}: {} vs {fd}",
                    g[i]
                );
            }
        }
    }

    #[test]
    fn the_kernel_is_the_sum_of_its_parts_and_the_offset_acts_within_an_agent() {
        // σ_s = 1.5, σ_rn = 0.1, ℓ^s = (2, 0.5), σ_o = 0.5, σ_l = 0.8, ℓ^l = (10, 5); rows
        // (0.3, −0.1), (1.5, 0.1): r_s² = 0.36 + 0.16 = 0.52, r_l² = 0.0144 + 0.0016 = 0.016.
        let p = [
            1.5f64.ln(),
            0.1f64.ln(),
            2.0f64.ln(),
            0.5f64.ln(),
            0.5f64.ln(),
            0.8f64.ln(),
            10.0f64.ln(),
            5.0f64.ln(),
        ];
        let want = 0.25 + 2.25 * (-0.26f64).exp() + 0.64 * (-0.008f64).exp();
        let k = ResidualKernel::learned(ResidualFamily::Sum, p.to_vec(), 2).expect("kernel");
        let vocab = Vocabulary::default_design(4, 2, 0).expect("vocabulary");
        let (mut a, mut b) = (Vec::new(), Vec::new());
        k.features(&vocab, &[0.3, -0.1], &mut a);
        k.features(&vocab, &[1.5, 0.1], &mut b);
        assert_eq!(a.len(), 4);
        assert!((k.cov(&a, &b) - want).abs() < 1e-12, "{}", k.cov(&a, &b));
        // The prior variance σ_o² + σ_s² + σ_l².
        let prior = 0.25 + 2.25 + 0.64;
        assert!((k.cov(&a, &a) - prior).abs() < 1e-12);
        let mut col = [0.0; 2];
        k.cov_column(&[a.clone(), b.clone()].concat(), &b, &mut col);
        assert!((col[0] - want).abs() < 1e-12 && (col[1] - prior).abs() < 1e-12);
        // The exact likelihood of one agent's rows (no ids) is that of the kernel's A; with
        // the rows at two agents the offset leaves the cross covariance.
        let x = [0.3, -0.1, 1.5, 0.1];
        let r = [0.4, -0.2];
        let one = solve(&p, 2, (&x, &r), None).expect("one").0;
        let same = solve(&p, 2, (&x, &r), Some(&[7, 7])).expect("same").0;
        assert_eq!(one, same);
        let two = solve(&p, 2, (&x, &r), Some(&[7, 8])).expect("two").0;
        let det = |c: f64| (prior + 0.01) * (prior + 0.01) - c * c;
        let quad = |c: f64| {
            let v = prior + 0.01;
            (v * r[0] * r[0] - 2.0 * c * r[0] * r[1] + v * r[1] * r[1]) / det(c)
        };
        let lml = |c: f64| -0.5 * quad(c) - 0.5 * det(c).ln() - (2.0 * std::f64::consts::PI).ln();
        assert!((one - lml(want)).abs() < 1e-12, "{one} {}", lml(want));
        assert!((two - lml(want - 0.25)).abs() < 1e-12, "{two}");
        // The kernel's own log_marginal is the one-agent likelihood.
        let (l, _) = k.log_marginal(&p, &x, &r).expect("lml");
        assert!((l - one).abs() < 1e-12);
    }

    /// Groups of rows of several agents: each group's rows at agents `b, b + 1, b + 2`.
    fn groups(seed: u64, sizes: &[usize], d: usize) -> Groups {
        let mut g = Groups::new(d);
        for (b, &n) in sizes.iter().enumerate() {
            let (x, r, a) = rows(seed + b as u64, n, d);
            let a: Vec<u64> = a.iter().map(|v| v + b as u64).collect();
            g.push_from(&x, &r, &a).expect("group");
        }
        g
    }

    #[test]
    fn the_composite_likelihood_and_its_score_hold_block_by_block_with_agents() {
        // Reference: docs/LOCAL.md §11, §12a: each block the exact likelihood with its rows'
        // agents; the composite gradient by finite differences; the leave-one-out score equal
        // to refitting each block without the row.
        let sum = ResidualFamily::Sum;
        let gs = groups(31, &[6, 9, 5], 3);
        let (mut want, mut want_g) = (0.0, vec![0.0; P.len()]);
        for b in 0..gs.len() {
            let (x, r) = gs.group(b);
            let (l, g) = log_marginal(&P, 3, (x, r), Some(gs.group_agents(b))).expect("exact");
            want += l;
            want_g.iter_mut().zip(&g).for_each(|(a, b)| *a += b);
        }
        let (got, got_g) = composite::log_likelihood(sum, &P, &gs).expect("composite");
        assert!((got - want).abs() < 1e-9 * want.abs(), "{got} {want}");
        for (i, (a, b)) in got_g.iter().zip(&want_g).enumerate() {
            assert!((a - b).abs() < 1e-9 * (1.0 + b.abs()), "{i}: {a} {b}");
            let h = 1e-6;
            let (mut pa, mut pb) = (P.to_vec(), P.to_vec());
            pa[i] += h;
            pb[i] -= h;
            let fd = (composite::log_likelihood(sum, &pa, &gs).expect("a").0
                - composite::log_likelihood(sum, &pb, &gs).expect("b").0)
                / (2.0 * h);
            assert!((fd - a).abs() < 1e-6 * (1.0 + fd.abs()), "{i}: {fd} {a}");
        }
        // Leave one out: refit each block without the row, predict it (exact GP algebra).
        let (mut ld, mut n) = (0.0, 0);
        for b in 0..gs.len() {
            let (x, r) = gs.group(b);
            let ag = gs.group_agents(b);
            for i in 0..r.len() {
                let full = solve(&P, 3, (x, r), Some(ag)).expect("full");
                let keep: Vec<usize> = (0..r.len()).filter(|&j| j != i).collect();
                let xf: Vec<f64> = keep
                    .iter()
                    .flat_map(|&j| x[j * 3..j * 3 + 3].to_vec())
                    .collect();
                let rf: Vec<f64> = keep.iter().map(|&j| r[j]).collect();
                let af: Vec<u64> = keep.iter().map(|&j| ag[j]).collect();
                // ln p(r) − ln p(r without i) = ln p(r_i | the rest).
                let rest = solve(&P, 3, (&xf, &rf), Some(&af)).expect("rest");
                ld += full.0 - rest.0;
                n += 1;
            }
        }
        let got = composite::loo_score(sum, &P, &gs).expect("loo");
        assert!(
            (got.log_density - ld).abs() < 1e-9 * ld.abs(),
            "{got:?} {ld} ({n} rows)"
        );
    }

    #[test]
    fn a_start_splits_the_variance_over_the_parts() {
        let p = start(&[0.1, 0.2], &[1.0, 2.0], 6.0);
        assert_eq!(p.len(), ResidualFamily::Sum.param_len(2));
        assert!(((2.0 * p[0]).exp() - 1.0).abs() < 1e-12);
        assert!(((2.0 * p[1]).exp() - 3.0).abs() < 1e-12);
        assert_eq!((p[2], p[3], p[6], p[7]), (0.1, 0.2, 1.0, 2.0));
        assert!(((2.0 * p[4]).exp() - 1.0).abs() < 1e-12 && p[4] == p[5]);
    }
}
