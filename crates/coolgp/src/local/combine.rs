//! The fleet rule: a querier that asked several agents at one point combines their
//! [`LocalAnswer`]s by a rule computable from the answers alone.

use super::answer::MIN_VAR;
use super::LocalAnswer;

/// How a querier combines several agents' answers at one point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FleetRule {
    /// The answer with the smallest predictive variance `var_y` (ties: the first).
    MinVariance,
    /// Bayesian committee machine (Tresp 2000) over the agents' residual corrections.
    Bcm,
    /// Robust BCM (Deisenroth & Ng 2015): each agent weighted by its information relative to
    /// the prior, `β_i = ½ (ln v0_i − ln v_i)`.
    Rbcm,
    /// The answer of the agent that knows most about the point relative to what it would say
    /// knowing nothing: the largest information gain `½ (ln v0_i − ln v_i)` of its residual
    /// (ties and no memory anywhere: the first). Unlike [`FleetRule::MinVariance`] it is not
    /// drawn to an agent whose whole region is quiet (small prior) but that knows nothing here.
    MostInformed,
}

impl FleetRule {
    /// Every rule, in the order of [`FleetRule::name`]'s list.
    pub const ALL: [Self; 4] = [Self::MinVariance, Self::Bcm, Self::Rbcm, Self::MostInformed];

    /// The command-line name (`min-variance`, `bcm`, `rbcm`, `most-informed`).
    pub fn name(self) -> &'static str {
        match self {
            Self::MinVariance => "min-variance",
            Self::Bcm => "bcm",
            Self::Rbcm => "rbcm",
            Self::MostInformed => "most-informed",
        }
    }

    /// The rule of a name ([`FleetRule::name`]), `None` for another string.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.name() == name)
    }
}

/// Combines the answers of several agents at one point; `None` for an empty slice.
///
/// - [`FleetRule::MinVariance`]: the answer with the smallest `var_y()` (ties: the first),
///   unchanged.
/// - [`FleetRule::MostInformed`]: the answer whose residual has the largest information gain
///   `½ (ln residual_prior − ln residual_var)` (0 without a residual part; ties: the first),
///   unchanged.
/// - [`FleetRule::Bcm`] / [`FleetRule::Rbcm`] combine only the residual parts (the agents share
///   the global model). Over the M agents with a residual part (`residual_prior > 0`; agents
///   with the memory off or empty carry none), with prior variances `v0_i = residual_prior`,
///   posterior `v_i = max(residual_var, 1e-300)`, means `r_i = residual_mean` and `v̄0` the mean
///   of the `v0_i`: precision `P = Σ β_i/v_i + (1 − Σ β_i)/v̄0` with `β_i = 1` (BCM, so
///   `P = Σ 1/v_i − (M − 1)/v̄0`) or `β_i = ½ (ln v0_i − ln v_i)` (rBCM), floored at
///   `1/max_i v0_i` (the combination never claims less than the widest prior: BCM's precision
///   can be negative when the priors differ); `residual_var = 1/P`,
///   `residual_mean = residual_var · Σ β_i r_i/v_i`, `residual_prior = v̄0`. With M = 0 the
///   residual part is 0. The global part is the mean of the agents' `global_mean` and of their
///   `global_var`; `noise_var` the mean of theirs.
pub fn combine(rule: FleetRule, answers: &[LocalAnswer]) -> Option<LocalAnswer> {
    let first = answers.first()?;
    if rule == FleetRule::MinVariance {
        let mut best = first;
        for a in &answers[1..] {
            if a.var_y() < best.var_y() {
                best = a;
            }
        }
        return Some(*best);
    }
    if rule == FleetRule::MostInformed {
        let mut best = (first, first.information_gain());
        for a in &answers[1..] {
            let g = a.information_gain();
            if g > best.1 {
                best = (a, g);
            }
        }
        return Some(*best.0);
    }
    let k = answers.len() as f64;
    let mean_of = |f: fn(&LocalAnswer) -> f64| answers.iter().map(f).sum::<f64>() / k;
    let mut out = LocalAnswer::global_only(
        mean_of(|a| a.global_mean),
        mean_of(|a| a.global_var),
        mean_of(|a| a.noise_var),
    );
    let parts: Vec<&LocalAnswer> = answers.iter().filter(|a| a.residual_prior > 0.0).collect();
    if parts.is_empty() {
        return Some(out);
    }
    let m = parts.len() as f64;
    let v0_mean = parts.iter().map(|a| a.residual_prior).sum::<f64>() / m;
    let v0_max = parts.iter().map(|a| a.residual_prior).fold(0.0, f64::max);
    let (mut prec, mut beta_sum, mut num) = (0.0, 0.0, 0.0);
    for a in &parts {
        let v = a.residual_var.max(MIN_VAR);
        let beta = match rule {
            FleetRule::Rbcm => 0.5 * (a.residual_prior.ln() - v.ln()),
            _ => 1.0,
        };
        prec += beta / v;
        num += beta * a.residual_mean / v;
        beta_sum += beta;
    }
    prec += (1.0 - beta_sum) / v0_mean;
    let var = 1.0 / prec.max(1.0 / v0_max);
    out.residual_var = var;
    out.residual_mean = var * num;
    out.residual_prior = v0_mean;
    Some(out)
}
