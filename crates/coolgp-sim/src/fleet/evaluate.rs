//! Evaluating a streamed fleet: exactness of the last fusion, every agent's own and fused
//! q(u) on its test set, density scores, the central learner, and the server baselines of
//! spec §8 replayed over the same stream — all gathered into a [`Report`].

use std::time::Instant;

use coolgp::baselines::{Baseline, BaselineKernel};
use coolgp::rng::Rng;
use coolgp::{Agent, Projection, View};
use rayon::prelude::*;

use super::query::QueryScores;
use super::{needs_tests, spaced, Fleet};
use crate::baselines::{replay, Replay, Uploads};
use crate::eval::{density_scores, eval_both, frob, mean_over, rmse, rmse_with};
use crate::report::{AgentRow, Report};
use crate::SimError;

/// Test points per agent for the NLPD (full predictive variance, O(m² d') per point).
const NLPD_POINTS: usize = 1_000;

/// The density scores and predictive scales of the evaluated agents and the central learner.
struct Density {
    nlpd_post: f64,
    coverage95_post: f64,
    sigma_s_post: f64,
    sigma_n_post: f64,
    nlpd_central: Option<f64>,
    sigma_s_central: Option<f64>,
    sigma_n_central: Option<f64>,
}

/// The server baselines' figures (original units).
#[derive(Default)]
struct References {
    rmse_ddtc: Option<f64>,
    rmse_dpitc: Option<f64>,
    uploads: Option<[Uploads; 2]>,
}

impl Fleet<'_> {
    /// Evaluates the fleet after [`Fleet::stream`]: the largest relative error of the last
    /// fusion against `T_g = T0 + Σ E_i`, each agent's own ("pre") and fused ("post") RMSE on
    /// its whole test set, NLPD and 95% coverage of the fused models, the central learner,
    /// dDTC and dPITC replayed over the same stream (spec §8), and the fleet-wide queries
    /// with the agents' local memories (issue 19; [`QueryScores`]). The last learning-curve
    /// point becomes the final evaluation.
    ///
    /// # Errors
    /// [`SimError::Config`] if the workload has no test sets.
    pub fn evaluate(mut self) -> Result<Report, SimError> {
        needs_tests(self.work)?;
        let y_scale = self.work.y_scale;
        let t = Instant::now();
        let fusion_max_rel_err = self.fusion_error();
        let per_agent = self.agent_rows();
        let density = self.density();
        let na = per_agent.len().max(1) as f64;
        let rmse_pre = per_agent.iter().map(|r| r.rmse_pre).sum::<f64>() / na;
        let rmse_post = per_agent.iter().map(|r| r.rmse_post).sum::<f64>() / na;
        let members = self
            .cfg
            .suspects
            .checks()
            .then(|| self.watch.report(&self.agents));
        let suspect = |i: usize| members.as_ref().is_some_and(|m| m.suspects.contains(&i));
        let trusted: Vec<f64> = per_agent
            .iter()
            .filter(|r| !suspect(r.id))
            .map(|r| r.rmse_post)
            .collect();
        let rmse_post_trusted = trusted.iter().sum::<f64>() / trusted.len().max(1) as f64;
        let rmse_central = self.central.as_ref().map(|c| {
            let alpha = c.mean_weights(View::Own).ok();
            mean_over(&self.work.tests, usize::MAX, |x, y| {
                rmse_with(c, alpha.as_deref(), x, y)
            }) * y_scale
        });
        self.phases.eval_s += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let refs = if self.cfg.baselines {
            self.references()
        } else {
            References::default()
        };
        self.phases.baselines_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let query = self.fleet_query();
        self.phases.local_s = t.elapsed().as_secs_f64();
        self.phases.calibration_cpu_s = query.calibration_cpu_s;
        let rule = query
            .rules
            .get(query.rule.name())
            .copied()
            .unwrap_or(QueryScores::NAN);
        let oracle = |f: fn(&QueryScores) -> f64| query.oracle.as_ref().map(f);
        // The last curve point is the final evaluation (every agent, the whole test set).
        if let Some(last) = self.curves.last_mut() {
            last.rmse_pre = rmse_pre;
            last.rmse_post = rmse_post;
            last.rmse_central = rmse_central;
            last.rmse_ddtc = refs.rmse_ddtc;
            last.rmse_dpitc = refs.rmse_dpitc;
        }
        let rmse_constant = mean_over(&self.work.tests, usize::MAX, |_, y| {
            rmse(&vec![0.0; y.len()], y)
        }) * y_scale;
        let cfg = self.cfg;
        Ok(Report {
            rmse_pre,
            rmse_post,
            rmse_post_trusted,
            members,
            rmse_central,
            rmse_ddtc: refs.rmse_ddtc,
            rmse_dpitc: refs.rmse_dpitc,
            baseline_uploads: refs.uploads,
            rmse_constant,
            nlpd_post: density.nlpd_post,
            nlpd_central: density.nlpd_central,
            coverage95_post: density.coverage95_post,
            sigma_s_post: density.sigma_s_post,
            sigma_n_post: density.sigma_n_post,
            sigma_s_central: density.sigma_s_central,
            sigma_n_central: density.sigma_n_central,
            rmse_fleet_query: rule.rmse,
            nlpd_fleet_query: rule.nlpd,
            coverage95_fleet_query: rule.coverage95,
            fleet_query_var_scale: rule.var_scale,
            fleet_query_weight: rule.weight,
            rmse_fleet_query_unweighted: rule.rmse_unweighted,
            rmse_fleet_query_global: rule.rmse_global,
            nlpd_fleet_query_raw: rule.nlpd_raw,
            coverage95_fleet_query_raw: rule.coverage95_raw,
            fleet_calibration_rows: query.calibration_rows,
            fleet_query_route: cfg.route,
            fleet_query_answers_per_row: query.answers_per_row,
            fleet_rule: query.rule.name().into(),
            fleet_rule_auto: cfg.fleet_rule.is_none(),
            rmse_oracle_local: oracle(|s| s.rmse),
            nlpd_oracle_local: oracle(|s| s.nlpd),
            coverage95_oracle_local: oracle(|s| s.coverage95),
            fleet_query_rules: query.rules,
            fleet_query_union: query.union,
            local_points_mean: query.local_points_mean,
            local_family: local_family(&self.agents),
            fleet_query_by_group: query.by_group,
            local_bytes_per_agent: query.local_bytes_per_agent,
            agents: cfg.agents,
            inducing: self.vocab.m(),
            points: self.points,
            batches: self.dispatch.len(),
            wall_s: self.start.elapsed().as_secs_f64(),
            fusion_max_rel_err,
            fusion: self.fusion.name.into(),
            topology: cfg.topology.name().to_owned(),
            diameter: self.fusion.diameter,
            rounds: self.fusion.rounds(),
            rounds_capped: self.fusion.capped(),
            schedule: self.fusion.schedule().into(),
            loss: cfg.loss,
            network: self.net,
            phases: self.phases,
            seed: cfg.seed,
            fingerprint: self.vocab.fingerprint().short(),
            curves: self.curves,
            per_agent,
        })
    }

    /// Exactness of the last fusion: the largest `‖T_fused,i − T_g‖_F / ‖T_g‖_F` against
    /// `T_g = T0 + Σ E_i` (each agent's own scales: in the fleet projection mode the sums are
    /// in unit scale and every agent applies the fleet's). With groups each agent's excess
    /// is in its group's scales and the sums are plain; each part of the graph
    /// (`--fuse-groups within`: each group) has its own `T_g`. A withheld agent's excess
    /// (a contained suspect, issue 29) is in no other agent's `T_g`, and under the tree rule
    /// in its own (under push-sum it has left the mass, its own estimate's too).
    fn fusion_error(&self) -> f64 {
        let agents = &self.agents;
        self.plan
            .parts
            .iter()
            .map(|part| {
                let e_sum = coolgp::fuse::sum_excess(
                    self.vocab.m(),
                    part.iter()
                        .filter(|&&i| !agents[i].is_withheld())
                        .map(|&i| agents[i].own_excess()),
                );
                part.par_iter()
                    .map(|&i| {
                        let a = &agents[i];
                        let tree = self.fusion.rule == coolgp::FusionRule::Tree;
                        let tg = if a.is_withheld() && tree {
                            let mut own = e_sum.clone();
                            own.add_in_place(a.own_excess());
                            a.natural_params_of(&own)
                        } else {
                            a.natural_params_of(&e_sum)
                        };
                        frob(&a.natural_params(View::Fused), Some(&tg)) / frob(&tg, None)
                    })
                    .reduce(|| 0.0, f64::max)
            })
            .fold(0.0, f64::max)
    }

    /// Every agent's blocks, points, and own and fused RMSE on its whole test set (original
    /// units).
    fn agent_rows(&self) -> Vec<AgentRow> {
        let y_scale = self.work.y_scale;
        self.agents
            .par_iter()
            .enumerate()
            .map(|(i, a)| {
                let t = self.test_of(i);
                let (pre, post) = eval_both(a, t.x.as_ref(), &t.y);
                AgentRow {
                    id: i,
                    blocks: a.blocks(),
                    points: a.n_own(),
                    rmse_pre: pre * y_scale,
                    rmse_post: post * y_scale,
                }
            })
            .collect()
    }

    /// NLPD and coverage of the fused models of the evaluated agents (the k-th on the k-th
    /// window of its test set, eval::window), the scales they predict with, and the central
    /// learner on the same points.
    fn density(&self) -> Density {
        let (cfg, y_scale) = (self.cfg, self.work.y_scale);
        let agents = &self.agents;
        let nlpd_ids = spaced(cfg.agents, cfg.curve_agents);
        let scores: Vec<(f64, f64)> = nlpd_ids
            .par_iter()
            .enumerate()
            .map(|(k, &i)| {
                let window = (k, NLPD_POINTS);
                density_scores(&agents[i], View::Fused, self.test_of(i), window, y_scale)
            })
            .collect();
        let k = scores.len().max(1) as f64;
        // The scales the evaluated agents and the central learner predict with (original
        // units).
        let scale_of = |a: &Agent, f: fn(&Projection) -> f64| f(a.projection()) * y_scale;
        let mean_scale = |f: fn(&Projection) -> f64| {
            nlpd_ids
                .iter()
                .map(|&i| scale_of(&agents[i], f))
                .sum::<f64>()
                / k
        };
        let central = self.central.as_ref();
        Density {
            nlpd_post: scores.iter().map(|s| s.0).sum::<f64>() / k,
            coverage95_post: scores.iter().map(|s| s.1).sum::<f64>() / k,
            sigma_s_post: mean_scale(Projection::sigma_s),
            sigma_n_post: mean_scale(Projection::sigma_n),
            nlpd_central: central.map(|c| {
                nlpd_ids
                    .par_iter()
                    .enumerate()
                    .map(|(w, &i)| {
                        let window = (w, NLPD_POINTS);
                        density_scores(c, View::Own, self.test_of(i), window, y_scale).0
                    })
                    .sum::<f64>()
                    / k
            }),
            sigma_s_central: central.map(|c| scale_of(c, Projection::sigma_s)),
            sigma_n_central: central.map(|c| scale_of(c, Projection::sigma_n)),
        }
    }

    /// dDTC and dPITC (spec §8) replayed over the run's stream, each summary uploaded once
    /// through the lossy network, with the common W0 of the central learner's final mean
    /// (else agent 0's); their curves are written into the fleet's.
    fn references(&mut self) -> References {
        let (cfg, work) = (self.cfg, self.work);
        let p = self
            .central
            .as_ref()
            .unwrap_or(&self.agents[0])
            .projection();
        let kern = BaselineKernel {
            w0: p.mu().to_owned(),
            sigma_s: p.sigma_s(),
            sigma_n: p.sigma_n(),
        };
        let up_rng = Rng::new(cfg.seed, 0xBA5E);
        let results: Vec<Replay> = [Baseline::Ddtc, Baseline::Dpitc]
            .par_iter()
            .map(|&which| {
                replay(
                    which,
                    &kern,
                    &self.vocab,
                    work,
                    &self.dispatch.order,
                    self.cadence.chunk,
                    cfg.loss,
                    cfg.curve_points,
                    up_rng.clone(),
                )
            })
            .collect();
        for (c, r) in self.curves.iter_mut().zip(&results[0].0) {
            c.rmse_ddtc = r.map(|v| v * work.y_scale);
        }
        for (c, r) in self.curves.iter_mut().zip(&results[1].0) {
            c.rmse_dpitc = r.map(|v| v * work.y_scale);
        }
        References {
            rmse_ddtc: results[0].1.map(|v| v * work.y_scale),
            rmse_dpitc: results[1].1.map(|v| v * work.y_scale),
            uploads: Some([results[0].2, results[1].2]),
        }
    }
}

/// The residual kernel family the agents hold (agent 0's name; empty without agents).
fn local_family(agents: &[Agent]) -> String {
    agents
        .first()
        .map(|a| a.local().kernel().family().name().to_owned())
        .unwrap_or_default()
}
