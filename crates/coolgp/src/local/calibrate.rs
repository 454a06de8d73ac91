//! Calibration of the fleet's answers (docs/LOCAL.md §10): one variance scale `s` for the
//! combined answers, measured on answers given the way a query gets them (each agent's
//! memory rows answered by the fleet with that agent's leave-one-out answer,
//! [`crate::Agent::local_held_out`]). `s` multiplies every variance of an answer
//! ([`LocalAnswer::scaled`]); the means, the fused q(u) and the residual kernel do not change.

use super::{combine, FleetRule, LocalAnswer};

/// Calibration rows the fleet draws over all its agents (spread by [`super::pool::shares`]).
pub const CALIBRATION_ROWS: usize = 512;

/// Fewer standardized errors than this give no scale (1 is used).
pub const MIN_CALIBRATION_ROWS: usize = 20;

/// The scale is clamped to this range (a guard against a degenerate calibration set, e.g.
/// every error 0).
pub const SCALE_RANGE: (f64, f64) = (1.0 / 16.0, 16.0);

/// The memory rows an agent holding `n` offers for calibration when asked for `k`: spaced
/// evenly at the midpoints `(2i + 1)·n/(2k)` (the pooled fit's validation rows, not its fit
/// rows, [`super::pool`]), every row if it holds no more than `k`.
pub fn offered_rows(n: usize, k: usize) -> Vec<usize> {
    if k >= n {
        (0..n).collect()
    } else {
        (0..k).map(|i| (2 * i + 1) * n / (2 * k)).collect()
    }
}

/// The two-sided 95% normal quantile.
const Z95: f64 = 1.959_963_984_540_054;

/// The variance scale that puts 95% of the standardized errors `e_j = (y_j − μ_j)/√v_j`
/// inside `±1.96 √s`: `s = (q/1.96)²` with `q` the ⌈0.95 k⌉-th smallest `|e_j|` (of the k
/// finite ones), clamped to [`SCALE_RANGE`]. `None` below [`MIN_CALIBRATION_ROWS`] errors.
/// A coverage target rather than the mean squared error: heavy tails inflate the mean
/// square and would widen every interval for a few outliers.
pub fn variance_scale(errors: &[f64]) -> Option<f64> {
    let mut a: Vec<f64> = errors
        .iter()
        .filter(|e| e.is_finite())
        .map(|e| e.abs())
        .collect();
    if a.len() < MIN_CALIBRATION_ROWS {
        return None;
    }
    a.sort_by(f64::total_cmp);
    let rank = (0.95 * a.len() as f64).ceil() as usize;
    let q = a[rank.clamp(1, a.len()) - 1];
    Some((q / Z95).powi(2).clamp(SCALE_RANGE.0, SCALE_RANGE.1))
}

/// The standardized error `(y − mean)/√var_y` of an answer (NaN for a non-positive variance).
pub fn standardized_error(answer: &LocalAnswer, y: f64) -> f64 {
    let v = answer.var_y();
    if v > 0.0 {
        (y - answer.mean()) / v.sqrt()
    } else {
        f64::NAN
    }
}

/// The standardized error of `rule` at one calibration row of agent `owner`: the fleet's
/// answers there (`answers`, `(agent key, answer)` in increasing key order), the owner's
/// replaced by its leave-one-out answer `loo` (added at its place if it gave none), combined
/// by `rule` and compared with the row's `y`. `None` when the rule gives no answer.
pub fn held_out_error<K: Ord + Copy>(
    rule: FleetRule,
    answers: impl IntoIterator<Item = (K, LocalAnswer)>,
    owner: K,
    loo: LocalAnswer,
    y: f64,
) -> Option<f64> {
    Some(standardized_error(
        &held_out_answer(rule, answers, owner, loo)?,
        y,
    ))
}

/// The fleet's combined answer at one calibration row of agent `owner`, as
/// [`held_out_error`] forms it: the owner's answer replaced by its leave-one-out answer `loo`.
/// `None` when the rule gives no answer.
pub fn held_out_answer<K: Ord + Copy>(
    rule: FleetRule,
    answers: impl IntoIterator<Item = (K, LocalAnswer)>,
    owner: K,
    loo: LocalAnswer,
) -> Option<LocalAnswer> {
    let mut at: Vec<(K, LocalAnswer)> = answers.into_iter().filter(|(k, _)| *k != owner).collect();
    let place = at.partition_point(|(k, _)| *k < owner);
    at.insert(place, (owner, loo));
    let list: Vec<LocalAnswer> = at.into_iter().map(|(_, a)| a).collect();
    combine(rule, &list)
}

/// The safety net's weight on the residual correction (issue 28; docs/LOCAL.md §12), from
/// held-out rows' `(e, ρ) = (y − global_mean, residual_mean)` of the combined answers: the
/// least-squares weight `ŵ = Σ eρ / Σ ρ²` (the `w` minimizing `Σ (e − wρ)²`) raised by two of
/// its standard errors, `se = s / √Σρ²` with `s² = Σ (e − ŵρ)² / (n − 1)`, and clamped to
/// [0, 1]: the correction is weakened only where the held-out rows show, beyond their noise,
/// that it overshoots or misleads (on the air stations ŵ was 0.89–0.93 at a fleet RMSE that
/// the full correction made better, docs/LOCAL.md §12). `w = 0` is the global model's answer.
/// `None` below [`MIN_CALIBRATION_ROWS`] finite pairs or without a residual part (every
/// `ρ = 0`).
pub fn residual_weight(pairs: &[(f64, f64)]) -> Option<f64> {
    let finite: Vec<(f64, f64)> = pairs
        .iter()
        .copied()
        .filter(|(e, r)| e.is_finite() && r.is_finite())
        .collect();
    let n = finite.len();
    if n < MIN_CALIBRATION_ROWS {
        return None;
    }
    let (er, rr) = finite
        .iter()
        .fold((0.0, 0.0), |(a, b), (e, r)| (a + e * r, b + r * r));
    if rr <= 0.0 {
        return None;
    }
    let w = er / rr;
    let sse: f64 = finite.iter().map(|(e, r)| (e - w * r) * (e - w * r)).sum();
    let se = (sse / (n - 1) as f64).sqrt() / rr.sqrt();
    Some((w + WEIGHT_STANDARD_ERRORS * se).clamp(0.0, 1.0))
}

/// Standard errors by which [`residual_weight`] raises the least-squares weight.
pub const WEIGHT_STANDARD_ERRORS: f64 = 2.0;

/// One fleet rule's calibration on held-out rows (docs/LOCAL.md §10, §12): the safety net's
/// weight on the residual correction, the variance scale of the weighted answers and their
/// mean squared error there.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RuleCalibration {
    /// The rule.
    pub rule: FleetRule,
    /// The weight on the residual correction ([`residual_weight`]; 1 where it cannot be
    /// measured).
    pub weight: f64,
    /// The variance scale of the weighted answers ([`variance_scale`]; 1 where it cannot be
    /// measured).
    pub scale: f64,
    /// The weighted answers' mean squared error (NaN without rows).
    pub mse: f64,
}

impl RuleCalibration {
    /// No calibration: weight 1, scale 1.
    pub fn unit(rule: FleetRule) -> Self {
        Self {
            rule,
            weight: 1.0,
            scale: 1.0,
            mse: f64::NAN,
        }
    }

    /// The calibration of `rule` from its combined answers at held-out rows and the rows'
    /// targets (`(answer, y)`, [`held_out_answer`]): the weight from `(y − global_mean,
    /// residual_mean)`, then the scale and the error of the weighted answers.
    pub fn measure(rule: FleetRule, combined: &[(LocalAnswer, f64)]) -> Self {
        let pairs: Vec<(f64, f64)> = combined
            .iter()
            .map(|(a, y)| (y - a.global_mean, a.residual_mean))
            .collect();
        let weight = residual_weight(&pairs).unwrap_or(1.0);
        let weighted: Vec<(LocalAnswer, f64)> = combined
            .iter()
            .map(|(a, y)| (a.shrunk(weight), *y))
            .collect();
        let errors: Vec<f64> = weighted
            .iter()
            .map(|(a, y)| standardized_error(a, *y))
            .collect();
        let mse = weighted
            .iter()
            .map(|(a, y)| (y - a.mean()).powi(2))
            .sum::<f64>()
            / combined.len() as f64;
        Self {
            rule,
            weight,
            scale: variance_scale(&errors).unwrap_or(1.0),
            mse,
        }
    }

    /// `answer` weighted and scaled: what the fleet answers under this calibration.
    pub fn apply(&self, answer: &LocalAnswer) -> LocalAnswer {
        answer.shrunk(self.weight).scaled(self.scale)
    }
}

/// The rule whose weighted answers have the smallest held-out error (the first of `cals` on a
/// tie); `None` where no rule's error was measured: the fleet query's `auto` rule
/// (docs/LOCAL.md §12).
pub fn best_rule(cals: &[RuleCalibration]) -> Option<FleetRule> {
    cals.iter()
        .filter(|r| r.mse.is_finite())
        .fold(None::<&RuleCalibration>, |b, r| match b {
            Some(b) if b.mse <= r.mse => Some(b),
            _ => Some(r),
        })
        .map(|r| r.rule)
}

/// The fleet rule chosen where none is named: [`FleetRule::Rbcm`], unless the held-out rows
/// show another decisively better ([`chosen_rule`]).
pub const DEFAULT_RULE: FleetRule = FleetRule::Rbcm;

/// A rule other than [`DEFAULT_RULE`] is chosen only when its held-out squared error is at
/// least this fraction below the default's. On 1,000 airline regions the held-out rows
/// preferred most-informed by 0.04% and it answered the test rows 5.6% worse than rbcm; on
/// the faulty-station field a 10-station fleet's rows preferred most-informed by a little
/// and it answered 43% worse (0.0217 against 0.0152; docs/LOCAL.md §12).
pub const RULE_MARGIN: f64 = 0.03;

/// The fleet query's `auto` rule: the best of `cals` by held-out error ([`best_rule`]) if it
/// beats [`DEFAULT_RULE`]'s by [`RULE_MARGIN`], else the default (the best where the
/// default's error was not measured); `None` where no rule's error was measured.
pub fn chosen_rule(cals: &[RuleCalibration]) -> Option<FleetRule> {
    let best = best_rule(cals)?;
    let mse = |r: FleetRule| cals.iter().find(|c| c.rule == r).map(|c| c.mse);
    match (mse(best), mse(DEFAULT_RULE)) {
        (Some(b), Some(d)) if d.is_finite() && b > (1.0 - RULE_MARGIN) * d => Some(DEFAULT_RULE),
        _ => Some(best),
    }
}

impl LocalAnswer {
    /// The answer with its residual correction weighted by `w ∈ [0, 1]` (the safety net,
    /// [`residual_weight`]): `residual_mean · w`, and the residual's posterior variance moved
    /// towards its prior, `w·residual_var + (1 − w)·residual_prior` (at `w = 0` the answer
    /// knows no more of the residual than its prior). `w = 1`: the answer unchanged.
    pub fn shrunk(&self, w: f64) -> Self {
        Self {
            residual_mean: w * self.residual_mean,
            residual_var: w * self.residual_var + (1.0 - w) * self.residual_prior,
            ..*self
        }
    }

    /// The answer with every variance (global, residual posterior and prior, noise) times
    /// `s`: the same mean, `var_f` and `var_y` times `s`, the same information gain.
    pub fn scaled(&self, s: f64) -> Self {
        Self {
            global_var: s * self.global_var,
            residual_var: s * self.residual_var,
            residual_prior: s * self.residual_prior,
            noise_var: s * self.noise_var,
            ..*self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{
        chosen_rule, held_out_error, offered_rows, residual_weight, standardized_error,
        variance_scale, RuleCalibration, SCALE_RANGE,
    };
    use crate::local::{combine, FleetRule, LocalAnswer};
    use crate::rng::Rng;

    #[test]
    fn another_rule_than_rbcm_needs_a_decisive_margin() {
        let cal = |rule, mse| RuleCalibration {
            rule,
            weight: 1.0,
            scale: 1.0,
            mse,
        };
        let with = |other: f64| {
            chosen_rule(&[
                cal(FleetRule::Rbcm, 1.0),
                cal(FleetRule::Bcm, other),
                cal(FleetRule::MinVariance, 1.5),
            ])
        };
        assert_eq!(with(0.90), Some(FleetRule::Bcm));
        assert_eq!(with(0.98), Some(FleetRule::Rbcm));
        assert_eq!(with(1.20), Some(FleetRule::Rbcm));
        // Without the default's score, the best.
        assert_eq!(
            chosen_rule(&[cal(FleetRule::Bcm, 0.99), cal(FleetRule::MinVariance, 1.0)]),
            Some(FleetRule::Bcm)
        );
        assert_eq!(chosen_rule(&[]), None);
    }

    #[test]
    fn the_scale_gives_95_percent_coverage_on_its_errors() {
        // Errors of N(0, 4) standardized by 1: the scale is ≈ 4 and covers 95% of them.
        let mut rng = Rng::new(5, 1);
        let e: Vec<f64> = (0..4000).map(|_| 2.0 * rng.normal()).collect();
        let s = variance_scale(&e).expect("enough rows");
        assert!((s - 4.0).abs() < 0.4, "scale {s}");
        let inside = e.iter().filter(|v| v.abs() <= 1.96 * s.sqrt()).count();
        assert!(inside as f64 >= 0.95 * e.len() as f64, "{inside}");
        assert!((inside as f64) < 0.951 * e.len() as f64 + 1.0, "{inside}");
    }

    #[test]
    fn offered_rows_are_midpoints_inside_the_memory() {
        assert_eq!(offered_rows(10, 2), vec![2, 7]);
        assert_eq!(offered_rows(3, 5), vec![0, 1, 2]);
        assert_eq!(offered_rows(100, 0), Vec::<usize>::new());
        let rows = offered_rows(501, 43);
        assert!(rows.windows(2).all(|w| w[0] < w[1]) && rows[42] < 501);
    }

    #[test]
    fn too_few_or_degenerate_errors_give_no_scale_or_a_clamped_one() {
        assert_eq!(variance_scale(&[1.0; 19]), None);
        assert_eq!(variance_scale(&[0.0; 40]), Some(SCALE_RANGE.0));
        assert_eq!(variance_scale(&[1e9; 40]), Some(SCALE_RANGE.1));
        let mut with_nan = vec![f64::NAN; 30];
        with_nan.extend([1.96; 10]);
        assert_eq!(variance_scale(&with_nan), None);
    }

    #[test]
    fn a_scaled_answer_keeps_its_mean_and_information_and_scales_its_variances() {
        let a = LocalAnswer {
            global_mean: 0.3,
            global_var: 0.2,
            residual_mean: -0.1,
            residual_var: 0.05,
            residual_prior: 0.4,
            noise_var: 0.1,
        };
        let b = a.scaled(2.5);
        assert_eq!(b.mean(), a.mean());
        assert!((b.var_y() - 2.5 * a.var_y()).abs() < 1e-15);
        assert!((b.information_gain() - a.information_gain()).abs() < 1e-12);
        let e = standardized_error(&a, 1.0);
        assert!((standardized_error(&b, 1.0) - e / 2.5f64.sqrt()).abs() < 1e-12);
    }

    /// An answer with residual mean `m` and residual variance `v` on a shared global part.
    fn answer(m: f64, v: f64) -> LocalAnswer {
        LocalAnswer {
            global_mean: 0.3,
            global_var: 0.2,
            residual_mean: m,
            residual_var: v,
            residual_prior: 0.4,
            noise_var: 0.1,
        }
    }

    #[test]
    fn the_owner_answers_by_its_leave_one_out_answer_in_its_place() {
        let fleet = [
            (2u64, answer(0.1, 0.3)),
            (5, answer(-0.2, 0.05)),
            (9, answer(0.4, 0.2)),
        ];
        let loo = answer(0.3, 0.1);
        for rule in FleetRule::ALL {
            // The owner (5) answered: its answer is replaced, the order kept.
            let want = combine(rule, &[fleet[0].1, loo, fleet[2].1]).expect("answer");
            let got = held_out_error(rule, fleet, 5, loo, 1.0);
            assert_eq!(got, Some(standardized_error(&want, 1.0)), "{rule:?}");
            // The owner (7) gave no answer: its leave-one-out answer goes between 5 and 9.
            let want = combine(rule, &[fleet[0].1, fleet[1].1, loo, fleet[2].1]).expect("answer");
            let got = held_out_error(rule, fleet, 7, loo, 1.0);
            assert_eq!(got, Some(standardized_error(&want, 1.0)), "{rule:?}");
        }
    }

    #[test]
    fn the_residual_weight_is_the_least_squares_fit_raised_by_two_standard_errors() {
        let mut rng = Rng::new(3, 4);
        // e = 0.6 ρ + noise: ŵ ≈ 0.6, its standard error ≈ 0.1/√2000.
        let rows: Vec<(f64, f64)> = (0..2000)
            .map(|_| {
                let r = rng.normal();
                (0.6 * r + 0.1 * rng.normal(), r)
            })
            .collect();
        let w = residual_weight(&rows).expect("enough rows");
        assert!(w > 0.6 && w < 0.6 + 0.02, "{w}");
        // The squared error at w is below the global model's (w = 0) and the full
        // correction's (w = 1).
        let sse = |w: f64| rows.iter().map(|(e, r)| (e - w * r).powi(2)).sum::<f64>();
        assert!(sse(w) < sse(0.0) && sse(w) < sse(1.0));
        // A correction of the wrong sign: 0; one that is twice too small: 1.
        let wrong: Vec<(f64, f64)> = rows.iter().map(|&(e, r)| (-e, r)).collect();
        assert_eq!(residual_weight(&wrong), Some(0.0));
        let small: Vec<(f64, f64)> = rows.iter().map(|&(e, r)| (e, 0.5 * r)).collect();
        assert_eq!(residual_weight(&small), Some(1.0));
        // A noisy correction that is right on average: within two standard errors of 1, kept.
        let noisy: Vec<(f64, f64)> = (0..40)
            .map(|_| {
                let r = rng.normal();
                (0.97 * r + 2.0 * rng.normal(), r)
            })
            .collect();
        assert_eq!(residual_weight(&noisy), Some(1.0));
        assert_eq!(residual_weight(&rows[..10]), None, "too few rows");
        let none: Vec<(f64, f64)> = rows.iter().map(|&(e, _)| (e, 0.0)).collect();
        assert_eq!(residual_weight(&none), None, "no residual part");
    }

    #[test]
    fn a_shrunk_answer_moves_towards_the_global_mean_and_the_residual_prior() {
        let a = answer(0.5, 0.1);
        assert_eq!(a.shrunk(1.0), a);
        let z = a.shrunk(0.0);
        assert_eq!(z.mean(), a.global_mean);
        assert_eq!(z.residual_var, a.residual_prior);
        let h = a.shrunk(0.5);
        assert!((h.mean() - (0.3 + 0.25)).abs() < 1e-15);
        assert!((h.residual_var - 0.25).abs() < 1e-15);
        assert_eq!((h.global_var, h.noise_var), (a.global_var, a.noise_var));
    }
}
