//! The ROS 2 message types coolgp reads and writes, as field lists (the `.msg` definitions of
//! ROS 2 Jazzy, constants left out: they are not on the wire and not in the type hash).
//!
//! A [`MsgType`] is what both the CDR walk ([`crate::cdr`]) and the RIHS01 hash
//! ([`crate::hash`]) are computed from, so one table serves decoding, encoding and the names
//! that rmw_zenoh puts in its key expressions.

/// A primitive field type (ROS 2 IDL); the number is its `type_id` in the type description.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prim {
    /// `int8`.
    I8,
    /// `uint8`.
    U8,
    /// `int16`.
    I16,
    /// `uint16`.
    U16,
    /// `int32`.
    I32,
    /// `uint32`.
    U32,
    /// `int64`.
    I64,
    /// `uint64`.
    U64,
    /// `float32`.
    F32,
    /// `float64`.
    F64,
    /// `bool` (one byte).
    Bool,
    /// `byte` (one byte, unsigned).
    Byte,
    /// `string` (unbounded): u32 length with the NUL, the bytes, the NUL.
    String,
}

impl Prim {
    /// The field type id of `type_description_interfaces/msg/FieldType`.
    pub fn type_id(self) -> u32 {
        match self {
            Prim::I8 => 2,
            Prim::U8 => 3,
            Prim::I16 => 4,
            Prim::U16 => 5,
            Prim::I32 => 6,
            Prim::U32 => 7,
            Prim::I64 => 8,
            Prim::U64 => 9,
            Prim::F32 => 10,
            Prim::F64 => 11,
            Prim::Bool => 15,
            Prim::Byte => 16,
            Prim::String => 17,
        }
    }

    /// Size and alignment in bytes (a string aligns as its u32 length).
    pub fn size(self) -> usize {
        match self {
            Prim::I8 | Prim::U8 | Prim::Bool | Prim::Byte => 1,
            Prim::I16 | Prim::U16 => 2,
            Prim::I32 | Prim::U32 | Prim::F32 | Prim::String => 4,
            Prim::I64 | Prim::U64 | Prim::F64 => 8,
        }
    }
}

/// What one field holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    /// A primitive.
    Prim(Prim),
    /// A nested message, by its full name (`pkg/msg/Name`).
    Nested(&'static str),
}

/// How many of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// One.
    Single,
    /// A fixed array `T[n]` (no count on the wire).
    Array(usize),
    /// An unbounded sequence `T[]` (u32 count on the wire).
    Sequence,
}

/// One field of a message type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// Field name.
    pub name: &'static str,
    /// Element type.
    pub elem: Elem,
    /// Single, array or sequence.
    pub shape: Shape,
}

/// A message type: its full name (`pkg/msg/Name`) and its fields in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsgType {
    /// `pkg/msg/Name`.
    pub name: &'static str,
    /// Fields in wire order.
    pub fields: &'static [Field],
}

impl MsgType {
    /// The package, the kind (`msg`, `srv`) and the short name.
    fn parts(&self) -> (&'static str, &'static str, &'static str) {
        let mut it = self.name.split('/');
        let pkg = it.next().unwrap_or_default();
        let kind = it.next().unwrap_or("msg");
        let short = self.name.rsplit('/').next().unwrap_or_default();
        (pkg, kind, short)
    }

    /// The DDS type name rmw_zenoh and rmw_fastrtps use: `pkg::msg::dds_::Name_` (a
    /// service's request or response: `pkg::srv::dds_::Name_Request_`).
    pub fn dds_name(&self) -> String {
        let (pkg, kind, short) = self.parts();
        format!("{pkg}::{kind}::dds_::{short}_")
    }

    /// Whether the type starts with a `std_msgs/msg/Header` named `header`.
    pub fn has_header(&self) -> bool {
        self.fields
            .first()
            .is_some_and(|f| f.name == "header" && f.elem == Elem::Nested("std_msgs/msg/Header"))
    }
}

const fn f(name: &'static str, p: Prim) -> Field {
    Field {
        name,
        elem: Elem::Prim(p),
        shape: Shape::Single,
    }
}

const fn n(name: &'static str, ty: &'static str) -> Field {
    Field {
        name,
        elem: Elem::Nested(ty),
        shape: Shape::Single,
    }
}

const fn arr(name: &'static str, p: Prim, len: usize) -> Field {
    Field {
        name,
        elem: Elem::Prim(p),
        shape: Shape::Array(len),
    }
}

pub(crate) const fn seq(name: &'static str, elem: Elem) -> Field {
    Field {
        name,
        elem,
        shape: Shape::Sequence,
    }
}

const HEADER: Field = n("header", "std_msgs/msg/Header");

/// A stamped float64 reading and its variance (Temperature and its siblings).
macro_rules! reading {
    ($name:literal, $value:literal) => {
        MsgType {
            name: $name,
            fields: &[HEADER, f($value, Prim::F64), f("variance", Prim::F64)],
        }
    };
}

/// Every type coolgp knows: the inputs it learns from, the types they nest, and the map and
/// health messages it publishes.
pub static TYPES: &[MsgType] = &[
    MsgType {
        name: "builtin_interfaces/msg/Time",
        fields: &[f("sec", Prim::I32), f("nanosec", Prim::U32)],
    },
    MsgType {
        name: "std_msgs/msg/Header",
        fields: &[
            n("stamp", "builtin_interfaces/msg/Time"),
            f("frame_id", Prim::String),
        ],
    },
    MsgType {
        name: "std_msgs/msg/Float32",
        fields: &[f("data", Prim::F32)],
    },
    MsgType {
        name: "std_msgs/msg/Float64",
        fields: &[f("data", Prim::F64)],
    },
    MsgType {
        name: "sensor_msgs/msg/NavSatStatus",
        fields: &[f("status", Prim::I8), f("service", Prim::U16)],
    },
    MsgType {
        name: "sensor_msgs/msg/NavSatFix",
        fields: &[
            HEADER,
            n("status", "sensor_msgs/msg/NavSatStatus"),
            f("latitude", Prim::F64),
            f("longitude", Prim::F64),
            f("altitude", Prim::F64),
            arr("position_covariance", Prim::F64, 9),
            f("position_covariance_type", Prim::U8),
        ],
    },
    reading!("sensor_msgs/msg/Temperature", "temperature"),
    reading!("sensor_msgs/msg/RelativeHumidity", "relative_humidity"),
    reading!("sensor_msgs/msg/FluidPressure", "fluid_pressure"),
    reading!("sensor_msgs/msg/Illuminance", "illuminance"),
    MsgType {
        name: "sensor_msgs/msg/Range",
        fields: &[
            HEADER,
            f("radiation_type", Prim::U8),
            f("field_of_view", Prim::F32),
            f("min_range", Prim::F32),
            f("max_range", Prim::F32),
            f("range", Prim::F32),
            f("variance", Prim::F32),
        ],
    },
    MsgType {
        name: "geometry_msgs/msg/Point",
        fields: &[f("x", Prim::F64), f("y", Prim::F64), f("z", Prim::F64)],
    },
    MsgType {
        name: "geometry_msgs/msg/Vector3",
        fields: &[f("x", Prim::F64), f("y", Prim::F64), f("z", Prim::F64)],
    },
    MsgType {
        name: "geometry_msgs/msg/Quaternion",
        fields: &[
            f("x", Prim::F64),
            f("y", Prim::F64),
            f("z", Prim::F64),
            f("w", Prim::F64),
        ],
    },
    MsgType {
        name: "geometry_msgs/msg/Pose",
        fields: &[
            n("position", "geometry_msgs/msg/Point"),
            n("orientation", "geometry_msgs/msg/Quaternion"),
        ],
    },
    MsgType {
        name: "geometry_msgs/msg/PointStamped",
        fields: &[HEADER, n("point", "geometry_msgs/msg/Point")],
    },
    MsgType {
        name: "geometry_msgs/msg/PoseStamped",
        fields: &[HEADER, n("pose", "geometry_msgs/msg/Pose")],
    },
    MsgType {
        name: "geometry_msgs/msg/Twist",
        fields: &[
            n("linear", "geometry_msgs/msg/Vector3"),
            n("angular", "geometry_msgs/msg/Vector3"),
        ],
    },
    MsgType {
        name: "geometry_msgs/msg/PoseWithCovariance",
        fields: &[
            n("pose", "geometry_msgs/msg/Pose"),
            arr("covariance", Prim::F64, 36),
        ],
    },
    MsgType {
        name: "geometry_msgs/msg/TwistWithCovariance",
        fields: &[
            n("twist", "geometry_msgs/msg/Twist"),
            arr("covariance", Prim::F64, 36),
        ],
    },
    MsgType {
        name: "nav_msgs/msg/Odometry",
        fields: &[
            HEADER,
            f("child_frame_id", Prim::String),
            n("pose", "geometry_msgs/msg/PoseWithCovariance"),
            n("twist", "geometry_msgs/msg/TwistWithCovariance"),
        ],
    },
    MsgType {
        name: "sensor_msgs/msg/PointField",
        fields: &[
            f("name", Prim::String),
            f("offset", Prim::U32),
            f("datatype", Prim::U8),
            f("count", Prim::U32),
        ],
    },
    MsgType {
        name: "sensor_msgs/msg/PointCloud2",
        fields: &[
            HEADER,
            f("height", Prim::U32),
            f("width", Prim::U32),
            seq("fields", Elem::Nested("sensor_msgs/msg/PointField")),
            f("is_bigendian", Prim::Bool),
            f("point_step", Prim::U32),
            f("row_step", Prim::U32),
            seq("data", Elem::Prim(Prim::U8)),
            f("is_dense", Prim::Bool),
        ],
    },
    MsgType {
        name: "diagnostic_msgs/msg/KeyValue",
        fields: &[f("key", Prim::String), f("value", Prim::String)],
    },
    MsgType {
        name: "diagnostic_msgs/msg/DiagnosticStatus",
        fields: &[
            f("level", Prim::Byte),
            f("name", Prim::String),
            f("message", Prim::String),
            f("hardware_id", Prim::String),
            seq("values", Elem::Nested("diagnostic_msgs/msg/KeyValue")),
        ],
    },
    MsgType {
        name: "diagnostic_msgs/msg/DiagnosticArray",
        fields: &[
            HEADER,
            seq(
                "status",
                Elem::Nested("diagnostic_msgs/msg/DiagnosticStatus"),
            ),
        ],
    },
    MsgType {
        name: "std_msgs/msg/MultiArrayDimension",
        fields: &[
            f("label", Prim::String),
            f("size", Prim::U32),
            f("stride", Prim::U32),
        ],
    },
    MsgType {
        name: "std_msgs/msg/MultiArrayLayout",
        fields: &[
            seq("dim", Elem::Nested("std_msgs/msg/MultiArrayDimension")),
            f("data_offset", Prim::U32),
        ],
    },
    MsgType {
        name: "std_msgs/msg/Float32MultiArray",
        fields: &[
            n("layout", "std_msgs/msg/MultiArrayLayout"),
            seq("data", Elem::Prim(Prim::F32)),
        ],
    },
    // grid_map_msgs as of ROS 2 Humble (the header moved from GridMapInfo to GridMap).
    MsgType {
        name: "grid_map_msgs/msg/GridMapInfo",
        fields: &[
            f("resolution", Prim::F64),
            f("length_x", Prim::F64),
            f("length_y", Prim::F64),
            n("pose", "geometry_msgs/msg/Pose"),
        ],
    },
    MsgType {
        name: "grid_map_msgs/msg/GridMap",
        fields: &[
            HEADER,
            n("info", "grid_map_msgs/msg/GridMapInfo"),
            seq("layers", Elem::Prim(Prim::String)),
            seq("basic_layers", Elem::Prim(Prim::String)),
            seq("data", Elem::Nested("std_msgs/msg/Float32MultiArray")),
            f("outer_start_index", Prim::U16),
            f("inner_start_index", Prim::U16),
        ],
    },
    // The point-query service's answers (`rcl_interfaces/srv/GetParameters`, crate::service)
    // and what every service's event message nests (the service's type hash covers it).
    MsgType {
        name: "rcl_interfaces/msg/ParameterValue",
        fields: &[
            f("type", Prim::U8),
            f("bool_value", Prim::Bool),
            f("integer_value", Prim::I64),
            f("double_value", Prim::F64),
            f("string_value", Prim::String),
            seq("byte_array_value", Elem::Prim(Prim::Byte)),
            seq("bool_array_value", Elem::Prim(Prim::Bool)),
            seq("integer_array_value", Elem::Prim(Prim::I64)),
            seq("double_array_value", Elem::Prim(Prim::F64)),
            seq("string_array_value", Elem::Prim(Prim::String)),
        ],
    },
    MsgType {
        name: "service_msgs/msg/ServiceEventInfo",
        fields: &[
            f("event_type", Prim::U8),
            n("stamp", "builtin_interfaces/msg/Time"),
            arr("client_gid", Prim::U8, 16),
            f("sequence_number", Prim::I64),
        ],
    },
];

/// The types a node can learn from (`--ros2-input` / `--ros2-target`).
pub const INPUT_TYPES: &[&str] = &[
    "std_msgs/msg/Float32",
    "std_msgs/msg/Float64",
    "sensor_msgs/msg/NavSatFix",
    "sensor_msgs/msg/Temperature",
    "sensor_msgs/msg/RelativeHumidity",
    "sensor_msgs/msg/FluidPressure",
    "sensor_msgs/msg/Illuminance",
    "sensor_msgs/msg/Range",
    "geometry_msgs/msg/PointStamped",
    "geometry_msgs/msg/PoseStamped",
    "nav_msgs/msg/Odometry",
];

/// The type named `name`, accepting `pkg/msg/Name` and the short `pkg/Name`.
pub fn lookup(name: &str) -> Option<&'static MsgType> {
    let full = canonical(name);
    TYPES.iter().find(|t| t.name == full)
}

/// `pkg/Name` → `pkg/msg/Name`; anything else unchanged.
pub fn canonical(name: &str) -> String {
    let parts: Vec<&str> = name.split('/').collect();
    match parts.as_slice() {
        [pkg, short] => format!("{pkg}/msg/{short}"),
        _ => name.to_string(),
    }
}

/// The input type named `name`, or an error listing the supported ones.
///
/// # Errors
/// A message naming `name` and every type in [`INPUT_TYPES`].
pub fn input_type(name: &str) -> Result<&'static MsgType, String> {
    let full = canonical(name);
    match lookup(&full) {
        Some(t) if INPUT_TYPES.contains(&t.name) => Ok(t),
        _ => Err(format!(
            "unsupported ROS 2 message type `{name}`; coolgp learns from {}",
            INPUT_TYPES.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_nested_type_is_known() {
        for t in TYPES {
            for fld in t.fields {
                if let Elem::Nested(inner) = fld.elem {
                    assert!(lookup(inner).is_some(), "{} nests unknown {inner}", t.name);
                }
            }
        }
        for name in INPUT_TYPES {
            assert!(lookup(name).is_some(), "{name}");
        }
    }

    #[test]
    fn names() {
        let t = input_type("sensor_msgs/NavSatFix").expect("short name");
        assert_eq!(t.name, "sensor_msgs/msg/NavSatFix");
        assert_eq!(t.dds_name(), "sensor_msgs::msg::dds_::NavSatFix_");
        assert!(t.has_header());
        let err = input_type("sensor_msgs/msg/Image").expect_err("refused");
        assert!(
            err.contains("Image") && err.contains("sensor_msgs/msg/NavSatFix"),
            "{err}"
        );
        assert!(input_type("sensor_msgs/msg/PointCloud2").is_err());
    }
}
