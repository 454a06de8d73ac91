//! Issue 29: faulty members. The built-in ten-station field ([`coolgp_sim::faults`]) clean,
//! with each fault at station 9, and with two faulty stations (an offset at 8, a unit mix-up
//! at 9), over seeds, each without the member check (`--suspects off`) and with containment
//! (the default). Per run: the honest stations' global RMSE, the fleet query's RMSE, the
//! suspects and the station's own block at which each was first marked, the check's CPU
//! seconds against the run's. The summary gives each case's ratio to the clean fleet (mean
//! and worst over seeds); the plot shows the fleet query per case.

use std::path::Path;

use anyhow::Result;
use coolgp::members::Policy;
use coolgp_sim::faults::{config, config_for, field, field_of, Fault, STATIONS};
use coolgp_sim::fleet::cpu_seconds;
use coolgp_sim::{run as simulate, Report};
use serde_json::json;

use super::{write_table, ExperimentArgs};
use crate::plot::{self, Series};

/// One case: its name, its faulty stations and its stations (the first `.2` of the ten: the
/// fleets without the faulty stations, the floor their containment can reach).
type Case = (&'static str, Vec<(usize, Fault)>, usize);

fn cases() -> Vec<Case> {
    let mut v: Vec<Case> = vec![("clean", Vec::new(), STATIONS)];
    v.extend(
        Fault::ALL
            .iter()
            .map(|&f| (f.name(), vec![(9, f)], STATIONS)),
    );
    v.push((
        "offset+scaled",
        vec![(8, Fault::Offset), (9, Fault::Scaled)],
        STATIONS,
    ));
    v.push(("without-9", Vec::new(), STATIONS - 1));
    v.push(("without-8-9", Vec::new(), STATIONS - 2));
    v
}

/// The case without the faulty stations of `case` (its floor), if it has faulty stations.
fn floor_of(case: &Case) -> Option<&'static str> {
    match case.1.len() {
        0 => None,
        1 => Some("without-9"),
        _ => Some("without-8-9"),
    }
}

/// One run's figures.
struct Row {
    case: &'static str,
    policy: Policy,
    seed: u64,
    honest_global: f64,
    fleet_query: f64,
    suspects: Vec<usize>,
    /// (station, its block when first marked) of the faulty stations.
    detected: Vec<(usize, Option<u64>)>,
    check_cpu_s: f64,
    cpu_s: f64,
}

fn measure(case: &Case, policy: Policy, seed: u64) -> Result<Row> {
    let (work, cfg) = if case.2 == STATIONS {
        (field(&case.1, 20, seed), config(policy, seed))
    } else {
        (field_of(case.2, 20, seed), config_for(case.2, policy, seed))
    };
    let cpu = cpu_seconds();
    let r: Report = simulate(&cfg, &work, &|_, _| {})?;
    let cpu_s = cpu.zip(cpu_seconds()).map_or(0.0, |(a, b)| b - a);
    let faulty = |i: usize| case.1.iter().any(|(s, _)| *s == i);
    let honest: Vec<f64> = r
        .per_agent
        .iter()
        .filter(|a| !faulty(a.id))
        .map(|a| a.rmse_post)
        .collect();
    let m = r.members.as_ref();
    Ok(Row {
        case: case.0,
        policy,
        seed,
        honest_global: honest.iter().sum::<f64>() / honest.len().max(1) as f64,
        fleet_query: r.rmse_fleet_query,
        suspects: m.map_or(Vec::new(), |m| m.suspects.clone()),
        detected: case
            .1
            .iter()
            .map(|&(s, _)| (s, m.and_then(|m| m.members[s].first_suspect_block)))
            .collect(),
        check_cpu_s: r.phases.members_cpu_s,
        cpu_s,
    })
}

/// Runs the experiment into `dir` (`--quick`: seed `a.seed` only; else the five seeds from
/// `a.seed`: 0–4 by default).
pub fn run(a: &ExperimentArgs, dir: &Path) -> Result<()> {
    let seeds: Vec<u64> = if a.quick {
        vec![a.seed]
    } else {
        (a.seed..a.seed + 5).collect()
    };
    let mut rows = Vec::new();
    for case in cases() {
        for policy in [Policy::Off, Policy::Contain] {
            for &seed in &seeds {
                let r = measure(&case, policy, seed)?;
                if !a.quiet {
                    println!(
                        "{:>14} {:>7} seed {seed}: honest global {:.4}, fleet query {:.4}, suspects {:?}",
                        r.case,
                        policy.name(),
                        r.honest_global,
                        r.fleet_query,
                        r.suspects
                    );
                }
                rows.push(r);
            }
        }
    }
    write(dir, &rows, &seeds)
}

/// The table, the summary against the clean fleet, and the plot.
fn write(dir: &Path, rows: &[Row], seeds: &[u64]) -> Result<()> {
    let lines: Vec<String> = rows
        .iter()
        .map(|r| {
            let det: Vec<String> = r
                .detected
                .iter()
                .map(|(s, b)| format!("{s}@{}", b.map_or("-".into(), |b| b.to_string())))
                .collect();
            let sus: Vec<String> = r.suspects.iter().map(usize::to_string).collect();
            format!(
                "{},{},{},{:.6},{:.6},{},{},{:.4},{:.4}",
                r.case,
                r.policy.name(),
                r.seed,
                r.honest_global,
                r.fleet_query,
                sus.join(" "),
                det.join(" "),
                r.check_cpu_s,
                r.cpu_s
            )
        })
        .collect();
    write_table(
        dir,
        "faults.csv",
        "case,suspects_policy,seed,honest_global_rmse,fleet_query_rmse,suspects,first_marked_block,check_cpu_s,cpu_s",
        &lines,
    )?;
    let find = |name: &str, policy: Policy, seed: u64| {
        rows.iter()
            .find(|r| r.case == name && r.policy == policy && r.seed == seed)
    };
    let mut summary = Vec::new();
    let mut series = Vec::new();
    for policy in [Policy::Off, Policy::Contain] {
        let mut points = Vec::new();
        for (k, case) in cases().iter().enumerate() {
            let runs: Vec<&Row> = rows
                .iter()
                .filter(|r| r.case == case.0 && r.policy == policy)
                .collect();
            // Ratios to the clean fleet (or the floor) of the same seed under the same policy.
            let ratio = |to: &str, f: fn(&Row) -> f64| -> Vec<f64> {
                runs.iter()
                    .filter_map(|r| find(to, policy, r.seed).map(|c| f(r) / f(c)))
                    .collect()
            };
            let (g, q) = (
                ratio("clean", |r| r.honest_global),
                ratio("clean", |r| r.fleet_query),
            );
            let floor = floor_of(case).map(|to| ratio(to, |r| r.fleet_query));
            let stat = |v: &[f64]| {
                json!({"mean": v.iter().sum::<f64>() / v.len().max(1) as f64,
                       "worst": v.iter().copied().fold(f64::NAN, f64::max)})
            };
            let marked: Vec<Option<u64>> = runs
                .iter()
                .flat_map(|r| r.detected.iter().map(|d| d.1))
                .collect();
            let honest_marked = runs
                .iter()
                .filter(|r| {
                    r.suspects
                        .iter()
                        .any(|s| !case.1.iter().any(|(f, _)| f == s))
                })
                .count();
            let cpu: f64 = runs.iter().map(|r| r.check_cpu_s).sum::<f64>()
                / runs.iter().map(|r| r.cpu_s).sum::<f64>().max(1e-9);
            summary.push(json!({
                "case": case.0, "suspects_policy": policy.name(), "runs": runs.len(),
                "honest_global_vs_clean": stat(&g), "fleet_query_vs_clean": stat(&q),
                "fleet_query_vs_without_the_faulty": floor.map(|v| stat(&v)),
                "faulty_marked": marked.iter().filter(|b| b.is_some()).count(),
                "faulty_total": marked.len(),
                "latest_first_marked_block": marked.iter().flatten().max(),
                "runs_with_an_honest_member_marked": honest_marked,
                "check_cpu_share": cpu,
            }));
            let mean_q = runs.iter().map(|r| r.fleet_query).sum::<f64>() / runs.len().max(1) as f64;
            points.push((k as f64, mean_q));
        }
        series.push(Series {
            label: format!("--suspects {}", policy.name()),
            points,
        });
    }
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(&json!({
            "seeds": seeds,
            "cases": cases().iter().map(|c| c.0).collect::<Vec<_>>(),
            "summary": summary,
        }))?,
    )?;
    plot::lines(
        dir,
        "faults",
        "fleet query RMSE, mean over seeds",
        "case: 0 clean, 1 offset, 2 noise, 3 stuck, 4 scaled, 5 offset + scaled, 6 without 9, 7 without 8, 9",
        "fleet query RMSE",
        &series,
    )
}
