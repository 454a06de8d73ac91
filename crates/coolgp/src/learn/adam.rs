//! Adam on the per-datum gradient with a Robbins–Monro decay (spec §6, revised).

use crate::error::{ensure_dim, Result};

/// Optimizer settings (defaults: spec §6).
#[derive(Clone, Debug, PartialEq)]
pub struct AdamConfig {
    /// Learning rate (0.01).
    pub lr: f64,
    /// First-moment decay β1 (0.9).
    pub beta1: f64,
    /// Second-moment decay β2 (0.999).
    pub beta2: f64,
    /// Denominator guard (1e-8).
    pub eps: f64,
    /// Robbins–Monro `(1 + t/τ)^−κ`: τ (50).
    pub tau: f64,
    /// Robbins–Monro κ (0.6); 0 disables the decay.
    pub kappa: f64,
}

impl Default for AdamConfig {
    fn default() -> Self {
        Self {
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            tau: 50.0,
            kappa: 0.6,
        }
    }
}

/// Adam state: step count and the two moment vectors, flattened like θ.
#[derive(Clone, Debug, PartialEq)]
pub struct Adam {
    /// Settings.
    pub config: AdamConfig,
    /// Steps taken.
    pub t: u64,
    /// First moments.
    pub m1: Vec<f64>,
    /// Second moments.
    pub m2: Vec<f64>,
}

impl Adam {
    /// Fresh state for `n` parameters.
    pub fn new(config: AdamConfig, n: usize) -> Self {
        Self {
            config,
            t: 0,
            m1: vec![0.0; n],
            m2: vec![0.0; n],
        }
    }

    /// One ascent step `θ += lr_t · m̂/(√v̂ + ε)` on gradient `g` (maximization), with
    /// `lr_t = lr · (1 + t/τ)^−κ` (Robbins–Monro) and the bias corrections `1 − β^t`.
    ///
    /// # Errors
    /// [`crate::Error::DimensionMismatch`] unless θ, g and both moment vectors have the same
    /// length; the state is then unchanged.
    pub fn step(&mut self, theta: &mut [f64], g: &[f64]) -> Result<()> {
        ensure_dim("Adam gradient (one per parameter)", theta.len(), g.len())?;
        ensure_dim("Adam first moments", theta.len(), self.m1.len())?;
        ensure_dim("Adam second moments", theta.len(), self.m2.len())?;
        let c = &self.config;
        self.t += 1;
        let t = self.t as f64;
        let rm = (1.0 + t / c.tau).powf(-c.kappa);
        let bc1 = 1.0 - c.beta1.powf(t);
        let bc2 = 1.0 - c.beta2.powf(t);
        for ((th, gi), (m1, m2)) in theta
            .iter_mut()
            .zip(g)
            .zip(self.m1.iter_mut().zip(self.m2.iter_mut()))
        {
            *m1 = c.beta1 * *m1 + (1.0 - c.beta1) * gi;
            *m2 = c.beta2 * *m2 + (1.0 - c.beta2) * gi * gi;
            let mh = *m1 / bc1;
            let vh = *m2 / bc2;
            *th += c.lr * rm * mh / (vh.sqrt() + c.eps);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn climbs_a_concave_quadratic() {
        // maximize −(θ−3)²
        let mut adam = Adam::new(
            AdamConfig {
                lr: 0.1,
                kappa: 0.0,
                ..AdamConfig::default()
            },
            1,
        );
        let mut th = [0.0];
        for _ in 0..2000 {
            let g = [-2.0 * (th[0] - 3.0)];
            adam.step(&mut th, &g).expect("step");
        }
        assert!((th[0] - 3.0).abs() < 1e-2, "θ = {}", th[0]);
    }

    #[test]
    fn defaults_are_the_spec_values() {
        // Reference: spec §6 (Adam lr 0.01, β = (0.9, 0.999), ε = 1e-8; Robbins–Monro
        // (1 + t/τ)^−κ with τ = 50, κ = 0.6).
        let c = AdamConfig::default();
        assert_eq!(
            (c.lr, c.beta1, c.beta2, c.eps, c.tau, c.kappa),
            (0.01, 0.9, 0.999, 1e-8, 50.0, 0.6)
        );
    }

    #[test]
    fn robbins_monro_decays_the_step_as_specified() {
        // With a constant gradient, m̂ = g and v̂ = g² exactly after the bias corrections, so
        // step t moves θ by lr (1 + t/τ)^−κ · g/(|g| + ε): the decay alone sets the step size.
        // Reference: spec §6. Tolerance: a few ulps of the bias-corrected moments.
        let c = AdamConfig::default();
        let mut adam = Adam::new(c.clone(), 1);
        let g = 2.0;
        let mut th = [0.0];
        for t in 1..=200u64 {
            let before = th[0];
            adam.step(&mut th, &[g]).expect("step");
            let want = c.lr * (1.0 + t as f64 / 50.0).powf(-0.6) * g / (g + c.eps);
            let got = th[0] - before;
            assert!(
                (got - want).abs() <= 1e-12 * want,
                "step {t}: moved {got}, want {want}"
            );
        }
        // The decay is real: step 200 is (1 + 4)^−0.6 / (1 + 1/50)^−0.6 ≈ 0.39 of step 1.
        let first = c.lr * (1.0f64 + 1.0 / 50.0).powf(-0.6);
        let last = c.lr * 5.0f64.powf(-0.6);
        assert!(last / first < 0.4 && last / first > 0.38);
        assert_eq!(adam.t, 200);
    }

    #[test]
    fn mismatched_lengths_are_an_error_and_change_nothing() {
        let mut adam = Adam::new(AdamConfig::default(), 3);
        let before = adam.clone();
        let mut th = [1.0, 2.0, 3.0];
        let err = adam.step(&mut th, &[0.5, 0.5]).expect_err("short gradient");
        assert!(matches!(
            err,
            crate::Error::DimensionMismatch {
                expected: 3,
                found: 2,
                ..
            }
        ));
        let mut long = [1.0; 4];
        assert!(
            adam.step(&mut long, &[0.5; 4]).is_err(),
            "θ longer than the moments"
        );
        assert_eq!(adam, before);
        assert_eq!(th, [1.0, 2.0, 3.0]);
    }
}
