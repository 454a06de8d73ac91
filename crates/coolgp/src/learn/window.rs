//! A site window's data term with the ψ of its older rows computed point by point (issue 18):
//! the stream memory re-evaluates an agent's whole window after each fusion, and writing the
//! window's ψ̄2 (`n·m²` numbers, 25 MB at 320 rows and m = 100) only to read it back was a
//! large part of that cost. The newest block's ψ, computed by its absorption, is reused.

use faer::MatRef;

use crate::learn::elbo::{loglik_grad_rows, BlockElbo, BlockPsi};
use crate::model::natural::Posterior;
use crate::model::projection::Projection;
use crate::model::Vocabulary;

/// As [`crate::learn::elbo::block_loglik_grad`] for a window `(x [n, d], y [n])` whose last
/// `tail` rows' ψ `bp` holds under `proj` (the newest block, as its absorption computed them):
/// the older rows' ψ are computed one point at a time and used at once, so no `n·m²` buffer
/// is written and read back. Bit-identical to [`BlockPsi::recompute_keeping_tail`] followed by
/// [`crate::learn::elbo::block_loglik_grad_with`]. If `bp` does not hold exactly `tail ≤ n`
/// rows of these shapes, it is recomputed over the whole window first.
pub fn window_loglik_grad(
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    x: MatRef<'_, f64>,
    y: &[f64],
    bp: &mut BlockPsi,
    tail: usize,
) -> BlockElbo {
    window_loglik_grad_weighted(vocab, proj, post, x, y, bp, tail, None)
}

/// As [`window_loglik_grad`] with each row's term tempered by its weight `w [n]` when
/// `weights` is given (the robust likelihood: the weights the rows got when their blocks
/// arrived; [`crate::learn::elbo::block_loglik_grad_weighted`]). `None` is
/// [`window_loglik_grad`] bit for bit.
///
/// # Panics
/// If `w` is shorter than `y` (our own misuse).
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub fn window_loglik_grad_weighted(
    vocab: &Vocabulary,
    proj: &Projection,
    post: &Posterior,
    x: MatRef<'_, f64>,
    y: &[f64],
    bp: &mut BlockPsi,
    tail: usize,
    weights: Option<&[f64]>,
) -> BlockElbo {
    assert!(
        weights.is_none_or(|w| w.len() >= y.len()),
        "one weight per row"
    );
    let (m, dz, n) = (vocab.m(), vocab.d_latent(), x.nrows());
    let fits = tail <= n && bp.holds(m, dz, tail);
    if !fits {
        bp.recompute(vocab, proj, x);
        return loglik_grad_rows(vocab, proj, post, x, y, bp, None, weights);
    }
    let mut ws = bp.take_workspace();
    let fresh = Some((n - tail, &mut ws));
    let out = loglik_grad_rows(vocab, proj, post, x, y, bp, fresh, weights);
    bp.set_workspace(ws);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::elbo::{block_loglik_grad, block_loglik_grad_with};
    use crate::model::psi::UnitStats;
    use crate::rng::Rng;

    /// A 7-point design in 2 latent dimensions, 9 rows of 3 inputs with targets and weights
    /// in [0.1, 1] drawn from stream `seed`, and the posterior of q(u) after the rows.
    fn window_fixture(
        seed: u64,
    ) -> (
        Vocabulary,
        Projection,
        faer::Mat<f64>,
        Vec<f64>,
        Posterior,
        Vec<f64>,
    ) {
        let vocab = Vocabulary::default_design(7, 2, 3).expect("design");
        let proj = vocab.initial_projection(3);
        let mut rng = Rng::new(seed, 4);
        let x = faer::Mat::from_fn(9, 3, |_, _| rng.normal());
        let y: Vec<f64> = (0..9).map(|_| rng.normal()).collect();
        let w: Vec<f64> = (0..9).map(|_| 0.1 + 0.9 * rng.uniform()).collect();
        let mut stats = UnitStats::zeros(vocab.m());
        BlockPsi::compute(&vocab, &proj, x.as_ref()).accumulate_into(&y, &mut stats);
        let e = crate::model::Excess::from_unit_stats(&stats, 1.0, 0.5);
        let post = crate::model::NaturalParams::from_excess(&vocab, &e)
            .posterior(&vocab)
            .expect("posterior");
        (vocab, proj, x, y, post, w)
    }

    #[test]
    fn the_window_gradient_point_by_point_is_the_stacked_one_bit_for_bit() {
        // window_loglik_grad computes the older rows' ψ one point at a time; it must give the
        // bits of recompute_keeping_tail + block_loglik_grad_with (and of a full recompute
        // when the held rows do not fit).
        let (vocab, proj, x, y, post, _) = window_fixture(6);
        let mut stacked = BlockPsi::compute(&vocab, &proj, x.as_ref().subrows(5, 4));
        stacked.recompute_keeping_tail(&vocab, &proj, x.as_ref(), 4);
        let want = block_loglik_grad_with(&vocab, &proj, &post, x.as_ref(), &y, &stacked);
        let mut held = BlockPsi::compute(&vocab, &proj, x.as_ref().subrows(5, 4));
        let got = window_loglik_grad(&vocab, &proj, &post, x.as_ref(), &y, &mut held, 4);
        assert_eq!(got.value.to_bits(), want.value.to_bits());
        assert_eq!(got.grad.to_flat(), want.grad.to_flat());
        assert_eq!(got.hyper, want.hyper);
        assert_eq!(held.n(), 4, "the held rows stay as they were");
        // Held rows that are not the window's tail: a full recompute.
        let mut other = BlockPsi::compute(&vocab, &proj, x.as_ref().subrows(0, 3));
        let got = window_loglik_grad(&vocab, &proj, &post, x.as_ref(), &y, &mut other, 4);
        assert_eq!(got.grad.to_flat(), want.grad.to_flat());
        // More rows held than the window has: a full recompute.
        let mut big = BlockPsi::compute(&vocab, &proj, x.as_ref());
        let sub = x.as_ref().subrows(0, 5);
        let got = window_loglik_grad(&vocab, &proj, &post, sub, &y[..5], &mut big, 9);
        let want = block_loglik_grad(&vocab, &proj, &post, sub, &y[..5]);
        assert_eq!(got.grad.to_flat(), want.grad.to_flat());
    }

    #[test]
    fn the_weighted_window_gradient_point_by_point_is_the_stacked_one_bit_for_bit() {
        // Reference: docs/ROBUST.md §1 on a site window: the rows' weights temper the window's
        // terms whether its older rows' ψ are computed point by point or stacked.
        let (vocab, proj, x, y, post, w) = window_fixture(7);
        let full = BlockPsi::compute(&vocab, &proj, x.as_ref());
        let want = crate::learn::elbo::block_loglik_grad_weighted(
            &vocab,
            &proj,
            &post,
            x.as_ref(),
            &y,
            &full,
            &w,
        );
        let mut held = BlockPsi::compute(&vocab, &proj, x.as_ref().subrows(5, 4));
        let got = window_loglik_grad_weighted(
            &vocab,
            &proj,
            &post,
            x.as_ref(),
            &y,
            &mut held,
            4,
            Some(&w),
        );
        assert_eq!(got.value.to_bits(), want.value.to_bits());
        assert_eq!(got.grad.to_flat(), want.grad.to_flat());
        assert_eq!(got.hyper, want.hyper);
        // Without weights: the Gaussian window term, bit for bit.
        let mut held = BlockPsi::compute(&vocab, &proj, x.as_ref().subrows(5, 4));
        let a =
            window_loglik_grad_weighted(&vocab, &proj, &post, x.as_ref(), &y, &mut held, 4, None);
        let b = block_loglik_grad_with(&vocab, &proj, &post, x.as_ref(), &y, &full);
        assert_eq!(a.value.to_bits(), b.value.to_bits());
        assert_ne!(a.value.to_bits(), got.value.to_bits(), "the weights matter");
    }

    #[test]
    fn a_reused_buffer_that_held_a_window_gives_a_blocks_gradient_bit_for_bit() {
        // The ψ̄2 buffer never shrinks (a window's rows stay allocated): a smaller block after
        // it must give the bits of a fresh buffer, and only its own rows are counted.
        let vocab = Vocabulary::default_design(7, 2, 3).expect("design");
        let proj = vocab.initial_projection(3);
        let mut rng = Rng::new(5, 4);
        let window = faer::Mat::from_fn(9, 3, |_, _| rng.normal());
        let x = faer::Mat::from_fn(3, 3, |_, _| rng.normal());
        let y = [0.3, -1.0, 0.7];
        let mut bp = BlockPsi::compute(&vocab, &proj, window.as_ref());
        bp.recompute(&vocab, &proj, x.as_ref());
        assert_eq!(bp.n(), 3);
        let fresh = BlockPsi::compute(&vocab, &proj, x.as_ref());
        let (mut a, mut b) = (UnitStats::zeros(vocab.m()), UnitStats::zeros(vocab.m()));
        bp.accumulate_into(&y, &mut a);
        fresh.accumulate_into(&y, &mut b);
        assert_eq!(a, b);
        let stats = {
            let e = crate::model::Excess::from_unit_stats(&b, 1.0, 0.5);
            crate::model::NaturalParams::from_excess(&vocab, &e)
        };
        let post = stats.posterior(&vocab).expect("posterior");
        let g1 = block_loglik_grad_with(&vocab, &proj, &post, x.as_ref(), &y, &bp);
        let g2 = block_loglik_grad_with(&vocab, &proj, &post, x.as_ref(), &y, &fresh);
        assert_eq!(g1.value.to_bits(), g2.value.to_bits());
        assert_eq!(g1.grad.to_flat(), g2.grad.to_flat());
    }
}
