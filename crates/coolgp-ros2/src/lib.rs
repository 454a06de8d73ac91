//! # coolgp-ros2 — ROS 2 messages, recordings and maps for COOL-GP
//!
//! What a robot team's data looks like, turned into rows a [`coolgp`] agent learns from, and
//! what it publishes back, without a ROS installation:
//!
//! - [`types`]: the supported message types as field lists (ROS 2 Jazzy definitions);
//!   [`hash::rihs01`]: their RIHS01 type hashes (the ones rosbag2 and rmw_zenoh use).
//! - [`cdr`]: plain CDR (XCDR1) reading and writing, little or big endian (other
//!   representations refused by name); [`extract`]: chosen numeric fields out
//!   of a message without allocation, and messages of the supported types built from values.
//! - [`spec`]: `--ros2-input TOPIC:TYPE:FIELDS` and `--ros2-target`; [`assemble`]: rows from
//!   messages, paired by stamp within a tolerance, bad messages counted; [`decoder`]: its
//!   decoding half, which a recording's reader runs on a thread of its own.
//! - [`bag`]: rosbag2 MCAP recordings as a [`coolgp_data::Dataset`].
//! - [`map`]: the grid a node maps and its `PointCloud2`; [`grid_map`]: the same map as a
//!   `grid_map_msgs/msg/GridMap` (layers mean and variance); [`diagnostics`]: its health as a
//!   `DiagnosticArray`.
//!
//! - [`rmw_zenoh`]: rmw_zenoh's key expressions, attachments and liveliness tokens, as Jazzy's
//!   or Humble's rmw_zenoh writes them ([`rmw_zenoh::Distro`]);
//!   [`service`]: point queries as a ROS 2 service (`rcl_interfaces/srv/GetParameters`).
//!
//! The transport (the zenoh sessions) lives in `coolgp-node`; everything here is pure
//! functions of bytes, except [`bag`], which reads files.

#![warn(missing_docs)]

pub mod assemble;
pub mod bag;
mod bag_records;
pub mod cdr;
pub mod decoder;
pub mod diagnostics;
pub mod error;
pub mod extract;
pub mod grid_map;
pub mod hash;
pub mod map;
pub mod rmw_zenoh;
pub mod service;
pub mod spec;
pub mod types;

pub use assemble::{Counts, Row, RowAssembler};
pub use bag::{bag_topics, is_bag, load_bag, read_bag, BagTopic};
pub use error::{CdrError, Ros2Error};
pub use spec::{RowSpec, TopicSpec, DEFAULT_TOLERANCE};
