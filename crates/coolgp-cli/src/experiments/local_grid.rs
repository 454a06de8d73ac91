//! Issue 28: the local model over the settings a user tries. Every set of `experiment local`
//! (wind and air by station at B = 500, wind at B = 2,000, the traffic-like field and airline
//! by regions) over batch sizes and seeds, with the fleet's fit (`--local-fit fleet`) and the
//! agents' own fits (`--local-fit agent`); each run's global model, fleet query (with and
//! without the safety net's weight), the rule `auto` chose, coverage and CPU seconds; "global"
//! is the global fused model on the fleet query's rows (`rmse_fleet_query_global`). The
//! summary states the spread (mean, worst, best) and how many runs the fleet query made
//! worse than the global model; the plots show RMSE against batch size, one line per seed.

use std::path::Path;

use anyhow::Result;
use coolgp_sim::fleet::cpu_seconds;
use coolgp_sim::Report;
use serde_json::json;

use super::local::{base, stations, AIRLINE_REGIONS};
use super::{write_table, ExperimentArgs};
use crate::args::SimArgs;
use crate::plot::{self, Series};

/// One set of runs: its label, memory B, batch sizes, seeds and options.
struct Set {
    label: &'static str,
    memory: usize,
    batches: &'static [usize],
    seeds: u64,
    args: fn(&ExperimentArgs, usize) -> SimArgs,
}

/// The traffic-like field by 100 regions over its five environment inputs (EXPERIMENTS.md,
/// issue 19).
fn traffic(a: &ExperimentArgs, b: usize) -> SimArgs {
    SimArgs {
        dataset: Some("traffic".into()),
        agents: Some(if a.quick { 20 } else { 100 }),
        regions: Some(["e1", "e2", "e3", "e4", "e5"].map(str::to_owned).to_vec()),
        inducing: Some(if a.quick { 20 } else { 50 }),
        max_train: a.quick.then_some(3_000),
        max_test: Some(if a.quick { 500 } else { 10_000 }),
        ..base(a, b)
    }
}

/// Airline by 100 regions over every input, 50,000 rows (`experiment local`'s).
fn airline_regions(a: &ExperimentArgs, b: usize) -> SimArgs {
    SimArgs {
        dataset: Some("airline".into()),
        regions: Some(vec![AIRLINE_REGIONS.to_owned()]),
        agents: Some(if a.quick { 10 } else { 100 }),
        inducing: Some(if a.quick { 20 } else { 50 }),
        max_train: Some(if a.quick { 3_000 } else { 50_000 }),
        max_test: Some(if a.quick { 500 } else { 10_000 }),
        ..base(a, b)
    }
}

const FULL: [Set; 5] = [
    Set {
        label: "wind",
        memory: 500,
        batches: &[5, 10, 20, 40],
        seeds: 5,
        args: |a, b| stations("wind", a, b),
    },
    Set {
        label: "air",
        memory: 500,
        batches: &[5, 10, 20, 40],
        seeds: 5,
        args: |a, b| stations("air", a, b),
    },
    Set {
        label: "wind-2000",
        memory: 2_000,
        batches: &[5, 10, 20, 40],
        seeds: 5,
        args: |a, b| stations("wind", a, b),
    },
    Set {
        label: "traffic",
        memory: 500,
        batches: &[10, 20],
        seeds: 3,
        args: traffic,
    },
    Set {
        label: "airline-regions",
        memory: 500,
        batches: &[10, 20],
        seeds: 3,
        args: airline_regions,
    },
];

const QUICK: [Set; 2] = [
    Set {
        label: "wind",
        memory: 100,
        batches: &[10, 40],
        seeds: 2,
        args: |a, b| stations("wind", a, b),
    },
    Set {
        label: "traffic",
        memory: 100,
        batches: &[10, 40],
        seeds: 2,
        args: traffic,
    },
];

/// The fits compared.
const FITS: [&str; 2] = ["fleet", "agent"];

/// One run's figures.
struct Run {
    set: &'static str,
    fit: &'static str,
    batch: usize,
    seed: u64,
    report: Report,
    cpu_s: f64,
}

/// Runs every set × fit × batch × seed; writes `local-grid.csv`, `local-grid.json`,
/// `local-grid-summary.csv` and per set `local-grid-SET.png/.svg` (RMSE against batch size:
/// one line per seed for each fit, and the global model's).
pub(super) fn run(a: &ExperimentArgs, dir: &Path) -> Result<()> {
    let sets: &[Set] = if a.quick { &QUICK } else { &FULL };
    let mut runs = Vec::new();
    for set in sets {
        for fit in FITS {
            for &batch in set.batches {
                for seed in 0..set.seeds {
                    let mut args = (set.args)(a, set.memory);
                    args.batch = Some(batch);
                    args.seed = Some(seed + a.seed);
                    args.agent.local_fit = Some(fit.into());
                    let title = format!("{} {fit} batch {batch} seed {seed}", set.label);
                    let cpu = cpu_seconds();
                    let report = super::sim(&args, a.quiet, &title)?;
                    let cpu_s = cpu.zip(cpu_seconds()).map_or(f64::NAN, |(a, b)| b - a);
                    println!(
                        "    {:<16} {fit:<5} batch {batch:>2} seed {seed}  global {:.4}  fleet query {:.4} ({}, weight {:.3}; unweighted {:.4})  coverage {:.3}  {cpu_s:.1} CPU s",
                        set.label,
                        report.rmse_fleet_query_global,
                        report.rmse_fleet_query,
                        report.fleet_rule,
                        report.fleet_query_weight,
                        report.rmse_fleet_query_unweighted,
                        report.coverage95_fleet_query,
                    );
                    runs.push(Run {
                        set: set.label,
                        fit,
                        batch,
                        seed,
                        report,
                        cpu_s,
                    });
                }
            }
        }
        plot_set(dir, set, &runs)?;
        // The tables so far after each set: an hour-long run stopped early keeps its sets.
        write(dir, sets, &runs, false)?;
    }
    write(dir, sets, &runs, true)
}

/// RMSE against batch size for `set`: the fleet query per fit and seed, the global model's
/// mean over seeds.
fn plot_set(dir: &Path, set: &Set, runs: &[Run]) -> Result<()> {
    let mut series = Vec::new();
    for fit in FITS {
        for seed in 0..set.seeds {
            let points = runs
                .iter()
                .filter(|r| r.set == set.label && r.fit == fit && r.seed == seed)
                .map(|r| (r.batch as f64, r.report.rmse_fleet_query))
                .collect();
            series.push(Series {
                label: format!("fleet query, {fit} fit, seed {seed}"),
                points,
            });
        }
    }
    let global = set
        .batches
        .iter()
        .map(|&b| {
            let of: Vec<f64> = runs
                .iter()
                .filter(|r| r.set == set.label && r.batch == b)
                .map(|r| r.report.rmse_fleet_query_global)
                .collect();
            (b as f64, of.iter().sum::<f64>() / of.len().max(1) as f64)
        })
        .collect();
    series.push(Series {
        label: "global model on the same rows (mean over seeds)".into(),
        points: global,
    });
    plot::lines(
        dir,
        &format!("local-grid-{}", set.label),
        &format!(
            "{} (B = {}): fleet query RMSE against batch size, every seed",
            set.label, set.memory
        ),
        "batch size (rows)",
        "RMSE",
        &series,
    )
}

/// The per-run table and JSON, and the per set × fit summary (printed too if `print`).
fn write(dir: &Path, sets: &[Set], runs: &[Run], print: bool) -> Result<()> {
    let rows: Vec<String> = runs
        .iter()
        .map(|r| {
            let p = &r.report;
            format!(
                "{},{},{},{},{},{},{},{},{},{},{},{}",
                r.set,
                r.fit,
                r.batch,
                r.seed,
                p.rmse_fleet_query_global,
                p.rmse_fleet_query,
                p.rmse_fleet_query_unweighted,
                p.fleet_query_weight,
                p.fleet_rule,
                p.coverage95_fleet_query,
                r.cpu_s,
                p.wall_s
            )
        })
        .collect();
    write_table(
        dir,
        "local-grid.csv",
        "set,fit,batch,seed,rmse_global,rmse_fleet_query,rmse_fleet_query_unweighted,fleet_query_weight,fleet_rule,coverage95_fleet_query,cpu_s,wall_s",
        &rows,
    )?;
    let json: Vec<serde_json::Value> = runs
        .iter()
        .map(|r| {
            json!({
                "set": r.set, "fit": r.fit, "batch": r.batch, "seed": r.seed,
                "rmse_global": r.report.rmse_fleet_query_global,
                "rmse_post": r.report.rmse_post,
                "rmse_fleet_query": r.report.rmse_fleet_query,
                "rmse_fleet_query_unweighted": r.report.rmse_fleet_query_unweighted,
                "fleet_query_weight": r.report.fleet_query_weight,
                "fleet_rule": r.report.fleet_rule,
                "fleet_query_rules": r.report.fleet_query_rules,
                "coverage95_fleet_query": r.report.coverage95_fleet_query,
                "cpu_s": r.cpu_s, "wall_s": r.report.wall_s,
            })
        })
        .collect();
    std::fs::write(
        dir.join("local-grid.json"),
        serde_json::to_string_pretty(&json)? + "\n",
    )?;
    if print {
        println!("  set, fit: runs; fleet query mean / worst / best; runs worse than global; coverage95 range; CPU s mean");
    }
    let mut summary = Vec::new();
    for set in sets {
        for fit in FITS {
            let of: Vec<&Run> = runs
                .iter()
                .filter(|r| r.set == set.label && r.fit == fit)
                .collect();
            if of.is_empty() {
                continue;
            }
            let s = Spread::of(of.iter().map(|r| r.report.rmse_fleet_query));
            let cov = Spread::of(of.iter().map(|r| r.report.coverage95_fleet_query));
            let cpu = Spread::of(of.iter().map(|r| r.cpu_s));
            let worse = of
                .iter()
                .filter(|r| r.report.rmse_fleet_query > r.report.rmse_fleet_query_global)
                .count();
            if print {
                println!(
                    "    {:<16} {fit:<5} {:>2} runs  {:.3} / {:.3} / {:.3}  worse than global: {worse}  coverage {:.3}-{:.3}  {:.1} CPU s",
                    set.label, s.n, s.mean, s.max, s.min, cov.min, cov.max, cpu.mean
                );
            }
            summary.push(format!(
                "{},{},{fit},{},{},{},{},{worse},{},{},{}",
                set.label, set.memory, s.n, s.mean, s.max, s.min, cov.min, cov.max, cpu.mean
            ));
        }
    }
    write_table(
        dir,
        "local-grid-summary.csv",
        "set,memory,fit,runs,rmse_mean,rmse_worst,rmse_best,worse_than_global,coverage95_min,coverage95_max,cpu_s_mean",
        &summary,
    )
}

/// Mean, largest and smallest of a list of figures (NaN ones left out).
struct Spread {
    n: usize,
    mean: f64,
    max: f64,
    min: f64,
}

impl Spread {
    fn of(values: impl Iterator<Item = f64>) -> Self {
        let v: Vec<f64> = values.filter(|x| x.is_finite()).collect();
        Self {
            n: v.len(),
            mean: v.iter().sum::<f64>() / v.len().max(1) as f64,
            max: v.iter().copied().fold(f64::NAN, f64::max),
            min: v.iter().copied().fold(f64::NAN, f64::min),
        }
    }
}
