//! Issue 19's prediction target measured back to back: `Agent::predict` of an agent without
//! memory against `Agent::predict_local` of the same agent with B = 500 rows (m = 100,
//! d ∈ {2, 6}, q ∈ {1, 100} points), alternating 300 times; prints the min and median of
//! each and their ratios (the min is the least disturbed by other work on a shared machine).
//!
//! `cargo run -p coolgp --release --example local_predict_ab`

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use coolgp::{Agent, AgentConfig, LocalConfig, View, Vocabulary};

#[path = "../benches/common/mod.rs"]
mod common;
use common::block;

/// Alternations per case.
const RUNS: usize = 300;

/// An agent with memory `capacity` after 800 rows in blocks of 100.
fn agent(vocab: &Arc<Vocabulary>, d: usize, capacity: usize) -> Agent {
    let local = LocalConfig {
        capacity,
        ..LocalConfig::default()
    };
    let config = AgentConfig {
        local,
        ..AgentConfig::default()
    };
    let mut a = Agent::new(0, vocab.clone(), d, config).expect("agent");
    for b in 0..8 {
        let (x, y) = block(d, 100, b);
        a.handle_block(x.as_ref(), &y).expect("block");
    }
    a
}

/// Seconds of one call of `f`.
fn timed(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

fn main() {
    for d in [2usize, 6] {
        let vocab = Arc::new(Vocabulary::default_design(100, d, 7).expect("vocabulary"));
        let (without, with) = (agent(&vocab, d, 0), agent(&vocab, d, 500));
        for q in [1usize, 100] {
            let (x, _) = block(d, q, 2000);
            // The first answer factors the memory; it is not timed.
            let _ = with.predict_local(x.as_ref(), View::Fused);
            let (mut t0, mut t1) = (Vec::new(), Vec::new());
            for _ in 0..RUNS {
                t0.push(timed(|| {
                    drop(black_box(without.predict(x.as_ref(), View::Fused)))
                }));
                t1.push(timed(|| {
                    drop(black_box(with.predict_local(x.as_ref(), View::Fused)))
                }));
            }
            t0.sort_by(f64::total_cmp);
            t1.sort_by(f64::total_cmp);
            let (m0, m1) = (t0[RUNS / 2], t1[RUNS / 2]);
            println!(
                "d = {d}, q = {q:3}: B0 min {:7.1} µs, median {:7.1} µs | B500 min {:7.1} µs, \
                 median {:7.1} µs | ratio min {:.2}, median {:.2}",
                t0[0] * 1e6,
                m0 * 1e6,
                t1[0] * 1e6,
                m1 * 1e6,
                t1[0] / t0[0],
                m1 / m0
            );
        }
    }
}
