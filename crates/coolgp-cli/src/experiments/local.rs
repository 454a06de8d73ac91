//! Local memory and fleet queries (issue 19): the built-in wind and air stations (one agent
//! per station) and the airline stream routed by regions (`--regions`), in the fleet
//! projection mode, over the memory size B (`--local-memory`). For each B: the global fused
//! model alone (`rmse_post`), the fleet-wide query (every agent answers with its memory's
//! correction, combined by `--fleet-rule`) and the oracle agent alone (the station's or
//! region's own agent); the learning phase's wall time per block and the local state's bytes
//! per agent; the fleet query's coverage, uncalibrated and calibrated (docs/LOCAL.md §10).

use std::path::Path;

use anyhow::Result;
use coolgp_sim::Report;
use serde_json::json;

use super::{o, write_table, ExperimentArgs};
use crate::args::SimArgs;
use crate::plot::{self, Series};
use coolgp_config::AgentArgs;

/// Memory sizes B of the full experiment.
const MEMORIES: [usize; 6] = [0, 100, 200, 500, 1_000, 2_000];

/// Memory sizes B of `--quick`.
const QUICK_MEMORIES: [usize; 3] = [0, 50, 100];

/// The airline columns its regions are drawn over: every input (`--regions all`; it has no
/// place columns; regions over dep_time and distance alone left the fleet query no better than
/// the global model, regions compact in every input gave 0.89× of it; EXPERIMENTS.md, issue
/// 19).
pub(super) const AIRLINE_REGIONS: &str = "all";

/// One dataset of the experiment: its label and the run's options for memory size `b`.
struct Case {
    label: &'static str,
    args: fn(&ExperimentArgs, usize) -> SimArgs,
}

/// The stations of `dataset`, one agent each, fleet projection, memory `b`.
pub(super) fn stations(dataset: &str, a: &ExperimentArgs, b: usize) -> SimArgs {
    SimArgs {
        dataset: Some(dataset.into()),
        agent_by: Some("station".into()),
        inducing: Some(if a.quick { 20 } else { 50 }),
        batch: Some(10),
        max_train: a.quick.then_some(3_000),
        max_test: Some(if a.quick { 500 } else { 10_000 }),
        ..base(a, b)
    }
}

/// Options every run shares: the seed, the fleet projection, memory `b`, no references.
pub(super) fn base(a: &ExperimentArgs, b: usize) -> SimArgs {
    SimArgs {
        seed: Some(a.seed),
        agent: AgentArgs {
            projection: Some("fleet".into()),
            local_memory: Some(b),
            ..AgentArgs::default()
        },
        no_central: true,
        no_baselines: true,
        ..SimArgs::default()
    }
}

const CASES: [Case; 3] = [
    Case {
        label: "wind",
        args: |a, b| stations("wind", a, b),
    },
    Case {
        label: "air",
        args: |a, b| stations("air", a, b),
    },
    Case {
        label: "airline-regions",
        args: |a, b| SimArgs {
            dataset: Some("airline".into()),
            regions: Some(vec![AIRLINE_REGIONS.to_owned()]),
            agents: Some(if a.quick { 10 } else { 100 }),
            inducing: Some(if a.quick { 20 } else { 50 }),
            batch: Some(20),
            max_train: Some(if a.quick { 3_000 } else { 50_000 }),
            max_test: Some(if a.quick { 500 } else { 10_000 }),
            ..base(a, b)
        },
    },
];

/// What the runs of the experiment collect: the CSV and JSON rows, and per dataset the
/// learning time per block and the fleet query's coverage (uncalibrated and calibrated).
#[derive(Default)]
struct Collected {
    rows: Vec<String>,
    json: Vec<serde_json::Value>,
    cost: Vec<Series>,
    coverage: Vec<Series>,
}

/// Runs every dataset × memory size; writes `local.csv` and `local.json` (one row per run)
/// and per dataset `local-DATASET.png/.svg` (RMSE against B: global only, global + local by
/// the fleet query, the oracle agent alone), `local-cost.png/.svg` (wall time per block) and
/// `local-coverage.png/.svg` (the fleet query's coverage95, uncalibrated and calibrated,
/// docs/LOCAL.md §10).
pub(super) fn run(a: &ExperimentArgs, dir: &Path) -> Result<()> {
    let memories: &[usize] = if a.quick { &QUICK_MEMORIES } else { &MEMORIES };
    println!("  fleet projection; RMSE of the global model / fleet query / oracle agent");
    let mut all = Collected::default();
    for case in &CASES {
        run_case(case, a, memories, dir, &mut all)?;
    }
    plot::lines(
        dir,
        "local-cost",
        "learning time per block against the local memory B",
        "local memory B (rows per agent)",
        "ms per block (wall, learning phase)",
        &all.cost,
    )?;
    plot::lines(
        dir,
        "local-coverage",
        "fleet query: 95% interval coverage against the local memory B (target 0.90-0.98)",
        "local memory B (rows per agent)",
        "coverage95",
        &all.coverage,
    )?;
    std::fs::write(
        dir.join("local.json"),
        serde_json::to_string_pretty(&all.json)? + "\n",
    )?;
    write_table(
        dir,
        "local.csv",
        "dataset,memory,rmse_global,rmse_fleet_query,nlpd_fleet_query,coverage95_fleet_query,fleet_rule,rmse_oracle_local,local_points_mean,local_bytes_per_agent,learn_ms_per_block,query_s,wall_s,fleet_query_var_scale,coverage95_fleet_query_raw,nlpd_fleet_query_raw",
        &all.rows,
    )
}

/// A series named `label` without points.
fn series(label: &str) -> Series {
    Series {
        label: label.into(),
        points: Vec::new(),
    }
}

/// One dataset over the memory sizes: its runs into `all`, its RMSE plot into `dir`.
fn run_case(
    case: &Case,
    a: &ExperimentArgs,
    memories: &[usize],
    dir: &Path,
    all: &mut Collected,
) -> Result<()> {
    let mut rmse = [
        "global only",
        "global + local (fleet query)",
        "oracle agent (own memory)",
    ]
    .map(series);
    let mut per_block = series(case.label);
    let mut raw = series(&format!("{} uncalibrated", case.label));
    let mut calibrated = series(&format!("{} calibrated", case.label));
    for &b in memories {
        let args = (case.args)(a, b);
        let r = super::sim(&args, a.quiet, &format!("{} B={b}", case.label))?;
        let ms = 1e3 * r.phases.learn_s / r.batches.max(1) as f64;
        println!(
            "    {:<16} B {b:>5}  global {:.4}  fleet query {:.4} ({})  oracle {}  coverage {:.3} (uncalibrated {:.3})  {:.0} points, {:.0} kB/agent, {ms:.3} ms/block",
            case.label,
            r.rmse_post,
            r.rmse_fleet_query,
            r.fleet_rule,
            o(r.rmse_oracle_local),
            r.coverage95_fleet_query,
            r.coverage95_fleet_query_raw,
            r.local_points_mean,
            r.local_bytes_per_agent / 1e3,
        );
        let x = b as f64;
        rmse[0].points.push((x, r.rmse_post));
        rmse[1].points.push((x, r.rmse_fleet_query));
        rmse[2]
            .points
            .push((x, r.rmse_oracle_local.unwrap_or(f64::NAN)));
        per_block.points.push((x, ms));
        raw.points.push((x, r.coverage95_fleet_query_raw));
        calibrated.points.push((x, r.coverage95_fleet_query));
        all.rows.push(row(case.label, b, &r, ms));
        all.json.push(json!({
            "dataset": case.label,
            "memory": b,
            "rmse_global": r.rmse_post,
            "rmse_fleet_query": r.rmse_fleet_query,
            "nlpd_fleet_query": r.nlpd_fleet_query,
            "coverage95_fleet_query": r.coverage95_fleet_query,
            "fleet_query_var_scale": r.fleet_query_var_scale,
            "nlpd_fleet_query_raw": r.nlpd_fleet_query_raw,
            "coverage95_fleet_query_raw": r.coverage95_fleet_query_raw,
            "fleet_rule": r.fleet_rule,
            "fleet_query_rules": r.fleet_query_rules,
            "rmse_oracle_local": r.rmse_oracle_local,
            "local_points_mean": r.local_points_mean,
            "local_bytes_per_agent": r.local_bytes_per_agent,
            "learn_ms_per_block": ms,
            "query_s": r.phases.local_s,
            "wall_s": r.wall_s,
        }));
    }
    plot::lines(
        dir,
        &format!("local-{}", case.label),
        &format!("{}: RMSE against the local memory B", case.label),
        "local memory B (rows per agent)",
        "RMSE",
        &rmse,
    )?;
    all.cost.push(per_block);
    all.coverage.extend([raw, calibrated]);
    Ok(())
}

/// One line of `local.csv`.
fn row(label: &str, b: usize, r: &Report, ms: f64) -> String {
    format!(
        "{label},{b},{},{},{},{},{},{},{},{},{ms},{},{},{},{},{}",
        r.rmse_post,
        r.rmse_fleet_query,
        r.nlpd_fleet_query,
        r.coverage95_fleet_query,
        r.fleet_rule,
        o(r.rmse_oracle_local),
        r.local_points_mean,
        r.local_bytes_per_agent,
        r.phases.local_s,
        r.wall_s,
        r.fleet_query_var_scale,
        r.coverage95_fleet_query_raw,
        r.nlpd_fleet_query_raw
    )
}
