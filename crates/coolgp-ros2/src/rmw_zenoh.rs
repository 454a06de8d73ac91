//! rmw_zenoh's wire conventions, as pure functions: key expressions of topics, the attachment
//! every sample carries, and the liveliness tokens that make a node, its publishers and its
//! subscriptions appear in the ROS 2 graph (`ros2 node list`, `ros2 topic info`). The
//! sessions themselves live in `coolgp-node`.
//!
//! - Topic key: `<domain>/<topic without outer '/'>/<pkg::msg::dds_::Name_>/<type hash>`, the
//!   hash `RIHS01_…` (Jazzy ≥ 0.2.4, Kilted, Rolling) or the literal `TypeHashNotSupported`
//!   (Humble's backport, rmw_zenoh_cpp 0.1.x): [`Distro`].
//! - Attachment (33 bytes): sequence number (i64 LE, from 1), source time (i64 LE, ns since
//!   the epoch), then the publisher's GID as a length byte 16 and 16 bytes. Jazzy 0.2.0–0.2.3
//!   and Humble 0.1.0–0.1.1 wrote a keyed form (each value after its name), read here too:
//!   [`AttachmentForm`].
//! - Liveliness token: `@ros2_lv/<domain>/<zid>/<node id>/<entity id>/<NN|MP|MS>/<enclave>/
//!   <namespace>/<node>[/<topic>/<type>/<hash>/<qos>]` (`SS`/`SC` for a service's server and
//!   client, the service's name and type in place of the topic's), each field's `/` written `%` and an
//!   empty field `%`; the GID is the XXH3-128 of the token (low 64 bits first, little endian).
//! - QoS field: `<reliability>:<durability>:<history>,<depth>:<deadline s>,<ns>:<lifespan s>,
//!   <ns>:<liveliness>,<lease s>,<ns>`, with the RMW enum numbers (reliable 1, best effort 2,
//!   transient local 1, volatile 2), each left empty where it equals rmw_zenoh's default
//!   (reliable, volatile, keep last, depth 42, infinite durations, automatic): rclpy's
//!   default profile (depth 10) is `::,10:,:,:,,`.
//!
//! Humble's backport differs from Jazzy's rmw_zenoh on the wire in the type hash only (read
//! in ros2/rmw_zenoh's `humble` branch, release 0.1.9, against Jazzy's 0.2.10: the publisher,
//! subscription, service and client code put the constant `TypeHashNotSupported` where Jazzy
//! stringifies the RIHS01 hash; the key and token layout, QoS field, GID and attachment code
//! are the same, and its zenoh-ext advanced publisher backs transient local alike).

use crate::error::Ros2Error;
use crate::hash::rihs01;
use crate::types::MsgType;

/// The admin space of liveliness tokens.
pub const ADMIN_SPACE: &str = "@ros2_lv";
/// Attachment length.
pub const ATTACHMENT_LEN: usize = 33;
/// What Humble's rmw_zenoh writes in keys and tokens in place of a type hash (its
/// `rmw_publisher_data.cpp`, `rmw_subscription_data.cpp`, `rmw_service_data.cpp`,
/// `rmw_client_data.cpp`: `const char * type_hash_c_str = "TypeHashNotSupported";`).
pub const HUMBLE_TYPE_HASH: &str = "TypeHashNotSupported";

/// The ROS 2 distribution whose rmw_zenoh a node speaks as (`--ros2-distro`). A node reads
/// both (its subscriptions match any hash); it writes its keys and tokens as this one does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Distro {
    /// Humble's backport (rmw_zenoh_cpp 0.1.x): [`HUMBLE_TYPE_HASH`] for every type hash.
    Humble,
    /// Jazzy (rmw_zenoh_cpp ≥ 0.2.4), Kilted, Rolling: RIHS01 type hashes.
    #[default]
    Jazzy,
}

impl Distro {
    /// `humble` or `jazzy` (Kilted and Rolling write what Jazzy does).
    ///
    /// # Errors
    /// [`Ros2Error::Spec`] naming the two.
    pub fn parse(text: &str) -> Result<Self, Ros2Error> {
        match text.trim() {
            "humble" => Ok(Self::Humble),
            "jazzy" => Ok(Self::Jazzy),
            other => Err(Ros2Error::Spec(format!(
                "--ros2-distro {other}: use humble (rmw_zenoh 0.1.x, no type hashes) or jazzy \
                 (RIHS01 type hashes: Jazzy, Kilted, Rolling)"
            ))),
        }
    }

    /// The flag's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Humble => "humble",
            Self::Jazzy => "jazzy",
        }
    }

    /// The type-hash field of keys and tokens: `rihs01()` (computed for Jazzy only) or
    /// [`HUMBLE_TYPE_HASH`].
    pub fn type_hash(self, rihs01: impl FnOnce() -> String) -> String {
        match self {
            Self::Humble => HUMBLE_TYPE_HASH.to_string(),
            Self::Jazzy => rihs01(),
        }
    }
}

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

/// The key expression of `topic` (fully qualified) of type `ty` in `domain`, as `distro`'s
/// rmw_zenoh writes it.
pub fn topic_key(domain: u32, topic: &str, ty: &MsgType, distro: Distro) -> String {
    format!(
        "{domain}/{}/{}/{}",
        topic.trim_matches('/'),
        ty.dds_name(),
        distro.type_hash(|| rihs01(ty))
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

/// How an attachment is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachmentForm {
    /// The values only, 33 bytes ([`attachment`]): rmw_zenoh Jazzy ≥ 0.2.4, Humble ≥ 0.1.2.
    Plain,
    /// Each value after its name, as zenoh-ext's serializer writes a string (a length byte,
    /// the bytes): `sequence_number`, `source_timestamp`, `source_gid`, 77 bytes; rmw_zenoh
    /// Jazzy 0.2.0–0.2.3 and Humble 0.1.0–0.1.1 (`attachment_helpers.cpp`).
    Keyed,
}

/// What an attachment carries: the sample's sequence number, source time (ns since the epoch)
/// and the sender's GID, and the form it came in (a service replies in its request's form).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attachment {
    /// Sequence number (from 1 per publisher or client).
    pub sequence: i64,
    /// Source time, ns since the epoch.
    pub source_ns: i64,
    /// The sender's GID.
    pub gid: [u8; 16],
    /// Its layout.
    pub form: AttachmentForm,
}

/// The names of the keyed form's values, in order.
const KEYED_NAMES: [&str; 3] = ["sequence_number", "source_timestamp", "source_gid"];
/// Where the keyed form's values start: after each name's length byte and bytes, and the
/// values before it.
const KEYED_SEQ: usize = 1 + 15;
const KEYED_TIME: usize = KEYED_SEQ + 8 + 1 + 16;
const KEYED_GID: usize = KEYED_TIME + 8 + 1 + 10;

impl Attachment {
    /// The attachment's bytes in its form.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self.form {
            AttachmentForm::Plain => attachment(self.sequence, self.source_ns, &self.gid).to_vec(),
            AttachmentForm::Keyed => {
                let values = [
                    self.sequence.to_le_bytes().to_vec(),
                    self.source_ns.to_le_bytes().to_vec(),
                    [&[16u8][..], &self.gid].concat(),
                ];
                let mut out = Vec::with_capacity(KEYED_GID + 17);
                for (name, value) in KEYED_NAMES.iter().zip(values) {
                    out.push(name.len() as u8);
                    out.extend_from_slice(name.as_bytes());
                    out.extend_from_slice(&value);
                }
                out
            }
        }
    }
}

/// The attachment of a sample, in either form; `None` if it is neither (a peer's bytes,
/// never trusted).
pub fn parse_attachment(a: &[u8]) -> Option<Attachment> {
    let i64_at = |at: usize| Some(i64::from_le_bytes(a.get(at..at + 8)?.try_into().ok()?));
    let (form, seq, time, gid) = if a.len() == ATTACHMENT_LEN {
        (AttachmentForm::Plain, 0, 8, 16)
    } else {
        (AttachmentForm::Keyed, KEYED_SEQ, KEYED_TIME, KEYED_GID)
    };
    let parsed = Attachment {
        sequence: i64_at(seq)?,
        source_ns: i64_at(time)?,
        gid: a.get(gid + 1..gid + 17)?.try_into().ok()?,
        form,
    };
    // Every other byte (the GID's length, the keyed form's names) as the form has them.
    (parsed.to_bytes() == a).then_some(parsed)
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
            topic_key(0, "/chatter", &string, Distro::Jazzy),
            "0/chatter/std_msgs::msg::dds_::String_/\
             RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
        );
        let fix = lookup("sensor_msgs/msg/NavSatFix").expect("type");
        assert!(topic_key(3, "/robot1/fix", fix, Distro::default())
            .starts_with("3/robot1/fix/sensor_msgs::msg::"));
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
        let parsed = parse_attachment(&a).expect("plain");
        assert_eq!(
            (parsed.sequence, parsed.source_ns, parsed.gid, parsed.form),
            (7, 1_700_000_000_000_000_000, g, AttachmentForm::Plain)
        );
        assert_eq!(parsed.to_bytes(), a);
        assert!(parse_attachment(&a[..32]).is_none());
        let mut bad_len = a;
        bad_len[16] = 15;
        assert!(parse_attachment(&bad_len).is_none());
    }

    /// The keyed form of rmw_zenoh Humble 0.1.0–0.1.1 (and Jazzy 0.2.0–0.2.3),
    /// `attachment_helpers.cpp`: `serialize(std::string("sequence_number"))`, the i64,
    /// `serialize(std::string("source_timestamp"))`, the i64, `serialize(std::string(
    /// "source_gid"))`, the 16-byte array; zenoh-ext writes a string as its length and bytes
    /// and an array as its length and elements (checked with eclipse-zenoh's `z_serialize`).
    #[test]
    fn keyed_attachments_of_early_humble_are_read() {
        let g: [u8; 16] = std::array::from_fn(|i| i as u8 + 1);
        let ts: i64 = 1_700_000_000_123_456_789;
        let wire = [
            &b"\x0fsequence_number"[..],
            &42i64.to_le_bytes(),
            b"\x10source_timestamp",
            &ts.to_le_bytes(),
            b"\x0asource_gid\x10",
            &g,
        ]
        .concat();
        assert_eq!(wire.len(), 77);
        let a = parse_attachment(&wire).expect("keyed");
        assert_eq!(
            a,
            Attachment {
                sequence: 42,
                source_ns: ts,
                gid: g,
                form: AttachmentForm::Keyed
            }
        );
        assert_eq!(a.to_bytes(), wire, "a reply in the request's form");
        let mut renamed = wire.clone();
        renamed[1] = b'S';
        assert!(parse_attachment(&renamed).is_none());
        assert!(parse_attachment(&wire[..76]).is_none());
        assert!(parse_attachment(b"").is_none());
    }

    /// Humble's rmw_zenoh (ros2/rmw_zenoh, branch `humble`, release 0.1.9). Its
    /// docs/design.md gives the formats `<domain_id>/<fully_qualified_name>/<type_name>/
    /// TypeHashNotSupported` and `@ros2_lv/…/<mangled_qualified_name>/<type_name>/
    /// TypeHashNotSupported/<qos>`, but its examples were left as Jazzy's (with RIHS01
    /// hashes); its sources (`rmw_publisher_data.cpp`, `rmw_subscription_data.cpp`:
    /// `const char * type_hash_c_str = "TypeHashNotSupported";`, passed to `TopicInfo` and
    /// the token) decide: the design doc's examples with that constant for the hash.
    #[test]
    fn humbles_keys_and_tokens() {
        let string = crate::types::MsgType {
            name: "std_msgs/msg/String",
            fields: &[crate::types::Field {
                name: "data",
                elem: crate::types::Elem::Prim(crate::types::Prim::String),
                shape: crate::types::Shape::Single,
            }],
        };
        assert_eq!(
            topic_key(0, "/chatter", &string, Distro::Humble),
            "0/chatter/std_msgs::msg::dds_::String_/TypeHashNotSupported"
        );
        assert_eq!(
            topic_key(0, "/robot1/chatter", &string, Distro::Humble),
            "0/robot1/chatter/std_msgs::msg::dds_::String_/TypeHashNotSupported"
        );
        let endpoint = |zid: &str, kind, node: &str, depth| Entity {
            domain: 0,
            zid: zid.into(),
            node_id: 0,
            entity_id: 10,
            kind,
            enclave: "/".into(),
            namespace: "/".into(),
            node: node.into(),
            topic: Some((
                "/chatter".into(),
                string.dds_name(),
                Distro::Humble.type_hash(|| unreachable!("Humble computes no hash")),
                Qos {
                    depth,
                    ..Qos::DEFAULT
                }
                .field(),
            )),
        };
        let talker = endpoint(
            "8b20917502ee955ac4476e0266340d5c",
            Kind::Publisher,
            "talker",
            7,
        );
        assert_eq!(
            talker.token(),
            "@ros2_lv/0/8b20917502ee955ac4476e0266340d5c/0/10/MP/%/%/talker/%chatter/\
             std_msgs::msg::dds_::String_/TypeHashNotSupported/::,7:,:,:,,"
        );
        let listener = endpoint(
            "aac3178e146ba6f1fc6e6a4085e77f21",
            Kind::Subscription,
            "listener",
            10,
        );
        assert_eq!(
            listener.token(),
            "@ros2_lv/0/aac3178e146ba6f1fc6e6a4085e77f21/0/10/MS/%/%/listener/%chatter/\
             std_msgs::msg::dds_::String_/TypeHashNotSupported/::,10:,:,:,,"
        );
        assert_eq!(Entity::parse(&listener.token()), Some(listener));
        // What a node subscribes to matches both distributions' keys.
        assert_eq!(topic_key_any(0, "/chatter"), "0/chatter/*/*");
        assert_eq!(Distro::parse("humble").ok(), Some(Distro::Humble));
        assert_eq!(Distro::default(), Distro::Jazzy);
        let e = Distro::parse("iron").expect_err("refused").to_string();
        assert!(
            e.contains("--ros2-distro iron") && e.contains("humble"),
            "{e}"
        );
    }
}
