//! `coolgp node`'s ROS 2 participant options (docs/ROS2.md), validated into
//! [`Ros2Settings`].

use clap::Args;
use coolgp_ros2::grid_map::{Geometry, MapFormat};
use coolgp_ros2::rmw_zenoh::Distro;
use coolgp_ros2::RowSpec;
use serde::{Deserialize, Serialize};

use super::{or_list, ZenohArgs};
use crate::error::{NodeError, Result};
use crate::ros2::{MapDurability, Middleware, Ros2Settings};

/// `coolgp node`'s ROS 2 participant options (docs/ROS2.md).
#[derive(Args, Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, rename_all = "kebab-case")]
pub struct Ros2NodeArgs {
    /// Be a ROS 2 node: learn from the live topics that --ros2-input and --ros2-target name
    /// (unless --data is given), publish the map (--ros2-map) and the node's health on
    /// /diagnostics. MIDDLEWARE: dds (DDS/RTPS, ROS 2's default; builds with the `dds`
    /// feature) or zenoh (rmw_zenoh, on its own zenoh session to the robots' router).
    #[arg(long = "ros2", value_name = "MIDDLEWARE", help_heading = "ROS 2")]
    pub ros2: Option<String>,
    /// ROS domain id [default: $ROS_DOMAIN_ID, else 0].
    #[arg(long, value_name = "ID", help_heading = "ROS 2")]
    pub ros2_domain: Option<u32>,
    /// Node namespace; relative topic names resolve under it [default: /].
    #[arg(long, value_name = "NS", help_heading = "ROS 2")]
    pub ros2_namespace: Option<String>,
    /// Node name [default: coolgp_<id>].
    #[arg(long, value_name = "NAME", help_heading = "ROS 2")]
    pub ros2_node_name: Option<String>,
    /// zenoh endpoint of the ROS 2 side, e.g. the rmw_zenoh router (repeatable)
    /// [default: tcp/127.0.0.1:7447, rmw_zenoh's router].
    #[arg(long, value_name = "ENDPOINT", help_heading = "ROS 2")]
    pub ros2_connect: Vec<String>,
    /// Listen for ROS 2 peers on this zenoh endpoint (repeatable) [default: none].
    #[arg(long, value_name = "ENDPOINT", help_heading = "ROS 2")]
    pub ros2_listen: Vec<String>,
    /// rmw_zenoh: write keys and liveliness tokens as this distribution's rmw_zenoh does:
    /// humble (rmw_zenoh 0.1.x, `TypeHashNotSupported` in place of type hashes) or jazzy
    /// (RIHS01 type hashes, also Kilted and Rolling); either is read [default: jazzy].
    #[arg(long, value_name = "humble|jazzy", help_heading = "ROS 2")]
    pub ros2_distro: Option<String>,
    /// DDS: discover and talk on the loopback interface only (as ROS 2's
    /// ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST) [default: every interface].
    #[arg(long, help_heading = "ROS 2")]
    pub ros2_localhost: bool,
    /// Publish the node's predictions over a grid (as --ros2-map-format says):
    /// NAME=LO:HI:N,NAME=LO:HI:N spans two inputs, NAME=VALUE fixes another (the rest take
    /// their latest values), e.g. longitude=11:11.01:100,latitude=48:48.02:100.
    #[arg(long, value_name = "GRID", help_heading = "ROS 2")]
    pub ros2_map: Option<String>,
    /// Seconds between two maps and two diagnostics [default: 1].
    #[arg(long, value_name = "SECONDS", help_heading = "ROS 2")]
    pub ros2_map_every: Option<f64>,
    /// The map's topic [default: coolgp/map, under the namespace].
    #[arg(long, value_name = "TOPIC", help_heading = "ROS 2")]
    pub ros2_map_topic: Option<String>,
    /// What the map shows: fleet (the fleet query, as `coolgp query --all`: the nodes whose
    /// memories lie nearest each grid point answer) or own (this node's answer: the global
    /// fused model and its own local correction) [default: fleet with a local memory, else
    /// own].
    #[arg(long, value_name = "fleet|own", help_heading = "ROS 2")]
    pub ros2_map_source: Option<String>,
    /// The map publisher's durability: volatile (keep last 10, rclpy's default: a subscriber
    /// gets the maps published after it joined) or transient-local (latched, keep last 1: a
    /// subscriber with transient-local QoS that joins late gets the latest map at once; over
    /// rmw_zenoh as rmw_zenoh does it, a cache that late advanced subscribers query)
    /// [default: volatile].
    #[arg(long, value_name = "volatile|transient-local", help_heading = "ROS 2")]
    pub ros2_map_durability: Option<String>,
    /// The map's message: pointcloud2 (sensor_msgs/msg/PointCloud2, an organized cloud with
    /// fields x, y, z, mean, variance) or grid_map (grid_map_msgs/msg/GridMap, ROS 2
    /// Humble+: layers mean and variance, float32, grid_map's column-major cells; the two
    /// spanned inputs must be equally spaced, (HI - LO) / (N - 1) the resolution)
    /// [default: pointcloud2].
    #[arg(long, value_name = "pointcloud2|grid_map", help_heading = "ROS 2")]
    pub ros2_map_format: Option<String>,
    /// Answer point queries as the ROS 2 service NAME (relative: under the namespace), of the
    /// standard type rcl_interfaces/srv/GetParameters: each request name is one point, the
    /// node's inputs as decimals separated by commas; each answer a double array [mean,
    /// var_f, var_y] (from the same source as the map, --ros2-map-source), or a string
    /// "error: ..." (docs/ROS2.md) [default: no service].
    #[arg(long, value_name = "NAME", help_heading = "ROS 2")]
    pub ros2_query_service: Option<String>,
}

impl Ros2NodeArgs {
    /// The keys of a configuration file.
    pub const KEYS: [&'static str; 15] = [
        "ros2",
        "ros2-distro",
        "ros2-query-service",
        "ros2-map-format",
        "ros2-map-source",
        "ros2-map-durability",
        "ros2-localhost",
        "ros2-domain",
        "ros2-namespace",
        "ros2-node-name",
        "ros2-connect",
        "ros2-listen",
        "ros2-map",
        "ros2-map-every",
        "ros2-map-topic",
    ];

    /// These flags over `file`'s.
    pub(crate) fn merged(self, f: Ros2NodeArgs) -> Ros2NodeArgs {
        Ros2NodeArgs {
            ros2: self.ros2.or(f.ros2),
            ros2_domain: self.ros2_domain.or(f.ros2_domain),
            ros2_namespace: self.ros2_namespace.or(f.ros2_namespace),
            ros2_node_name: self.ros2_node_name.or(f.ros2_node_name),
            ros2_connect: or_list(self.ros2_connect, f.ros2_connect),
            ros2_listen: or_list(self.ros2_listen, f.ros2_listen),
            ros2_distro: self.ros2_distro.or(f.ros2_distro),
            ros2_localhost: self.ros2_localhost || f.ros2_localhost,
            ros2_map: self.ros2_map.or(f.ros2_map),
            ros2_map_every: self.ros2_map_every.or(f.ros2_map_every),
            ros2_map_topic: self.ros2_map_topic.or(f.ros2_map_topic),
            ros2_map_source: self.ros2_map_source.or(f.ros2_map_source),
            ros2_map_durability: self.ros2_map_durability.or(f.ros2_map_durability),
            ros2_map_format: self.ros2_map_format.or(f.ros2_map_format),
            ros2_query_service: self.ros2_query_service.or(f.ros2_query_service),
        }
    }

    /// The validated settings, if `--ros2` is given; `live` are the topics to learn from.
    ///
    /// # Errors
    /// [`NodeError::Config`] for another middleware, a bad name, period or domain, or ROS 2
    /// options without `--ros2`.
    pub fn settings(
        &self,
        id: u64,
        live: Option<RowSpec>,
        local_memory: bool,
    ) -> Result<Option<Ros2Settings>> {
        let Some(mw) = self.ros2.as_deref() else {
            let given = self.ros2_domain.is_some()
                || self.ros2_localhost
                || self.ros2_namespace.is_some()
                || self.ros2_node_name.is_some()
                || !self.ros2_connect.is_empty()
                || !self.ros2_listen.is_empty()
                || self.ros2_distro.is_some()
                || self.ros2_map.is_some()
                || self.ros2_map_every.is_some()
                || self.ros2_map_topic.is_some()
                || self.ros2_map_source.is_some()
                || self.ros2_map_durability.is_some()
                || self.ros2_map_format.is_some()
                || self.ros2_query_service.is_some();
            if given || live.is_some() {
                return Err(NodeError::Config(
                    "ROS 2 options need --ros2 zenoh (live topics over rmw_zenoh); a recording \
                     is --data BAG"
                        .into(),
                ));
            }
            return Ok(None);
        };
        let middleware = self.middleware(mw)?;
        let domain = self.domain()?;
        let (node_name, namespace) = self.names(id)?;
        let every = self.ros2_map_every.unwrap_or(1.0);
        if !(every.is_finite() && every >= 0.01) {
            return Err(NodeError::Config(format!(
                "--ros2-map-every {every}: give seconds >= 0.01"
            )));
        }
        let connect = if self.ros2_connect.is_empty() && self.ros2_listen.is_empty() {
            vec![crate::ros2::DEFAULT_ROUTER.to_string()]
        } else {
            self.ros2_connect.clone()
        };
        let map_topic = coolgp_ros2::rmw_zenoh::resolve(
            &namespace,
            self.ros2_map_topic
                .as_deref()
                .unwrap_or(crate::ros2::DEFAULT_MAP_TOPIC),
        );
        let live = live.map(|mut spec| {
            for t in spec.inputs.iter_mut().chain([&mut spec.target]) {
                t.topic = coolgp_ros2::rmw_zenoh::resolve(&namespace, &t.topic);
            }
            spec
        });
        let map_fleet = match self.ros2_map_source.as_deref() {
            None => local_memory,
            Some("fleet") => true,
            Some("own") => false,
            Some(other) => {
                return Err(NodeError::Config(format!(
                    "--ros2-map-source {other}: use fleet (the fleet query) or own (this node's \
                     answer)"
                )))
            }
        };
        let query_service = self.query_service(&namespace)?;
        let map_durability = self.map_durability()?;
        let map_format = self.map_format()?;
        Ok(Some(Ros2Settings {
            distro: self.distro()?,
            map_fleet,
            query_service,
            map_durability,
            map_format,
            middleware,
            localhost_only: self.ros2_localhost,
            domain,
            namespace,
            node_name,
            zenoh: ZenohArgs {
                listen: self.ros2_listen.clone(),
                connect,
                ..ZenohArgs::default()
            },
            live,
            map: self.ros2_map.clone(),
            every,
            map_topic,
        }))
    }

    /// `--ros2 MIDDLEWARE`, and the options that belong to the other one refused.
    fn middleware(&self, mw: &str) -> Result<Middleware> {
        let middleware = match mw {
            "zenoh" => Middleware::Zenoh,
            "dds" => Middleware::Dds,
            other => {
                return Err(NodeError::Config(format!(
                    "--ros2 {other}: use dds (DDS/RTPS, ROS 2's default middleware) or zenoh \
                     (rmw_zenoh, with the robots' router)"
                )))
            }
        };
        if middleware == Middleware::Dds
            && (!self.ros2_connect.is_empty() || !self.ros2_listen.is_empty())
        {
            return Err(NodeError::Config(
                "--ros2-connect/--ros2-listen are zenoh endpoints: with --ros2 dds the node \
                 finds its peers by DDS discovery (--ros2-localhost keeps it on this machine)"
                    .into(),
            ));
        }
        if middleware == Middleware::Dds && self.ros2_distro.is_some() {
            return Err(NodeError::Config(
                "--ros2-distro is for --ros2 zenoh (rmw_zenoh's keys differ between Humble and \
                 Jazzy); over DDS nothing coolgp sends depends on the distribution"
                    .into(),
            ));
        }
        if middleware == Middleware::Zenoh && self.ros2_localhost {
            return Err(NodeError::Config(
                "--ros2-localhost is for --ros2 dds; with zenoh, --ros2-connect names the router"
                    .into(),
            ));
        }
        Ok(middleware)
    }

    /// `--ros2-distro`: jazzy (the default) or humble.
    fn distro(&self) -> Result<Distro> {
        self.ros2_distro
            .as_deref()
            .map_or(Ok(Distro::default()), |d| {
                Distro::parse(d).map_err(|e| NodeError::Config(e.to_string()))
            })
    }

    /// `--ros2-query-service`, resolved against the namespace: a valid ROS 2 name (parts of
    /// letters, digits and _, not starting with a digit).
    fn query_service(&self, namespace: &str) -> Result<Option<String>> {
        let Some(name) = self.ros2_query_service.as_deref() else {
            return Ok(None);
        };
        let valid = |p: &str| {
            !p.is_empty()
                && !p.starts_with(|c: char| c.is_ascii_digit())
                && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        let trimmed = name.trim_start_matches('/').trim_end_matches('/');
        if trimmed.is_empty() || !trimmed.split('/').all(valid) {
            return Err(NodeError::Config(format!(
                "--ros2-query-service `{name}`: a ROS 2 service name is parts of letters, \
                 digits and _ separated by /, e.g. coolgp/query"
            )));
        }
        Ok(Some(coolgp_ros2::rmw_zenoh::resolve(namespace, name)))
    }

    /// `--ros2-map-durability`: volatile (the default) or transient-local.
    fn map_durability(&self) -> Result<MapDurability> {
        match self.ros2_map_durability.as_deref() {
            None | Some("volatile") => Ok(MapDurability::Volatile),
            Some("transient-local") => Ok(MapDurability::TransientLocal),
            Some(other) => Err(NodeError::Config(format!(
                "--ros2-map-durability {other}: use volatile (rclpy's default) or \
                 transient-local (latched: late transient-local subscribers get the last map)"
            ))),
        }
    }

    /// `--ros2-map-format`: pointcloud2 (the default) or grid_map, whose grid (`--ros2-map`)
    /// must have one resolution: refused here, at start-up, naming both spacings.
    fn map_format(&self) -> Result<MapFormat> {
        let format = match self.ros2_map_format.as_deref() {
            None => MapFormat::PointCloud2,
            Some(f) => MapFormat::parse(f).map_err(|e| NodeError::Config(e.to_string()))?,
        };
        if let (MapFormat::GridMap, Some(grid)) = (format, self.ros2_map.as_deref()) {
            Geometry::of_text(grid).map_err(|e| NodeError::Config(e.to_string()))?;
        }
        Ok(format)
    }

    /// `--ros2-domain`, else `$ROS_DOMAIN_ID`, else 0; ROS 2 domains are 0–232.
    fn domain(&self) -> Result<u32> {
        let domain = match self.ros2_domain {
            Some(d) => d,
            None => match std::env::var("ROS_DOMAIN_ID") {
                Ok(v) if !v.trim().is_empty() => v.trim().parse().map_err(|_| {
                    NodeError::Config(format!("ROS_DOMAIN_ID={v} is not a domain id"))
                })?,
                _ => 0,
            },
        };
        if domain > 232 {
            return Err(NodeError::Config(format!(
                "--ros2-domain {domain}: ROS 2 domain ids are 0-232"
            )));
        }
        Ok(domain)
    }

    /// The node name (default `coolgp_<id>`) and the namespace (`/…`), both valid ROS names.
    fn names(&self, id: u64) -> Result<(String, String)> {
        let node_name = self
            .ros2_node_name
            .clone()
            .unwrap_or_else(|| format!("coolgp_{id}"));
        let valid = |n: &str| {
            !n.is_empty()
                && !n.starts_with(|c: char| c.is_ascii_digit())
                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        if !valid(&node_name) {
            return Err(NodeError::Config(format!(
                "--ros2-node-name `{node_name}`: a ROS 2 node name is letters, digits and _, \
                 not starting with a digit"
            )));
        }
        let namespace = self.ros2_namespace.clone().unwrap_or_else(|| "/".into());
        if !namespace.split('/').filter(|p| !p.is_empty()).all(valid) {
            return Err(NodeError::Config(format!(
                "--ros2-namespace `{namespace}`: parts are letters, digits and _"
            )));
        }
        let namespace = format!("/{}", namespace.trim_matches('/'));
        Ok((node_name, namespace))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--ros2-distro` / TOML `ros2-distro`: jazzy by default, humble asked for, the flag over
    /// the file; refused with DDS and when misspelt, naming the choices.
    #[test]
    fn the_distro_from_the_flag_and_the_file() {
        let file: Ros2NodeArgs =
            toml::from_str("ros2 = \"zenoh\"\nros2-distro = \"humble\"\n").expect("toml");
        assert!(Ros2NodeArgs::KEYS.contains(&"ros2-distro"));
        let distro = |a: &Ros2NodeArgs| a.settings(1, None, false).map(|s| s.map(|s| s.distro));
        assert_eq!(distro(&file).expect("valid"), Some(Distro::Humble));
        let flag = Ros2NodeArgs {
            ros2_distro: Some("jazzy".into()),
            ..Ros2NodeArgs::default()
        };
        let merged = flag.merged(file.clone());
        assert_eq!(distro(&merged).expect("valid"), Some(Distro::Jazzy));
        let plain = Ros2NodeArgs {
            ros2: Some("zenoh".into()),
            ..Ros2NodeArgs::default()
        };
        assert_eq!(distro(&plain).expect("valid"), Some(Distro::Jazzy));
        let typo = Ros2NodeArgs {
            ros2_distro: Some("Humble".into()),
            ..file.clone()
        };
        let e = distro(&typo).expect_err("refused").to_string();
        assert!(
            e.contains("--ros2-distro Humble") && e.contains("humble"),
            "{e}"
        );
        let dds = Ros2NodeArgs {
            ros2: Some("dds".into()),
            ..file
        };
        let e = distro(&dds).expect_err("refused").to_string();
        assert!(e.contains("--ros2-distro is for --ros2 zenoh"), "{e}");
    }
}
