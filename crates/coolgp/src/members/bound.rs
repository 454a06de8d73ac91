//! Bounded influence (issue 29, docs/MEMBERS.md §6): what a neighbour's tree message may add.
//!
//! A message `D_ki` claims `points` rows and carries the precision `tr(D1)`. Under the tree
//! rule it is a subtree's sum, so the receiver cannot check any one member's part of it; what
//! it can check is the precision per claimed row against what it holds from the rest of the
//! fleet (its own excess and every other neighbour's message): one row's ψ-statistics are
//! bounded by the kernel, so an honest subtree's `tr(D1)/points` is of the order of the
//! fleet's. A message above `ratio` times the rest's precision per row is scaled down to it
//! (D1 and D2 together: the mean it implies is kept, its weight is that of `ratio` times its
//! claimed rows of typical rows) and the sender is counted. A member that claims more rows
//! with matching precision cannot be told from a member with more rows by its messages; the
//! member check (its evidence against its peers) is what judges its data.
//!
//! The ceiling ([`ceiling_factor`]) needs no reference and no setting: one row's ψ̄2 has a
//! trace of at most m in unit scale, so no message may carry more than m per claimed row; it
//! binds only a message that claims far fewer rows than its precision needs.
//!
//! The row rate ([`rate_factor`]) bounds how fast a neighbour's claimed rows may grow: at most
//! `rate` rows per round of the receiver's own clock since its last accepted message. Under
//! the tree rule the claim is a subtree's, so the rate is the user's bound on a whole side of
//! the edge (for example the fleet's members times their rows per round).
//!
//! In the fleet projection mode a tree message also carries the site sums of the fleet's
//! q(W) over the sender's side of the edge, and site-only messages carry them more often.
//! Whatever a message's q(u) part is scaled by, its site sums are scaled by too
//! ([`Scaling`]): the same weight on Λ, λ and the σ_s, σ_n statistics, the same factor on
//! the claimed points where the row rate bounds the claim; and the sender's following
//! site-only messages are scaled alike until its next tree message sets a new factor.

use crate::learn::Sites;
use crate::model::Excess;

/// Fewest rows the rest of the fleet must represent before a message is compared with it.
pub const MIN_REFERENCE_POINTS: f64 = 20.0;

/// `tr(D1)` of an excess.
pub fn precision(e: &Excess) -> f64 {
    (0..e.d1.nrows()).map(|i| e.d1[(i, i)]).sum()
}

/// The factor in (0, 1) by which a message of precision `msg.0` over `msg.1` claimed rows is
/// scaled so that its precision per row is at most `ratio` times the reference's
/// (`reference`: precision and rows of the rest); `None` when it is within the bound, when the
/// reference holds fewer than [`MIN_REFERENCE_POINTS`] rows or no precision, or when the
/// message carries none. A message claiming fewer than one row is compared as one row.
pub fn cap_factor(msg: (f64, f64), reference: (f64, f64), ratio: f64) -> Option<f64> {
    let (tr, pts) = msg;
    let (ref_tr, ref_pts) = reference;
    if !(ref_pts >= MIN_REFERENCE_POINTS && ref_tr > 0.0 && tr > 0.0 && ratio > 0.0) {
        return None;
    }
    let limit = ratio * (ref_tr / ref_pts) * pts.max(1.0);
    (tr > limit).then(|| limit / tr)
}

/// The factor in (0, 1) by which a message of precision `tr` (`tr(D1)`, unit scale) over
/// `points` claimed rows is scaled so that it carries no more than `points` rows can: each
/// row adds `ψ̄2(x) = E_q(W)[k_u k_uᵀ]` to D1 (spec §4c, σ_s = σ_n = 1), whose trace is
/// `Σ_j E[k(Wx, z_j)²] ≤ m` for a kernel bounded by 1, so an honest subtree's sum has
/// `tr(D1) ≤ m · points` whatever its data (the ceiling; always on where the excess is in
/// unit scale). `None` within it. A message claiming fewer than one row is held to one row.
pub fn ceiling_factor(tr: f64, points: f64, m: usize) -> Option<f64> {
    let limit = m as f64 * points.max(1.0);
    (tr.is_finite() && tr > limit).then(|| limit / tr)
}

/// The rows a tree message may claim under a row rate of `rate` rows per round (`--row-rate`):
/// `base + rate · max(elapsed, 1)`, with `base` the rows of the last message accepted from the
/// sender (0 before any) and `elapsed` the receiver's rounds since it was accepted. Before any
/// accepted message since this agent started (or was restored) the receiver's clock says
/// nothing about the sender's history, and `elapsed` is the sender's own round (its header).
/// Returns the factor `allowed / claimed` in (0, 1) by which a message above the bound is
/// scaled (its claimed rows and its excess, D1 and D2 alike: the mean it implies is kept),
/// and `None` within the bound or for a rate that is not finite and > 0.
pub fn rate_factor(claimed: f64, base: f64, elapsed: u64, rate: f64) -> Option<(f64, f64)> {
    if !(rate.is_finite() && rate > 0.0 && claimed.is_finite()) {
        return None;
    }
    let allowed = base.max(0.0) + rate * elapsed.max(1) as f64;
    (claimed > allowed).then(|| (allowed / claimed, allowed))
}

/// What the bounds did to a neighbour's tree message, to be done to its site sums too:
/// `weight`, the product of the factors its excess was scaled by (the row rate's, the
/// ceiling's and the cap's), and `points`, the factor its claimed rows were scaled by (the row
/// rate's alone: the ceiling and the cap keep the claim and bound its precision per row).
///
/// Its site sums are then [`crate::learn::Site::reweighted`]`(weight, points)`: Λ, λ and the
/// statistics `(A, B, YY, n)` times `weight` (the means `λ/Λ` and the σ_s, σ_n the sums
/// imply kept, as q(u)'s mean is), the site points times `points`, as q(u)'s claimed rows
/// are, so the q0 pseudo-site fades (`exp(−N/N0)`) with the rows q(u) accepted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scaling {
    /// The factor in (0, 1] on the sums' weight (Λ, λ, A, B, YY, n).
    pub weight: f64,
    /// The factor in (0, 1] on the claimed points.
    pub points: f64,
}

impl Scaling {
    /// Nothing scaled: an honest message's.
    pub const NONE: Scaling = Scaling {
        weight: 1.0,
        points: 1.0,
    };

    /// True when nothing is scaled (both factors exactly 1).
    pub fn is_none(self) -> bool {
        self == Self::NONE
    }

    /// `self` followed by a factor `f` on the weight (the ceiling's or the cap's).
    pub fn then_weight(self, f: f64) -> Scaling {
        Scaling {
            weight: self.weight * f,
            points: self.points,
        }
    }

    /// Site sums scaled ([`crate::learn::Site::reweighted`] per group); the same sums, bit
    /// for bit, when nothing is scaled.
    pub fn sites(self, sites: Sites) -> Sites {
        if self.is_none() {
            return sites;
        }
        Sites::from_pairs(
            sites
                .iter()
                .map(|(g, s)| (g, s.reweighted(self.weight, self.points))),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::Site;

    #[test]
    fn scaled_sites_keep_their_means_and_scales_and_scale_points_by_the_claim() {
        let mut s = Site::zeros(2);
        s.prec = vec![4.0, 8.0];
        s.shift = vec![2.0, -8.0];
        s.hyper = crate::learn::HyperStats {
            a: 3.0,
            b: 2.0,
            yy: 10.0,
            n: 5.0,
        };
        s.points = 5.0;
        let sites = Sites::single(0, s.clone());
        assert_eq!(Scaling::NONE.sites(sites.clone()), sites);
        let sc = Scaling {
            weight: 0.5,
            points: 1.0,
        }
        .then_weight(0.5);
        let got = sc.sites(sites);
        let g = got.get(0).expect("group");
        assert_eq!(g.prec, vec![1.0, 2.0]);
        assert_eq!(g.shift, vec![0.5, -2.0]);
        assert_eq!(g.points, 5.0, "the ceiling and the cap keep the claim");
        assert_eq!(g.hyper.maximiser(), s.hyper.maximiser(), "σ_s, σ_n kept");
        assert_eq!(g.hyper.n, 1.25);
        let rated = Scaling {
            weight: 0.2,
            points: 0.2,
        };
        let r = s.reweighted(rated.weight, rated.points);
        assert!((r.points - 1.0).abs() < 1e-15 && (r.prec[1] - 1.6).abs() < 1e-15);
    }

    #[test]
    fn claimed_rows_may_grow_by_the_rate_per_round_and_no_more() {
        // 100 rows last time, 3 rounds ago, 20 rows a round: up to 160.
        assert_eq!(rate_factor(160.0, 100.0, 3, 20.0), None);
        let (f, allowed) = rate_factor(320.0, 100.0, 3, 20.0).expect("capped");
        assert_eq!(allowed, 160.0);
        assert!((f - 0.5).abs() < 1e-15, "{f}");
        // The same round counts as one; fewer rows than before are always allowed.
        assert_eq!(rate_factor(120.0, 100.0, 0, 20.0), None);
        assert!(rate_factor(121.0, 100.0, 0, 20.0).is_some());
        assert_eq!(rate_factor(10.0, 100.0, 5, 20.0), None);
        // No rate, or a bad one: no limit.
        assert_eq!(rate_factor(1e9, 0.0, 1, 0.0), None);
        assert_eq!(rate_factor(1e9, 0.0, 1, f64::NAN), None);
    }

    #[test]
    fn a_message_above_the_ratio_is_scaled_to_it_and_others_are_not() {
        // The rest: 100 rows of precision 50 (0.5 per row); ratio 2 allows 1 per row.
        let reference = (50.0, 100.0);
        assert_eq!(cap_factor((30.0, 40.0), reference, 2.0), None);
        let f = cap_factor((400.0, 40.0), reference, 2.0).expect("capped");
        assert!((f - 0.1).abs() < 1e-12, "{f}");
        // Zero claimed rows count as one; too small a reference, or no precision: no cap.
        let f = cap_factor((10.0, 0.0), reference, 2.0).expect("capped");
        assert!((f - 0.1).abs() < 1e-12, "{f}");
        assert_eq!(cap_factor((400.0, 40.0), (5.0, 10.0), 2.0), None);
        assert_eq!(cap_factor((400.0, 40.0), (0.0, 100.0), 2.0), None);
        assert_eq!(cap_factor((f64::NAN, 40.0), reference, 2.0), None);
    }
}
