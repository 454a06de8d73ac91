//! Regions of the input space for `--regions COLS` (issue 19): seeded k-means over chosen
//! (standardized) columns, so that each agent patrols one compact region — what a fleet of
//! robots mapping areas, or of stations, has and a random split of the rows throws away.
//!
//! [`Regions::fit`] is k-means++ initialization (Arthur & Vassilvitskii 2007) followed by at
//! most [`LLOYD_ITERATIONS`] Lloyd iterations on at most [`FIT_ROWS`] rows (a seeded sample:
//! the centres of a large table are settled long before every row is seen); every row then
//! belongs to the region of its nearest centre ([`Regions::nearest`]). Deterministic for a
//! seed whatever the thread count: the rows are assigned in parallel, each independently, and
//! every sum runs in row order.

use coolgp::rng::Rng;
use rayon::prelude::*;

use crate::SimError;

/// Most rows the centres are fitted on (a seeded sample of a larger table).
pub const FIT_ROWS: usize = 50_000;

/// Most Lloyd iterations (fewer if the assignment stops changing).
pub const LLOYD_ITERATIONS: usize = 25;

/// RNG stream of the regions (the run's seed picks the sample and the k-means++ draws).
const REGIONS_STREAM: u64 = 0x2E_6105;

/// `k` centres in a `dim`-dimensional space: the regions of `--regions`.
#[derive(Clone, Debug, PartialEq)]
pub struct Regions {
    /// The centres, row-major `[k, dim]`.
    centres: Vec<f64>,
    /// Dimension of a point.
    dim: usize,
}

impl Regions {
    /// Fits `k` regions to the `n = points.len() / dim` points (row-major `[n, dim]`) by
    /// seeded k-means: k-means++ seeding, then Lloyd iterations until no point changes region
    /// or [`LLOYD_ITERATIONS`]; on more than [`FIT_ROWS`] points, on a seeded sample of them.
    /// A centre that loses every point keeps its place.
    ///
    /// # Errors
    /// [`SimError::Config`] if `k` is 0, `dim` is 0, `points` is not a whole number of rows,
    /// or there are fewer points than regions.
    pub fn fit(points: &[f64], dim: usize, k: usize, seed: u64) -> Result<Self, SimError> {
        if dim == 0 || !points.len().is_multiple_of(dim) {
            return Err(SimError::Config(format!(
                "regions: {} values are not rows of {dim} columns",
                points.len()
            )));
        }
        let n = points.len() / dim;
        if k == 0 || k > n {
            return Err(SimError::Config(format!(
                "--regions: {k} regions (one per agent, --agents) for {n} training rows; \
                 give at most {n} agents"
            )));
        }
        let mut rng = Rng::new(seed, REGIONS_STREAM);
        let sample: Vec<f64> = if n > FIT_ROWS {
            let mut idx: Vec<usize> = (0..n).collect();
            rng.shuffle(&mut idx);
            idx.truncate(FIT_ROWS);
            idx.sort_unstable();
            idx.iter()
                .flat_map(|&i| &points[i * dim..(i + 1) * dim])
                .copied()
                .collect()
        } else {
            points.to_vec()
        };
        let mut regions = Self {
            centres: plus_plus(&sample, dim, k, &mut rng),
            dim,
        };
        regions.lloyd(&sample);
        Ok(regions)
    }

    /// Number of regions k.
    pub fn k(&self) -> usize {
        self.centres.len() / self.dim
    }

    /// The centres, row-major `[k, dim]`.
    pub fn centres(&self) -> &[f64] {
        &self.centres
    }

    /// The region of point `p` (`dim` values): its nearest centre (Euclidean; ties: the
    /// lowest index).
    ///
    /// # Panics
    /// If `p` does not have `dim` values (our own misuse).
    #[track_caller]
    pub fn nearest(&self, p: &[f64]) -> usize {
        assert_eq!(p.len(), self.dim, "a point of {} values", self.dim);
        nearest(&self.centres, self.dim, p).0
    }

    /// The region of each row of `points` (row-major `[n, dim]`), in parallel.
    ///
    /// # Panics
    /// If `points` is not a whole number of rows (our own misuse).
    #[track_caller]
    pub fn assign(&self, points: &[f64]) -> Vec<usize> {
        assert_eq!(points.len() % self.dim, 0, "rows of {} values", self.dim);
        points
            .par_chunks(self.dim)
            .map(|p| nearest(&self.centres, self.dim, p).0)
            .collect()
    }

    /// Lloyd iterations on `points`: assign, move each centre to its points' mean.
    fn lloyd(&mut self, points: &[f64]) {
        let (dim, k) = (self.dim, self.k());
        let mut labels = vec![usize::MAX; points.len() / dim];
        for _ in 0..LLOYD_ITERATIONS {
            let next = self.assign(points);
            if next == labels {
                break;
            }
            labels = next;
            let mut sums = vec![0.0; k * dim];
            let mut counts = vec![0usize; k];
            for (p, &c) in points.chunks(dim).zip(&labels) {
                counts[c] += 1;
                for (s, v) in sums[c * dim..(c + 1) * dim].iter_mut().zip(p) {
                    *s += v;
                }
            }
            for c in (0..k).filter(|&c| counts[c] > 0) {
                let inv = 1.0 / counts[c] as f64;
                for (z, s) in self.centres[c * dim..(c + 1) * dim]
                    .iter_mut()
                    .zip(&sums[c * dim..(c + 1) * dim])
                {
                    *z = s * inv;
                }
            }
        }
    }
}

/// The nearest of the centres (row-major `[k, dim]`) to `p` and its squared distance.
fn nearest(centres: &[f64], dim: usize, p: &[f64]) -> (usize, f64) {
    let mut best = (0, f64::INFINITY);
    for (c, z) in centres.chunks(dim).enumerate() {
        let d2: f64 = z.iter().zip(p).map(|(a, b)| (a - b) * (a - b)).sum();
        if d2 < best.1 {
            best = (c, d2);
        }
    }
    best
}

/// k-means++ seeding: the first centre a uniform point, each next one a point drawn with
/// probability proportional to its squared distance to the nearest centre so far (uniform
/// when every point sits on a centre). Returns the centres, row-major `[k, dim]`.
fn plus_plus(points: &[f64], dim: usize, k: usize, rng: &mut Rng) -> Vec<f64> {
    let n = points.len() / dim;
    let row = |i: usize| &points[i * dim..(i + 1) * dim];
    let mut centres = row(rng.below(n)).to_vec();
    let mut d2: Vec<f64> = points
        .par_chunks(dim)
        .map(|p| nearest(&centres, dim, p).1)
        .collect();
    while centres.len() < k * dim {
        let total: f64 = d2.iter().sum();
        let pick = if total > 0.0 && total.is_finite() {
            let mut target = rng.uniform() * total;
            let mut pick = n - 1;
            for (i, &w) in d2.iter().enumerate() {
                if target < w {
                    pick = i;
                    break;
                }
                target -= w;
            }
            pick
        } else {
            rng.below(n)
        };
        let z = row(pick).to_vec();
        d2.par_iter_mut()
            .zip(points.par_chunks(dim))
            .for_each(|(d, p)| {
                let e: f64 = z.iter().zip(p).map(|(a, b)| (a - b) * (a - b)).sum();
                *d = d.min(e);
            });
        centres.extend_from_slice(&z);
    }
    centres
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two tight clusters in 2-d, around (−5, 0) and (+5, 1), interleaved in row order.
    fn two_clusters() -> Vec<f64> {
        (0..200)
            .flat_map(|i| {
                let jitter = ((i * 37 % 11) as f64 - 5.0) * 0.05;
                let (cx, cy) = if i % 2 == 0 { (-5.0, 0.0) } else { (5.0, 1.0) };
                [cx + jitter, cy - jitter]
            })
            .collect()
    }

    #[test]
    fn a_two_cluster_set_is_split_along_its_clusters() {
        let pts = two_clusters();
        for seed in 0..10 {
            let r = Regions::fit(&pts, 2, 2, seed).expect("fits");
            let labels = r.assign(&pts);
            let (even, odd) = (labels[0], labels[1]);
            assert_ne!(even, odd, "seed {seed}");
            for (i, &l) in labels.iter().enumerate() {
                assert_eq!(
                    l,
                    if i % 2 == 0 { even } else { odd },
                    "seed {seed} row {i}"
                );
            }
            // The centres are the clusters' means.
            let c = &r.centres()[even * 2..even * 2 + 2];
            assert!((c[0] + 5.0).abs() < 0.1 && c[1].abs() < 0.1, "{c:?}");
            assert_eq!(r.nearest(&[4.0, 2.0]), odd);
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_regions() {
        let pts: Vec<f64> = (0..3_000)
            .map(|i| ((i * 7919 % 1009) as f64 * 0.37).sin())
            .collect();
        let a = Regions::fit(&pts, 3, 17, 4).expect("fits");
        let b = Regions::fit(&pts, 3, 17, 4).expect("fits");
        assert_eq!(a, b);
        assert_eq!(a.k(), 17);
        let c = Regions::fit(&pts, 3, 17, 5).expect("fits");
        assert_ne!(a, c, "another seed, other regions");
    }

    #[test]
    fn more_regions_than_rows_are_refused() {
        let e = Regions::fit(&[0.0, 1.0, 2.0], 1, 4, 0).expect_err("k > n");
        assert!(e.to_string().contains("4 regions"), "{e}");
        assert!(
            Regions::fit(&[0.0, 1.0, 2.0], 2, 1, 0).is_err(),
            "ragged rows"
        );
    }
}
