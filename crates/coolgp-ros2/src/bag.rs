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

use coolgp::faer::Mat;
use coolgp_data::Dataset;

use crate::assemble::{Counts, Row, RowAssembler};
use crate::error::{Result, Ros2Error};
use crate::spec::RowSpec;
use crate::types::canonical;

/// The first bytes of every MCAP file.
pub const MCAP_MAGIC: &[u8] = b"\x89MCAP0\r\n";

/// The rows of a recording and what happened to its messages.
#[derive(Clone, Debug)]
pub struct BagRows {
    /// Rows in the target's stamp order.
    pub rows: Vec<Row>,
    /// Message counts.
    pub counts: Counts,
    /// The files read.
    pub files: Vec<PathBuf>,
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
    let mut asm = RowAssembler::new(spec)?;
    let mut rows = Vec::new();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for file in &files {
        let bytes = read_mcap(file)?;
        let stream = mcap::MessageStream::new(&bytes).map_err(|e| bag_err(file, e.to_string()))?;
        let mut unpacked = Vec::new();
        for msg in stream {
            let msg = msg.map_err(|e| bag_err(file, format!("corrupt MCAP: {e}")))?;
            let data: &[u8] = if mode == Compression::Message {
                unpacked.clear();
                match zstd::stream::copy_decode(&msg.data[..], &mut unpacked) {
                    Ok(()) => &unpacked,
                    Err(_) => &[],
                }
            } else {
                &msg.data
            };
            let ch = &msg.channel;
            let ty = ch
                .schema
                .as_ref()
                .map(|s| s.name.clone())
                .unwrap_or_default();
            let bare = ch.topic.trim_matches('/');
            if !seen.contains_key(bare) {
                check_channel(file, spec, bare, &ty, &ch.message_encoding)?;
                seen.insert(bare.to_string(), ty);
            }
            asm.push(bare, data, msg.log_time as f64 * 1e-9);
            while let Some(row) = asm.pop() {
                rows.push(row);
            }
        }
    }
    asm.finish();
    while let Some(row) = asm.pop() {
        rows.push(row);
    }
    let listing = || {
        seen.iter()
            .map(|(t, ty)| format!("/{t} ({ty})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (topic, _) in spec.topics() {
        if !seen.contains_key(topic) {
            return Err(bag_err(
                path,
                format!("has no topic /{topic}; its topics: {}", listing()),
            ));
        }
    }
    let counts = asm.counts().clone();
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
    Ok(BagRows {
        rows,
        counts,
        files,
    })
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
        let bytes = read_mcap(&file)?;
        let stream = mcap::MessageStream::new(&bytes).map_err(|e| bag_err(&file, e.to_string()))?;
        for msg in stream {
            let msg = msg.map_err(|e| bag_err(&file, format!("corrupt MCAP: {e}")))?;
            let t = msg.log_time as f64 * 1e-9;
            let ch = &msg.channel;
            let entry = topics.entry(ch.topic.clone()).or_insert_with(|| BagTopic {
                topic: ch.topic.clone(),
                ty: ch
                    .schema
                    .as_ref()
                    .map(|s| s.name.clone())
                    .unwrap_or_default(),
                encoding: ch.message_encoding.clone(),
                messages: 0,
                span: (t, t),
            });
            entry.messages += 1;
            entry.span = (entry.span.0.min(t), entry.span.1.max(t));
        }
    }
    Ok(topics.into_values().collect())
}

/// The bytes of one MCAP file (`.mcap.zstd` decompressed), refused unless they start with
/// the MCAP magic.
fn read_mcap(file: &Path) -> Result<Vec<u8>> {
    let io = |source| Ros2Error::Io {
        file: file.display().to_string(),
        source,
    };
    let mut bytes = std::fs::read(file).map_err(io)?;
    if file.extension().is_some_and(|e| e == "zstd") {
        bytes = zstd::stream::decode_all(&bytes[..]).map_err(io)?;
    }
    if !bytes.starts_with(MCAP_MAGIC) {
        return Err(bag_err(
            file,
            "is not an MCAP file (no MCAP magic); coolgp reads rosbag2 bags in MCAP",
        ));
    }
    Ok(bytes)
}

/// Refuses a named topic recorded with another type or a message encoding other than CDR.
fn check_channel(file: &Path, spec: &RowSpec, bare: &str, ty: &str, enc: &str) -> Result<()> {
    let Some((_, want)) = spec.topics().into_iter().find(|(t, _)| *t == bare) else {
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

/// The rows as a [`Dataset`] (columns from [`RowSpec::input_names`] and the target's field).
pub fn to_dataset(rows: &[Row], spec: &RowSpec) -> Dataset {
    let names = spec.input_names();
    let d = names.len();
    Dataset {
        x: Mat::from_fn(rows.len(), d, |i, j| rows[i].x[j]),
        y: rows.iter().map(|r| r.y).collect(),
        input_names: names,
        target_name: spec.target_name().to_string(),
        keys: None,
    }
}

/// Loads a bag as a [`Dataset`] with its counts.
///
/// # Errors
/// As [`read_bag`].
pub fn load_bag(path: &Path, spec: &RowSpec) -> Result<(Dataset, Counts)> {
    let bag = read_bag(path, spec)?;
    Ok((to_dataset(&bag.rows, spec), bag.counts))
}
