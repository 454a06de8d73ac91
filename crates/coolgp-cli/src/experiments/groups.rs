//! The synthetic experiment's fleet part (spec §14 with groups): 2 phenomena × 10 agents,
//! each phenomenon a projection group, fusing q(u) across the groups or only within each,
//! against the per-agent mode and one q(W) for the whole fleet, over relatedness and seeds.
//! This measures the cross-domain gain the paper's Fig. 1 claims rather than assuming it.

use std::path::Path;

use anyhow::Result;

use super::{sim, write_table, ExperimentArgs};
use crate::args::SimArgs;
use crate::plot::{self, Series};
use coolgp_config::AgentArgs;

/// `(label, --projection, --projection-group, --fuse-groups)`.
const VARIANTS: [(&str, &str, &str, &str); 4] = [
    ("per-agent", "per-agent", "none", "across"),
    ("fleet-one-group", "fleet", "none", "across"),
    ("fleet-groups-across", "fleet", "phenomenon", "across"),
    ("fleet-groups-within", "fleet", "phenomenon", "within"),
];

/// Runs every variant for each relatedness and seed; writes `fleet-groups.csv` (one row per
/// run) and, over several relatedness values, `fleet-groups.png/.svg` (mean post-fusion RMSE
/// against relatedness), and prints
/// the means and the across / within verdict per relatedness.
pub(super) fn run(a: &ExperimentArgs, dir: &Path) -> Result<()> {
    let relatedness: &[f64] = if a.quick { &[0.9] } else { &[0.7, 0.9, 0.99] };
    let seeds: Vec<u64> = (0..if a.quick { 1 } else { 3 })
        .map(|k| a.seed + k)
        .collect();
    println!("  fleet of 2 phenomena × 10 agents: RMSE pre → post (mean over seeds {seeds:?})");
    let mut rows = Vec::new();
    // Mean post-fusion RMSE per variant, one point per relatedness (the plot's series).
    let mut series: Vec<Series> = VARIANTS
        .iter()
        .map(|v| Series {
            label: v.0.into(),
            points: Vec::new(),
        })
        .collect();
    for &rel in relatedness {
        for (v, (label, projection, group, fuse)) in VARIANTS.into_iter().enumerate() {
            let (mut pre, mut post) = (0.0, 0.0);
            for &seed in &seeds {
                let args = SimArgs {
                    dataset: Some("synthetic".into()),
                    agents: Some(20),
                    agent: AgentArgs {
                        projection: Some(projection.into()),
                        projection_group: Some(group.into()),
                        fuse_groups: Some(fuse.into()),
                        ..AgentArgs::default()
                    },
                    relatedness: Some(rel),
                    seed: Some(seed),
                    max_train: a.quick.then_some(4_000),
                    max_test: Some(if a.quick { 1_000 } else { 4_000 }),
                    no_baselines: true,
                    ..SimArgs::default()
                };
                let r = sim(&args, true, label)?;
                pre += r.rmse_pre;
                post += r.rmse_post;
                rows.push(format!(
                    "{rel},{label},{seed},{},{},{},{},{}",
                    r.rmse_pre,
                    r.rmse_post,
                    super::o(r.rmse_central),
                    r.nlpd_post,
                    r.coverage95_post
                ));
            }
            let k = seeds.len() as f64;
            println!(
                "    relatedness {rel:<4}  {label:<20} pre {:.4}  post {:.4}",
                pre / k,
                post / k
            );
            series[v].points.push((rel, post / k));
        }
        // The cross-domain claim (the paper's Fig. 1): is q(u) fused across the groups at
        // least as good as q(u) fused within each?
        let (across, within) = (series[2].points.last(), series[3].points.last());
        if let (Some(&(_, x)), Some(&(_, w))) = (across, within) {
            let verdict = if x <= w { "across wins" } else { "within wins" };
            println!(
                "    relatedness {rel:<4}  across / within {:+.2}% ({verdict})",
                100.0 * (x / w - 1.0)
            );
        }
    }
    // One relatedness (--quick) has no axis to draw along.
    if relatedness.len() > 1 {
        plot::lines(
            dir,
            "fleet-groups",
            "2 phenomena × 10 agents: post-fusion RMSE (mean over seeds)",
            "relatedness ρ of the phenomena's projections",
            "post-fusion RMSE",
            &series,
        )?;
    }
    write_table(
        dir,
        "fleet-groups.csv",
        "relatedness,variant,seed,rmse_pre,rmse_post,rmse_central,nlpd_post,coverage95_post",
        &rows,
    )
}
