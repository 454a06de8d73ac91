//! Errors of the ROS 2 layer.

use thiserror::Error;

/// A CDR message that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CdrError {
    /// The message ends before a value it must hold.
    #[error("truncated CDR: {need} more bytes needed at byte {at}")]
    Truncated {
        /// Byte offset of the value.
        at: usize,
        /// Bytes it needs.
        need: usize,
    },
    /// Not plain CDR (XCDR1): the representation identifier of the header (parameter lists,
    /// XCDR2, XML or bytes that are no representation at all).
    #[error(
        "unsupported CDR representation 0x{:04x} ({}): coolgp reads plain CDR (XCDR1), \
         CDR_LE (0x0001) or CDR_BE (0x0000), what ROS 2 publishers send",
        u16::from_be_bytes(*.0),
        crate::cdr::representation_name(*.0)
    )]
    Encapsulation([u8; 2]),
    /// A string without its NUL or not UTF-8.
    #[error("bad CDR string at byte {at}")]
    BadString {
        /// Byte offset of the string's body.
        at: usize,
    },
    /// A string where a number was asked for.
    #[error("a string field is not a number")]
    NotNumeric,
}

/// A topic specification or a recording the user named that cannot be used.
#[derive(Debug, Error)]
pub enum Ros2Error {
    /// A `--ros2-input` / `--ros2-target` that does not parse or names an unknown field or
    /// type; the message says what to write instead.
    #[error("{0}")]
    Spec(String),
    /// A recording that cannot be used (not MCAP, another storage format, types that do not
    /// match the topic options, no rows).
    #[error("{file}: {message}")]
    Bag {
        /// The path given.
        file: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// Reading the recording failed.
    #[error("{file}: {source}")]
    Io {
        /// The path given.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Result with [`Ros2Error`].
pub type Result<T, E = Ros2Error> = std::result::Result<T, E>;
