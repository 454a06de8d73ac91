//! The fleet-wide standardization file (`--standardize FILE`).
//!
//! The model has no bias and a unit-scale latent function (spec §1): inputs must be centred
//! and scaled **the same way at every agent**, and y must be on one fleet-wide scale. A node
//! cannot fit these statistics on its own stream without breaking fusion, so the fleet shares
//! one JSON file:
//!
//! ```json
//! { "mean": [0.1, 2.0], "std": [1.5, 0.3], "y_mean": 10.0, "y_std": 2.5 }
//! ```
//!
//! Rows are standardized before they are absorbed; predictions are returned in original units.
//! Without the file, raw values are used (fine when the data is already on unit scale).

use std::path::Path;

use coolgp_data::Standardizer;
use serde::{Deserialize, Serialize};

use crate::error::{NodeError, Result};

#[derive(Serialize, Deserialize)]
struct File {
    mean: Vec<f64>,
    std: Vec<f64>,
    y_mean: f64,
    y_std: f64,
}

/// Reads and checks a standardization file for `d` input columns.
///
/// # Errors
/// [`NodeError::Io`] or [`NodeError::Config`] (wrong length, non-finite, non-positive std).
pub fn load(path: &Path, d: usize) -> Result<Standardizer> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| NodeError::io("reading standardization", path, e))?;
    let f: File = serde_json::from_str(&text)
        .map_err(|e| NodeError::Config(format!("{}: {e}", path.display())))?;
    let bad = |why: &str| NodeError::Config(format!("{}: {why}", path.display()));
    if f.mean.len() != d || f.std.len() != d {
        return Err(bad(&format!(
            "mean and std need {d} values (one per input column), found {} and {}",
            f.mean.len(),
            f.std.len()
        )));
    }
    let finite = f
        .mean
        .iter()
        .chain(&f.std)
        .chain([&f.y_mean, &f.y_std])
        .all(|v| v.is_finite());
    if !finite {
        return Err(bad("values must be finite"));
    }
    if f.std.iter().chain([&f.y_std]).any(|&s| s <= 0.0) {
        return Err(bad("std and y_std must be > 0"));
    }
    Ok(Standardizer {
        mean: f.mean,
        std: f.std,
        y_mean: f.y_mean,
        y_std: f.y_std,
    })
}

/// The file's JSON for a fitted [`Standardizer`].
pub fn to_json(s: &Standardizer) -> String {
    let f = File {
        mean: s.mean.clone(),
        std: s.std.clone(),
        y_mean: s.y_mean,
        y_std: s.y_std,
    };
    serde_json::to_string_pretty(&f).unwrap_or_default()
}
