//! Fixtures shared by the benches and the `psi_throughput` example (each uses a subset).
#![allow(dead_code)]

use std::time::Duration;

use coolgp::faer::linalg::matmul::matmul;
use coolgp::faer::{Accum, Mat, MatRef, Par};
use coolgp::model::Projection;
use coolgp::rng::Rng;
use coolgp::Vocabulary;
use criterion::Criterion;

/// A block of `n` points in `d` dimensions: `x ~ N(0, I)`, `y = sin(Σ_j x_j) + 0.1 ε`.
pub fn block(d: usize, n: usize, seed: u64) -> (Mat<f64>, Vec<f64>) {
    let mut rng = Rng::new(seed, 0xB10C);
    let x = Mat::from_fn(n, d, |_, _| rng.normal());
    let y = (0..n)
        .map(|i| {
            let s: f64 = (0..d).map(|j| x[(i, j)]).sum();
            s.sin() + 0.1 * rng.normal()
        })
        .collect();
    (x, y)
}

/// The ψ̄2 throughput case `(m, d' = d)`: the default design, its initial projection and
/// `n` standard normal points with standard normal targets.
pub fn psi_case(m: usize, dz: usize, n: usize) -> (Vocabulary, Projection, Mat<f64>, Vec<f64>) {
    let vocab = Vocabulary::default_design(m, dz, 7).expect("vocabulary");
    let proj = vocab.initial_projection(dz);
    let mut rng = Rng::new(11, dz as u64);
    let x = Mat::from_fn(n, dz, |_, _| rng.normal());
    let y: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
    (vocab, proj, x, y)
}

/// Two `s × s` standard normal matrices for the GEMM reference.
pub fn gemm_case(s: usize) -> (Mat<f64>, Mat<f64>) {
    let mut rng = Rng::new(3, s as u64);
    let a = Mat::from_fn(s, s, |_, _| rng.normal());
    let b = Mat::from_fn(s, s, |_, _| rng.normal());
    (a, b)
}

/// `out = a b`, f64, sequential.
pub fn gemm(out: &mut Mat<f64>, a: MatRef<'_, f64>, b: MatRef<'_, f64>) {
    matmul(out.as_mut(), Accum::Replace, a, b, 1.0, Par::Seq);
}

/// The criterion settings of every bench: 10 samples, 0.3 s warm-up, `measure_ms` each.
pub fn config(measure_ms: u64) -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(measure_ms))
}
