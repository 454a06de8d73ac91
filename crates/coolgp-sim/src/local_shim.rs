//! TEMPORARY stand-in for `coolgp::local` (LOCAL_API.md) until the `local` branch is merged:
//! the agent's answer without memory (its prediction) and the fleet rules. Removed at the merge.

use coolgp::faer::MatRef;
use coolgp::{Agent, View};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FleetRule {
    MinVariance,
    Bcm,
    Rbcm,
}

impl FleetRule {
    pub fn name(self) -> &'static str {
        match self {
            Self::MinVariance => "min-variance",
            Self::Bcm => "bcm",
            Self::Rbcm => "rbcm",
        }
    }
    pub fn from_name(s: &str) -> Option<Self> {
        [Self::MinVariance, Self::Bcm, Self::Rbcm]
            .into_iter()
            .find(|r| r.name() == s)
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LocalAnswer {
    pub global_mean: f64,
    pub global_var: f64,
    pub residual_mean: f64,
    pub residual_var: f64,
    pub residual_prior: f64,
    pub noise_var: f64,
}

impl LocalAnswer {
    pub fn mean(&self) -> f64 {
        self.global_mean + self.residual_mean
    }
    pub fn var_f(&self) -> f64 {
        self.global_var + self.residual_var
    }
    pub fn var_y(&self) -> f64 {
        self.var_f() + self.noise_var
    }
}

pub fn combine(rule: FleetRule, answers: &[LocalAnswer]) -> Option<LocalAnswer> {
    let first = answers.first()?;
    if rule == FleetRule::MinVariance {
        let mut best = *first;
        for a in answers {
            if a.var_y() < best.var_y() {
                best = *a;
            }
        }
        return Some(best);
    }
    let k = answers.len() as f64;
    let avg = |f: fn(&LocalAnswer) -> f64| answers.iter().map(f).sum::<f64>() / k;
    Some(LocalAnswer {
        global_mean: avg(|a| a.global_mean),
        global_var: avg(|a| a.global_var),
        residual_mean: 0.0,
        residual_var: 0.0,
        residual_prior: 0.0,
        noise_var: avg(|a| a.noise_var),
    })
}

pub trait LocalExt {
    fn local_answers(
        &self,
        x: MatRef<'_, f64>,
        view: View,
    ) -> Result<Vec<LocalAnswer>, coolgp::Error>;
    fn local_points(&self) -> usize;
}

impl LocalExt for Agent {
    fn local_answers(
        &self,
        x: MatRef<'_, f64>,
        view: View,
    ) -> Result<Vec<LocalAnswer>, coolgp::Error> {
        let p = self.predict(x, view)?;
        Ok((0..p.mean.len())
            .map(|i| LocalAnswer {
                global_mean: p.mean[i],
                global_var: p.var_f[i],
                residual_mean: 0.0,
                residual_var: 0.0,
                residual_prior: 0.0,
                noise_var: p.var_y[i] - p.var_f[i],
            })
            .collect())
    }
    fn local_points(&self) -> usize {
        0
    }
}
