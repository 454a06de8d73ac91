//! Evaluation helpers of a run: RMSE of agents and servers on the test sets, distances
//! between natural parameters.

use coolgp::baselines::BaselineKernel;
use coolgp::model::predict::{predict_mean, predict_means, Prediction};
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

/// Fraction of `y` inside the central 95% interval `mean ± 1.96·sqrt(var_y)` of `p` (NaN
/// for no points).
pub(crate) fn coverage95(p: &Prediction, y: &[f64]) -> f64 {
    let inside = p
        .mean
        .iter()
        .zip(&p.var_y)
        .zip(y)
        .filter(|((m, v), t)| (*t - *m).abs() <= 1.96 * v.max(0.0).sqrt())
        .count();
    inside as f64 / y.len() as f64
}

/// `(NLPD, coverage95)` of `a`'s `view` on the `k`-th window of `cap` points of `t`
/// ([`window`]): the mean Gaussian NLPD in original units (`+ ln y_scale` for targets
/// standardized by `y_scale`) and the fraction inside `mean ± 1.96·sqrt(var_y)` (NaN, NaN if
/// the agent cannot predict there).
pub(crate) fn density_scores(
    a: &Agent,
    view: View,
    t: &TestSet,
    (k, cap): (usize, usize),
    y_scale: f64,
) -> (f64, f64) {
    let w = window(t, k, cap);
    a.predict(w.x.as_ref(), view)
        .map_or((f64::NAN, f64::NAN), |p| {
            (p.nlpd(&w.y) + y_scale.ln(), coverage95(&p, &w.y))
        })
}

/// The `k`-th window of `cap` test points: rows `k·cap, k·cap + 1, …` modulo the set's size
/// (the whole set if it has at most `cap` points). The evaluated agents thus cover the whole
/// test set rather than its first `cap` points over and over: fused agents predict nearly
/// alike, so the first `cap` points alone would make NLPD and coverage estimates from `cap`
/// points (a coverage standard error of 0.005 at 1,000 points).
pub(crate) fn window(t: &TestSet, k: usize, cap: usize) -> TestSet {
    let n = t.y.len();
    if n <= cap {
        return t.clone();
    }
    let start = k.wrapping_mul(cap) % n;
    let row = |i: usize| (start + i) % n;
    TestSet {
        x: coolgp::faer::Mat::from_fn(cap, t.x.ncols(), |i, j| t.x[(row(i), j)]),
        y: (0..cap).map(|i| t.y[row(i)]).collect(),
        groups: if t.groups.is_empty() {
            Vec::new()
        } else {
            (0..cap).map(|i| t.group(row(i))).collect()
        },
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_counts_targets_inside_1_96_predictive_sd_of_y() {
        // var_y = 4 (sd 2): the interval is ±3.92; var_f alone (sd 1) would give ±1.96.
        let p = Prediction {
            mean: vec![1.0; 5],
            var_f: vec![1.0; 5],
            var_y: vec![4.0; 5],
        };
        let y = [1.0 + 3.9, 1.0 - 3.9, 1.0 + 3.95, 1.0 + 2.5, 1.0 - 1.0];
        assert_eq!(coverage95(&p, &y), 4.0 / 5.0);
    }

    #[test]
    fn windows_walk_through_the_test_set_and_wrap() {
        let t = TestSet {
            x: coolgp::faer::Mat::from_fn(5, 1, |i, _| i as f64),
            y: (0..5).map(|i| 10.0 * i as f64).collect(),
            groups: (0..5).map(|i| (i % 2 == 0).then_some(i)).collect(),
        };
        assert_eq!(window(&t, 0, 2).y, vec![0.0, 10.0]);
        assert_eq!(window(&t, 1, 2).y, vec![20.0, 30.0]);
        assert_eq!(window(&t, 2, 2).y, vec![40.0, 0.0], "wraps");
        assert_eq!(window(&t, 2, 2).x[(0, 0)], 4.0, "x rows follow y");
        assert_eq!(
            window(&t, 2, 2).groups,
            vec![Some(4), Some(0)],
            "groups follow y"
        );
        assert_eq!(window(&t, 7, 9).y.len(), 5, "a small set is used whole");
    }
}
