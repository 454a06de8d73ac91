//! The calibration of the fleet query (issue 19; docs/LOCAL.md §10, §12): per fleet rule, a
//! weight on the residual correction (the safety net) and a variance scale, measured on
//! answers given the way a query gets them. Each agent offers some of its memory rows; at
//! each, every other agent answers as usual and the owner answers without that row (its
//! leave-one-out answer, [`Agent::local_held_out`]); the rule combines them. The weight
//! ([`residual_weight`]) is the least-squares weight of the combined residual means on those
//! rows, in [0, 1]; the scale ([`variance_scale`]) covers 95% of the weighted answers'
//! standardized errors. A test row is a row no agent holds: the owner's leave-one-out answer
//! is what it would answer there.

use coolgp::faer::Mat;
use coolgp::local::calibrate::{
    held_out_answer, offered_rows, residual_weight, standardized_error, variance_scale,
    CALIBRATION_ROWS,
};
use coolgp::local::pool::shares;
use coolgp::local::{FleetRule, HeldOutRows, LocalAnswer};
use coolgp::{Agent, View};
use rayon::prelude::*;

/// One rule's calibration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RuleCalibration {
    /// The rule.
    pub rule: FleetRule,
    /// The weight on the residual correction (1 where too few rows answered).
    pub weight: f64,
    /// The variance scale of the weighted answers (1 where too few rows answered).
    pub scale: f64,
    /// The weighted answers' mean squared error on the held-out rows (standardized units;
    /// NaN where no row answered).
    pub mse: f64,
}

impl RuleCalibration {
    /// `answer` weighted and scaled: what the fleet answers under this rule.
    pub fn apply(&self, answer: &LocalAnswer) -> LocalAnswer {
        answer.shrunk(self.weight).scaled(self.scale)
    }
}

/// The calibrations of the fleet rules and the rows they were measured on.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// Calibration rows answered (over all agents).
    pub rows: usize,
    /// Each rule's weight and scale.
    pub rules: Vec<RuleCalibration>,
}

impl Calibration {
    /// The calibration of `rule` (weight 1, scale 1 if it was not calibrated).
    pub fn of(&self, rule: FleetRule) -> RuleCalibration {
        self.rules
            .iter()
            .find(|r| r.rule == rule)
            .copied()
            .unwrap_or(RuleCalibration {
                rule,
                weight: 1.0,
                scale: 1.0,
                mse: f64::NAN,
            })
    }

    /// The rule whose weighted answers have the smallest held-out error (the first of the
    /// calibrated rules on a tie); `None` where no rule's error was measured. The fleet
    /// query's `auto` rule (docs/LOCAL.md §12).
    pub fn best(&self) -> Option<FleetRule> {
        self.rules
            .iter()
            .filter(|r| r.mse.is_finite())
            .fold(None::<&RuleCalibration>, |b, r| match b {
                Some(b) if b.mse <= r.mse => Some(b),
                _ => Some(r),
            })
            .map(|r| r.rule)
    }

    /// The variance scale of `rule` (1 if it was not calibrated).
    pub fn scale(&self, rule: FleetRule) -> f64 {
        self.of(rule).scale
    }
}

/// Measures each rule's weight and variance scale on the fused `agents` (module doc): each
/// agent offers its share of [`CALIBRATION_ROWS`] ([`shares`], [`offered_rows`]). Agents that
/// cannot answer (no factorizable model) offer no rows and give no answers.
pub fn calibrate(agents: &[Agent], rules: &[FleetRule]) -> Calibration {
    let k = shares(CALIBRATION_ROWS, agents.len());
    let held: Vec<Option<HeldOutRows>> = agents
        .par_iter()
        .zip(k.par_iter())
        .map(|(a, &k)| {
            a.local_held_out(&offered_rows(a.local_points(), k), View::Fused)
                .ok()
        })
        .collect();
    let owners: Vec<(usize, usize)> = held
        .iter()
        .enumerate()
        .flat_map(|(o, h)| (0..h.as_ref().map_or(0, |h| h.y.len())).map(move |r| (o, r)))
        .collect();
    let d = agents.first().map_or(0, |a| a.local().memory().d());
    let x = Mat::from_fn(owners.len(), d, |j, c| {
        let (o, r) = owners[j];
        held[o].as_ref().map_or(0.0, |h| h.x[(r, c)])
    });
    let answers: Vec<Option<Vec<LocalAnswer>>> = agents
        .par_iter()
        .map(|a| a.local_answers(x.as_ref(), View::Fused).ok())
        .collect();
    let rules = rules
        .iter()
        .map(|&rule| {
            let combined: Vec<(LocalAnswer, f64)> = owners
                .par_iter()
                .enumerate()
                .filter_map(|(j, &(o, r))| {
                    let h = held[o].as_ref()?;
                    let at =
                        (0..agents.len()).filter_map(|a| answers[a].as_ref().map(|v| (a, v[j])));
                    Some((held_out_answer(rule, at, o, h.answers[r])?, h.y[r]))
                })
                .collect();
            let pairs: Vec<(f64, f64)> = combined
                .iter()
                .map(|(a, y)| (y - a.global_mean, a.residual_mean))
                .collect();
            let weight = residual_weight(&pairs).unwrap_or(1.0);
            let errors: Vec<f64> = combined
                .iter()
                .map(|(a, y)| standardized_error(&a.shrunk(weight), *y))
                .collect();
            let scale = variance_scale(&errors).unwrap_or(1.0);
            let mse = combined
                .iter()
                .map(|(a, y)| (y - a.shrunk(weight).mean()).powi(2))
                .sum::<f64>()
                / combined.len() as f64;
            RuleCalibration {
                rule,
                weight,
                scale,
                mse,
            }
        })
        .collect();
    Calibration {
        rows: owners.len(),
        rules,
    }
}
