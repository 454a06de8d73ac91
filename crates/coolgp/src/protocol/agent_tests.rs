//! Tests of [`super::Agent`]'s block handling.

use super::*;
use crate::learn::state::ROWS_PER_CHUNK;
use crate::rng::Rng;
use faer::Mat;

#[test]
fn a_block_in_chunks_equals_the_block_at_once() {
    // Blocks larger than one ψ buffer are absorbed and differentiated chunk by chunk: the
    // same statistics and the same gradient step, to rounding, in every mode.
    let vocab = Arc::new(Vocabulary::default_design(9, 2, 4).expect("design"));
    let mut rng = Rng::new(3, 1);
    let x = Mat::from_fn(53, 2, |_, _| rng.normal());
    let y: Vec<f64> = (0..53)
        .map(|r| x[(r, 0)].sin() + 0.1 * rng.normal())
        .collect();
    for mode in [
        UpdateMode::Frozen,
        UpdateMode::parse(Some("importance"), Some(6), None).expect("mode"),
        UpdateMode::parse(Some("exact"), None, None).expect("mode"),
    ] {
        let cfg = AgentConfig {
            mode,
            ..AgentConfig::default()
        };
        let run = |rows: Option<usize>| {
            ROWS_PER_CHUNK.with(|c| c.set(rows));
            let mut a = Agent::new(1, vocab.clone(), 2, cfg.clone()).expect("agent");
            a.handle_block(x.as_ref(), &y).expect("block");
            a.handle_block(x.subrows(0, 20), &y[..20]).expect("block");
            ROWS_PER_CHUNK.with(|c| c.set(None));
            a
        };
        let (whole, chunked) = (run(None), run(Some(7)));
        let e = chunked.own_excess().rel_dist(whole.own_excess());
        assert!(e < 1e-12, "{mode:?}: excess off by {e:e}");
        let (tw, tc) = (whole.projection().to_flat(), chunked.projection().to_flat());
        for (a, b) in tw.iter().zip(&tc) {
            assert!(
                (a - b).abs() <= 1e-12 * a.abs().max(1.0),
                "{mode:?}: θ {a} vs {b}"
            );
        }
        assert_ne!(
            whole.projection(),
            &vocab.initial_projection(2),
            "the step must have moved θ"
        );
    }
}
