//! One block update, per online mode.
//!
//! - `handle_block/{frozen,importance_k20,exact}`: `Agent::handle_block` with learning on
//!   (absorb + own-excess refresh + one Adam step on `block_loglik_grad` against the fused
//!   q(u) + second refresh), measured on the 11th block: 10 blocks of the same size are
//!   absorbed first, and every iteration starts from a clone of that agent (clone not timed).
//! - `accumulate_block`: `psi::accumulate_block` alone (the frozen mode's statistics).
//! - `learner_update/{frozen,importance_k20,exact}`: `Learner::absorb` + `Learner::excess`
//!   (the mode's data work without the gradient step), after 10 blocks.
//!
//! Grid: m ∈ {50, 100, 200}, n ∈ {20, 100}, d = d' ∈ {2, 6, 8} for `handle_block` (all modes)
//! and `accumulate_block`; `learner_update` is thinned to n = 100, d ∈ {2, 8}.
//!
//! `cargo bench -p coolgp --bench block_update`

use std::hint::black_box;
use std::sync::Arc;

use coolgp::learn::{IsNormalization, Learner};
use coolgp::model::psi::{accumulate_block, PsiWorkspace, UnitStats};
use coolgp::{Agent, AgentConfig, UpdateMode, Vocabulary};
mod common;

use common::block;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};

const MS: [usize; 3] = [50, 100, 200];
const NS: [usize; 2] = [20, 100];
const DS: [usize; 3] = [2, 6, 8];
const PRIOR_BLOCKS: usize = 10;

fn modes() -> [(&'static str, UpdateMode); 3] {
    [
        ("frozen", UpdateMode::Frozen),
        (
            "importance_k20",
            UpdateMode::Importance {
                samples: 20,
                normalization: IsNormalization::Unnormalized,
            },
        ),
        ("exact", UpdateMode::Exact),
    ]
}

fn id(m: usize, n: usize, d: usize) -> String {
    format!("m{m}_n{n}_d{d}")
}

fn bench_handle_block(c: &mut Criterion) {
    for (name, mode) in modes() {
        let mut g = c.benchmark_group(format!("handle_block/{name}"));
        for &m in &MS {
            for &d in &DS {
                let vocab = Arc::new(Vocabulary::default_design(m, d, 7).expect("vocabulary"));
                for &n in &NS {
                    let config = AgentConfig {
                        mode,
                        ..AgentConfig::default()
                    };
                    let mut agent = Agent::new(0, vocab.clone(), d, config).expect("agent");
                    for b in 0..PRIOR_BLOCKS {
                        let (x, y) = block(d, n, b as u64);
                        agent.handle_block(x.as_ref(), &y).expect("block");
                    }
                    while agent.poll_event().is_some() {}
                    let (x, y) = block(d, n, 1000);
                    g.throughput(Throughput::Elements(n as u64));
                    g.bench_function(BenchmarkId::from_parameter(id(m, n, d)), |b| {
                        b.iter_batched_ref(
                            || agent.clone(),
                            |a| a.handle_block(black_box(x.as_ref()), black_box(&y)),
                            BatchSize::LargeInput,
                        )
                    });
                }
            }
        }
        g.finish();
    }
}

fn bench_accumulate(c: &mut Criterion) {
    let mut g = c.benchmark_group("accumulate_block");
    for &m in &MS {
        for &d in &DS {
            let vocab = Vocabulary::default_design(m, d, 7).expect("vocabulary");
            let proj = vocab.initial_projection(d);
            for &n in &NS {
                let (x, y) = block(d, n, 1);
                let mut acc = UnitStats::zeros(m);
                let mut ws = PsiWorkspace::default();
                // Elements = ψ̄2 terms n·m(m+1)/2, so criterion's rate is terms/s.
                g.throughput(Throughput::Elements((n * m * (m + 1) / 2) as u64));
                g.bench_function(BenchmarkId::from_parameter(id(m, n, d)), |b| {
                    b.iter(|| {
                        accumulate_block(
                            &vocab,
                            &proj,
                            black_box(x.as_ref()),
                            black_box(&y),
                            &mut acc,
                            &mut ws,
                        )
                    })
                });
            }
        }
    }
    g.finish();
}

fn bench_learner(c: &mut Criterion) {
    let n = 100;
    for (name, mode) in modes() {
        let mut g = c.benchmark_group(format!("learner_update/{name}"));
        for &m in &MS {
            for &d in &[2usize, 8] {
                let vocab = Vocabulary::default_design(m, d, 7).expect("vocabulary");
                let proj = vocab.initial_projection(d);
                let mut ws = PsiWorkspace::default();
                let mut learner = Learner::new(&vocab, d, mode, 0);
                for b in 0..PRIOR_BLOCKS {
                    let (x, y) = block(d, n, b as u64);
                    learner.absorb(&vocab, &proj, x.as_ref(), &y, &mut ws);
                }
                let (x, y) = block(d, n, 1000);
                g.bench_function(BenchmarkId::from_parameter(id(m, n, d)), |b| {
                    b.iter_batched_ref(
                        || learner.clone(),
                        |l| {
                            l.absorb(&vocab, &proj, black_box(x.as_ref()), &y, &mut ws);
                            l.excess(&vocab, &proj, &mut ws)
                        },
                        BatchSize::LargeInput,
                    )
                });
            }
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = common::config(1000);
    targets = bench_accumulate, bench_handle_block, bench_learner
}
criterion_main!(benches);
