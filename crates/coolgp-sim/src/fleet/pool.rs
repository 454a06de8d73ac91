//! The fleet-wide fit of the agents' learned residual kernel (issue 19, docs/LOCAL.md §9):
//! after each fusion, every agent's sample of its memory (its share of
//! [`PoolOptions::rows`]), one fit on the pooled samples, and the result to every agent.

use std::time::Instant;

use coolgp::local::pool::{fit_pooled, shares};
use coolgp::local::{FitSample, LocalFit, PoolOptions, ResidualKernel, ResidualKind};
use coolgp::Agent;
use rayon::prelude::*;

use super::Fleet;

impl Fleet<'_> {
    /// With `--local-fit fleet` (and a learned residual kernel): one pooled fit
    /// ([`fit_agents_pooled`]) from the previous pooled parameters
    /// ([`PoolOptions::warm_start`], the default) or else from the agents' initial kernel,
    /// counted in the learning phase's time.
    pub(super) fn fit_local_pooled(&mut self) {
        let local = self.cfg.local;
        if !local.is_on() || local.fit != LocalFit::Fleet || local.kernel != ResidualKind::Learned {
            return;
        }
        let t = Instant::now();
        let Some(a0) = self.agents.first() else {
            return;
        };
        let initial = self
            .local_initial
            .get_or_insert_with(|| a0.local().kernel().clone());
        let opts = &self.cfg.pool;
        let (start, first) = match self.local_pooled {
            true if opts.warm_start => (a0.local().kernel().clone(), false),
            _ => (initial.clone(), true),
        };
        if fit_agents_pooled(&mut self.agents, opts, &start, first).is_some() {
            self.local_pooled = true;
        }
        self.phases.learn_s += t.elapsed().as_secs_f64();
    }
}

/// One fleet-wide fit of the learned residual kernel over `agents`: agent i offers
/// `shares(opts.rows, agents)[i]` evenly spaced rows of its memory with their residuals
/// against its global model ([`Agent::local_fit_sample`]; an agent that cannot offer one
/// offers none), the kernel is fitted once on the pooled rows in agent order
/// ([`fit_pooled`] from `start`, a first fit if `first`), and every agent takes
/// the parameters ([`Agent::set_local_kernel_params`]; an agent whose memory cannot then be
/// factored leaves its memory unused until the next fit). Deterministic. Returns the
/// parameters (`None`: no fit, nothing changed).
pub fn fit_agents_pooled(
    agents: &mut [Agent],
    opts: &PoolOptions,
    start: &ResidualKernel,
    first: bool,
) -> Option<Vec<f64>> {
    let share = shares(opts.rows, agents.len());
    let samples: Vec<FitSample> = agents
        .par_iter()
        .zip(share.par_iter())
        .map(|(a, &k)| match k {
            0 => FitSample::default(),
            k => a.local_fit_sample(k).unwrap_or_default(),
        })
        .collect();
    let params = fit_pooled(start, &samples, first, opts)?;
    agents.par_iter_mut().for_each(|a| {
        let _ = a.set_local_kernel_params(&params);
    });
    Some(params)
}
