//! ROS 2 over DDS/RTPS (ROS 2's default middleware), through the `ros2-client` crate and
//! its RustDDS backend: the node, its subscriptions and publishers are DDS entities that
//! Fast DDS (rclpy's `rmw_fastrtps_cpp`) discovers and matches. QoS: reliable, volatile,
//! keep last 10 (rclpy's default profile; a volatile subscription also matches a latched
//! publisher).
//!
//! `ros2-client` speaks serde types; coolgp has its own CDR, so messages cross as raw bytes
//! ([`RawCdr`]): a body serialized as a tuple of `u8` (no length, no alignment) goes out as
//! is after RustDDS's little-endian encapsulation header, and a received body is read back
//! byte by byte and given that header again. Big-endian senders are therefore not read
//! (ROS 2 publishers on x86 and ARM write little endian).

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

use super::{now_ns, Feed, Ros2Settings, DIAGNOSTICS_TOPIC};
use crate::error::{NodeError, Result};

/// The little-endian CDR encapsulation header.
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

/// Reads a received body back into a [`RawCdr`].
#[derive(Clone, Copy)]
struct RawCdrSeed;

impl<'de> DeserializeSeed<'de> for RawCdrSeed {
    type Value = RawCdr;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<RawCdr, D::Error> {
        struct Bytes;
        impl<'de> Visitor<'de> for Bytes {
            type Value = RawCdr;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a CDR body")
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<RawCdr, A::Error> {
                let mut v = CDR_LE.to_vec();
                // The body ends where the sample does (the read fails there).
                while let Ok(Some(b)) = seq.next_element::<u8>() {
                    v.push(b);
                }
                Ok(RawCdr(v))
            }
        }
        d.deserialize_tuple(usize::MAX, Bytes)
    }
}

fn dds_err(what: &str, e: impl fmt::Debug) -> NodeError {
    NodeError::Config(format!("DDS: {what}: {e:?}"))
}

/// A fully qualified topic as a `ros2-client` name (namespace, base).
fn name(topic: &str) -> Result<Name> {
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

/// The DDS side of a node.
pub struct DdsSide {
    node: Node,
    map: Option<Publisher<RawCdr>>,
    diagnostics: Publisher<RawCdr>,
    stop: Arc<AtomicBool>,
    poller: Option<std::thread::JoinHandle<()>>,
}

impl DdsSide {
    /// Joins DDS domain `s.domain` as node `s.node_name` in `s.namespace`, with its
    /// subscriptions (polled on a thread, into `feed`) and publishers.
    ///
    /// # Errors
    /// [`NodeError::Config`] naming what DDS refused.
    pub(super) fn open(s: &Ros2Settings, feed: Option<Arc<Feed>>) -> Result<Self> {
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
        let mut subs: Vec<(String, Subscription<RawCdr>)> = Vec::new();
        if let (Some(spec), Some(_)) = (&s.live, &feed) {
            for (bare, ty) in spec.topics() {
                let topic = format!("/{bare}");
                let t = node
                    .create_topic(&name(&topic)?, type_name(ty.name), &q)
                    .map_err(|e| dds_err(&format!("topic {topic}"), e))?;
                let sub = node
                    .create_subscription::<RawCdr>(&t, Some(q.clone()))
                    .map_err(|e| dds_err(&format!("subscription {topic}"), e))?;
                subs.push((topic, sub));
            }
        }
        let mut publisher = |topic: &str, ty: &str| -> Result<Publisher<RawCdr>> {
            let t = node
                .create_topic(&name(topic)?, type_name(ty), &q)
                .map_err(|e| dds_err(&format!("topic {topic}"), e))?;
            node.create_publisher::<RawCdr>(&t, Some(q.clone()))
                .map_err(|e| dds_err(&format!("publisher {topic}"), e))
        };
        let map = match &s.map {
            Some(_) => Some(publisher(&s.map_topic, "sensor_msgs/msg/PointCloud2")?),
            None => None,
        };
        let diagnostics = publisher(DIAGNOSTICS_TOPIC, "diagnostic_msgs/msg/DiagnosticArray")?;
        let stop = Arc::new(AtomicBool::new(false));
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
        if let Some(p) = self.poller.take() {
            let _ = p.join();
        }
        drop(self.node);
    }
}

/// Takes every subscription's samples into `feed` until `stop`.
fn poll(subs: &[(String, Subscription<RawCdr>)], feed: &Feed, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        for (topic, sub) in subs {
            while let Ok(Some((raw, info))) = sub.take_seed(RawCdrSeed) {
                let sent = info
                    .source_timestamp()
                    .map_or_else(now_ns, |t| t.to_nanos());
                feed.push(topic, &raw.0, sent);
            }
        }
        std::thread::sleep(POLL);
    }
}
