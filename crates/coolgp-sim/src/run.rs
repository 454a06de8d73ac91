//! One simulated run: the paper's stream protocol over a fleet, with references.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use coolgp::baselines::{Baseline, BaselineKernel};
use coolgp::faer::Mat;
use coolgp::fuse::tree::two_pass_schedule;
use coolgp::learn::AdamConfig;
use coolgp::model::predict::{predict_mean, predict_means};
use coolgp::rng::Rng;
use coolgp::{
    Agent, AgentConfig, FusionRule, NaturalParams, ProjectionMode, Topology, UpdateMode, View,
    Vocabulary,
};
use rayon::prelude::*;
use serde::Serialize;

use crate::baselines::Server;
use crate::network::{run_rounds, run_schedule, NetStats};
use crate::SimError;

/// The communication graph (`--topology`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TopologyKind {
    /// A path.
    Path,
    /// A star centred on agent 0.
    Star,
    /// A uniformly random recursive tree.
    RandomTree,
    /// Minimum spanning tree of random points (geometric MST).
    Mst,
    /// A ring (has a cycle).
    Ring,
    /// A near-square grid (cycles).
    Grid,
    /// The complete graph.
    Complete,
    /// A connected random geometric graph (cycles).
    Geometric,
}

impl FromStr for TopologyKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "path" => Self::Path,
            "star" => Self::Star,
            "random-tree" | "tree" => Self::RandomTree,
            "mst" => Self::Mst,
            "ring" => Self::Ring,
            "grid" => Self::Grid,
            "complete" => Self::Complete,
            "geometric" | "rgg" => Self::Geometric,
            _ => {
                return Err(format!(
                    "unknown topology '{s}': use path, star, random-tree, mst, ring, grid, complete or geometric"
                ))
            }
        })
    }
}

impl TopologyKind {
    /// Builds the graph for `n` agents.
    pub fn build(self, n: usize, seed: u64) -> Topology {
        match self {
            Self::Path => Topology::path(n),
            Self::Star => Topology::star(n),
            Self::RandomTree => Topology::random_tree(n, seed),
            Self::Mst => Topology::geometric_mst(n, seed),
            Self::Ring => Topology::ring(n),
            Self::Grid => Topology::grid(n),
            Self::Complete => Topology::complete(n),
            Self::Geometric => {
                Topology::random_geometric(n, (2.0 / n.max(1) as f64).sqrt().min(1.0), seed)
            }
        }
    }
}

/// How the fleet fuses (`--fusion`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FusionChoice {
    /// Tree message passing on trees, push-sum on graphs with cycles.
    Auto,
    /// Tree message passing (refused on graphs with cycles: it double counts).
    Tree,
    /// Running-sum push-sum.
    PushSum,
    /// Tree message passing on the BFS spanning tree of the graph.
    SpanningTree,
}

impl FromStr for FusionChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "auto" => Self::Auto,
            "tree" => Self::Tree,
            "push-sum" | "pushsum" => Self::PushSum,
            "spanning-tree" => Self::SpanningTree,
            _ => {
                return Err(format!(
                    "unknown fusion '{s}': use auto, tree, push-sum or spanning-tree"
                ))
            }
        })
    }
}

/// When tree messages are sent (`--schedule`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// Two-pass on loss-free tree fusion with the default rounds, rounds otherwise.
    Auto,
    /// The paper's synchronous rounds: every agent sends to every neighbour each round.
    Rounds,
    /// Tree fusion only: each message once, when its sender has heard from its other
    /// neighbours (leaves up, then root down): 2(n−1) messages per fusion, the same fused
    /// views as `diameter` rounds. A lost message is not re-sent.
    TwoPass,
}

impl FromStr for Schedule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "auto" => Self::Auto,
            "rounds" => Self::Rounds,
            "two-pass" => Self::TwoPass,
            _ => {
                return Err(format!(
                    "unknown schedule '{s}': use auto, rounds or two-pass"
                ))
            }
        })
    }
}

/// Settings of a simulated run.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Number of agents.
    pub agents: usize,
    /// Inducing inputs m (ignored when `vocab` is given).
    pub inducing: usize,
    /// Standardized dimension d' (default: the input dimension).
    pub d_latent: Option<usize>,
    /// Online update mode.
    pub mode: UpdateMode,
    /// Projection mode.
    pub projection: ProjectionMode,
    /// Communication graph.
    pub topology: TopologyKind,
    /// Fusion rule.
    pub fusion: FusionChoice,
    /// Probability that one transmission is lost.
    pub loss: f64,
    /// Rounds per fusion (default: enough for the topology).
    pub rounds: Option<usize>,
    /// When tree messages are sent.
    pub schedule: Schedule,
    /// Batches between fusions (0: fuse once, at the end).
    pub fuse_every: usize,
    /// Seed of everything random in the run.
    pub seed: u64,
    /// A vocabulary to use instead of the default design.
    pub vocab: Option<Arc<Vocabulary>>,
    /// Run the central learner.
    pub central: bool,
    /// Run dDTC and dPITC.
    pub baselines: bool,
    /// Test points per agent used for the learning curves (the last point uses all); with the
    /// default, every test point of a capped test set, so the curves end where the final
    /// evaluation does.
    pub curve_points: usize,
    /// Agents evaluated for the learning curves (evenly spaced ids; the last point uses all).
    pub curve_agents: usize,
    /// Learn θ online.
    pub learn: bool,
    /// Optimizer.
    pub adam: AdamConfig,
    /// Shuffle the stream (the paper's protocol); false keeps the workload's order.
    pub shuffle: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            agents: 10,
            inducing: 50,
            d_latent: None,
            mode: UpdateMode::Frozen,
            projection: ProjectionMode::PerAgent,
            topology: TopologyKind::RandomTree,
            fusion: FusionChoice::Auto,
            loss: 0.0,
            rounds: None,
            schedule: Schedule::Auto,
            fuse_every: 0,
            seed: 0,
            vocab: None,
            central: true,
            baselines: true,
            curve_points: 10_000,
            curve_agents: 50,
            learn: true,
            adam: AdamConfig::default(),
            shuffle: true,
        }
    }
}

/// One arriving batch. With `group = Some(g)` it goes to a random agent of group g (agent i
/// belongs to group `i % groups`; with fewer agents than groups, to agent `g % agents`);
/// otherwise to a uniformly random agent.
#[derive(Clone, Debug)]
pub struct Batch {
    /// Routing group (a phenomenon, a station).
    pub group: Option<usize>,
    /// Inputs `[n, d]` (standardized).
    pub x: Mat<f64>,
    /// Targets `[n]` (on the fleet-wide scale).
    pub y: Vec<f64>,
}

/// A test set.
#[derive(Clone, Debug)]
pub struct TestSet {
    /// Inputs `[n, d]`.
    pub x: Mat<f64>,
    /// Targets `[n]`.
    pub y: Vec<f64>,
}

/// The data of a run.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Input dimension d.
    pub d: usize,
    /// The stream (shuffled by the run).
    pub batches: Vec<Batch>,
    /// Test sets.
    pub tests: Vec<TestSet>,
    /// Number of routing groups (0 when batches carry none).
    pub groups: usize,
    /// Agent i is tested on `tests[(i % groups) % tests.len()]` (else every agent on test 0).
    pub test_by_group: bool,
    /// Multiply RMSE by this to report it in original units (the y standard deviation).
    pub y_scale: f64,
}

/// A point of the learning curves (mean RMSE over evaluated agents, original units).
#[derive(Clone, Debug, Serialize)]
pub struct CurvePoint {
    /// Batches seen by the fleet.
    pub batches: usize,
    /// Data points seen.
    pub points: usize,
    /// Mean own-model RMSE.
    pub rmse_pre: f64,
    /// Mean fused-model RMSE.
    pub rmse_post: f64,
    /// Central learner RMSE.
    pub rmse_central: Option<f64>,
    /// dDTC server RMSE.
    pub rmse_ddtc: Option<f64>,
    /// dPITC server RMSE.
    pub rmse_dpitc: Option<f64>,
    /// `(agent, pre, post)` RMSE of each evaluated agent.
    pub per_agent: Vec<(usize, f64, f64)>,
}

/// Per-agent final figures.
#[derive(Clone, Debug, Serialize)]
pub struct AgentRow {
    /// Agent id.
    pub id: usize,
    /// Blocks absorbed.
    pub blocks: u64,
    /// Own points.
    pub points: usize,
    /// Own-model RMSE.
    pub rmse_pre: f64,
    /// Fused-model RMSE.
    pub rmse_post: f64,
}

/// The outcome of a run (`summary.json`, `curves.csv`, `agents.csv`).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Mean own-model RMSE over agents (original units).
    pub rmse_pre: f64,
    /// Mean fused-model RMSE over agents.
    pub rmse_post: f64,
    /// Central learner RMSE.
    pub rmse_central: Option<f64>,
    /// dDTC RMSE.
    pub rmse_ddtc: Option<f64>,
    /// dPITC RMSE.
    pub rmse_dpitc: Option<f64>,
    /// RMSE of the constant (training-mean) predictor.
    pub rmse_constant: f64,
    /// Mean Gaussian NLPD of the fused models (original units), over up to 50 agents × 1,000
    /// test points.
    pub nlpd_post: f64,
    /// Agents.
    pub agents: usize,
    /// Inducing inputs m.
    pub inducing: usize,
    /// Training points streamed.
    pub points: usize,
    /// Batches streamed.
    pub batches: usize,
    /// Wall time of the run in seconds (everything but loading).
    pub wall_s: f64,
    /// Largest `‖T_fused,i − T_g‖_F / ‖T_g‖_F` over agents after the last fusion.
    pub fusion_max_rel_err: f64,
    /// Fusion rule used.
    pub fusion: String,
    /// Topology.
    pub topology: String,
    /// Diameter of the graph the fusion ran on (edges), if connected.
    pub diameter: Option<usize>,
    /// Rounds per fusion (with the two-pass schedule: its steps).
    pub rounds: usize,
    /// `rounds` or `two-pass`.
    pub schedule: String,
    /// Transmission loss probability.
    pub loss: f64,
    /// Network counters.
    pub network: NetStats,
    /// Wall seconds spent per phase.
    pub phases: Phases,
    /// Seed.
    pub seed: u64,
    /// Vocabulary fingerprint.
    pub fingerprint: String,
    /// Learning curves.
    #[serde(skip)]
    pub curves: Vec<CurvePoint>,
    /// Per-agent rows.
    #[serde(skip)]
    pub per_agent: Vec<AgentRow>,
}

/// Wall seconds per phase of a run (the fleet's blocks run alongside the central learner).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Phases {
    /// Agents absorbing blocks (and, concurrently, the central learner).
    pub learn_s: f64,
    /// Fusion rounds.
    pub fusion_s: f64,
    /// Learning-curve and final evaluation of every agent.
    pub eval_s: f64,
    /// dDTC and dPITC.
    pub baselines_s: f64,
}

/// Test points per agent for the NLPD (full predictive variance, O(m² d') per point).
const NLPD_POINTS: usize = 1_000;

/// Progress callback: (batches done, batches total).
pub type Progress<'a> = &'a (dyn Fn(usize, usize) + Sync);

fn rmse(p: &[f64], y: &[f64]) -> f64 {
    coolgp::model::predict::rmse(p, y)
}

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
    let graph = cfg.topology.build(cfg.agents, cfg.seed);
    let (topo, rule) = match (cfg.fusion, graph.is_tree()) {
        (FusionChoice::Tree, false) => {
            return Err(SimError::Config(format!(
                "--fusion tree on a {:?} graph with cycles would double count (spec §7); use push-sum or spanning-tree",
                cfg.topology
            )))
        }
        (FusionChoice::Auto | FusionChoice::Tree, true) => (graph, FusionRule::Tree),
        (FusionChoice::SpanningTree, _) => (graph.bfs_spanning_tree(), FusionRule::Tree),
        (FusionChoice::PushSum, _) | (FusionChoice::Auto, false) => (
            graph,
            FusionRule::PushSum {
                agents: cfg.agents as f64,
                weight: 1.0,
            },
        ),
    };
    let diameter = topo.diameter();
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
    let communicate = |agents: &mut [Agent], rng: &mut Rng| {
        if two_pass {
            run_schedule(agents, &steps, cfg.loss, rng)
        } else {
            run_rounds(agents, rounds, cfg.loss, rng)
        }
    };
    let agent_cfg = |i: usize| AgentConfig {
        mode: cfg.mode,
        projection: cfg.projection,
        fusion: rule,
        adam: cfg.adam.clone(),
        learn: cfg.learn,
        seed: cfg.seed ^ (0x9E37_79B9 * (i as u64 + 1)),
    };
    let mut agents: Vec<Agent> = (0..cfg.agents)
        .map(|i| {
            let mut a = Agent::new(i as u64, vocab.clone(), d, agent_cfg(i))?;
            a.set_neighbors(topo.neighbors(i).iter().map(|&j| j as u64));
            Ok(a)
        })
        .collect::<Result<_, coolgp::Error>>()?;
    let mut central = if cfg.central {
        let c = AgentConfig {
            fusion: FusionRule::Tree,
            projection: ProjectionMode::PerAgent,
            ..agent_cfg(usize::MAX - 1)
        };
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
    let test_of = |agent: usize| -> &TestSet {
        if work.test_by_group {
            &work.tests[(agent % groups) % work.tests.len()]
        } else {
            &work.tests[0]
        }
    };
    let total = order.len();
    let chunk = if cfg.fuse_every == 0 {
        total.max(1)
    } else {
        cfg.fuse_every
    };
    let mut net_rng = Rng::new(cfg.seed, 0x4E7);
    let mut net = NetStats::default();
    let mut curves = Vec::new();
    let mut done = 0;
    let mut points = 0;
    let curve_ids: Vec<usize> = spaced(cfg.agents, cfg.curve_agents);
    let mut phases = Phases::default();
    while done < total {
        let end = (done + chunk).min(total);
        let mut per_agent: Vec<Vec<usize>> = vec![Vec::new(); cfg.agents];
        for k in done..end {
            per_agent[owner[k]].push(order[k]);
            points += work.batches[order[k]].y.len();
        }
        let epoch: Vec<usize> = order[done..end].to_vec();
        let fleet_step = || -> Result<(), coolgp::Error> {
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
                })
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
        r1?;
        r2?;
        phases.learn_s += t.elapsed().as_secs_f64();
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
            mean_over(&work.tests, cfg.curve_points, |x, y| {
                eval_rmse(c, View::Own, x, y)
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
    // Exactness of the last fusion against T_g = T0 + Σ E_i.
    let tg = NaturalParams::from_excess(
        &vocab,
        &coolgp::fuse::sum_excess(vocab.m(), agents.iter().map(|a| a.own_excess())),
    );
    let tg_norm = frob(&tg, None);
    let fusion_max_rel_err = agents
        .par_iter()
        .map(|a| frob(&a.natural_params(View::Fused), Some(&tg)) / tg_norm)
        .reduce(|| 0.0, f64::max);
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
    let nlpd_ids = spaced(cfg.agents, cfg.curve_agents);
    let nlpd_post = nlpd_ids
        .par_iter()
        .map(|&i| {
            let t = test_of(i);
            let n = t.y.len().min(NLPD_POINTS);
            agents[i]
                .predict(t.x.as_ref().subrows(0, n), View::Fused)
                .map_or(f64::NAN, |p| p.nlpd(&t.y[..n]) + work.y_scale.ln())
        })
        .sum::<f64>()
        / nlpd_ids.len().max(1) as f64;
    let na = per_agent.len().max(1) as f64;
    let rmse_pre = per_agent.iter().map(|r| r.rmse_pre).sum::<f64>() / na;
    let rmse_post = per_agent.iter().map(|r| r.rmse_post).sum::<f64>() / na;
    let rmse_central = central.as_ref().map(|c| {
        mean_over(&work.tests, usize::MAX, |x, y| {
            eval_rmse(c, View::Own, x, y)
        }) * work.y_scale
    });
    phases.eval_s += t.elapsed().as_secs_f64();
    let t = Instant::now();
    // Baselines (spec §8): common W0 = the central learner's final mean (else agent 0's).
    let (mut rmse_ddtc, mut rmse_dpitc) = (None, None);
    if cfg.baselines {
        let p = central.as_ref().unwrap_or(&agents[0]).projection();
        let kern = BaselineKernel {
            w0: p.mu().to_owned(),
            sigma_s: p.sigma_s(),
            sigma_n: p.sigma_n(),
        };
        let mut up_rng = Rng::new(cfg.seed, 0xBA5E);
        let results: Vec<(Vec<Option<f64>>, Option<f64>)> = [Baseline::Ddtc, Baseline::Dpitc]
            .par_iter()
            .map(|&which| {
                let mut rng = up_rng.clone();
                let mut server = Server::new(which, vocab.m());
                let mut curve = Vec::new();
                let mut k = 0;
                while k < total {
                    let end = (k + chunk).min(total);
                    let bs: Vec<&Batch> = order[k..end].iter().map(|&b| &work.batches[b]).collect();
                    server.upload(&vocab, &kern, &bs, cfg.loss, &mut rng);
                    let model = server.model(&vocab);
                    curve.push(Some(mean_over(&work.tests, cfg.curve_points, |x, y| {
                        server_rmse(&vocab, &kern, &model, x, y)
                    })));
                    k = end;
                }
                let model = server.model(&vocab);
                let fin = Some(mean_over(&work.tests, usize::MAX, |x, y| {
                    server_rmse(&vocab, &kern, &model, x, y)
                }));
                (curve, fin)
            })
            .collect();
        up_rng.next_u64();
        for (c, r) in curves.iter_mut().zip(&results[0].0) {
            c.rmse_ddtc = r.map(|v| v * work.y_scale);
        }
        for (c, r) in curves.iter_mut().zip(&results[1].0) {
            c.rmse_dpitc = r.map(|v| v * work.y_scale);
        }
        rmse_ddtc = results[0].1.map(|v| v * work.y_scale);
        rmse_dpitc = results[1].1.map(|v| v * work.y_scale);
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
        rmse_constant,
        nlpd_post,
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
        topology: format!("{:?}", cfg.topology).to_lowercase(),
        diameter,
        rounds,
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

/// RMSE of the own and of the fused q(u) under the agent's q(W), sharing ψ1.
fn eval_both(a: &Agent, x: coolgp::faer::MatRef<'_, f64>, y: &[f64]) -> (f64, f64) {
    match (a.posterior(View::Own), a.posterior(View::Fused)) {
        (Ok(own), Ok(fused)) => {
            let m = predict_means(
                a.vocabulary(),
                a.projection(),
                &[&own.alpha, &fused.alpha],
                x,
            );
            (rmse(&m[0], y), rmse(&m[1], y))
        }
        _ => (
            eval_rmse(a, View::Own, x, y),
            eval_rmse(a, View::Fused, x, y),
        ),
    }
}

fn eval_rmse(a: &Agent, view: View, x: coolgp::faer::MatRef<'_, f64>, y: &[f64]) -> f64 {
    match a.posterior(view) {
        Ok(p) => rmse(
            &predict_mean(a.vocabulary(), a.projection(), &p.alpha, x),
            y,
        ),
        Err(_) => f64::NAN,
    }
}

fn server_rmse(
    vocab: &Vocabulary,
    kern: &BaselineKernel,
    model: &NaturalParams,
    x: coolgp::faer::MatRef<'_, f64>,
    y: &[f64],
) -> f64 {
    kern.predict_mean(vocab, model, x)
        .map_or(f64::NAN, |mean| rmse(&mean, y))
}

/// Mean of `f` over the test sets, each capped at `cap` points.
fn mean_over(
    tests: &[TestSet],
    cap: usize,
    f: impl Fn(coolgp::faer::MatRef<'_, f64>, &[f64]) -> f64,
) -> f64 {
    let k = tests.len().max(1) as f64;
    tests
        .iter()
        .map(|t| {
            let n = t.y.len().min(cap);
            f(t.x.as_ref().subrows(0, n), &t.y[..n])
        })
        .sum::<f64>()
        / k
}

fn frob(t: &NaturalParams, minus: Option<&NaturalParams>) -> f64 {
    let m = t.t2.len();
    let mut s = 0.0;
    for j in 0..m {
        for i in 0..m {
            let v = t.t1[(i, j)] - minus.map_or(0.0, |o| o.t1[(i, j)]);
            s += v * v;
        }
        let v = t.t2[j] - minus.map_or(0.0, |o| o.t2[j]);
        s += v * v;
    }
    s.sqrt()
}
