//! Gradient step, fusion, one round of tree message passing, prediction.
//!
//! - `block_loglik_grad`: `learn::block_loglik_grad` (L_D and ∇θ of one block against a fixed
//!   q(u)), m ∈ {50, 100, 200}, n ∈ {20, 100}, d = d' ∈ {2, 8}.
//! - `fuse_pair`: `fuse::fuse_pair` of two agents' q(u) (K-form), m ∈ {100, 200}.
//! - `tree_round`: one synchronous round for 1000 agents on `Topology::random_tree(1000, 1)`,
//!   m = 100, d = 2, in steady state (every inbox already full):
//!   `agents_tick_deliver` drives the `Agent`s — `handle_tick` on every agent, then every
//!   queued message through `poll_transmit` → `handle_message` (validation included);
//!   `run_synchronous_updates0` is `fuse::tree::run_synchronous(topo, own, 0)` on the same
//!   excesses (its inboxes start empty, so it only forms and stores the initial messages);
//!   `two_pass_fusion` is a whole fusion with `fuse::tree::two_pass_schedule` (1998 messages).
//! - `predict_10k`: `model::predict::predict` (mean and variances) and `predict_mean` for
//!   10 000 points, m = 100, d = d' = 8.
//!
//! `cargo bench -p coolgp --bench learn_fuse_predict`

use std::hint::black_box;
use std::sync::Arc;

use coolgp::fuse::fuse_pair;
use coolgp::fuse::tree::{run_synchronous, two_pass_schedule};
use coolgp::learn::block_loglik_grad;
use coolgp::model::predict::{predict, predict_mean};
use coolgp::protocol::memory;
use coolgp::{Agent, AgentConfig, Excess, Topology, View, Vocabulary};
mod common;

use common::block;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};

/// A frozen-mode agent that has learned from `blocks` blocks of `n` points.
fn trained(vocab: &Arc<Vocabulary>, id: u64, d: usize, n: usize, blocks: usize) -> Agent {
    let mut a = Agent::new(id, vocab.clone(), d, AgentConfig::default()).expect("agent");
    for b in 0..blocks {
        let (x, y) = block(d, n, id * 1000 + b as u64);
        a.handle_block(x.as_ref(), &y).expect("block");
    }
    a
}

fn bench_grad(c: &mut Criterion) {
    let mut g = c.benchmark_group("block_loglik_grad");
    for &m in &[50usize, 100, 200] {
        for &d in &[2usize, 8] {
            let vocab = Arc::new(Vocabulary::default_design(m, d, 7).expect("vocabulary"));
            let agent = trained(&vocab, 0, d, 100, 10);
            let post = agent.posterior(View::Own).expect("posterior");
            let proj = agent.projection().clone();
            for &n in &[20usize, 100] {
                let (x, y) = block(d, n, 77);
                g.throughput(Throughput::Elements(n as u64));
                g.bench_function(
                    BenchmarkId::from_parameter(format!("m{m}_n{n}_d{d}")),
                    |b| {
                        b.iter(|| {
                            block_loglik_grad(&vocab, &proj, &post, black_box(x.as_ref()), &y)
                        })
                    },
                );
            }
        }
    }
    g.finish();
}

fn bench_fuse(c: &mut Criterion) {
    let mut g = c.benchmark_group("fuse_pair");
    for &m in &[100usize, 200] {
        let vocab = Arc::new(Vocabulary::default_design(m, 2, 7).expect("vocabulary"));
        let ta = trained(&vocab, 1, 2, 50, 2).natural_params(View::Own);
        let tb = trained(&vocab, 2, 2, 50, 2).natural_params(View::Own);
        g.bench_function(BenchmarkId::from_parameter(format!("m{m}")), |b| {
            b.iter(|| fuse_pair(&vocab, black_box(&ta), black_box(&tb)))
        });
    }
    g.finish();
}

fn bench_tree(c: &mut Criterion) {
    let (agents_n, m, d) = (1000usize, 100usize, 2usize);
    let vocab = Arc::new(Vocabulary::default_design(m, d, 7).expect("vocabulary"));
    let topo = Topology::random_tree(agents_n, 1);
    let mut agents: Vec<Agent> = (0..agents_n)
        .map(|i| {
            let config = AgentConfig {
                learn: false,
                ..AgentConfig::default()
            };
            let mut a = Agent::new(i as u64, vocab.clone(), d, config).expect("agent");
            a.set_neighbors(topo.neighbors(i).iter().map(|&j| j as u64))
                .expect("neighbours");
            let (x, y) = block(d, 20, i as u64);
            a.handle_block(x.as_ref(), &y).expect("block");
            a
        })
        .collect();
    let round = |agents: &mut Vec<Agent>| {
        memory::round(agents).expect("accepted");
        for a in agents.iter_mut() {
            while a.poll_event().is_some() {}
        }
    };
    let fresh = agents.clone();
    let steps = two_pass_schedule(&topo);
    // Three rounds first: every inbox is full, and the 4th round's messages still change
    // (the tree's diameter is 27), so each timed round validates fresh content.
    for _ in 0..3 {
        round(&mut agents);
    }
    let own: Vec<Excess> = agents.iter().map(|a| a.own_excess().clone()).collect();
    let mut g = c.benchmark_group("tree_round");
    g.throughput(Throughput::Elements(2 * topo.edge_count() as u64));
    g.bench_function("agents_tick_deliver/1000_m100", |b| {
        b.iter_batched(
            || agents.clone(),
            |mut a| round(&mut a),
            BatchSize::LargeInput,
        )
    });
    g.bench_function("run_synchronous_updates0/1000_m100", |b| {
        b.iter(|| run_synchronous(&topo, black_box(&own), 0))
    });
    // A whole fusion with the two-pass schedule from agents that have not fused yet: each of
    // the 1998 messages sent once, formed, validated and absorbed.
    g.bench_function("two_pass_fusion/1000_m100", |b| {
        b.iter_batched(
            || fresh.clone(),
            |mut a| {
                for step in &steps {
                    for &(from, to) in step {
                        a[from].handle_tick_to(to as u64);
                    }
                    for &(from, _) in step {
                        while let Some(msg) = a[from].poll_transmit() {
                            let to = msg.header.receiver as usize;
                            a[to].handle_message(msg).expect("accepted");
                        }
                    }
                }
                a
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn bench_predict(c: &mut Criterion) {
    let (m, d, n) = (100usize, 8usize, 10_000usize);
    let vocab = Arc::new(Vocabulary::default_design(m, d, 7).expect("vocabulary"));
    let agent = trained(&vocab, 0, d, 100, 10);
    let post = agent.posterior(View::Own).expect("posterior");
    let proj = agent.projection().clone();
    let (x, _) = block(d, n, 99);
    let mut g = c.benchmark_group("predict_10k");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("predict/m100_d8", |b| {
        b.iter(|| predict(&vocab, &proj, &post, black_box(x.as_ref())))
    });
    g.bench_function("predict_mean/m100_d8", |b| {
        b.iter(|| predict_mean(&vocab, &proj, &post.alpha, black_box(x.as_ref())))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config(1500);
    targets = bench_grad, bench_fuse, bench_tree, bench_predict
}
criterion_main!(benches);
