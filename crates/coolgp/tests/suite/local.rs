//! The local memory and residual GP (issue 19): the policies, the input checks, the agent
//! with the memory off, and the fleet rule against a brute-force combination.

use std::sync::Arc;

use coolgp::faer::Mat;
use coolgp::local::memory::Memory;
use coolgp::rng::Rng;
use coolgp::{
    combine, Agent, AgentConfig, FleetRule, LocalAnswer, LocalConfig, MemoryPolicy, ResidualKind,
    View, Vocabulary,
};

fn column(v: &[f64]) -> Mat<f64> {
    Mat::from_fn(v.len(), 1, |i, _| v[i])
}

/// Offers `stream` to a memory of `capacity` in blocks of the given sizes; checks the size
/// bound after each block.
fn fill(
    policy: MemoryPolicy,
    capacity: usize,
    seed: u64,
    stream: &[f64],
    blocks: &[usize],
) -> Memory {
    let mut mem = Memory::new(policy, capacity, 1, seed);
    let mut at = 0;
    for &b in blocks.iter().cycle() {
        if at >= stream.len() {
            break;
        }
        let b = b.min(stream.len() - at);
        let x = column(&stream[at..at + b]);
        let y: Vec<f64> = stream[at..at + b].iter().map(|v| 2.0 * v).collect();
        mem.offer(x.as_ref(), &y);
        assert!(
            mem.len() <= capacity,
            "{policy:?}: {} rows > {capacity}",
            mem.len()
        );
        assert_eq!(mem.len(), capacity.min(at + b));
        for (x, y) in mem.x().iter().zip(mem.y()) {
            assert_eq!(*y, 2.0 * x, "a row's target travels with it");
        }
        at += b;
    }
    assert_eq!(mem.seen(), stream.len() as u64);
    mem
}

#[test]
fn recent_keeps_the_newest_rows_in_order() {
    let stream: Vec<f64> = (0..100).map(f64::from).collect();
    let mem = fill(MemoryPolicy::Recent, 10, 0, &stream, &[3, 7, 1, 25, 14, 50]);
    assert_eq!(mem.x(), &stream[90..]);
    let small = fill(MemoryPolicy::Recent, 10, 0, &stream[..6], &[4]);
    assert_eq!(small.x(), &stream[..6]);
}

#[test]
fn reservoir_is_a_deterministic_uniform_sample_of_the_stream() {
    // Algorithm R: each of N rows is kept with probability B/N, whatever the block sizes.
    let (n, cap, runs) = (40usize, 10usize, 800u64);
    let stream: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let mut counts = vec![0usize; n];
    for seed in 0..runs {
        let mem = fill(MemoryPolicy::Reservoir, cap, seed, &stream, &[3, 1, 9]);
        let mut seen = mem.x().to_vec();
        seen.sort_by(f64::total_cmp);
        seen.dedup();
        assert_eq!(seen.len(), cap, "distinct rows of the stream");
        for v in mem.x() {
            counts[*v as usize] += 1;
        }
        if seed == 0 {
            let again = fill(MemoryPolicy::Reservoir, cap, 0, &stream, &[3, 1, 9]);
            assert_eq!(again, mem, "same seed, same memory");
        }
    }
    let p = cap as f64 / n as f64;
    let (mean, sd) = (runs as f64 * p, (runs as f64 * p * (1.0 - p)).sqrt());
    for (i, &c) in counts.iter().enumerate() {
        assert!(
            (c as f64 - mean).abs() < 5.0 * sd,
            "row {i} kept {c} times of {runs}, expected {mean} ± {sd:.1}"
        );
    }
}

#[test]
fn spread_keeps_the_memory_spread_over_the_inputs() {
    // 30 rows over [0, 30), then 300 rows crowded in [0, 1): recent forgets the range, spread
    // keeps it (a crowded new row replaces one of the closest pair).
    let mut rng = Rng::new(3, 3);
    let mut stream: Vec<f64> = (0..30).map(f64::from).collect();
    stream.extend((0..300).map(|_| rng.uniform()));
    let spread = fill(MemoryPolicy::Spread, 10, 0, &stream, &[7, 30]);
    let recent = fill(MemoryPolicy::Recent, 10, 0, &stream, &[7, 30]);
    let range = |m: &Memory| {
        let max = m.x().iter().copied().fold(f64::MIN, f64::max);
        let min = m.x().iter().copied().fold(f64::MAX, f64::min);
        max - min
    };
    assert!(range(&recent) < 1.0);
    assert!(range(&spread) > 25.0, "spread range {}", range(&spread));
    // Its nearest-neighbour bookkeeping matches a rebuild from the rows.
    let rebuilt = Memory::from_rows(
        MemoryPolicy::Spread,
        10,
        1,
        0,
        (spread.x().to_vec(), spread.y().to_vec(), spread.seen()),
    );
    assert_eq!(rebuilt, spread);
}

#[test]
fn spread_measures_distance_in_the_kernels_metric() {
    // Column 0 as above; column 1 is loud noise on a scale the kernel ignores (scale 1e-6):
    // in raw distance the noise decides, in the kernel's metric column 0 does.
    let mut rng = Rng::new(4, 3);
    let mut c0: Vec<f64> = (0..30).map(f64::from).collect();
    c0.extend((0..300).map(|_| rng.uniform()));
    let c1: Vec<f64> = (0..c0.len()).map(|_| 1e3 * rng.normal()).collect();
    let run = |scale: Option<Vec<f64>>| {
        let mut mem = Memory::new(MemoryPolicy::Spread, 10, 2, 0);
        if let Some(s) = scale {
            mem.set_scale(s);
        }
        for start in (0..c0.len()).step_by(30) {
            let end = (start + 30).min(c0.len());
            let x = Mat::from_fn(end - start, 2, |i, j| {
                if j == 0 {
                    c0[start + i]
                } else {
                    c1[start + i]
                }
            });
            let y = vec![0.0; end - start];
            mem.offer(x.as_ref(), &y);
        }
        let col0: Vec<f64> = (0..mem.len()).map(|i| mem.row(i)[0]).collect();
        col0.iter().copied().fold(f64::MIN, f64::max)
            - col0.iter().copied().fold(f64::MAX, f64::min)
    };
    assert!(run(Some(vec![1.0, 1e-6])) > 25.0);
    assert!(run(None) < 25.0);
}

/// An agent on 2-d inputs (m = 12) with this local memory and seed.
pub(crate) fn agent(local: LocalConfig, seed: u64) -> Agent {
    let vocab = Arc::new(Vocabulary::default_design(12, 2, 7).expect("design"));
    let cfg = AgentConfig {
        local,
        seed,
        ..AgentConfig::default()
    };
    Agent::new(0, vocab, 2, cfg).expect("agent")
}

/// `n` rows of a smooth 2-d function with a little noise.
pub(crate) fn data(n: usize, rng: &mut Rng) -> (Mat<f64>, Vec<f64>) {
    let x = Mat::from_fn(n, 2, |_, _| 1.5 * rng.normal());
    let y = (0..n)
        .map(|i| (3.0 * x[(i, 0)]).sin() + 0.5 * x[(i, 1)] + 0.05 * rng.normal())
        .collect();
    (x, y)
}

#[test]
fn nan_rows_never_enter_the_memory() {
    let local = LocalConfig {
        capacity: 20,
        ..LocalConfig::default()
    };
    let mut a = agent(local, 1);
    let mut rng = Rng::new(1, 1);
    let (x, y) = data(8, &mut rng);
    a.handle_block(x.as_ref(), &y).expect("block");
    assert_eq!(a.local_points(), 8);
    let mut bad = x.clone();
    bad[(3, 1)] = f64::NAN;
    assert!(a.handle_block(bad.as_ref(), &y).is_err());
    let mut bad_y = y.clone();
    bad_y[2] = f64::INFINITY;
    assert!(a.handle_block(x.as_ref(), &bad_y).is_err());
    assert_eq!(a.local_points(), 8, "a failing block changes nothing");
    assert!(a.local().memory().x().iter().all(|v| v.is_finite()));
}

#[test]
fn with_the_memory_off_the_answers_are_predicts_bit_for_bit() {
    let mut a = agent(LocalConfig::default(), 0);
    let mut rng = Rng::new(2, 2);
    let (x, y) = data(30, &mut rng);
    a.handle_block(x.as_ref(), &y).expect("block");
    assert_eq!(a.local_points(), 0);
    let (xq, _) = data(9, &mut rng);
    for view in [View::Own, View::Fused] {
        let p = a.predict(xq.as_ref(), view).expect("predict");
        assert_eq!(a.predict_local(xq.as_ref(), view).expect("local"), p);
        let answers = a.local_answers(xq.as_ref(), view).expect("answers");
        for (i, ans) in answers.iter().enumerate() {
            assert_eq!(ans.mean().to_bits(), p.mean[i].to_bits());
            assert_eq!(ans.var_f().to_bits(), p.var_f[i].to_bits());
            assert_eq!(ans.var_y().to_bits(), p.var_y[i].to_bits());
            assert_eq!(
                (ans.residual_mean, ans.residual_var, ans.residual_prior),
                (0.0, 0.0, 0.0)
            );
        }
    }
}

#[test]
fn each_policy_bounds_the_agents_memory_and_the_correction_helps_at_its_rows() {
    for policy in MemoryPolicy::ALL {
        for kernel in ResidualKind::ALL {
            let local = LocalConfig {
                capacity: 40,
                policy,
                kernel,
                ..LocalConfig::default()
            };
            let mut a = agent(local, 5);
            let mut rng = Rng::new(5, 5);
            for b in 0..12 {
                let (x, y) = data(7 + b, &mut rng);
                a.handle_block(x.as_ref(), &y).expect("block");
                assert!(a.local_points() <= 40);
            }
            assert_eq!(a.local_points(), 40);
            let xs = a.local().rows();
            let ys = a.local().memory().y().to_vec();
            let global = a
                .predict(xs.as_ref(), View::Fused)
                .expect("predict")
                .rmse(&ys);
            let local = a.predict_local(xs.as_ref(), View::Fused).expect("local");
            assert!(local
                .var_f
                .iter()
                .chain(&local.var_y)
                .all(|v| v.is_finite() && *v >= 0.0));
            assert!(
                local.rmse(&ys) < global,
                "{policy:?} {kernel:?}: local {} vs global {global}",
                local.rmse(&ys)
            );
        }
    }
}

/// The fleet rules written out from their definitions (LOCAL_API.md), one agent at a time.
fn brute(rule: FleetRule, a: &[LocalAnswer]) -> LocalAnswer {
    if rule == FleetRule::MinVariance {
        let mut best = 0;
        for i in 0..a.len() {
            if a[i].var_y() < a[best].var_y() {
                best = i;
            }
        }
        return a[best];
    }
    if rule == FleetRule::MostInformed {
        let info = |x: &LocalAnswer| {
            if x.residual_prior > 0.0 {
                0.5 * (x.residual_prior / x.residual_var).ln()
            } else {
                0.0
            }
        };
        let mut best = 0;
        for i in 0..a.len() {
            if info(&a[i]) > info(&a[best]) {
                best = i;
            }
        }
        return a[best];
    }
    let k = a.len() as f64;
    let mut out = LocalAnswer {
        global_mean: a.iter().map(|x| x.global_mean).sum::<f64>() / k,
        global_var: a.iter().map(|x| x.global_var).sum::<f64>() / k,
        residual_mean: 0.0,
        residual_var: 0.0,
        residual_prior: 0.0,
        noise_var: a.iter().map(|x| x.noise_var).sum::<f64>() / k,
    };
    let with: Vec<&LocalAnswer> = a.iter().filter(|x| x.residual_prior > 0.0).collect();
    if with.is_empty() {
        return out;
    }
    let m = with.len() as f64;
    let v0: f64 = with.iter().map(|x| x.residual_prior).sum::<f64>() / m;
    let beta = |x: &LocalAnswer| match rule {
        FleetRule::Bcm => 1.0,
        _ => 0.5 * (x.residual_prior / x.residual_var).ln(),
    };
    let sum_beta: f64 = with.iter().map(|x| beta(x)).sum();
    let mut prec: f64 = with.iter().map(|x| beta(x) / x.residual_var).sum::<f64>();
    prec += (1.0 - sum_beta) / v0;
    let v0_max = with.iter().map(|x| x.residual_prior).fold(0.0, f64::max);
    let var = 1.0 / prec.max(1.0 / v0_max);
    out.residual_var = var;
    out.residual_mean = var
        * with
            .iter()
            .map(|x| beta(x) * x.residual_mean / x.residual_var)
            .sum::<f64>();
    out.residual_prior = v0;
    out
}

#[test]
fn the_fleet_rules_equal_a_brute_force_combination() {
    assert!(combine(FleetRule::Bcm, &[]).is_none());
    let mut rng = Rng::new(8, 8);
    for trial in 0..200 {
        let k = 1 + rng.below(6);
        let answers: Vec<LocalAnswer> = (0..k)
            .map(|_| {
                let prior = if rng.uniform() < 0.2 {
                    0.0
                } else {
                    0.1 + rng.uniform()
                };
                LocalAnswer {
                    global_mean: rng.normal(),
                    global_var: rng.uniform(),
                    residual_mean: if prior > 0.0 { rng.normal() } else { 0.0 },
                    residual_var: prior * (0.05 + 0.95 * rng.uniform()),
                    residual_prior: prior,
                    noise_var: 0.01 + rng.uniform(),
                }
            })
            .collect();
        for rule in FleetRule::ALL {
            assert_eq!(FleetRule::from_name(rule.name()), Some(rule));
            let got = combine(rule, &answers).expect("non-empty");
            let want = brute(rule, &answers);
            for (g, w) in [
                (got.global_mean, want.global_mean),
                (got.global_var, want.global_var),
                (got.residual_mean, want.residual_mean),
                (got.residual_var, want.residual_var),
                (got.residual_prior, want.residual_prior),
                (got.noise_var, want.noise_var),
            ] {
                assert!(
                    (g - w).abs() <= 1e-12 * w.abs().max(1.0),
                    "trial {trial} {rule:?}: {g} vs {w}"
                );
            }
        }
    }
}

#[test]
fn a_snapshot_with_memory_restores_an_agent_that_answers_the_same() {
    for policy in MemoryPolicy::ALL {
        for kernel in ResidualKind::ALL {
            let local = LocalConfig {
                capacity: 25,
                policy,
                kernel,
                ..LocalConfig::default()
            };
            let mut a = agent(local, 9);
            let mut rng = Rng::new(9, 9);
            for b in 0..6 {
                let (x, y) = data(5 + 3 * b, &mut rng);
                a.handle_block(x.as_ref(), &y).expect("block");
            }
            let snap = a.snapshot();
            assert!(snap.local.is_some());
            let mut r = Agent::restore(a.vocabulary().clone(), snap.clone()).expect("restore");
            assert_eq!(
                r.snapshot(),
                snap,
                "{policy:?} {kernel:?}: snapshot round trip"
            );
            let close = |a: &Agent, r: &Agent, xq: &Mat<f64>| {
                let (pa, pr) = (
                    a.local_answers(xq.as_ref(), View::Fused).expect("a"),
                    r.local_answers(xq.as_ref(), View::Fused).expect("r"),
                );
                for (u, v) in pa.iter().zip(&pr) {
                    for (g, w) in [
                        (u.mean(), v.mean()),
                        (u.var_f(), v.var_f()),
                        (u.var_y(), v.var_y()),
                    ] {
                        assert!(
                            (g - w).abs() <= 1e-12 * w.abs().max(1.0),
                            "{policy:?} {kernel:?}: {g} vs {w}"
                        );
                    }
                }
            };
            let (xq, _) = data(7, &mut rng);
            close(&a, &r, &xq);
            // Both go on with the same blocks: same memory, same answers.
            for b in 0..4 {
                let (x, y) = data(9 + b, &mut rng);
                a.handle_block(x.as_ref(), &y).expect("block");
                r.handle_block(x.as_ref(), &y).expect("block");
            }
            assert_eq!(a.local().memory(), r.local().memory());
            close(&a, &r, &xq);
        }
    }
}

#[test]
fn a_snapshot_with_a_memory_row_of_the_wrong_width_is_refused() {
    let local = LocalConfig {
        capacity: 10,
        ..LocalConfig::default()
    };
    let mut a = agent(local, 2);
    let mut rng = Rng::new(2, 4);
    let (x, y) = data(6, &mut rng);
    a.handle_block(x.as_ref(), &y).expect("block");
    let snap = a.snapshot();
    let mut wide = snap.clone();
    if let Some(l) = wide.local.as_mut() {
        l.x = Mat::from_fn(6, 3, |i, j| i as f64 + j as f64);
    }
    let e = Agent::restore(a.vocabulary().clone(), wide).expect_err("wrong width");
    assert_eq!(
        e.to_string(),
        "dimension mismatch in snapshot local memory row width (d): expected 2, found 3"
    );
    let mut nan = snap.clone();
    if let Some(l) = nan.local.as_mut() {
        l.y[1] = f64::NAN;
    }
    assert!(Agent::restore(a.vocabulary().clone(), nan).is_err());
    let mut off = snap;
    off.config.local.capacity = 0;
    let e = Agent::restore(a.vocabulary().clone(), off).expect_err("memory off");
    assert!(e.to_string().contains("local memory is off"), "{e}");
}

#[test]
fn the_kernel_is_refit_when_the_memory_doubles_and_then_every_capacity_rows() {
    let local = LocalConfig {
        capacity: 100,
        ..LocalConfig::default()
    };
    let mut a = agent(local, 4);
    let mut rng = Rng::new(4, 4);
    let mut fits = Vec::new();
    let initial = a.local().kernel().params().to_vec();
    for step in 1..=330 {
        let (x, y) = data(1, &mut rng);
        a.handle_block(x.as_ref(), &y).expect("block");
        let (last, since) = a.local().fit_state();
        if since == 0 {
            fits.push((step, last));
        }
    }
    assert_eq!(
        fits,
        [
            (16, 16),
            (32, 32),
            (64, 64),
            (100, 100),
            (200, 100),
            (300, 100)
        ]
    );
    assert_ne!(
        a.local().kernel().params(),
        &initial[..],
        "the fit moved the kernel"
    );
}

#[test]
fn the_learned_correction_helps_near_the_memory() {
    // A field with structure finer than 12 inducing inputs can hold: held-out points from the
    // region of the memory are predicted better with the correction, and no worse far away.
    let field = |a: f64, b: f64| (4.0 * a).sin() * (3.0 * b).cos() + 0.3 * a;
    let local = LocalConfig {
        capacity: 300,
        ..LocalConfig::default()
    };
    let mut a = agent(local, 6);
    let mut rng = Rng::new(6, 6);
    let sample = |n: usize, rng: &mut Rng, scale: f64| {
        let x = Mat::from_fn(n, 2, |_, _| scale * rng.normal());
        let y: Vec<f64> = (0..n)
            .map(|i| field(x[(i, 0)], x[(i, 1)]) + 0.05 * rng.normal())
            .collect();
        (x, y)
    };
    for _ in 0..30 {
        let (x, y) = sample(20, &mut rng, 1.0);
        a.handle_block(x.as_ref(), &y).expect("block");
    }
    let (xq, yq) = sample(200, &mut rng, 1.0);
    let global = a.predict(xq.as_ref(), View::Fused).expect("global");
    let local = a.predict_local(xq.as_ref(), View::Fused).expect("local");
    let (g, l) = (global.rmse(&yq), local.rmse(&yq));
    assert!(l < 0.5 * g, "near: local {l} vs global {g}");
    let nlpd = (global.nlpd(&yq), local.nlpd(&yq));
    assert!(nlpd.1 < nlpd.0, "near nlpd: {nlpd:?}");
    let inside = (0..yq.len())
        .filter(|&i| (yq[i] - local.mean[i]).abs() < 1.96 * local.var_y[i].sqrt())
        .count() as f64
        / yq.len() as f64;
    assert!(
        (0.85..=1.0).contains(&inside),
        "coverage of the 95% interval: {inside}"
    );
    // Far away (inputs shifted by 8 in the first column), the correction vanishes.
    let (mut xf, _) = sample(100, &mut rng, 1.0);
    for i in 0..100 {
        xf[(i, 0)] += 8.0;
    }
    let gf = a.predict(xf.as_ref(), View::Fused).expect("global");
    let lf = a.local_answers(xf.as_ref(), View::Fused).expect("local");
    for (i, ans) in lf.iter().enumerate() {
        assert!((ans.mean() - gf.mean[i]).abs() < 1e-6, "far mean");
        assert!(
            ans.residual_var > 0.99 * ans.residual_prior,
            "far residual var"
        );
    }
}

/// An input the memory does not vary in (a station's own coordinates) leaves the likelihood
/// flat in its lengthscale: the fit keeps the start (the global kernel's) there, and moves the
/// varying one.
#[test]
fn a_constant_input_keeps_its_starting_lengthscale() {
    use coolgp::local::fit::fit_learned;
    use coolgp::local::{ResidualKernel, ResidualKind};
    let mut rng = Rng::new(21, 3);
    let n = 60;
    // Column 0 varies (a time), column 1 is one station's coordinate.
    let mut x = Vec::with_capacity(2 * n);
    let mut r = Vec::with_capacity(n);
    for i in 0..n {
        let t = i as f64 / 10.0;
        x.extend([t, 0.7]);
        r.push((2.0 * t).sin() + 0.1 * rng.normal());
    }
    let start = vec![0.0, -1.0, 0.3, -0.4];
    let kernel =
        ResidualKernel::from_params(ResidualKind::Learned, start.clone(), 2, 2).expect("kernel");
    let p = fit_learned(&kernel, &x, &r, false).expect("fit");
    assert_eq!(p[3], start[3], "constant input's log lengthscale");
    assert!(
        (p[2] - start[2]).abs() > 1e-3,
        "the varying input's lengthscale was fitted"
    );
}

/// Under the fleet fit an agent never refits its learned kernel on its own; it offers a
/// sample of its memory (rows and residuals against its global mean) and takes the fleet's
/// parameters. Reference: docs/LOCAL.md §9.
#[test]
fn a_fleet_fitted_agent_offers_a_sample_and_takes_the_fleets_parameters() {
    use coolgp::local::LocalFit;
    let local = LocalConfig {
        capacity: 40,
        fit: LocalFit::Fleet,
        ..LocalConfig::default()
    };
    let mut a = agent(local, 3);
    let start = a.local().kernel().params().to_vec();
    let mut rng = Rng::new(4, 4);
    for _ in 0..6 {
        let (x, y) = data(15, &mut rng);
        a.handle_block(x.as_ref(), &y).expect("block");
    }
    assert_eq!(a.local_points(), 40);
    assert_eq!(a.local().fit_state().0, 0, "no fit of its own");
    assert_eq!(a.local().kernel().params(), &start[..]);
    // The sample: evenly spaced memory rows, residuals against the global (fused) mean.
    let s = a.local_fit_sample(10).expect("sample");
    assert_eq!((s.len(), s.d()), (10, 2));
    let mem = a.local().memory();
    let xs = Mat::from_fn(10, 2, |i, j| s.x()[2 * i + j]);
    let mean = a.predict(xs.as_ref(), View::Fused).expect("predict").mean;
    for (i, m) in mean.iter().enumerate() {
        let row = 4 * i;
        assert_eq!(&s.x()[2 * i..2 * i + 2], mem.row(row));
        let want = mem.y()[row] - m;
        assert!((s.r()[i] - want).abs() < 1e-10, "{} vs {want}", s.r()[i]);
    }
    assert_eq!(a.local_fit_sample(100).expect("sample").len(), 40);
    // Parameters of the wrong length or non-finite are refused; others are taken.
    assert!(a.set_local_kernel_params(&start[1..]).is_err());
    let mut bad = start.clone();
    bad[2] = f64::NAN;
    assert!(a.set_local_kernel_params(&bad).is_err());
    let mut p = start.clone();
    p[2] += 0.5;
    a.set_local_kernel_params(&p).expect("taken");
    assert_eq!(a.local().kernel().params(), &p[..]);
    assert!(a.local().is_factored());
    assert_eq!(a.local().fit_state(), (40, 0));
}

/// The pooled fit of one agent's sample is that agent's own fit, bit for bit (the same Adam
/// steps of `fit_learned`); with several starts it keeps the best likelihood.
#[test]
fn the_pooled_fit_of_one_sample_is_the_plain_fit() {
    use coolgp::local::fit::fit_learned;
    use coolgp::local::pool::fit_pooled;
    use coolgp::local::{FitSample, PoolOptions, ResidualKernel};
    let mut rng = Rng::new(9, 1);
    let n = 50;
    let x: Vec<f64> = (0..2 * n).map(|_| rng.normal()).collect();
    let r: Vec<f64> = (0..n)
        .map(|i| (2.0 * x[2 * i]).sin() + 0.1 * rng.normal())
        .collect();
    let kernel =
        ResidualKernel::from_params(ResidualKind::Learned, vec![0.0, -1.0, 0.3, -0.4], 2, 2)
            .expect("kernel");
    let halves = [
        FitSample::new(2, x[..40].to_vec(), r[..20].to_vec()).expect("sample"),
        FitSample::new(2, x[40..].to_vec(), r[20..].to_vec()).expect("sample"),
    ];
    let opts = PoolOptions::default();
    for first in [true, false] {
        assert_eq!(
            fit_pooled(&kernel, &halves, first, &opts),
            fit_learned(&kernel, &x, &r, first)
        );
    }
    let multi = PoolOptions {
        starts: vec![0.5, 1.0, 4.0],
        rounds: 2,
        ..PoolOptions::default()
    };
    let best = fit_pooled(&kernel, &halves, true, &multi).expect("fit");
    let lml = |p: &[f64]| kernel.log_marginal(p, &x, &r).expect("lml").0;
    let plain = fit_learned(&kernel, &x, &r, true).expect("fit");
    assert!(
        lml(&best) >= lml(&plain),
        "{} < {}",
        lml(&best),
        lml(&plain)
    );
    assert!(FitSample::new(2, x[..3].to_vec(), r[..2].to_vec()).is_err());
}

#[test]
fn an_agents_union_of_its_own_memory_is_its_own_answer() {
    // Reference: docs/LOCAL.md §7 (the union correction with k = 1).
    let local = LocalConfig {
        capacity: 25,
        policy: MemoryPolicy::Reservoir,
        ..LocalConfig::default()
    };
    let mut a = agent(local, 3);
    let mut rng = Rng::new(3, 3);
    for _ in 0..4 {
        let (x, y) = data(15, &mut rng);
        a.handle_block(x.as_ref(), &y).expect("block");
    }
    let mut rows = coolgp::local::UnionRows::new(2);
    rows.push_memory(a.local().memory()).expect("width");
    assert_eq!(rows.len(), 25);
    let (xq, _) = data(7, &mut rng);
    for view in [View::Own, View::Fused] {
        let own = a.local_answers(xq.as_ref(), view).expect("own");
        let union = a.union_answers(&rows, xq.as_ref(), view).expect("union");
        for (u, o) in union.iter().zip(&own) {
            assert!(o.residual_prior > 0.0);
            for (p, q) in [
                (u.mean(), o.mean()),
                (u.var_f(), o.var_f()),
                (u.residual_var, o.residual_var),
                (u.noise_var, o.noise_var),
            ] {
                assert!((p - q).abs() < 1e-10, "{view:?}: {p} vs {q}");
            }
        }
    }
    let wrong = coolgp::local::UnionRows::new(3);
    assert!(a.union_answers(&wrong, xq.as_ref(), View::Fused).is_err());
}
