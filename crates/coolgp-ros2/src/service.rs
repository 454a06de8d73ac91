//! Point queries as a ROS 2 service (`coolgp node --ros2-query-service NAME`, docs/ROS2.md
//! §4): a client sends input points and gets the node's predictive mean and variances at
//! each.
//!
//! The service type is a standard one every ROS 2 installation has, so a client needs no code
//! of ours or generated for us: `rcl_interfaces/srv/GetParameters` (rclpy, rclcpp and the
//! `ros2` command line ship it; it is in the `ros-rcl-interfaces` wheel). Its fields carry a
//! point query as follows:
//!
//! | field | meaning |
//! |---|---|
//! | request `string[] names` | one query point each: the node's inputs in order, as decimals separated by commas (`"48.13,11.55"`) |
//! | response `ParameterValue[] values` | one per name, in order: `type` 8 (`PARAMETER_DOUBLE_ARRAY`) with `double_array_value = [mean, var_f, var_y]`, or `type` 4 (`PARAMETER_STRING`) with `string_value = "error: …"` for a point that cannot be answered |
//!
//! Decimal text is exact for f64 (Python's `repr`, Rust's `{}` and `ros2 service call` YAML
//! all round-trip), so the answers are those of `coolgp query` at the same points to the bit.
//! Requests are read in either byte order; a request that is not a `GetParameters` request
//! is a [`ServiceError`], which the node returns as an error reply and logs.

use thiserror::Error;

use crate::cdr::{CdrReader, CdrWriter, Endian};
use crate::error::CdrError;
use crate::hash::rihs01_service;
use crate::rmw_zenoh::Distro;
use crate::types::{seq, Elem, MsgType, Prim};

/// The service type.
pub const SERVICE_TYPE: &str = "rcl_interfaces/srv/GetParameters";
/// `ParameterType.PARAMETER_STRING`: an answer refused, with why.
pub const PARAMETER_STRING: u8 = 4;
/// `ParameterType.PARAMETER_DOUBLE_ARRAY`: an answer `[mean, var_f, var_y]`.
pub const PARAMETER_DOUBLE_ARRAY: u8 = 8;
/// The most points one request may ask (a larger request is refused whole).
pub const MAX_POINTS: usize = 100_000;

/// The request: `string[] names`.
pub static REQUEST: MsgType = MsgType {
    name: "rcl_interfaces/srv/GetParameters_Request",
    fields: &[seq("names", Elem::Prim(Prim::String))],
};

/// The response: `rcl_interfaces/ParameterValue[] values`.
pub static RESPONSE: MsgType = MsgType {
    name: "rcl_interfaces/srv/GetParameters_Response",
    fields: &[seq(
        "values",
        Elem::Nested("rcl_interfaces/msg/ParameterValue"),
    )],
};

/// A request that cannot be served.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// The payload is not a CDR `GetParameters` request (truncated, another representation,
    /// a string that is not UTF-8, bytes left over).
    #[error("not a {SERVICE_TYPE} request: {0}")]
    Cdr(#[from] CdrError),
    /// More bytes than a request of its names holds.
    #[error("not a {SERVICE_TYPE} request: {0} bytes after the names")]
    Trailing(usize),
    /// More points than [`MAX_POINTS`].
    #[error("{asked} points asked; at most {MAX_POINTS} per request")]
    TooMany {
        /// Points in the request.
        asked: usize,
    },
}

/// The DDS type name of the service, as rmw_zenoh puts it in keys and tokens
/// (`rcl_interfaces::srv::dds_::GetParameters_`).
pub fn dds_name() -> String {
    let response = RESPONSE.dds_name();
    response
        .strip_suffix("Response_")
        .unwrap_or(&response)
        .to_string()
}

/// The key expression of the service `name` (fully qualified) in `domain`, as `distro`'s
/// rmw_zenoh declares a service's queryable and a client queries it:
/// `<domain>/<name without outer '/'>/rcl_interfaces::srv::dds_::GetParameters_/<hash>`, the
/// hash `RIHS01_…` or Humble's `TypeHashNotSupported`.
pub fn key(domain: u32, name: &str, distro: Distro) -> String {
    format!(
        "{}/{}",
        key_any_hash(domain, name),
        distro.type_hash(rihs01)
    )
}

/// The key expression of the service `name` with any type hash (`…/GetParameters_/*`): the
/// node's queryable, answering clients of either distribution.
pub fn key_any(domain: u32, name: &str) -> String {
    format!("{}/*", key_any_hash(domain, name))
}

/// `<domain>/<name without outer '/'>/<DDS type name>`.
fn key_any_hash(domain: u32, name: &str) -> String {
    format!("{domain}/{}/{}", name.trim_matches('/'), dds_name())
}

/// The service type's RIHS01 hash (equal to what rosidl ships in
/// `share/rcl_interfaces/srv/GetParameters.json`).
pub fn rihs01() -> String {
    rihs01_service(SERVICE_TYPE, &REQUEST, &RESPONSE)
}

/// The names of a request, in order.
///
/// # Errors
/// [`ServiceError`] if `payload` is not one (never panics on any bytes).
pub fn decode_request(payload: &[u8]) -> Result<Vec<String>, ServiceError> {
    let mut r = CdrReader::new(payload)?;
    let count = r.u32()? as usize;
    if count > MAX_POINTS {
        return Err(ServiceError::TooMany { asked: count });
    }
    // Each name takes at least 5 bytes: no allocation beyond what the payload can hold.
    let mut names = Vec::with_capacity(count.min(r.remaining() / 5));
    for _ in 0..count {
        names.push(r.string()?.to_string());
    }
    // CDR pads a message to 4 bytes at most at its end; more is not this type.
    match r.remaining() {
        0..=3 => Ok(names),
        n => Err(ServiceError::Trailing(n)),
    }
}

/// A request of `names` in `endian` byte order (what a client sends).
pub fn encode_request(names: &[&str], endian: Endian) -> Vec<u8> {
    let mut w = CdrWriter::new(endian, 8 + names.iter().map(|n| n.len() + 8).sum::<usize>());
    w.u32(len_u32(names.len()));
    for n in names {
        w.string(n);
    }
    w.finish()
}

/// The query point one name gives: `d` decimals separated by commas (spaces allowed).
///
/// # Errors
/// Why it is not one, naming what to write.
pub fn parse_point(name: &str, d: usize) -> Result<Vec<f64>, String> {
    let parts: Vec<&str> = name.split(',').map(str::trim).collect();
    if parts.len() != d {
        return Err(format!(
            "`{name}` has {} values; this node's inputs are {d} decimals separated by commas",
            parts.len()
        ));
    }
    parts
        .iter()
        .map(|p| match p.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(format!("`{name}`: `{p}` is not a finite decimal")),
        })
        .collect()
}

/// What the node answers at one point.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// The predictive mean, variance of f and variance of y.
    Value {
        /// Predictive mean.
        mean: f64,
        /// Variance of f.
        var_f: f64,
        /// Variance of y (var_f plus the noise).
        var_y: f64,
    },
    /// The point could not be answered, and why.
    Refused(String),
}

/// The response to a request whose points got `answers`, in `endian` byte order.
pub fn encode_response(answers: &[Answer], endian: Endian) -> Vec<u8> {
    let mut w = CdrWriter::new(endian, 8 + 96 * answers.len());
    w.u32(len_u32(answers.len()));
    for a in answers {
        let (kind, text, values) = match a {
            Answer::Value { mean, var_f, var_y } => (
                PARAMETER_DOUBLE_ARRAY,
                String::new(),
                vec![*mean, *var_f, *var_y],
            ),
            Answer::Refused(why) => (PARAMETER_STRING, format!("error: {why}"), Vec::new()),
        };
        w.u8(kind);
        w.u8(0); // bool_value
        w.number(Prim::I64, 0.0); // integer_value
        w.f64(0.0); // double_value
        w.string(&text);
        w.u32(0); // byte_array_value
        w.u32(0); // bool_array_value
        w.u32(0); // integer_array_value
        w.u32(len_u32(values.len()));
        for v in values {
            w.f64(v);
        }
        w.u32(0); // string_array_value
    }
    w.finish()
}

/// The answers of a response (the inverse of [`encode_response`], any `ParameterValue`s:
/// a double array of three is a value, a string a refusal, anything else refused as such).
///
/// # Errors
/// [`ServiceError`] if `payload` is not a `GetParameters` response.
pub fn decode_response(payload: &[u8]) -> Result<Vec<Answer>, ServiceError> {
    let mut r = CdrReader::new(payload)?;
    let count = r.u32()? as usize;
    let mut out = Vec::with_capacity(count.min(r.remaining() / 48));
    for _ in 0..count {
        let kind = r.number(Prim::U8)? as u8;
        r.skip(Prim::Bool)?;
        r.skip(Prim::I64)?;
        r.skip(Prim::F64)?;
        let text = r.string()?.to_string();
        let mut arrays: Vec<Vec<f64>> = Vec::new();
        for p in [Prim::Byte, Prim::Bool, Prim::I64, Prim::F64] {
            let n = r.u32()? as usize;
            let mut values = Vec::with_capacity(n.min(r.remaining()));
            for _ in 0..n {
                values.push(r.number(p)?);
            }
            arrays.push(values);
        }
        for _ in 0..r.u32()? {
            r.string()?;
        }
        out.push(match (kind, arrays[3].as_slice()) {
            (PARAMETER_DOUBLE_ARRAY, &[mean, var_f, var_y]) => Answer::Value { mean, var_f, var_y },
            (PARAMETER_STRING, _) => {
                Answer::Refused(text.strip_prefix("error: ").unwrap_or(&text).to_string())
            }
            (k, _) => Answer::Refused(format!("a parameter value of type {k}")),
        });
    }
    Ok(out)
}

fn len_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
#[path = "service_tests.rs"]
mod tests;
