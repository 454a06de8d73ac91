//! The node as a ROS 2 participant (docs/ROS2.md): it subscribes to the topics
//! `--ros2-input` and `--ros2-target` name, pairs their messages into rows
//! ([`coolgp_ros2::RowAssembler`]) for the agent, and publishes its map (`PointCloud2` or `GridMap`,
//! `--ros2-map-format`) and health (`DiagnosticArray`), over one of two middlewares:
//!
//! - [`zenoh`]: rmw_zenoh's conventions (keys, attachments, liveliness tokens) on a zenoh
//!   session of its own (the robots' router, not the fleet's);
//! - `dds` (cargo feature `dds`): DDS/RTPS, ROS 2's default, through the `ros2-client` crate
//!   (RustDDS), interoperating with Fast DDS.
//!
//! Either way the node, its subscriptions and its publishers appear in the ROS 2 graph
//! (`ros2 node list`, `ros2 topic info`), and what arrives goes through one [`Feed`].

#[cfg(feature = "dds")]
mod dds;
#[cfg(feature = "dds")]
mod dds_service;
pub mod zenoh;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use coolgp_ros2::{CdrError, RowAssembler, RowSpec};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::config::ZenohArgs;
use crate::error::{NodeError, Result};
use crate::stream::Item;

/// rmw_zenoh's default router endpoint.
pub const DEFAULT_ROUTER: &str = "tcp/127.0.0.1:7447";
/// The standard diagnostics topic.
pub const DIAGNOSTICS_TOPIC: &str = "/diagnostics";
/// The map topic when `--ros2-map-topic` is not given (relative: under the namespace).
pub const DEFAULT_MAP_TOPIC: &str = "coolgp/map";

/// The ROS 2 middleware a node speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Middleware {
    /// rmw_zenoh.
    Zenoh,
    /// DDS/RTPS (Fast DDS's wire protocol), cargo feature `dds`.
    Dds,
}

/// The durability of the map publisher (`--ros2-map-durability`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MapDurability {
    /// Volatile, keep last 10 (rclpy's default): a subscriber gets the maps published after
    /// it joined.
    #[default]
    Volatile,
    /// Transient local, keep last 1 (latched): a transient-local subscriber that joins late
    /// gets the latest map at once. Over DDS the publisher's QoS; over rmw_zenoh what
    /// rmw_zenoh does (a cache queryable and a liveliness token of zenoh-ext's advanced
    /// publisher).
    TransientLocal,
}

impl MapDurability {
    /// `volatile` or `transient-local`, as the flag spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            MapDurability::Volatile => "volatile",
            MapDurability::TransientLocal => "transient-local",
        }
    }
}

/// Validated ROS 2 settings of a node.
#[derive(Clone, Debug)]
pub struct Ros2Settings {
    /// The middleware.
    pub middleware: Middleware,
    /// ROS domain id.
    pub domain: u32,
    /// Node namespace (`/` or `/robot1`).
    pub namespace: String,
    /// Node name.
    pub node_name: String,
    /// rmw_zenoh: the zenoh endpoints of the ROS 2 session (connect, listen).
    pub zenoh: ZenohArgs,
    /// rmw_zenoh: whose keys and tokens the node writes (`--ros2-distro`; it reads both).
    pub distro: coolgp_ros2::rmw_zenoh::Distro,
    /// DDS: discover and talk on the loopback interface only.
    pub localhost_only: bool,
    /// Live topics to learn from (None: the data come from elsewhere).
    pub live: Option<RowSpec>,
    /// The map grid, as given (parsed against the inputs when the data are open).
    pub map: Option<String>,
    /// Seconds between maps (and diagnostics).
    pub every: f64,
    /// The map topic, fully qualified.
    pub map_topic: String,
    /// The map shows the fleet query (else this node's own answer).
    pub map_fleet: bool,
    /// The map publisher's durability.
    pub map_durability: MapDurability,
    /// The map's message type (`--ros2-map-format`).
    pub map_format: coolgp_ros2::grid_map::MapFormat,
    /// The point-query service's fully qualified name (`--ros2-query-service`), if served.
    pub query_service: Option<String>,
}

/// What the ROS 2 link reports in the node's status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ros2Status {
    /// The middleware: `zenoh` or `dds`.
    #[serde(default)]
    pub middleware: String,
    /// The node's fully qualified name.
    pub node: String,
    /// Domain id.
    pub domain: u32,
    /// Messages on the named topics.
    pub messages: u64,
    /// Rows paired and handed to the agent.
    pub rows: u64,
    /// Rows dropped because the agent's queue was full.
    pub rows_dropped: u64,
    /// Undecodable messages.
    pub bad_cdr: u64,
    /// Messages with a NaN or infinite field.
    pub non_finite: u64,
    /// Messages older than their topic's previous one.
    pub stamp_backwards: u64,
    /// Input messages without a target within the tolerance.
    pub unpaired_inputs: u64,
    /// Target messages without inputs within the tolerance.
    pub unpaired_targets: u64,
    /// Messages on a named topic with another type.
    pub wrong_type: u64,
    /// Messages per topic.
    pub per_topic: Vec<(String, u64)>,
    /// Maps published.
    pub maps: u64,
    /// Milliseconds the last map took to compute.
    pub last_map_ms: Option<f64>,
    /// Diagnostics published.
    pub diagnostics: u64,
    /// Point-query service calls answered (`--ros2-query-service`).
    #[serde(default)]
    pub service_calls: u64,
    /// Service requests refused with an error reply: not a request of the service's type,
    /// without rmw_zenoh's attachment, or the queue full.
    #[serde(default)]
    pub service_refused: u64,
}

/// The point-query service's counts, shared by the middleware's handlers.
#[derive(Debug, Default)]
pub struct ServiceCounts {
    /// Calls answered.
    pub answered: AtomicU64,
    /// Requests refused.
    pub refused: AtomicU64,
}

pub(crate) fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// How long a live stream must stay quiet before the targets still waiting for a partner are
/// decided without one ([`Feed::flush_if_quiet`]).
pub const FLUSH_QUIET: std::time::Duration = std::time::Duration::from_secs(1);

/// Live messages into the agent: the assembler every subscription feeds, the agent's row
/// queue, and what was handed over or dropped. Shared by the middleware's callbacks or
/// threads; never blocks them (a full queue drops the row, counted).
pub struct Feed {
    asm: Mutex<RowAssembler>,
    tx: mpsc::Sender<Item>,
    rows: AtomicU64,
    dropped: AtomicU64,
    /// The message count at the last look, and when it last changed.
    seen_at_flush: Mutex<(u64, std::time::Instant)>,
    /// A message the middleware refused was reported in the log.
    warned_refusal: AtomicBool,
    /// The representations other than plain CDR reported in the log (each once).
    representations: Mutex<Vec<u8>>,
}

impl Feed {
    /// A feed of the rows of `spec` into `tx`.
    ///
    /// # Errors
    /// [`NodeError::Config`] if the spec's fields cannot be extracted.
    pub fn new(spec: &RowSpec, tx: mpsc::Sender<Item>) -> Result<Self> {
        Ok(Self {
            asm: Mutex::new(RowAssembler::new(spec).map_err(|e| NodeError::Config(e.to_string()))?),
            tx,
            rows: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            seen_at_flush: Mutex::new((0, std::time::Instant::now())),
            warned_refusal: AtomicBool::new(false),
            representations: Mutex::new(Vec::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RowAssembler> {
        self.asm.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One message of `topic` sent at `sent_ns`; its rows go to the agent. A message in
    /// another representation than plain CDR (XCDR2, parameter lists) is counted as bad CDR;
    /// the first of each representation is reported in the log, naming what is read.
    pub fn push(&self, topic: &str, payload: &[u8], sent_ns: i64) {
        // A representation id (its first byte 0) other than plain CDR's; other bytes are
        // garbage, counted alike but not worth a line each.
        if let [0, id @ (2..), ..] = payload {
            let mut seen = self
                .representations
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if !seen.contains(id) {
                seen.push(*id);
                let e = CdrError::Encapsulation([0, *id]);
                tracing::warn!(topic, error = %e, "a ROS 2 message refused (counted as bad_cdr)");
            }
        }
        let mut a = self.lock();
        a.push(topic, payload, sent_ns as f64 * 1e-9);
        self.forward(&mut a);
    }

    /// A message of `topic` the middleware could not read (`why`), e.g. DDS's refusal of a
    /// representation other than plain CDR: counted as bad CDR, the first reported in the log.
    pub fn refused(&self, topic: &str, why: &str) {
        if !self.warned_refusal.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                topic,
                error = why,
                "a ROS 2 message refused (counted as bad_cdr); coolgp reads plain CDR (XCDR1), \
                 CDR_LE or CDR_BE"
            );
        }
        self.push(topic, &[], now_ns());
    }

    /// A message on a named topic with another type.
    pub fn wrong_type(&self) {
        self.lock().count_wrong_type();
    }

    fn forward(&self, a: &mut RowAssembler) {
        while let Some(row) = a.pop() {
            let end = self.rows.fetch_add(1, Ordering::Relaxed) + 1;
            let item = Item::Row {
                x: row.x,
                y: row.y,
                end,
            };
            if self.tx.try_send(item).is_err() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// If no message arrived for [`FLUSH_QUIET`], decides the targets still waiting for a
    /// partner (the last rows of a burst) and hands their rows to the agent, which absorbs
    /// its partial block. (Flushing after one quiet map period, 0.3 s in a test, left a pair
    /// unpaired when a loaded machine delayed its second message by that much.)
    pub fn flush_if_quiet(&self) {
        let mut a = self.lock();
        let seen = a.counts().messages;
        let quiet = {
            let mut last = self
                .seen_at_flush
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if last.0 != seen {
                *last = (seen, std::time::Instant::now());
            }
            last.1.elapsed() >= FLUSH_QUIET
        };
        if quiet {
            a.flush();
            self.forward(&mut a);
            let _ = self.tx.try_send(Item::Idle);
        }
    }

    /// The counts into `st`.
    fn report(&self, st: &mut Ros2Status) {
        let c = self.lock().counts().clone();
        st.messages = c.messages;
        st.bad_cdr = c.bad_cdr;
        st.non_finite = c.non_finite;
        st.stamp_backwards = c.stamp_backwards;
        st.unpaired_inputs = c.unpaired_inputs;
        st.unpaired_targets = c.unpaired_targets;
        st.wrong_type = c.wrong_type;
        st.per_topic = c.per_topic;
        st.rows = self.rows.load(Ordering::Relaxed);
        st.rows_dropped = self.dropped.load(Ordering::Relaxed);
    }
}

/// The most point-query calls waiting for the node at once; more are refused as busy.
pub const CALL_QUEUE: usize = 64;

/// One point-query call of a ROS 2 client (`--ros2-query-service`): its request's names (one
/// point each, [`coolgp_ros2::service`]); the answers, one per name, go back on `reply`, and
/// the middleware sends them to the client as its response.
#[derive(Debug)]
pub struct ServiceCall {
    /// The request's names, in order.
    pub names: Vec<String>,
    /// Where the answers go.
    pub reply: tokio::sync::oneshot::Sender<Vec<coolgp_ros2::service::Answer>>,
}

/// Where a service's calls go: the node's queue and the counts.
pub(crate) type CallSink = (mpsc::Sender<ServiceCall>, Arc<ServiceCounts>);

/// The middleware's side of a link.
enum Backend {
    Zenoh(Box<zenoh::ZenohSide>),
    #[cfg(feature = "dds")]
    Dds(Box<dds::DdsSide>),
}

/// The node's ROS 2 side: the middleware, the live feed and the counters.
pub struct Ros2Link {
    backend: Backend,
    feed: Option<Arc<Feed>>,
    /// Counters reported in the status (the feed's are folded in by [`Ros2Link::status`]).
    pub status: Ros2Status,
    /// The message type the map is published as.
    pub map_format: coolgp_ros2::grid_map::MapFormat,
    /// The point-query calls, until the node takes them ([`Ros2Link::take_calls`]).
    calls: Option<mpsc::Receiver<ServiceCall>>,
    /// The service's counts.
    service: Arc<ServiceCounts>,
}

impl Ros2Link {
    /// Joins the ROS 2 graph as `s` says: the node, its subscriptions (feeding `tx`, the
    /// agent's row queue, for live topics) and its publishers.
    ///
    /// # Errors
    /// [`NodeError::Zenoh`] or [`NodeError::Config`] if the middleware refuses; DDS in a
    /// build without the `dds` feature.
    pub async fn open(s: &Ros2Settings, tx: Option<mpsc::Sender<Item>>) -> Result<Self> {
        let feed = match (&s.live, tx) {
            (Some(spec), Some(tx)) => Some(Arc::new(Feed::new(spec, tx)?)),
            _ => None,
        };
        let service = Arc::new(ServiceCounts::default());
        let (call_tx, calls) = match &s.query_service {
            Some(_) => {
                let (tx, rx) = mpsc::channel(CALL_QUEUE);
                (Some((tx, Arc::clone(&service))), Some(rx))
            }
            None => (None, None),
        };
        let backend = match s.middleware {
            Middleware::Zenoh => Backend::Zenoh(Box::new(
                zenoh::ZenohSide::open(s, feed.clone(), call_tx).await?,
            )),
            #[cfg(feature = "dds")]
            Middleware::Dds => {
                Backend::Dds(Box::new(dds::DdsSide::open(s, feed.clone(), call_tx)?))
            }
            #[cfg(not(feature = "dds"))]
            Middleware::Dds => {
                return Err(NodeError::Config(
                    "--ros2 dds: this binary was built without DDS; rebuild with \
                     `cargo build --release --features dds` (or use --ros2 zenoh)"
                        .into(),
                ))
            }
        };
        let node = coolgp_ros2::rmw_zenoh::resolve(&s.namespace, &s.node_name);
        let middleware = match s.middleware {
            Middleware::Zenoh => "zenoh",
            Middleware::Dds => "dds",
        };
        tracing::info!(
            middleware,
            distro = (s.middleware == Middleware::Zenoh).then_some(s.distro.as_str()),
            domain = s.domain,
            node = %node,
            topics = s.live.as_ref().map_or(0, |l| l.topics().len()),
            map = s.map.as_ref().map(|_| s.map_topic.as_str()),
            map_durability = s.map_durability.as_str(),
            map_format = s.map_format.as_str(),
            query_service = s.query_service.as_deref(),
            "ROS 2 node up"
        );
        Ok(Self {
            backend,
            feed,
            calls,
            service,
            map_format: s.map_format,
            status: Ros2Status {
                middleware: middleware.into(),
                node,
                domain: s.domain,
                ..Ros2Status::default()
            },
        })
    }

    /// The point-query calls (`--ros2-query-service`), once: the node's loop answers them.
    pub fn take_calls(&mut self) -> Option<mpsc::Receiver<ServiceCall>> {
        self.calls.take()
    }

    /// The status with the feed's counts folded in.
    pub fn status(&self) -> Ros2Status {
        let mut st = self.status.clone();
        if let Some(f) = &self.feed {
            f.report(&mut st);
        }
        st.service_calls = self.service.answered.load(Ordering::Relaxed);
        st.service_refused = self.service.refused.load(Ordering::Relaxed);
        st
    }

    /// See [`Feed::flush_if_quiet`].
    pub fn flush_if_quiet(&self) {
        if let Some(f) = &self.feed {
            f.flush_if_quiet();
        }
    }

    /// Publishes a map (bytes of the type [`Ros2Settings::map_format`] names), if the node
    /// maps.
    ///
    /// # Errors
    /// [`NodeError::Zenoh`] / [`NodeError::Config`] if the middleware refuses the message.
    pub async fn publish_map(&mut self, bytes: Vec<u8>) -> Result<()> {
        let sent = match &mut self.backend {
            Backend::Zenoh(z) => z.publish_map(bytes).await?,
            #[cfg(feature = "dds")]
            Backend::Dds(d) => d.publish_map(bytes)?,
        };
        if sent {
            self.status.maps += 1;
        }
        Ok(())
    }

    /// Publishes the health (DiagnosticArray bytes).
    ///
    /// # Errors
    /// As [`Ros2Link::publish_map`].
    pub async fn publish_diagnostics(&mut self, bytes: Vec<u8>) -> Result<()> {
        match &mut self.backend {
            Backend::Zenoh(z) => z.publish_diagnostics(bytes).await?,
            #[cfg(feature = "dds")]
            Backend::Dds(d) => d.publish_diagnostics(bytes)?,
        }
        self.status.diagnostics += 1;
        Ok(())
    }

    /// Leaves the graph.
    pub async fn close(self) {
        match self.backend {
            Backend::Zenoh(z) => (*z).close().await,
            #[cfg(feature = "dds")]
            Backend::Dds(d) => (*d).close(),
        }
    }
}
