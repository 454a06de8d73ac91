//! RIHS01 type hashes (ROS 2 REP 2011): the SHA-256 of a type's description as JSON, which
//! rmw_zenoh puts in every key expression and rosbag2 in its metadata.
//!
//! The description is `{"type_description": T, "referenced_type_descriptions": [R…]}` with
//! `T = {"type_name": …, "fields": [{"name": …, "type": {"type_id": …, "capacity": …,
//! "string_capacity": …, "nested_type_name": …}}]}`, the referenced (nested, transitively)
//! types sorted by name, written with Python's `json.dumps` separators (`", "`, `": "`).
//! A field's `type_id` is its primitive's id (1 for a nested type), plus 48 for a fixed array
//! (capacity = its length) or 144 for an unbounded sequence.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use crate::types::{lookup, Elem, MsgType, Shape};

/// `type_id` offset of a fixed array.
const ARRAY: u32 = 48;
/// `type_id` offset of an unbounded sequence.
const SEQUENCE: u32 = 144;
/// `type_id` of a nested type.
const NESTED: u32 = 1;

/// The RIHS01 hash of `ty`: `RIHS01_` and 64 lowercase hex digits.
pub fn rihs01(ty: &MsgType) -> String {
    let mut referenced = BTreeMap::new();
    collect(ty, &mut referenced);
    referenced.remove(ty.name);
    let mut json = String::from("{\"type_description\": ");
    describe(ty, &mut json);
    json.push_str(", \"referenced_type_descriptions\": [");
    for (i, r) in referenced.values().enumerate() {
        if i > 0 {
            json.push_str(", ");
        }
        describe(r, &mut json);
    }
    json.push_str("]}");
    let digest = Sha256::digest(json.as_bytes());
    let mut out = String::from("RIHS01_");
    for b in digest {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Every type `ty` nests, transitively, by name (`ty` included).
fn collect(ty: &MsgType, into: &mut BTreeMap<&'static str, &'static MsgType>) {
    for field in ty.fields {
        if let Elem::Nested(name) = field.elem {
            if let Some(inner) = lookup(name) {
                if into.insert(inner.name, inner).is_none() {
                    collect(inner, into);
                }
            }
        }
    }
}

/// One type's description object.
fn describe(ty: &MsgType, json: &mut String) {
    let _ = write!(json, "{{\"type_name\": \"{}\", \"fields\": [", ty.name);
    for (i, field) in ty.fields.iter().enumerate() {
        if i > 0 {
            json.push_str(", ");
        }
        let (base, nested) = match field.elem {
            Elem::Prim(p) => (p.type_id(), ""),
            Elem::Nested(name) => (NESTED, name),
        };
        let (offset, capacity) = match field.shape {
            Shape::Single => (0, 0),
            Shape::Array(len) => (ARRAY, len),
            Shape::Sequence => (SEQUENCE, 0),
        };
        let _ = write!(
            json,
            "{{\"name\": \"{}\", \"type\": {{\"type_id\": {}, \"capacity\": {capacity}, \
             \"string_capacity\": 0, \"nested_type_name\": \"{nested}\"}}}}",
            field.name,
            base + offset
        );
    }
    json.push_str("]}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hashes computed by `rosbags` 0.11.9 (`get_typestore(Stores.ROS2_JAZZY).hash_rihs01`);
    /// the CI's Python step checks every supported type against rosbags live.
    #[test]
    fn rihs01_matches_rosbags() {
        for (name, want) in [
            (
                "std_msgs/msg/Float64",
                "RIHS01_705ba9c3d1a09df43737eb67095534de36fd426c0587779bda2bc51fe790182a",
            ),
            (
                "sensor_msgs/msg/NavSatFix",
                "RIHS01_62223ab3fe210a15976021da7afddc9e200dc9ec75231c1b6a557fc598a65404",
            ),
            (
                "nav_msgs/msg/Odometry",
                "RIHS01_3cc97dc7fb7502f8714462c526d369e35b603cfc34d946e3f2eda2766dfec6e0",
            ),
            (
                "sensor_msgs/msg/PointCloud2",
                "RIHS01_9198cabf7da3796ae6fe19c4cb3bdd3525492988c70522628af5daa124bae2b5",
            ),
            // grid_map_msgs registered in rosbags from grid_map's Humble .msg files.
            (
                "grid_map_msgs/msg/GridMap",
                "RIHS01_343b0e72887541beda6b035cc053f2d6fffaad9d6dcb2773c15a808dfca31fde",
            ),
            (
                "grid_map_msgs/msg/GridMapInfo",
                "RIHS01_0a36d6b5bc9af8463d1d5a5008ef9fcac0c1373ba090f80c3594e47cc565b745",
            ),
            (
                "std_msgs/msg/Float32MultiArray",
                "RIHS01_0599f6f85b4bfca379873a0b4375a0aca022156bd2d7021275d116ed1fa8bfe0",
            ),
            (
                "diagnostic_msgs/msg/DiagnosticArray",
                "RIHS01_5a8a36efb05fb25070fa0fb3810290c0e6cd4862b54a8fb975a1ee8dc55a333e",
            ),
        ] {
            let ty = lookup(name).expect("known type");
            assert_eq!(rihs01(ty), want, "{name}");
        }
    }
}
