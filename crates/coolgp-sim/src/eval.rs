//! Evaluation helpers of a run: RMSE of agents and servers on the test sets, distances
//! between natural parameters.

use coolgp::baselines::BaselineKernel;
use coolgp::model::predict::{predict_mean, predict_means};
use coolgp::{Agent, NaturalParams, View, Vocabulary};

use crate::workload::TestSet;

pub(crate) fn rmse(p: &[f64], y: &[f64]) -> f64 {
    coolgp::model::predict::rmse(p, y)
}

/// RMSE of the own and of the fused q(u) under the agent's q(W), sharing ψ1 (NaN for a view
/// whose T1 does not factor, or for test inputs that do not fit the agent).
pub(crate) fn eval_both(a: &Agent, x: coolgp::faer::MatRef<'_, f64>, y: &[f64]) -> (f64, f64) {
    match (a.mean_weights(View::Own), a.mean_weights(View::Fused)) {
        (Ok(own), Ok(fused)) => {
            match predict_means(a.vocabulary(), a.projection(), &[&own, &fused], x) {
                Ok(m) => (rmse(&m[0], y), rmse(&m[1], y)),
                Err(_) => (f64::NAN, f64::NAN),
            }
        }
        (own, fused) => (
            rmse_with(a, own.ok().as_deref(), x, y),
            rmse_with(a, fused.ok().as_deref(), x, y),
        ),
    }
}

/// RMSE of the predictive mean `ψ1(x)α` under the agent's q(W) (NaN without α).
pub(crate) fn rmse_with(
    a: &Agent,
    alpha: Option<&[f64]>,
    x: coolgp::faer::MatRef<'_, f64>,
    y: &[f64],
) -> f64 {
    alpha.map_or(f64::NAN, |al| {
        predict_mean(a.vocabulary(), a.projection(), al, x).map_or(f64::NAN, |p| rmse(&p, y))
    })
}

/// RMSE of a server's predictive mean with weights `beta` (NaN without them).
pub(crate) fn server_rmse(
    vocab: &Vocabulary,
    kern: &BaselineKernel,
    beta: Option<&[f64]>,
    x: coolgp::faer::MatRef<'_, f64>,
    y: &[f64],
) -> f64 {
    beta.map_or(f64::NAN, |b| {
        kern.mean_at(vocab, b, x).map_or(f64::NAN, |p| rmse(&p, y))
    })
}

/// Mean of `f` over the test sets, each capped at `cap` points.
pub(crate) fn mean_over(
    tests: &[TestSet],
    cap: usize,
    f: impl Fn(coolgp::faer::MatRef<'_, f64>, &[f64]) -> f64,
) -> f64 {
    let k = tests.len().max(1) as f64;
    tests
        .iter()
        .map(|t| {
            let n = t.y.len().min(cap);
            f(t.x.as_ref().subrows(0, n), &t.y[..n])
        })
        .sum::<f64>()
        / k
}

pub(crate) fn frob(t: &NaturalParams, minus: Option<&NaturalParams>) -> f64 {
    let m = t.t2.len();
    let mut s = 0.0;
    for j in 0..m {
        for i in 0..m {
            let v = t.t1[(i, j)] - minus.map_or(0.0, |o| o.t1[(i, j)]);
            s += v * v;
        }
        let v = t.t2[j] - minus.map_or(0.0, |o| o.t2[j]);
        s += v * v;
    }
    s.sqrt()
}
