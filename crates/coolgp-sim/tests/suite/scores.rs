//! The density scores of a run (issue 8, Reporting): `nlpd_central` and `coverage95_post`.

use coolgp_data::{generate, SyntheticConfig};
use coolgp_sim::{run, Batch, Report, SimConfig, TestSet, Workload};

/// A well-specified stream: one phenomenon drawn from the unit GP (random Fourier features)
/// with Gaussian noise of standard deviation `noise`, `d = d' = 2`.
pub(crate) fn gp_stream(noise: f64, seed: u64) -> Workload {
    let syn = generate(&SyntheticConfig {
        d: 2,
        d_latent: 2,
        phenomena: 1,
        batches_per_phenomenon: 80,
        batch: 20,
        test_points: 1000,
        noise,
        features: 500,
        relatedness: 1.0,
        seed,
    })
    .expect("valid synthetic configuration");
    let set =
        |v: Vec<(usize, coolgp::faer::Mat<f64>, Vec<f64>)>| v.into_iter().map(|(_, x, y)| (x, y));
    Workload {
        d: 2,
        batches: set(syn.train_batches)
            .map(|(x, y)| Batch { group: None, x, y })
            .collect(),
        tests: set(syn.test).map(|(x, y)| TestSet::new(x, y)).collect(),
        groups: 0,
        test_by_group: false,
        projection_groups: Vec::new(),
        y_scale: 1.0,
    }
}

fn sim(cfg: &SimConfig, w: &Workload) -> Report {
    run(cfg, w, &|_, _| {}).expect("simulation runs")
}

#[test]
fn coverage_is_the_95_percent_interval_of_y_on_a_well_specified_stream() {
    // The unit GP (σ_s = 1) with noise 0.5: the model's initial σ_s, σ_n are the truth. The
    // noise dominates var_f once the fleet has 1,600 points: an interval of one standard
    // deviation would cover about 68%, one of var_f alone far less.
    let w = gp_stream(0.5, 3);
    for projection in [
        coolgp::ProjectionMode::PerAgent,
        coolgp::ProjectionMode::Fleet,
    ] {
        let cfg = SimConfig {
            agents: 8,
            inducing: 20,
            fuse_every: 20,
            baselines: false,
            projection,
            ..SimConfig::default()
        };
        let r = sim(&cfg, &w);
        assert!(
            (0.92..=0.98).contains(&r.coverage95_post),
            "{projection:?}: coverage {} (NLPD {})",
            r.coverage95_post,
            r.nlpd_post
        );
        let c = r.nlpd_central.expect("a central learner");
        assert!(
            c.is_finite() && r.nlpd_post.is_finite(),
            "{c} {}",
            r.nlpd_post
        );
        // A calibrated Gaussian with σ ≈ 0.5: NLPD ≈ ½ ln(2π e σ²) ≈ 0.73; far worse if not.
        assert!(
            r.nlpd_post < 0.85 && c < 0.85,
            "post {} central {c}",
            r.nlpd_post
        );
    }
}

#[test]
fn without_a_central_learner_there_is_no_central_nlpd() {
    let w = gp_stream(0.1, 4);
    let cfg = SimConfig {
        agents: 3,
        inducing: 10,
        fuse_every: 40,
        baselines: false,
        central: false,
        ..SimConfig::default()
    };
    let r = sim(&cfg, &w);
    assert_eq!(r.nlpd_central, None);
    assert!(
        (0.0..=1.0).contains(&r.coverage95_post),
        "{}",
        r.coverage95_post
    );
}
