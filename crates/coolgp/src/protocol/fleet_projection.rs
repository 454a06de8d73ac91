//! The shared projection modes (spec §13): what an agent contributes to the fleet's q(W) sums
//! carried in tree messages, and how it adopts the fleet's q(W) after a fusion.

use crate::protocol::agent::{Agent, ProjectionMode};
use crate::protocol::message::ProjectionShare;

impl Agent {
    /// This agent's term of the fleet sums behind the shared projection: weight `w` (N_own,
    /// or 1 for an agent with data under the proxies), `w·θ` (under the product proxy, the
    /// natural form of q(W)), `w·m1`, `w·m2`.
    pub(crate) fn own_projection_share(&self) -> Option<ProjectionShare> {
        let has_data = if self.n_own > 0 { 1.0 } else { 0.0 };
        let (w, theta) = match self.config.projection {
            ProjectionMode::PerAgent | ProjectionMode::Fleet => return None,
            ProjectionMode::Shared => (self.n_own as f64, self.proj.to_flat()),
            ProjectionMode::SharedPlainProxy => (has_data, self.proj.to_flat()),
            ProjectionMode::SharedProductProxy => (has_data, self.proj.to_natural_flat()),
        };
        Some(ProjectionShare {
            weight: w,
            theta: theta.iter().map(|v| w * v).collect(),
            m1: self.adam.m1.iter().map(|v| w * v).collect(),
            m2: self.adam.m2.iter().map(|v| w * v).collect(),
        })
    }

    /// Shared projection modes: replaces θ and the Adam moments by the fleet's `N`-weighted
    /// averages carried in the latest messages (federated averaging, spec §13), or by the
    /// proxies' plain average or product ([`ProjectionMode`]). Returns false (and changes
    /// nothing) in per-agent mode, before any data, or if the fleet's sums are unusable.
    pub fn adopt_fleet_projection(&mut self) -> bool {
        let Some(mut total) = self.own_projection_share() else {
            return false;
        };
        for v in self.inbox.values() {
            if let Some(p) = &v.projection {
                total.add_in_place(p);
            }
        }
        if total.weight <= 0.0 {
            return false;
        }
        let inv = 1.0 / total.weight;
        if self.config.projection == ProjectionMode::SharedProductProxy {
            if !self.proj.set_from_natural_sum(&total.theta, total.weight) {
                return false;
            }
        } else {
            let theta: Vec<f64> = total.theta.iter().map(|v| v * inv).collect();
            self.proj.set_flat(&theta);
        }
        self.adam.m1 = total.m1.iter().map(|v| v * inv).collect();
        self.adam.m2 = total.m2.iter().map(|v| v * inv).collect();
        self.refresh_own(0.0);
        true
    }
}
