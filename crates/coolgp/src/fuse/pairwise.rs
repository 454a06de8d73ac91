//! Pairwise and multi-agent fusion (paper Eq. 4.10, spec §7).
//!
//! `T_ab = T_a + T_b − T0` (R-form: `R_ab = R_a + R_b − R0`); `T_g = T0 + Σ_i E_i`.
//! With the same vocabulary this is the exact maximizer of the global mean-field ELBO, even
//! with different q_i(W), σ_s,i, σ_n,i and input dimensions (spec §7). Only q(u) is fused.

use crate::model::{Excess, NaturalParams, Vocabulary};

/// `T_a + T_b − T0`.
pub fn fuse_pair(vocab: &Vocabulary, a: &NaturalParams, b: &NaturalParams) -> NaturalParams {
    let mut e = a.excess(vocab);
    e.add_in_place(&b.excess(vocab));
    NaturalParams::from_excess(vocab, &e)
}

/// `T_g = Σ_i T_i − (s − 1) T0 = T0 + Σ_i E_i`.
pub fn fuse_all<'a>(
    vocab: &Vocabulary,
    ts: impl IntoIterator<Item = &'a NaturalParams>,
) -> NaturalParams {
    let mut e = Excess::zeros(vocab.m());
    for t in ts {
        e.add_in_place(&t.excess(vocab));
    }
    NaturalParams::from_excess(vocab, &e)
}

/// `Σ_i E_i`.
pub fn sum_excess<'a>(m: usize, es: impl IntoIterator<Item = &'a Excess>) -> Excess {
    let mut e = Excess::zeros(m);
    for x in es {
        e.add_in_place(x);
    }
    e
}
