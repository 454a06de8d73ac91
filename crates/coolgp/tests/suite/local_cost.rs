//! The local memory's cost rules (issue 19; docs/LOCAL.md §8): the factor of A is brought up
//! to date lazily, incrementally when answers come every block, and the memory never exceeds
//! its capacity.

use super::local::data;
use coolgp::faer::Mat;
use coolgp::rng::Rng;
use coolgp::{Agent, LocalConfig, MemoryPolicy, View};

/// The agent of the local suite with seed 3.
fn agent(local: LocalConfig) -> Agent {
    super::local::agent(local, 3)
}

#[test]
fn with_an_answer_every_block_the_factor_is_never_refactored_per_block() {
    // One full factorization at the first answer and one after each fit of the kernel (its
    // change touches every entry of A); every other block is an incremental update.
    for policy in MemoryPolicy::ALL {
        let local = LocalConfig {
            capacity: 60,
            policy,
            ..LocalConfig::default()
        };
        let mut a = agent(local);
        let mut rng = Rng::new(9, 1);
        let xq = Mat::from_fn(3, 2, |_, _| rng.normal());
        let (mut fits, mut changed, blocks) = (0u64, 0u64, 200);
        for _ in 0..blocks {
            let (x, y) = data(10, &mut rng);
            let before = a.local().rows();
            a.handle_block(x.as_ref(), &y).expect("block");
            fits += u64::from(a.local().fit_state().1 == 0);
            changed += u64::from(a.local().rows() != before);
            a.predict_local(xq.as_ref(), View::Own).expect("answer");
        }
        let (refactors, updates) = a.local().factor_counts();
        assert!(
            refactors <= fits + 1,
            "{policy:?}: {refactors} factorizations for {fits} fits"
        );
        // Every block that changed the rows is one update or one factorization.
        assert!(
            refactors + updates <= blocks && updates + refactors >= changed,
            "{policy:?}: {refactors} factorizations, {updates} updates, {changed} changes"
        );
    }
}

#[test]
fn without_answers_learning_never_factors() {
    for policy in MemoryPolicy::ALL {
        let local = LocalConfig {
            capacity: 50,
            policy,
            ..LocalConfig::default()
        };
        let mut a = agent(local);
        let mut rng = Rng::new(10, 1);
        for _ in 0..40 {
            let (x, y) = data(7, &mut rng);
            a.handle_block(x.as_ref(), &y).expect("block");
        }
        assert_eq!(a.local().factor_counts(), (0, 0), "{policy:?}");
        // The first answer factors once.
        let xq = Mat::from_fn(2, 2, |_, _| rng.normal());
        a.local_answers(xq.as_ref(), View::Own).expect("answer");
        assert_eq!(a.local().factor_counts(), (1, 0), "{policy:?}");
    }
}

#[test]
fn the_memory_never_exceeds_its_capacity() {
    for policy in MemoryPolicy::ALL {
        let local = LocalConfig {
            capacity: 25,
            policy,
            ..LocalConfig::default()
        };
        let mut a = agent(local);
        let mut rng = Rng::new(11, 1);
        for step in 0..80 {
            // Blocks from one row to more than the capacity.
            let (x, y) = data(1 + rng.below(40), &mut rng);
            a.handle_block(x.as_ref(), &y).expect("block");
            assert!(a.local_points() <= 25, "{policy:?} step {step}");
            if step % 7 == 0 {
                let xq = Mat::from_fn(2, 2, |_, _| rng.normal());
                a.local_answers(xq.as_ref(), View::Own).expect("answer");
            }
        }
        assert_eq!(a.local_points(), 25, "{policy:?}");
    }
}

#[test]
fn the_agent_with_a_lazy_factor_stays_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Agent>();
    send_sync::<coolgp::local::LocalModel>();
}
