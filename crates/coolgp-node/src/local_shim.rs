//! TEMPORARY: the core's `coolgp::local` types (LOCAL_API.md) until the `local` branch lands;
//! min-variance only. Replaced by `coolgp::local` at the merge.

/// What an agent answers at one point x*.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LocalAnswer {
    /// Global mean.
    pub global_mean: f64,
    /// Global variance of f.
    pub global_var: f64,
    /// Residual mean.
    pub residual_mean: f64,
    /// Residual posterior variance.
    pub residual_var: f64,
    /// Residual prior variance.
    pub residual_prior: f64,
    /// Observation noise variance.
    pub noise_var: f64,
}

impl LocalAnswer {
    /// Mean.
    pub fn mean(&self) -> f64 {
        self.global_mean + self.residual_mean
    }
    /// Variance of f.
    pub fn var_f(&self) -> f64 {
        self.global_var + self.residual_var
    }
    /// Variance of y.
    pub fn var_y(&self) -> f64 {
        self.var_f() + self.noise_var
    }
}

/// The fleet rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FleetRule {
    /// Smallest var_y.
    MinVariance,
}

impl FleetRule {
    /// Name.
    pub fn name(self) -> &'static str {
        "min-variance"
    }
    /// From a name.
    ///
    /// # Errors
    /// Unknown name.
    pub fn from_name(name: &str) -> Result<Self, String> {
        match name {
            "min-variance" => Ok(FleetRule::MinVariance),
            other => Err(format!("unknown fleet rule '{other}': use min-variance")),
        }
    }
}

/// Combines answers.
pub fn combine(_rule: FleetRule, answers: &[LocalAnswer]) -> Option<LocalAnswer> {
    let mut best: Option<LocalAnswer> = None;
    for a in answers {
        if best.is_none_or(|b| a.var_y() < b.var_y()) {
            best = Some(*a);
        }
    }
    best
}
