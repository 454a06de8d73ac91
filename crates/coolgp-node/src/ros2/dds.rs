//! ROS 2 over DDS/RTPS (ROS 2's default middleware), through the `ros2-client` crate and
//! its RustDDS backend: the node, its subscriptions and publishers are DDS entities that
//! Fast DDS (rclpy's `rmw_fastrtps_cpp`) discovers and matches. QoS: reliable, volatile,
//! keep last 10 (rclpy's default profile); the map publisher transient local, keep last 1
//! with `--ros2-map-durability transient-local` (RustDDS then hands its last map to a
//! transient-local reader that matches later).
//!
//! `ros2-client` speaks serde types; coolgp has its own CDR, so messages cross as bytes
//! ([`RawCdr`]). Out: a body serialized as a tuple of `u8` (no length, no alignment) goes
//! out as is after RustDDS's little-endian encapsulation header. In: RustDDS reads the
//! sample's representation identifier and deserializes in that byte order (CDR_LE or CDR_BE;
//! it refuses XCDR2 and the rest, counted as bad CDR), so [`TypedSeed`] reads each field of
//! the subscribed type with its own width, which RustDDS byte-swaps as needed, and writes it
//! back as little-endian CDR: big-endian publishers are read like any other.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ros2_client::dds::rustdds::DomainParticipantBuilder;
use ros2_client::dds::{Context, ContextOptions, Node, Publisher, Subscription};
use ros2_client::qos::{Durability, History, Reliability, WhenFull};
use ros2_client::{MessageTypeName, Name, NodeName, NodeOptions, QosProfile};
use serde::de::{DeserializeSeed, Deserializer, SeqAccess, Visitor};
use serde::ser::SerializeTuple;
use serde::{Serialize, Serializer};

use coolgp_ros2::cdr::CdrWriter;
use coolgp_ros2::types::{MsgType, Prim};

use super::{now_ns, Feed, MapDurability, Ros2Settings, DIAGNOSTICS_TOPIC};
use crate::error::{NodeError, Result};

/// The little-endian CDR encapsulation header (RustDDS writes its own).
const CDR_LE: [u8; 4] = [0, 1, 0, 0];
/// How often the subscriptions are polled.
const POLL: Duration = Duration::from_millis(2);

/// A whole serialized message: encapsulation header and body.
#[derive(Clone)]
pub struct RawCdr(pub Vec<u8>);

impl fmt::Debug for RawCdr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawCdr({} bytes)", self.0.len())
    }
}

impl Serialize for RawCdr {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let body = self.0.get(CDR_LE.len()..).unwrap_or_default();
        let mut t = s.serialize_tuple(body.len())?;
        for b in body {
            t.serialize_element(b)?;
        }
        t.end()
    }
}

/// Reads a received sample of a type with these leaves (in wire order), in the byte order
/// RustDDS deserializes it in, into a little-endian [`RawCdr`]: each number read with its own
/// width (so RustDDS swaps its bytes if the sender was big endian) and written back with the
/// same bits, each string's bytes as sent. A sample that ends early stops the copy there; the
/// assembler then counts it as bad CDR if it needed what is missing, as for any sender.
#[derive(Clone)]
struct TypedSeed {
    prims: Arc<[Prim]>,
}

impl TypedSeed {
    /// The seed of messages of type `ty`.
    fn new(ty: &MsgType) -> Result<Self> {
        let leaves = coolgp_ros2::extract::leaves(ty)
            .map_err(|e| NodeError::Config(format!("DDS: {}: {e}", ty.name)))?;
        Ok(Self {
            prims: leaves.iter().map(|l| l.prim).collect(),
        })
    }
}

impl<'de> DeserializeSeed<'de> for TypedSeed {
    type Value = RawCdr;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<RawCdr, D::Error> {
        let len = self.prims.len();
        d.deserialize_tuple(len, self)
    }
}

impl<'de> Visitor<'de> for TypedSeed {
    type Value = RawCdr;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a CDR message")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<RawCdr, A::Error> {
        let mut w = CdrWriter::with_capacity(64 + 8 * self.prims.len());
        for &p in self.prims.iter() {
            let bits = match p.size() {
                _ if p == Prim::String => match seq.next_element_seed(StringBytes) {
                    Ok(Some(s)) => {
                        w.u32(u32::try_from(s.len()).unwrap_or(u32::MAX));
                        w.raw(&s);
                        continue;
                    }
                    _ => break,
                },
                1 => seq.next_element::<u8>().map(|v| v.map(u64::from)),
                2 => seq.next_element::<u16>().map(|v| v.map(u64::from)),
                4 => seq.next_element::<u32>().map(|v| v.map(u64::from)),
                _ => seq.next_element::<u64>(),
            };
            match bits {
                Ok(Some(v)) => w.bits(p.size(), v),
                _ => break,
            }
        }
        Ok(RawCdr(w.finish()))
    }
}

/// A CDR string's bytes as sent (length counting the NUL, then the bytes and the NUL): read
/// as a byte sequence, which has the same layout, so the assembler checks NUL and UTF-8.
struct StringBytes;

impl<'de> DeserializeSeed<'de> for StringBytes {
    type Value = Vec<u8>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Vec<u8>, D::Error> {
        d.deserialize_bytes(self)
    }
}

impl<'de> Visitor<'de> for StringBytes {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a CDR string")
    }

    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> std::result::Result<Vec<u8>, E> {
        Ok(v.to_vec())
    }
}

fn dds_err(what: &str, e: impl fmt::Debug) -> NodeError {
    NodeError::Config(format!("DDS: {what}: {e:?}"))
}

/// A fully qualified topic (or service) as a `ros2-client` name (namespace, base).
pub(super) fn name(topic: &str) -> Result<Name> {
    let (ns, base) = topic.rsplit_once('/').unwrap_or(("", topic));
    let ns = if ns.is_empty() { "/" } else { ns };
    Name::new(ns, base).map_err(|e| dds_err(&format!("topic name {topic}"), e))
}

/// `pkg/msg/Name` as a `ros2-client` type name.
fn type_name(ty: &str) -> MessageTypeName {
    let pkg = ty.split('/').next().unwrap_or_default();
    let short = ty.rsplit('/').next().unwrap_or_default();
    MessageTypeName::new(pkg, short)
}

/// rclpy's default profile: reliable, volatile, keep last 10.
fn qos() -> QosProfile {
    QosProfile::publisher_default()
        .reliability(Reliability::Reliable {
            when_full: WhenFull::DEFAULT,
        })
        .durability(Durability::Volatile)
        .history(History::KeepLast { depth: 10 })
}

/// The map publisher's profile: rclpy's default, or latched (transient local, keep last 1).
fn map_qos(durability: MapDurability) -> QosProfile {
    match durability {
        MapDurability::Volatile => qos(),
        MapDurability::TransientLocal => qos()
            .durability(Durability::TransientLocal)
            .history(History::KeepLast { depth: 1 }),
    }
}

/// The DDS side of a node.
pub struct DdsSide {
    node: Node,
    map: Option<Publisher<RawCdr>>,
    diagnostics: Publisher<RawCdr>,
    stop: Arc<AtomicBool>,
    poller: Option<std::thread::JoinHandle<()>>,
    server: Option<std::thread::JoinHandle<()>>,
}

impl DdsSide {
    /// Joins DDS domain `s.domain` as node `s.node_name` in `s.namespace`, with its
    /// subscriptions (polled on a thread, into `feed`), publishers and query service (its
    /// calls into `calls`, [`super::dds_service`]).
    ///
    /// # Errors
    /// [`NodeError::Config`] naming what DDS refused.
    pub(super) fn open(
        s: &Ros2Settings,
        feed: Option<Arc<Feed>>,
        calls: Option<super::CallSink>,
    ) -> Result<Self> {
        let domain = u16::try_from(s.domain).map_err(|e| dds_err("domain id", e))?;
        let context = if s.localhost_only {
            let dp = DomainParticipantBuilder::new(domain)
                .with_only_networks([std::net::Ipv4Addr::LOCALHOST])
                .build()
                .map_err(|e| dds_err("domain participant", e))?;
            Context::from_domain_participant(dp)
        } else {
            Context::with_options(ContextOptions::new().domain_id(domain))
        }
        .map_err(|e| dds_err("context", e))?;
        let node_name =
            NodeName::new(&s.namespace, &s.node_name).map_err(|e| dds_err("node name", e))?;
        let mut node = context
            .new_node(node_name, NodeOptions::new().enable_rosout(true))
            .map_err(|e| dds_err("node", e))?;
        // The spinner answers the graph (ros_discovery_info) and parameter requests.
        let spinner = node.spinner().map_err(|e| dds_err("spinner", e))?;
        std::thread::Builder::new()
            .name("coolgp-dds-spin".into())
            .spawn(move || {
                if let Err(e) = futures::executor::block_on(spinner.spin()) {
                    tracing::warn!(error = ?e, "the DDS spinner stopped");
                }
            })
            .map_err(|e| dds_err("spinner thread", e))?;
        let q = qos();
        let mut subs: Vec<Sub> = Vec::new();
        if let (Some(spec), Some(_)) = (&s.live, &feed) {
            for (bare, ty) in spec.topics() {
                let topic = format!("/{bare}");
                let t = node
                    .create_topic(&name(&topic)?, type_name(ty.name), &q)
                    .map_err(|e| dds_err(&format!("topic {topic}"), e))?;
                let sub = node
                    .create_subscription::<RawCdr>(&t, Some(q.clone()))
                    .map_err(|e| dds_err(&format!("subscription {topic}"), e))?;
                subs.push((topic, sub, TypedSeed::new(ty)?));
            }
        }
        let mut publisher = |topic: &str, ty: &str, q: QosProfile| -> Result<Publisher<RawCdr>> {
            let t = node
                .create_topic(&name(topic)?, type_name(ty), &q)
                .map_err(|e| dds_err(&format!("topic {topic}"), e))?;
            node.create_publisher::<RawCdr>(&t, Some(q))
                .map_err(|e| dds_err(&format!("publisher {topic}"), e))
        };
        let map = match &s.map {
            Some(_) => Some(publisher(
                &s.map_topic,
                s.map_format.type_name(),
                map_qos(s.map_durability),
            )?),
            None => None,
        };
        let diagnostics = publisher(
            DIAGNOSTICS_TOPIC,
            "diagnostic_msgs/msg/DiagnosticArray",
            q.clone(),
        )?;
        let stop = Arc::new(AtomicBool::new(false));
        let server = match (&s.query_service, calls) {
            (Some(service), Some(sink)) => {
                let srv = super::dds_service::declare(&mut node, service, q.clone())?;
                let stop = Arc::clone(&stop);
                Some(
                    std::thread::Builder::new()
                        .name("coolgp-dds-service".into())
                        .spawn(move || super::dds_service::serve(srv, sink, &stop, POLL))
                        .map_err(|e| dds_err("service thread", e))?,
                )
            }
            _ => None,
        };
        let poller = match feed {
            Some(feed) if !subs.is_empty() => {
                let stop = Arc::clone(&stop);
                Some(
                    std::thread::Builder::new()
                        .name("coolgp-dds-take".into())
                        .spawn(move || poll(&subs, &feed, &stop))
                        .map_err(|e| dds_err("subscription thread", e))?,
                )
            }
            _ => None,
        };
        Ok(Self {
            node,
            map,
            diagnostics,
            stop,
            poller,
            server,
        })
    }

    /// Publishes a map; false if the node has no map publisher.
    pub(super) fn publish_map(&mut self, bytes: Vec<u8>) -> Result<bool> {
        match &self.map {
            Some(p) => p
                .publish(RawCdr(bytes))
                .map(|()| true)
                .map_err(|e| dds_err("publishing the map", e)),
            None => Ok(false),
        }
    }

    pub(super) fn publish_diagnostics(&mut self, bytes: Vec<u8>) -> Result<()> {
        self.diagnostics
            .publish(RawCdr(bytes))
            .map_err(|e| dds_err("publishing diagnostics", e))
    }

    pub(super) fn close(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in [self.poller.take(), self.server.take()]
            .into_iter()
            .flatten()
        {
            let _ = t.join();
        }
        drop(self.node);
    }
}

/// A subscription: its topic, its reader and the seed of its type.
type Sub = (String, Subscription<RawCdr>, TypedSeed);

/// Most samples taken from one subscription per poll (a reader that keeps failing cannot
/// hold the loop).
const MAX_TAKE: usize = 4096;

/// Takes every subscription's samples into `feed` until `stop`. A sample RustDDS cannot
/// deserialize (another representation than plain CDR) is consumed and counted as bad CDR.
fn poll(subs: &[Sub], feed: &Feed, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        for (topic, sub, seed) in subs {
            for _ in 0..MAX_TAKE {
                match sub.take_seed(seed.clone()) {
                    Ok(Some((raw, info))) => {
                        let sent = info
                            .source_timestamp()
                            .map_or_else(now_ns, |t| t.to_nanos());
                        feed.push(topic, &raw.0, sent);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        // The next samples wait for the next poll: a failure that is not
                        // the sample's cannot spin here.
                        feed.refused(topic, &format!("{e:?}"));
                        break;
                    }
                }
            }
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coolgp_ros2::cdr::Endian;
    use coolgp_ros2::extract::{encode_with, leaves};
    use coolgp_ros2::types::{input_type, INPUT_TYPES};
    use ros2_client::dds::rustdds::serialization::deserialize_from_cdr_with_decoder_and_rep_id;
    use ros2_client::dds::rustdds::RepresentationIdentifier;

    /// What `take_seed` does with a sample: RustDDS strips the header and deserializes the
    /// body in the byte order its representation identifier names.
    fn receive(ty: &MsgType, msg: &[u8]) -> Vec<u8> {
        let rep = match msg[..2] {
            [0, 0] => RepresentationIdentifier::CDR_BE,
            _ => RepresentationIdentifier::CDR_LE,
        };
        let seed = TypedSeed::new(ty).expect("seed");
        deserialize_from_cdr_with_decoder_and_rep_id(&msg[4..], rep, seed)
            .expect("deserialize")
            .0
             .0
    }

    #[test]
    fn big_endian_samples_arrive_as_the_little_endian_ones() {
        for name in INPUT_TYPES {
            let ty = input_type(name).expect("type");
            let values: Vec<(String, f64)> = leaves(ty)
                .expect("leaves")
                .into_iter()
                .filter(|l| l.prim != Prim::String)
                .enumerate()
                .map(|(i, l)| (l.path, 3.0 + i as f64 * 257.0))
                .collect();
            let values: Vec<(&str, f64)> = values.iter().map(|(p, v)| (p.as_str(), *v)).collect();
            let stamp = 1_700_000_000_123_456_789;
            let le = encode_with(Endian::Little, ty, stamp, "frame_é", &values).expect("le");
            let be = encode_with(Endian::Big, ty, stamp, "frame_é", &values).expect("be");
            assert_ne!(le[4..], be[4..], "{name}");
            assert_eq!(receive(ty, &le), le, "{name}: little endian unchanged");
            assert_eq!(receive(ty, &be), le, "{name}: big endian as little endian");
        }
    }

    #[test]
    fn a_sample_cut_short_is_copied_up_to_the_cut() {
        let ty = input_type("sensor_msgs/msg/NavSatFix").expect("type");
        let values = [("latitude", 48.1), ("longitude", 11.5)];
        let le = encode_with(Endian::Little, ty, 5, "gps", &values).expect("le");
        let be = encode_with(Endian::Big, ty, 5, "gps", &values).expect("be");
        let cut = receive(ty, &be[..40]);
        assert!(cut.len() < le.len() && le.starts_with(&cut), "{cut:?}");
        assert_eq!(receive(ty, &be[..4]), [0, 1, 0, 0]);
    }

    #[test]
    fn the_latched_map_profile() {
        let latched = map_qos(MapDurability::TransientLocal);
        assert_eq!(latched.durability, Durability::TransientLocal);
        assert_eq!(latched.history, History::KeepLast { depth: 1 });
        let volatile = map_qos(MapDurability::Volatile);
        assert_eq!(volatile.durability, Durability::Volatile);
        assert_eq!(volatile.history, History::KeepLast { depth: 10 });
    }
}
