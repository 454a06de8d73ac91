//! Coverage: a compact summary of where an agent's memory rows lie, and the routing rule that
//! asks only the agents whose coverage is nearest a query row (issue 31; docs/LOCAL.md §13).
//!
//! An agent's [`Coverage`] is at most [`MAX_BOXES`] axis-aligned boxes around its memory rows
//! (a k-d split: the box with the most rows is cut at the median of its widest input, widths
//! measured in the residual kernel's metric) and that metric's scale `s [d]` (the kernel's
//! inverse lengthscales, [`super::ResidualKernel::input_scale`]). Its distance to a query row
//! `x [d]` is minus the log of the kernel mass its rows are expected to put at `x`, each box's
//! `n_b` rows taken as spread evenly over it:
//!
//! ```text
//! D(x) = −ln Σ_b n_b Π_k exp(−½ (s_k · gap_k)²) · min(1, √(2π) / (s_k · (hi_k − lo_k)))
//! ```
//!
//! with `gap_k = max(lo_k − x_k, 0, x_k − hi_k)` (0 inside the box): a box that is narrow in
//! the kernel's metric counts its rows fully, a wide one the share within a lengthscale. An
//! input along which every agent's rows spread alike (time, at stations) thus leaves the
//! ranking to the others (place). A query row is answered by the `K` agents of the smallest
//! `D` ([`route`]); an agent without coverage (no memory, or one its answers do not use) has
//! `D = ∞`. When `K` reaches the number of agents, every agent is asked, in index order: the
//! answers are those of asking all, bit for bit.

/// Most boxes in one agent's coverage.
pub const MAX_BOXES: usize = 8;

/// One box of a [`Coverage`]: the bounds of its rows' inputs, `[d]` each, and how many.
#[derive(Clone, Debug, PartialEq)]
pub struct CoverBox {
    /// Smallest value of each input over the box's rows.
    pub lo: Vec<f64>,
    /// Largest value of each input over the box's rows.
    pub hi: Vec<f64>,
    /// Rows in the box (≥ 1).
    pub rows: usize,
}

/// Where an agent's memory rows lie (module doc): boxes and the metric's scale `[d]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Coverage {
    scale: Vec<f64>,
    boxes: Vec<CoverBox>,
    /// Per box, `ln n_b − Σ_k ln max(1, s_k (hi_k − lo_k) / √(2π))`: its log mass at a row
    /// inside it (the part of `D` that does not depend on the row).
    base: Vec<f64>,
}

impl Coverage {
    /// The coverage of the rows `x [n, d]` (row-major) in the metric `scale [d]`: at most
    /// `max_boxes` boxes (module doc; never more than [`MAX_BOXES`]). `None` without rows, with `d = 0`, or with a non-finite
    /// value anywhere.
    pub fn of_rows(x: &[f64], scale: &[f64], max_boxes: usize) -> Option<Self> {
        let d = scale.len();
        if d == 0 || x.is_empty() || !x.len().is_multiple_of(d) || max_boxes == 0 {
            return None;
        }
        if !x.iter().chain(scale).all(|v| v.is_finite()) {
            return None;
        }
        let (n, max_boxes) = (x.len() / d, max_boxes.min(MAX_BOXES));
        let row = |i: usize| &x[i * d..(i + 1) * d];
        let mut leaves: Vec<Vec<usize>> = vec![(0..n).collect()];
        while leaves.len() < max_boxes {
            // The leaf with the most rows (the first of a tie) is cut, if it has two.
            let Some((at, _)) = leaves
                .iter()
                .enumerate()
                .filter(|(_, l)| l.len() >= 2)
                .max_by(|(i, a), (j, b)| a.len().cmp(&b.len()).then(j.cmp(i)))
            else {
                break;
            };
            let mut leaf = std::mem::take(&mut leaves[at]);
            let b = bounds(leaf.iter().map(|&i| row(i)), d);
            let k = (0..d)
                .max_by(|&a, &c| {
                    let wa = scale[a] * (b.hi[a] - b.lo[a]);
                    let wc = scale[c] * (b.hi[c] - b.lo[c]);
                    wa.total_cmp(&wc).then(c.cmp(&a))
                })
                .unwrap_or(0);
            // Sorted by input k (ties by row index), cut in half: deterministic.
            leaf.sort_by(|&i, &j| row(i)[k].total_cmp(&row(j)[k]).then(i.cmp(&j)));
            let right = leaf.split_off(leaf.len() / 2);
            leaves[at] = leaf;
            leaves.push(right);
        }
        let boxes = leaves
            .iter()
            .map(|l| bounds(l.iter().map(|&i| row(i)), d))
            .collect();
        Some(Self::with_base(scale.to_vec(), boxes))
    }

    /// A coverage from its parts (as a status carries them); `None` if a box's bounds are not
    /// `[d]` with `lo ≤ hi`, a box has no rows, there is no box or more than [`MAX_BOXES`],
    /// or a value is not finite.
    pub fn from_parts(scale: Vec<f64>, boxes: Vec<CoverBox>) -> Option<Self> {
        let d = scale.len();
        let ok = d > 0
            && !boxes.is_empty()
            && boxes.len() <= MAX_BOXES
            && scale.iter().all(|s| s.is_finite() && *s >= 0.0)
            && boxes.iter().all(|b| {
                b.rows > 0
                    && b.lo.len() == d
                    && b.hi.len() == d
                    && b.lo
                        .iter()
                        .zip(&b.hi)
                        .all(|(l, h)| l.is_finite() && h.is_finite() && l <= h)
            });
        ok.then(|| Self::with_base(scale, boxes))
    }

    /// The coverage of valid parts, each box's constant part of `D` computed once.
    fn with_base(scale: Vec<f64>, boxes: Vec<CoverBox>) -> Self {
        let base = boxes
            .iter()
            .map(|b| {
                let widths: f64 = (0..scale.len())
                    .map(|k| ((b.hi[k] - b.lo[k]) * scale[k] / SQRT_2PI).max(1.0).ln())
                    .sum();
                (b.rows as f64).ln() - widths
            })
            .collect();
        Self { scale, boxes, base }
    }

    /// Inputs per row, `d`.
    pub fn d(&self) -> usize {
        self.scale.len()
    }

    /// The metric's scale `[d]`.
    pub fn scale(&self) -> &[f64] {
        &self.scale
    }

    /// The boxes.
    pub fn boxes(&self) -> &[CoverBox] {
        &self.boxes
    }

    /// `D(x)` of the module doc (a log-sum-exp over the boxes); `∞` for a row of the wrong
    /// length.
    pub fn distance(&self, x: &[f64]) -> f64 {
        if x.len() != self.d() {
            return f64::INFINITY;
        }
        let mut ln_mass = [0.0; MAX_BOXES];
        let ln_mass = &mut ln_mass[..self.boxes.len().min(MAX_BOXES)];
        for ((l, b), base) in ln_mass.iter_mut().zip(&self.boxes).zip(&self.base) {
            let mut gap = 0.0;
            for (((v, lo), hi), s) in x.iter().zip(&b.lo).zip(&b.hi).zip(&self.scale) {
                let g = (lo - v).max(v - hi).max(0.0) * s;
                gap += g * g;
            }
            *l = base - 0.5 * gap;
        }
        let top = ln_mass.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if top == f64::NEG_INFINITY {
            return f64::INFINITY;
        }
        -(top + ln_mass.iter().map(|l| (l - top).exp()).sum::<f64>().ln())
    }
}

/// `√(2π)`: the kernel mass of one unit-lengthscale squared exponential along one input.
const SQRT_2PI: f64 = 2.506_628_274_631_000_7;

/// The bounds of some `[d]` rows (at least one).
fn bounds<'a>(rows: impl Iterator<Item = &'a [f64]>, d: usize) -> CoverBox {
    let mut b = CoverBox {
        lo: vec![f64::INFINITY; d],
        hi: vec![f64::NEG_INFINITY; d],
        rows: 0,
    };
    for r in rows {
        for ((lo, hi), v) in b.lo.iter_mut().zip(b.hi.iter_mut()).zip(r) {
            *lo = lo.min(*v);
            *hi = hi.max(*v);
        }
        b.rows += 1;
    }
    b
}

/// The agents asked about the query row `x [d]`, ascending: the `k` of the smallest
/// [`Coverage::distance`] among `coverages` (one per agent, `None` = no coverage, distance
/// ∞; ties by index). Every agent when `k ≥ coverages.len()` or when no agent has coverage.
pub fn route(coverages: &[Option<&Coverage>], x: &[f64], k: usize) -> Vec<usize> {
    let n = coverages.len();
    if k >= n || coverages.iter().all(Option::is_none) {
        return (0..n).collect();
    }
    let mut keyed: Vec<(f64, usize)> = coverages
        .iter()
        .enumerate()
        .map(|(i, c)| (c.map_or(f64::INFINITY, |c| c.distance(x)), i))
        .collect();
    let by = |a: &(f64, usize), b: &(f64, usize)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
    if k > 0 {
        keyed.select_nth_unstable_by(k - 1, by);
    }
    let mut out: Vec<usize> = keyed[..k].iter().map(|&(_, i)| i).collect();
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn cloud(rng: &mut Rng, n: usize, centre: [f64; 2], spread: f64) -> Vec<f64> {
        (0..n)
            .flat_map(|_| {
                [
                    centre[0] + spread * rng.normal(),
                    centre[1] + spread * rng.normal(),
                ]
            })
            .collect()
    }

    #[test]
    fn boxes_hold_every_row_and_count_them() {
        let mut rng = Rng::new(3, 0);
        let x = cloud(&mut rng, 101, [0.0, 0.0], 1.0);
        let c = Coverage::of_rows(&x, &[1.0, 2.0], MAX_BOXES).expect("coverage");
        assert_eq!(c.boxes().len(), MAX_BOXES);
        assert_eq!(c.boxes().iter().map(|b| b.rows).sum::<usize>(), 101);
        // Every row lies in some box.
        for r in x.chunks_exact(2) {
            let inside = c
                .boxes()
                .iter()
                .any(|b| (0..2).all(|k| b.lo[k] <= r[k] && r[k] <= b.hi[k]));
            assert!(inside, "{r:?} in no box");
        }
        // Fewer rows than boxes: one box per row at most.
        let two = Coverage::of_rows(&x[..4], &[1.0, 1.0], MAX_BOXES).expect("coverage");
        assert_eq!(two.boxes().len(), 2);
        // A row that is a box of its own carries at least its own mass, 1.
        assert!(two.distance(&x[..2]) <= 0.0);
    }

    #[test]
    fn bad_rows_give_no_coverage() {
        assert!(Coverage::of_rows(&[], &[1.0], 4).is_none());
        assert!(Coverage::of_rows(&[1.0, f64::NAN], &[1.0, 1.0], 4).is_none());
        assert!(Coverage::of_rows(&[1.0, 2.0, 3.0], &[1.0, 1.0], 4).is_none());
        assert!(Coverage::from_parts(
            vec![1.0],
            vec![CoverBox {
                lo: vec![1.0],
                hi: vec![0.0],
                rows: 1
            }]
        )
        .is_none());
    }

    #[test]
    fn the_distance_is_minus_the_log_of_the_expected_kernel_mass() {
        let c = Coverage::from_parts(
            vec![2.0, 0.5],
            vec![CoverBox {
                lo: vec![0.0, 0.0],
                hi: vec![1.0, 20.0],
                rows: 4,
            }],
        )
        .expect("coverage");
        // Input 0 is 2 wide in the metric (< √(2π): every row counts), input 1 is 10 wide.
        let inside = -(4.0f64.ln() - (10.0 / SQRT_2PI).ln());
        assert!((c.distance(&[0.5, 1.0]) - inside).abs() < 1e-12);
        // 1.5 beyond hi in input 0 (scale 2), 2 below lo in input 1 (scale 0.5).
        let want = inside + 0.5 * (3.0f64.powi(2) + 1.0);
        assert!((c.distance(&[2.5, -2.0]) - want).abs() < 1e-12);
        assert_eq!(c.distance(&[0.0]), f64::INFINITY);
        // Two boxes: their masses add.
        let b = |lo: f64, rows| CoverBox {
            lo: vec![lo],
            hi: vec![lo],
            rows,
        };
        let two = Coverage::from_parts(vec![1.0], vec![b(0.0, 3), b(2.0, 5)]).expect("coverage");
        let mass = 3.0 * (-0.5f64).exp() + 5.0 * (-0.5f64).exp();
        assert!((two.distance(&[1.0]) + mass.ln()).abs() < 1e-12);
        // Far away, no underflow: the ranking still holds.
        assert!(two.distance(&[100.0]) < two.distance(&[-100.0]));
        assert!(two.distance(&[1e6]).is_finite());
    }

    #[test]
    fn routing_asks_the_agents_that_hold_rows_near_the_point() {
        let mut rng = Rng::new(5, 0);
        let centres = [[0.0, 0.0], [5.0, 0.0], [0.0, 5.0], [5.0, 5.0]];
        let covs: Vec<Coverage> = centres
            .iter()
            .map(|&c| {
                Coverage::of_rows(&cloud(&mut rng, 40, c, 0.5), &[1.0, 1.0], MAX_BOXES)
                    .expect("coverage")
            })
            .collect();
        let refs: Vec<Option<&Coverage>> = covs.iter().map(Some).collect();
        assert_eq!(route(&refs, &[5.1, 4.8], 1), vec![3]);
        assert_eq!(route(&refs, &[4.9, 0.2], 1), vec![1]);
        assert_eq!(route(&refs, &[2.5, 0.1], 2), vec![0, 1]);
        // K at or past the agents, or no coverage anywhere: everyone, in order.
        assert_eq!(route(&refs, &[5.1, 4.8], 4), vec![0, 1, 2, 3]);
        assert_eq!(route(&[None, None, None], &[0.0, 0.0], 1), vec![0, 1, 2]);
        // An agent without coverage is asked last.
        let some = [None, Some(&covs[0]), None];
        assert_eq!(route(&some, &[5.0, 5.0], 2), vec![0, 1]);
    }
}
