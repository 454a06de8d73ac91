//! The error type of this crate.

/// Everything that can go wrong while loading, standardizing or generating data.
///
/// Errors about a file name the file and, where it makes sense, the 1-based line (the header is
/// line 1) and the column, in the form `file:line: column `name`: ...`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataError {
    /// The file could not be opened or read (this includes corrupt gzip streams).
    #[error("{file}: {source}")]
    Io {
        /// The file (or stream name) being read.
        file: String,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file has no header line.
    #[error("{file}:1: empty file (a header line is required)")]
    Empty {
        /// The file (or stream name) being read.
        file: String,
    },
    /// The file has a header but no usable data row.
    #[error("{file}: no data rows ({skipped} bad rows skipped)")]
    NoRows {
        /// The file (or stream name) being read.
        file: String,
        /// How many rows were skipped as bad (with `skip_bad_rows`).
        skipped: usize,
    },
    /// A requested column is not in the header.
    #[error("{file}:{line}: missing {role} column `{column}`; available columns: {available}")]
    MissingColumn {
        /// The file (or stream name) being read.
        file: String,
        /// Line of the header (1 unless blank lines precede it).
        line: u64,
        /// What the column was wanted as: `"target"`, `"input"` or `"agent_by"`.
        role: &'static str,
        /// The column that was asked for.
        column: String,
        /// The header's columns, comma separated.
        available: String,
    },
    /// Two header columns have the same name.
    #[error("{file}:{line}: duplicate column `{column}` in the header")]
    DuplicateColumn {
        /// The file (or stream name) being read.
        file: String,
        /// Line of the header (1 unless blank lines precede it).
        line: u64,
        /// The repeated name.
        column: String,
    },
    /// The options do not make sense for this file (e.g. the target listed as an input).
    #[error("{file}: {message}")]
    InvalidOptions {
        /// The file (or stream name) being read.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A value that must be a number does not parse as one.
    #[error("{file}:{line}: column `{column}`: value `{value}` is not a number")]
    NotNumeric {
        /// The file (or stream name) being read.
        file: String,
        /// 1-based line number (the header is line 1).
        line: u64,
        /// The column's name.
        column: String,
        /// The offending text.
        value: String,
    },
    /// A value parses as a number but is NaN or infinite.
    #[error("{file}:{line}: column `{column}`: value `{value}` is not finite")]
    NotFinite {
        /// The file (or stream name) being read.
        file: String,
        /// 1-based line number (the header is line 1).
        line: u64,
        /// The column's name.
        column: String,
        /// The offending text.
        value: String,
    },
    /// A row has a different number of fields than the header.
    #[error("{file}:{line}: expected {expected} fields (as in the header), found {found}")]
    ColumnCount {
        /// The file (or stream name) being read.
        file: String,
        /// 1-based line number (the header is line 1).
        line: u64,
        /// Number of header columns.
        expected: usize,
        /// Number of fields in this row.
        found: usize,
    },
    /// A CSV syntax or encoding error (an unterminated quoted field, a header that is not UTF-8).
    #[error("{file}:{line}: {message}")]
    Csv {
        /// The file (or stream name) being read.
        file: String,
        /// 1-based line number (the header is line 1).
        line: u64,
        /// The parser's message.
        message: String,
    },
    /// A built-in dataset name that does not exist.
    #[error("unknown built-in dataset `{name}`; available: {available}")]
    UnknownDataset {
        /// The name asked for.
        name: String,
        /// The known names, comma separated.
        available: String,
    },
    /// An empty dataset where data is needed (e.g. fitting a [`crate::Standardizer`]).
    #[error("empty dataset: {0}")]
    EmptyDataset(String),
    /// Dimensions that do not agree (e.g. a standardizer applied to data of another width).
    #[error("dimension mismatch: {0}")]
    DimensionMismatch(String),
    /// An invalid configuration value (e.g. zero phenomena in a [`crate::SyntheticConfig`]).
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
}

/// `Result` with [`DataError`].
pub type Result<T, E = DataError> = std::result::Result<T, E>;
