//! The ROS 2 data options, shared by `coolgp simulate` and `coolgp node` (docs/ROS2.md).

use serde::{Deserialize, Serialize};

/// Where rows come from when the data are ROS 2 messages: a rosbag2 MCAP recording given as
/// `--data`, or live topics (the node). Parsed and checked by `coolgp_ros2::RowSpec`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(rename_all = "kebab-case")]
pub struct Ros2Args {
    /// A ROS 2 topic to read inputs from, TOPIC:TYPE:FIELD[,FIELD…] (repeat for several
    /// topics), e.g. /fix:sensor_msgs/msg/NavSatFix:latitude,longitude; a field is a dotted
    /// path into the message (pose.position.x) or `stamp` (the header's time in seconds).
    #[cfg_attr(
        feature = "clap",
        arg(
            long = "ros2-input",
            value_name = "TOPIC:TYPE:FIELDS",
            help_heading = "ROS 2"
        )
    )]
    pub ros2_input: Option<Vec<String>>,
    /// The ROS 2 topic and field to learn, TOPIC:TYPE:FIELD, e.g.
    /// /temp:sensor_msgs/msg/Temperature:temperature. Each of its messages is paired with the
    /// nearest message of every input topic by header stamp.
    #[cfg_attr(
        feature = "clap",
        arg(
            long = "ros2-target",
            value_name = "TOPIC:TYPE:FIELD",
            help_heading = "ROS 2"
        )
    )]
    pub ros2_target: Option<String>,
    /// Seconds within which messages of different topics are paired [default: 0.05].
    #[cfg_attr(
        feature = "clap",
        arg(
            long = "ros2-tolerance",
            value_name = "SECONDS",
            help_heading = "ROS 2"
        )
    )]
    pub ros2_tolerance: Option<f64>,
}

impl Ros2Args {
    /// The keys of a configuration file.
    pub const KEYS: [&'static str; 3] = ["ros2-input", "ros2-target", "ros2-tolerance"];

    /// These options over `file`'s: what is given here wins.
    pub fn merged(self, file: Ros2Args) -> Ros2Args {
        Ros2Args {
            ros2_input: self.ros2_input.or(file.ros2_input),
            ros2_target: self.ros2_target.or(file.ros2_target),
            ros2_tolerance: self.ros2_tolerance.or(file.ros2_tolerance),
        }
    }

    /// Whether any ROS 2 option is given.
    pub fn any(&self) -> bool {
        self.ros2_input.is_some() || self.ros2_target.is_some() || self.ros2_tolerance.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_list_is_every_field_and_flags_win() {
        let value = serde_json::to_value(Ros2Args::default()).expect("serializable");
        let mut keys: Vec<String> = value
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        keys.sort_unstable();
        let mut known: Vec<String> = Ros2Args::KEYS.iter().map(|s| s.to_string()).collect();
        known.sort_unstable();
        assert_eq!(keys, known);
        let flags = Ros2Args {
            ros2_tolerance: Some(0.2),
            ..Ros2Args::default()
        };
        let file = Ros2Args {
            ros2_target: Some("/t:std_msgs/msg/Float64:data".into()),
            ros2_tolerance: Some(1.0),
            ..Ros2Args::default()
        };
        let m = flags.merged(file);
        assert_eq!(m.ros2_tolerance, Some(0.2));
        assert!(m.ros2_target.is_some() && m.any());
        assert!(!Ros2Args::default().any());
    }
}
