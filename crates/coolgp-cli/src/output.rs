//! Results folders: `summary.json`, `curves.csv`, `agents.csv`, and the plots.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use coolgp_sim::Report;

use crate::plot::{self, Series};

fn opt(v: Option<f64>) -> String {
    v.map_or(String::new(), |x| format!("{x}"))
}

/// Writes the whole results folder for one run, with `extra` JSON fields merged into the summary.
pub fn write_run(dir: &Path, report: &Report, title: &str, extra: serde_json::Value) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut summary = serde_json::to_value(report)?;
    if let (Some(obj), serde_json::Value::Object(more)) = (summary.as_object_mut(), extra) {
        obj.extend(more);
    }
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(&summary)? + "\n",
    )?;
    let mut curves =
        String::from("batches,points,rmse_pre,rmse_post,rmse_central,rmse_ddtc,rmse_dpitc\n");
    for c in &report.curves {
        let _ = writeln!(
            curves,
            "{},{},{},{},{},{},{}",
            c.batches,
            c.points,
            c.rmse_pre,
            c.rmse_post,
            opt(c.rmse_central),
            opt(c.rmse_ddtc),
            opt(c.rmse_dpitc)
        );
    }
    std::fs::write(dir.join("curves.csv"), curves)?;
    let mut agents = String::from("agent,blocks,points,rmse_pre,rmse_post\n");
    for a in &report.per_agent {
        let _ = writeln!(
            agents,
            "{},{},{},{},{}",
            a.id, a.blocks, a.points, a.rmse_pre, a.rmse_post
        );
    }
    std::fs::write(dir.join("agents.csv"), agents)?;
    let xs = |f: &dyn Fn(&coolgp_sim::CurvePoint) -> Option<f64>| -> Vec<(f64, f64)> {
        report
            .curves
            .iter()
            .map(|c| (c.batches as f64, f(c).unwrap_or(f64::NAN)))
            .collect()
    };
    let mut series = vec![
        Series {
            label: "pre-fusion (own q(u))".into(),
            points: xs(&|c| Some(c.rmse_pre)),
        },
        Series {
            label: "post-fusion (fused q(u))".into(),
            points: xs(&|c| Some(c.rmse_post)),
        },
    ];
    if report.rmse_central.is_some() {
        series.push(Series {
            label: "central learner".into(),
            points: xs(&|c| c.rmse_central),
        });
    }
    // The server baselines are fitted once, on the whole stream: without curve values they are
    // drawn as a flat reference line at their final RMSE (so the legend never names a series
    // that is not drawn).
    let reference = |points: Vec<(f64, f64)>, last: Option<f64>| -> Vec<(f64, f64)> {
        match last {
            Some(v) if points.iter().all(|p| p.1.is_nan()) => {
                let x0 = points.first().map_or(0.0, |p| p.0);
                let x1 = points.last().map_or(0.0, |p| p.0);
                vec![(x0, v), (x1, v)]
            }
            _ => points,
        }
    };
    if report.rmse_ddtc.is_some() {
        series.push(Series {
            label: "dDTC (server)".into(),
            points: reference(xs(&|c| c.rmse_ddtc), report.rmse_ddtc),
        });
        series.push(Series {
            label: "dPITC (server)".into(),
            points: reference(xs(&|c| c.rmse_dpitc), report.rmse_dpitc),
        });
    }
    plot::lines(
        dir,
        "curves",
        title,
        "batches dispatched",
        "mean RMSE over agents",
        &series,
    )?;
    if report.per_agent.len() > 1 {
        let pts: Vec<(f64, f64)> = report
            .per_agent
            .iter()
            .map(|a| (a.rmse_pre, a.rmse_post))
            .collect();
        plot::scatter(dir, "agents", &format!("{title}: per agent"), &pts)?;
    }
    Ok(())
}

/// Prints the headline figures.
pub fn print_report(r: &Report) {
    let o = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.4}"));
    println!(
        "  agents {}  inducing {}  points {}  batches {}",
        r.agents, r.inducing, r.points, r.batches
    );
    println!(
        "  fusion {} on {} (diameter {}), {} {} per fusion, {} messages, loss {}",
        r.fusion,
        r.topology,
        r.diameter.map_or("-".into(), |d| d.to_string()),
        r.rounds,
        if r.schedule == "two-pass" {
            "two-pass steps"
        } else {
            "rounds"
        },
        r.network.sent,
        r.loss
    );
    if r.rounds_capped > 0 {
        println!(
            "  warning: {} fusion(s) hit the round cap before every estimate settled",
            r.rounds_capped
        );
    }
    println!(
        "  RMSE  pre-fusion {:.4}   post-fusion {:.4}   central {}",
        r.rmse_pre,
        r.rmse_post,
        o(r.rmse_central)
    );
    println!(
        "        dDTC {}   dPITC {}   constant {:.4}",
        o(r.rmse_ddtc),
        o(r.rmse_dpitc),
        r.rmse_constant
    );
    println!(
        "  NLPD  post-fusion {:.4}   central {}   95% coverage post-fusion {:.3}",
        r.nlpd_post,
        o(r.nlpd_central),
        r.coverage95_post
    );
    if r.local_points_mean > 0.0 {
        println!(
            "  fleet query ({}, local memory {:.0} points/agent, residual kernel {})  RMSE {:.4} (global model on the same rows {:.4})  NLPD {:.4}  95% coverage {:.3}   oracle agent {}",
            r.fleet_rule,
            r.local_points_mean,
            r.local_family,
            r.rmse_fleet_query,
            r.rmse_fleet_query_global,
            r.nlpd_fleet_query,
            r.coverage95_fleet_query,
            o(r.rmse_oracle_local)
        );
        println!(
            "  fleet query calibration  residual weight {:.3} (RMSE at weight 1: {:.4})  variance x{:.3} (from {} leave-one-out memory rows)   uncalibrated NLPD {:.4}  95% coverage {:.3}",
            r.fleet_query_weight,
            r.rmse_fleet_query_unweighted,
            r.fleet_query_var_scale,
            r.fleet_calibration_rows,
            r.nlpd_fleet_query_raw,
            r.coverage95_fleet_query_raw
        );
        println!(
            "  fleet query routing  {} ({:.1} answers per row)",
            r.fleet_query_route.map_or_else(
                || "every agent answers every row (--route 0)".to_owned(),
                |k| format!("each row asks the {k} agents nearest it (--route {k})")
            ),
            r.fleet_query_answers_per_row
        );
    }
    println!(
        "  σ_s, σ_n  post-fusion {:.4}, {:.4}   central {}, {}",
        r.sigma_s_post,
        r.sigma_n_post,
        o(r.sigma_s_central),
        o(r.sigma_n_central)
    );
    if let Some(m) = &r.members {
        print_members(m, r.rmse_post_trusted);
    }
    println!(
        "  fusion max rel err {:.2e}   wall {:.2}s",
        r.fusion_max_rel_err, r.wall_s
    );
}

/// The member check's line (issue 29): who is suspect, with its evidence, or that none is.
fn print_members(m: &coolgp_sim::fleet::MembersReport, rmse_trusted: f64) {
    let count = |s: &str| m.members.iter().filter(|a| a.standing == s).count();
    let unverifiable = count("unverifiable");
    if m.suspects.is_empty() {
        println!(
            "  member check ({} checks)  no suspect   unverifiable {unverifiable}   unchecked {}",
            m.checks,
            count("unchecked")
        );
        return;
    }
    let who: Vec<String> = m
        .members
        .iter()
        .filter(|a| a.standing == "suspect")
        .map(|a| {
            format!(
                "{} ({:.0}x the median, z2 {:.1}, marked at its block {})",
                a.id,
                a.ratio,
                a.z2,
                a.first_suspect_block.map_or("-".into(), |b| b.to_string())
            )
        })
        .collect();
    println!(
        "  member check ({} checks)  suspect: {}   {}   post-fusion RMSE without them {rmse_trusted:.4}   unverifiable {unverifiable}",
        m.checks,
        who.join(", "),
        if m.contained { "contained" } else { "flagged only (--suspects flag)" }
    );
}
