//! Time-ordered streams (beyond the paper): the built-in station data, one agent per station,
//! streamed in random order (the paper's protocol) and in the data file's time order
//! (`--stream-order file`, what nodes fed by live sensors see), with the per-agent projection
//! and the fleet projection under both site memories (`--site-memory recent|stream`).

use std::path::Path;

use anyhow::Result;

use super::{write_table, ExperimentArgs};
use crate::args::SimArgs;
use crate::plot::{self, Series};
use coolgp_config::AgentArgs;

/// `(label, --projection, --site-memory)`.
const VARIANTS: [(&str, &str, Option<&str>); 3] = [
    ("per-agent", "per-agent", None),
    ("fleet-recent", "fleet", Some("recent")),
    ("fleet-stream", "fleet", Some("stream")),
];

/// Runs every dataset × order × variant; writes `order.csv` (one row per run) and, per
/// dataset, `order-DATASET.png/.svg`: the learning curves in time order (post-fusion RMSE of
/// each variant and of its central learner against the batches dispatched).
pub(super) fn run(a: &ExperimentArgs, dir: &Path) -> Result<()> {
    let datasets: &[&str] = if a.quick { &["wind"] } else { &["wind", "air"] };
    println!("  one agent per station; RMSE after the last fusion (central learner in brackets)");
    let mut rows = Vec::new();
    for &dataset in datasets {
        let mut curves: Vec<Series> = Vec::new();
        for order in ["random", "file"] {
            for (label, projection, memory) in VARIANTS {
                let args = SimArgs {
                    dataset: Some(dataset.into()),
                    agent_by: Some("station".into()),
                    inducing: Some(50),
                    batch: Some(10),
                    max_train: a.quick.then_some(20_000),
                    max_test: Some(if a.quick { 2_000 } else { 10_000 }),
                    agent: AgentArgs {
                        projection: Some(projection.into()),
                        site_memory: memory.map(str::to_owned),
                        ..AgentArgs::default()
                    },
                    stream_order: Some(order.into()),
                    seed: Some(a.seed),
                    no_baselines: true,
                    ..SimArgs::default()
                };
                let r = super::sim(&args, a.quiet, &format!("{dataset} {order} {label}"))?;
                let central = if memory.is_some() { "sites" } else { "adam" };
                println!(
                    "    {dataset:<5} {order:<7} {label:<13} post {:.4}  (central, {central}: {})",
                    r.rmse_post,
                    super::o(r.rmse_central)
                );
                rows.push(format!(
                    "{dataset},{order},{label},{},{},{},{central},{},{}",
                    r.rmse_pre,
                    r.rmse_post,
                    super::o(r.rmse_central),
                    r.nlpd_post,
                    r.coverage95_post
                ));
                if order == "file" {
                    let at = |f: &dyn Fn(&coolgp_sim::CurvePoint) -> Option<f64>| {
                        r.curves
                            .iter()
                            .filter_map(|c| f(c).map(|v| (c.batches as f64, v)))
                            .collect::<Vec<_>>()
                    };
                    curves.push(Series {
                        label: format!("{label}, fused"),
                        points: at(&|c| Some(c.rmse_post)),
                    });
                    curves.push(Series {
                        label: format!("{label}: central ({central})"),
                        points: at(&|c| c.rmse_central),
                    });
                }
            }
        }
        plot::lines(
            dir,
            &format!("order-{dataset}"),
            &format!("{dataset}, one agent per station, rows in time order"),
            "batches dispatched",
            "RMSE",
            &curves,
        )?;
    }
    write_table(
        dir,
        "order.csv",
        "dataset,order,variant,rmse_pre,rmse_post,rmse_central,central_update,nlpd_post,coverage95_post",
        &rows,
    )
}
