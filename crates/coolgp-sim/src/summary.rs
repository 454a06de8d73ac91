//! The fields that `coolgp simulate --out` (and `coolgp.simulate` in Python) write into
//! summary.json beside the simulator's report: what was run, under the flags' own names.

use serde_json::{json, Value};

use crate::args::SimArgs;
use crate::config::SimConfig;

/// The run's settings as a JSON object: `dataset`, `mode`, `projection`, `fuse_every`,
/// `stream_order`, `likelihood` when robust, and for the fleet projection `site` (its update's settings and the
/// projection groups), so that two runs that differ in them are told apart (the report's
/// fingerprint covers the vocabulary, not the update).
pub fn run_fields(args: &SimArgs, cfg: &SimConfig, projection_groups: &[String]) -> Value {
    let dataset = args
        .data
        .as_ref()
        .map(|p| p.display().to_string())
        .or(args.dataset.clone())
        .unwrap_or("synthetic".into());
    let mut v = json!({
        "dataset": dataset,
        "mode": cfg.mode.name(),
        "projection": cfg.projection.name(),
        "fuse_every": cfg.fuse_every,
        "stream_order": if cfg.shuffle { "random" } else { "file" },
    });
    if let coolgp::learn::Likelihood::Robust { c } = cfg.likelihood {
        // Only when robust: a Gaussian run's summary is as before.
        v["likelihood"] = json!({ "name": "robust", "c": c });
    }
    if cfg.projection == coolgp::ProjectionMode::Fleet {
        v["site"] = json!({
            "damping": cfg.site.damping,
            "fleet_damping": cfg.site.fleet_damping,
            "window_points": cfg.site.window_points,
            "prior_points": cfg.site.prior_points,
            "scale_prior_points": cfg.site.scale_prior_points,
            "memory": cfg.site.memory.name(),
            "site_every": cfg.site_every,
            "fuse_groups": cfg.fuse_groups,
            "fuse_warmup": cfg.fuse_warmup,
            "projection_groups": projection_groups,
        });
    }
    v
}
