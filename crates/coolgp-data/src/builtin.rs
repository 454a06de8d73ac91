//! The datasets shipped in the repository's `data/` directory (see `data/README.md`).
//!
//! | name | file | target | inputs | routing key |
//! |---|---|---|---|---|
//! | `airline` | `airline.csv.gz` | `arr_delay` (minutes) | the other 8 columns | — |
//! | `wind` | `wind.csv.gz` | `value` (knots) | `lon, lat, day, doy` | `station` |
//! | `air` | `air.csv.gz` | `value` (PM10, µg/m³) | `lon, lat, day, doy` | `station` |
//! | `traffic` | none: generated ([`crate::traffic`], seed 0) | `speed` (km/h) | `slot, e1, …, e5` | — |

use std::path::{Path, PathBuf};

use crate::csv_load::{load_csv, CsvOptions};
use crate::error::{DataError, Result};
use crate::table::Dataset;
use crate::traffic::{traffic, TrafficConfig};

/// Names accepted by [`builtin`].
pub const BUILTIN_NAMES: [&str; 4] = ["airline", "wind", "air", "traffic"];

/// Environment variable that overrides [`data_dir`].
pub const DATA_DIR_ENV: &str = "COOLGP_DATA_DIR";

/// The file name (inside the data directory) and load options of a built-in dataset.
///
/// # Errors
/// [`DataError::UnknownDataset`] for a name not in [`BUILTIN_NAMES`] or one with no file
/// (`traffic`).
pub fn builtin_options(name: &str) -> Result<(&'static str, CsvOptions)> {
    let station = |file: &'static str| {
        (
            file,
            CsvOptions {
                target: "value".into(),
                inputs: Some(["lon", "lat", "day", "doy"].map(String::from).to_vec()),
                agent_by: Some("station".into()),
                skip_bad_rows: false,
            },
        )
    };
    match name {
        "airline" => Ok(("airline.csv.gz", CsvOptions::new("arr_delay"))),
        "wind" => Ok(station("wind.csv.gz")),
        "air" => Ok(station("air.csv.gz")),
        _ => Err(DataError::UnknownDataset {
            name: name.to_owned(),
            available: BUILTIN_NAMES.join(", "),
        }),
    }
}

/// Loads the built-in dataset `name` from the directory `root` (usually [`data_dir`]).
///
/// # Errors
/// [`DataError::UnknownDataset`] for an unknown name; any [`load_csv`] error otherwise (e.g.
/// [`DataError::Io`] if the file is not in `root`).
pub fn builtin(name: &str, root: &Path) -> Result<Dataset> {
    if name == "traffic" {
        return Ok(traffic(&TrafficConfig::default()));
    }
    let (file, opts) = builtin_options(name)?;
    load_csv(&root.join(file), &opts).map(|(data, _)| data)
}

/// The repository's `data/` directory: `$COOLGP_DATA_DIR` if set and non-empty, else the
/// `data/` directory next to this crate's source tree (`<crate>/../../data`, fixed at compile
/// time, so a relocated binary needs the variable).
pub fn data_dir() -> PathBuf {
    match std::env::var_os(DATA_DIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => {
            let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data"));
            // `<repo>/data` rather than `<repo>/crates/coolgp-data/../../data` in messages.
            std::fs::canonicalize(&dir).unwrap_or(dir)
        }
    }
}
