//! Cost of origin authentication per message: Ed25519 signing ([`Signer::seal`]) and
//! verification ([`auth::open`]) of a tree message at m = 50, 100, 200 (BENCHMARKS.md §9).
//!
//! `cargo run --release -p coolgp-node --example sign_bench`

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use coolgp::model::Fingerprint;
use coolgp::protocol::codec::encode;
use coolgp::protocol::{Body, Header, Message};
use coolgp::Excess;
use coolgp_node::auth::{self, Signer};
use ring::rand::SystemRandom;
use ring::signature::Ed25519KeyPair;

fn main() {
    let der = match Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()) {
        Ok(d) => d,
        Err(e) => return eprintln!("key generation failed: {e}"),
    };
    let signer = match Signer::from_pkcs8(der.as_ref(), Path::new("generated")) {
        Ok(s) => s,
        Err(e) => return eprintln!("{e}"),
    };
    let pk = signer.public_key();
    println!("m     bytes    sign µs  verify µs");
    for m in [50usize, 100, 200] {
        let msg = Message {
            header: Header {
                fingerprint: Fingerprint([7; 32]),
                sender: 2,
                receiver: 1,
                round: 3,
                version: 4,
            },
            body: Body::Tree {
                excess: Excess::zeros(m).into(),
                points: 10.0,
            },
            projection: None,
            sites: None,
        };
        let v1 = encode(&msg);
        let reps = 2000;
        let t = Instant::now();
        let mut sealed = Vec::new();
        for _ in 0..reps {
            sealed = signer.seal(black_box(v1.clone()));
        }
        let sign = t.elapsed().as_secs_f64() / f64::from(reps) * 1e6;
        let t = Instant::now();
        for _ in 0..reps {
            let ok = auth::open(black_box(&sealed), |_| Some(pk));
            assert!(ok.is_ok(), "verification failed");
        }
        let verify = t.elapsed().as_secs_f64() / f64::from(reps) * 1e6;
        println!("{m:<5} {:<8} {sign:>7.1}  {verify:>9.1}", sealed.len());
    }
}
