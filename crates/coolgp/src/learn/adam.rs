//! Adam on the per-datum gradient with a Robbins–Monro decay (spec §6, revised).

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

    /// One ascent step `θ += lr_t · m̂/(√v̂ + ε)` on gradient `g` (maximization).
    pub fn step(&mut self, theta: &mut [f64], g: &[f64]) {
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
            adam.step(&mut th, &g);
        }
        assert!((th[0] - 3.0).abs() < 1e-2, "θ = {}", th[0]);
    }
}
