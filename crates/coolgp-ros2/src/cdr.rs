//! CDR (OMG XCDR1, plain), as ROS 2 puts it on the wire and in bags.
//!
//! A 4-byte encapsulation header: the representation identifier, a big-endian u16 (0x0001
//! CDR_LE, 0x0000 CDR_BE: the byte order of what follows), then two option bytes; then each
//! value aligned to its own size counted from the end of the header, in that byte order; a
//! string is a u32 length that counts its NUL, the bytes and the NUL; a sequence a u32 count
//! and its elements; a fixed array its elements alone. Other representations (parameter
//! lists, XCDR2) are refused with [`CdrError::Encapsulation`], naming the one seen.

use crate::error::CdrError;
use crate::types::Prim;

/// Length of the encapsulation header.
pub const HEADER_LEN: usize = 4;

/// Representation identifier of plain CDR, big endian (XCDR1).
pub const CDR_BE: [u8; 2] = [0x00, 0x00];
/// Representation identifier of plain CDR, little endian (XCDR1): what ROS 2 publishers on
/// x86 and ARM send.
pub const CDR_LE: [u8; 2] = [0x00, 0x01];

/// The byte order of a CDR message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endian {
    /// Little endian (`CDR_LE`, 0x0001).
    Little,
    /// Big endian (`CDR_BE`, 0x0000).
    Big,
}

impl Endian {
    /// The representation identifier of plain CDR in this byte order.
    pub fn representation(self) -> [u8; 2] {
        match self {
            Endian::Little => CDR_LE,
            Endian::Big => CDR_BE,
        }
    }
}

/// The name of a representation identifier (RTPS 2.5 table 10.3, DDS-XTypes 1.3 §7.6.3.1.2),
/// for error messages.
pub fn representation_name(id: [u8; 2]) -> &'static str {
    match u16::from_be_bytes(id) {
        0x0000 => "CDR_BE",
        0x0001 => "CDR_LE",
        0x0002 => "PL_CDR_BE",
        0x0003 => "PL_CDR_LE",
        0x0004 => "XML",
        0x0006 => "CDR2_BE (XCDR2)",
        0x0007 => "CDR2_LE (XCDR2)",
        0x0008 => "D_CDR2_BE (XCDR2)",
        0x0009 => "D_CDR2_LE (XCDR2)",
        0x000a => "PL_CDR2_BE (XCDR2)",
        0x000b => "PL_CDR2_LE (XCDR2)",
        _ => "unknown",
    }
}

/// The byte order a message's header declares.
///
/// # Errors
/// [`CdrError::Truncated`] if shorter than the header; [`CdrError::Encapsulation`] for any
/// representation but plain CDR (XCDR1) in either byte order.
#[inline]
pub fn endian(buf: &[u8]) -> Result<Endian, CdrError> {
    match buf {
        [0, 1, _, _, ..] => Ok(Endian::Little),
        [0, 0, _, _, ..] => Ok(Endian::Big),
        [a, b, _, _, ..] => Err(CdrError::Encapsulation([*a, *b])),
        _ => Err(CdrError::Truncated {
            at: 0,
            need: HEADER_LEN,
        }),
    }
}

/// A reader over one serialized message.
#[derive(Debug)]
pub struct CdrReader<'a> {
    buf: &'a [u8],
    pos: usize,
    little: bool,
}

impl<'a> CdrReader<'a> {
    /// Checks the encapsulation header and starts after it.
    ///
    /// # Errors
    /// [`CdrError::Truncated`] if shorter than the header; [`CdrError::Encapsulation`] unless
    /// the header says plain CDR (XCDR1), big or little endian (see [`endian`]).
    #[inline]
    pub fn new(buf: &'a [u8]) -> Result<Self, CdrError> {
        let little = endian(buf)? == Endian::Little;
        Ok(Self {
            buf,
            pos: HEADER_LEN,
            little,
        })
    }

    /// The message's byte order.
    pub fn endian(&self) -> Endian {
        if self.little {
            Endian::Little
        } else {
            Endian::Big
        }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// Runs `f` on a [`Cursor`] at this reader's position in its byte order, then moves on to
    /// where the cursor stopped (also after an error, as a failed read leaves it aligned).
    #[inline]
    fn with<T>(
        &mut self,
        le: impl FnOnce(&mut Cursor<'a, true>) -> T,
        be: impl FnOnce(&mut Cursor<'a, false>) -> T,
    ) -> T {
        if self.little {
            let mut c = Cursor::at(self.buf, self.pos);
            let out = le(&mut c);
            self.pos = c.pos;
            out
        } else {
            let mut c = Cursor::at(self.buf, self.pos);
            let out = be(&mut c);
            self.pos = c.pos;
            out
        }
    }

    /// A u32 (a string length or a sequence count).
    ///
    /// # Errors
    /// [`CdrError::Truncated`].
    pub fn u32(&mut self) -> Result<u32, CdrError> {
        self.with(|c| c.u32(), |c| c.u32())
    }

    /// A numeric primitive as `f64` (integers exactly up to 2^53).
    ///
    /// # Errors
    /// [`CdrError::Truncated`]; a string is read and refused with [`CdrError::NotNumeric`].
    pub fn number(&mut self, p: Prim) -> Result<f64, CdrError> {
        self.with(|c| c.number(p), |c| c.number(p))
    }

    /// A string (without its NUL); invalid UTF-8 is refused.
    ///
    /// # Errors
    /// [`CdrError::Truncated`], [`CdrError::BadString`].
    pub fn string(&mut self) -> Result<&'a str, CdrError> {
        self.with(|c| c.string(), |c| c.string())
    }

    /// Reads (and drops) one primitive.
    ///
    /// # Errors
    /// As [`Self::number`] and [`Self::string`].
    pub fn skip(&mut self, p: Prim) -> Result<(), CdrError> {
        self.with(|c| c.skip(p), |c| c.skip(p))
    }
}

/// The reading itself, its byte order a constant (`LE`: little endian), so that a loop over a
/// message's fields compiles to straight loads without a test of the order per value (the
/// extractors' hot path, [`crate::extract::Extractor::decode`]; [`CdrReader`] wraps it).
///
/// Positions count from the start of the message; each value of `N` bytes is aligned to `N`
/// counted from the end of the header. A read that does not fit leaves the position aligned
/// and returns [`CdrError::Truncated`] with that position.
#[derive(Debug)]
pub(crate) struct Cursor<'a, const LE: bool> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a, const LE: bool> Cursor<'a, LE> {
    /// A cursor at byte `pos` (at least [`HEADER_LEN`]) of `buf`.
    #[inline(always)]
    pub(crate) fn at(buf: &'a [u8], pos: usize) -> Self {
        Self { buf, pos }
    }

    /// `n` bytes at the position (not aligned).
    #[inline(always)]
    fn take(&mut self, n: usize) -> Result<&'a [u8], CdrError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(CdrError::Truncated {
                at: self.pos,
                need: n,
            }),
        }
    }

    /// One value of `N` bytes (1, 2, 4 or 8), aligned to `N`, as little-endian bytes.
    #[inline(always)]
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], CdrError> {
        // N is a power of two: rounding up to it is a mask.
        let rel = self.pos - HEADER_LEN;
        self.pos = HEADER_LEN + ((rel + N - 1) & !(N - 1));
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        if !LE {
            a.reverse();
        }
        Ok(a)
    }

    /// A u32 (a string length or a sequence count).
    #[inline(always)]
    pub(crate) fn u32(&mut self) -> Result<u32, CdrError> {
        Ok(u32::from_le_bytes(self.bytes::<4>()?))
    }

    /// A numeric primitive as `f64` (integers exactly up to 2^53); a string is read and
    /// refused with [`CdrError::NotNumeric`].
    #[inline(always)]
    pub(crate) fn number(&mut self, p: Prim) -> Result<f64, CdrError> {
        Ok(match p {
            Prim::I8 => f64::from(i8::from_le_bytes(self.bytes::<1>()?)),
            Prim::U8 | Prim::Byte | Prim::Bool => f64::from(self.bytes::<1>()?[0]),
            Prim::I16 => f64::from(i16::from_le_bytes(self.bytes::<2>()?)),
            Prim::U16 => f64::from(u16::from_le_bytes(self.bytes::<2>()?)),
            Prim::I32 => f64::from(i32::from_le_bytes(self.bytes::<4>()?)),
            Prim::U32 => f64::from(self.u32()?),
            Prim::I64 => i64::from_le_bytes(self.bytes::<8>()?) as f64,
            Prim::U64 => u64::from_le_bytes(self.bytes::<8>()?) as f64,
            Prim::F32 => f64::from(f32::from_le_bytes(self.bytes::<4>()?)),
            Prim::F64 => f64::from_le_bytes(self.bytes::<8>()?),
            Prim::String => {
                self.string()?;
                return Err(CdrError::NotNumeric);
            }
        })
    }

    /// A string (without its NUL); invalid UTF-8 is refused.
    #[inline(always)]
    pub(crate) fn string(&mut self) -> Result<&'a str, CdrError> {
        let (text, at) = self.string_bytes()?;
        std::str::from_utf8(text).map_err(|_| CdrError::BadString { at })
    }

    /// A string's bytes without its NUL, and where they start: a `u32` length, then that many
    /// bytes ending in NUL (or none); any other last byte is refused.
    #[inline(always)]
    fn string_bytes(&mut self) -> Result<(&'a [u8], usize), CdrError> {
        let len = self.u32()? as usize;
        let at = self.pos;
        let raw = self.take(len)?;
        match raw.split_last() {
            Some((0, text)) => Ok((text, at)),
            None => Ok((raw, at)),
            Some(_) => Err(CdrError::BadString { at }),
        }
    }

    /// Reads (and drops) a string, refused as [`Self::string`] refuses it.
    #[inline(always)]
    pub(crate) fn skip_string(&mut self) -> Result<(), CdrError> {
        let (text, at) = self.string_bytes()?;
        // ASCII (frame ids) is UTF-8 without the general check.
        if text.is_ascii() || std::str::from_utf8(text).is_ok() {
            Ok(())
        } else {
            Err(CdrError::BadString { at })
        }
    }

    /// Reads (and drops) one primitive.
    #[inline(always)]
    pub(crate) fn skip(&mut self, p: Prim) -> Result<(), CdrError> {
        match p {
            Prim::String => self.string().map(|_| ()),
            _ => self.number(p).map(|_| ()),
        }
    }
}

/// A writer of one CDR message (header included), little endian unless made with
/// [`CdrWriter::new`] and [`Endian::Big`].
#[derive(Debug, Clone)]
pub struct CdrWriter {
    buf: Vec<u8>,
    little: bool,
}

impl Default for CdrWriter {
    fn default() -> Self {
        Self::with_capacity(64)
    }
}

impl CdrWriter {
    /// An empty little-endian message of room `cap` bytes, header written.
    pub fn with_capacity(cap: usize) -> Self {
        Self::new(Endian::Little, cap)
    }

    /// An empty message in byte order `endian`, of room `cap` bytes, header written.
    pub fn new(endian: Endian, cap: usize) -> Self {
        let mut buf = Vec::with_capacity(cap.max(HEADER_LEN));
        buf.extend_from_slice(&endian.representation());
        buf.extend_from_slice(&[0, 0]);
        Self {
            buf,
            little: endian == Endian::Little,
        }
    }

    fn align(&mut self, n: usize) {
        let rel = self.buf.len() - HEADER_LEN;
        let pad = (n - rel % n) % n;
        self.buf.resize(self.buf.len() + pad, 0);
    }

    /// One value of `N` bytes given in little-endian order, aligned to `N` and written in
    /// the message's order.
    fn put<const N: usize>(&mut self, mut le: [u8; N]) {
        self.align(N);
        if !self.little {
            le.reverse();
        }
        self.buf.extend_from_slice(&le);
    }

    /// A u8 (also `byte`, `bool`).
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// A u32.
    pub fn u32(&mut self, v: u32) {
        self.put(v.to_le_bytes());
    }

    /// An i32.
    pub fn i32(&mut self, v: i32) {
        self.put(v.to_le_bytes());
    }

    /// An f64.
    pub fn f64(&mut self, v: f64) {
        self.put(v.to_le_bytes());
    }

    /// A numeric primitive from an `f64` (cast as `as` does; a string is written empty).
    pub fn number(&mut self, p: Prim, v: f64) {
        match p {
            Prim::I8 => self.u8(v as i8 as u8),
            Prim::U8 | Prim::Byte => self.u8(v as u8),
            Prim::Bool => self.u8(u8::from(v != 0.0)),
            Prim::I16 => self.put((v as i16).to_le_bytes()),
            Prim::U16 => self.put((v as u16).to_le_bytes()),
            Prim::I32 => self.i32(v as i32),
            Prim::U32 => self.u32(v as u32),
            Prim::I64 => self.put((v as i64).to_le_bytes()),
            Prim::U64 => self.put((v as u64).to_le_bytes()),
            Prim::F32 => self.put((v as f32).to_le_bytes()),
            Prim::F64 => self.f64(v),
            Prim::String => self.string(""),
        }
    }

    /// One primitive of `size` bytes (1, 2, 4 or 8), its bits given as a `u64` (the low
    /// `size` bytes): a value read in another byte order written unchanged.
    ///
    /// # Panics
    /// If `size` is not 1, 2, 4 or 8 (our misuse: the size comes from [`Prim::size`]).
    #[track_caller]
    pub fn bits(&mut self, size: usize, v: u64) {
        let b = v.to_le_bytes();
        match size {
            1 => self.u8(b[0]),
            2 => self.put([b[0], b[1]]),
            4 => self.put([b[0], b[1], b[2], b[3]]),
            8 => self.put(b),
            _ => panic!("a CDR primitive is 1, 2, 4 or 8 bytes, not {size}"),
        }
    }

    /// A string (length with the NUL, bytes, NUL).
    pub fn string(&mut self, s: &str) {
        let len = u32::try_from(s.len() + 1).unwrap_or(u32::MAX);
        self.u32(len);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
    }

    /// Raw bytes (a `uint8[]` body after its count).
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The message.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float64_matches_the_notes_vector() {
        let mut w = CdrWriter::default();
        w.f64(1.5);
        let bytes = w.finish();
        assert_eq!(bytes, [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F]);
        let mut r = CdrReader::new(&bytes).expect("header");
        assert_eq!(r.number(Prim::F64).expect("value"), 1.5);
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn big_endian_strings_and_alignment() {
        // Big endian: a u8, then a string "ab" (aligned to 4), then an f64 (aligned to 8).
        let mut bytes = vec![
            0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 3, b'a', b'b', 0, 0, 0, 0, 0, 0,
        ];
        bytes.extend_from_slice(&2.5f64.to_be_bytes());
        let mut r = CdrReader::new(&bytes).expect("header");
        assert_eq!(r.number(Prim::U8).expect("u8"), 7.0);
        assert_eq!(r.string().expect("string"), "ab");
        assert_eq!(r.number(Prim::F64).expect("f64"), 2.5);
    }

    #[test]
    fn bad_input_is_refused_not_panicking() {
        assert!(matches!(
            CdrReader::new(&[0, 1]),
            Err(CdrError::Truncated { .. })
        ));
        assert!(matches!(
            CdrReader::new(&[0, 7, 0, 0]),
            Err(CdrError::Encapsulation([0, 7]))
        ));
        let mut r = CdrReader::new(&[0, 1, 0, 0, 1, 2, 3]).expect("header");
        assert!(matches!(
            r.number(Prim::F64),
            Err(CdrError::Truncated { .. })
        ));
        // A string whose length runs past the end.
        let mut r = CdrReader::new(&[0, 1, 0, 0, 255, 255, 255, 255, b'x']).expect("header");
        assert!(matches!(r.string(), Err(CdrError::Truncated { .. })));
        // A string without its NUL.
        let mut r = CdrReader::new(&[0, 1, 0, 0, 2, 0, 0, 0, b'x', b'y']).expect("header");
        assert!(matches!(r.string(), Err(CdrError::BadString { .. })));
    }
}
