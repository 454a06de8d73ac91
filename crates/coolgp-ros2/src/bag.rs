//! rosbag2 recordings in MCAP (ROS 2's default storage) as data.
//!
//! A bag is a directory holding `metadata.yaml` and one or more `.mcap` files, or an `.mcap`
//! file alone. Messages are read in file order with the maintained `mcap` crate (chunks
//! compressed with zstd or lz4 included), decoded from CDR and paired into rows by the same
//! [`RowAssembler`] as live topics, so a recording and the live stream it recorded give the
//! same rows. A bag in the SQLite storage (`.db3`) is refused with the command that converts
//! it; a topic whose recorded type differs from the one named is refused naming both.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, SyncSender};

use coolgp::faer::Mat;
use coolgp_data::Dataset;

use crate::assemble::{Counts, Decoded, Decoder, Row, RowAssembler};
use crate::bag_records::{for_each_message, read_pieces, ChannelInfo, Piece, Walker};
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

pub(crate) fn bag_err(path: &Path, message: impl Into<String>) -> Ros2Error {
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
    let flat = read_flat(path, spec)?;
    let d = spec.input_names().len();
    let rows = (0..flat.y.len())
        .map(|i| Row {
            stamp: flat.stamps[i],
            x: flat.x[i * d..(i + 1) * d].to_vec(),
            y: flat.y[i],
        })
        .collect();
    Ok(BagRows {
        rows,
        keys: flat.keys,
        counts: flat.counts,
        files: flat.files,
        truncated: flat.truncated,
    })
}

/// The rows of a recording held flat, without an allocation per row (what [`read_bag`] and
/// [`load_bag`] are made of): `n` rows of `d` inputs, [`RowSpec::input_names`].
struct FlatRows {
    /// Inputs `[n · d]`, row after row.
    x: Vec<f64>,
    /// Targets `[n]`.
    y: Vec<f64>,
    /// The target messages' stamps `[n]`, seconds.
    stamps: Vec<f64>,
    /// Each row's robot `[n]` when the topics are every robot's (`/*/…`).
    keys: Option<Vec<String>>,
    counts: Counts,
    files: Vec<PathBuf>,
    truncated: bool,
}

/// The rows as the pairing thread makes them: [`FlatRows`]' columns and each row's robot
/// (index into the robots' assemblers; kept only with every robot's topics, `/*/…`).
#[derive(Default)]
struct Collected {
    x: Vec<f64>,
    y: Vec<f64>,
    stamps: Vec<f64>,
    groups: Vec<usize>,
    per_robot: bool,
}

impl Collected {
    /// Takes the rows `asm` (robot `g`'s assembler) has ready.
    #[inline]
    fn drain(&mut self, g: usize, asm: &mut RowAssembler) {
        while let Some((stamp, y)) = asm.pop_into(&mut self.x) {
            self.y.push(y);
            self.stamps.push(stamp);
            if self.per_robot {
                self.groups.push(g);
            }
        }
    }

    /// The rows robot by robot (in the order they first appear), each in its own stamp order:
    /// the rows of one robot together, as a CSV with a robot column would hold them.
    fn robot_by_robot(self, d: usize) -> Self {
        if self.groups.windows(2).all(|w| w[0] <= w[1]) {
            return self;
        }
        let mut order: Vec<usize> = (0..self.y.len()).collect();
        order.sort_by_key(|&i| self.groups[i]);
        Self {
            per_robot: self.per_robot,
            x: order
                .iter()
                .flat_map(|&i| self.x[i * d..(i + 1) * d].iter().copied())
                .collect(),
            y: order.iter().map(|&i| self.y[i]).collect(),
            stamps: order.iter().map(|&i| self.stamps[i]).collect(),
            groups: order.iter().map(|&i| self.groups[i]).collect(),
        }
    }
}

/// [`read_bag`]'s rows, flat.
fn read_flat(path: &Path, spec: &RowSpec) -> Result<FlatRows> {
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
    let mut rows = Collected {
        per_robot: spec.per_namespace(),
        ..Collected::default()
    };
    // Three threads in a pipeline: one reads the files (and decompresses zstd chunks), one
    // walks their records and decodes the messages, this one pairs (BENCHMARKS.md §17).
    let read = std::thread::scope(|scope| {
        let (piece_tx, pieces) = std::sync::mpsc::sync_channel::<Piece>(4);
        let (back, spare) = std::sync::mpsc::channel::<Vec<u8>>();
        let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(4);
        let files = &files;
        scope.spawn(move || read_files(files, &piece_tx, &spare));
        let walker = scope.spawn(move || read_messages(files, spec, mode, &pieces, &back, tx));
        for batch in rx {
            for ns in batch.new_groups {
                let asm = RowAssembler::new(&spec.for_namespace(&ns))?;
                robots.push((ns, asm));
            }
            let (mut k, mut at) = (0, 0);
            let Decoded { outcomes, values } = &batch.decoded;
            for &(g, t) in &batch.msgs {
                let asm = &mut robots[g].1;
                let (n, w) = asm.decoder().shape(t);
                asm.push_decoded(t, &outcomes[k..k + n], &values[at..at + w]);
                (k, at) = (k + n, at + w);
                rows.drain(g, asm);
            }
        }
        walker
            .join()
            .map_err(|_| bag_err(path, "the decoding thread panicked"))?
    })?;
    let mut counts = Counts::default();
    for (g, (_, asm)) in robots.iter_mut().enumerate() {
        asm.finish();
        rows.drain(g, asm);
        counts.add(asm.counts());
    }
    counts.other_topics += read.other;
    check_rows(path, spec, &read.seen, &counts, rows.y.len())?;
    let rows = rows.robot_by_robot(spec.input_names().len());
    let keys = spec.per_namespace().then(|| {
        rows.groups
            .iter()
            .map(|&g| robots[g].0.clone())
            .collect::<Vec<_>>()
    });
    Ok(FlatRows {
        x: rows.x,
        y: rows.y,
        stamps: rows.stamps,
        keys,
        counts,
        files,
        truncated: !read.complete,
    })
}

/// Refuses a recording that lacks a named topic (listing the topics it has, `seen`) or gave
/// no row (`n`).
fn check_rows(
    path: &Path,
    spec: &RowSpec,
    seen: &BTreeMap<String, String>,
    counts: &Counts,
    n: usize,
) -> Result<()> {
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
    if n == 0 {
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
    Ok(())
}

/// Messages handed from the reading thread to the pairing one, decoded ([`Decoder`]): per
/// message its robot (group: 0 unless the topics are every robot's, `/*/…`) and its topic's
/// index in [`RowSpec::topics`]; and the robots first seen in the batch.
#[derive(Default)]
struct Batch {
    decoded: Decoded,
    msgs: Vec<(usize, usize)>,
    new_groups: Vec<String>,
}

/// Messages per [`Batch`].
const BATCH_MESSAGES: usize = 1 << 14;

/// What the reading thread found: the bag's topics (bare name → type), whether every file
/// was complete, and the messages of topics not named.
struct Scan {
    seen: BTreeMap<String, String>,
    complete: bool,
    other: u64,
}

/// A message's route: its robot (group: 0 unless the topics are every robot's, `/*/…`) and
/// its topic's index in [`RowSpec::topics`]; `None` for a topic not named.
type Route = Option<(usize, usize)>;

/// The routes of a file's channels, worked out at each channel's first message.
struct Routes<'s> {
    spec: &'s RowSpec,
    topics: Vec<&'s str>,
    /// The robots (namespaces) in the order first seen, over all files.
    groups: Vec<String>,
    /// This file's routes by topic, and the same by channel id (ids are a file's own).
    by_topic: BTreeMap<String, Route>,
    by_id: Vec<Option<Route>>,
}

impl<'s> Routes<'s> {
    fn new(spec: &'s RowSpec) -> Self {
        Self {
            spec,
            topics: spec.topics().iter().map(|(t, _)| *t).collect(),
            groups: Vec::new(),
            by_topic: BTreeMap::new(),
            by_id: Vec::new(),
        }
    }

    /// Starts a new file.
    fn new_file(&mut self) {
        self.by_topic.clear();
        self.by_id.clear();
    }

    /// The route of channel `id` (`ch`) of `file`. At a topic's first message it is entered
    /// in `out.seen`, a new robot in `new_groups`, and a named topic recorded with another
    /// type or encoding refused into `refused`.
    #[inline]
    fn route(
        &mut self,
        file: &Path,
        id: u16,
        ch: &ChannelInfo,
        out: &mut Scan,
        new_groups: &mut Vec<String>,
        refused: &mut Option<Ros2Error>,
    ) -> Route {
        let id = usize::from(id);
        if let Some(Some(route)) = self.by_id.get(id) {
            return *route;
        }
        let route = match self.by_topic.get(&ch.topic) {
            Some(route) => *route,
            None => {
                let route = self.first(file, ch, out, new_groups, refused);
                self.by_topic.insert(ch.topic.clone(), route);
                route
            }
        };
        if self.by_id.len() <= id {
            self.by_id.resize(id + 1, None);
        }
        self.by_id[id] = Some(route);
        route
    }

    /// The route of a topic not seen before in this file.
    fn first(
        &mut self,
        file: &Path,
        ch: &ChannelInfo,
        out: &mut Scan,
        new_groups: &mut Vec<String>,
        refused: &mut Option<Ros2Error>,
    ) -> Route {
        let spec = self.spec;
        let bare = ch.topic.trim_matches('/');
        out.seen.insert(bare.to_string(), ch.ty.clone());
        let found = self.topics.iter().enumerate().find_map(|(t, pattern)| {
            if spec.per_namespace() {
                namespace_of(pattern, bare).map(|ns| (t, Some(ns)))
            } else {
                (*pattern == bare).then_some((t, None))
            }
        });
        let (t, ns) = found?;
        if let Err(e) = check_channel(file, spec, self.topics[t], bare, ch) {
            refused.get_or_insert(e);
        }
        let g = match ns {
            None => 0,
            Some(ns) => match self.groups.iter().position(|g| g == ns) {
                Some(g) => g,
                None => {
                    self.groups.push(ns.to_string());
                    new_groups.push(ns.to_string());
                    self.groups.len() - 1
                }
            },
        };
        Some((g, t))
    }
}

/// Reads `files` in order into `tx` as [`Piece`]s, buffers taken back from `spare`; stops
/// at the first file that fails (or when the receiver is gone).
fn read_files(files: &[PathBuf], tx: &SyncSender<Piece>, spare: &Receiver<Vec<u8>>) {
    for file in files {
        let mut go_on = true;
        read_pieces(
            file,
            &mut || spare.try_recv().unwrap_or_default(),
            &mut |piece| {
                go_on = !matches!(piece, Piece::Failed(_));
                go_on &= tx.send(piece).is_ok();
                go_on
            },
        );
        if !go_on {
            return;
        }
    }
}

/// Walks `files` in order, their [`Piece`]s coming from `pieces` (buffers given `back`),
/// sending the named topics' messages to `tx` decoded, in batches (rosbag2's per-message zstd
/// undone on the way).
///
/// # Errors
/// As [`for_each_message`]; a named topic recorded with another type or encoding.
fn read_messages(
    files: &[PathBuf],
    spec: &RowSpec,
    mode: Compression,
    pieces: &Receiver<Piece>,
    back: &Sender<Vec<u8>>,
    tx: SyncSender<Batch>,
) -> Result<Scan> {
    let mut routes = Routes::new(spec);
    // The topics' types and fields are every robot's: one decoder serves them all.
    let decoder = Decoder::new(spec)?;
    let mut out = Scan {
        seen: BTreeMap::new(),
        complete: true,
        other: 0,
    };
    let mut batch = Batch::default();
    let mut unpacked = Vec::new();
    for file in files {
        let mut refused: Option<Ros2Error> = None;
        routes.new_file();
        let mut on_message = |id, ch: &ChannelInfo, log_time, data: &[u8]| {
            let route = routes.route(file, id, ch, &mut out, &mut batch.new_groups, &mut refused);
            let Some((g, t)) = route else {
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
            decoder.decode(t, data, log_time as f64 * 1e-9, &mut batch.decoded);
            batch.msgs.push((g, t));
            if batch.msgs.len() >= BATCH_MESSAGES {
                // The pairing thread ends only when this one drops `tx`: a send cannot fail
                // while it runs.
                let _ = tx.send(std::mem::take(&mut batch));
            }
        };
        let mut walker = Walker::default();
        let complete = loop {
            let piece = pieces
                .recv()
                .map_err(|_| bag_err(file, "the reading thread stopped"))?;
            let mut recycle = |buf| {
                let _ = back.send(buf);
            };
            if let Some(c) = walker.piece(file, piece, &mut recycle, &mut on_message)? {
                break c;
            }
        };
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
        for_each_message(&file, &mut |_, ch, log_time, _| {
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
    let flat = read_flat(path, spec)?;
    let names = spec.input_names();
    let d = names.len();
    let ds = Dataset {
        x: Mat::from_fn(flat.y.len(), d, |i, j| flat.x[i * d + j]),
        y: flat.y,
        input_names: names,
        target_name: spec.target_name().to_string(),
        keys: flat.keys,
    };
    Ok((ds, flat.counts))
}

#[cfg(test)]
#[path = "bag_tests.rs"]
mod tests;
