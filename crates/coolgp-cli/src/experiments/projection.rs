//! `coolgp experiment projection`: spec §13's comparison of the projection modes on one
//! phenomenon — per-agent q(W), the shared q(W) (federated averaging weighted by points), the
//! spec's two proxies (plain average, product of the agents' q(W)), the fleet's q(W) (spec §14:
//! natural-parameter sites) and the central learner (Adam on q(W) for the first four, the
//! fleet's site update for `fleet`: column `central_update`).

use std::path::Path;

use anyhow::Result;

use super::{sim, write_table, ExperimentArgs};
use crate::args::SimArgs;
use crate::plot::{self, Series};
use coolgp_config::AgentArgs;

/// The modes compared, as `--projection` values.
const MODES: [&str; 5] = [
    "per-agent",
    "shared",
    "shared-plain-proxy",
    "shared-product-proxy",
    "fleet",
];

/// Spec §13's configuration: 100 agents on 50,000 flights, m = 50, batches of 20, fusion every
/// 10% of the stream; seeds `seed, seed+1, seed+2` (one seed and 10,000 flights with --quick).
pub fn run(a: &ExperimentArgs, dir: &Path) -> Result<()> {
    let seeds: Vec<u64> = if a.quick {
        vec![a.seed]
    } else {
        (a.seed..a.seed + 3).collect()
    };
    let mut rows = Vec::new();
    let mut curves: Vec<Series> = Vec::new();
    let mut central_curve = None;
    let mut fleet_central = None;
    for &seed in &seeds {
        let mut central = None;
        for mode in MODES {
            let fleet = mode == "fleet";
            let args = SimArgs {
                dataset: Some("airline".into()),
                agents: Some(100),
                inducing: Some(50),
                batch: Some(20),
                max_train: Some(if a.quick { 10_000 } else { 50_000 }),
                agent: AgentArgs {
                    projection: Some(mode.into()),
                    ..AgentArgs::default()
                },
                seed: Some(seed),
                no_baselines: true,
                no_central: central.is_some() && !fleet,
                ..SimArgs::default()
            };
            let r = sim(&args, a.quiet, &format!("{mode}, seed {seed}"))?;
            let own = (
                r.rmse_central.unwrap_or(f64::NAN),
                r.nlpd_central.unwrap_or(f64::NAN),
            );
            let (c, nc) = if fleet {
                own
            } else {
                *central.get_or_insert(own)
            };
            let update = if fleet { "sites" } else { "adam" };
            println!(
                "  seed {seed}  {mode:<21} pre {:.3}  post {:.3}  central ({update}) {c:.3}  NLPD post {:.4} central {nc:.4}  95% coverage {:.3}",
                r.rmse_pre, r.rmse_post, r.nlpd_post, r.coverage95_post
            );
            rows.push(format!(
                "{seed},{mode},{},{},{c},{},{nc},{},{update}",
                r.rmse_pre, r.rmse_post, r.nlpd_post, r.coverage95_post
            ));
            if seed == seeds[0] {
                let pts = |f: &dyn Fn(&coolgp_sim::CurvePoint) -> Option<f64>| {
                    r.curves
                        .iter()
                        .map(|p| (p.points as f64, f(p).unwrap_or(f64::NAN)))
                        .collect::<Vec<_>>()
                };
                curves.push(Series {
                    label: format!("{mode} (post-fusion)"),
                    points: pts(&|p| Some(p.rmse_post)),
                });
                if central_curve.is_none() {
                    central_curve = Some(Series {
                        label: "central learner (Adam)".into(),
                        points: pts(&|p| p.rmse_central),
                    });
                }
                if fleet {
                    fleet_central = Some(Series {
                        label: "central learner (site update)".into(),
                        points: pts(&|p| p.rmse_central),
                    });
                }
            }
        }
    }
    curves.extend(central_curve);
    curves.extend(fleet_central);
    plot::lines(
        dir,
        "projection",
        &format!(
            "projection modes (airline, 100 agents, m = 50, seed {})",
            seeds[0]
        ),
        "training points streamed",
        "mean RMSE over agents (minutes)",
        &curves,
    )?;
    write_table(
        dir,
        "projection.csv",
        "seed,projection,rmse_pre,rmse_post,rmse_central,nlpd_post,nlpd_central,coverage95_post,central_update",
        &rows,
    )
}
