//! The node's data stream: numeric CSV rows from a file (optionally tailed) or stdin, read on
//! a thread, each row tagged with the byte offset just after it so that a checkpoint can
//! record exactly where to resume.
//!
//! Format: comma-separated, one header line, numbers only in the used columns; surrounding
//! spaces and double quotes around a field are stripped (no embedded commas). A row that
//! does not parse is skipped, counted and logged (rate-limited); it never stops the node.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::config::DataSource;
use crate::error::{NodeError, Result};

/// How long the reader sleeps at the end of a followed file before looking again.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

/// The column layout of a stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    /// Input column names, in model order.
    pub inputs: Vec<String>,
    /// Index of each input column in a row.
    pub input_idx: Vec<usize>,
    /// Index of the target column.
    pub target_idx: usize,
    /// Number of columns in the header.
    pub ncols: usize,
}

/// One item of the stream.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// A parsed row and the byte offset just after it.
    Row {
        /// Inputs (model order, raw units).
        x: Vec<f64>,
        /// Target (raw units).
        y: f64,
        /// Offset after the row's line.
        end: u64,
    },
    /// A row that could not be used.
    Skipped {
        /// 1-based line number.
        line: u64,
        /// Why.
        reason: String,
        /// Offset after the line.
        end: u64,
    },
    /// The reader caught up with a followed file: a partial block may be absorbed now.
    Idle,
    /// The stream ended.
    End,
    /// The stream failed (I/O error); the node keeps running without more data.
    Failed(String),
}

/// Splits a CSV line into trimmed fields without surrounding quotes.
pub fn fields(line: &str) -> Vec<&str> {
    line.trim_end_matches(['\n', '\r'])
        .split(',')
        .map(|f| {
            let f = f.trim();
            f.strip_prefix('"')
                .and_then(|g| g.strip_suffix('"'))
                .unwrap_or(f)
                .trim()
        })
        .collect()
}

/// Finds the target and input columns in a header line.
///
/// # Errors
/// [`NodeError::Data`] for a missing target or input column, or no input column at all.
pub fn layout(
    source: &str,
    header: &str,
    target: &str,
    inputs: Option<&[String]>,
) -> Result<Layout> {
    let header = header.strip_prefix('\u{feff}').unwrap_or(header);
    let names = fields(header);
    let err = |reason: String| NodeError::Data {
        source_name: source.to_string(),
        reason,
    };
    let target_idx = names
        .iter()
        .position(|n| *n == target)
        .ok_or_else(|| err(format!("no target column '{target}' in header {names:?}")))?;
    let (inputs, input_idx): (Vec<String>, Vec<usize>) = match inputs {
        Some(list) => {
            let mut idx = Vec::with_capacity(list.len());
            for name in list {
                let i = names
                    .iter()
                    .position(|n| n == name)
                    .ok_or_else(|| err(format!("no input column '{name}' in header {names:?}")))?;
                if i == target_idx {
                    return Err(err(format!("'{name}' is the target, not an input")));
                }
                idx.push(i);
            }
            (list.to_vec(), idx)
        }
        None => names
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != target_idx)
            .map(|(i, n)| (n.to_string(), i))
            .unzip(),
    };
    if inputs.is_empty() {
        return Err(err("no input column".into()));
    }
    Ok(Layout {
        inputs,
        input_idx,
        target_idx,
        ncols: names.len(),
    })
}

fn parse_num(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Parses one data line against a layout.
///
/// # Errors
/// Why the row is unusable (wrong column count, not a finite number).
pub fn parse_row(l: &Layout, line: &str) -> std::result::Result<(Vec<f64>, f64), String> {
    let f = fields(line);
    if f.len() != l.ncols {
        return Err(format!("{} columns, header has {}", f.len(), l.ncols));
    }
    let mut x = Vec::with_capacity(l.input_idx.len());
    for (&i, name) in l.input_idx.iter().zip(&l.inputs) {
        x.push(
            parse_num(f[i])
                .ok_or_else(|| format!("column '{name}': '{}' is not a finite number", f[i]))?,
        );
    }
    let y = parse_num(f[l.target_idx])
        .ok_or_else(|| format!("target '{}' is not a finite number", f[l.target_idx]))?;
    Ok((x, y))
}

/// An opened stream positioned after its header (or at the resume offset).
pub struct Opened {
    /// The column layout.
    pub layout: Layout,
    /// A recording's rows and the next one to send (offsets are rows).
    bag: Option<(Vec<coolgp_ros2::Row>, usize)>,
    reader: Box<dyn BufRead + Send>,
    seekable: Option<BufReader<File>>,
    pos: u64,
    line: u64,
}

fn read_header_line(r: &mut dyn BufRead, source: &str) -> Result<(String, u64)> {
    let mut buf = Vec::new();
    let n = r
        .read_until(b'\n', &mut buf)
        .map_err(|e| NodeError::io("reading data", source, e))?;
    if n == 0 {
        return Err(NodeError::Data {
            source_name: source.into(),
            reason: "empty: no header line".into(),
        });
    }
    let s = String::from_utf8(buf).map_err(|_| NodeError::Data {
        source_name: source.into(),
        reason: "header is not UTF-8".into(),
    })?;
    Ok((s, n as u64))
}

/// Opens a data source, reads its header and, for a file, seeks to `resume` (a byte offset
/// from a checkpoint; `None` or anything before the first row starts at the first row).
///
/// # Errors
/// [`NodeError::Io`] or [`NodeError::Data`] (bad header, file shorter than the resume offset).
pub fn open(
    src: &DataSource,
    target: &str,
    inputs: Option<&[String]>,
    resume: Option<(u64, u64)>,
) -> Result<Opened> {
    let name = src.name();
    match src {
        DataSource::File(path) => {
            let f = File::open(path).map_err(|e| NodeError::io("opening data", path, e))?;
            let mut r = BufReader::new(f);
            let (header, hlen) = read_header_line(&mut r, &name)?;
            let layout = layout(&name, &header, target, inputs)?;
            let (mut pos, mut line) = (hlen, 1);
            if let Some((offset, rows)) = resume {
                if offset > hlen {
                    let len = r
                        .get_ref()
                        .metadata()
                        .map_err(|e| NodeError::io("reading data", path, e))?
                        .len();
                    if offset > len {
                        return Err(NodeError::Data {
                            source_name: name,
                            reason: format!(
                                "the checkpoint resumes at byte {offset} but the file has {len} bytes: it was truncated or replaced"
                            ),
                        });
                    }
                    r.seek(SeekFrom::Start(offset))
                        .map_err(|e| NodeError::io("seeking data", path, e))?;
                    pos = offset;
                    line = 1 + rows;
                }
            }
            Ok(Opened {
                layout,
                bag: None,
                reader: Box::new(std::io::empty()),
                seekable: Some(r),
                pos,
                line,
            })
        }
        DataSource::Stdin => {
            let mut r: Box<dyn BufRead + Send> = Box::new(BufReader::new(std::io::stdin()));
            let (header, hlen) = read_header_line(r.as_mut(), &name)?;
            let layout = layout(&name, &header, target, inputs)?;
            Ok(Opened {
                layout,
                bag: None,
                reader: r,
                seekable: None,
                pos: hlen,
                line: 1,
            })
        }
        DataSource::Bag { path, spec } => open_bag(path, spec, resume),
    }
}

/// A recording, read and paired whole (a bag is finite), positioned at the checkpoint's row.
fn open_bag(
    path: &Path,
    spec: &coolgp_ros2::RowSpec,
    resume: Option<(u64, u64)>,
) -> Result<Opened> {
    let name = path.display().to_string();
    let bag = coolgp_ros2::read_bag(path, spec).map_err(|e| NodeError::Data {
        source_name: name.clone(),
        reason: e.to_string(),
    })?;
    let c = &bag.counts;
    tracing::info!(
        source = %name,
        rows = bag.rows.len(),
        messages = c.messages,
        unpaired_targets = c.unpaired_targets,
        dropped = c.bad_cdr + c.non_finite + c.stamp_backwards,
        "recording read"
    );
    let next = usize::try_from(resume.map_or(0, |r| r.0)).unwrap_or(usize::MAX);
    if next > bag.rows.len() {
        return Err(NodeError::Data {
            source_name: name,
            reason: format!(
                "the checkpoint resumes at row {next} but the recording gives {} rows: it was \
                 replaced",
                bag.rows.len()
            ),
        });
    }
    let inputs = spec.input_names();
    let d = inputs.len();
    Ok(Opened {
        layout: Layout {
            inputs,
            input_idx: (0..d).collect(),
            target_idx: d,
            ncols: d + 1,
        },
        bag: Some((bag.rows, next)),
        reader: Box::new(std::io::empty()),
        seekable: None,
        pos: next as u64,
        line: next as u64,
    })
}

impl Opened {
    /// Reads the stream on a thread, sending items into `tx` (bounded: the thread waits when
    /// the node is behind). The thread ends at the end of the stream or when `tx` closes.
    pub fn spawn(self, follow: bool, tx: mpsc::Sender<Item>) -> std::thread::JoinHandle<()> {
        std::thread::Builder::new()
            .name("coolgp-data".into())
            .spawn(move || self.run(follow, &tx))
            .unwrap_or_else(|e| {
                // Without a reader thread the node simply has no data; say so.
                tracing::error!(error = %e, "cannot start the data reader thread");
                std::thread::spawn(|| ())
            })
    }

    fn run(mut self, follow: bool, tx: &mpsc::Sender<Item>) {
        if let Some((rows, next)) = self.bag.take() {
            for (k, row) in rows.into_iter().enumerate().skip(next) {
                let item = Item::Row {
                    x: row.x,
                    y: row.y,
                    end: k as u64 + 1,
                };
                if tx.blocking_send(item).is_err() {
                    return;
                }
            }
            let _ = tx.blocking_send(Item::End);
            return;
        }
        let mut buf = Vec::new();
        let mut idle_sent = false;
        loop {
            buf.clear();
            let res = match self.seekable.as_mut() {
                Some(r) => r.read_until(b'\n', &mut buf),
                None => self.reader.read_until(b'\n', &mut buf),
            };
            let n = match res {
                Ok(n) => n,
                Err(e) => {
                    let _ = tx.blocking_send(Item::Failed(e.to_string()));
                    return;
                }
            };
            let complete = buf.last() == Some(&b'\n');
            if n == 0 || (!complete && follow) {
                if !follow {
                    let _ = tx.blocking_send(Item::End);
                    return;
                }
                // A partial last line is being written: rewind and wait for its newline.
                if n > 0 {
                    if let Some(r) = self.seekable.as_mut() {
                        if r.seek(SeekFrom::Start(self.pos)).is_err() {
                            let _ = tx.blocking_send(Item::Failed("seek failed".into()));
                            return;
                        }
                    }
                }
                if !idle_sent {
                    if tx.blocking_send(Item::Idle).is_err() {
                        return;
                    }
                    idle_sent = true;
                }
                if tx.is_closed() {
                    return;
                }
                std::thread::sleep(FOLLOW_POLL);
                continue;
            }
            idle_sent = false;
            self.pos += n as u64;
            self.line += 1;
            let item = match std::str::from_utf8(&buf) {
                Ok(s) if s.trim().is_empty() => continue,
                Ok(s) => match parse_row(&self.layout, s) {
                    Ok((x, y)) => Item::Row {
                        x,
                        y,
                        end: self.pos,
                    },
                    Err(reason) => Item::Skipped {
                        line: self.line,
                        reason,
                        end: self.pos,
                    },
                },
                Err(_) => Item::Skipped {
                    line: self.line,
                    reason: "not UTF-8".into(),
                    end: self.pos,
                },
            };
            if tx.blocking_send(item).is_err() {
                return;
            }
        }
    }
}

/// A whole numeric CSV in memory (holdout sets, query inputs).
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Column names.
    pub names: Vec<String>,
    /// Rows, each with one value per column.
    pub rows: Vec<Vec<f64>>,
}

/// Reads a numeric CSV with a header (every column must be numeric).
///
/// # Errors
/// [`NodeError::Io`] or [`NodeError::Data`] naming the line and column.
pub fn read_table(path: &Path) -> Result<Table> {
    let mut text = String::new();
    File::open(path)
        .and_then(|mut f| f.read_to_string(&mut text))
        .map_err(|e| NodeError::io("reading", path, e))?;
    parse_table(&path.display().to_string(), &text)
}

/// As [`read_table`] from text.
///
/// # Errors
/// [`NodeError::Data`] naming the line and column.
pub fn parse_table(source: &str, text: &str) -> Result<Table> {
    let mut lines = text.lines();
    let header = lines.next().ok_or_else(|| NodeError::Data {
        source_name: source.into(),
        reason: "empty: no header line".into(),
    })?;
    let header = header.strip_prefix('\u{feff}').unwrap_or(header);
    let names: Vec<String> = fields(header).into_iter().map(str::to_string).collect();
    let mut rows = Vec::new();
    for (i, line) in lines.enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let f = fields(line);
        if f.len() != names.len() {
            return Err(NodeError::Data {
                source_name: source.into(),
                reason: format!(
                    "line {}: {} columns, header has {}",
                    i + 2,
                    f.len(),
                    names.len()
                ),
            });
        }
        let mut row = Vec::with_capacity(f.len());
        for (v, name) in f.iter().zip(&names) {
            row.push(parse_num(v).ok_or_else(|| NodeError::Data {
                source_name: source.into(),
                reason: format!(
                    "line {}, column '{name}': '{v}' is not a finite number",
                    i + 2
                ),
            })?);
        }
        rows.push(row);
    }
    Ok(Table { names, rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_rows() {
        let l = layout("t", "a, \"b\" ,y\n", "y", None).expect("layout");
        assert_eq!(l.inputs, ["a", "b"]);
        assert_eq!(parse_row(&l, "1,2,3\n"), Ok((vec![1.0, 2.0], 3.0)));
        assert!(parse_row(&l, "1,x,3").is_err());
        assert!(parse_row(&l, "1,NaN,3").is_err());
        assert!(parse_row(&l, "1,2").is_err());
        assert!(layout("t", "a,b\n", "y", None).is_err());
        let only = ["b".to_string()];
        let l = layout("t", "a,b,y", "y", Some(&only)).expect("layout");
        assert_eq!(l.input_idx, [1]);
    }

    #[test]
    fn table() {
        let t = parse_table("t", "a,b\n1,2\n\n3,4\n").expect("table");
        assert_eq!(t.rows, vec![vec![1.0, 2.0], vec![3.0, 4.0]]);
        assert!(parse_table("t", "a,b\n1\n").is_err());
    }
}
