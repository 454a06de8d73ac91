//! The in-memory table: inputs, targets, column names and optional routing keys.

use coolgp::faer::Mat;
use coolgp::rng::Rng;

/// RNG stream used by [`Dataset::split`] (so a split seed never collides with other uses).
const SPLIT_STREAM: u64 = 0x5b1_1700;

/// A regression table: `n` rows of `d` inputs and one target.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Inputs, `n × d` (row `i` is one input point).
    pub x: Mat<f64>,
    /// Targets, length `n`.
    pub y: Vec<f64>,
    /// Names of the `d` input columns, in column order of `x`.
    pub input_names: Vec<String>,
    /// Name of the target column.
    pub target_name: String,
    /// Routing key per row (e.g. a station id: one key = one agent), if the data have one.
    pub keys: Option<Vec<String>>,
}

impl Dataset {
    /// Number of rows `n`.
    pub fn len(&self) -> usize {
        self.y.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }

    /// Input dimension `d`.
    pub fn dim(&self) -> usize {
        self.x.ncols()
    }

    /// The inputs of row `i` as a vector.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn row(&self, i: usize) -> Vec<f64> {
        (0..self.dim()).map(|j| self.x[(i, j)]).collect()
    }

    /// The rows `idx` (in that order, repeats allowed), with names and keys carried over.
    ///
    /// # Panics
    /// If an index is `>= self.len()` (like slice indexing).
    pub fn select(&self, idx: &[usize]) -> Dataset {
        let n = self.len();
        if let Some(&bad) = idx.iter().find(|&&i| i >= n) {
            panic!("Dataset::select: row index {bad} out of range for {n} rows");
        }
        Dataset {
            x: Mat::from_fn(idx.len(), self.dim(), |i, j| self.x[(idx[i], j)]),
            y: idx.iter().map(|&i| self.y[i]).collect(),
            input_names: self.input_names.clone(),
            target_name: self.target_name.clone(),
            keys: self
                .keys
                .as_ref()
                .map(|k| idx.iter().map(|&i| k[i].clone()).collect()),
        }
    }

    /// A random train/test split: `round(test_fraction · n)` rows go to the test set.
    ///
    /// The test rows are chosen by a seeded shuffle ([`coolgp::rng::Rng`]), so the same seed
    /// gives the same split on every platform. Within each part the rows keep their original
    /// relative order (important for time-ordered station data); shuffle afterwards if a
    /// random stream order is wanted. `test_fraction` is clamped to `[0, 1]`; NaN counts as 0.
    pub fn split(&self, test_fraction: f64, seed: u64) -> (Dataset, Dataset) {
        let n = self.len();
        let frac = if test_fraction.is_nan() {
            0.0
        } else {
            test_fraction.clamp(0.0, 1.0)
        };
        // frac ∈ [0, 1], so the product is in [0, n] and the cast is exact enough.
        let n_test = ((frac * n as f64).round() as usize).min(n);
        let mut perm: Vec<usize> = (0..n).collect();
        Rng::new(seed, SPLIT_STREAM).shuffle(&mut perm);
        let mut test_idx = perm[..n_test].to_vec();
        let mut train_idx = perm[n_test..].to_vec();
        test_idx.sort_unstable();
        train_idx.sort_unstable();
        (self.select(&train_idx), self.select(&test_idx))
    }

    /// The first `min(n, len)` rows.
    pub fn head(&self, n: usize) -> Dataset {
        let idx: Vec<usize> = (0..n.min(self.len())).collect();
        self.select(&idx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy(n: usize) -> Dataset {
        Dataset {
            x: Mat::from_fn(n, 2, |i, j| (i * 10 + j) as f64),
            y: (0..n).map(|i| i as f64).collect(),
            input_names: vec!["a".into(), "b".into()],
            target_name: "t".into(),
            keys: Some((0..n).map(|i| format!("k{}", i % 3)).collect()),
        }
    }

    #[test]
    fn select_and_head() {
        let d = toy(5);
        let s = d.select(&[4, 1, 1]);
        assert_eq!(s.len(), 3);
        assert_eq!(s.dim(), 2);
        assert_eq!(s.y, vec![4.0, 1.0, 1.0]);
        assert_eq!(s.x[(0, 1)], 41.0);
        assert_eq!(
            s.keys.as_deref(),
            Some(&["k1".to_string(), "k1".into(), "k1".into()][..])
        );
        assert_eq!(d.head(2).y, vec![0.0, 1.0]);
        assert_eq!(d.head(99).len(), 5);
        assert_eq!(d.row(3), vec![30.0, 31.0]);
    }

    #[test]
    fn split_is_deterministic_and_partitions() {
        let d = toy(101);
        let (tr1, te1) = d.split(0.2, 7);
        let (tr2, te2) = d.split(0.2, 7);
        let (_, te3) = d.split(0.2, 8);
        assert_eq!(te1.len(), 20);
        assert_eq!(tr1.len(), 81);
        assert_eq!(tr1.y, tr2.y);
        assert_eq!(te1.y, te2.y);
        assert_ne!(te1.y, te3.y);
        // a partition of the rows, each part in original order
        let mut all: Vec<f64> = tr1.y.iter().chain(te1.y.iter()).copied().collect();
        assert!(tr1.y.windows(2).all(|w| w[0] < w[1]));
        assert!(te1.y.windows(2).all(|w| w[0] < w[1]));
        all.sort_by(f64::total_cmp);
        assert_eq!(all, d.y);
        // x rows and keys follow y
        for i in 0..te1.len() {
            let r = te1.y[i] as usize;
            assert_eq!(te1.x[(i, 0)], (r * 10) as f64);
            assert_eq!(
                te1.keys.as_ref().map(|k| k[i].clone()),
                Some(format!("k{}", r % 3))
            );
        }
        assert_eq!(d.split(f64::NAN, 1).1.len(), 0);
        assert_eq!(d.split(2.0, 1).1.len(), 101);
    }
}
