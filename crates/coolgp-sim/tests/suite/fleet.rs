//! The fleet's phases driven one by one (build, stream with fusions, evaluate) are `run`, and a
//! fleet without test sets (the Python `FleetRegressor`'s) streams, fuses and hands back its
//! agents. Reference: spec §7 (tree fusion is exact), §13 (the stream protocol).

use coolgp::View;
use coolgp_data::{generate, SyntheticConfig};
use coolgp_sim::{run, Batch, Fleet, SimConfig, TestSet, Workload};

/// One phenomenon in `d = 2`: 60 batches of 10 points and 300 test points.
fn workload() -> Workload {
    let syn = generate(&SyntheticConfig {
        d: 2,
        d_latent: 2,
        phenomena: 1,
        batches_per_phenomenon: 60,
        batch: 10,
        test_points: 300,
        noise: 0.1,
        features: 500,
        relatedness: 1.0,
        seed: 11,
    })
    .expect("valid synthetic configuration");
    let batch = |(_, x, y)| Batch { group: None, x, y };
    let test = |(_, x, y)| TestSet::new(x, y);
    Workload {
        d: 2,
        batches: syn.train_batches.into_iter().map(batch).collect(),
        tests: syn.test.into_iter().map(test).collect(),
        groups: 0,
        test_by_group: false,
        projection_groups: Vec::new(),
        y_scale: 1.0,
    }
}

#[test]
fn the_phases_one_by_one_are_the_run() {
    let w = workload();
    let phased_config = |projection| SimConfig {
        agents: 6,
        inducing: 15,
        fuse_every: 20,
        projection,
        ..SimConfig::default()
    };
    for cfg in [
        coolgp::ProjectionMode::PerAgent,
        coolgp::ProjectionMode::Fleet,
    ]
    .map(phased_config)
    {
        let whole = run(&cfg, &w, &|_, _| {}).expect("run");
        let mut fleet = Fleet::build(&cfg, &w).expect("build");
        assert_eq!(fleet.progress(), (0, 60));
        fleet.stream(&|_, _| {}).expect("stream");
        assert_eq!(fleet.progress(), (60, 60));
        let phased = fleet.evaluate().expect("evaluate");
        // Same seed, same numbers, bit for bit (spec §9: determinism).
        assert_eq!(phased.rmse_pre.to_bits(), whole.rmse_pre.to_bits());
        assert_eq!(phased.rmse_post.to_bits(), whole.rmse_post.to_bits());
        assert_eq!(phased.rmse_central, whole.rmse_central);
        assert_eq!(phased.rmse_ddtc, whole.rmse_ddtc);
        assert_eq!(phased.nlpd_post.to_bits(), whole.nlpd_post.to_bits());
        assert_eq!(phased.network, whole.network);
        assert_eq!(phased.curves.len(), whole.curves.len());
        assert!(phased.fusion_max_rel_err < 1e-9, "tree fusion is exact");
    }
}

#[test]
fn a_fleet_without_test_sets_streams_and_fuses_but_is_not_evaluated() {
    let mut w = workload();
    w.tests.clear();
    let cfg = SimConfig {
        agents: 5,
        inducing: 15,
        fuse_every: 25,
        central: false,
        baselines: false,
        ..SimConfig::default()
    };
    assert!(run(&cfg, &w, &|_, _| {}).is_err(), "a run is evaluated");
    let mut fleet = Fleet::build(&cfg, &w).expect("build");
    fleet.stream(&|_, _| {}).expect("stream");
    let agents = fleet.into_agents();
    assert_eq!(agents.len(), 5);
    assert_eq!(agents.iter().map(|a| a.n_own()).sum::<usize>(), 600);
    // After the last fusion on a tree every agent holds T_g = T0 + Σ E_i (spec §7).
    let fused = agents[0].natural_params(View::Fused);
    for a in &agents {
        assert_eq!(a.fleet_points(), 600.0);
        let other = a.natural_params(View::Fused);
        let gap = (0..15)
            .map(|j| (other.t2[j] - fused.t2[j]).abs())
            .fold(0.0, f64::max);
        assert!(gap < 1e-9 * (1.0 + fused.t2.iter().map(|v| v.abs()).sum::<f64>()));
    }
}

#[test]
fn routing_groups_send_each_batch_to_its_agent() {
    // One routing group per agent: the dispatch is a fixed split (FleetRegressor's rows).
    let mut w = workload();
    for (k, b) in w.batches.iter_mut().enumerate() {
        b.group = Some(k % 4);
    }
    w.groups = 4;
    let cfg = SimConfig {
        agents: 4,
        inducing: 15,
        central: false,
        baselines: false,
        shuffle: false,
        ..SimConfig::default()
    };
    let mut fleet = Fleet::build(&cfg, &w).expect("build");
    fleet.stream(&|_, _| {}).expect("stream");
    for a in fleet.agents() {
        assert_eq!(a.n_own(), 150, "15 batches of 10 points each");
        assert_eq!(a.blocks(), 15);
    }
}

/// A field with fine structure no m = 6 global model holds, `y = sin(6x) + x/2` on x ∈ [−2, 2],
/// in 4 regions of x (routing group = region), 800 training and 400 test rows whose groups
/// are known.
fn local_field() -> Workload {
    let f = |x: f64| (6.0 * x).sin() + 0.5 * x;
    let at = |i: usize, n: usize| -2.0 + 4.0 * ((i * 7919) % n) as f64 / n as f64;
    let region = |x: f64| (((x + 2.0) / 1.0) as usize).min(3);
    let xs: Vec<f64> = (0..800).map(|i| at(i, 800)).collect();
    // Each batch holds rows of one region.
    let mut by_region: Vec<Batch> = Vec::new();
    for g in 0..4 {
        let rows: Vec<f64> = xs.iter().copied().filter(|&x| region(x) == g).collect();
        for c in rows.chunks(10) {
            by_region.push(Batch {
                group: Some(g),
                x: coolgp::faer::Mat::from_fn(c.len(), 1, |i, _| c[i]),
                y: c.iter().map(|&x| f(x)).collect(),
            });
        }
    }
    let xt: Vec<f64> = (0..400).map(|i| at(i, 397) + 0.003).collect();
    Workload {
        d: 1,
        batches: by_region,
        tests: vec![TestSet {
            x: coolgp::faer::Mat::from_fn(400, 1, |i, _| xt[i]),
            y: xt.iter().map(|&x| f(x)).collect(),
            groups: xt.iter().map(|&x| Some(region(x))).collect(),
        }],
        groups: 4,
        test_by_group: false,
        projection_groups: Vec::new(),
        y_scale: 1.0,
    }
}

#[test]
fn local_memories_answer_the_fine_structure_the_global_model_misses() {
    // Reference: issue 19 (the fleet query and the oracle agent of a region).
    let w = local_field();
    let cfg = |capacity| SimConfig {
        agents: 4,
        inducing: 6,
        projection: coolgp::ProjectionMode::Fleet,
        baselines: false,
        local: coolgp::local::LocalConfig {
            capacity,
            ..coolgp::local::LocalConfig::default()
        },
        ..SimConfig::default()
    };
    let off = run(&cfg(0), &w, &|_, _| {}).expect("run");
    let on = run(&cfg(100), &w, &|_, _| {}).expect("run");
    // The memory leaves the global model as it is.
    assert_eq!(off.rmse_post.to_bits(), on.rmse_post.to_bits());
    assert_eq!((off.local_points_mean, on.local_points_mean), (0.0, 100.0));
    assert!(on.local_bytes_per_agent >= 8.0 * 100.0 * 100.0);
    for rule in ["min-variance", "bcm", "rbcm"] {
        let (a, b) = (off.fleet_query_rules[rule], on.fleet_query_rules[rule]);
        assert!(b.rmse < 0.5 * a.rmse, "{rule}: {} → {}", a.rmse, b.rmse);
        assert!(
            b.nlpd.is_finite() && (0.0..=1.0).contains(&b.coverage95),
            "{rule}"
        );
    }
    let oracle = on.rmse_oracle_local.expect("every test row has a region");
    assert!(
        oracle < 0.5 * off.rmse_oracle_local.unwrap_or(f64::NAN),
        "{oracle}"
    );
    assert_eq!(on.fleet_query_by_group.len(), 4);
    assert!(on.fleet_query_by_group.iter().all(Option::is_some));
}
