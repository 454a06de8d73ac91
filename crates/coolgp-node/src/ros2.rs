//! The node as a ROS 2 participant over rmw_zenoh (docs/ROS2.md): on its own zenoh session
//! (the robots' router, not the fleet's), it subscribes to the topics `--ros2-input` and
//! `--ros2-target` name, pairs their messages into rows ([`coolgp_ros2::RowAssembler`]),
//! and publishes its map (`PointCloud2`) and health (`DiagnosticArray`) with rmw_zenoh's
//! keys, attachments and liveliness tokens, so `ros2 node list` and `ros2 topic info` show
//! the node, its subscriptions and its publishers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use coolgp_ros2::assemble::Counts;
use coolgp_ros2::rmw_zenoh::{self as rz, Entity, Kind, Qos};
use coolgp_ros2::types::{lookup, MsgType};
use coolgp_ros2::{RowAssembler, RowSpec};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use zenoh::liveliness::LivelinessToken;
use zenoh::pubsub::{Publisher, Subscriber};
use zenoh::Session;

use crate::config::ZenohArgs;
use crate::error::{NodeError, Result};
use crate::stream::Item;
use crate::transport::{self, Role};

/// rmw_zenoh's default router endpoint.
pub const DEFAULT_ROUTER: &str = "tcp/127.0.0.1:7447";
/// The standard diagnostics topic.
pub const DIAGNOSTICS_TOPIC: &str = "/diagnostics";
/// The map topic when `--ros2-map-topic` is not given (relative: under the namespace).
pub const DEFAULT_MAP_TOPIC: &str = "coolgp/map";

/// Validated ROS 2 settings of a node.
#[derive(Clone, Debug)]
pub struct Ros2Settings {
    /// ROS domain id.
    pub domain: u32,
    /// Node namespace (`/` or `/robot1`).
    pub namespace: String,
    /// Node name.
    pub node_name: String,
    /// The zenoh endpoints of the ROS 2 session (connect, listen).
    pub zenoh: ZenohArgs,
    /// Live topics to learn from (None: the data come from elsewhere).
    pub live: Option<RowSpec>,
    /// The map grid, as given (parsed against the inputs when the data are open).
    pub map: Option<String>,
    /// Seconds between maps (and diagnostics).
    pub every: f64,
    /// The map topic, fully qualified.
    pub map_topic: String,
}

/// What the ROS 2 link reports in the node's status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ros2Status {
    /// Domain, node and namespace.
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
}

/// One rmw_zenoh publisher: its zenoh publisher, GID and sequence.
struct RosPublisher {
    publisher: Publisher<'static>,
    gid: [u8; 16],
    seq: i64,
    _token: LivelinessToken,
}

impl RosPublisher {
    async fn put(&mut self, bytes: Vec<u8>) -> Result<()> {
        self.seq += 1;
        let att = rz::attachment(self.seq, now_ns(), &self.gid);
        self.publisher
            .put(bytes)
            .attachment(att.to_vec())
            .await
            .map_err(|e| NodeError::zenoh("publishing a ROS 2 message", e))
    }
}

/// The node's ROS 2 side.
pub struct Ros2Link {
    session: Session,
    map: Option<RosPublisher>,
    diagnostics: RosPublisher,
    /// Live topics: the assembler the subscriptions feed and the agent's row queue.
    assembler: Option<(Arc<Mutex<RowAssembler>>, mpsc::Sender<Item>)>,
    /// Messages seen at the last [`Ros2Link::flush_if_quiet`].
    seen_at_flush: u64,
    dropped: Arc<AtomicU64>,
    rows: Arc<AtomicU64>,
    _subscribers: Vec<Subscriber<()>>,
    _tokens: Vec<LivelinessToken>,
    /// Counters reported in the status.
    pub status: Ros2Status,
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Entity numbering of one node: the node is 0, its endpoints 1, 2, …
struct Graph<'a> {
    s: &'a Ros2Settings,
    zid: String,
    next: u32,
}

impl Graph<'_> {
    fn entity(&mut self, kind: Kind, topic: Option<(&str, &MsgType, Qos)>) -> Entity {
        let entity_id = if kind == Kind::Node {
            0
        } else {
            self.next += 1;
            self.next
        };
        Entity {
            domain: self.s.domain,
            zid: self.zid.clone(),
            node_id: 0,
            entity_id,
            kind,
            enclave: "/".into(),
            namespace: self.s.namespace.clone(),
            node: self.s.node_name.clone(),
            topic: topic.map(|(t, ty, q)| {
                (
                    t.to_string(),
                    ty.dds_name(),
                    coolgp_ros2::hash::rihs01(ty),
                    q.field(),
                )
            }),
        }
    }
}

async fn token(session: &Session, e: &Entity) -> Result<LivelinessToken> {
    session
        .liveliness()
        .declare_token(e.token())
        .await
        .map_err(|err| NodeError::zenoh("declaring a ROS 2 liveliness token", err))
}

async fn publisher(
    session: &Session,
    graph: &mut Graph<'_>,
    topic: &str,
    ty: &'static MsgType,
) -> Result<RosPublisher> {
    let e = graph.entity(Kind::Publisher, Some((topic, ty, Qos::DEFAULT)));
    let tok = token(session, &e).await?;
    let p = session
        .declare_publisher(rz::topic_key(graph.s.domain, topic, ty))
        .congestion_control(zenoh::qos::CongestionControl::Drop)
        .await
        .map_err(|err| NodeError::zenoh("declaring a ROS 2 publisher", err))?;
    Ok(RosPublisher {
        publisher: p,
        gid: rz::gid(&e.token()),
        seq: 0,
        _token: tok,
    })
}

/// Hands the assembled rows to the agent's queue (never blocking a zenoh callback: a full
/// queue drops the row, counted).
fn forward(a: &mut RowAssembler, tx: &mpsc::Sender<Item>, rows: &AtomicU64, dropped: &AtomicU64) {
    while let Some(row) = a.pop() {
        let end = rows.fetch_add(1, Ordering::Relaxed) + 1;
        let item = Item::Row {
            x: row.x,
            y: row.y,
            end,
        };
        if tx.try_send(item).is_err() {
            dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Ros2Link {
    /// Opens the ROS 2 session, declares the node, its subscriptions (with `tx`, the agent's
    /// row queue, for live topics) and its publishers.
    ///
    /// # Errors
    /// [`NodeError::Zenoh`] if the session or a declaration fails.
    pub async fn open(s: &Ros2Settings, tx: Option<mpsc::Sender<Item>>) -> Result<Self> {
        let session = transport::open(&s.zenoh, Role::Client).await?;
        let zid = session.zid().to_string();
        let mut graph = Graph { s, zid, next: 0 };
        let mut tokens = vec![token(&session, &graph.entity(Kind::Node, None)).await?];
        let dropped = Arc::new(AtomicU64::new(0));
        let rows = Arc::new(AtomicU64::new(0));
        let mut subscribers = Vec::new();
        let mut assembler = None;
        if let (Some(spec), Some(tx)) = (&s.live, tx) {
            let asm = Arc::new(Mutex::new(
                RowAssembler::new(spec).map_err(|e| NodeError::Config(e.to_string()))?,
            ));
            for (bare, ty) in spec.topics() {
                let topic = format!("/{bare}");
                let e = graph.entity(Kind::Subscription, Some((&topic, ty, Qos::DEFAULT)));
                tokens.push(token(&session, &e).await?);
                let (asm, tx, dropped, rows) = (
                    Arc::clone(&asm),
                    tx.clone(),
                    Arc::clone(&dropped),
                    Arc::clone(&rows),
                );
                let want = ty.dds_name();
                let sub = session
                    .declare_subscriber(rz::topic_key_any(s.domain, &topic))
                    .callback(move |sample| {
                        let key = sample.key_expr().as_str();
                        let mut a = asm.lock().unwrap_or_else(|p| p.into_inner());
                        if key.rsplit('/').nth(1) != Some(want.as_str()) {
                            a.count_wrong_type();
                            return;
                        }
                        let sent_ns = sample
                            .attachment()
                            .and_then(|z| rz::parse_attachment(&z.to_bytes()))
                            .map_or_else(now_ns, |(_, ts, _)| ts);
                        let payload = sample.payload().to_bytes();
                        a.push(&topic, &payload, sent_ns as f64 * 1e-9);
                        forward(&mut a, &tx, &rows, &dropped);
                    })
                    .await
                    .map_err(|e| NodeError::zenoh("declaring a ROS 2 subscription", e))?;
                subscribers.push(sub);
            }
            assembler = Some((asm, tx));
        }
        let map = match &s.map {
            Some(_) => {
                let ty = lookup("sensor_msgs/msg/PointCloud2")
                    .ok_or_else(|| NodeError::Config("PointCloud2 is not a known type".into()))?;
                Some(publisher(&session, &mut graph, &s.map_topic, ty).await?)
            }
            None => None,
        };
        let diag_ty = lookup("diagnostic_msgs/msg/DiagnosticArray")
            .ok_or_else(|| NodeError::Config("DiagnosticArray is not a known type".into()))?;
        let diagnostics = publisher(&session, &mut graph, DIAGNOSTICS_TOPIC, diag_ty).await?;
        tracing::info!(
            domain = s.domain,
            node = %rz::resolve(&s.namespace, &s.node_name),
            topics = subscribers.len(),
            map = map.as_ref().map(|_| s.map_topic.as_str()),
            "ROS 2 node up (rmw_zenoh)"
        );
        Ok(Self {
            session,
            map,
            diagnostics,
            assembler,
            seen_at_flush: 0,
            dropped,
            rows,
            _subscribers: subscribers,
            _tokens: tokens,
            status: Ros2Status {
                node: rz::resolve(&s.namespace, &s.node_name),
                domain: s.domain,
                ..Ros2Status::default()
            },
        })
    }

    /// The status with the assembler's counts folded in.
    pub fn status(&self) -> Ros2Status {
        let mut st = self.status.clone();
        if let Some((a, _)) = &self.assembler {
            let c: Counts = a.lock().unwrap_or_else(|p| p.into_inner()).counts().clone();
            st.messages = c.messages;
            st.bad_cdr = c.bad_cdr;
            st.non_finite = c.non_finite;
            st.stamp_backwards = c.stamp_backwards;
            st.unpaired_inputs = c.unpaired_inputs;
            st.unpaired_targets = c.unpaired_targets;
            st.wrong_type = c.wrong_type;
            st.per_topic = c.per_topic;
        }
        st.rows = self.rows.load(Ordering::Relaxed);
        st.rows_dropped = self.dropped.load(Ordering::Relaxed);
        st
    }

    /// If no message arrived since the last call, decides the targets still waiting for a
    /// partner (the last rows of a burst) and hands their rows to the agent, which absorbs
    /// its partial block.
    pub fn flush_if_quiet(&mut self) {
        let Some((a, tx)) = &self.assembler else {
            return;
        };
        let mut a = a.lock().unwrap_or_else(|p| p.into_inner());
        let seen = a.counts().messages;
        if seen == self.seen_at_flush {
            a.flush();
            forward(&mut a, tx, &self.rows, &self.dropped);
            // The agent absorbs the rows of a partial block too.
            let _ = tx.try_send(Item::Idle);
        }
        self.seen_at_flush = seen;
    }

    /// Whether a map is published.
    pub fn maps(&self) -> bool {
        self.map.is_some()
    }

    /// Publishes a map (PointCloud2 bytes).
    ///
    /// # Errors
    /// [`NodeError::Zenoh`] if the put fails.
    pub async fn publish_map(&mut self, bytes: Vec<u8>) -> Result<()> {
        if let Some(p) = self.map.as_mut() {
            p.put(bytes).await?;
            self.status.maps += 1;
        }
        Ok(())
    }

    /// Publishes the health (DiagnosticArray bytes).
    ///
    /// # Errors
    /// [`NodeError::Zenoh`] if the put fails.
    pub async fn publish_diagnostics(&mut self, bytes: Vec<u8>) -> Result<()> {
        self.diagnostics.put(bytes).await?;
        self.status.diagnostics += 1;
        Ok(())
    }

    /// Closes the session (the liveliness tokens go with it).
    pub async fn close(self) {
        drop(self._tokens);
        if let Err(e) = self.session.close().await {
            tracing::debug!(error = %e, "closing the ROS 2 session");
        }
    }
}
