//! The union correction (issue 19, docs/LOCAL.md §7): one exact residual GP on the pooled
//! memory rows of several agents, answered by one of them.
//!
//! An agent's own answer corrects the global model with the GP on its own rows (`answer.rs`).
//! The union correction conditions the same residual GP on the rows of several agents at
//! once: with the pooled rows `U = B_1 ∪ … ∪ B_k` (inputs `x_U [n, d]`, targets `y_U [n]`,
//! `n = Σ n_i`), the answering agent's residual kernel k_r and noise σ_rn², its global model
//! (`μ_g`, q(W), q(u)), `A_U = K_r(U, U) + σ_rn² I` and `c = A_U⁻¹ k_r(U, x*)`:
//!
//! ```text
//! residual_mean = k_r(x*, U) A_U⁻¹ (y_U − μ_g(U))
//! residual_var  = k_r(x*, x*) − k_r(x*, U) A_U⁻¹ k_r(U, x*)
//! global_var    = [var_f(x*) − ρ(x*)] − 2 cᵀΨ_U Σ φ* + cᵀΨ_U Σ Ψ_Uᵀ c
//! ```
//!
//! i.e. exactly the agent's own answer (docs/LOCAL.md §2–§3) with its memory replaced by `U`:
//! the same code ([`super::answer`]) on a fresh factor of `A_U` (one Cholesky, O(n³/3), with
//! the bounded jitter schedule of [`super::factor::Factor::refactor`]), so one union answers
//! any number of query rows for one factorization. The residuals `y_U − μ_g(U)` are formed
//! against the answering agent's global model, the one its answer adds the correction to (in a
//! fused fleet every agent's). With one agent's own memory as `U` the answer is that agent's
//! own ([`crate::Agent::local_answers`]).
//!
//! [`UnionRule`] names the rule that picks the agents. It is not a [`super::FleetRule`]: a
//! fleet rule is computable from the agents' answers alone ([`super::combine`]); the union
//! needs their raw rows (what that reveals: docs/LOCAL.md §6), so it is evaluated by a driver
//! that holds them (the simulator).

use faer::{Mat, MatRef};

use super::answer::{corrected, memory_terms, Corrector, LocalAnswer};
use super::factor::{factor_features, Factor};
use super::memory::Memory;
use super::ResidualKernel;
use crate::error::{ensure_dim, ensure_finite, Result};
use crate::model::predict::predict;
use crate::model::{Posterior, Projection, Vocabulary};
use crate::protocol::{Agent, View};

/// The union rule: at each query point, the `k` agents whose own answers carry the largest
/// information gain `½ (ln v0_i − ln v_i)` about their residual
/// ([`LocalAnswer::information_gain`]) pool their memory rows, and the most informative of
/// them answers with the exact residual GP on the pooled rows ([`answers`]). Named
/// `union-k`. Not a [`super::FleetRule`]: it needs the agents' rows, not only their answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UnionRule {
    k: usize,
}

impl UnionRule {
    /// The rule pooling the rows of the `k` most informative agents; `None` for `k = 0`.
    pub fn new(k: usize) -> Option<Self> {
        (k > 0).then_some(Self { k })
    }

    /// Agents pooled per query point, k ≥ 1.
    pub fn k(self) -> usize {
        self.k
    }

    /// The name, `union-k` (e.g. `union-3`).
    pub fn name(self) -> String {
        format!("union-{}", self.k)
    }

    /// The rule of a name ([`UnionRule::name`]), `None` for another string.
    pub fn from_name(name: &str) -> Option<Self> {
        name.strip_prefix("union-")
            .filter(|k| k.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|k| k.parse().ok())
            .and_then(Self::new)
    }
}

/// Memory rows pooled from several agents, in the order they were added: inputs
/// `x [n, d]` (row-major) and targets `y [n]`, all finite.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UnionRows {
    d: usize,
    x: Vec<f64>,
    y: Vec<f64>,
}

impl UnionRows {
    /// No rows yet, of width `d`.
    pub fn new(d: usize) -> Self {
        Self {
            d,
            x: Vec::new(),
            y: Vec::new(),
        }
    }

    /// Rows pooled.
    pub fn len(&self) -> usize {
        self.y.len()
    }

    /// True with no row.
    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }

    /// The input width d.
    pub fn d(&self) -> usize {
        self.d
    }

    /// The inputs as a matrix `x [n, d]`.
    pub fn x(&self) -> Mat<f64> {
        let d = self.d;
        Mat::from_fn(self.len(), d, |i, j| self.x[i * d + j])
    }

    /// The targets `y [n]`.
    pub fn y(&self) -> &[f64] {
        &self.y
    }

    /// Appends every row of an agent's memory (its raw inputs and targets).
    ///
    /// # Errors
    /// [`crate::Error::DimensionMismatch`] for a memory of another width.
    pub fn push_memory(&mut self, memory: &Memory) -> Result<()> {
        ensure_dim("union rows (memory width)", self.d, memory.d())?;
        self.x.extend_from_slice(memory.x());
        self.y.extend_from_slice(memory.y());
        Ok(())
    }

    /// Appends rows `x [b, d]`, `y [b]`.
    ///
    /// # Errors
    /// [`crate::Error::DimensionMismatch`] for another width or length,
    /// [`crate::Error::NonFinite`] for a non-finite value (nothing is appended then).
    pub fn push(&mut self, x: MatRef<'_, f64>, y: &[f64]) -> Result<()> {
        ensure_dim("union rows (width)", self.d, x.ncols())?;
        ensure_dim("union rows (targets)", x.nrows(), y.len())?;
        let flat: Vec<f64> = (0..x.nrows())
            .flat_map(|i| (0..self.d).map(move |j| x[(i, j)]))
            .collect();
        ensure_finite("union rows (inputs)", &flat)?;
        ensure_finite("union rows (targets)", y)?;
        self.x.extend(flat);
        self.y.extend_from_slice(y);
        Ok(())
    }
}

/// The answers at the rows of `x [q, d]` with the global model of q(W) `proj` and q(u)
/// `post`, corrected by the exact residual GP with kernel `kernel` on the pooled rows `rows`
/// (module doc): one factorization of `A_U [n, n]` (O(n³/3)), the rows' part
/// `G = L⁻¹Ψ̄_U [n, m]`, `z = L⁻¹(y_U − μ_g(U))` (O(n m d' + n² m)), then per query row what
/// an agent's own answer costs with n memory rows. With no row, the global model alone
/// ([`LocalAnswer::global_only`]).
///
/// # Errors
/// [`crate::Error::DimensionMismatch`] when the shapes do not fit together;
/// [`crate::Error::NotPositiveDefinite`] when `A_U` cannot be factored (even with jitter) or
/// q(u) has no factor.
pub fn answers(
    kernel: &ResidualKernel,
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    rows: &UnionRows,
    x: MatRef<'_, f64>,
) -> Result<Vec<LocalAnswer>> {
    ensure_dim("union rows (width)", proj.d(), rows.d())?;
    ensure_dim("query rows (width)", proj.d(), x.ncols())?;
    if rows.is_empty() {
        let p = predict(vocab, proj, post, x)?;
        let sn2 = proj.sigma_n() * proj.sigma_n();
        return Ok((0..p.mean.len())
            .map(|i| LocalAnswer::global_only(p.mean[i], p.var_f[i], sn2))
            .collect());
    }
    let n = rows.len();
    let mut feats = Vec::with_capacity(n * kernel.feature_len(vocab.m()));
    for i in 0..n {
        kernel.features(vocab, &rows.x[i * rows.d..(i + 1) * rows.d], &mut feats);
    }
    let mut factor = Factor::default();
    factor_features(&mut factor, kernel, &feats, n)?;
    let (g, z) = memory_terms(&factor, vocab, proj, post, rows.x().as_ref(), rows.y())?;
    let union = Corrector {
        kernel,
        feats: &feats,
        factor: &factor,
        g: g.as_ref(),
        z: &z,
    };
    Ok(corrected(&union, vocab, proj, post, x))
}

impl Agent {
    /// This agent's answers at the rows of `x [q, d]` with the chosen q(u), its residual kernel
    /// corrected by the exact residual GP on the pooled rows `rows` instead of its own memory
    /// ([`answers`]: the union correction, docs/LOCAL.md §7). With its own memory's rows as
    /// `rows`, [`Agent::local_answers`] (to rounding).
    ///
    /// # Errors
    /// As [`Agent::predict`]; [`crate::Error::DimensionMismatch`] for rows of another width;
    /// [`crate::Error::NotPositiveDefinite`] if the pooled rows' A cannot be factored.
    pub fn union_answers(
        &self,
        rows: &UnionRows,
        x: MatRef<'_, f64>,
        view: View,
    ) -> Result<Vec<LocalAnswer>> {
        self.check_inputs(x, None)?;
        let post = self.posterior(view)?;
        let kernel = self.local().kernel();
        answers(
            kernel,
            self.vocabulary(),
            self.learning().projection(),
            &post,
            rows,
            x,
        )
    }
}

#[cfg(test)]
mod tests {
    use faer::Mat;

    use super::super::answer::answers as own_answers;
    use super::super::tests::{dense, global, worst_gap};
    use super::super::{LocalConfig, LocalModel, MemoryPolicy, ResidualKind};
    use super::*;
    use crate::rng::Rng;

    /// A model of `n` random rows (all kept) under `kind`.
    #[allow(clippy::needless_update)]
    fn model(
        kind: ResidualKind,
        vocab: &Vocabulary,
        proj: &Projection,
        n: usize,
        rng: &mut Rng,
    ) -> LocalModel {
        let config = LocalConfig {
            capacity: n,
            policy: MemoryPolicy::Recent,
            kernel: kind,
            ..LocalConfig::default()
        };
        let mut m = LocalModel::new(config, vocab, proj, 1);
        let d = proj.d();
        let shift = 2.0 * rng.normal();
        let x = Mat::from_fn(n, d, |_, _| shift + rng.normal());
        let y: Vec<f64> = (0..n)
            .map(|i| x[(i, 0)].sin() + 0.3 * rng.normal())
            .collect();
        m.offer(vocab, x.as_ref(), &y);
        assert_eq!(m.len(), n);
        m
    }

    #[test]
    fn the_union_equals_a_dense_gp_on_the_stacked_rows() {
        // Reference: docs/LOCAL.md §3 (the estimator and its error variance) with the memory
        // replaced by the stacked rows of three agents (§7, the union correction).
        for seed in 0..3 {
            for kind in [ResidualKind::Learned, ResidualKind::GlobalResidual] {
                for point in [true, false] {
                    let mut rng = Rng::new(seed, 41);
                    let (vocab, proj, post) = global(point, &mut rng);
                    let parts: Vec<LocalModel> = [6, 4, 7]
                        .iter()
                        .map(|&n| model(kind, &vocab, &proj, n, &mut rng))
                        .collect();
                    // The kernel of the first agent, moved away from its start.
                    let params: Vec<f64> = parts[0]
                        .kernel()
                        .params()
                        .iter()
                        .map(|v| v + 0.2 * rng.normal())
                        .collect();
                    let mut kernel = parts[0].kernel().clone();
                    kernel.set_params(&params);
                    let mut rows = UnionRows::new(proj.d());
                    for p in &parts {
                        rows.push_memory(p.memory()).expect("width");
                    }
                    // The same rows as one agent's memory, for the dense computation.
                    let config = LocalConfig {
                        capacity: 17,
                        ..*parts[0].config()
                    };
                    let mut all = LocalModel::new(config, &vocab, &proj, 1);
                    all.set_kernel_params(&vocab, &params).expect("kernel");
                    all.offer(&vocab, rows.x().as_ref(), rows.y());
                    assert_eq!(all.len(), 17);
                    let xq = Mat::from_fn(5, proj.d(), |_, _| 1.5 * rng.normal());
                    let got =
                        answers(&kernel, &vocab, &proj, &post, &rows, xq.as_ref()).expect("union");
                    for (r, a) in got.iter().enumerate() {
                        let xs: Vec<f64> = (0..proj.d()).map(|j| xq[(r, j)]).collect();
                        let (mean, var, res_var) = dense(&all, &vocab, &proj, &post, &xs);
                        let tol = 1e-10;
                        let what = format!("{kind:?} point {point} seed {seed} row {r}");
                        assert!(
                            (a.mean() - mean).abs() < tol,
                            "{what}: mean {} vs {mean}",
                            a.mean()
                        );
                        assert!(
                            (a.var_f() - var).abs() < tol,
                            "{what}: var {} vs {var}",
                            a.var_f()
                        );
                        assert!(
                            (a.residual_var - res_var).abs() < tol,
                            "{what}: residual var"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_union_of_one_agent_is_its_own_answer() {
        // Reference: docs/LOCAL.md §7 (k = 1: the union is the agent's own memory).
        for kind in [ResidualKind::Learned, ResidualKind::GlobalResidual] {
            for point in [true, false] {
                let mut rng = Rng::new(7, 43);
                let (vocab, proj, post) = global(point, &mut rng);
                let own = model(kind, &vocab, &proj, 9, &mut rng);
                let mut rows = UnionRows::new(proj.d());
                rows.push_memory(own.memory()).expect("width");
                let xq = Mat::from_fn(6, proj.d(), |_, _| 1.5 * rng.normal());
                let got =
                    answers(own.kernel(), &vocab, &proj, &post, &rows, xq.as_ref()).expect("union");
                let want = own_answers(&own, &vocab, &proj, &post, xq.as_ref()).expect("own");
                for (a, w) in got.iter().zip(&want) {
                    let worst = worst_gap(a, w);
                    assert!(worst < 1e-10, "{kind:?} point {point}: off by {worst:e}");
                }
            }
        }
    }

    #[test]
    fn no_rows_is_the_global_model_and_bad_rows_are_refused() {
        let mut rng = Rng::new(3, 44);
        let (vocab, proj, post) = global(false, &mut rng);
        let own = model(ResidualKind::Learned, &vocab, &proj, 5, &mut rng);
        let xq = Mat::from_fn(4, proj.d(), |_, _| rng.normal());
        let none = answers(
            own.kernel(),
            &vocab,
            &proj,
            &post,
            &UnionRows::new(3),
            xq.as_ref(),
        )
        .expect("global");
        let p = predict(&vocab, &proj, &post, xq.as_ref()).expect("predict");
        for (a, i) in none.iter().zip(0..) {
            assert_eq!(
                (a.mean(), a.var_f(), a.residual_prior),
                (p.mean[i], p.var_f[i], 0.0)
            );
        }
        let mut rows = UnionRows::new(3);
        let bad = Mat::from_fn(2, 3, |i, _| if i == 1 { f64::NAN } else { 0.5 });
        assert!(rows.push(bad.as_ref(), &[0.0, 1.0]).is_err());
        assert!(rows.is_empty(), "a refused block appends nothing");
        assert!(rows
            .push(Mat::<f64>::zeros(2, 2).as_ref(), &[0.0, 1.0])
            .is_err());
        assert!(UnionRows::new(2).push_memory(own.memory()).is_err());
        assert!(answers(
            own.kernel(),
            &vocab,
            &proj,
            &post,
            &UnionRows::new(2),
            xq.as_ref()
        )
        .is_err());
    }

    #[test]
    fn union_rule_names_round_trip() {
        assert_eq!(UnionRule::new(0), None);
        let r = UnionRule::new(3).expect("k ≥ 1");
        assert_eq!((r.k(), r.name().as_str()), (3, "union-3"));
        assert_eq!(UnionRule::from_name("union-3"), Some(r));
        for bad in ["union-0", "union-", "union-+2", "union", "rbcm", "union-x"] {
            assert_eq!(UnionRule::from_name(bad), None, "{bad}");
        }
    }
}
