//! The ψ̄2 hot loop in terms per second next to faer's GEMM rate, in the same run.
//!
//! - `psi2_terms/d{d'}_m{m}`: `psi::accumulate_block` on n = 200 points; criterion's
//!   `elem/s` is **terms/s**: one term is one (point, j, k ≥ j) entry of ψ̄2 with its d'-sum
//!   and exponential, `n·m(m+1)/2` per call.
//! - `window_rows/d8_m100`: `learn::window::window_loglik_grad` on a 320-point stream window
//!   whose newest 20 rows' ψ̄ are held (the fleet projection's re-evaluation after a fusion,
//!   issue 18); `elem/s` is **re-evaluated rows/s** (ψ̄ of the 300 older rows and the
//!   gradient's contractions of all 320).
//! - `faer_gemm/{200,1000}`: `C = A B`, f64, `Par::Seq`; `elem/s` is **flop/s** (`2 s³` per
//!   call).
//!
//! `cargo bench -p coolgp --bench psi_throughput` (the example `psi_throughput` prints the
//! same figures as a table with best and median).

use std::hint::black_box;

mod common;

use coolgp::faer::Mat;
use coolgp::learn::elbo::BlockPsi;
use coolgp::learn::window::window_loglik_grad;
use coolgp::model::psi::{accumulate_block, PsiWorkspace, UnitStats};
use coolgp::model::{Excess, NaturalParams};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn bench_terms(c: &mut Criterion) {
    let n = 200;
    let mut g = c.benchmark_group("psi2_terms");
    for &dz in &[2usize, 6, 8] {
        for &m in &[100usize, 200] {
            let (vocab, proj, x, y) = common::psi_case(m, dz, n);
            let mut acc = UnitStats::zeros(m);
            let mut ws = PsiWorkspace::default();
            g.throughput(Throughput::Elements((n * m * (m + 1) / 2) as u64));
            g.bench_function(BenchmarkId::from_parameter(format!("d{dz}_m{m}")), |b| {
                b.iter(|| {
                    accumulate_block(&vocab, &proj, black_box(x.as_ref()), &y, &mut acc, &mut ws)
                })
            });
        }
    }
    g.finish();
}

fn bench_window(c: &mut Criterion) {
    let (m, dz, n, tail) = (100, 8, 320, 20);
    let (vocab, proj, x, y) = common::psi_case(m, dz, n);
    let mut stats = UnitStats::zeros(m);
    BlockPsi::compute(&vocab, &proj, x.as_ref()).accumulate_into(&y, &mut stats);
    let e = Excess::from_unit_stats(&stats, 1.0, 0.5);
    let post = NaturalParams::from_excess(&vocab, &e)
        .posterior(&vocab)
        .expect("posterior");
    let mut bp = BlockPsi::compute(&vocab, &proj, x.as_ref().subrows(n - tail, tail));
    let mut g = c.benchmark_group("window_rows");
    g.throughput(Throughput::Elements((n - tail) as u64));
    g.bench_function(BenchmarkId::from_parameter(format!("d{dz}_m{m}")), |b| {
        b.iter(|| {
            window_loglik_grad(
                &vocab,
                &proj,
                &post,
                black_box(x.as_ref()),
                &y,
                &mut bp,
                tail,
            )
        })
    });
    g.finish();
}

fn bench_gemm(c: &mut Criterion) {
    let mut g = c.benchmark_group("faer_gemm");
    for &s in &[200usize, 1000] {
        let (a, b) = common::gemm_case(s);
        let mut out = Mat::<f64>::zeros(s, s);
        g.throughput(Throughput::Elements(2 * (s * s * s) as u64));
        g.bench_function(BenchmarkId::from_parameter(s), |bn| {
            bn.iter(|| common::gemm(&mut out, black_box(a.as_ref()), black_box(b.as_ref())))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config(1500);
    targets = bench_terms, bench_window, bench_gemm
}
criterion_main!(benches);
