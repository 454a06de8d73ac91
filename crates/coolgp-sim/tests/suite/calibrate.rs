//! The calibration of the fleet query (issue 19, docs/LOCAL.md §10): the variance scale,
//! measured on the agents' leave-one-out answers at their own memory rows, repairs the
//! coverage of a fleet whose residual kernel is over- or underconfident on rows it never saw.

use std::sync::Arc;

use coolgp::faer::Mat;
use coolgp::local::{combine, FleetRule, LocalAnswer, LocalConfig, LocalFit};
use coolgp::rng::Rng;
use coolgp::{Agent, AgentConfig, View, Vocabulary};
use coolgp_sim::fleet::{calibrate, RuleCalibration};

/// Station i's place and a row's target there on day t: a station offset, a fast anomaly
/// shared by every station on the same day, and noise of standard deviation 0.3.
fn target(s: f64, t: f64, rng: &mut Rng) -> f64 {
    0.3 * s + (9.0 * t).sin() + 0.3 * rng.normal()
}

fn place(i: usize) -> f64 {
    -2.0 + 0.8 * i as f64
}

/// Six stations, each an agent with a memory of its 60 rows on random days in [−3, 3].
fn stations(rng: &mut Rng) -> Vec<Agent> {
    let vocab = Arc::new(Vocabulary::default_design(8, 2, 3).expect("design"));
    (0..6u64)
        .map(|i| {
            let cfg = AgentConfig {
                local: LocalConfig {
                    capacity: 60,
                    fit: LocalFit::Fleet,
                    ..LocalConfig::default()
                },
                seed: i,
                ..AgentConfig::default()
            };
            let mut a = Agent::new(i, vocab.clone(), 2, cfg).expect("agent");
            for _ in 0..6 {
                let x = Mat::from_fn(10, 2, |_, j| match j {
                    0 => place(i as usize),
                    _ => -3.0 + 6.0 * rng.uniform(),
                });
                let y: Vec<f64> = (0..10).map(|r| target(x[(r, 0)], x[(r, 1)], rng)).collect();
                a.handle_block(x.as_ref(), &y).expect("block");
            }
            a
        })
        .collect()
}

/// Coverage of the 95% intervals of the rBCM answers as `cal` turns them (weighted and
/// scaled), on 600 fresh rows at the stations' places.
fn coverage(agents: &[Agent], cal: &RuleCalibration, rng: &mut Rng) -> f64 {
    let n = 600;
    let x = Mat::from_fn(n, 2, |r, j| match j {
        0 => place(r % 6),
        _ => -3.0 + 6.0 * rng.uniform(),
    });
    let y: Vec<f64> = (0..n).map(|r| target(x[(r, 0)], x[(r, 1)], rng)).collect();
    let each: Vec<Vec<LocalAnswer>> = agents
        .iter()
        .map(|a| a.local_answers(x.as_ref(), View::Fused).expect("answers"))
        .collect();
    let inside = (0..n)
        .filter(|&r| {
            let at: Vec<LocalAnswer> = each.iter().map(|v| v[r]).collect();
            let c = cal.apply(&combine(FleetRule::Rbcm, &at).expect("answers"));
            (y[r] - c.mean()).abs() <= 1.96 * c.var_y().sqrt()
        })
        .count();
    inside as f64 / n as f64
}

/// The residual kernel `[ln σ_r, ln σ_rn, ln ℓ_place, ln ℓ_day]` on every agent.
fn set_kernel(agents: &mut [Agent], noise_sd: f64) {
    let p = [0.0, noise_sd.ln(), 1.0f64.ln(), 0.15f64.ln()];
    for a in agents.iter_mut() {
        a.set_local_kernel_params(&p).expect("kernel");
    }
}

#[test]
fn the_scale_repairs_an_over_or_underconfident_fleet() {
    // Reference: docs/LOCAL.md §10. The data's noise is 0.3; a kernel that claims 0.06 is
    // overconfident, one that claims 0.6 underconfident. The scale is measured on memory rows
    // and checked on fresh rows.
    for (noise_sd, over) in [(0.06, true), (0.6, false)] {
        let mut rng = Rng::new(17, 3);
        let mut agents = stations(&mut rng);
        set_kernel(&mut agents, noise_sd);
        let cal = calibrate(
            &agents,
            &[FleetRule::Rbcm, FleetRule::MinVariance],
            &[],
            None,
        );
        assert_eq!(cal.rows, 6 * 60, "512 rows asked, 360 held");
        let rbcm = cal.of(FleetRule::Rbcm);
        let s = rbcm.scale;
        let unit = RuleCalibration {
            weight: 1.0,
            scale: 1.0,
            ..rbcm
        };
        let raw = coverage(&agents, &unit, &mut Rng::new(5, 9));
        let fixed = coverage(&agents, &rbcm, &mut Rng::new(5, 9));
        eprintln!(
            "noise {noise_sd}: weight {:.3}, scale {s:.3}, coverage {raw:.3} -> {fixed:.3}",
            rbcm.weight
        );
        // The scale is of the weighted answers (the weight moves a residual variance towards
        // its prior, so it widens the intervals of an overconfident fleet by itself).
        if over {
            assert!(s > 1.0 && raw < 0.85, "scale {s}, raw coverage {raw}");
        } else {
            assert!(s < 0.7 && raw > 0.99, "scale {s}, raw coverage {raw}");
        }
        assert!(
            (0.90..=0.98).contains(&fixed),
            "noise {noise_sd}: scale {s}, coverage {raw} -> {fixed}"
        );
        assert_eq!(cal.scale(FleetRule::Bcm), 1.0, "a rule not calibrated");
    }
}

#[test]
fn agents_without_memory_give_no_rows_and_scale_one() {
    let mut rng = Rng::new(2, 3);
    let vocab = Arc::new(Vocabulary::default_design(8, 2, 3).expect("design"));
    let mut a = Agent::new(0, vocab, 2, AgentConfig::default()).expect("agent");
    let x = Mat::from_fn(20, 2, |_, _| rng.normal());
    a.handle_block(x.as_ref(), &[0.5; 20]).expect("block");
    let cal = calibrate(&[a], &[FleetRule::Rbcm], &[], None);
    assert_eq!((cal.rows, cal.scale(FleetRule::Rbcm)), (0, 1.0));
}

#[test]
fn the_safety_net_keeps_a_good_correction_and_never_leaves_the_answers_worse_than_global() {
    // Reference: docs/LOCAL.md §12. A kernel near the truth: the weight stays near 1 and the
    // gain is kept. A near-interpolating kernel (σ_rn = 0.001 against σ_r = 2, places
    // unrelated): its leave-one-out answers are poor, the weight falls, and the answers stay
    // no worse than the global model's on fresh rows (beyond 2%).
    let mut rng = Rng::new(23, 3);
    let mut agents = stations(&mut rng);
    let n = 600;
    let mut fresh = Rng::new(6, 9);
    let x = Mat::from_fn(n, 2, |r, j| match j {
        0 => place(r % 6),
        _ => -3.0 + 6.0 * fresh.uniform(),
    });
    let y: Vec<f64> = (0..n)
        .map(|r| target(x[(r, 0)], x[(r, 1)], &mut fresh))
        .collect();
    let rmse = |agents: &[Agent], cal: &RuleCalibration| {
        let each: Vec<Vec<LocalAnswer>> = agents
            .iter()
            .map(|a| a.local_answers(x.as_ref(), View::Fused).expect("answers"))
            .collect();
        let (mut fleet, mut global) = (0.0, 0.0);
        for r in 0..n {
            let at: Vec<LocalAnswer> = each.iter().map(|v| v[r]).collect();
            let c = cal.apply(&combine(FleetRule::Rbcm, &at).expect("answers"));
            fleet += (y[r] - c.mean()).powi(2);
            global += (y[r] - c.global_mean).powi(2);
        }
        ((fleet / n as f64).sqrt(), (global / n as f64).sqrt())
    };
    for (p, good) in [
        ([0.0, 0.3f64.ln(), 1.0f64.ln(), 0.15f64.ln()], true),
        (
            [2.0f64.ln(), 0.001f64.ln(), 0.001f64.ln(), 0.5f64.ln()],
            false,
        ),
    ] {
        for a in agents.iter_mut() {
            a.set_local_kernel_params(&p).expect("kernel");
        }
        let cal = calibrate(&agents, &[FleetRule::Rbcm], &[], None).of(FleetRule::Rbcm);
        let unit = RuleCalibration { weight: 1.0, ..cal };
        let (raw, global) = rmse(&agents, &unit);
        let (net, _) = rmse(&agents, &cal);
        eprintln!(
            "good {good}: weight {:.3}, RMSE global {global:.3}, fleet {raw:.3} -> {net:.3}",
            cal.weight
        );
        if good {
            assert!(raw < 0.8 * global, "the kernel helps: {raw} vs {global}");
            assert!(cal.weight > 0.9, "weight {}", cal.weight);
            assert!(net <= raw * 1.01, "the gain is kept: {net} vs {raw}");
        } else {
            assert!(cal.weight < 0.5, "weight {}", cal.weight);
        }
        assert!(net <= 1.02 * global, "{net} vs global {global}");
    }
}
