//! The local memory's cost (issue 19's targets: a block update with B = 500 at most 1.5× the
//! time without memory, a prediction at most 2×), at m = 100, d = d' ∈ {2, 6}:
//!
//! - `local_block/{B0,B500}_{recent,reservoir}_m100_n{20,100}_d{d}`: `Agent::handle_block` on a
//!   block of n rows after the memory is full (800 rows offered before, the last fit at 500:
//!   no refit in this block), from a clone of that agent (clone not timed).
//! - `local_stream/{B0,B500}_{recent,reservoir}_m100_n{20,100}_d{d}`: the amortized block
//!   update: a stream of [`STREAM_ROWS`] rows in blocks of n through a full memory (from the
//!   same agent after 800 rows), residual kernel refits included (recent: one every B rows;
//!   reservoir: about B ln(2800/800) ≈ 630 rows enter, one refit); the time is per stream,
//!   so the ratio to B0 is the per-block ratio.
//! - `local_stream/B500_recent_fleetfit_m100_n{20,100}_d{d}`: the same stream under the
//!   drivers' default fit (`LocalFit::Fleet`: the agent never refits on its block path; the
//!   fleet's pooled fit runs once per fusion, `local_pooled_fit`).
//! - `local_pooled_fit/P512_d{d}`: one warm pooled fit chosen by held-out evidence
//!   (`pool::fit_pooled_selected`, 512 fit rows and 512 validation rows, the default
//!   `PoolOptions`): what the fitter pays once per fusion for the whole fleet.
//! - `local_grouped_fit/G128x16_d{d}`: the fleet fit of issue 28 with the squared
//!   exponential alone (`select::fit_grouped_selected`: five starts, 60 Adam steps each of the
//!   block composite likelihood on 128 groups of 16 rows, scored on 128 held-out groups),
//!   warm, exploring (the default); `…_families`: every family's starts
//!   (`--local-families se,matern32,matern52`; 13 fits: the warm one and four starts of each
//!   of three families, docs/LOCAL.md §12a); what the simulator's fleet pays at a fusion
//!   where it explores, beside `local_pooled_fit`.
//! - `local_refit/B500_m100_n100_d{d}`: the same with a block that triggers the residual
//!   kernel's refit (60 Adam steps on ≤ 256 rows; A is factored at the next answer), once per
//!   B rows entered.
//! - `local_predict/{B0,B500}_m100_q{1,100}_d{d}`: `Agent::predict_local` at q rows (B0 is
//!   `Agent::predict`, bit for bit).
//!
//! `cargo bench -p coolgp --bench local`

use std::hint::black_box;
use std::sync::Arc;

use coolgp::local::pool::fit_pooled_selected;
use coolgp::local::{FitSample, LocalFit, PoolOptions, ResidualKernel, ResidualKind};
use coolgp::{Agent, AgentConfig, LocalConfig, MemoryPolicy, View, Vocabulary};
mod common;

use common::block;
use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BatchSize, BenchmarkGroup, BenchmarkId, Criterion,
};

const M: usize = 100;
const DS: [usize; 2] = [2, 6];
const B: usize = 500;
/// The agents compared: without memory, and with B rows under `recent` and `reservoir`.
const CASES: [(usize, MemoryPolicy); 3] = [
    (0, MemoryPolicy::Recent),
    (B, MemoryPolicy::Recent),
    (B, MemoryPolicy::Reservoir),
];
/// Rows per stream of `local_stream`.
const STREAM_ROWS: usize = 2000;

/// An agent with memory `cap` (0: off) under `policy` after `rows` rows in blocks of `n`.
fn agent(
    vocab: &Arc<Vocabulary>,
    d: usize,
    cap: usize,
    policy: MemoryPolicy,
    n: usize,
    rows: usize,
) -> Agent {
    agent_fitting(vocab, d, (cap, policy, LocalFit::Agent), n, rows)
}

/// [`agent`] with the residual kernel's fit `fit` (`memory = (cap, policy, fit)`).
fn agent_fitting(
    vocab: &Arc<Vocabulary>,
    d: usize,
    memory: (usize, MemoryPolicy, LocalFit),
    n: usize,
    rows: usize,
) -> Agent {
    let (capacity, policy, fit) = memory;
    let config = AgentConfig {
        local: LocalConfig {
            capacity,
            policy,
            fit,
            ..LocalConfig::default()
        },
        ..AgentConfig::default()
    };
    let mut a = Agent::new(0, vocab.clone(), d, config).expect("agent");
    for b in 0..rows / n {
        let (x, y) = block(d, n, b as u64);
        a.handle_block(x.as_ref(), &y).expect("block");
    }
    while a.poll_event().is_some() {}
    a
}

/// Times `run` on a fresh clone of `a` per iteration (the clone not timed).
fn on_clone(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: String,
    a: &Agent,
    run: impl Fn(&mut Agent),
) {
    g.bench_function(BenchmarkId::from_parameter(name), |b| {
        b.iter_batched_ref(|| a.clone(), &run, BatchSize::LargeInput)
    });
}

fn bench_block(c: &mut Criterion) {
    let mut g = c.benchmark_group("local_block");
    for &d in &DS {
        let vocab = Arc::new(Vocabulary::default_design(M, d, 7).expect("vocabulary"));
        for n in [20usize, 100] {
            let (x, y) = block(d, n, 1000);
            for (cap, policy) in CASES {
                // 800 rows: full, the last fit at 500 rows, 300 entered since (recent): a
                // block of n ≤ 100 does not refit.
                let a = agent(&vocab, d, cap, policy, n, 800);
                let name = format!("B{cap}_{}_m{M}_n{n}_d{d}", policy.name());
                on_clone(&mut g, name, &a, |a| {
                    let _ = a.handle_block(black_box(x.as_ref()), black_box(&y));
                });
            }
        }
    }
    g.finish();
}

fn bench_stream(c: &mut Criterion) {
    let mut g = c.benchmark_group("local_stream");
    for &d in &DS {
        let vocab = Arc::new(Vocabulary::default_design(M, d, 7).expect("vocabulary"));
        for n in [20usize, 100] {
            let blocks: Vec<_> = (0..STREAM_ROWS / n)
                .map(|b| block(d, n, 3000 + b as u64))
                .collect();
            let cases = CASES.map(|(cap, policy)| (cap, policy, LocalFit::Agent));
            for (cap, policy, fit) in
                cases
                    .into_iter()
                    .chain([(B, MemoryPolicy::Recent, LocalFit::Fleet)])
            {
                let a = agent_fitting(&vocab, d, (cap, policy, fit), n, 800);
                let fitting = if fit == LocalFit::Fleet {
                    "_fleetfit"
                } else {
                    ""
                };
                let name = format!("B{cap}_{}{fitting}_m{M}_n{n}_d{d}", policy.name());
                on_clone(&mut g, name, &a, |a| {
                    for (x, y) in &blocks {
                        let _ = a.handle_block(black_box(x.as_ref()), black_box(y));
                    }
                });
            }
        }
    }
    g.finish();
}

fn bench_refit(c: &mut Criterion) {
    let mut g = c.benchmark_group("local_refit");
    for &d in &DS {
        let vocab = Arc::new(Vocabulary::default_design(M, d, 7).expect("vocabulary"));
        let n = 100;
        // Fits at 16, …, 256, 500 (full) and 1000 rows (500 entered since); after 1400 rows,
        // 400 have entered since, so the next block of 100 refits.
        let a = agent(&vocab, d, B, MemoryPolicy::Recent, n, 1400);
        assert_eq!(a.local().fit_state().1, 400);
        let (x, y) = block(d, n, 1000);
        on_clone(&mut g, format!("B{B}_m{M}_n{n}_d{d}"), &a, |a| {
            let _ = a.handle_block(black_box(x.as_ref()), black_box(&y));
        });
    }
    g.finish();
}

fn bench_pooled_fit(c: &mut Criterion) {
    let mut g = c.benchmark_group("local_pooled_fit");
    g.sample_size(10);
    for &d in &DS {
        let vocab = Vocabulary::default_design(M, d, 7).expect("vocabulary");
        let sample = |seed: u64| {
            let (x, y) = block(d, 512, seed);
            let x = (0..512)
                .flat_map(|i| (0..d).map(move |j| (i, j)))
                .map(|(i, j)| x[(i, j)]);
            FitSample::new(d, x.collect(), y).expect("sample")
        };
        let (fit, validation) = ([sample(11)], [sample(12)]);
        let opts = PoolOptions::default();
        let initial = ResidualKernel::from_params(ResidualKind::Learned, vec![0.0; d + 2], d, 0)
            .expect("kernel");
        // The warm kernel: a first pooled fit, as the chain would hold after a fusion.
        let warm = fit_pooled_selected(None, &initial, true, &vocab, &fit, &validation, &opts)
            .expect("first fit");
        let warm =
            ResidualKernel::from_params(ResidualKind::Learned, warm.params, d, 0).expect("kernel");
        g.bench_function(BenchmarkId::from_parameter(format!("P512_d{d}")), |b| {
            b.iter(|| {
                let w = Some(&warm);
                fit_pooled_selected(w, &initial, false, &vocab, &fit, &validation, &opts)
            })
        });
    }
    g.finish();
}

fn bench_grouped_fit(c: &mut Criterion) {
    use coolgp::local::composite::Groups;
    use coolgp::local::select::fit_grouped_selected;
    use coolgp::local::ResidualFamily;
    let mut g = c.benchmark_group("local_grouped_fit");
    g.sample_size(10);
    for &d in &DS {
        let groups = |seed: u64| {
            let (x, y) = block(d, 128 * 16, seed);
            let mut out = Groups::new(d);
            for b in 0..128 {
                let rows = b * 16..(b + 1) * 16;
                let xs: Vec<f64> = rows
                    .clone()
                    .flat_map(|i| (0..d).map(move |j| (i, j)))
                    .map(|(i, j)| x[(i, j)])
                    .collect();
                out.push(&xs, &y[rows]).expect("group");
            }
            out
        };
        let (fit, held) = (groups(11), groups(12));
        let initial = vec![0.0; d + 2];
        let se = [ResidualFamily::SquaredExponential];
        let warm = fit_grouped_selected(&[], &initial, (&fit, &held), true, &se)
            .expect("first fit")
            .params;
        let w = Some((ResidualFamily::SquaredExponential, &warm[..]));
        // The squared exponential's starts alone (the fit before the families), and every
        // family's (docs/LOCAL.md §12a).
        g.bench_function(BenchmarkId::from_parameter(format!("G128x16_d{d}")), |b| {
            b.iter(|| fit_grouped_selected(w.as_slice(), &initial, (&fit, &held), true, &se))
        });
        let all = ResidualFamily::STATIONARY;
        g.bench_function(
            BenchmarkId::from_parameter(format!("G128x16_d{d}_families")),
            |b| b.iter(|| fit_grouped_selected(w.as_slice(), &initial, (&fit, &held), true, &all)),
        );
    }
    g.finish();
}

fn bench_predict(c: &mut Criterion) {
    let mut g = c.benchmark_group("local_predict");
    for &d in &DS {
        let vocab = Arc::new(Vocabulary::default_design(M, d, 7).expect("vocabulary"));
        for cap in [0, B] {
            let a = agent(&vocab, d, cap, MemoryPolicy::Recent, 100, 800);
            for q in [1usize, 100] {
                let (x, _) = block(d, q, 2000);
                let name = format!("B{cap}_m{M}_q{q}_d{d}");
                g.bench_function(BenchmarkId::from_parameter(name), |b| {
                    b.iter(|| a.predict_local(black_box(x.as_ref()), View::Fused))
                });
            }
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config(1500);
    targets = bench_block, bench_stream, bench_refit, bench_pooled_fit, bench_grouped_fit, bench_predict
}
criterion_main!(benches);
