//! The Rust side of the Python overhead benchmark (BENCHMARKS.md §11): the same calls as
//! `bench/bench_calls.py` makes through `coolgp.Agent`, on the same data.
//!
//! `cargo run -p coolgp-py --release --example bench_calls [-- REPEATS]`
//!
//! Setup: m = 100 inducing inputs, d = d' = 8, frozen mode, learning on; the agent first
//! absorbs 5 blocks of 1,000 rows. Timed: `Agent::predict` of 10,000 points (fused view) and
//! `Agent::handle_block` of a 1,000-row block (absorb + one Adam step). Prints min and median
//! over REPEATS (default 15) calls, after one warm-up call.

use std::sync::Arc;
use std::time::Instant;

use coolgp::faer::Mat;
use coolgp::{Agent, AgentConfig, View, Vocabulary};

/// The benchmark's data: `x[i][j] = 2 sin(0.37 (i·d + j) + s)`, `y = sin(x_0) + x_{d−1}/2`.
fn data(n: usize, d: usize, s: f64) -> (Mat<f64>, Vec<f64>) {
    let x = Mat::from_fn(n, d, |i, j| 2.0 * (0.37 * (i * d + j) as f64 + s).sin());
    let y = (0..n)
        .map(|i| x[(i, 0)].sin() + 0.5 * x[(i, d - 1)])
        .collect();
    (x, y)
}

fn stats(mut t: Vec<f64>) -> (f64, f64) {
    t.sort_by(f64::total_cmp);
    (t[0], t[t.len() / 2])
}

fn main() -> Result<(), coolgp::Error> {
    let repeats: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(15);
    let (m, d) = (100, 8);
    let vocab = Arc::new(Vocabulary::default_design(m, d, 0)?);
    let mut agent = Agent::new(1, vocab, d, AgentConfig::default())?;
    for b in 0..5 {
        let (x, y) = data(1000, d, b as f64);
        agent.handle_block(x.as_ref(), &y)?;
    }
    let (xt, _) = data(10_000, d, 0.5);
    let mut pred = Vec::new();
    for r in 0..=repeats {
        let t = Instant::now();
        let p = agent.predict(xt.as_ref(), View::Fused)?;
        let s = t.elapsed().as_secs_f64();
        assert_eq!(p.mean.len(), 10_000);
        if r > 0 {
            pred.push(s);
        }
    }
    let mut obs = Vec::new();
    for r in 0..=repeats {
        let (x, y) = data(1000, d, 10.0 + r as f64);
        let t = Instant::now();
        agent.handle_block(x.as_ref(), &y)?;
        let s = t.elapsed().as_secs_f64();
        if r > 0 {
            obs.push(s);
        }
    }
    let (pmin, pmed) = stats(pred);
    let (omin, omed) = stats(obs);
    println!(
        "rust   predict 10000 x 8: min {:.2} ms, median {:.2} ms",
        pmin * 1e3,
        pmed * 1e3
    );
    println!(
        "rust   observe  1000 x 8: min {:.2} ms, median {:.2} ms",
        omin * 1e3,
        omed * 1e3
    );
    Ok(())
}
