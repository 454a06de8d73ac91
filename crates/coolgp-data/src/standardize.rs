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

/// A group whose rows widen the target's spread by more than this factor (the spread with the
/// group over the spread without it) is left out of the fleet's target scale.
pub const SCALE_LEVERAGE: f64 = 1.25;

/// The fewest groups for which [`scale_outliers`] judges leverage: with fewer, one group is a
/// large share of the fleet and may legitimately set its spread.
pub const SCALE_MIN_GROUPS: usize = 5;

/// The groups (agents) whose rows alone would set the fleet's target scale, to be left out of it.
///
/// A broken sensor among ten (pure noise of σ = 10 on a field of σ ≈ 0.8, a ×10 unit mix-up,
/// an offset of 5) widens the pooled spread of y 1.5–4×, and every member's standardized
/// data with it (issue 29, docs/MEMBERS.md §4). With `s_K` the population standard deviation of
/// the rows of the kept groups `K` (all at first): while `K` holds at least
/// [`SCALE_MIN_GROUPS`] groups, the group `g` with the largest `s_K / s_{K∖g}` is left out if that
/// ratio exceeds [`SCALE_LEVERAGE`] and the groups left out stay fewer than half the groups
/// with rows. Honest fleets measured 1.01–1.07 (wind and air by station, airline and traffic
/// by 100 regions), so they keep every group and their scale bit for bit.
///
/// `y` (n), `groups` (n, each `< n_groups`). Returns the groups left out, in the order found.
pub fn scale_outliers(y: &[f64], groups: &[usize], n_groups: usize) -> Vec<usize> {
    // Per-group count, sum and sum of squares (y is already on unit scale: no cancellation).
    let mut n = vec![0.0f64; n_groups];
    let mut s1 = vec![0.0f64; n_groups];
    let mut s2 = vec![0.0f64; n_groups];
    for (&v, &g) in y.iter().zip(groups) {
        if g < n_groups && v.is_finite() {
            n[g] += 1.0;
            s1[g] += v;
            s2[g] += v * v;
        }
    }
    let with_rows: Vec<usize> = (0..n_groups).filter(|&g| n[g] > 0.0).collect();
    let sd = |kept: &dyn Fn(usize) -> bool| {
        let (mut nn, mut a, mut b) = (0.0, 0.0, 0.0);
        for &g in with_rows.iter().filter(|&&g| kept(g)) {
            nn += n[g];
            a += s1[g];
            b += s2[g];
        }
        let m = a / nn;
        (b / nn - m * m).max(0.0).sqrt()
    };
    let mut out: Vec<usize> = Vec::new();
    loop {
        let kept: Vec<usize> = with_rows
            .iter()
            .copied()
            .filter(|g| !out.contains(g))
            .collect();
        if kept.len() < SCALE_MIN_GROUPS || 2 * (out.len() + 1) >= with_rows.len() {
            return out;
        }
        let all = sd(&|g| !out.contains(&g));
        let worst = kept
            .iter()
            .map(|&h| (h, all / sd(&|g| g != h && !out.contains(&g))))
            .filter(|(_, r)| r.is_finite())
            .max_by(|a, b| a.1.total_cmp(&b.1));
        match worst {
            Some((g, r)) if r > SCALE_LEVERAGE => out.push(g),
            _ => return out,
        }
    }
}

impl Standardizer {
    /// Re-fits the target's mean and scale on the standardized values `y` of the rows `keep`
    /// selects, and returns `(μ, σ)` with which every standardized value moves to the new
    /// scale: `y ← (y − μ)/σ` (the original units are unchanged:
    /// `y_mean ← y_mean + μ·y_std`, `y_std ← σ·y_std`).
    pub fn refit_y(&mut self, y: &[f64], keep: impl Fn(usize) -> bool) -> (f64, f64) {
        let kept = || {
            y.iter()
                .enumerate()
                .filter(|(i, _)| keep(*i))
                .map(|(_, v)| *v)
        };
        let k = kept().count();
        if k == 0 {
            return (0.0, 1.0);
        }
        let (mu, sigma) = mean_std(kept(), k);
        self.y_mean += mu * self.y_std;
        self.y_std *= sigma;
        (mu, sigma)
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

    /// Ten groups of a unit-scale field; group 9 replaced by `fault`.
    fn ten_groups(fault: impl Fn(f64, usize) -> f64) -> (Vec<f64>, Vec<usize>) {
        let (mut y, mut g) = (Vec::new(), Vec::new());
        for grp in 0..10 {
            for i in 0..200 {
                let v = ((i * 7 + grp * 13) as f64 * 0.37).sin() + 0.5 * ((i as f64) * 0.11).cos();
                y.push(if grp == 9 { fault(v, i) } else { v });
                g.push(grp);
            }
        }
        (y, g)
    }

    #[test]
    fn a_fleet_scale_leaves_out_a_group_that_alone_widens_it() {
        let (honest, g) = ten_groups(|v, _| v);
        assert!(scale_outliers(&honest, &g, 10).is_empty());
        let noise = |_: f64, i: usize| 10.0 * ((i * 31) as f64 * 0.77).sin();
        for (name, f) in [
            (
                "offset",
                &(|v: f64, _| v + 5.0) as &dyn Fn(f64, usize) -> f64,
            ),
            ("scaled", &|v, _| 10.0 * v),
            ("noise", &noise),
            ("stuck", &|_, _| 3.0),
        ] {
            let (y, g) = ten_groups(f);
            assert_eq!(scale_outliers(&y, &g, 10), vec![9], "{name}");
        }
        // Two faulty groups of ten: both found; five of ten never are (half is no minority).
        let (mut y, g) = ten_groups(|v, _| v + 5.0);
        for (v, &grp) in y.iter_mut().zip(&g) {
            if grp == 3 {
                *v *= 10.0;
            }
        }
        let mut two = scale_outliers(&y, &g, 10);
        two.sort_unstable();
        assert_eq!(two, vec![3, 9]);
        let half: Vec<f64> = y
            .iter()
            .zip(&g)
            .map(|(v, &grp)| if grp >= 5 { v + 50.0 } else { *v })
            .collect();
        assert!(scale_outliers(&half, &g, 10).is_empty());
        // Four groups are too few to judge.
        let few: Vec<usize> = g.iter().map(|&grp| grp % 4).collect();
        let (y, _) = ten_groups(|v, _| v);
        assert!(scale_outliers(&y, &few, 4).is_empty());
    }

    #[test]
    fn refit_y_keeps_the_original_units() {
        let d = toy();
        let mut s = Standardizer::fit(&d).expect("fit");
        let y: Vec<f64> = d.y.iter().map(|&v| s.scale_y(v)).collect();
        let before = s.clone();
        let (mu, sigma) = s.refit_y(&y, |i| i % 2 == 0);
        for (&v, &orig) in y.iter().zip(&d.y) {
            let moved = (v - mu) / sigma;
            assert!((s.unscale_y(moved) - orig).abs() < 1e-9);
            assert!((before.unscale_y(v) - orig).abs() < 1e-9);
        }
        let kept: Vec<f64> = y.iter().step_by(2).map(|v| (v - mu) / sigma).collect();
        let m = kept.iter().sum::<f64>() / kept.len() as f64;
        let var = kept.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / kept.len() as f64;
        assert!(m.abs() < 1e-12 && (var - 1.0).abs() < 1e-12, "{m} {var}");
    }
}
