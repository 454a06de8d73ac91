//! Numeric fields out of (and into) CDR messages of the supported types.
//!
//! A type is flattened once into its leaves in wire order (`header.stamp.sec`, …,
//! `position_covariance[8]`); an [`Extractor`] walks them, reading the wanted ones into their
//! output slots and skipping the rest, with no allocation per message.

use crate::cdr::{endian, CdrWriter, Cursor, Endian, HEADER_LEN};
use crate::error::{CdrError, Ros2Error};
use crate::types::{lookup, Elem, MsgType, Prim, Shape};

/// The pseudo-field naming a message's time in seconds: its `header.stamp`, or for a type
/// without a header the time the message was recorded (bags) or sent (live).
pub const STAMP: &str = "stamp";

/// Most fields read from one topic.
pub const MAX_FIELDS: usize = 16;

/// One leaf of a flattened type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leaf {
    /// Dotted path, arrays indexed: `pose.pose.position.x`, `position_covariance[0]`.
    pub path: String,
    /// Its primitive type.
    pub prim: Prim,
}

/// The leaves of `ty` in wire order.
///
/// # Errors
/// A type with a sequence (variable length) cannot be flattened.
pub fn leaves(ty: &MsgType) -> Result<Vec<Leaf>, Ros2Error> {
    let mut out = Vec::new();
    flatten(ty, "", &mut out)?;
    Ok(out)
}

fn flatten(ty: &MsgType, prefix: &str, out: &mut Vec<Leaf>) -> Result<(), Ros2Error> {
    for field in ty.fields {
        let path = format!("{prefix}{}", field.name);
        let count = match field.shape {
            Shape::Single => None,
            Shape::Array(n) => Some(n),
            Shape::Sequence => {
                return Err(Ros2Error::Spec(format!(
                    "{} has a variable-length field `{path}`",
                    ty.name
                )))
            }
        };
        let names: Vec<String> = match count {
            None => vec![path],
            Some(n) => (0..n).map(|i| format!("{path}[{i}]")).collect(),
        };
        for name in names {
            match field.elem {
                Elem::Prim(prim) => out.push(Leaf { path: name, prim }),
                Elem::Nested(inner) => {
                    let inner = lookup(inner).ok_or_else(|| {
                        Ros2Error::Spec(format!("{} nests unknown type {inner}", ty.name))
                    })?;
                    flatten(inner, &format!("{name}."), out)?;
                }
            }
        }
    }
    Ok(())
}

/// Reads chosen numeric fields of one message type.
#[derive(Clone, Debug)]
pub struct Extractor {
    ty: &'static MsgType,
    prims: Vec<Prim>,
    /// Output slot of each leaf, if wanted.
    slots: Vec<Option<usize>>,
    /// Output slots that want the message's stamp.
    stamp_slots: Vec<usize>,
    /// Number of outputs.
    width: usize,
    /// Leaves after the last wanted one are not read.
    last_needed: usize,
    /// Whether the type starts with a `header` (its stamp is the message's), known once.
    header: bool,
}

impl Extractor {
    /// An extractor of `fields` (leaf paths or [`STAMP`]) from messages of `ty`.
    ///
    /// # Errors
    /// [`Ros2Error::Spec`] for an unknown or non-numeric field, naming the numeric ones.
    pub fn new(ty: &'static MsgType, fields: &[String]) -> Result<Self, Ros2Error> {
        if fields.len() > MAX_FIELDS {
            return Err(Ros2Error::Spec(format!(
                "{} fields of {}: at most {MAX_FIELDS} from one topic",
                fields.len(),
                ty.name
            )));
        }
        let all = leaves(ty)?;
        let mut slots = vec![None; all.len()];
        let mut stamp_slots = Vec::new();
        for (k, name) in fields.iter().enumerate() {
            if name == STAMP {
                stamp_slots.push(k);
                continue;
            }
            match all.iter().position(|l| &l.path == name) {
                Some(i) if all[i].prim != Prim::String => slots[i] = Some(k),
                _ => {
                    let numeric: Vec<&str> = all
                        .iter()
                        .filter(|l| l.prim != Prim::String && !l.path.contains('['))
                        .map(|l| l.path.as_str())
                        .collect();
                    return Err(Ros2Error::Spec(format!(
                        "{} has no numeric field `{name}`; its fields: {}, {STAMP} (and array \
                         elements as name[i])",
                        ty.name,
                        numeric.join(", ")
                    )));
                }
            }
        }
        let header = usize::from(ty.has_header()) * 2;
        let last_needed = slots
            .iter()
            .rposition(Option::is_some)
            .map_or(header, |i| (i + 1).max(header));
        Ok(Self {
            ty,
            prims: all.iter().map(|l| l.prim).collect(),
            slots,
            stamp_slots,
            width: fields.len(),
            last_needed,
            header: ty.has_header(),
        })
    }

    /// The message type.
    pub fn msg_type(&self) -> &'static MsgType {
        self.ty
    }

    /// Number of values per message.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Decodes `buf` into `out[..width]` and returns the message's stamp in seconds:
    /// `header.stamp` if the type has one, else `fallback`.
    ///
    /// # Errors
    /// [`CdrError`] for a message that is not plain CDR or ends too early.
    ///
    /// # Panics
    /// If `out` is shorter than [`Self::width`].
    pub fn decode(&self, buf: &[u8], fallback: f64, out: &mut [f64]) -> Result<f64, CdrError> {
        let out = &mut out[..self.width];
        out.fill(f64::NAN);
        let [sec, nanosec] = match endian(buf)? {
            Endian::Little => self.walk(&mut Cursor::<true>::at(buf, HEADER_LEN), out)?,
            Endian::Big => self.walk(&mut Cursor::<false>::at(buf, HEADER_LEN), out)?,
        };
        let stamp = if self.header {
            sec + nanosec * 1e-9
        } else {
            fallback
        };
        for &k in &self.stamp_slots {
            out[k] = stamp;
        }
        Ok(stamp)
    }

    /// Reads the leaves up to the last one wanted into their slots of `out`; returns the first
    /// two leaves' values (`header.stamp.sec` and `nanosec` in a type with a header).
    #[inline(always)]
    fn walk<const LE: bool>(
        &self,
        c: &mut Cursor<'_, LE>,
        out: &mut [f64],
    ) -> Result<[f64; 2], CdrError> {
        let mut head = [0.0; 2];
        let leaves = self.prims[..self.last_needed].iter().zip(&self.slots);
        for (i, (&p, &slot)) in leaves.enumerate() {
            if p == Prim::String {
                c.skip_string()?;
                continue;
            }
            let v = c.number(p)?;
            if let Some(h) = head.get_mut(i) {
                *h = v;
            }
            if let Some(k) = slot {
                out[k] = v;
            }
        }
        Ok(head)
    }
}

/// Encodes a message of `ty`: `header.stamp` from `stamp_ns` (nanoseconds since the epoch),
/// every string `frame_id`, each leaf in `values` (path, value) as given and every other
/// leaf 0. For tests, tools and our own publishers.
///
/// # Errors
/// [`Ros2Error::Spec`] for an unknown path or a type with a sequence.
pub fn encode(
    ty: &MsgType,
    stamp_ns: i64,
    frame_id: &str,
    values: &[(&str, f64)],
) -> Result<Vec<u8>, Ros2Error> {
    encode_with(Endian::Little, ty, stamp_ns, frame_id, values)
}

/// [`encode`] in byte order `endian` (big-endian CDR for tests and tools; ROS 2 publishers
/// send little endian).
///
/// # Errors
/// As [`encode`].
pub fn encode_with(
    endian: Endian,
    ty: &MsgType,
    stamp_ns: i64,
    frame_id: &str,
    values: &[(&str, f64)],
) -> Result<Vec<u8>, Ros2Error> {
    let all = leaves(ty)?;
    if let Some((bad, _)) = values
        .iter()
        .find(|(p, _)| !all.iter().any(|l| l.path == *p))
    {
        return Err(Ros2Error::Spec(format!("{} has no field `{bad}`", ty.name)));
    }
    let mut w = CdrWriter::new(endian, 64 + 8 * all.len());
    let sec = stamp_ns.div_euclid(1_000_000_000) as f64;
    let nanosec = stamp_ns.rem_euclid(1_000_000_000) as f64;
    for (i, leaf) in all.iter().enumerate() {
        if leaf.prim == Prim::String {
            w.string(frame_id);
            continue;
        }
        let given = values.iter().find(|(p, _)| *p == leaf.path).map(|v| v.1);
        let v = match (given, ty.has_header(), i) {
            (Some(v), _, _) => v,
            (None, true, 0) => sec,
            (None, true, 1) => nanosec,
            _ => 0.0,
        };
        w.number(leaf.prim, v);
    }
    Ok(w.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::input_type;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn navsatfix_round_trip() {
        let ty = input_type("sensor_msgs/msg/NavSatFix").expect("type");
        let msg = encode(
            ty,
            1_700_000_000_250_000_000,
            "gps_link",
            &[("latitude", 48.1), ("longitude", 11.5), ("altitude", 520.0)],
        )
        .expect("encode");
        let ex = Extractor::new(ty, &names(&["longitude", "latitude", "stamp"])).expect("ex");
        let mut out = [0.0; 3];
        let stamp = ex.decode(&msg, -1.0, &mut out).expect("decode");
        assert_eq!(stamp, 1_700_000_000.0 + 250_000_000.0 * 1e-9);
        assert_eq!(out, [11.5, 48.1, stamp]);
        // Every truncation is an error, never a panic.
        for cut in 0..msg.len() - 1 {
            let full = Extractor::new(ty, &names(&["position_covariance_type"])).expect("ex");
            assert!(
                full.decode(&msg[..cut], 0.0, &mut out).is_err(),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn nested_paths_and_headerless_types() {
        let odom = input_type("nav_msgs/msg/Odometry").expect("type");
        let msg = encode(
            odom,
            5_000_000_000,
            "odom",
            &[
                ("pose.pose.position.x", 3.0),
                ("twist.twist.linear.x", -1.0),
            ],
        )
        .expect("encode");
        let ex = Extractor::new(
            odom,
            &names(&["pose.pose.position.x", "twist.twist.linear.x"]),
        )
        .expect("ex");
        let mut out = [0.0; 2];
        assert_eq!(ex.decode(&msg, 0.0, &mut out).expect("decode"), 5.0);
        assert_eq!(out, [3.0, -1.0]);

        let f32ty = input_type("std_msgs/msg/Float32").expect("type");
        let msg = encode(f32ty, 0, "", &[("data", 0.25)]).expect("encode");
        let ex = Extractor::new(f32ty, &names(&["data", "stamp"])).expect("ex");
        assert_eq!(ex.decode(&msg, 42.0, &mut out).expect("decode"), 42.0);
        assert_eq!(out, [0.25, 42.0]);
        let too_many: Vec<String> = (0..=MAX_FIELDS).map(|_| "data".to_string()).collect();
        assert!(Extractor::new(f32ty, &too_many).is_err());
    }

    /// A value of `p` that uses every byte of its width (so a byte-order slip shows).
    fn distinct(i: usize, p: Prim) -> f64 {
        let k = i as f64;
        match p {
            Prim::I8 => -(k % 100.0) - 1.0,
            Prim::U8 | Prim::Byte => k % 200.0 + 1.0,
            Prim::Bool => 1.0,
            Prim::I16 => -(k * 7.0 + 300.0),
            Prim::U16 => k * 7.0 + 300.0,
            Prim::I32 => -(k * 100_003.0 + 70_000.0),
            Prim::U32 => k * 100_003.0 + 70_000.0,
            Prim::I64 => -(k * 1e12 + 12_345.0),
            Prim::U64 => k * 1e12 + 12_345.0,
            Prim::F32 => f64::from((i as f32 + 0.25) * -1.5),
            Prim::F64 => k * 1.1e-3 + 0.123_456_789,
            Prim::String => 0.0,
        }
    }

    /// Every numeric leaf of `msg`, read 16 at a time.
    fn decode_all(ty: &'static MsgType, numeric: &[Leaf], msg: &[u8]) -> Vec<f64> {
        let mut all = Vec::new();
        for chunk in numeric.chunks(MAX_FIELDS) {
            let paths: Vec<String> = chunk.iter().map(|l| l.path.clone()).collect();
            let ex = Extractor::new(ty, &paths).expect("extractor");
            let mut out = [0.0; MAX_FIELDS];
            ex.decode(msg, -1.0, &mut out).expect("decode");
            all.extend_from_slice(&out[..chunk.len()]);
        }
        all
    }

    /// The numeric (non-string) leaves of `ty`.
    fn numeric_leaves(ty: &MsgType) -> Vec<Leaf> {
        leaves(ty)
            .expect("leaves")
            .into_iter()
            .filter(|l| l.prim != Prim::String)
            .collect()
    }

    /// A distinct value for each leaf, by its path ([`distinct`]).
    fn distinct_values(numeric: &[Leaf]) -> Vec<(&str, f64)> {
        numeric
            .iter()
            .enumerate()
            .map(|(i, l)| (l.path.as_str(), distinct(i, l.prim)))
            .collect()
    }

    #[test]
    fn big_and_little_endian_decode_alike_for_every_input_type() {
        for name in crate::types::INPUT_TYPES {
            let ty = input_type(name).expect("type");
            let numeric = numeric_leaves(ty);
            let values = distinct_values(&numeric);
            let le = encode_with(Endian::Little, ty, 0, "be_frame", &values).expect("le");
            let be = encode_with(Endian::Big, ty, 0, "be_frame", &values).expect("be");
            assert_eq!((&le[..4], &be[..4]), (&[0, 1, 0, 0][..], &[0, 0, 0, 0][..]));
            assert_eq!(le.len(), be.len(), "{name}");
            assert_ne!(le[4..], be[4..], "{name}: the orders differ on the wire");
            let (from_le, from_be) = (decode_all(ty, &numeric, &le), decode_all(ty, &numeric, &be));
            let want: Vec<f64> = values.iter().map(|v| v.1).collect();
            assert_eq!(from_le, want, "{name} little endian");
            assert_eq!(from_be, want, "{name} big endian");
            // The stamp (and a type's fallback) decode alike too.
            let ex = Extractor::new(ty, &names(&["stamp"])).expect("ex");
            let mut out = [0.0; 1];
            let s_le = ex.decode(&le, 7.0, &mut out).expect("le");
            assert_eq!(ex.decode(&be, 7.0, &mut out).expect("be"), s_le, "{name}");
            // The header is what decides: big-endian bytes labelled little endian differ.
            let mut mislabelled = be.clone();
            mislabelled[1] = 1;
            let wrong = numeric
                .chunks(MAX_FIELDS)
                .next()
                .map(|c| c.iter().map(|l| l.path.clone()).collect::<Vec<_>>())
                .and_then(|p| Extractor::new(ty, &p).ok())
                .and_then(|ex| {
                    let mut out = [0.0; MAX_FIELDS];
                    ex.decode(&mislabelled, 7.0, &mut out).ok().map(|_| out)
                });
            if let Some(out) = wrong {
                assert_ne!(
                    out[..want.len().min(MAX_FIELDS)],
                    want[..want.len().min(MAX_FIELDS)]
                );
            }
        }
    }

    /// The extractor's walk as it was, through [`crate::cdr::CdrReader`] (a test of the
    /// monomorphized fast path against it).
    fn reference(
        ex: &Extractor,
        buf: &[u8],
        fallback: f64,
        out: &mut [f64],
    ) -> Result<f64, CdrError> {
        let out = &mut out[..ex.width];
        out.fill(f64::NAN);
        let mut r = crate::cdr::CdrReader::new(buf)?;
        let header = ex.ty.has_header();
        let (mut sec, mut nanosec) = (0.0, 0.0);
        for (i, &p) in ex.prims[..ex.last_needed].iter().enumerate() {
            if p == Prim::String {
                r.skip(p)?;
                continue;
            }
            let v = r.number(p)?;
            match i {
                0 if header => sec = v,
                1 if header => nanosec = v,
                _ => {}
            }
            if let Some(k) = ex.slots[i] {
                out[k] = v;
            }
        }
        let stamp = if header {
            sec + nanosec * 1e-9
        } else {
            fallback
        };
        for &k in &ex.stamp_slots {
            out[k] = stamp;
        }
        Ok(stamp)
    }

    #[test]
    fn the_fast_walk_equals_the_reader_on_every_cut_of_every_type() {
        for name in crate::types::INPUT_TYPES {
            let ty = input_type(name).expect("type");
            let numeric = numeric_leaves(ty);
            let values = distinct_values(&numeric);
            // ASCII, other UTF-8 and (patched below) invalid UTF-8 strings.
            for (endian, frame) in [
                (Endian::Little, "gps"),
                (Endian::Big, "géo"),
                (Endian::Little, "géo"),
            ] {
                let mut msg = encode_with(endian, ty, 1_500_000_123, frame, &values).expect("msg");
                if frame == "géo" && endian == Endian::Little {
                    if let Some(at) = msg.windows(2).position(|w| w == "é".as_bytes()) {
                        msg[at + 1] = 0x28; // no longer UTF-8
                    }
                }
                for chunk in numeric.chunks(MAX_FIELDS - 1) {
                    let mut paths: Vec<String> = chunk.iter().map(|l| l.path.clone()).collect();
                    paths.insert(paths.len() / 2, STAMP.to_string());
                    let ex = Extractor::new(ty, &paths).expect("extractor");
                    for cut in 0..=msg.len() {
                        let (mut a, mut b) = ([0.0; MAX_FIELDS], [0.0; MAX_FIELDS]);
                        let fast = ex.decode(&msg[..cut], 9.5, &mut a);
                        let slow = reference(&ex, &msg[..cut], 9.5, &mut b);
                        assert_eq!(
                            fast.map(f64::to_bits),
                            slow.map(f64::to_bits),
                            "{name} {cut}"
                        );
                        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&a), bits(&b), "{name} cut at {cut}");
                    }
                }
            }
        }
    }

    #[test]
    fn other_representations_are_refused_naming_the_supported_ones() {
        let ty = input_type("sensor_msgs/msg/Temperature").expect("type");
        let msg = encode(ty, 0, "t", &[("temperature", 21.5)]).expect("encode");
        let ex = Extractor::new(ty, &names(&["temperature"])).expect("ex");
        let mut out = [0.0; 1];
        for (id, name) in [
            (0x0002u16, "PL_CDR_BE"),
            (0x0003, "PL_CDR_LE"),
            (0x0004, "XML"),
            (0x0006, "CDR2_BE"),
            (0x0007, "CDR2_LE"),
            (0x0009, "D_CDR2_LE"),
            (0x000b, "PL_CDR2_LE"),
            (0x0100, "unknown"),
        ] {
            let mut m = msg.clone();
            m[..2].copy_from_slice(&id.to_be_bytes());
            let err = ex.decode(&m, 0.0, &mut out).expect_err(name);
            assert_eq!(err, CdrError::Encapsulation(id.to_be_bytes()));
            let text = err.to_string();
            assert!(
                text.contains(&format!("0x{id:04x}"))
                    && text.contains(name)
                    && text.contains("CDR_LE (0x0001)")
                    && text.contains("CDR_BE (0x0000)"),
                "{text}"
            );
        }
        assert_eq!(ex.decode(&msg, 0.0, &mut out).expect("plain"), 0.0);
        assert_eq!(out[0], 21.5);
    }

    #[test]
    fn unknown_fields_are_refused_with_the_list() {
        let ty = input_type("sensor_msgs/msg/Temperature").expect("type");
        let err = Extractor::new(ty, &names(&["temp"])).expect_err("unknown");
        let msg = err.to_string();
        assert!(
            msg.contains("`temp`") && msg.contains("temperature"),
            "{msg}"
        );
        let err = Extractor::new(ty, &names(&["header.frame_id"])).expect_err("string");
        assert!(err.to_string().contains("numeric"), "{err}");
        assert!(encode(ty, 0, "", &[("nope", 1.0)]).is_err());
    }
}
