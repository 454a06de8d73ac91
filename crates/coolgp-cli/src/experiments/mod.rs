//! `coolgp experiment NAME`: each figure of the paper as a documented default configuration,
//! leaving a results folder with CSV, JSON and plots (see EXPERIMENTS.md for the figures).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use coolgp::faer::Mat;
use coolgp::learn::{ImportanceCache, IsNormalization};
use coolgp::model::psi::{accumulate_block, PsiWorkspace, UnitStats};
use coolgp::model::{Excess, Projection, Vocabulary};
use coolgp::rng::Rng;
use coolgp_sim::{Batch, Report, Workload};

mod faults;
mod groups;
mod local;
mod local_grid;
mod order;
mod projection;

use crate::args::SimArgs;
use crate::output;
use crate::plot::{self, Series};
use coolgp_config::AgentArgs;

/// Which experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Name {
    /// Fig. 1: two agents, two related synthetic phenomena; |Z| × k for the importance mode,
    /// plus frozen; pre vs post fusion vs batches. Then 2 phenomena × 10 agents in the fleet
    /// projection mode with one projection group per phenomenon, fusing q(u) across the
    /// groups or within each (spec §14 with groups), over relatedness 0.7, 0.9, 0.99.
    Synthetic,
    /// Fig. 4a: 1,000 agents on the airline stream, per-agent pre vs post scatter, the per-agent,
    /// shared and fleet projection modes.
    Airline,
    /// Fig. 2 in spirit: one agent per weather station (Irish wind), routed by station.
    Stations,
    /// Fig. 5a: agent A1 stops receiving data after a few batches, A2 keeps learning.
    Disparity,
    /// Fig. 5b: transmission loss 0 → 0.9, COOL-GP vs dDTC vs dPITC, 100 agents.
    Loss,
    /// Lemma 1 / Theorem 1: relative error of the importance estimate vs k and d, with ESS.
    Bound,
    /// Wall time and peak memory vs agents (10 → 10,000) and vs data size.
    Scaling,
    /// Spec §13: per-agent vs shared q(W) vs the spec's two proxies vs the central learner,
    /// 100 agents on 50,000 flights, three seeds.
    Projection,
    /// Beyond the paper: wind and air stations streamed in random and in time order
    /// (`--stream-order file`), per-agent vs the fleet projection under both site memories
    /// (`--site-memory recent|stream`), with learning curves in time order.
    Order,
    /// Issue 19: local memory and fleet-wide queries. Wind and air stations (one agent per
    /// station) and airline by regions, RMSE against the memory B (global only, fleet query,
    /// oracle agent), time per block and bytes of state per agent.
    Local,
    /// Issue 28: the local model over the settings a user tries: wind and air by station
    /// (B = 500 and, for wind, 2,000) over batches 5, 10, 20, 40 × seeds 0–4, the
    /// traffic-like field and airline by regions over batches 10, 20 × seeds 0–2, each with
    /// the fleet's and the agents' own fits of the residual kernel; the spread (mean, worst,
    /// best), runs worse than the global model, coverage and CPU. About an hour on 2 cores.
    LocalGrid,
    /// Issue 29: faulty members. The built-in ten-station field clean, with each fault at one
    /// station (offset, noise, stuck, scaled) and with two faulty stations, and the fleets
    /// without the faulty stations (the floor containment can reach), seeds 0–4, with and
    /// without the member check's containment: the honest stations' global RMSE and the
    /// fleet query against the clean fleet and the floor, when each fault was marked, the
    /// check's CPU share. About a minute.
    Faults,
}

/// Flags of `coolgp experiment`.
#[derive(Args, Debug)]
pub struct ExperimentArgs {
    /// The experiment.
    #[arg(value_enum)]
    pub name: Name,
    /// Results folder (default results/NAME).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Smaller sizes (a minute or less): for smoke tests and quick looks.
    #[arg(long)]
    pub quick: bool,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// No progress bars.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs one experiment.
pub fn run(a: &ExperimentArgs) -> Result<()> {
    let name = format!("{:?}", a.name).to_lowercase();
    let dir = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(&name));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    println!("coolgp experiment {name} → {}", dir.display());
    match a.name {
        Name::Synthetic => synthetic(a, &dir),
        Name::Airline => single_phenomenon(a, &dir, "airline"),
        Name::Stations => single_phenomenon(a, &dir, "wind"),
        Name::Disparity => disparity(a, &dir),
        Name::Loss => loss(a, &dir),
        Name::Bound => bound(a, &dir),
        Name::Scaling => scaling(a, &dir),
        Name::Projection => projection::run(a, &dir),
        Name::Order => order::run(a, &dir),
        Name::Local => local::run(a, &dir),
        Name::LocalGrid => local_grid::run(a, &dir),
        Name::Faults => faults::run(a, &dir),
    }
}

/// Runs one of an experiment's simulations with the local memory off unless `args` sets it
/// ([`global_only`]).
fn sim(args: &SimArgs, quiet: bool, title: &str) -> Result<Report> {
    Ok(crate::run_sim(&global_only(args), quiet, title)?.0)
}

/// `args` with the local memory off (`--local-memory 0`) unless they set it. The experiments
/// measure the global fused model, which the memory never changes (it only adds the fleet
/// query's correction and its cost); `experiment local` sets its B, and the memory's cost is
/// measured there and in EXPERIMENTS.md (issue 19).
fn global_only(args: &SimArgs) -> SimArgs {
    let mut a = args.clone();
    a.agent.local_memory.get_or_insert(0);
    a
}

fn write_table(dir: &Path, file: &str, header: &str, rows: &[String]) -> Result<()> {
    let mut s = String::from(header);
    s.push('\n');
    for r in rows {
        s.push_str(r);
        s.push('\n');
    }
    std::fs::write(dir.join(file), s)?;
    Ok(())
}

fn o(v: Option<f64>) -> String {
    v.map_or(String::new(), |x| format!("{x:.5}"))
}

/// Fig. 1: |Z| ∈ {50, 100, 150} × k ∈ {5, 10} (importance, the paper's estimator) and frozen.
fn synthetic(a: &ExperimentArgs, dir: &Path) -> Result<()> {
    let sizes: &[usize] = if a.quick { &[20] } else { &[50, 100, 150] };
    let ks: &[usize] = if a.quick { &[5] } else { &[5, 10] };
    let mut rows = Vec::new();
    for &m in sizes {
        let mut modes: Vec<(String, Option<usize>)> = ks
            .iter()
            .map(|&k| (format!("importance-k{k}"), Some(k)))
            .collect();
        modes.push(("frozen".into(), None));
        for (label, k) in modes {
            let args = SimArgs {
                dataset: Some("synthetic".into()),
                agents: Some(2),
                inducing: Some(m),
                topology: Some("path".into()),
                agent: AgentArgs {
                    mode: Some(if k.is_some() {
                        "importance".into()
                    } else {
                        "frozen".into()
                    }),
                    samples: k,
                    ..AgentArgs::default()
                },
                seed: Some(a.seed),
                fuse_every: Some(if a.quick { 4 } else { 20 }),
                max_train: a.quick.then_some(2 * 20 * 40),
                max_test: Some(if a.quick { 400 } else { 4000 }),
                no_baselines: true,
                ..SimArgs::default()
            };
            let r = sim(&args, a.quiet, &format!("m={m} {label}"))?;
            let sub = dir.join(format!("m{m}-{label}"));
            output::write_run(
                &sub,
                &r,
                &format!("synthetic, |Z| = {m}, {label}"),
                serde_json::json!({}),
            )?;
            println!(
                "  |Z| = {m:>3}  {label:<14} pre {:.4}  post {:.4}  central {}",
                r.rmse_pre,
                r.rmse_post,
                o(r.rmse_central)
            );
            rows.push(format!(
                "{m},{label},{},{},{},{}",
                r.rmse_pre,
                r.rmse_post,
                o(r.rmse_central),
                r.wall_s
            ));
        }
    }
    write_table(
        dir,
        "summary.csv",
        "inducing,mode,rmse_pre,rmse_post,rmse_central,wall_s",
        &rows,
    )?;
    groups::run(a, dir)
}

/// Fig. 4a (airline) or Fig. 2 in spirit (stations): the projection modes side by side.
fn single_phenomenon(a: &ExperimentArgs, dir: &Path, dataset: &str) -> Result<()> {
    let stations = dataset != "airline";
    let base = SimArgs {
        dataset: Some(dataset.into()),
        agents: if stations {
            None
        } else {
            Some(if a.quick { 100 } else { 1000 })
        },
        agent_by: stations.then(|| "station".to_string()),
        inducing: Some(if a.quick {
            30
        } else if stations {
            50
        } else {
            100
        }),
        batch: Some(if stations { 10 } else { 20 }),
        topology: Some("random-tree".into()),
        seed: Some(a.seed),
        max_train: a.quick.then_some(20_000),
        max_test: Some(if a.quick { 2000 } else { 10_000 }),
        no_baselines: a.quick,
        ..SimArgs::default()
    };
    both_modes(&base, a.quiet, Some(dir), dataset)
}

/// Runs `base` in the per-agent, shared and fleet projection modes and reports them side by
/// side (`coolgp simulate --projection both` and the single-phenomenon experiments). dDTC and
/// dPITC do not depend on the fleet's projection mode: computed in the first run and reused.
/// The central learner is the per-agent one (Adam on q(W)) for per-agent and shared, computed
/// once; in the fleet mode it runs the fleet's site update (spec §14), so the fleet run
/// computes its own (column `central_update`: `adam` or `sites`). With `dir`:
/// `DIR/per-agent/`, `DIR/shared/`, `DIR/fleet/` (each a full run folder), `summary.json` and
/// `summary.csv`.
pub(crate) fn both_modes(
    base: &SimArgs,
    quiet: bool,
    dir: Option<&Path>,
    title: &str,
) -> Result<()> {
    let mut rows = Vec::new();
    let mut summary = serde_json::Map::new();
    let mut baselines: Option<(Option<f64>, Option<f64>)> = None;
    // The Adam central learner runs once (per-agent) and is reported for shared too.
    type Central = (Option<f64>, Option<f64>, Option<f64>, Option<f64>);
    let mut central: Option<Central> = None;
    for projection in MODES {
        let fleet = projection == "fleet";
        let args = SimArgs {
            agent: AgentArgs {
                projection: Some(projection.into()),
                ..base.agent.clone()
            },
            no_baselines: base.no_baselines || baselines.is_some(),
            no_central: base.no_central || (central.is_some() && !fleet),
            ..base.clone()
        };
        let (mut r, cfg, _, groups) = crate::run_sim(&global_only(&args), quiet, projection)?;
        match baselines {
            None => baselines = Some((r.rmse_ddtc, r.rmse_dpitc)),
            Some((d, p)) => (r.rmse_ddtc, r.rmse_dpitc) = (d, p),
        }
        match central {
            Some((c, n, s, e)) if !fleet => {
                (
                    r.rmse_central,
                    r.nlpd_central,
                    r.sigma_s_central,
                    r.sigma_n_central,
                ) = (c, n, s, e)
            }
            Some(_) => {}
            None => {
                central = Some((
                    r.rmse_central,
                    r.nlpd_central,
                    r.sigma_s_central,
                    r.sigma_n_central,
                ))
            }
        }
        if let Some(dir) = dir {
            output::write_run(
                &dir.join(projection),
                &r,
                &format!("{title}, {projection} projection"),
                coolgp_sim::summary::run_fields(&args, &cfg, &groups),
            )?;
        }
        let update = if fleet { "sites" } else { "adam" };
        println!("  {projection:<9} (central learner: {update})");
        output::print_report(&r);
        rows.push(format!(
            "{projection},{},{},{},{},{},{},{},{},{},{},{},{},{update}",
            r.agents,
            r.rmse_pre,
            r.rmse_post,
            o(r.rmse_central),
            o(r.rmse_ddtc),
            o(r.rmse_dpitc),
            r.rmse_constant,
            r.fusion_max_rel_err,
            r.wall_s,
            r.nlpd_post,
            o(r.nlpd_central),
            r.coverage95_post,
        ));
        summary.insert(projection.into(), serde_json::to_value(&r)?);
    }
    let Some(dir) = dir else {
        return Ok(());
    };
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(&summary)? + "\n",
    )?;
    write_table(
        dir,
        "summary.csv",
        "projection,agents,rmse_pre,rmse_post,rmse_central,rmse_ddtc,rmse_dpitc,rmse_constant,fusion_max_rel_err,wall_s,nlpd_post,nlpd_central,coverage95_post,central_update",
        &rows,
    )
}

/// The projection modes of [`both_modes`], in order.
pub(crate) const MODES: [&str; 3] = ["per-agent", "shared", "fleet"];

/// Fig. 5a: two agents on one phenomenon (airline); A1 receives `k1` batches at the start and
/// nothing after, A2 receives every other batch; fusion every 10 batches.
fn disparity(a: &ExperimentArgs, dir: &Path) -> Result<()> {
    let base = SimArgs {
        dataset: Some("airline".into()),
        seed: Some(a.seed),
        max_train: Some(if a.quick { 4_000 } else { 40_000 }),
        max_test: Some(if a.quick { 1000 } else { 5000 }),
        ..SimArgs::default()
    };
    let prep = coolgp_sim::prepare(&base)?;
    let k1 = 10;
    let batches: Vec<Batch> = prep
        .work
        .batches
        .into_iter()
        .enumerate()
        .map(|(i, mut b)| {
            b.group = Some(if i < 2 * k1 && i % 2 == 0 { 0 } else { 1 });
            b
        })
        .collect();
    let work = Workload {
        groups: 2,
        batches,
        ..prep.work
    };
    for (mode, suffix) in [("per-agent", ""), ("shared", "-shared")] {
        let args = SimArgs {
            agent: AgentArgs {
                projection: Some(mode.into()),
                ..base.agent.clone()
            },
            ..base.clone()
        };
        let mut cfg = crate::sim_config(&global_only(&args), &work, Some(2))?;
        cfg.agents = 2;
        cfg.topology = coolgp_sim::TopologyKind::Path;
        cfg.fuse_every = 10;
        cfg.shuffle = false;
        cfg.baselines = false;
        cfg.central = false;
        let pb = crate::progress_bar(a.quiet, work.batches.len() as u64, mode);
        let r = coolgp_sim::run(&cfg, &work, &|d, _| pb.set_position(d as u64))?;
        pb.finish_and_clear();
        let mut rows = Vec::new();
        let mut s = vec![Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        for c in &r.curves {
            let (a1, a2) = (c.per_agent[0], c.per_agent[1]);
            rows.push(format!("{},{},{},{},{}", c.batches, a1.1, a1.2, a2.1, a2.2));
            for (v, series) in [a1.1, a1.2, a2.1, a2.2].into_iter().zip(s.iter_mut()) {
                series.push((c.batches as f64, v));
            }
        }
        write_table(
            dir,
            &format!("curves{suffix}.csv"),
            "batches,a1_pre,a1_post,a2_pre,a2_post",
            &rows,
        )?;
        let labels = [
            "A1 pre-fusion (fixed data)",
            "A1 post-fusion",
            "A2 pre-fusion (keeps learning)",
            "A2 post-fusion",
        ];
        let series = Series::labeled(&labels, s);
        plot::lines(
            dir,
            &format!("disparity{suffix}"),
            &format!("information disparity (airline, 2 agents, {mode} projection)"),
            "batches dispatched",
            "RMSE (minutes)",
            &series,
        )?;
        std::fs::write(
            dir.join(format!("summary{suffix}.json")),
            serde_json::to_string_pretty(&r)? + "\n",
        )?;
        let last = r.curves.last().context("no curve points")?;
        println!(
            "  {mode:<9} after {} batches: A1 pre {:.3} post {:.3}; A2 pre {:.3} post {:.3} (A1 got {k1} batches)",
            last.batches, last.per_agent[0].1, last.per_agent[0].2, last.per_agent[1].1, last.per_agent[1].2
        );
    }
    Ok(())
}

/// Fig. 5b: transmission loss vs post-fusion RMSE, COOL-GP vs the server-based baselines.
fn loss(a: &ExperimentArgs, dir: &Path) -> Result<()> {
    let losses: &[f64] = if a.quick {
        &[0.0, 0.5]
    } else {
        &[0.0, 0.1, 0.3, 0.5, 0.7, 0.9]
    };
    let mut rows = Vec::new();
    let mut s = vec![Vec::new(), Vec::new(), Vec::new()];
    for &p in losses {
        let args = SimArgs {
            dataset: Some("airline".into()),
            agents: Some(if a.quick { 20 } else { 100 }),
            inducing: Some(if a.quick { 30 } else { 50 }),
            loss: Some(p),
            // The paper's protocol at every ρ, 0 included (re-sending each round is what
            // makes the fleet robust to loss).
            schedule: Some("rounds".into()),
            seed: Some(a.seed),
            max_train: Some(if a.quick { 5_000 } else { 50_000 }),
            max_test: Some(if a.quick { 1000 } else { 5000 }),
            no_central: true,
            ..SimArgs::default()
        };
        let r = sim(&args, a.quiet, &format!("loss {p}"))?;
        println!(
            "  loss {p:.1}: COOL-GP post {:.4}  dDTC {}  dPITC {}",
            r.rmse_post,
            o(r.rmse_ddtc),
            o(r.rmse_dpitc)
        );
        rows.push(format!(
            "{p},{},{},{},{}",
            r.rmse_post,
            r.rmse_pre,
            o(r.rmse_ddtc),
            o(r.rmse_dpitc)
        ));
        s[0].push((p, r.rmse_post));
        s[1].push((p, r.rmse_ddtc.unwrap_or(f64::NAN)));
        s[2].push((p, r.rmse_dpitc.unwrap_or(f64::NAN)));
    }
    write_table(
        dir,
        "loss.csv",
        "loss,coolgp_post,coolgp_pre,ddtc,dpitc",
        &rows,
    )?;
    let series = Series::labeled(
        &["COOL-GP (post-fusion)", "dDTC (server)", "dPITC (server)"],
        s,
    );
    plot::lines(
        dir,
        "loss",
        "fault tolerance: transmission loss (airline)",
        "probability a transmission is lost",
        "RMSE (minutes)",
        &series,
    )
}

/// Lemma 1 / Theorem 1: relative error `‖Ê − E‖_F/‖E‖_F` of the importance estimate of the
/// data part against the exact one, vs k and d, for q = p and for a concentrated q(W).
fn bound(a: &ExperimentArgs, dir: &Path) -> Result<()> {
    let dims: &[usize] = if a.quick { &[1, 2] } else { &[1, 2, 4, 6] };
    let ks: &[usize] = if a.quick {
        &[10, 100]
    } else {
        &[10, 30, 100, 300, 1000, 3000]
    };
    let reps = if a.quick { 2 } else { 5 };
    let (m, n) = (20, 200);
    let mut rows = Vec::new();
    let mut series = Vec::new();
    for &d in dims {
        let vocab = Vocabulary::default_design(m, d, a.seed)?;
        let mut rng = Rng::new(a.seed, 0xB0_0D);
        let x = Mat::from_fn(n, d, |_, _| rng.normal());
        let y: Vec<f64> = (0..n)
            .map(|i| (0..d).map(|j| x[(i, j)]).sum::<f64>().sin())
            .collect();
        let w_star = Mat::from_fn(d, d, |_, _| rng.normal() / (d as f64).sqrt());
        let cases = [
            (
                "q=p",
                Projection::new(Mat::zeros(d, d), Mat::zeros(d, d), 0.0, 0.0),
            ),
            (
                "mu=W* sigma=0.3",
                Projection::new(
                    w_star.clone(),
                    Mat::from_fn(d, d, |_, _| 0.3f64.ln()),
                    0.0,
                    0.0,
                ),
            ),
        ];
        for (label, q) in &cases {
            let mut exact = UnitStats::zeros(m);
            accumulate_block(
                &vocab,
                q,
                x.as_ref(),
                &y,
                &mut exact,
                &mut PsiWorkspace::default(),
            );
            let e = Excess::from_unit_stats(&exact, 1.0, 1.0);
            let log_m2 = ImportanceCache::log_second_moment(q);
            let mut pts = Vec::new();
            for &k in ks {
                let (mut err_un, mut err_sn, mut ess) = (0.0, 0.0, 0.0);
                for rep in 0..reps {
                    let mut cache = ImportanceCache::new(
                        &vocab,
                        d,
                        k,
                        a.seed ^ ((rep as u64 + 1) * 7919),
                        IsNormalization::Unnormalized,
                    );
                    cache.absorb(&vocab, x.as_ref(), &y);
                    let (eu, diag) = cache.excess(&vocab, q);
                    cache.normalization = IsNormalization::SelfNormalized;
                    let (es, _) = cache.excess(&vocab, q);
                    err_un += eu.rel_dist(&e) / reps as f64;
                    err_sn += es.rel_dist(&e) / reps as f64;
                    ess += diag.ess / reps as f64;
                }
                rows.push(format!("{d},{label},{k},{err_un},{err_sn},{ess},{log_m2}"));
                println!("  d = d' = {d}  {label:<16} k = {k:>5}: errC unnormalized {err_un:.3}  self-normalized {err_sn:.3}  ESS {ess:.1}");
                pts.push(((k as f64).log10(), err_un));
            }
            series.push(Series {
                label: format!("d = {d}, {label}"),
                points: pts,
            });
        }
    }
    write_table(
        dir,
        "bound.csv",
        "d,q,k,err_unnormalized,err_self_normalized,ess,log_E_p_w2",
        &rows,
    )?;
    plot::lines(
        dir,
        "bound",
        "importance estimate of the data part (paper Eq. 3.7), unnormalized",
        "log10 k (prior samples)",
        "relative error ‖Ê − E‖/‖E‖",
        &series,
    )
}

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_owned)
        })
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Wall time and peak RSS vs agents and vs data size, each configuration in its own process.
fn scaling(a: &ExperimentArgs, dir: &Path) -> Result<()> {
    let exe = std::env::current_exe().context("locating the coolgp binary")?;
    let agent_counts: &[usize] = if a.quick {
        &[10, 100]
    } else {
        &[10, 100, 1000, 10_000]
    };
    let sizes: &[usize] = if a.quick {
        &[5_000, 10_000]
    } else {
        &[10_000, 50_000, 100_000, 246_000]
    };
    let mut rows = Vec::new();
    let mut by_agents = Vec::new();
    let mut by_size = Vec::new();
    let runs: Vec<(usize, usize)> = agent_counts
        .iter()
        .map(|&n| (n, if a.quick { 5_000 } else { 50_000 }))
        .chain(sizes.iter().map(|&s| (100, s)))
        .collect();
    for (i, &(agents, rows_n)) in runs.iter().enumerate() {
        let sub = dir.join(format!("run-{agents}-{rows_n}"));
        let status = std::process::Command::new(&exe)
            .args([
                "simulate",
                "--dataset",
                "airline",
                "--inducing",
                "50",
                "--quiet",
                "--no-central",
                "--no-baselines",
                // The global learner's scaling (see `global_only`).
                "--local-memory",
                "0",
            ])
            .args([
                "--agents",
                &agents.to_string(),
                "--max-train",
                &rows_n.to_string(),
                "--max-test",
                "2000",
            ])
            .args(["--seed", &a.seed.to_string(), "--out"])
            .arg(&sub)
            .stdout(std::process::Stdio::null())
            .status()
            .context("running coolgp simulate")?;
        if !status.success() {
            bail!("coolgp simulate failed for {agents} agents, {rows_n} rows");
        }
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(sub.join("summary.json"))?)?;
        let wall = summary["wall_s"].as_f64().unwrap_or(f64::NAN);
        let rss = summary["peak_rss_mb"].as_f64().unwrap_or(f64::NAN);
        println!("  {agents:>6} agents, {rows_n:>7} rows: wall {wall:.2}s, peak RSS {rss:.0} MB");
        rows.push(format!("{agents},{rows_n},{wall},{rss}"));
        if i < agent_counts.len() {
            by_agents.push(((agents as f64).log10(), wall));
        } else {
            by_size.push((rows_n as f64 / 1000.0, wall));
        }
    }
    write_table(dir, "scaling.csv", "agents,rows,wall_s,peak_rss_mb", &rows)?;
    plot::lines(
        dir,
        "scaling_agents",
        "wall time vs agents (airline, 50k rows, m = 50)",
        "log10 agents",
        "wall time (s)",
        &[Series {
            label: "simulate".into(),
            points: by_agents,
        }],
    )?;
    plot::lines(
        dir,
        "scaling_data",
        "wall time vs data size (100 agents, m = 50)",
        "training rows (thousands)",
        "wall time (s)",
        &[Series {
            label: "simulate".into(),
            points: by_size,
        }],
    )
}

/// Peak resident memory of this process so far (MB), for summaries.
pub fn peak_rss() -> f64 {
    peak_rss_mb()
}
