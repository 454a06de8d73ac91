//! The shared projection modes (spec §13): what an agent contributes to the fleet's q(W) sums
//! carried in tree messages, and how it adopts the fleet's q(W) after a fusion.

use crate::protocol::agent::{Agent, ProjectionMode};
use crate::protocol::message::ProjectionShare;

impl Agent {
    /// This agent's term of the fleet sums behind the shared projection: weight `w` (N_own,
    /// or 1 for an agent with data under the proxies), `w·θ` (under the product proxy, the
    /// natural form of q(W)), `w·m1`, `w·m2`.
    pub(crate) fn own_projection_share(&self) -> Option<ProjectionShare> {
        let n_own = self.n_own();
        let proj = self.projection();
        let has_data = if n_own > 0 { 1.0 } else { 0.0 };
        let (w, theta) = match self.config().projection {
            ProjectionMode::PerAgent | ProjectionMode::Fleet => return None,
            ProjectionMode::Shared => (n_own as f64, proj.to_flat()),
            ProjectionMode::SharedPlainProxy => (has_data, proj.to_flat()),
            ProjectionMode::SharedProductProxy => (has_data, proj.to_natural_flat()),
        };
        let adam = self.learning().adam();
        Some(ProjectionShare {
            weight: w,
            theta: theta.iter().map(|v| w * v).collect(),
            m1: adam.m1.iter().map(|v| w * v).collect(),
            m2: adam.m2.iter().map(|v| w * v).collect(),
        })
    }

    /// Shared projection modes: replaces θ and the Adam moments by the fleet's `N`-weighted
    /// averages carried in the latest messages (federated averaging, spec §13), or by the
    /// proxies' plain average or product ([`ProjectionMode`]). Returns false (and changes
    /// nothing) in per-agent mode, before any data, or if the fleet's sums are unusable.
    pub fn adopt_fleet_projection(&mut self) -> bool {
        let Some(own) = self.own_projection_share() else {
            return false;
        };
        let total = self.fusion().projection_total(own);
        if total.weight <= 0.0 {
            return false;
        }
        let inv = 1.0 / total.weight;
        let product = self.config().projection == ProjectionMode::SharedProductProxy;
        let learning = self.learning_mut();
        if product {
            if !learning.set_from_natural_sum(&total.theta, total.weight) {
                return false;
            }
        } else {
            let theta: Vec<f64> = total.theta.iter().map(|v| v * inv).collect();
            learning.set_theta(&theta);
        }
        learning.set_moments(
            total.m1.iter().map(|v| v * inv).collect(),
            total.m2.iter().map(|v| v * inv).collect(),
        );
        self.refresh_own(0.0);
        true
    }
}
