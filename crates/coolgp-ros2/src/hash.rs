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

/// `type_id` offset of a bounded sequence (`T[<=n]`, capacity n).
const BOUNDED: u32 = 96;

/// One field of a type description: name, `type_id`, capacity and nested type name.
type FieldDesc<'a> = (&'a str, u32, usize, &'a str);

/// The RIHS01 hash of `ty`: `RIHS01_` and 64 lowercase hex digits.
pub fn rihs01(ty: &MsgType) -> String {
    let mut referenced = BTreeMap::new();
    collect(ty, &mut referenced);
    referenced.remove(ty.name);
    let mut json = String::from("{\"type_description\": ");
    describe(ty, &mut json);
    finish(json, referenced.values().map(|r| Desc::Msg(r)))
}

/// The RIHS01 hash of the service `name` (`pkg/srv/Name`) whose request and response are
/// `request` and `response` (named `<name>_Request`, `<name>_Response`): the hash of the
/// service's description, as rosidl writes it (REP 2011): fields `request_message`,
/// `response_message` and `event_message` (`<name>_Event`: `service_msgs/ServiceEventInfo
/// info`, `<name>_Request[<=1] request`, `<name>_Response[<=1] response`), every type they
/// nest referenced. This is the hash in a service's rmw_zenoh key.
pub fn rihs01_service(name: &str, request: &'static MsgType, response: &'static MsgType) -> String {
    let event = format!("{name}_Event");
    let mut referenced = BTreeMap::new();
    for ty in [request, response] {
        referenced.insert(ty.name, ty);
        collect(ty, &mut referenced);
    }
    if let Some(info) = lookup("service_msgs/msg/ServiceEventInfo") {
        referenced.insert(info.name, info);
        collect(info, &mut referenced);
    }
    let mut descs: Vec<(String, Desc)> = referenced
        .values()
        .map(|r| (r.name.to_string(), Desc::Msg(r)))
        .collect();
    let event_fields = vec![
        ("info", NESTED, 0, "service_msgs/msg/ServiceEventInfo"),
        ("request", NESTED + BOUNDED, 1, request.name),
        ("response", NESTED + BOUNDED, 1, response.name),
    ];
    descs.push((event.clone(), Desc::Fields(&event, event_fields)));
    descs.sort_by(|a, b| a.0.cmp(&b.0));
    let top = [
        ("request_message", NESTED, 0, request.name),
        ("response_message", NESTED, 0, response.name),
        ("event_message", NESTED, 0, event.as_str()),
    ];
    let mut json = String::from("{\"type_description\": ");
    describe_fields(name, &top, &mut json);
    finish(json, descs.into_iter().map(|(_, d)| d))
}

/// A referenced type: a known message or fields given directly.
enum Desc<'a> {
    Msg(&'a MsgType),
    Fields(&'a str, Vec<FieldDesc<'a>>),
}

/// Appends the referenced descriptions and hashes the JSON.
fn finish<'a>(mut json: String, referenced: impl Iterator<Item = Desc<'a>>) -> String {
    json.push_str(", \"referenced_type_descriptions\": [");
    for (i, r) in referenced.enumerate() {
        if i > 0 {
            json.push_str(", ");
        }
        match r {
            Desc::Msg(ty) => describe(ty, &mut json),
            Desc::Fields(name, fields) => describe_fields(name, &fields, &mut json),
        }
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
    let fields: Vec<FieldDesc> = ty
        .fields
        .iter()
        .map(|field| {
            let (base, nested) = match field.elem {
                Elem::Prim(p) => (p.type_id(), ""),
                Elem::Nested(name) => (NESTED, name),
            };
            let (offset, capacity) = match field.shape {
                Shape::Single => (0, 0),
                Shape::Array(len) => (ARRAY, len),
                Shape::Sequence => (SEQUENCE, 0),
            };
            (field.name, base + offset, capacity, nested)
        })
        .collect();
    describe_fields(ty.name, &fields, json);
}

/// A description object of `name` with `fields`.
fn describe_fields(name: &str, fields: &[FieldDesc], json: &mut String) {
    let _ = write!(json, "{{\"type_name\": \"{name}\", \"fields\": [");
    for (i, (field, type_id, capacity, nested)) in fields.iter().enumerate() {
        if i > 0 {
            json.push_str(", ");
        }
        let _ = write!(
            json,
            "{{\"name\": \"{field}\", \"type\": {{\"type_id\": {type_id}, \"capacity\": \
             {capacity}, \"string_capacity\": 0, \"nested_type_name\": \"{nested}\"}}}}"
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
