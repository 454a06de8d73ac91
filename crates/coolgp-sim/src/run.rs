//! One simulated run: the paper's stream protocol over a fleet, with references.

use std::sync::Arc;
use std::time::Instant;

use coolgp::baselines::{Baseline, BaselineKernel};
use coolgp::fuse::tree::two_pass_schedule;
use coolgp::rng::Rng;
use coolgp::{Agent, AgentConfig, FusionRule, ProjectionMode, Topology, View, Vocabulary};
use rayon::prelude::*;

use crate::baselines::{replay, Replay};
use crate::config::{FusionChoice, Schedule, SimConfig};
use crate::eval::{density_scores, eval_both, frob, mean_over, rmse, rmse_with};
use crate::groups::GroupPlan;
use crate::network::{
    run_rounds, run_schedule, run_schedule_of, run_site_rounds, run_until_settled, NetStats,
    Payload, Settle, SettledRounds,
};
use crate::report::{AgentRow, CurvePoint, Phases, Report};
use crate::workload::{TestSet, Workload};
use crate::SimError;

/// Test points per agent for the NLPD (full predictive variance, O(m² d') per point).
const NLPD_POINTS: usize = 1_000;

/// Progress callback: (batches done, batches total).
pub type Progress<'a> = &'a (dyn Fn(usize, usize) + Sync);

/// Runs the paper's stream protocol (spec §13; paper §5): batches in random order, each to a
/// random (or routed) agent; every `fuse_every` batches the fleet runs its fusion rounds.
///
/// # Errors
/// [`SimError`] for an invalid configuration or workload.
pub fn run(cfg: &SimConfig, work: &Workload, progress: Progress<'_>) -> Result<Report, SimError> {
    let start = Instant::now();
    validate(cfg, work)?;
    let d = work.d;
    let vocab = match &cfg.vocab {
        Some(v) => v.clone(),
        None => Arc::new(Vocabulary::default_design(
            cfg.inducing,
            cfg.d_latent.unwrap_or(d),
            cfg.seed,
        )?),
    };
    let fleet = cfg.projection == ProjectionMode::Fleet;
    // One graph over the fleet, or one per projection group (`--fuse-groups within`).
    let plan = GroupPlan::new(cfg, work, fleet)?;
    let graphs = plan.graphs(cfg.topology, cfg.seed);
    let (graphs, rule) = match (cfg.fusion, graphs.iter().all(Topology::is_tree)) {
        (FusionChoice::Tree, false) => {
            return Err(SimError::Config(format!(
                "--fusion tree on a {:?} graph with cycles would double count (spec §7); use push-sum or spanning-tree",
                cfg.topology
            )))
        }
        (FusionChoice::Auto | FusionChoice::Tree, true) => (graphs, FusionRule::Tree),
        (FusionChoice::SpanningTree, _) => (
            graphs.iter().map(Topology::bfs_spanning_tree).collect(),
            FusionRule::Tree,
        ),
        (FusionChoice::PushSum, _) | (FusionChoice::Auto, false) => (
            graphs,
            FusionRule::PushSum {
                agents: cfg.agents as f64,
                weight: 1.0,
            },
        ),
    };
    // The longest diameter over the parts (each part is connected).
    let diameter = graphs
        .iter()
        .map(Topology::diameter)
        .collect::<Option<Vec<_>>>()
        .map(|d| d.into_iter().max().unwrap_or(0));
    let topo = plan.union(graphs);
    let grouped = plan.group_of.iter().any(Option::is_some);
    let two_pass = match (cfg.schedule, rule) {
        (Schedule::TwoPass, FusionRule::PushSum { .. }) => {
            return Err(SimError::Config(
                "--schedule two-pass needs tree fusion (push-sum runs in rounds)".into(),
            ))
        }
        (Schedule::TwoPass, FusionRule::Tree) => {
            if cfg.rounds.is_some() {
                return Err(SimError::Config(
                    "--rounds applies to --schedule rounds, not two-pass".into(),
                ));
            }
            true
        }
        (Schedule::Auto, FusionRule::Tree) => cfg.loss == 0.0 && cfg.rounds.is_none(),
        _ => false,
    };
    let steps = if two_pass {
        two_pass_schedule(&topo)
    } else {
        Vec::new()
    };
    let rounds = if two_pass {
        steps.len()
    } else {
        cfg.rounds.unwrap_or(match rule {
            FusionRule::Tree => diameter.unwrap_or(1).max(1),
            FusionRule::PushSum { .. } => (8 * diameter.unwrap_or(1)).max(40),
        })
    };
    // Push-sum without --rounds runs each fusion until the estimates settle (or a cap).
    let settle =
        (!two_pass && cfg.rounds.is_none() && rule != FusionRule::Tree).then(Settle::default);
    let settled_rounds = SettledRounds::default();
    let communicate = |agents: &mut [Agent], rng: &mut Rng| {
        if two_pass {
            run_schedule(agents, &steps, cfg.loss, rng)
        } else if let Some(s) = settle {
            let (net, used, settled) = run_until_settled(agents, s, cfg.loss, rng);
            settled_rounds.record(used, settled);
            net
        } else {
            run_rounds(agents, rounds, cfg.loss, rng)
        }
    };
    // Sites fuse more often than q(u) (spec §14). Under the tree rule they travel on their
    // own (site-only messages); push-sum has no site-only messages (the sites share the
    // running totals' weight with q(u)), so there a site fusion is a whole push-sum fusion,
    // and q(u) fuses as often as the sites.
    let sites_apart = fleet;
    let fuse_sites = |agents: &mut [Agent], rng: &mut Rng| match rule {
        FusionRule::Tree if two_pass => {
            run_schedule_of(Payload::Sites, agents, &steps, cfg.loss, rng)
        }
        FusionRule::Tree => run_site_rounds(agents, rounds, cfg.loss, rng),
        FusionRule::PushSum { .. } => communicate(agents, rng),
    };
    let site = cfg.site.clone();
    let agent_cfg = |i: usize| AgentConfig {
        mode: cfg.mode,
        projection: cfg.projection,
        // Push-sum's scale s is the number of agents that exchange mass: the agent's part.
        fusion: match (rule, plan.part_len.get(i)) {
            (FusionRule::PushSum { weight, .. }, Some(&k)) => FusionRule::PushSum {
                agents: k as f64,
                weight,
            },
            (r, _) => r,
        },
        group: plan.group_of.get(i).copied().flatten(),
        adam: cfg.adam.clone(),
        learn: cfg.learn,
        seed: cfg.seed ^ (0x9E37_79B9 * (i as u64 + 1)),
        site: site.clone(),
    };
    let mut agents: Vec<Agent> = (0..cfg.agents)
        .map(|i| {
            let mut a = Agent::new(i as u64, vocab.clone(), d, agent_cfg(i))?;
            a.set_neighbors(topo.neighbors(i).iter().map(|&j| j as u64))?;
            Ok(a)
        })
        .collect::<Result<_, coolgp::Error>>()?;
    let mut central = if cfg.central {
        // The reference: one agent on the whole stream, with the fleet's update (in the fleet
        // mode: the same site update as a fleet of one, with the central damping).
        let mut c = AgentConfig {
            fusion: FusionRule::Tree,
            projection: if fleet {
                ProjectionMode::Fleet
            } else {
                ProjectionMode::PerAgent
            },
            ..agent_cfg(usize::MAX - 1)
        };
        c.site.damping = cfg.central_damping;
        // One learner sees every block: its own damping is the whole rule.
        c.site.fleet_damping = 0.0;
        Some(Agent::new(u64::MAX, vocab.clone(), d, c)?)
    } else {
        None
    };
    // Stream order and dispatch.
    let mut rng = Rng::new(cfg.seed, 0x57AE);
    let mut order: Vec<usize> = (0..work.batches.len()).collect();
    if cfg.shuffle {
        rng.shuffle(&mut order);
    }
    let groups = work.groups.max(1);
    let owner: Vec<usize> = order
        .iter()
        .map(|&b| match work.batches[b].group {
            Some(g) if cfg.agents >= groups => {
                let g = g % groups;
                let members = (cfg.agents - g).div_ceil(groups);
                g + groups * rng.below(members)
            }
            Some(g) => g % cfg.agents,
            None => rng.below(cfg.agents),
        })
        .collect();
    let test_index = |agent: usize| -> usize {
        if work.test_by_group {
            (agent % groups) % work.tests.len()
        } else {
            0
        }
    };
    let test_of = |agent: usize| -> &TestSet { &work.tests[test_index(agent)] };
    let total = order.len();
    let chunk = if cfg.fuse_every == 0 {
        total.max(1)
    } else {
        cfg.fuse_every
    };
    // Sites fuse on their own, more often than q(u) (spec §14): every `site_chunk` batches.
    let site_chunk = if sites_apart {
        cfg.site_every
            .unwrap_or_else(|| total.div_ceil(100).min(cfg.agents))
            .max(1)
    } else {
        chunk
    };
    let mut net_rng = Rng::new(cfg.seed, 0x4E7);
    let mut site_rng = Rng::new(cfg.seed, 0x517E);
    let mut net = NetStats::default();
    let mut curves = Vec::new();
    let mut done = 0;
    let mut points = 0;
    let curve_ids: Vec<usize> = spaced(cfg.agents, cfg.curve_agents);
    let mut phases = Phases::default();
    // Warm-up q(u) fusions of a tree fleet's sites (SimConfig::fuse_warmup): before the first
    // regular fusion, each time the stream has doubled since the first site fusion.
    let warmup = cfg.fuse_warmup && sites_apart && rule == FusionRule::Tree;
    while done < total {
        let end = if warmup && done < chunk {
            (2 * done).max(site_chunk).min(chunk)
        } else {
            done + chunk
        }
        .min(total);
        points += order[done..end]
            .iter()
            .map(|&b| work.batches[b].y.len())
            .sum::<usize>();
        let epoch: Vec<usize> = order[done..end].to_vec();
        let fleet_step = || -> Result<(NetStats, f64), coolgp::Error> {
            let (mut site_net, mut site_s) = (NetStats::default(), 0.0);
            for start in (done..end).step_by(site_chunk) {
                let stop = (start + site_chunk).min(end);
                let mut per_agent: Vec<Vec<usize>> = vec![Vec::new(); cfg.agents];
                for k in start..stop {
                    per_agent[owner[k]].push(order[k]);
                }
                agents
                    .par_iter_mut()
                    .zip(per_agent.par_iter())
                    .try_for_each(|(a, bs)| -> Result<(), coolgp::Error> {
                        for &b in bs {
                            let bt = &work.batches[b];
                            a.handle_block(bt.x.as_ref(), &bt.y)?;
                        }
                        while a.poll_event().is_some() {}
                        Ok(())
                    })?;
                // The last sub-chunk's sites travel with the q(u) fusion that follows; with
                // groups they fuse first, so that every agent's excess is in its group's
                // settled scales when q(u) is fused (the fusion is then exact on trees).
                if sites_apart && (stop < end || (grouped && rule == FusionRule::Tree)) {
                    let t = Instant::now();
                    site_net.add_all(fuse_sites(&mut agents, &mut site_rng));
                    site_s += t.elapsed().as_secs_f64();
                }
            }
            Ok((site_net, site_s))
        };
        let central_step = |c: &mut Option<Agent>| -> Result<(), coolgp::Error> {
            if let Some(c) = c {
                for &b in &epoch {
                    let bt = &work.batches[b];
                    c.handle_block(bt.x.as_ref(), &bt.y)?;
                }
                while c.poll_event().is_some() {}
            }
            Ok(())
        };
        let t = Instant::now();
        let (r1, r2) = rayon::join(fleet_step, || central_step(&mut central));
        let (site_net, site_s) = r1?;
        r2?;
        net.add_all(site_net);
        phases.learn_s += t.elapsed().as_secs_f64() - site_s;
        phases.fusion_s += site_s;
        let t = Instant::now();
        net.add_all(communicate(&mut agents, &mut net_rng));
        if cfg.projection.is_shared() {
            agents.par_iter_mut().for_each(|a| {
                a.adopt_fleet_projection();
            });
            net.add_all(communicate(&mut agents, &mut net_rng));
        }
        phases.fusion_s += t.elapsed().as_secs_f64();
        let t = Instant::now();
        done = end;
        progress(done, total);
        // Learning-curve point on a subset.
        let evals: Vec<(f64, f64)> = curve_ids
            .par_iter()
            .map(|&i| {
                let t = test_of(i);
                let n = t.y.len().min(cfg.curve_points);
                let xs = t.x.as_ref().subrows(0, n);
                eval_both(&agents[i], xs, &t.y[..n])
            })
            .collect();
        let k = evals.len().max(1) as f64;
        let rmse_central = central.as_ref().map(|c| {
            let alpha = c.mean_weights(View::Own).ok();
            mean_over(&work.tests, cfg.curve_points, |x, y| {
                rmse_with(c, alpha.as_deref(), x, y)
            }) * work.y_scale
        });
        curves.push(CurvePoint {
            batches: done,
            points,
            rmse_pre: evals.iter().map(|e| e.0).sum::<f64>() / k * work.y_scale,
            rmse_post: evals.iter().map(|e| e.1).sum::<f64>() / k * work.y_scale,
            rmse_central,
            rmse_ddtc: None,
            rmse_dpitc: None,
            per_agent: curve_ids
                .iter()
                .zip(&evals)
                .map(|(&i, e)| (i, e.0 * work.y_scale, e.1 * work.y_scale))
                .collect(),
        });
        phases.eval_s += t.elapsed().as_secs_f64();
    }
    let t = Instant::now();
    // Exactness of the last fusion against T_g = T0 + Σ E_i (each agent's own scales: in the
    // fleet projection mode the sums are in unit scale and every agent applies the fleet's).
    // With groups each agent's excess is in its group's scales and the sums are plain; each
    // part of the graph (`--fuse-groups within`: each group) has its own T_g.
    let fusion_max_rel_err = plan
        .parts
        .iter()
        .map(|part| {
            let e_sum =
                coolgp::fuse::sum_excess(vocab.m(), part.iter().map(|&i| agents[i].own_excess()));
            part.par_iter()
                .map(|&i| {
                    let a = &agents[i];
                    let tg = a.natural_params_of(&e_sum);
                    frob(&a.natural_params(View::Fused), Some(&tg)) / frob(&tg, None)
                })
                .reduce(|| 0.0, f64::max)
        })
        .fold(0.0, f64::max);
    // Final per-agent evaluation on the full test sets.
    let per_agent: Vec<AgentRow> = agents
        .par_iter()
        .enumerate()
        .map(|(i, a)| {
            let t = test_of(i);
            let (pre, post) = eval_both(a, t.x.as_ref(), &t.y);
            AgentRow {
                id: i,
                blocks: a.blocks(),
                points: a.n_own(),
                rmse_pre: pre * work.y_scale,
                rmse_post: post * work.y_scale,
            }
        })
        .collect();
    // The k-th evaluated agent is scored on the k-th window of its test set (eval::window).
    let nlpd_ids = spaced(cfg.agents, cfg.curve_agents);
    let scores: Vec<(f64, f64)> = nlpd_ids
        .par_iter()
        .enumerate()
        .map(|(k, &i)| {
            density_scores(
                &agents[i],
                View::Fused,
                test_of(i),
                (k, NLPD_POINTS),
                work.y_scale,
            )
        })
        .collect();
    let k = scores.len().max(1) as f64;
    let nlpd_post = scores.iter().map(|s| s.0).sum::<f64>() / k;
    let coverage95_post = scores.iter().map(|s| s.1).sum::<f64>() / k;
    // The scales the evaluated agents and the central learner predict with (original units).
    let scale_of = |a: &Agent, f: fn(&coolgp::Projection) -> f64| f(a.projection()) * work.y_scale;
    let mean_scale = |f: fn(&coolgp::Projection) -> f64| {
        nlpd_ids
            .iter()
            .map(|&i| scale_of(&agents[i], f))
            .sum::<f64>()
            / k
    };
    let (sigma_s_post, sigma_n_post) = (
        mean_scale(coolgp::Projection::sigma_s),
        mean_scale(coolgp::Projection::sigma_n),
    );
    let sigma_s_central = central
        .as_ref()
        .map(|c| scale_of(c, coolgp::Projection::sigma_s));
    let sigma_n_central = central
        .as_ref()
        .map(|c| scale_of(c, coolgp::Projection::sigma_n));
    // The central learner on the same points: each evaluated agent's window.
    let nlpd_central = central.as_ref().map(|c| {
        nlpd_ids
            .par_iter()
            .enumerate()
            .map(|(w, &i)| {
                density_scores(c, View::Own, test_of(i), (w, NLPD_POINTS), work.y_scale).0
            })
            .sum::<f64>()
            / k
    });
    let na = per_agent.len().max(1) as f64;
    let rmse_pre = per_agent.iter().map(|r| r.rmse_pre).sum::<f64>() / na;
    let rmse_post = per_agent.iter().map(|r| r.rmse_post).sum::<f64>() / na;
    let rmse_central = central.as_ref().map(|c| {
        let alpha = c.mean_weights(View::Own).ok();
        mean_over(&work.tests, usize::MAX, |x, y| {
            rmse_with(c, alpha.as_deref(), x, y)
        }) * work.y_scale
    });
    phases.eval_s += t.elapsed().as_secs_f64();
    let t = Instant::now();
    // Baselines (spec §8): common W0 = the central learner's final mean (else agent 0's).
    let (mut rmse_ddtc, mut rmse_dpitc) = (None, None);
    let mut baseline_uploads = None;
    if cfg.baselines {
        let p = central.as_ref().unwrap_or(&agents[0]).projection();
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
                    &vocab,
                    work,
                    &order,
                    chunk,
                    cfg.loss,
                    cfg.curve_points,
                    up_rng.clone(),
                )
            })
            .collect();
        for (c, r) in curves.iter_mut().zip(&results[0].0) {
            c.rmse_ddtc = r.map(|v| v * work.y_scale);
        }
        for (c, r) in curves.iter_mut().zip(&results[1].0) {
            c.rmse_dpitc = r.map(|v| v * work.y_scale);
        }
        rmse_ddtc = results[0].1.map(|v| v * work.y_scale);
        rmse_dpitc = results[1].1.map(|v| v * work.y_scale);
        baseline_uploads = Some([results[0].2, results[1].2]);
    }
    phases.baselines_s = t.elapsed().as_secs_f64();
    // The last curve point is the final evaluation (every agent, the whole test set).
    if let Some(last) = curves.last_mut() {
        last.rmse_pre = rmse_pre;
        last.rmse_post = rmse_post;
        last.rmse_central = rmse_central;
        last.rmse_ddtc = rmse_ddtc;
        last.rmse_dpitc = rmse_dpitc;
    }
    let rmse_constant =
        mean_over(&work.tests, usize::MAX, |_, y| rmse(&vec![0.0; y.len()], y)) * work.y_scale;
    Ok(Report {
        rmse_pre,
        rmse_post,
        rmse_central,
        rmse_ddtc,
        rmse_dpitc,
        baseline_uploads,
        rmse_constant,
        nlpd_post,
        nlpd_central,
        coverage95_post,
        sigma_s_post,
        sigma_n_post,
        sigma_s_central,
        sigma_n_central,
        agents: cfg.agents,
        inducing: vocab.m(),
        points,
        batches: total,
        wall_s: start.elapsed().as_secs_f64(),
        fusion_max_rel_err,
        fusion: match rule {
            FusionRule::Tree if cfg.fusion == FusionChoice::SpanningTree => "spanning-tree".into(),
            FusionRule::Tree => "tree".into(),
            FusionRule::PushSum { .. } => "push-sum".into(),
        },
        topology: cfg.topology.name().to_owned(),
        diameter,
        rounds: if settle.is_some() {
            settled_rounds.max()
        } else {
            rounds
        },
        rounds_capped: settled_rounds.capped(),
        schedule: if two_pass { "two-pass" } else { "rounds" }.into(),
        loss: cfg.loss,
        network: net,
        phases,
        seed: cfg.seed,
        fingerprint: vocab.fingerprint().short(),
        curves,
        per_agent,
    })
}

fn validate(cfg: &SimConfig, work: &Workload) -> Result<(), SimError> {
    if cfg.agents == 0 {
        return Err(SimError::Config("--agents must be at least 1".into()));
    }
    if !(0.0..1.0).contains(&cfg.loss) {
        return Err(SimError::Config(format!(
            "--loss must be in [0, 1), got {}",
            cfg.loss
        )));
    }
    if work.batches.is_empty() {
        return Err(SimError::Config("the stream has no batches".into()));
    }
    if work.tests.is_empty() || work.tests.iter().any(|t| t.y.is_empty()) {
        return Err(SimError::Config("a test set is empty".into()));
    }
    Ok(())
}

fn spaced(n: usize, k: usize) -> Vec<usize> {
    if k == 0 || k >= n {
        return (0..n).collect();
    }
    (0..k).map(|i| i * n / k).collect()
}
