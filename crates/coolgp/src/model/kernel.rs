//! The unit squared-exponential kernel of the standardized domain (spec §1).

use faer::{Mat, MatRef};

/// `k_uu(z, z') = exp(−½‖z − z'‖²)`: lengthscale 1, variance 1.
pub fn k_uu(a: &[f64], b: &[f64]) -> f64 {
    (-0.5 * sqdist(a, b)).exp()
}

/// `‖a − b‖²`, computed from differences (no expansion trick).
pub fn sqdist(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// Row `i` of a matrix as an owned vector.
pub fn row(a: MatRef<'_, f64>, i: usize) -> Vec<f64> {
    (0..a.ncols()).map(|j| a[(i, j)]).collect()
}

/// `K = k_uu(Z, Z) + ε I` (m×m), exactly symmetric.
pub fn gram(z: MatRef<'_, f64>, jitter: f64) -> Mat<f64> {
    let m = z.nrows();
    let rows: Vec<Vec<f64>> = (0..m).map(|i| row(z, i)).collect();
    let mut k = Mat::zeros(m, m);
    for j in 0..m {
        k[(j, j)] = 1.0 + jitter;
        for i in (j + 1)..m {
            let v = k_uu(&rows[i], &rows[j]);
            k[(i, j)] = v;
            k[(j, i)] = v;
        }
    }
    k
}
