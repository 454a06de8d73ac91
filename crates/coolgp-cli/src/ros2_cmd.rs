//! `coolgp ros2`: what a robot team needs to point coolgp at its topics (docs/ROS2.md).

use std::path::PathBuf;

use anyhow::Result;
use clap::Subcommand;
use coolgp_ros2::hash::rihs01;
use coolgp_ros2::types::{lookup, INPUT_TYPES, TYPES};

/// `coolgp ros2 …`.
#[derive(Subcommand, Debug)]
pub enum Ros2Command {
    /// The message types coolgp learns from and publishes, and the point-query service's
    /// type, with their DDS names and RIHS01 type hashes (the hashes in rmw_zenoh's key
    /// expressions and rosbag2's metadata).
    Types {
        /// One JSON object per line: name, dds_name, hash, role (input, published, nested,
        /// service) and, for inputs, the numeric fields.
        #[arg(long)]
        json: bool,
    },
    /// The topics of a rosbag2 MCAP recording: type, messages, time span, and whether
    /// coolgp can learn from it.
    Bag {
        /// An .mcap file or a rosbag2 bag directory.
        bag: PathBuf,
    },
}

/// The types coolgp publishes (the map as a PointCloud2 or, `--ros2-map-format grid_map`, a
/// GridMap; the health).
const PUBLISHED: [&str; 3] = [
    "sensor_msgs/msg/PointCloud2",
    "grid_map_msgs/msg/GridMap",
    "diagnostic_msgs/msg/DiagnosticArray",
];

/// Runs a `coolgp ros2` command.
pub fn run(cmd: &Ros2Command) -> Result<()> {
    match cmd {
        Ros2Command::Types { json } => {
            types(*json);
            Ok(())
        }
        Ros2Command::Bag { bag } => inspect(bag),
    }
}

fn types(json: bool) {
    for ty in TYPES {
        let role = if INPUT_TYPES.contains(&ty.name) {
            "input"
        } else if PUBLISHED.contains(&ty.name) {
            "published"
        } else {
            "nested"
        };
        let fields: Vec<String> = coolgp_ros2::extract::leaves(ty)
            .map(|l| {
                l.into_iter()
                    .filter(|l| l.prim != coolgp_ros2::types::Prim::String)
                    .filter(|l| !l.path.contains('['))
                    .map(|l| l.path)
                    .collect()
            })
            .unwrap_or_default();
        if json {
            let obj = serde_json::json!({
                "name": ty.name,
                "dds_name": ty.dds_name(),
                "hash": rihs01(ty),
                "role": role,
                "fields": if role == "input" { fields } else { Vec::new() },
            });
            println!("{obj}");
        } else if role != "nested" {
            println!("{:<38} {role:<9} {}", ty.name, rihs01(ty));
            if role == "input" {
                println!("    fields: {}, stamp", fields.join(", "));
            }
        }
    }
    // The point-query service (`--ros2-query-service`).
    let (name, dds_name, hash) = (
        coolgp_ros2::service::SERVICE_TYPE,
        coolgp_ros2::service::dds_name(),
        coolgp_ros2::service::rihs01(),
    );
    if json {
        let obj = serde_json::json!({
            "name": name, "dds_name": dds_name, "hash": hash, "role": "service", "fields": [],
        });
        println!("{obj}");
    } else {
        println!("{name:<38} {:<9} {hash}", "service");
    }
}

fn inspect(bag: &std::path::Path) -> Result<()> {
    let topics = coolgp_ros2::bag_topics(bag)?;
    println!(
        "{:<28} {:<38} {:>9} {:>10}  learnable",
        "topic", "type", "messages", "span (s)"
    );
    for t in &topics {
        let ok = lookup(&t.ty).is_some_and(|ty| INPUT_TYPES.contains(&ty.name));
        println!(
            "{:<28} {:<38} {:>9} {:>10.1}  {}",
            t.topic,
            t.ty,
            t.messages,
            t.span.1 - t.span.0,
            if ok && t.encoding == "cdr" {
                "yes"
            } else {
                "no"
            }
        );
    }
    Ok(())
}
