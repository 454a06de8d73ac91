//! # coolgp-data — data for COOL-GP experiments
//!
//! Everything between files (or a random generator) and the sans-IO core [`coolgp`]:
//!
//! - [`Dataset`]: an `n × d` input matrix ([`coolgp::faer::Mat`]), targets, column names and
//!   an optional routing key per row (e.g. a station id: one key = one agent), with row
//!   selection, a seeded train/test [`Dataset::split`] and [`Dataset::head`].
//! - [`load_csv`] / [`load_csv_reader`]: CSV with a header, plain or gzip-compressed
//!   (detected from the bytes), strict by default with errors that name file, line and column,
//!   or counting bad rows in a [`LoadReport`] with [`CsvOptions::skip_bad_rows`].
//! - [`Standardizer`]: per-column input centring/scaling and one fleet-wide target scale,
//!   fitted on training data (spec §1: the model has no bias and a shared, unit-scale `u`), and
//!   the way back to original units for reporting RMSE.
//! - [`generate`]: the paper's SYNTHETIC domain (phenomena `f_p(x) = u(W_p x)` sharing one
//!   latent `u`, drawn by random Fourier features).
//! - [`builtin()`]: the shipped `airline`, `wind` and `air` datasets, found via [`data_dir`].
//!
//! What it is **not**: no model, no agents, no routing of rows to agents (the keys are only
//! carried), no batching or streaming policy, no network or download: the drivers
//! (`coolgp-sim`, `coolgp-node`) do that. All numbers are `f64`; all randomness comes from the
//! seeded [`coolgp::rng::Rng`], so the same seed gives the same data everywhere.
//!
//! ## Example
//! ```
//! use coolgp_data::{load_csv_reader, CsvOptions, Standardizer};
//!
//! let text = "station,x1,x2,y\nA,1,2,3.5\nB,2,0,1.0\nA,3,1,2.0\nB,4,5,0.5\n";
//! let opts = CsvOptions {
//!     agent_by: Some("station".into()),
//!     ..CsvOptions::new("y")
//! };
//! let (data, report) = load_csv_reader("inline", text.as_bytes(), &opts)?;
//! assert_eq!((data.len(), data.dim(), report.rows_skipped), (4, 2, 0));
//! assert_eq!(data.input_names, ["x1", "x2"]);
//!
//! let (mut train, mut test) = data.split(0.25, 7);
//! let scaler = Standardizer::fit(&train)?;
//! scaler.apply(&mut train)?;
//! scaler.apply(&mut test)?;
//! let rmse_standardized = 0.5;
//! let rmse_original_units = scaler.unscale_std(rmse_standardized);
//! assert!(rmse_original_units > 0.0);
//!
//! let synth = coolgp_data::generate(&coolgp_data::SyntheticConfig {
//!     batches_per_phenomenon: 3,
//!     test_points: 10,
//!     features: 100,
//!     ..Default::default()
//! })?;
//! assert_eq!(synth.train_batches.len(), 6);
//! # Ok::<(), coolgp_data::DataError>(())
//! ```

#![warn(missing_docs)]

pub mod builtin;
pub mod csv_load;
pub mod error;
mod records;
pub mod standardize;
pub mod synthetic;
pub mod table;
pub mod traffic;

pub use builtin::{builtin, builtin_options, data_dir, BUILTIN_NAMES, DATA_DIR_ENV};
pub use csv_load::{load_csv, load_csv_reader, CsvOptions, LoadReport, MAX_SKIPPED_MESSAGES};
pub use error::{DataError, Result};
pub use standardize::{scale_outliers, Standardizer};
pub use synthetic::{generate, RandomFeatures, Synthetic, SyntheticConfig};
pub use table::Dataset;
pub use traffic::{traffic, TrafficConfig};
