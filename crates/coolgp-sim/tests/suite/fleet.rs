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
