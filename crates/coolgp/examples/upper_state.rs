//! What a dirty upper vector state costs glibc's maths, and that `linalg::mul` leaves it clean
//! (BENCHMARKS.md §18).
//!
//! faer's matrix products of about 32 × 32 and more run hand-written AVX-512 kernels that
//! return without `vzeroupper`; every later call into glibc's `exp`, `log`, `sin` then pays an
//! AVX–SSE transition. This times 200,000 calls of each after nothing, after faer's own product
//! and after [`coolgp::linalg::mul`] (which cleans after the product).
//!
//! ```sh
//! cargo run --release -p coolgp --example upper_state
//! ```

use std::hint::black_box;
use std::time::Instant;

use coolgp::faer::linalg::matmul::matmul;
use coolgp::faer::{Accum, Mat, Par};

/// A glibc maths function.
type MathFn = fn(f64) -> f64;

/// Nanoseconds per call of `f` over `xs`, best of 5.
fn ns_per_call(xs: &[f64], f: MathFn) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            let s: f64 = xs.iter().map(|&x| f(black_box(x))).sum();
            black_box(s);
            t.elapsed().as_secs_f64() * 1e9 / xs.len() as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn row(label: &str, xs: &[f64], before: impl Fn()) {
    let fns: [(&str, MathFn); 3] = [("exp", f64::exp), ("ln", f64::ln), ("sin", f64::sin)];
    let cells: Vec<String> = fns
        .iter()
        .map(|(name, f)| {
            before();
            format!("{name} {:6.1} ns", ns_per_call(xs, *f))
        })
        .collect();
    println!("{label:<34} {}", cells.join("   "));
}

fn main() {
    let xs: Vec<f64> = (0..200_000)
        .map(|i| 0.1 + (i % 1000) as f64 / 300.0)
        .collect();
    let n = 64;
    let a = Mat::from_fn(n, n, |i, j| ((i * 7 + j) % 13) as f64);
    let faer_product = || {
        let mut c = Mat::zeros(n, n);
        matmul(
            c.as_mut(),
            Accum::Replace,
            a.as_ref(),
            a.as_ref(),
            1.0,
            Par::Seq,
        );
        black_box(c);
    };
    let our_product = || {
        black_box(coolgp::linalg::mul(a.as_ref(), a.as_ref()));
    };
    println!("glibc maths, 200,000 calls each, best of 5 (64 x 64 products):");
    row("after our product (clean)", &xs, our_product);
    row("after faer's own product (dirty)", &xs, faer_product);
    row("after our product again", &xs, our_product);
}
