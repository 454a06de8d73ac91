//! Issue 28's default on a field with no local structure (docs/LOCAL.md §11–§12): the targets
//! are noise around a constant, so the residuals a memory holds are noise; the fleet query,
//! with the fleet's fit on neighbourhood groups, the safety net and the rule chosen on
//! held-out rows, answers as the global model does.

use coolgp::local::{LocalConfig, LocalFit, MemoryPolicy};
use coolgp::rng::Rng;
use coolgp::ProjectionMode;
use coolgp_sim::{run, SimConfig, TestSet};

use super::scores::gp_stream;

#[test]
fn without_local_structure_the_fleet_query_is_the_global_model_within_noise() {
    for seed in [1, 2] {
        // The synthetic stream's inputs, its targets replaced by 1 + N(0, 0.3²).
        let mut w = gp_stream(0.3, seed);
        let mut rng = Rng::new(seed, 40);
        for b in &mut w.batches {
            b.y.iter_mut().for_each(|v| *v = 1.0 + 0.3 * rng.normal());
        }
        w.tests = w
            .tests
            .iter()
            .map(|t| {
                TestSet::new(
                    t.x.clone(),
                    (0..t.y.len()).map(|_| 1.0 + 0.3 * rng.normal()).collect(),
                )
            })
            .collect();
        let cfg = SimConfig {
            agents: 4,
            inducing: 20,
            fuse_every: 40,
            baselines: false,
            central: false,
            seed,
            projection: ProjectionMode::Fleet,
            local: LocalConfig {
                capacity: 200,
                policy: MemoryPolicy::Reservoir,
                fit: LocalFit::Fleet,
                ..LocalConfig::default()
            },
            ..SimConfig::default()
        };
        let r = run(&cfg, &w, &|_, _| {}).expect("runs");
        // The global model on the query's rows is the memory-less run's fleet query (the
        // memory never changes the global model).
        let off = SimConfig {
            local: LocalConfig::default(),
            ..cfg.clone()
        };
        let r0 = run(&off, &w, &|_, _| {}).expect("runs");
        assert!(
            (r.rmse_fleet_query_global - r0.rmse_fleet_query).abs() < 1e-9,
            "{} vs {}",
            r.rmse_fleet_query_global,
            r0.rmse_fleet_query
        );
        eprintln!(
            "seed {seed}: global {:.4}, fleet query {:.4} ({}, weight {:.3}, unweighted {:.4})",
            r.rmse_post,
            r.rmse_fleet_query,
            r.fleet_rule,
            r.fleet_query_weight,
            r.rmse_fleet_query_unweighted
        );
        assert!(r.fleet_rule_auto);
        let ratio = r.rmse_fleet_query / r.rmse_fleet_query_global;
        assert!((ratio - 1.0).abs() < 0.02, "seed {seed}: ratio {ratio}");
        assert!(
            (0.90..=0.98).contains(&r.coverage95_fleet_query),
            "coverage {}",
            r.coverage95_fleet_query
        );
    }
}
