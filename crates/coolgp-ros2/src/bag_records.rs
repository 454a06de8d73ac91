//! The records of an MCAP file, as the MCAP specification frames them (opcode u8, length
//! u64 LE, body): schemas and channels remembered, messages handed on borrowed, chunks
//! (uncompressed, zstd, lz4) walked in place. [`crate::bag`] reads recordings through it.
//!
//! A message record's fixed part (channel id u16, sequence u32, log time u64, publish time
//! u64, all LE; then the data) is read here directly: it is most of a recording's records,
//! and the `mcap` crate's general parser cost as much as decoding the CDR inside
//! (BENCHMARKS.md §17). Every other record goes through [`mcap::parse_record`].

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use crate::bag::{bag_err, MCAP_MAGIC};
use crate::error::{Result, Ros2Error};

/// One channel of a recording: topic, schema (type) name, message encoding.
#[derive(Clone, Debug, Default)]
pub(crate) struct ChannelInfo {
    pub(crate) topic: String,
    pub(crate) ty: String,
    pub(crate) encoding: String,
}

/// What is done with each message: its channel's id (unique within a file) and info, its
/// log time (ns) and its CDR bytes.
pub(crate) type OnMessage<'f> = dyn FnMut(u16, &ChannelInfo, u64, &[u8]) + 'f;

/// Bytes of a message record before its data: channel id, sequence, log time, publish time.
const MESSAGE_HEAD: usize = 2 + 4 + 8 + 8;

/// A message record's body: (channel id, log time in ns, data); `None` if shorter than its
/// fixed part.
#[inline]
fn message(body: &[u8]) -> Option<(u16, u64, &[u8])> {
    let (head, data) = body.split_at_checked(MESSAGE_HEAD)?;
    let id = u16::from_le_bytes([head[0], head[1]]);
    let mut t = [0u8; 8];
    t.copy_from_slice(&head[6..14]);
    Some((id, u64::from_le_bytes(t), data))
}

/// The channels and schemas seen so far in a file, and the room zstd chunks are
/// decompressed into (kept from chunk to chunk).
#[derive(Default)]
struct Channels {
    schemas: BTreeMap<u16, String>,
    channels: BTreeMap<u16, ChannelInfo>,
    unzstd: Option<zstd::bulk::Decompressor<'static>>,
    plain: Vec<u8>,
}

impl Channels {
    /// Takes one record other than a message or a chunk: remembers schemas and channels.
    fn take(&mut self, record: mcap::records::Record<'_>) {
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
            _ => {}
        }
    }

    /// Hands the message record `body` (at byte `pos` of its file or chunk) to `f`.
    #[inline]
    fn message(&self, file: &Path, pos: usize, body: &[u8], f: &mut OnMessage<'_>) -> Result<()> {
        let (id, log_time, data) = message(body).ok_or_else(|| {
            bag_err(
                file,
                format!(
                    "corrupt MCAP at byte {pos}: a message record of {} bytes",
                    body.len()
                ),
            )
        })?;
        f(id, self.channel(file, id)?, log_time, data);
        Ok(())
    }

    /// The channel of id `id`.
    fn channel(&self, file: &Path, id: u16) -> Result<&ChannelInfo> {
        self.channels.get(&id).ok_or_else(|| {
            bag_err(
                file,
                format!("corrupt MCAP: a message of unknown channel {id}"),
            )
        })
    }

    /// Takes one record of opcode `opcode` and body `body`, which ends at byte `pos`:
    /// schemas and channels remembered, a message handed to `f`, a chunk walked.
    fn record(
        &mut self,
        file: &Path,
        pos: usize,
        opcode: u8,
        body: &[u8],
        f: &mut OnMessage<'_>,
    ) -> Result<()> {
        use mcap::records::op;
        match opcode {
            op::MESSAGE => self.message(file, pos, body, f),
            op::SCHEMA | op::CHANNEL | op::CHUNK => {
                let record = mcap::parse_record(opcode, body)
                    .map_err(|e| bag_err(file, format!("corrupt MCAP at byte {pos}: {e}")))?;
                match record {
                    mcap::records::Record::Chunk { header, data } => {
                        chunk(file, header, &data, self, f)
                    }
                    other => {
                        self.take(other);
                        Ok(())
                    }
                }
            }
            _ => Ok(()),
        }
    }
}

/// The records of an MCAP byte range (`bytes[pos..]`), framed as the MCAP specification says
/// (opcode u8, length u64 LE, body), messages borrowed, not copied. Returns false if a record
/// ran past the end (a recording cut short, e.g. by a crash: the complete records before it
/// were read).
fn walk(
    file: &Path,
    bytes: &[u8],
    mut pos: usize,
    chans: &mut Channels,
    f: &mut OnMessage<'_>,
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
        match head[0] {
            op::FOOTER | op::DATA_END => return Ok(true),
            op::MESSAGE => chans.message(file, pos, body, f)?,
            opcode => chans.record(file, pos, opcode, body, f)?,
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
    f: &mut OnMessage<'_>,
) -> Result<()> {
    use mcap::records::Record;
    let corrupt = |e: String| bag_err(file, format!("corrupt MCAP chunk: {e}"));
    match header.compression.as_str() {
        "" => walk(file, data, 0, chans, f).map(|_| ()),
        "zstd" => {
            let cap = usize::try_from(header.uncompressed_size).unwrap_or(usize::MAX);
            let mut plain = std::mem::take(&mut chans.plain);
            unzstd(&mut chans.unzstd, data, cap, &mut plain).map_err(|e| corrupt(e.to_string()))?;
            let walked = walk(file, &plain, 0, chans, f);
            chans.plain = plain;
            walked.map(|_| ())
        }
        _ => {
            let reader =
                mcap::read::ChunkReader::new(header, data).map_err(|e| corrupt(e.to_string()))?;
            for record in reader {
                match record.map_err(|e| corrupt(e.to_string()))? {
                    Record::Message { header, data } => {
                        let ch = chans.channel(file, header.channel_id)?;
                        f(header.channel_id, ch, header.log_time, &data);
                    }
                    other => chans.take(other),
                }
            }
            Ok(())
        }
    }
}

/// Decompresses the zstd chunk `data` (of at most `cap` bytes, as its header says) into
/// `plain`: into the room it has when the frames' sizes say they fit, else (the first chunk,
/// a larger one, frames without sizes) as [`zstd::bulk::decompress`] does, checked the same
/// way.
fn unzstd(
    z: &mut Option<zstd::bulk::Decompressor<'static>>,
    data: &[u8],
    cap: usize,
    plain: &mut Vec<u8>,
) -> std::io::Result<()> {
    let z = match z {
        Some(z) => z,
        None => z.insert(zstd::bulk::Decompressor::new()?),
    };
    let fits = zstd::bulk::Decompressor::upper_bound(data)
        .is_some_and(|n| n <= cap && n <= plain.capacity());
    if fits {
        plain.clear();
        z.decompress_to_buffer(data, plain)?;
    } else {
        *plain = z.decompress(data, cap)?;
    }
    Ok(())
}

/// A piece of an MCAP file, as [`read_pieces`] hands it on (to [`Walker::piece`], on this
/// thread or another).
pub(crate) enum Piece {
    /// A top-level record: opcode, the byte after it in the file, body.
    Record(u8, usize, Vec<u8>),
    /// The records of a zstd chunk, decompressed.
    Chunk(Vec<u8>),
    /// The file ended: false if it was cut short inside a record.
    End(bool),
    /// The file cannot be read further.
    Failed(Ros2Error),
}

/// The reading half of [`for_each_message`]: `file`'s records in file order, each handed to
/// `emit` (which returns false to stop), ending with [`Piece::End`] or [`Piece::Failed`].
/// Buffers come from `spare` (empty or recycled ones). The file is streamed a record at a
/// time (a chunk is ~1 MB), never held whole; `.mcap.zstd` (rosbag2's file compression) is
/// decompressed on the way, and so are zstd chunks (the costliest step of a compressed
/// recording, off the thread that walks and decodes).
pub(crate) fn read_pieces(
    file: &Path,
    spare: &mut dyn FnMut() -> Vec<u8>,
    emit: &mut dyn FnMut(Piece) -> bool,
) {
    let io = |source| Ros2Error::Io {
        file: file.display().to_string(),
        source,
    };
    let opened = std::fs::File::open(file).and_then(|fh| Ok((fh.metadata()?.len(), fh)));
    let (size, fh) = match opened {
        Ok(o) => o,
        Err(e) => {
            emit(Piece::Failed(io(e)));
            return;
        }
    };
    let r: std::io::Result<Box<dyn Read>> = if file.extension().is_some_and(|e| e == "zstd") {
        zstd::stream::read::Decoder::new(fh).map(|d| Box::new(d) as Box<dyn Read>)
    } else {
        // Small: a record larger than the buffer (a chunk) is read straight into its body,
        // not copied through it.
        Ok(Box::new(std::io::BufReader::with_capacity(1 << 16, fh)))
    };
    let mut r = match r {
        Ok(r) => r,
        Err(e) => {
            emit(Piece::Failed(io(e)));
            return;
        }
    };
    let mut magic = [0u8; 8];
    if r.read_exact(&mut magic).is_err() || magic != MCAP_MAGIC {
        emit(Piece::Failed(bag_err(
            file,
            "is not an MCAP file (no MCAP magic); coolgp reads rosbag2 bags in MCAP",
        )));
        return;
    }
    let mut chunks = Unzstd::default();
    // The byte after the record being read (for error messages).
    let mut end = MCAP_MAGIC.len();
    loop {
        let piece = match next_record(file, &mut *r, size, &mut end, spare) {
            Ok(Some((opcode, body))) if opcode == mcap::records::op::CHUNK => {
                chunks.piece(file, end, body, spare)
            }
            Ok(Some((opcode, body))) => Piece::Record(opcode, end, body),
            Ok(None) => Piece::End(false),
            Err(piece) => piece,
        };
        let last = matches!(piece, Piece::End(_) | Piece::Failed(_));
        if !emit(piece) || last {
            return;
        }
    }
}

/// The next record of `r` (opcode, body in a buffer from `spare`), `end` moved past it;
/// `None` at a cut (end of file inside a record); `Err` with the piece that ends the file
/// (its footer or data end, a read error, an impossible length).
fn next_record(
    file: &Path,
    r: &mut dyn Read,
    size: u64,
    end: &mut usize,
    spare: &mut dyn FnMut() -> Vec<u8>,
) -> std::result::Result<Option<(u8, Vec<u8>)>, Piece> {
    use mcap::records::op;
    let io = |source| {
        Piece::Failed(Ros2Error::Io {
            file: file.display().to_string(),
            source,
        })
    };
    let mut head = [0u8; 9];
    match r.read_exact(&mut head) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(io(e)),
    }
    let mut len8 = [0u8; 8];
    len8.copy_from_slice(&head[1..]);
    let len = u64::from_le_bytes(len8);
    // A record longer than this cannot be real (a compressed file may expand 100-fold).
    let max_len = size.saturating_mul(100).max(1 << 30);
    if len > max_len {
        return Err(Piece::Failed(bag_err(
            file,
            format!("corrupt MCAP: a record of {len} bytes in a file of {size}"),
        )));
    }
    if matches!(head[0], op::FOOTER | op::DATA_END) {
        return Err(Piece::End(true));
    }
    let mut body = spare();
    body.resize(usize::try_from(len).unwrap_or(usize::MAX), 0);
    match r.read_exact(&mut body) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(io(e)),
    }
    *end = end.saturating_add(9).saturating_add(body.len());
    Ok(Some((head[0], body)))
}

/// The reading side's zstd: a decompressor kept from chunk to chunk.
#[derive(Default)]
struct Unzstd {
    z: Option<zstd::bulk::Decompressor<'static>>,
}

impl Unzstd {
    /// A chunk record (ending at byte `end`) as a piece: a zstd chunk decompressed into a
    /// buffer from `spare` (its record's own buffer recycled into the next one), any other
    /// chunk as the record itself (walked in place, or lz4 by the `mcap` crate's reader).
    fn piece(
        &mut self,
        file: &Path,
        end: usize,
        body: Vec<u8>,
        spare: &mut dyn FnMut() -> Vec<u8>,
    ) -> Piece {
        use mcap::records::{op, Record};
        let (header, data) = match mcap::parse_record(op::CHUNK, &body) {
            Ok(Record::Chunk { header, data }) if header.compression == "zstd" => (header, data),
            Ok(_) => return Piece::Record(op::CHUNK, end, body),
            Err(e) => {
                return Piece::Failed(bag_err(file, format!("corrupt MCAP at byte {end}: {e}")))
            }
        };
        let cap = usize::try_from(header.uncompressed_size).unwrap_or(usize::MAX);
        let mut plain = spare();
        match unzstd(&mut self.z, &data, cap, &mut plain) {
            Ok(()) => Piece::Chunk(plain),
            Err(e) => Piece::Failed(bag_err(file, format!("corrupt MCAP chunk: {e}"))),
        }
    }
}

/// The walking half of [`for_each_message`]: one file's pieces in order, each message handed
/// to `f`.
#[derive(Default)]
pub(crate) struct Walker {
    chans: Channels,
}

impl Walker {
    /// Takes the next piece of the file: `Ok(None)` to go on (its buffer, if any, given back
    /// through `recycle`), `Ok(Some(complete))` at its end.
    ///
    /// # Errors
    /// A piece that failed; a corrupt record or chunk.
    pub(crate) fn piece(
        &mut self,
        file: &Path,
        piece: Piece,
        recycle: &mut dyn FnMut(Vec<u8>),
        f: &mut OnMessage<'_>,
    ) -> Result<Option<bool>> {
        match piece {
            Piece::Record(opcode, end, body) => {
                self.chans.record(file, end, opcode, &body, f)?;
                recycle(body);
            }
            Piece::Chunk(plain) => {
                walk(file, &plain, 0, &mut self.chans, f)?;
                recycle(plain);
            }
            Piece::End(complete) => return Ok(Some(complete)),
            Piece::Failed(e) => return Err(e),
        }
        Ok(None)
    }
}

/// Calls `f` with each message of the MCAP file `file`, in file order: channel id and info,
/// log time in ns, CDR bytes ([`read_pieces`] and a [`Walker`] on this thread). Returns false
/// if the file was cut short (the complete records before the cut were read).
///
/// # Errors
/// [`Ros2Error::Io`] on a read error; [`Ros2Error::Bag`] if it is not MCAP or is corrupt.
pub(crate) fn for_each_message(file: &Path, f: &mut OnMessage<'_>) -> Result<bool> {
    let spare = std::cell::Cell::new(Vec::new());
    let mut walker = Walker::default();
    let mut outcome = Ok(false);
    read_pieces(file, &mut || spare.take(), &mut |piece| {
        match walker.piece(file, piece, &mut |buf| spare.set(buf), f) {
            Ok(None) => return true,
            Ok(Some(complete)) => outcome = Ok(complete),
            Err(e) => outcome = Err(e),
        }
        false
    });
    outcome
}
