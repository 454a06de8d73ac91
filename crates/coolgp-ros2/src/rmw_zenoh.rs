//! rmw_zenoh's wire conventions (ROS 2 Jazzy ≥ 0.2.4, Kilted, Rolling), as pure functions:
//! key expressions of topics, the attachment every sample carries, and the liveliness tokens
//! that make a node, its publishers and its subscriptions appear in the ROS 2 graph
//! (`ros2 node list`, `ros2 topic info`). The sessions themselves live in `coolgp-node`.
//!
//! - Topic key: `<domain>/<topic without outer '/'>/<pkg::msg::dds_::Name_>/<RIHS01_…>`.
//! - Attachment (33 bytes): sequence number (i64 LE, from 1), source time (i64 LE, ns since
//!   the epoch), then the publisher's GID as a length byte 16 and 16 bytes.
//! - Liveliness token: `@ros2_lv/<domain>/<zid>/<node id>/<entity id>/<NN|MP|MS>/<enclave>/
//!   <namespace>/<node>[/<topic>/<type>/<hash>/<qos>]` (`SS`/`SC` for a service's server and
//!   client, the service's name and type in place of the topic's), each field's `/` written `%` and an
//!   empty field `%`; the GID is the XXH3-128 of the token (low 64 bits first, little endian).
//! - QoS field: `<reliability>:<durability>:<history>,<depth>:<deadline s>,<ns>:<lifespan s>,
//!   <ns>:<liveliness>,<lease s>,<ns>`, with the RMW enum numbers (reliable 1, best effort 2,
//!   transient local 1, volatile 2), each left empty where it equals rmw_zenoh's default
//!   (reliable, volatile, keep last, depth 42, infinite durations, automatic): rclpy's
//!   default profile (depth 10) is `::,10:,:,:,,`.

use crate::hash::rihs01;
use crate::types::MsgType;

/// The admin space of liveliness tokens.
pub const ADMIN_SPACE: &str = "@ros2_lv";
/// Attachment length.
pub const ATTACHMENT_LEN: usize = 33;

/// What an entity is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A node (`NN`).
    Node,
    /// A publisher (`MP`).
    Publisher,
    /// A subscription (`MS`).
    Subscription,
    /// A service server (`SS`).
    ServiceServer,
    /// A service client (`SC`).
    ServiceClient,
}

impl Kind {
    fn code(self) -> &'static str {
        match self {
            Kind::Node => "NN",
            Kind::Publisher => "MP",
            Kind::Subscription => "MS",
            Kind::ServiceServer => "SS",
            Kind::ServiceClient => "SC",
        }
    }

    fn from_code(s: &str) -> Option<Self> {
        match s {
            "NN" => Some(Kind::Node),
            "MP" => Some(Kind::Publisher),
            "MS" => Some(Kind::Subscription),
            "SS" => Some(Kind::ServiceServer),
            "SC" => Some(Kind::ServiceClient),
            _ => None,
        }
    }
}

/// The QoS settings a token carries (the ones coolgp uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Qos {
    /// Reliable (else best effort).
    pub reliable: bool,
    /// Transient local, i.e. latched (else volatile).
    pub transient_local: bool,
    /// Keep-last depth.
    pub depth: u32,
}

impl Qos {
    /// rclpy's default: reliable, volatile, keep last 10.
    pub const DEFAULT: Qos = Qos {
        reliable: true,
        transient_local: false,
        depth: 10,
    };
    /// A latched map: reliable, transient local, keep last 1 (late subscribers get the last).
    pub const LATCHED: Qos = Qos {
        reliable: true,
        transient_local: true,
        depth: 1,
    };

    /// The token's QoS field (numbers only where they differ from rmw_zenoh's default).
    pub fn field(&self) -> String {
        let reliability = if self.reliable { "" } else { "2" };
        let durability = if self.transient_local { "1" } else { "" };
        let depth = if self.depth == 42 {
            String::new()
        } else {
            self.depth.to_string()
        };
        format!("{reliability}:{durability}:,{depth}:,:,:,,")
    }
}

/// `/` → `%`, empty → `%`.
pub fn mangle(s: &str) -> String {
    if s.is_empty() {
        "%".into()
    } else {
        s.replace('/', "%")
    }
}

/// The inverse of [`mangle`] as rmw_zenoh reads it: `%` → `/` (so `%` alone is `/`, the
/// root namespace or enclave).
pub fn demangle(s: &str) -> String {
    s.replace('%', "/")
}

/// A topic name resolved against a namespace: absolute names (`/x`) stay, relative ones
/// (`x`) go under `namespace`; always with one leading `/` and none trailing.
pub fn resolve(namespace: &str, topic: &str) -> String {
    let t = topic.trim_end_matches('/');
    if t.starts_with('/') {
        return t.to_string();
    }
    let ns = namespace.trim_matches('/');
    if ns.is_empty() {
        format!("/{t}")
    } else {
        format!("/{ns}/{t}")
    }
}

/// The key expression of `topic` (fully qualified) of type `ty` in `domain`.
pub fn topic_key(domain: u32, topic: &str, ty: &MsgType) -> String {
    format!(
        "{domain}/{}/{}/{}",
        topic.trim_matches('/'),
        ty.dds_name(),
        rihs01(ty)
    )
}

/// The key expression matching `topic` with any type and hash (so a wrong type is seen and
/// counted, and Humble's `TypeHashNotSupported` is accepted).
pub fn topic_key_any(domain: u32, topic: &str) -> String {
    format!("{domain}/{}/*/*", topic.trim_matches('/'))
}

/// The key of a transient-local publisher's cache, as zenoh-ext's `AdvancedPublisher` (which
/// rmw_zenoh uses) declares it for a publisher whose samples carry timestamps:
/// `<topic key>/@adv/pub/<zid>/uhlc/_`. A liveliness token on it makes the publisher
/// detectable; a queryable on it hands its cached samples to late `AdvancedSubscriber`s,
/// which query `<topic key>/@adv/**` and the keys of the tokens they see.
pub fn advanced_cache_key(topic_key: &str, zid: &str) -> String {
    format!("{topic_key}/@adv/pub/{zid}/uhlc/_")
}

/// One entity of the graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entity {
    /// ROS domain id.
    pub domain: u32,
    /// The zenoh session id (hex).
    pub zid: String,
    /// Node id within the session.
    pub node_id: u32,
    /// Entity id within the session (the node's own id for a node).
    pub entity_id: u32,
    /// Node, publisher or subscription.
    pub kind: Kind,
    /// Security enclave (usually empty).
    pub enclave: String,
    /// Node namespace (`/` or `/robot1`).
    pub namespace: String,
    /// Node name.
    pub node: String,
    /// For a publisher or subscription: topic (fully qualified), type (DDS name), hash, QoS.
    pub topic: Option<(String, String, String, String)>,
}

impl Entity {
    /// The liveliness token.
    pub fn token(&self) -> String {
        let mut parts = vec![
            ADMIN_SPACE.to_string(),
            self.domain.to_string(),
            self.zid.clone(),
            self.node_id.to_string(),
            self.entity_id.to_string(),
            self.kind.code().to_string(),
            mangle(&self.enclave),
            mangle(&self.namespace),
            mangle(&self.node),
        ];
        if let Some((topic, ty, hash, qos)) = &self.topic {
            parts.extend([mangle(topic), mangle(ty), mangle(hash), qos.clone()]);
        }
        parts.join("/")
    }

    /// Parses a token (the inverse of [`Entity::token`]); `None` if it is not one.
    pub fn parse(token: &str) -> Option<Entity> {
        let p: Vec<&str> = token.split('/').collect();
        if p.len() != 9 && p.len() != 13 || p[0] != ADMIN_SPACE {
            return None;
        }
        Some(Entity {
            domain: p[1].parse().ok()?,
            zid: p[2].to_string(),
            node_id: p[3].parse().ok()?,
            entity_id: p[4].parse().ok()?,
            kind: Kind::from_code(p[5])?,
            enclave: demangle(p[6]),
            namespace: demangle(p[7]),
            node: demangle(p[8]),
            topic: (p.len() == 13).then(|| {
                (
                    demangle(p[9]),
                    demangle(p[10]),
                    demangle(p[11]),
                    p[12].to_string(),
                )
            }),
        })
    }
}

/// The GID of an entity: XXH3-128 of its token, low 64 bits first, little endian.
pub fn gid(token: &str) -> [u8; 16] {
    let h = xxhash_rust::xxh3::xxh3_128(token.as_bytes());
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&(h as u64).to_le_bytes());
    out[8..].copy_from_slice(&((h >> 64) as u64).to_le_bytes());
    out
}

/// The attachment of a sample.
pub fn attachment(sequence: i64, source_ns: i64, gid: &[u8; 16]) -> [u8; ATTACHMENT_LEN] {
    let mut a = [0u8; ATTACHMENT_LEN];
    a[..8].copy_from_slice(&sequence.to_le_bytes());
    a[8..16].copy_from_slice(&source_ns.to_le_bytes());
    a[16] = 16;
    a[17..].copy_from_slice(gid);
    a
}

/// Sequence number, source time (ns) and GID of an attachment; `None` if malformed.
pub fn parse_attachment(a: &[u8]) -> Option<(i64, i64, [u8; 16])> {
    if a.len() != ATTACHMENT_LEN || a[16] != 16 {
        return None;
    }
    let seq = i64::from_le_bytes(a[..8].try_into().ok()?);
    let ts = i64::from_le_bytes(a[8..16].try_into().ok()?);
    Some((seq, ts, a[17..].try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::lookup;

    #[test]
    fn the_design_documents_key() {
        // docs/design.md's example: /chatter of std_msgs/msg/String in domain 0.
        let string = crate::types::MsgType {
            name: "std_msgs/msg/String",
            fields: &[crate::types::Field {
                name: "data",
                elem: crate::types::Elem::Prim(crate::types::Prim::String),
                shape: crate::types::Shape::Single,
            }],
        };
        assert_eq!(
            topic_key(0, "/chatter", &string),
            "0/chatter/std_msgs::msg::dds_::String_/\
             RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
        );
        let fix = lookup("sensor_msgs/msg/NavSatFix").expect("type");
        assert!(topic_key(3, "/robot1/fix", fix).starts_with("3/robot1/fix/sensor_msgs::msg::"));
        assert_eq!(topic_key_any(0, "/a/b/"), "0/a/b/*/*");
        // zenoh-ext's `ke_liveliness` format, `…/@adv/${entity}/${zid}/${eid}/${meta:**}`,
        // with the empty metadata chunk `_` and `uhlc` for a timestamped publisher.
        let cache = advanced_cache_key("0/map/T/H", "8b7e5c1f");
        assert_eq!(cache, "0/map/T/H/@adv/pub/8b7e5c1f/uhlc/_");
        assert!(cache.starts_with("0/map/T/H/@adv/"));
    }

    #[test]
    fn names_resolve_like_ros() {
        assert_eq!(resolve("/robot1", "fix"), "/robot1/fix");
        assert_eq!(resolve("robot1/", "/fix"), "/fix");
        assert_eq!(resolve("", "fix"), "/fix");
        assert_eq!(resolve("/", "a/b"), "/a/b");
    }

    #[test]
    fn tokens_round_trip() {
        let e = Entity {
            domain: 0,
            zid: "8b7e5c1f".into(),
            node_id: 0,
            entity_id: 3,
            kind: Kind::Publisher,
            enclave: "/".into(),
            namespace: "/".into(),
            node: "coolgp_1".into(),
            topic: Some((
                "/coolgp/map".into(),
                "sensor_msgs::msg::dds_::PointCloud2_".into(),
                "RIHS01_9198".into(),
                Qos::LATCHED.field(),
            )),
        };
        let t = e.token();
        assert_eq!(
            t,
            "@ros2_lv/0/8b7e5c1f/0/3/MP/%/%/coolgp_1/%coolgp%map/\
             sensor_msgs::msg::dds_::PointCloud2_/RIHS01_9198/:1:,1:,:,:,,"
        );
        assert_eq!(Entity::parse(&t), Some(e));
        // As rmw_zenoh writes them (seen from zenoh-ros2-sdk and rmw_zenoh's qos.cpp).
        assert_eq!(Qos::DEFAULT.field(), "::,10:,:,:,,");
        let best_effort_latched = Qos {
            reliable: false,
            transient_local: true,
            depth: 1,
        };
        assert_eq!(best_effort_latched.field(), "2:1:,1:,:,:,,");
        assert!(Entity::parse("@ros2_lv/0/x").is_none());
        assert_ne!(gid(&t), gid("other"));
    }

    #[test]
    fn attachments_round_trip() {
        let g = gid("x");
        let a = attachment(7, 1_700_000_000_000_000_000, &g);
        assert_eq!(
            parse_attachment(&a),
            Some((7, 1_700_000_000_000_000_000, g))
        );
        assert!(parse_attachment(&a[..32]).is_none());
    }
}
