//! The fleet projection's stream memory (`SiteMemory::Stream`): a site is the sum of every own
//! block's term, against the recent memory's window (spec §14; docs/HISTORY.md).

use crate::common;

use crate::fleet_sites::{
    cfg, feed, fleet_sums, fleet_with, ps_cfg, view_of, vocab, worst_site_err, D,
};
use common::{lossy_round, site_flat};
use coolgp::faer::Mat;
use coolgp::learn::SiteMemory;
use coolgp::protocol::memory;
use coolgp::rng::Rng;
use coolgp::{Agent, AgentConfig, Error, Topology, View};

/// The recent memory with its default window (the default memory is the stream memory).
fn recent_cfg() -> AgentConfig {
    let mut c = cfg();
    c.site.memory = SiteMemory::Recent;
    c.site.window_points = coolgp::learn::site::RECENT_WINDOW_POINTS;
    c
}

fn stream_cfg(window: usize) -> AgentConfig {
    let mut c = cfg();
    c.site.memory = SiteMemory::Stream;
    c.site.window_points = window;
    c
}

#[test]
fn a_stream_memory_site_counts_every_own_point_once() {
    // Each block's term enters at its own points (c = 1) and stays, frozen, when it leaves the
    // window, so the site's point statistic N is the agent's points exactly, whatever the
    // window. The recent memory's is a damped average of N/n-scaled windows, which lags.
    let v = vocab();
    for window in [0, 25, 80] {
        let mut a = Agent::new(0, v.clone(), D, stream_cfg(window)).expect("agent");
        let mut rng = Rng::new(3, 3);
        for k in 1..=12 {
            feed(&mut a, &mut rng, 1);
            let n = a.site().hyper.n;
            let want = 10.0 * k as f64;
            assert!(
                (n - want).abs() < 1e-9 * want,
                "window {window}, block {k}: N = {n}, want {want}"
            );
        }
    }
    let mut r = Agent::new(0, v, D, recent_cfg()).expect("agent");
    feed(&mut r, &mut Rng::new(3, 3), 12);
    let n = r.site().hyper.n;
    assert!((n - 120.0).abs() > 1.0, "recent memory: N = {n}");
}

#[test]
fn a_stream_memory_snapshot_restores_bit_identically_and_refuses_bad_terms() {
    let v = vocab();
    let mut a = Agent::new(0, v.clone(), D, stream_cfg(25)).expect("agent");
    feed(&mut a, &mut Rng::new(4, 4), 6);
    let snap = a.snapshot();
    assert!(snap.window_term.1 > 0.0 && snap.site_frozen.hyper.n > 0.0);
    let mut back = Agent::restore(v.clone(), snap.clone()).expect("restore");
    assert_eq!(back.snapshot(), snap);
    let mut orig = a.clone();
    for b in [&mut orig, &mut back] {
        feed(b, &mut Rng::new(9, 9), 3);
    }
    assert_eq!(orig.snapshot(), back.snapshot());
    let mut bad = snap.clone();
    bad.site_frozen.prec[0] = -1.0;
    assert!(matches!(
        Agent::restore(v.clone(), bad),
        Err(Error::InvalidConfig(_))
    ));
    let mut bad = snap;
    bad.window_term.1 = f64::NAN;
    assert!(matches!(
        Agent::restore(v, bad),
        Err(Error::InvalidConfig(_))
    ));
}

#[test]
fn under_a_drifting_stream_the_stream_memory_keeps_what_the_recent_memory_forgets() {
    // One learner, y = sin(x0 − x1/2), blocks in time order with x0's centre drifting from −2
    // to 2: the recent memory fits the last few blocks' region as if it were all the data;
    // the stream memory keeps every block's term. Scored over the whole range.
    let v = vocab();
    let drift = |cfg: AgentConfig| {
        let mut a = Agent::new(0, v.clone(), D, cfg).expect("agent");
        let mut rng = Rng::new(12, 12);
        let blocks = 60;
        for b in 0..blocks {
            let centre = -2.0 + 4.0 * b as f64 / (blocks - 1) as f64;
            let x = Mat::from_fn(10, D, |_, j| {
                if j == 0 {
                    centre + 0.3 * rng.normal()
                } else {
                    rng.normal()
                }
            });
            let y: Vec<f64> = (0..10)
                .map(|r| (x[(r, 0)] - 0.5 * x[(r, 1)]).sin() + 0.1 * rng.normal())
                .collect();
            a.handle_block(x.as_ref(), &y).expect("block");
        }
        let mut t = Rng::new(13, 13);
        let x = Mat::from_fn(400, D, |_, j| {
            if j == 0 {
                -2.0 + 4.0 * t.uniform()
            } else {
                t.normal()
            }
        });
        let y: Vec<f64> = (0..400)
            .map(|r| (x[(r, 0)] - 0.5 * x[(r, 1)]).sin())
            .collect();
        a.predict(x.as_ref(), View::Own).expect("predict").rmse(&y)
    };
    let mut recent = recent_cfg();
    recent.site.damping = 0.05;
    let mut stream = recent.clone();
    stream.site.memory = SiteMemory::Stream;
    let (r, s) = (drift(recent), drift(stream));
    assert!(s < 0.9 * r, "stream memory {s} vs recent {r}");
}

#[test]
fn stream_memory_site_sums_are_exact_over_a_tree_and_over_lossy_push_sum() {
    // The stream memory changes what an own site holds, not how sites fuse: the fused view is
    // still the prior plus Σ_i s_i, over the tree rule and over push-sum with 30% loss (with
    // blocks, so frozen terms and window terms, changing mid-fusion).
    let v = vocab();
    let topo = Topology::random_tree(10, 3);
    let mut agents = fleet_with(&topo, &v, &stream_cfg(25));
    let mut rng = Rng::new(3, 5);
    for (i, a) in agents.iter_mut().enumerate() {
        feed(a, &mut rng, 2 + i % 4);
    }
    for _ in 0..topo.diameter().unwrap_or(1) {
        memory::round(&mut agents).expect("valid");
    }
    let (total, _) = fleet_sums(&agents, v.m());
    let want = site_flat(&view_of(total, &v));
    let worst = worst_site_err(&agents, &want);
    assert!(worst <= 1e-12, "tree: site sums off by {worst:e}");
    let n = 10;
    let ps = AgentConfig {
        site: stream_cfg(25).site,
        ..ps_cfg(n)
    };
    let ring = Topology::ring(n);
    let mut agents = fleet_with(&ring, &v, &ps);
    let mut data = Rng::new(21, 21);
    for (i, a) in agents.iter_mut().enumerate() {
        feed(a, &mut data, 1 + i % 3);
    }
    let mut loss = Rng::new(22, 22);
    for _ in 0..10 {
        lossy_round(&mut agents, &mut loss, 0.3);
    }
    feed(&mut agents[2], &mut data, 3);
    for _ in 0..600 {
        lossy_round(&mut agents, &mut loss, 0.3);
    }
    let (total, _) = fleet_sums(&agents, v.m());
    let worst = worst_site_err(&agents, &site_flat(&view_of(total, &v)));
    assert!(worst <= 1e-9, "push-sum: site sums off by {worst:e}");
}
