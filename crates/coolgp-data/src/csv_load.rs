//! Loading a [`Dataset`] from CSV (plain or gzip-compressed).
//!
//! Rules:
//! * Format: RFC 4180 with `,` separators and `"` quotes (quoted fields may contain `,`, `""`
//!   and line breaks), `\n` or `\r\n` line ends; blank lines are skipped; whitespace around
//!   values is trimmed.
//! * A header line is required; names are trimmed, and must be unique.
//! * Every value used (target and inputs) must parse as a finite `f64`.
//! * Inputs are the columns listed in [`CsvOptions::inputs`] (in that order), or else every
//!   *numeric* column other than the target and the `agent_by` column, in file order. A column
//!   is numeric if its value in the first data row (the first one with the right number of
//!   fields) parses as `f64`.
//! * Gzip is detected from the stream's magic bytes (`1f 8b`), so `.csv.gz` files and
//!   compressed standard input are read transparently.
//! * Errors name the file, the 1-based line (the header is line 1) and the column. With
//!   [`CsvOptions::skip_bad_rows`], bad data rows are counted in the [`LoadReport`] instead;
//!   header-level problems (missing columns, bad options) are always errors.

use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read};
use std::path::Path;

use coolgp::faer::Mat;
use flate2::read::MultiGzDecoder;

use crate::error::{DataError, Result};
use crate::records::{Record, RecordError, RecordReader};
use crate::table::Dataset;

/// How many skipped-row messages a [`LoadReport`] keeps.
pub const MAX_SKIPPED_MESSAGES: usize = 5;

/// What to read from a CSV file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsvOptions {
    /// Name of the target column (required).
    pub target: String,
    /// Input columns, in this order; `None` = every numeric column except the target and the
    /// `agent_by` column.
    pub inputs: Option<Vec<String>>,
    /// Column whose (string) value routes a row to an agent; stored in [`Dataset::keys`] and
    /// never used as an input.
    pub agent_by: Option<String>,
    /// Skip and count bad data rows instead of failing on the first one.
    pub skip_bad_rows: bool,
}

impl CsvOptions {
    /// Options with the given target, inputs inferred, no routing key, strict rows.
    pub fn new(target: impl Into<String>) -> Self {
        Self {
            target: target.into(),
            ..Self::default()
        }
    }
}

/// What happened while loading.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Data rows read from the file (kept + skipped; the header is not counted).
    pub rows_read: usize,
    /// Data rows skipped as bad (only with [`CsvOptions::skip_bad_rows`]).
    pub rows_skipped: usize,
    /// The messages of the first [`MAX_SKIPPED_MESSAGES`] skipped rows.
    pub first_skipped: Vec<String>,
}

/// Loads `path` (plain CSV or gzip-compressed CSV).
///
/// # Errors
/// [`DataError::Io`] if the file cannot be opened or read; otherwise as
/// [`load_csv_reader`].
pub fn load_csv(path: &Path, opts: &CsvOptions) -> Result<(Dataset, LoadReport)> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|source| DataError::Io {
        file: name.clone(),
        source,
    })?;
    load_csv_reader(&name, file, opts)
}

/// Loads CSV (plain or gzip-compressed) from any reader, e.g. standard input; `name` is used
/// in error messages in place of a file name.
///
/// # Errors
/// [`DataError::Empty`] without a header; [`DataError::MissingColumn`],
/// [`DataError::DuplicateColumn`], [`DataError::InvalidOptions`] for header-level problems;
/// [`DataError::NotNumeric`], [`DataError::NotFinite`], [`DataError::ColumnCount`] and
/// [`DataError::Csv`] for a bad data row (unless `skip_bad_rows`); [`DataError::NoRows`] if
/// no row is left; [`DataError::Io`] on a read error (including corrupt gzip data).
pub fn load_csv_reader<R: Read>(
    name: &str,
    reader: R,
    opts: &CsvOptions,
) -> Result<(Dataset, LoadReport)> {
    let input = maybe_gunzip(name, reader)?;
    let mut rdr = RecordReader::new(BufReader::with_capacity(1 << 16, input));
    let mut rec = Record::default();
    let has_header = rdr.read(&mut rec).map_err(|e| record_error(name, e))?;
    if !has_header {
        return Err(DataError::Empty {
            file: name.to_owned(),
        });
    }
    let header_line = rec.line;
    let mut header = Vec::with_capacity(rec.len());
    for j in 0..rec.len() {
        let raw = rec.get(j).unwrap_or_default();
        let h = std::str::from_utf8(raw).map_err(|_| DataError::Csv {
            file: name.to_owned(),
            line: header_line,
            message: format!(
                "header column {} is not valid UTF-8: `{}`",
                j + 1,
                String::from_utf8_lossy(raw)
            ),
        })?;
        header.push(h.to_owned());
    }
    let plan = Plan::new(name, header_line, header, opts)?;
    plan.read(&mut rdr, rec, opts.skip_bad_rows)
}

fn record_error(name: &str, e: RecordError) -> DataError {
    match e {
        RecordError::Io(source) => DataError::Io {
            file: name.to_owned(),
            source,
        },
        RecordError::Unterminated(line) => DataError::Csv {
            file: name.to_owned(),
            line,
            message: "quoted field not closed before the end of the input".to_owned(),
        },
    }
}

/// Reads the first two bytes and, if they are the gzip magic, wraps the stream in a decoder.
fn maybe_gunzip<'a, R: Read + 'a>(name: &str, mut reader: R) -> Result<Box<dyn Read + 'a>> {
    let mut head = [0u8; 2];
    let mut got = 0;
    while got < head.len() {
        match reader.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(DataError::Io {
                    file: name.to_owned(),
                    source,
                })
            }
        }
    }
    let whole = Cursor::new(head).take(got as u64).chain(reader);
    if got == 2 && head == [0x1f, 0x8b] {
        Ok(Box::new(MultiGzDecoder::new(BufReader::new(whole))))
    } else {
        Ok(Box::new(whole))
    }
}

/// Which header column goes where.
struct Plan<'n> {
    name: &'n str,
    header: Vec<String>,
    target: usize,
    /// `None` until inferred from the first well-formed data row.
    inputs: Option<Vec<usize>>,
    key: Option<usize>,
}

impl<'n> Plan<'n> {
    fn new(
        name: &'n str,
        header_line: u64,
        header: Vec<String>,
        opts: &CsvOptions,
    ) -> Result<Self> {
        for (i, h) in header.iter().enumerate() {
            if header[..i].contains(h) {
                return Err(DataError::DuplicateColumn {
                    file: name.to_owned(),
                    line: header_line,
                    column: h.clone(),
                });
            }
        }
        let find = |role: &'static str, col: &str| -> Result<usize> {
            header
                .iter()
                .position(|h| h == col)
                .ok_or_else(|| DataError::MissingColumn {
                    file: name.to_owned(),
                    line: header_line,
                    role,
                    column: col.to_owned(),
                    available: header.join(", "),
                })
        };
        let invalid = |message: String| DataError::InvalidOptions {
            file: name.to_owned(),
            message,
        };
        let target = find("target", &opts.target)?;
        let key = match &opts.agent_by {
            Some(k) => {
                let idx = find("agent_by", k)?;
                if idx == target {
                    return Err(invalid(format!(
                        "the agent_by column `{k}` cannot also be the target"
                    )));
                }
                Some(idx)
            }
            None => None,
        };
        let inputs = match &opts.inputs {
            Some(cols) => {
                let mut idx = Vec::with_capacity(cols.len());
                for c in cols {
                    let j = find("input", c)?;
                    if j == target {
                        return Err(invalid(format!(
                            "the target column `{c}` cannot also be an input"
                        )));
                    }
                    if Some(j) == key {
                        return Err(invalid(format!(
                            "the agent_by column `{c}` cannot also be an input"
                        )));
                    }
                    if idx.contains(&j) {
                        return Err(invalid(format!("input column `{c}` is listed twice")));
                    }
                    idx.push(j);
                }
                if idx.is_empty() {
                    return Err(invalid("the list of input columns is empty".to_owned()));
                }
                Some(idx)
            }
            None => None,
        };
        Ok(Self {
            name,
            header,
            target,
            inputs,
            key,
        })
    }

    /// Infers the input columns from a well-formed row.
    fn infer(&self, rec: &Record) -> Result<Vec<usize>> {
        let idx: Vec<usize> = (0..self.header.len())
            .filter(|&j| j != self.target && Some(j) != self.key)
            .filter(|&j| {
                rec.get(j)
                    .and_then(|b| std::str::from_utf8(b).ok())
                    .is_some_and(|s| s.parse::<f64>().is_ok())
            })
            .collect();
        if idx.is_empty() {
            return Err(DataError::InvalidOptions {
                file: self.name.to_owned(),
                message: format!(
                    "no numeric input column besides the target `{}` (columns: {})",
                    self.header[self.target],
                    self.header.join(", ")
                ),
            });
        }
        Ok(idx)
    }

    fn value(&self, rec: &Record, j: usize, line: u64) -> Result<f64> {
        let raw = rec.get(j).unwrap_or_default();
        let column = || self.header[j].clone();
        let text = std::str::from_utf8(raw).map_err(|_| DataError::NotNumeric {
            file: self.name.to_owned(),
            line,
            column: column(),
            value: String::from_utf8_lossy(raw).into_owned(),
        })?;
        let v: f64 = text.parse().map_err(|_| DataError::NotNumeric {
            file: self.name.to_owned(),
            line,
            column: column(),
            value: text.to_owned(),
        })?;
        if !v.is_finite() {
            return Err(DataError::NotFinite {
                file: self.name.to_owned(),
                line,
                column: column(),
                value: text.to_owned(),
            });
        }
        Ok(v)
    }

    fn read<R: BufRead>(
        mut self,
        rdr: &mut RecordReader<R>,
        mut rec: Record,
        skip_bad_rows: bool,
    ) -> Result<(Dataset, LoadReport)> {
        let ncols = self.header.len();
        let mut report = LoadReport::default();
        let mut xbuf: Vec<f64> = Vec::new();
        let mut ys: Vec<f64> = Vec::new();
        let mut keys: Vec<String> = Vec::new();
        let mut row: Vec<f64> = Vec::new();
        let bad = |e: DataError, report: &mut LoadReport| -> Result<()> {
            if !skip_bad_rows {
                return Err(e);
            }
            report.rows_skipped += 1;
            if report.first_skipped.len() < MAX_SKIPPED_MESSAGES {
                report.first_skipped.push(e.to_string());
            }
            Ok(())
        };
        loop {
            match rdr.read(&mut rec) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    let e = record_error(self.name, e);
                    if matches!(e, DataError::Csv { .. }) {
                        // an unterminated quote swallows the rest of the input
                        report.rows_read += 1;
                        bad(e, &mut report)?;
                        break;
                    }
                    return Err(e);
                }
            }
            report.rows_read += 1;
            let line = rec.line;
            if rec.len() != ncols {
                let e = DataError::ColumnCount {
                    file: self.name.to_owned(),
                    line,
                    expected: ncols,
                    found: rec.len(),
                };
                bad(e, &mut report)?;
                continue;
            }
            if self.inputs.is_none() {
                self.inputs = Some(self.infer(&rec)?);
            }
            let inputs: &[usize] = self.inputs.as_deref().unwrap_or_default();
            row.clear();
            let parsed = (|| -> Result<(f64, Option<String>)> {
                for &j in inputs {
                    row.push(self.value(&rec, j, line)?);
                }
                let y = self.value(&rec, self.target, line)?;
                let key = self
                    .key
                    .map(|k| String::from_utf8_lossy(rec.get(k).unwrap_or_default()).into_owned());
                Ok((y, key))
            })();
            match parsed {
                Ok((y, key)) => {
                    xbuf.extend_from_slice(&row);
                    ys.push(y);
                    if let Some(k) = key {
                        keys.push(k);
                    }
                }
                Err(e) => bad(e, &mut report)?,
            }
        }
        let inputs = match (self.inputs, ys.is_empty()) {
            (Some(idx), false) => idx,
            _ => {
                return Err(DataError::NoRows {
                    file: self.name.to_owned(),
                    skipped: report.rows_skipped,
                })
            }
        };
        let n = ys.len();
        let d = inputs.len();
        let data = Dataset {
            x: Mat::from_fn(n, d, |i, j| xbuf[i * d + j]),
            y: ys,
            input_names: inputs.iter().map(|&j| self.header[j].clone()).collect(),
            target_name: self.header[self.target].clone(),
            keys: self.key.map(|_| keys),
        };
        Ok((data, report))
    }
}
