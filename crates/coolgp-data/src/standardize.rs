//! Standardization: centre and scale inputs per column, and the target on one fleet-wide scale.
//!
//! The model has no bias term and a zero-mean, unit-scale latent function (spec §1), so inputs
//! must be centred (a translation is not absorbed by W) and y must be on one scale and offset
//! shared by the whole fleet (a per-agent offset would be read as signal). Fit on the
//! *training* data only and apply the same statistics to the test data.

use coolgp::faer::Mat;

use crate::error::{DataError, Result};
use crate::table::Dataset;

/// Per-column input statistics and a single target scale, fitted on training data.
#[derive(Debug, Clone, PartialEq)]
pub struct Standardizer {
    /// Mean of each input column.
    pub mean: Vec<f64>,
    /// Standard deviation (population, divisor n) of each input column; 1 for a column with
    /// (numerically) zero variance.
    pub std: Vec<f64>,
    /// Mean of the target.
    pub y_mean: f64,
    /// Standard deviation of the target; 1 if it has (numerically) zero variance.
    pub y_std: f64,
}

/// Mean and population std of `values` (two passes); std 1 if the spread is at rounding level.
fn mean_std(values: impl Iterator<Item = f64> + Clone, n: usize) -> (f64, f64) {
    let nf = n as f64;
    let mean = values.clone().sum::<f64>() / nf;
    let var = values.map(|v| (v - mean) * (v - mean)).sum::<f64>() / nf;
    let std = var.sqrt();
    // A constant column gives a std of a few ulps of |mean| from rounding: treat it as zero.
    if std > 1e-12 * mean.abs().max(1.0) {
        (mean, std)
    } else {
        (mean, 1.0)
    }
}

impl Standardizer {
    /// Fits the statistics of `train`.
    ///
    /// # Errors
    /// [`DataError::EmptyDataset`] if `train` has no rows.
    pub fn fit(train: &Dataset) -> Result<Self> {
        Self::fit_xy(&train.x, &train.y)
    }

    /// Fits the statistics of inputs `x` (n×d) and targets `y` (length n).
    ///
    /// # Errors
    /// [`DataError::EmptyDataset`] if there are no rows; [`DataError::DimensionMismatch`] if
    /// `x` and `y` have different lengths.
    pub fn fit_xy(x: &Mat<f64>, y: &[f64]) -> Result<Self> {
        let n = y.len();
        if n == 0 {
            return Err(DataError::EmptyDataset(
                "cannot fit a standardizer on zero rows".into(),
            ));
        }
        if x.nrows() != n {
            return Err(DataError::DimensionMismatch(format!(
                "x has {} rows but y has {n} values",
                x.nrows()
            )));
        }
        let (mean, std) = (0..x.ncols())
            .map(|j| mean_std(x.col_as_slice(j).iter().copied(), n))
            .unzip();
        let (y_mean, y_std) = mean_std(y.iter().copied(), n);
        Ok(Self {
            mean,
            std,
            y_mean,
            y_std,
        })
    }

    /// Input dimension `d` the statistics were fitted on.
    pub fn dim(&self) -> usize {
        self.mean.len()
    }

    /// Standardizes `data` in place: `x ← (x − mean)/std` per column, `y ← (y − y_mean)/y_std`.
    ///
    /// # Errors
    /// [`DataError::DimensionMismatch`] if `data` has another input dimension.
    pub fn apply(&self, data: &mut Dataset) -> Result<()> {
        self.apply_x(&mut data.x)?;
        for v in &mut data.y {
            *v = self.scale_y(*v);
        }
        Ok(())
    }

    /// Standardizes the inputs `x` (n×d) in place.
    ///
    /// # Errors
    /// [`DataError::DimensionMismatch`] if `x` does not have `d` columns.
    pub fn apply_x(&self, x: &mut Mat<f64>) -> Result<()> {
        if x.ncols() != self.dim() {
            return Err(DataError::DimensionMismatch(format!(
                "standardizer fitted on {} inputs, data have {}",
                self.dim(),
                x.ncols()
            )));
        }
        for j in 0..x.ncols() {
            let (m, s) = (self.mean[j], self.std[j]);
            for v in x.col_as_slice_mut(j) {
                *v = (*v - m) / s;
            }
        }
        Ok(())
    }

    /// One target value to the standardized scale: `(v − y_mean)/y_std`.
    pub fn scale_y(&self, v: f64) -> f64 {
        (v - self.y_mean) / self.y_std
    }

    /// A standardized prediction back to original units: `v·y_std + y_mean`.
    pub fn unscale_y(&self, v: f64) -> f64 {
        v * self.y_std + self.y_mean
    }

    /// A standardized standard deviation (or RMSE) back to original units: `s·y_std`.
    pub fn unscale_std(&self, s: f64) -> f64 {
        s * self.y_std
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy() -> Dataset {
        Dataset {
            x: Mat::from_fn(50, 3, |i, j| match j {
                0 => i as f64 * 3.0 + 100.0,
                1 => 7.25, // constant
                _ => ((i * 37) % 11) as f64 - 4.0,
            }),
            y: (0..50)
                .map(|i| (i as f64 * 0.7).sin() * 20.0 + 5.0)
                .collect(),
            input_names: vec!["a".into(), "b".into(), "c".into()],
            target_name: "y".into(),
            keys: None,
        }
    }

    #[test]
    fn round_trip_and_moments() {
        let orig = toy();
        let s = Standardizer::fit(&orig).expect("fit");
        assert_eq!(s.std[1], 1.0, "zero-variance column gets std 1");
        let mut d = orig.clone();
        s.apply(&mut d).expect("apply");
        for j in [0, 2] {
            let c = d.x.col_as_slice(j);
            let m = c.iter().sum::<f64>() / 50.0;
            let v = c.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / 50.0;
            assert!(
                m.abs() < 1e-12 && (v - 1.0).abs() < 1e-12,
                "col {j}: {m} {v}"
            );
        }
        assert!(d.x.col_as_slice(1).iter().all(|&v| v == 0.0));
        let ym = d.y.iter().sum::<f64>() / 50.0;
        assert!(ym.abs() < 1e-12);
        for (a, b) in d.y.iter().zip(&orig.y) {
            assert!((s.unscale_y(*a) - b).abs() < 1e-12);
            assert!((s.scale_y(*b) - a).abs() < 1e-12);
        }
        assert!((s.unscale_std(1.0) - s.y_std).abs() < 1e-15);
        // an RMSE in standardized units maps to original units by y_std
        let rmse_std = 0.5;
        assert!((s.unscale_std(rmse_std) - 0.5 * s.y_std).abs() < 1e-12);
    }

    #[test]
    fn errors() {
        let d = toy();
        assert!(matches!(
            Standardizer::fit(&d.head(0)),
            Err(DataError::EmptyDataset(_))
        ));
        let s = Standardizer::fit(&d).expect("fit");
        let mut other = Mat::<f64>::zeros(3, 2);
        assert!(matches!(
            s.apply_x(&mut other),
            Err(DataError::DimensionMismatch(_))
        ));
        let single = d.head(1);
        let s1 = Standardizer::fit(&single).expect("fit one row");
        assert_eq!(s1.std, vec![1.0; 3]);
        assert_eq!(s1.y_std, 1.0);
    }
}
