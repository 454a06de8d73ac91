//! What to learn from: topics, their types and fields (`--ros2-input` / `--ros2-target`).
//!
//! `TOPIC:TYPE:FIELD[,FIELD…]`, e.g. `/fix:sensor_msgs/msg/NavSatFix:latitude,longitude` or
//! `/temp:sensor_msgs/Temperature:temperature`; a field is a dotted path into the message
//! (`pose.position.x`) or `stamp` (the message's time in seconds). In a recording of many
//! robots, `/*/fix` names every robot's `/ROBOT/fix`: rows are paired within each robot's
//! namespace and carry it as their routing key (one agent per robot).

use crate::error::Ros2Error;
use crate::extract::Extractor;
use crate::types::{input_type, MsgType};

/// The namespace wildcard: the first segment of a topic (`/*/fix`).
pub const ANY_NAMESPACE: &str = "*";

/// Default pairing tolerance, seconds: messages of different topics whose stamps differ by
/// more are not paired.
pub const DEFAULT_TOLERANCE: f64 = 0.05;

/// One topic and the fields read from it.
#[derive(Clone, Debug, PartialEq)]
pub struct TopicSpec {
    /// Topic name as given (`/fix`, `robot1/fix`).
    pub topic: String,
    /// Its message type.
    pub ty: &'static MsgType,
    /// Field paths (or `stamp`).
    pub fields: Vec<String>,
}

impl TopicSpec {
    /// Parses `TOPIC:TYPE:FIELD[,FIELD…]`.
    ///
    /// # Errors
    /// [`Ros2Error::Spec`] naming what is missing or unsupported; unknown fields are refused
    /// (with the type's field list) by [`Extractor::new`].
    pub fn parse(text: &str) -> Result<Self, Ros2Error> {
        let parts: Vec<&str> = text.splitn(3, ':').map(str::trim).collect();
        let [topic, ty, fields] = parts.as_slice() else {
            return Err(Ros2Error::Spec(format!(
                "`{text}`: write TOPIC:TYPE:FIELD[,FIELD…], e.g. \
                 /fix:sensor_msgs/msg/NavSatFix:latitude,longitude"
            )));
        };
        if topic.is_empty() || topic.contains(char::is_whitespace) {
            return Err(Ros2Error::Spec(format!(
                "`{text}`: empty or spaced topic name"
            )));
        }
        let segments: Vec<&str> = topic.trim_matches('/').split('/').collect();
        if segments.iter().skip(1).any(|g| g.contains('*'))
            || (segments[0].contains('*') && (segments[0] != ANY_NAMESPACE || segments.len() < 2))
        {
            return Err(Ros2Error::Spec(format!(
                "`{text}`: `*` stands for a whole namespace, first, e.g. /*/fix (every robot's \
                 /ROBOT/fix)"
            )));
        }
        let ty = input_type(ty).map_err(Ros2Error::Spec)?;
        let fields: Vec<String> = fields
            .split(',')
            .map(|f| f.trim().to_string())
            .filter(|f| !f.is_empty())
            .collect();
        if fields.is_empty() {
            return Err(Ros2Error::Spec(format!("`{text}`: no field named")));
        }
        let spec = Self {
            topic: (*topic).to_string(),
            ty,
            fields,
        };
        spec.extractor()?;
        Ok(spec)
    }

    /// The extractor of this topic's fields.
    ///
    /// # Errors
    /// As [`Extractor::new`].
    pub fn extractor(&self) -> Result<Extractor, Ros2Error> {
        Extractor::new(self.ty, &self.fields)
    }

    /// The topic without leading and trailing `/` (as rmw_zenoh keys and bags compare it).
    pub fn bare_topic(&self) -> &str {
        self.topic.trim_matches('/')
    }

    /// Whether the topic starts with the namespace wildcard.
    pub fn any_namespace(&self) -> bool {
        self.bare_topic().split('/').next() == Some(ANY_NAMESPACE)
    }
}

/// The namespace `bare` (a topic without outer `/`) has where `pattern` has `*`:
/// `namespace_of("*/fix", "robot1/fix") == Some("robot1")`.
pub fn namespace_of<'a>(pattern: &str, bare: &'a str) -> Option<&'a str> {
    let rest = pattern.strip_prefix("*/")?;
    let (ns, tail) = bare.split_once('/')?;
    (tail == rest && !ns.is_empty()).then_some(ns)
}

/// The rows to assemble: input topics (their fields in order become the inputs) and one
/// target field, paired by stamp within `tolerance` seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct RowSpec {
    /// Input topics, in column order.
    pub inputs: Vec<TopicSpec>,
    /// The target topic; exactly one field.
    pub target: TopicSpec,
    /// Pairing tolerance in seconds.
    pub tolerance: f64,
}

impl RowSpec {
    /// Parses the options: `inputs` (each `TOPIC:TYPE:FIELDS`), `target`
    /// (`TOPIC:TYPE:FIELD`), `tolerance` in seconds.
    ///
    /// # Errors
    /// [`Ros2Error::Spec`] for a bad spec, a target with more than one field, a topic given
    /// twice as an input with different types, or a tolerance that is not a finite
    /// non-negative number.
    pub fn parse(inputs: &[String], target: &str, tolerance: f64) -> Result<Self, Ros2Error> {
        if inputs.is_empty() {
            return Err(Ros2Error::Spec(
                "--ros2-target needs at least one --ros2-input TOPIC:TYPE:FIELDS".into(),
            ));
        }
        let target = TopicSpec::parse(target)?;
        if target.fields.len() != 1 || target.fields[0] == crate::extract::STAMP {
            return Err(Ros2Error::Spec(format!(
                "--ros2-target names one field to learn, got {}",
                target.fields.join(",")
            )));
        }
        if !(tolerance.is_finite() && tolerance >= 0.0) {
            return Err(Ros2Error::Spec(format!(
                "--ros2-tolerance must be a finite number of seconds >= 0, got {tolerance}"
            )));
        }
        let inputs = inputs
            .iter()
            .map(|s| TopicSpec::parse(s))
            .collect::<Result<Vec<_>, _>>()?;
        let wild = inputs
            .iter()
            .chain([&target])
            .filter(|t| t.any_namespace())
            .count();
        if wild != 0 && wild != inputs.len() + 1 {
            return Err(Ros2Error::Spec(
                "name every topic under /*/ (one robot's topics are paired together) or none"
                    .into(),
            ));
        }
        for t in inputs.iter().chain([&target]) {
            if let Some(other) = inputs
                .iter()
                .chain([&target])
                .find(|o| o.bare_topic() == t.bare_topic() && o.ty != t.ty)
            {
                return Err(Ros2Error::Spec(format!(
                    "topic {} is named as {} and as {}",
                    t.topic, t.ty.name, other.ty.name
                )));
            }
        }
        Ok(Self {
            inputs,
            target,
            tolerance,
        })
    }

    /// Whether the topics are every robot's (`/*/…`): rows are paired per namespace.
    pub fn per_namespace(&self) -> bool {
        self.target.any_namespace()
    }

    /// The spec of one robot: each `*` replaced by `namespace`.
    pub fn for_namespace(&self, namespace: &str) -> RowSpec {
        let mut s = self.clone();
        for t in s.inputs.iter_mut().chain([&mut s.target]) {
            if t.any_namespace() {
                let rest = t.bare_topic().split_once('/').map_or("", |(_, r)| r);
                t.topic = format!("/{namespace}/{rest}");
            }
        }
        s
    }

    /// The input column names: each field's path, qualified by its topic (`/fix:latitude`)
    /// where two topics share a field name.
    pub fn input_names(&self) -> Vec<String> {
        let all: Vec<(&str, &str)> = self
            .inputs
            .iter()
            .flat_map(|t| t.fields.iter().map(move |f| (t.topic.as_str(), f.as_str())))
            .collect();
        all.iter()
            .map(|(topic, f)| {
                if all.iter().filter(|(_, g)| g == f).count() > 1 {
                    format!("{topic}:{f}")
                } else {
                    (*f).to_string()
                }
            })
            .collect()
    }

    /// The target column name (its field).
    pub fn target_name(&self) -> &str {
        &self.target.fields[0]
    }

    /// Every distinct topic with its type, in first-named order.
    pub fn topics(&self) -> Vec<(&str, &'static MsgType)> {
        let mut out: Vec<(&str, &'static MsgType)> = Vec::new();
        for t in self.inputs.iter().chain([&self.target]) {
            if !out.iter().any(|(name, _)| *name == t.bare_topic()) {
                out.push((t.bare_topic(), t.ty));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_names() {
        let spec = RowSpec::parse(
            &[
                "/fix:sensor_msgs/msg/NavSatFix:latitude,longitude".into(),
                "/odom:nav_msgs/Odometry:stamp".into(),
            ],
            "/temp:sensor_msgs/msg/Temperature:temperature",
            DEFAULT_TOLERANCE,
        )
        .expect("spec");
        assert_eq!(spec.input_names(), ["latitude", "longitude", "stamp"]);
        assert_eq!(spec.target_name(), "temperature");
        assert_eq!(spec.topics().len(), 3);
        let twice = RowSpec::parse(
            &[
                "/a:std_msgs/msg/Float64:data".into(),
                "/b:std_msgs/msg/Float64:data".into(),
            ],
            "/c:std_msgs/msg/Float32:data",
            0.1,
        )
        .expect("spec");
        assert_eq!(twice.input_names(), ["/a:data", "/b:data"]);
    }

    #[test]
    fn every_robots_topics() {
        let spec = RowSpec::parse(
            &["/*/fix:sensor_msgs/msg/NavSatFix:latitude".into()],
            "*/temp:sensor_msgs/msg/Temperature:temperature",
            0.1,
        )
        .expect("spec");
        assert!(spec.per_namespace());
        let one = spec.for_namespace("robot2");
        assert!(!one.per_namespace());
        assert_eq!(one.topics()[0].0, "robot2/fix");
        assert_eq!(one.target.topic, "/robot2/temp");
        assert_eq!(namespace_of("*/fix", "robot1/fix"), Some("robot1"));
        assert_eq!(namespace_of("*/fix", "robot1/gps/fix"), None);
        assert_eq!(namespace_of("*/fix", "fix"), None);
        for (inputs, target, needle) in [
            (
                "/*/fix:std_msgs/msg/Float64:data",
                "/temp:std_msgs/msg/Float64:data",
                "or none",
            ),
            (
                "/a/*/fix:std_msgs/msg/Float64:data",
                "/*/t:std_msgs/msg/Float64:data",
                "namespace",
            ),
            (
                "/*:std_msgs/msg/Float64:data",
                "/*/t:std_msgs/msg/Float64:data",
                "namespace",
            ),
        ] {
            let err = RowSpec::parse(&[inputs.to_string()], target, 0.1).expect_err(needle);
            assert!(err.to_string().contains(needle), "{err}");
        }
    }

    #[test]
    fn bad_specs_say_what_to_write() {
        for (inputs, target, tol, needle) in [
            (
                vec!["/fix"],
                "/t:std_msgs/msg/Float64:data",
                0.1,
                "TOPIC:TYPE:FIELD",
            ),
            (
                vec!["/img:sensor_msgs/msg/Image:height"],
                "/t:std_msgs/msg/Float64:data",
                0.1,
                "unsupported ROS 2 message type",
            ),
            (
                vec!["/fix:sensor_msgs/msg/NavSatFix:lat"],
                "/t:std_msgs/msg/Float64:data",
                0.1,
                "latitude",
            ),
            (
                vec!["/fix:sensor_msgs/msg/NavSatFix:latitude"],
                "/t:sensor_msgs/msg/Temperature:temperature,variance",
                0.1,
                "one field",
            ),
            (
                vec!["/fix:sensor_msgs/msg/NavSatFix:latitude"],
                "/fix:sensor_msgs/msg/Temperature:temperature",
                0.1,
                "named as",
            ),
            (
                vec!["/fix:sensor_msgs/msg/NavSatFix:latitude"],
                "/t:std_msgs/msg/Float64:data",
                f64::NAN,
                "tolerance",
            ),
            (vec![], "/t:std_msgs/msg/Float64:data", 0.1, "--ros2-input"),
        ] {
            let inputs: Vec<String> = inputs.into_iter().map(String::from).collect();
            let err = RowSpec::parse(&inputs, target, tol).expect_err(needle);
            assert!(err.to_string().contains(needle), "{err} lacks {needle}");
        }
    }
}
