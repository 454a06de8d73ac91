//! The wire codec: [`Message`] ⇄ bytes.
//!
//! A fixed, self-describing binary layout, **little-endian everywhere**. The codec checks
//! *structure* only (magic, version, kinds, flags, lengths, limits); the *values* (finite,
//! symmetric, PSD, plausible, fingerprint, round) are checked afterwards by
//! [`Agent::handle_message`](crate::Agent::handle_message) via
//! [`validate_excess`](super::validate_excess). NaN and infinities therefore decode fine.
//!
//! # Layout
//!
//! Header (74 bytes):
//!
//! | offset | size | field         | notes                                             |
//! |-------:|-----:|---------------|---------------------------------------------------|
//! |      0 |    3 | magic         | `b"CGP"`                                          |
//! |      3 |    1 | version       | [`FORMAT_VERSION`] = 1                            |
//! |      4 |    1 | body kind     | 0 = tree, 1 = push-sum, 2 = site only             |
//! |      5 |    1 | flags         | bit 0: projection share; bit 1: site; bit 2: grouped sites; others 0 |
//! |      6 |   32 | fingerprint   | [`Fingerprint`] bytes                             |
//! |     38 |    8 | sender        | u64                                               |
//! |     46 |    8 | receiver      | u64                                               |
//! |     54 |    8 | round         | u64                                               |
//! |     62 |    8 | version       | u64 (data version)                                |
//! |     70 |    4 | m             | u32, `m ≤` [`MAX_M`]                              |
//!
//! Body, with `t = m(m+1)/2` (the upper triangle of D1, row by row: `(0,0), (0,1), …,
//! (0,m−1), (1,1), …, (m−1,m−1)`, i.e. all `(i, j)` with `i ≤ j`):
//!
//! | kind     | fields (all f64)                     | size             |
//! |----------|--------------------------------------|------------------|
//! | tree     | points, D1 (t values), D2 (m values) | `8 (1 + t + m)`  |
//! | push-sum | w, points, x.d1 (t), x.d2 (m)        | `8 (2 + t + m)`  |
//! | site     | nothing (the site section is required) | 0              |
//!
//! Projection share, present iff flag bit 0 is set, with `n ≤` [`MAX_PROJECTION_LEN`]:
//!
//! | field  | type      | size  |
//! |--------|-----------|-------|
//! | weight | f64       | 8     |
//! | n      | u32       | 4     |
//! | theta  | n × f64   | 8 n   |
//! | m1     | n × f64   | 8 n   |
//! | m2     | n × f64   | 8 n   |
//!
//! Site sums of the fleet's q(W) (spec §14), present iff flag bit 1 is set, after the
//! projection share, with `n = d'·d ≤` [`MAX_PROJECTION_LEN`]:
//!
//! | field  | type      | size  |
//! |--------|-----------|-------|
//! | n      | u32       | 4     |
//! | Λ      | n × f64   | 8 n   |
//! | λ      | n × f64   | 8 n   |
//! | A, B, YY, N | 4 × f64 | 32 |
//! | points | f64       | 8     |
//!
//! With projection groups (flag bit 2 instead of bit 1: at most one of the two is set), the
//! site sums of each group in the sender's subtree, `1 ≤ G ≤` [`MAX_GROUPS`], group ids
//! strictly ascending and never 0 (the key of a fleet without groups, which uses bit 1):
//!
//! | field  | type      | size  |
//! |--------|-----------|-------|
//! | G      | u32       | 4     |
//! | then G times: group id | u64 | 8 |
//! | and its site section (as above) | | `4 + 8(2n + 5)` |
//!
//! Nothing may follow. Decoding mirrors the upper triangle, so a decoded D1 is always exactly
//! symmetric; encoding reads only the upper triangle of D1 (an asymmetric D1 does not round-trip).
//! Every accepted byte string re-encodes to itself bit for bit.
//!
//! # Hostile input
//! The exact expected length is checked before anything is allocated, so a short packet that
//! claims `m = 4096` (a 67 MB body) is rejected at once; `m` and `n` are capped by [`MAX_M`]
//! and [`MAX_PROJECTION_LEN`]. Decoding never panics.
//!
//! # Example
//! ```
//! use coolgp::protocol::codec::{decode, encode, encoded_len};
//! use coolgp::protocol::{Body, Header, Message};
//! use coolgp::model::{Excess, Fingerprint};
//!
//! let msg = Message {
//!     header: Header {
//!         fingerprint: Fingerprint([7; 32]),
//!         sender: 1,
//!         receiver: 2,
//!         round: 3,
//!         version: 4,
//!     },
//!     body: Body::Tree { excess: Excess::zeros(3).into(), points: 10.0 },
//!     projection: None,
//!     sites: None,
//! };
//! let bytes = encode(&msg);
//! assert_eq!(bytes.len(), encoded_len(3, None));
//! assert_eq!(decode(&bytes)?, msg);
//! # Ok::<(), coolgp::protocol::RejectReason>(())
//! ```

use faer::Mat;
use std::sync::Arc;

use super::message::{Body, Header, Message, ProjectionShare, RejectReason};
use crate::fuse::Mass;
use crate::learn::{GroupId, HyperStats, Site, Sites, MAX_GROUPS, UNGROUPED};
use crate::model::{Excess, Fingerprint};

/// The 3-byte magic that starts every message.
pub const MAGIC: [u8; 3] = *b"CGP";

/// The wire format version this codec writes and accepts.
pub const FORMAT_VERSION: u8 = 1;

/// Largest number of inducing inputs a message may carry.
pub const MAX_M: usize = 4096;

/// Largest projection-share length `n` a message may carry.
pub const MAX_PROJECTION_LEN: usize = 1 << 20;

/// Size of the fixed header in bytes.
pub const HEADER_LEN: usize = 3 + 1 + 1 + 1 + 32 + 4 * 8 + 4;

/// Body kind byte of [`Body::Tree`].
pub const KIND_TREE: u8 = 0;

/// Body kind byte of [`Body::PushSum`].
pub const KIND_PUSH_SUM: u8 = 1;

/// Body kind byte of [`Body::Site`].
pub const KIND_SITE: u8 = 2;

/// Flag bit: a projection share follows the body.
pub const FLAG_PROJECTION: u8 = 1;

/// Flag bit: site sums of a fleet without projection groups follow the body (and the
/// projection share, if any).
pub const FLAG_SITE: u8 = 2;

/// Flag bit: site sums of projection groups follow the body (and the projection share).
pub const FLAG_GROUPS: u8 = 4;

/// Bytes of the site part of a message carrying `sites` with `n` entries per group.
pub fn sites_bytes(sites: &Sites) -> usize {
    let per = |s: &Site| site_bytes(s.len());
    if sites.is_ungrouped() {
        sites.iter().map(|(_, s)| per(s)).sum()
    } else {
        sites.iter().fold(4usize, |acc, (_, s)| {
            acc.saturating_add(8).saturating_add(per(s))
        })
    }
}

/// Bytes of a site section over `n` entries: `n` (u32), Λ, λ, four statistics, points.
pub fn site_bytes(n: usize) -> usize {
    4usize.saturating_add(F64.saturating_mul(n.saturating_mul(2).saturating_add(5)))
}

/// Bytes of the projection share's fixed part (weight f64 + n u32).
const PROJECTION_FIXED_LEN: usize = 8 + 4;

/// Bytes of one f64.
const F64: usize = 8;

/// Number of f64 in the body's matrix part: `m(m+1)/2 + m` (saturating).
fn excess_values(m: usize) -> usize {
    let tri = m.saturating_mul(m.saturating_add(1)) / 2;
    tri.saturating_add(m)
}

/// Bytes of a projection share of length `n` (saturating).
fn projection_bytes(n: usize) -> usize {
    PROJECTION_FIXED_LEN.saturating_add(n.saturating_mul(3 * F64))
}

/// Bytes of a [`Body::Tree`] message with `m` inducing inputs and, if `projection_len` is
/// `Some(n)`, a projection share of length `n`.
///
/// A [`Body::PushSum`] message is 8 bytes longer (its weight ω): see
/// [`encoded_len_push_sum`]. Saturates at `usize::MAX` for absurd sizes.
pub fn encoded_len(m: usize, projection_len: Option<usize>) -> usize {
    let body = F64.saturating_mul(1usize.saturating_add(excess_values(m)));
    HEADER_LEN
        .saturating_add(body)
        .saturating_add(projection_len.map_or(0, projection_bytes))
}

/// Bytes of a [`Body::PushSum`] message: [`encoded_len`] plus 8 (the weight ω).
pub fn encoded_len_push_sum(m: usize, projection_len: Option<usize>) -> usize {
    encoded_len(m, projection_len).saturating_add(F64)
}

/// Encodes a message (layout in the [module docs](self)).
///
/// Only the upper triangle of D1 is written.
///
/// # Panics
/// If the message is malformed by construction (these never come from the network):
/// D1 is not `m × m` with `m = d2.len()`, `m` or the projection length exceed `u32`, or the
/// projection's `theta`, `m1`, `m2` differ in length. A message with `m >` [`MAX_M`] encodes
/// but does not decode.
pub fn encode(msg: &Message) -> Vec<u8> {
    // A site-only message carries no matrix and writes m = 0.
    let empty;
    let excess = match msg.excess() {
        Some(e) => e,
        None => {
            empty = Excess::zeros(0);
            &empty
        }
    };
    let m = excess.d2.len();
    assert!(
        excess.d1.nrows() == m && excess.d1.ncols() == m,
        "encode: D1 is {}×{} but D2 has length {m}",
        excess.d1.nrows(),
        excess.d1.ncols()
    );
    let m32 = u32::try_from(m).expect("encode: m exceeds u32");
    let proj_len = msg.projection.as_ref().map(|p| p.theta.len());
    let site_len = msg.sites.as_ref().map_or(0, sites_bytes);
    let (kind, len) = match msg.body {
        Body::Tree { .. } => (KIND_TREE, encoded_len(m, proj_len)),
        Body::PushSum { .. } => (KIND_PUSH_SUM, encoded_len_push_sum(m, proj_len)),
        Body::Site => (
            KIND_SITE,
            HEADER_LEN.saturating_add(proj_len.map_or(0, projection_bytes)),
        ),
    };
    let len = len.saturating_add(site_len);
    let mut out = Vec::with_capacity(len);

    let h = &msg.header;
    out.extend_from_slice(&MAGIC);
    out.push(FORMAT_VERSION);
    out.push(kind);
    let mut flags = 0;
    if msg.projection.is_some() {
        flags |= FLAG_PROJECTION;
    }
    match &msg.sites {
        Some(s) if s.is_ungrouped() => flags |= FLAG_SITE,
        Some(_) => flags |= FLAG_GROUPS,
        None => {}
    }
    out.push(flags);
    out.extend_from_slice(&h.fingerprint.0);
    for v in [h.sender, h.receiver, h.round, h.version] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&m32.to_le_bytes());

    let put = |out: &mut Vec<u8>, v: f64| out.extend_from_slice(&v.to_le_bytes());
    match &msg.body {
        Body::Tree { points, .. } => put(&mut out, *points),
        Body::PushSum { total } => {
            put(&mut out, total.w);
            put(&mut out, total.points);
        }
        Body::Site => {}
    }
    for i in 0..m {
        for j in i..m {
            put(&mut out, excess.d1[(i, j)]);
        }
    }
    for &v in &excess.d2 {
        put(&mut out, v);
    }

    if let Some(p) = &msg.projection {
        let n = p.theta.len();
        assert!(
            p.m1.len() == n && p.m2.len() == n,
            "encode: projection lengths differ (theta {n}, m1 {}, m2 {})",
            p.m1.len(),
            p.m2.len()
        );
        let n32 = u32::try_from(n).expect("encode: projection length exceeds u32");
        put(&mut out, p.weight);
        out.extend_from_slice(&n32.to_le_bytes());
        for v in p.theta.iter().chain(&p.m1).chain(&p.m2) {
            put(&mut out, *v);
        }
    }
    if let Some(sites) = &msg.sites {
        if !sites.is_ungrouped() {
            let g32 = u32::try_from(sites.groups()).expect("encode: group count exceeds u32");
            out.extend_from_slice(&g32.to_le_bytes());
        }
        for (g, site) in sites.iter() {
            if !sites.is_ungrouped() {
                out.extend_from_slice(&g.to_le_bytes());
            }
            encode_site(&mut out, site);
        }
    }
    debug_assert_eq!(out.len(), len);
    out
}

/// Appends one site section (layout in the [module docs](self)).
fn encode_site(out: &mut Vec<u8>, site: &Site) {
    let n = site.len();
    assert!(
        site.shift.len() == n,
        "encode: site lengths differ (Λ {n}, λ {})",
        site.shift.len()
    );
    let n32 = u32::try_from(n).expect("encode: site length exceeds u32");
    out.extend_from_slice(&n32.to_le_bytes());
    let tail = site.hyper.to_array();
    for v in site
        .prec
        .iter()
        .chain(&site.shift)
        .chain(&tail)
        .chain(std::iter::once(&site.points))
    {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// Decodes a message, checking structure only (layout in the [module docs](self)).
///
/// # Errors
/// [`RejectReason::Decode`] with the first structural problem: `"truncated header"`,
/// `"bad magic"`, `"unsupported version 7"`, `"unknown body kind 9"`, `"unknown flags 0x02"`,
/// `"m = 100000 exceeds limit 4096"`, `"truncated body: need N bytes, have K"`,
/// `"truncated projection share: …"`, `"projection length n = … exceeds limit 1048576"`,
/// `"trailing bytes"`.
pub fn decode(bytes: &[u8]) -> Result<Message, RejectReason> {
    let mut r = Reader { bytes, pos: 0 };

    // Header, field by field, so each failure names the first bad field.
    let magic_len = bytes.len().min(MAGIC.len());
    if bytes[..magic_len] != MAGIC[..magic_len] {
        return Err(err("bad magic"));
    }
    r.skip(MAGIC.len()).ok_or_else(truncated_header)?;
    let version = r.u8().ok_or_else(truncated_header)?;
    if version != FORMAT_VERSION {
        return Err(err(format!("unsupported version {version}")));
    }
    let kind = r.u8().ok_or_else(truncated_header)?;
    if kind != KIND_TREE && kind != KIND_PUSH_SUM && kind != KIND_SITE {
        return Err(err(format!("unknown body kind {kind}")));
    }
    let flags = r.u8().ok_or_else(truncated_header)?;
    if flags & !(FLAG_PROJECTION | FLAG_SITE | FLAG_GROUPS) != 0 {
        return Err(err(format!("unknown flags {flags:#04x}")));
    }
    if flags & FLAG_SITE != 0 && flags & FLAG_GROUPS != 0 {
        return Err(err("both site flags set (ungrouped and grouped)"));
    }
    let has_projection = flags & FLAG_PROJECTION != 0;
    let has_groups = flags & FLAG_GROUPS != 0;
    let has_site = flags & FLAG_SITE != 0 || has_groups;
    if kind == KIND_SITE && !has_site {
        return Err(err("site-only body without a site section"));
    }
    if bytes.len() < HEADER_LEN {
        return Err(truncated_header());
    }
    let mut fingerprint = [0u8; 32];
    fingerprint.copy_from_slice(r.take(32).ok_or_else(truncated_header)?);
    let sender = r.u64().ok_or_else(truncated_header)?;
    let receiver = r.u64().ok_or_else(truncated_header)?;
    let round = r.u64().ok_or_else(truncated_header)?;
    let data_version = r.u64().ok_or_else(truncated_header)?;
    let m_raw = r.u32().ok_or_else(truncated_header)?;
    let m =
        usize::try_from(m_raw).map_err(|_| err(format!("m = {m_raw} exceeds limit {MAX_M}")))?;
    if m > MAX_M {
        return Err(err(format!("m = {m} exceeds limit {MAX_M}")));
    }
    if kind == KIND_SITE && m != 0 {
        return Err(err(format!("site-only body with m = {m} (must be 0)")));
    }
    let header = Header {
        fingerprint: Fingerprint(fingerprint),
        sender,
        receiver,
        round,
        version: data_version,
    };

    // Body: check the whole length before allocating anything.
    let body_len = match kind {
        KIND_TREE => F64 * (1 + excess_values(m)),
        KIND_PUSH_SUM => F64 * (2 + excess_values(m)),
        _ => 0,
    };
    if r.remaining() < body_len {
        return Err(err(format!(
            "truncated body: need {body_len} bytes, have {}",
            r.remaining()
        )));
    }
    if !has_projection && !has_site && r.remaining() > body_len {
        return Err(err("trailing bytes"));
    }
    let body = decode_body(&mut r, kind, m)?;

    let projection = if has_projection {
        Some(decode_projection(&mut r)?)
    } else {
        None
    };

    let sites = if has_groups {
        Some(decode_groups(&mut r)?)
    } else if has_site {
        Some(Sites::single(UNGROUPED, decode_site(&mut r)?))
    } else {
        None
    };

    if r.remaining() != 0 {
        return Err(err("trailing bytes"));
    }
    Ok(Message {
        header,
        body,
        projection,
        sites,
    })
}

/// The projection share section (layout in the [module docs](self)): its length is checked
/// against the bytes present before it is allocated.
fn decode_projection(r: &mut Reader<'_>) -> Result<ProjectionShare, RejectReason> {
    if r.remaining() < PROJECTION_FIXED_LEN {
        return Err(err(format!(
            "truncated projection share: need {PROJECTION_FIXED_LEN} bytes, have {}",
            r.remaining()
        )));
    }
    let weight = r.f64().ok_or_else(truncated_projection)?;
    let n_raw = r.u32().ok_or_else(truncated_projection)?;
    let n = usize::try_from(n_raw).map_err(|_| {
        err(format!(
            "projection length n = {n_raw} exceeds limit {MAX_PROJECTION_LEN}"
        ))
    })?;
    if n > MAX_PROJECTION_LEN {
        return Err(err(format!(
            "projection length n = {n} exceeds limit {MAX_PROJECTION_LEN}"
        )));
    }
    let need = 3 * F64 * n;
    if r.remaining() < need {
        return Err(err(format!(
            "truncated projection share: need {need} bytes, have {}",
            r.remaining()
        )));
    }
    let theta = r.f64s(n).ok_or_else(truncated_projection)?;
    let m1 = r.f64s(n).ok_or_else(truncated_projection)?;
    let m2 = r.f64s(n).ok_or_else(truncated_projection)?;
    Ok(ProjectionShare {
        weight,
        theta,
        m1,
        m2,
    })
}

/// The grouped site sections (layout in the [module docs](self)): each section's length is
/// checked against the bytes present before it is allocated.
fn decode_groups(r: &mut Reader<'_>) -> Result<Sites, RejectReason> {
    let g_raw = r
        .u32()
        .ok_or_else(|| err("truncated group count: need 4 bytes"))?;
    let g = usize::try_from(g_raw)
        .ok()
        .filter(|g| (1..=MAX_GROUPS).contains(g))
        .ok_or_else(|| err(format!("group count {g_raw} not in 1..={MAX_GROUPS}")))?;
    let mut pairs = Vec::with_capacity(g);
    let mut last: Option<GroupId> = None;
    for _ in 0..g {
        let id = r.u64().ok_or_else(|| err("truncated group id"))?;
        if id == UNGROUPED {
            return Err(err("group id 0 in a grouped site section"));
        }
        if last.is_some_and(|l| id <= l) {
            return Err(err("group ids not strictly ascending"));
        }
        last = Some(id);
        pairs.push((id, decode_site(r)?));
    }
    Ok(Sites::from_pairs(pairs))
}

/// The body of kind `kind` with `m` inducing inputs (its length was checked by the caller).
fn decode_body(r: &mut Reader<'_>, kind: u8, m: usize) -> Result<Body, RejectReason> {
    if kind == KIND_SITE {
        return Ok(Body::Site);
    }
    let first = r.f64().ok_or_else(truncated_body)?;
    let second = if kind == KIND_PUSH_SUM {
        Some(r.f64().ok_or_else(truncated_body)?)
    } else {
        None
    };
    let mut d1 = Mat::<f64>::zeros(m, m);
    for i in 0..m {
        for j in i..m {
            let v = r.f64().ok_or_else(truncated_body)?;
            d1[(i, j)] = v;
            d1[(j, i)] = v;
        }
    }
    let d2 = r.f64s(m).ok_or_else(truncated_body)?;
    let excess = Excess { d1, d2 };
    Ok(match second {
        None => Body::Tree {
            excess: Arc::new(excess),
            points: first,
        },
        Some(points) => Body::PushSum {
            total: Mass {
                x: excess,
                w: first,
                points,
                site: None,
            },
        },
    })
}

/// The site section (layout in the [module docs](self)), its length checked before any
/// allocation.
fn decode_site(r: &mut Reader<'_>) -> Result<Site, RejectReason> {
    let n_raw = r
        .u32()
        .ok_or_else(|| err("truncated site section: need 4 bytes"))?;
    let n = usize::try_from(n_raw)
        .ok()
        .filter(|n| *n <= MAX_PROJECTION_LEN)
        .ok_or_else(|| {
            err(format!(
                "site length n = {n_raw} exceeds limit {MAX_PROJECTION_LEN}"
            ))
        })?;
    let need = site_bytes(n) - 4;
    if r.remaining() < need {
        return Err(err(format!(
            "truncated site section: need {need} bytes, have {}",
            r.remaining()
        )));
    }
    let prec = r.f64s(n).ok_or_else(truncated_site)?;
    let shift = r.f64s(n).ok_or_else(truncated_site)?;
    let tail = r.f64s(5).ok_or_else(truncated_site)?;
    Ok(Site {
        prec,
        shift,
        hyper: HyperStats::from_array([tail[0], tail[1], tail[2], tail[3]]),
        points: tail[4],
    })
}

fn truncated_site() -> RejectReason {
    err("truncated site section")
}

fn err(reason: impl Into<String>) -> RejectReason {
    RejectReason::Decode(reason.into())
}

fn truncated_header() -> RejectReason {
    err("truncated header")
}

// Unreachable after the up-front length checks; kept so no path can panic.
fn truncated_body() -> RejectReason {
    err("truncated body")
}

fn truncated_projection() -> RejectReason {
    err("truncated projection share")
}

/// A bounds-checked little-endian cursor; every read returns `None` past the end.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        self.take(n).map(|_| ())
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn u8(&mut self) -> Option<u8> {
        self.array::<1>().map(|[b]| b)
    }

    fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }

    fn f64(&mut self) -> Option<f64> {
        self.array().map(f64::from_le_bytes)
    }

    /// `n` f64; the caller has checked that `8n` bytes remain, so the allocation is bounded
    /// by the input's length.
    fn f64s(&mut self, n: usize) -> Option<Vec<f64>> {
        let raw = self.take(n.checked_mul(F64)?)?;
        Some(
            raw.chunks_exact(F64)
                .map(|c| {
                    let mut a = [0u8; F64];
                    a.copy_from_slice(c);
                    f64::from_le_bytes(a)
                })
                .collect(),
        )
    }
}
