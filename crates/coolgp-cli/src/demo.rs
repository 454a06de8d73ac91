//! `coolgp demo`: the built-in Irish wind stations (12 synoptic stations, daily mean wind
//! speed 1961–1978), one agent per station. Each station alone, the fleet fused with per-agent
//! q(W) (the paper), the fleet fused with one fleet-wide q(W) (spec §14), the same fleet
//! answering with each station's local memory (issue 19: every station answers, the answers
//! combined by the fleet rule), and the central learner that sees every station's data.

/// The local memory of the demo's fleet run (rows per station; issue 19's measured default).
const DEMO_MEMORY: usize = 500;

/// Which rows the demo's stations keep (`--local-policy`).
const DEMO_POLICY: &str = "reservoir";

use std::path::PathBuf;

use anyhow::{Context, Result};
use coolgp_sim::Report;

use coolgp_config::AgentArgs;

use crate::args::SimArgs;
use crate::output;

/// The demo's runs: the whole wind stream (≈71,000 training days × stations), m = 50.
fn demo_args(seed: u64, projection: &str) -> SimArgs {
    SimArgs {
        dataset: Some("wind".into()),
        agent_by: Some("station".into()),
        inducing: Some(50),
        batch: Some(10),
        topology: Some("random-tree".into()),
        seed: Some(seed),
        max_test: Some(5000),
        agent: AgentArgs {
            projection: Some(projection.into()),
            // The memory leaves the global fused model as it is: only the fleet run keeps one.
            local_memory: (projection == "fleet").then_some(DEMO_MEMORY),
            local_policy: (projection == "fleet").then(|| DEMO_POLICY.to_owned()),
            ..AgentArgs::default()
        },
        no_baselines: true,
        ..SimArgs::default()
    }
}

/// Runs the demo; with `out`, the fleet run's results folder goes to `out` and the per-agent
/// run's to `out/per-agent`.
pub fn run(out: Option<PathBuf>, seed: u64) -> Result<()> {
    let prep = coolgp_sim::prepare(&demo_args(seed, "per-agent"))?;
    let sim = |projection: &str| -> Result<Report> {
        let cfg = crate::sim_config(&demo_args(seed, projection), &prep.work, prep.groups)?;
        Ok(coolgp_sim::run(&cfg, &prep.work, &|_, _| {})?)
    };
    let per = sim("per-agent")?;
    let fleet = sim("fleet")?;
    println!("coolgp demo — one agent per weather station, fusing peer to peer (no server)");
    println!("  {}", prep.description);
    println!(
        "  RMSE of daily mean wind speed (knots) on {} held-out station-days of the whole network:",
        prep.work.tests[0].y.len()
    );
    println!();
    println!(
        "  station  days   alone  fused (per-agent q(W))  fused (fleet q(W))  fleet + local memory"
    );
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.3}"));
    for (p, f) in per.per_agent.iter().zip(&fleet.per_agent) {
        let name = prep.group_names.get(p.id).map_or("?", String::as_str);
        let local = fleet.fleet_query_by_group.get(p.id).copied().flatten();
        println!(
            "  {name:>7}  {:>5}  {:>6.3}  {:>22.3}  {:>18.3}  {:>20}",
            p.points,
            p.rmse_pre,
            p.rmse_post,
            f.rmse_post,
            opt(local)
        );
    }
    println!(
        "  {:>7}  {:>5}  {:>6.3}  {:>22.3}  {:>18.3}  {:>20.3}",
        "mean", "", per.rmse_pre, per.rmse_post, fleet.rmse_post, fleet.rmse_fleet_query
    );
    println!(
        "  (alone: the station's own q(u) and q(W), the per-agent run before fusion; in --out DIR,\n   \
         summary.json is the fleet run, whose rmse_pre is the station's own q(u) under the fleet's\n   \
         q(W), and DIR/per-agent the per-agent run. Fleet + local memory: every station keeps a\n   \
         uniform sample of {DEMO_MEMORY} of its rows ({DEMO_POLICY}) and answers with the fleet model plus an exact GP on their residuals;\n   \
         each held-out day is answered by all stations, combined by {} (a station's row: the days of\n   \
         that station; the mean row: the first {} held-out days of the network))",
        fleet.fleet_rule,
        coolgp_sim::fleet::QUERY_POINTS.min(prep.work.tests[0].y.len())
    );
    println!(
        "  central learner (one model, all {} station-days): {} (Adam on q(W)), {} (the fleet's site update)",
        per.points,
        opt(per.rmse_central),
        opt(fleet.rmse_central)
    );
    println!(
        "  constant predictor {:.3}; NLPD fused fleet {:.3} (central {}), 95% interval coverage {:.3}; wall {:.1}s",
        per.rmse_constant,
        fleet.nlpd_post,
        opt(fleet.nlpd_central),
        fleet.coverage95_post,
        per.wall_s + fleet.wall_s
    );
    println!();
    if let Some(c) = fleet.rmse_central {
        let gap = 100.0 * (fleet.rmse_post / c - 1.0);
        println!(
            "  Takeaway: fusing one fleet-wide q(W) takes the stations from RMSE {:.3} alone to {:.3} ({:+.1}%), {:.1}% {} the central learner ({c:.3}), with no data leaving its station.",
            per.rmse_pre,
            fleet.rmse_post,
            100.0 * (fleet.rmse_post / per.rmse_pre - 1.0),
            gap.abs(),
            if gap >= 0.0 { "above" } else { "below" }
        );
    }
    if fleet.local_points_mean > 0.0 {
        println!(
            "  With {DEMO_MEMORY} rows of memory per station, the fleet answers the first {} held-out days at RMSE {:.3}, its 95% intervals covering {:.3} of them (variance calibrated x{:.2} on the stations' leave-one-out answers).",
            coolgp_sim::fleet::QUERY_POINTS.min(prep.work.tests[0].y.len()),
            fleet.rmse_fleet_query,
            fleet.coverage95_fleet_query,
            fleet.fleet_query_var_scale
        );
    }
    if let Some(dir) = out {
        let extra = |projection: &str| {
            serde_json::json!({
                "dataset": "wind",
                "projection": projection,
                "stations": prep.group_names,
            })
        };
        output::write_run(
            &dir,
            &fleet,
            "coolgp demo (wind, fleet q(W))",
            extra("fleet"),
        )
        .context("writing results")?;
        output::write_run(
            &dir.join("per-agent"),
            &per,
            "coolgp demo (wind, per-agent q(W))",
            extra("per-agent"),
        )
        .context("writing results")?;
        println!(
            "  results in {} (fleet run; the per-agent run in per-agent/)",
            dir.display()
        );
    }
    Ok(())
}
