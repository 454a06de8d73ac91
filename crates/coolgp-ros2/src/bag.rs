//! rosbag2 recordings in MCAP (ROS 2's default storage) as data.
//!
//! A bag is a directory holding `metadata.yaml` and one or more `.mcap` files, or an `.mcap`
//! file alone. Messages are read in file order with the maintained `mcap` crate (chunks
//! compressed with zstd or lz4 included), decoded from CDR and paired into rows by the same
//! [`RowAssembler`] as live topics, so a recording and the live stream it recorded give the
//! same rows. A bag in the SQLite storage (`.db3`) is refused with the command that converts
//! it; a topic whose recorded type differs from the one named is refused naming both.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use coolgp::faer::Mat;
use coolgp_data::Dataset;

use crate::assemble::{Counts, Row, RowAssembler};
use crate::error::{Result, Ros2Error};
use crate::spec::{namespace_of, RowSpec};
use crate::types::canonical;

/// The first bytes of every MCAP file.
pub const MCAP_MAGIC: &[u8] = b"\x89MCAP0\r\n";

/// The rows of a recording and what happened to its messages.
#[derive(Clone, Debug)]
pub struct BagRows {
    /// Rows in the target's stamp order (with every robot's topics: robot by robot, in the
    /// order they first appear).
    pub rows: Vec<Row>,
    /// Each row's robot (namespace) when the topics are every robot's (`/*/…`).
    pub keys: Option<Vec<String>>,
    /// Message counts.
    pub counts: Counts,
    /// The files read.
    pub files: Vec<PathBuf>,
    /// A file ended in the middle of a record (a recording cut short, e.g. by a crash): its
    /// complete records were read.
    pub truncated: bool,
}

/// Whether `path` looks like a rosbag2 recording (an `.mcap`/`.db3` file or a directory with
/// `metadata.yaml`), so a loader can send it here instead of to the CSV reader.
pub fn is_bag(path: &Path) -> bool {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default();
    matches!(ext, "mcap" | "db3") || path.join("metadata.yaml").is_file()
}

fn bag_err(path: &Path, message: impl Into<String>) -> Ros2Error {
    Ros2Error::Bag {
        file: path.display().to_string(),
        message: message.into(),
    }
}

/// rosbag2's own compression of a bag (`ros2 bag record --compression-mode`), from its
/// `metadata.yaml`; MCAP's chunk compression is read by the `mcap` crate either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// None (or MCAP chunks only).
    None,
    /// Each message's data is a zstd frame.
    Message,
    /// Each file is zstd-compressed whole (`NAME_0.mcap.zstd`).
    File,
}

/// The compression `metadata.yaml` names (zstd is the only format rosbag2 has).
fn compression(dir: &Path) -> Result<Compression> {
    let meta = std::fs::read_to_string(dir.join("metadata.yaml")).unwrap_or_default();
    let value = |key: &str| {
        meta.lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .map(|v| v.trim().trim_matches(['"', '\'']).to_ascii_lowercase())
            .unwrap_or_default()
    };
    let mode = match value("compression_mode:").as_str() {
        "" | "none" => return Ok(Compression::None),
        "message" => Compression::Message,
        "file" => Compression::File,
        other => {
            return Err(bag_err(
                dir,
                format!("unknown compression_mode `{other}` in metadata.yaml"),
            ))
        }
    };
    match value("compression_format:").as_str() {
        "zstd" => Ok(mode),
        other => Err(bag_err(
            dir,
            format!("compression_format `{other}` is not supported (rosbag2 writes zstd)"),
        )),
    }
}

/// The MCAP files of a bag, in name order.
///
/// # Errors
/// [`Ros2Error::Bag`] for SQLite storage or a directory without `.mcap` files.
pub fn bag_files(path: &Path) -> Result<Vec<PathBuf>> {
    let sqlite = "is a rosbag2 bag in the SQLite storage (.db3); coolgp reads MCAP, ROS 2's \
                  default: convert it with `ros2 bag convert` (storage_id: mcap) or record \
                  with `ros2 bag record -s mcap`";
    if path.is_dir() {
        let meta = std::fs::read_to_string(path.join("metadata.yaml")).unwrap_or_default();
        if meta.contains("storage_identifier: sqlite3") {
            return Err(bag_err(path, sqlite));
        }
        let entries = std::fs::read_dir(path).map_err(|source| Ros2Error::Io {
            file: path.display().to_string(),
            source,
        })?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                name.ends_with(".mcap") || name.ends_with(".mcap.zstd")
            })
            .collect();
        files.sort();
        if files.is_empty() {
            let db3 = std::fs::read_dir(path)
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok())
                .any(|e| e.path().extension().is_some_and(|x| x == "db3"));
            return Err(bag_err(
                path,
                if db3 {
                    sqlite
                } else {
                    "holds no .mcap file (a rosbag2 bag directory has metadata.yaml and \
                     NAME_0.mcap)"
                },
            ));
        }
        return Ok(files);
    }
    if path.extension().is_some_and(|e| e == "db3") {
        return Err(bag_err(path, sqlite));
    }
    Ok(vec![path.to_path_buf()])
}

/// Reads the rows `spec` names from the bag at `path`.
///
/// # Errors
/// [`Ros2Error::Io`] if a file cannot be read; [`Ros2Error::Bag`] if it is not MCAP, is
/// corrupt, records a named topic with another type or message encoding, lacks a named topic
/// (the message lists the bag's topics), or gives no row.
pub fn read_bag(path: &Path, spec: &RowSpec) -> Result<BagRows> {
    let files = bag_files(path)?;
    let mode = if path.is_dir() {
        compression(path)?
    } else {
        Compression::None
    };
    // One assembler per robot (one in all unless the topics are every robot's, `/*/…`).
    let mut robots: Vec<(String, RowAssembler)> = Vec::new();
    if !spec.per_namespace() {
        robots.push((String::new(), RowAssembler::new(spec)?));
    }
    let mut rows: Vec<(usize, Row)> = Vec::new();
    // Two threads: this one pairs while the other reads and walks the files (each about half
    // the work: a recording of 1,000,000 pairs in 0.33 s on one thread, BENCHMARKS.md §17).
    let read = std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(4);
        let reader = scope.spawn(|| read_messages(&files, spec, mode, tx));
        for batch in rx {
            for ns in batch.new_groups {
                let asm = RowAssembler::new(&spec.for_namespace(&ns))?;
                robots.push((ns, asm));
            }
            let mut at = 0;
            for &(g, t, log_time, len) in &batch.msgs {
                let asm = &mut robots[g].1;
                asm.push_at(t, &batch.data[at..at + len], log_time as f64 * 1e-9);
                at += len;
                while let Some(row) = asm.pop() {
                    rows.push((g, row));
                }
            }
        }
        reader
            .join()
            .map_err(|_| bag_err(path, "the reading thread panicked"))?
    })?;
    let Scan {
        seen,
        complete,
        other,
    } = read;
    let truncated = !complete;
    let mut counts = Counts::default();
    for (g, (_, asm)) in robots.iter_mut().enumerate() {
        asm.finish();
        while let Some(row) = asm.pop() {
            rows.push((g, row));
        }
        counts.add(asm.counts());
    }
    counts.other_topics += other;
    let listing = || {
        seen.iter()
            .map(|(t, ty)| format!("/{t} ({ty})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (topic, _) in spec.topics() {
        let found = seen.keys().any(|bare| match spec.per_namespace() {
            true => namespace_of(topic, bare).is_some(),
            false => bare == topic,
        });
        if !found {
            return Err(bag_err(
                path,
                format!("has no topic /{topic}; its topics: {}", listing()),
            ));
        }
    }
    if rows.is_empty() {
        return Err(bag_err(
            path,
            format!(
                "gave no row: {} messages, {} unpaired targets, {} undecodable, {} non-finite \
                 (is --ros2-tolerance {} s wide enough for the stamps?)",
                counts.messages,
                counts.unpaired_targets,
                counts.bad_cdr,
                counts.non_finite,
                spec.tolerance
            ),
        ));
    }
    // Robot by robot (in the order they first appear), each in its own stamp order: the rows
    // of one robot together, as a CSV with a robot column would hold them.
    rows.sort_by_key(|(g, _)| *g);
    let keys = spec.per_namespace().then(|| {
        rows.iter()
            .map(|(g, _)| robots[*g].0.clone())
            .collect::<Vec<_>>()
    });
    Ok(BagRows {
        rows: rows.into_iter().map(|(_, r)| r).collect(),
        keys,
        counts,
        files,
        truncated,
    })
}

/// One channel of a recording: topic, schema (type) name, message encoding.
#[derive(Clone, Debug, Default)]
struct ChannelInfo {
    topic: String,
    ty: String,
    encoding: String,
}

/// The channels and schemas seen so far in a file.
#[derive(Default)]
struct Channels {
    schemas: BTreeMap<u16, String>,
    channels: BTreeMap<u16, ChannelInfo>,
}

impl Channels {
    /// Takes one record: remembers schemas and channels, hands a message to `f`.
    fn take(
        &mut self,
        file: &Path,
        record: mcap::records::Record<'_>,
        f: &mut dyn FnMut(&ChannelInfo, u64, &[u8]),
    ) -> Result<()> {
        use mcap::records::Record;
        match record {
            Record::Schema { header, .. } => {
                self.schemas.insert(header.id, header.name);
            }
            Record::Channel(c) => {
                let ty = self.schemas.get(&c.schema_id).cloned().unwrap_or_default();
                self.channels.insert(
                    c.id,
                    ChannelInfo {
                        topic: c.topic,
                        ty,
                        encoding: c.message_encoding,
                    },
                );
            }
            Record::Message { header, data } => {
                let ch = self.channels.get(&header.channel_id).ok_or_else(|| {
                    bag_err(
                        file,
                        format!(
                            "corrupt MCAP: a message of unknown channel {}",
                            header.channel_id
                        ),
                    )
                })?;
                f(ch, header.log_time, &data);
            }
            _ => {}
        }
        Ok(())
    }
}

/// The records of an MCAP byte range (`bytes[pos..]`), framed as the MCAP specification says
/// (opcode u8, length u64 LE, body), each parsed by the `mcap` crate's [`mcap::parse_record`]
/// with messages borrowed, not copied. Returns false if a record ran past the end (a recording
/// cut short, e.g. by a crash: the complete records before it were read).
fn walk(
    file: &Path,
    bytes: &[u8],
    mut pos: usize,
    chans: &mut Channels,
    f: &mut dyn FnMut(&ChannelInfo, u64, &[u8]),
) -> Result<bool> {
    use mcap::records::op;
    while pos < bytes.len() {
        let Some(head) = bytes.get(pos..pos + 9) else {
            return Ok(false);
        };
        let mut len8 = [0u8; 8];
        len8.copy_from_slice(&head[1..9]);
        let len = usize::try_from(u64::from_le_bytes(len8)).unwrap_or(usize::MAX);
        let Some(body) = (pos + 9)
            .checked_add(len)
            .and_then(|end| bytes.get(pos + 9..end))
        else {
            return Ok(false);
        };
        pos += 9 + len;
        let opcode = head[0];
        match opcode {
            op::FOOTER | op::DATA_END => return Ok(true),
            op::SCHEMA | op::CHANNEL | op::MESSAGE | op::CHUNK => {}
            _ => continue,
        }
        let record = mcap::parse_record(opcode, body)
            .map_err(|e| bag_err(file, format!("corrupt MCAP at byte {pos}: {e}")))?;
        if let mcap::records::Record::Chunk { header, data } = record {
            chunk(file, header, &data, chans, f)?;
        } else {
            chans.take(file, record, f)?;
        }
    }
    Ok(false)
}

/// The records of one chunk: uncompressed and zstd chunks walked in place (zstd decompressed
/// once into one buffer), lz4 chunks through the crate's own chunk reader.
fn chunk(
    file: &Path,
    header: mcap::records::ChunkHeader,
    data: &[u8],
    chans: &mut Channels,
    f: &mut dyn FnMut(&ChannelInfo, u64, &[u8]),
) -> Result<()> {
    let corrupt = |e: String| bag_err(file, format!("corrupt MCAP chunk: {e}"));
    match header.compression.as_str() {
        "" => walk(file, data, 0, chans, f).map(|_| ()),
        "zstd" => {
            let cap = usize::try_from(header.uncompressed_size).unwrap_or(usize::MAX);
            let plain = zstd::bulk::decompress(data, cap).map_err(|e| corrupt(e.to_string()))?;
            walk(file, &plain, 0, chans, f).map(|_| ())
        }
        _ => {
            let reader =
                mcap::read::ChunkReader::new(header, data).map_err(|e| corrupt(e.to_string()))?;
            for record in reader {
                chans.take(file, record.map_err(|e| corrupt(e.to_string()))?, f)?;
            }
            Ok(())
        }
    }
}

/// Calls `f` with each message of the MCAP file `file`, in file order: channel, log time in
/// ns, CDR bytes. The file is streamed a record at a time (a chunk is ~1 MB), never held
/// whole; `.mcap.zstd` (rosbag2's file compression) is decompressed on the way. Returns false
/// if the file was cut short (the complete records before the cut were read).
///
/// # Errors
/// [`Ros2Error::Io`] on a read error; [`Ros2Error::Bag`] if it is not MCAP or is corrupt.
fn for_each_message(file: &Path, mut f: impl FnMut(&ChannelInfo, u64, &[u8])) -> Result<bool> {
    use mcap::records::op;
    let io = |source| Ros2Error::Io {
        file: file.display().to_string(),
        source,
    };
    let fh = std::fs::File::open(file).map_err(io)?;
    let size = fh.metadata().map_err(io)?.len();
    let mut r: Box<dyn Read> = if file.extension().is_some_and(|e| e == "zstd") {
        Box::new(zstd::stream::read::Decoder::new(fh).map_err(io)?)
    } else {
        Box::new(std::io::BufReader::with_capacity(1 << 20, fh))
    };
    let mut magic = [0u8; 8];
    if r.read_exact(&mut magic).is_err() || magic != MCAP_MAGIC {
        return Err(bag_err(
            file,
            "is not an MCAP file (no MCAP magic); coolgp reads rosbag2 bags in MCAP",
        ));
    }
    // A record longer than this cannot be real (a compressed file may expand 100-fold).
    let max_len = size.saturating_mul(100).max(1 << 30);
    let mut chans = Channels::default();
    let mut body = Vec::new();
    loop {
        let mut head = [0u8; 9];
        match r.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
            Err(e) => return Err(io(e)),
        }
        let mut len8 = [0u8; 8];
        len8.copy_from_slice(&head[1..]);
        let len = u64::from_le_bytes(len8);
        if len > max_len {
            return Err(bag_err(
                file,
                format!("corrupt MCAP: a record of {len} bytes in a file of {size}"),
            ));
        }
        let opcode = head[0];
        if matches!(opcode, op::FOOTER | op::DATA_END) {
            return Ok(true);
        }
        body.resize(usize::try_from(len).unwrap_or(usize::MAX), 0);
        match r.read_exact(&mut body) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
            Err(e) => return Err(io(e)),
        }
        if !matches!(opcode, op::SCHEMA | op::CHANNEL | op::MESSAGE | op::CHUNK) {
            continue;
        }
        let record = mcap::parse_record(opcode, &body)
            .map_err(|e| bag_err(file, format!("corrupt MCAP: {e}")))?;
        if let mcap::records::Record::Chunk { header, data } = record {
            chunk(file, header, &data, &mut chans, &mut f)?;
        } else {
            chans.take(file, record, &mut f)?;
        }
    }
}

/// Messages handed from the reading thread to the pairing one: their bytes back to back, per
/// message its robot (group: 0 unless the topics are every robot's, `/*/…`), its topic's index
/// in [`RowSpec::topics`], log time (ns) and length; and the robots first seen in the batch.
#[derive(Default)]
struct Batch {
    data: Vec<u8>,
    msgs: Vec<(usize, usize, u64, usize)>,
    new_groups: Vec<String>,
}

/// Bytes of messages per [`Batch`].
const BATCH_BYTES: usize = 1 << 20;

/// What the reading thread found: the bag's topics (bare name → type), whether every file
/// was complete, and the messages of topics not named.
struct Scan {
    seen: BTreeMap<String, String>,
    complete: bool,
    other: u64,
}

/// Reads `files` in order, sending the named topics' messages to `tx` in batches (rosbag2's
/// per-message zstd undone on the way).
///
/// # Errors
/// As [`for_each_message`]; a named topic recorded with another type or encoding.
fn read_messages(
    files: &[PathBuf],
    spec: &RowSpec,
    mode: Compression,
    tx: std::sync::mpsc::SyncSender<Batch>,
) -> Result<Scan> {
    let topics: Vec<&str> = spec.topics().iter().map(|(t, _)| *t).collect();
    let mut groups: Vec<String> = Vec::new();
    let mut out = Scan {
        seen: BTreeMap::new(),
        complete: true,
        other: 0,
    };
    let mut batch = Batch::default();
    let mut unpacked = Vec::new();
    for file in files {
        let mut refused: Option<Ros2Error> = None;
        let mut index: BTreeMap<String, Option<(usize, usize)>> = BTreeMap::new();
        let complete = for_each_message(file, |ch, log_time, data| {
            let gt = match index.get(&ch.topic) {
                Some(gt) => *gt,
                None => {
                    let bare = ch.topic.trim_matches('/');
                    out.seen.insert(bare.to_string(), ch.ty.clone());
                    let found = topics.iter().enumerate().find_map(|(t, pattern)| {
                        if spec.per_namespace() {
                            namespace_of(pattern, bare).map(|ns| (t, Some(ns)))
                        } else {
                            (*pattern == bare).then_some((t, None))
                        }
                    });
                    let gt = found.map(|(t, ns)| {
                        if let Err(e) = check_channel(file, spec, topics[t], bare, ch) {
                            refused.get_or_insert(e);
                        }
                        let g = match ns {
                            None => 0,
                            Some(ns) => match groups.iter().position(|g| g == ns) {
                                Some(g) => g,
                                None => {
                                    groups.push(ns.to_string());
                                    batch.new_groups.push(ns.to_string());
                                    groups.len() - 1
                                }
                            },
                        };
                        (g, t)
                    });
                    index.insert(ch.topic.clone(), gt);
                    gt
                }
            };
            let Some((g, t)) = gt else {
                out.other += 1;
                return;
            };
            let data: &[u8] = if mode == Compression::Message {
                unpacked.clear();
                match zstd::stream::copy_decode(data, &mut unpacked) {
                    Ok(()) => &unpacked,
                    Err(_) => &[],
                }
            } else {
                data
            };
            // A representation other than plain CDR (XCDR2, parameter lists) refuses the
            // recording; bytes that are no representation at all are counted as bad CDR.
            if let [0, id @ (2..), ..] = data {
                let e = crate::error::CdrError::Encapsulation([0, *id]);
                refused.get_or_insert(bag_err(file, format!("topic {}: {e}", ch.topic)));
            }
            batch.data.extend_from_slice(data);
            batch.msgs.push((g, t, log_time, data.len()));
            if batch.data.len() >= BATCH_BYTES {
                // The pairing thread ends only when this one drops `tx`: a send cannot fail
                // while it runs.
                let _ = tx.send(std::mem::take(&mut batch));
            }
        })?;
        if let Some(e) = refused {
            return Err(e);
        }
        out.complete &= complete;
    }
    let _ = tx.send(batch);
    Ok(out)
}

/// One topic of a recording, as [`bag_topics`] lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct BagTopic {
    /// Topic name (with its leading `/`).
    pub topic: String,
    /// Recorded type (`pkg/msg/Name`).
    pub ty: String,
    /// Message encoding (`cdr` for ROS 2).
    pub encoding: String,
    /// Messages recorded.
    pub messages: u64,
    /// First and last log time, seconds.
    pub span: (f64, f64),
}

/// The topics of a recording with their types and message counts, in name order.
///
/// # Errors
/// As [`read_bag`] for files that cannot be read or are not MCAP.
pub fn bag_topics(path: &Path) -> Result<Vec<BagTopic>> {
    let mut topics: BTreeMap<String, BagTopic> = BTreeMap::new();
    for file in bag_files(path)? {
        for_each_message(&file, |ch, log_time, _| {
            let t = log_time as f64 * 1e-9;
            let entry = topics.entry(ch.topic.clone()).or_insert_with(|| BagTopic {
                topic: ch.topic.clone(),
                ty: ch.ty.clone(),
                encoding: ch.encoding.clone(),
                messages: 0,
                span: (t, t),
            });
            entry.messages += 1;
            entry.span = (entry.span.0.min(t), entry.span.1.max(t));
        })?;
    }
    Ok(topics.into_values().collect())
}

/// Refuses a topic recorded with another type than `pattern` (a topic of the spec) names, or
/// with a message encoding other than CDR.
fn check_channel(
    file: &Path,
    spec: &RowSpec,
    pattern: &str,
    bare: &str,
    ch: &ChannelInfo,
) -> Result<()> {
    let (ty, enc) = (ch.ty.as_str(), ch.encoding.as_str());
    let Some((_, want)) = spec.topics().into_iter().find(|(t, _)| *t == pattern) else {
        return Ok(());
    };
    if canonical(ty) != want.name {
        return Err(bag_err(
            file,
            format!(
                "topic /{bare} is recorded as {ty}, not {} as named",
                want.name
            ),
        ));
    }
    if enc != "cdr" {
        return Err(bag_err(
            file,
            format!("topic /{bare} is recorded in `{enc}`, not cdr"),
        ));
    }
    Ok(())
}

/// The rows as a [`Dataset`] (columns from [`RowSpec::input_names`] and the target's field;
/// each row's robot as its routing key, if known).
pub fn to_dataset(rows: &[Row], keys: Option<Vec<String>>, spec: &RowSpec) -> Dataset {
    let names = spec.input_names();
    let d = names.len();
    Dataset {
        x: Mat::from_fn(rows.len(), d, |i, j| rows[i].x[j]),
        y: rows.iter().map(|r| r.y).collect(),
        input_names: names,
        target_name: spec.target_name().to_string(),
        keys,
    }
}

/// Loads a bag as a [`Dataset`] with its counts.
///
/// # Errors
/// As [`read_bag`].
pub fn load_bag(path: &Path, spec: &RowSpec) -> Result<(Dataset, Counts)> {
    let bag = read_bag(path, spec)?;
    Ok((to_dataset(&bag.rows, bag.keys, spec), bag.counts))
}

#[cfg(test)]
#[path = "bag_tests.rs"]
mod tests;
