//! Throughput of the ψ̄2 hot loop in *terms per second* next to faer's GEMM rate, in one run.
//!
//! One term is one (point, j, k ≥ j) entry of ψ̄2 with its d'-sum and exponential, so a block
//! of n points costs `n·m(m+1)/2` terms. The loop is timed through
//! `psi::accumulate_block` (which also computes the point moments and ψ̄1, O(n m d'), and folds
//! the triangle into the accumulator once per block: < 2% of the time at n = 200).
//! GEMM is `C = A B`, f64, `Par::Seq`, counted as `2·m·n·k` flops.
//!
//! Single-threaded. Run with
//! `cargo run -p coolgp --release --example psi_throughput`
//! (optional arguments: samples per case, default 9; seconds per sample, default 0.25).

use std::hint::black_box;
use std::time::{Duration, Instant};

use coolgp::faer::Mat;
use coolgp::learn::elbo::{block_loglik_grad_with, BlockPsi};
use coolgp::model::psi::{accumulate_block, PsiWorkspace, UnitStats};
use coolgp::model::{Excess, NaturalParams};

#[path = "../benches/common/mod.rs"]
mod common;

/// Times `f` (which does `work` units) `samples` times, each sample repeated until it lasts
/// about `target`; returns (best, median) units per second.
fn rate(samples: usize, target: Duration, work: f64, mut f: impl FnMut()) -> (f64, f64) {
    // Warm up and calibrate the repetitions per sample.
    let t = Instant::now();
    f();
    let one = t.elapsed().as_secs_f64().max(1e-9);
    let reps = ((target.as_secs_f64() / one).ceil() as usize).max(1);
    let mut rates: Vec<f64> = (0..samples)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                f();
            }
            work * reps as f64 / t.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    (rates[rates.len() - 1], rates[rates.len() / 2])
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let samples: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(9);
    let secs: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0.25);
    let target = Duration::from_secs_f64(secs);
    let n = 200;
    println!("psi2 hot loop via accumulate_block, n = {n} points per call, one thread");
    println!("| d' = d | m | terms per call | best terms/s | median terms/s | ns/term (best) |");
    println!("|---|---|---|---|---|---|");
    for &dz in &[2usize, 6, 8] {
        for &m in &[100usize, 200] {
            let (vocab, proj, x, y) = common::psi_case(m, dz, n);
            let mut acc = UnitStats::zeros(m);
            let mut ws = PsiWorkspace::default();
            let terms = (n * m * (m + 1) / 2) as f64;
            let (best, med) = rate(samples, target, terms, || {
                accumulate_block(&vocab, &proj, x.as_ref(), &y, &mut acc, &mut ws);
            });
            black_box(&acc);
            println!(
                "| {dz} | {m} | {terms:.0} | {:.3e} | {:.3e} | {:.2} |",
                best,
                med,
                1e9 / best
            );
        }
    }
    println!();
    println!(
        "gradient of a block whose ψ̄ is given (block_loglik_grad_with: the G∘ψ̄2 contractions)"
    );
    println!("| d' = d | m | points per call | best points/s | median points/s |");
    println!("|---|---|---|---|---|");
    for &dz in &[2usize, 8] {
        for &m in &[100usize, 200] {
            let (vocab, proj, x, y) = common::psi_case(m, dz, n);
            let bp = BlockPsi::compute(&vocab, &proj, x.as_ref());
            let mut stats = UnitStats::zeros(m);
            bp.accumulate_into(&y, &mut stats);
            let e = Excess::from_unit_stats(&stats, 1.0, 0.5);
            let post = NaturalParams::from_excess(&vocab, &e)
                .posterior(&vocab)
                .expect("posterior");
            let (best, med) = rate(samples, target, n as f64, || {
                black_box(block_loglik_grad_with(
                    &vocab,
                    &proj,
                    &post,
                    x.as_ref(),
                    &y,
                    &bp,
                ));
            });
            println!("| {dz} | {m} | {n} | {best:.3e} | {med:.3e} |");
        }
    }
    println!();
    println!("faer GEMM C = A B, f64, Par::Seq");
    println!("| m = n = k | best GFLOP/s | median GFLOP/s |");
    println!("|---|---|---|");
    for &s in &[200usize, 1000] {
        let (a, b) = common::gemm_case(s);
        let mut c = Mat::<f64>::zeros(s, s);
        let flops = 2.0 * (s * s * s) as f64;
        let (best, med) = rate(samples, target, flops, || {
            common::gemm(&mut c, a.as_ref(), b.as_ref());
        });
        black_box(&c);
        println!("| {s} | {:.1} | {:.1} |", best / 1e9, med / 1e9);
    }
}
