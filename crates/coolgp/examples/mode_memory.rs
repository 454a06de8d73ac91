//! What each online mode keeps (`Learner::memory_f64`) at m = 100, k = 20, d = d' = 8, after
//! 1, 10 and 100 blocks of n = 20 points.
//!
//! `cargo run -p coolgp --release --example mode_memory`

use std::sync::Arc;

use coolgp::faer::Mat;
use coolgp::learn::IsNormalization;
use coolgp::rng::Rng;
use coolgp::{Agent, AgentConfig, UpdateMode, Vocabulary};

fn main() {
    let (m, d, n, k) = (100usize, 8usize, 20usize, 20usize);
    let vocab = Arc::new(Vocabulary::default_design(m, d, 7).expect("vocabulary"));
    let modes = [
        ("frozen", UpdateMode::Frozen),
        (
            "importance k=20",
            UpdateMode::Importance {
                samples: k,
                normalization: IsNormalization::Unnormalized,
            },
        ),
        ("exact", UpdateMode::Exact),
    ];
    println!("m = {m}, d = d' = {d}, n = {n} per block; f64 counts (MiB)");
    println!("| mode | after 1 block | after 10 blocks | after 100 blocks |");
    println!("|---|---|---|---|");
    for (name, mode) in modes {
        let config = AgentConfig {
            mode,
            learn: false,
            ..AgentConfig::default()
        };
        let mut a = Agent::new(0, vocab.clone(), d, config).expect("agent");
        let mut rng = Rng::new(1, 2);
        let mut cells = Vec::new();
        for b in 1..=100 {
            let x = Mat::from_fn(n, d, |_, _| rng.normal());
            let y: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
            a.handle_block(x.as_ref(), &y).expect("block");
            if b == 1 || b == 10 || b == 100 {
                let f = a.learner().memory_f64();
                cells.push(format!("{f} ({:.3})", (f * 8) as f64 / 1048576.0));
            }
        }
        println!("| {name} | {} |", cells.join(" | "));
    }
}
