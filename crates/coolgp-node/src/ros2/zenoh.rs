//! ROS 2 over rmw_zenoh: a zenoh session of its own, rmw_zenoh's key expressions,
//! attachments and liveliness tokens ([`coolgp_ros2::rmw_zenoh`]), written as the
//! `--ros2-distro`'s rmw_zenoh writes them (Humble's without type hashes); subscriptions and
//! the query service match either distribution's keys.
//!
//! A transient-local (latched) map is published as rmw_zenoh publishes a transient-local
//! topic: rmw_zenoh's publisher is a zenoh-ext `AdvancedPublisher` with a cache of `depth`
//! samples and publisher detection, and a transient-local subscription an
//! `AdvancedSubscriber` with history that detects late publishers. On the wire that is a
//! liveliness token and a queryable on `<topic key>/@adv/pub/<zid>/<id>/_`, which a
//! subscriber queries (`<topic key>/@adv/**` when it starts, the token's key when it sees a
//! publisher appear) and which answers with the cached samples on the topic's key. The
//! workspace's zenoh crate has no zenoh-ext and no `unstable` feature (sequence numbers in
//! `SourceInfo`), so [`Latch`] speaks that protocol with the stable API: the last map is kept
//! and served, its samples carry timestamps (`<id>` = `uhlc`, as zenoh-ext writes for a
//! timestamped publisher), by which a subscriber drops a copy it already has.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use coolgp_ros2::rmw_zenoh::{self as rz, Entity, Kind, Qos};
use coolgp_ros2::service;
use coolgp_ros2::types::{lookup, MsgType};
use zenoh::bytes::ZBytes;
use zenoh::liveliness::LivelinessToken;
use zenoh::pubsub::{Publisher, Subscriber};
use zenoh::query::Query;
use zenoh::time::Timestamp;
use zenoh::Session;

use super::{now_ns, Feed, MapDurability, Ros2Settings, DIAGNOSTICS_TOPIC};
use super::{CallSink, ServiceCall, ServiceCounts, CALL_QUEUE};
use crate::error::{NodeError, Result};
use crate::transport::{self, Role};

/// One rmw_zenoh publisher: its zenoh publisher, GID and sequence, and for a
/// transient-local one its latch.
struct RosPublisher {
    publisher: Publisher<'static>,
    gid: [u8; 16],
    seq: i64,
    _token: LivelinessToken,
    latch: Option<Latch>,
}

impl RosPublisher {
    async fn put(&mut self, bytes: Vec<u8>) -> Result<()> {
        self.seq += 1;
        let att = ZBytes::from(rz::attachment(self.seq, now_ns(), &self.gid).to_vec());
        let payload = ZBytes::from(bytes);
        let mut put = self.publisher.put(payload.clone()).attachment(att.clone());
        if let Some(latch) = &self.latch {
            let timestamp = latch.session.new_timestamp();
            put = put.timestamp(timestamp);
            let mut last = latch.last.lock().unwrap_or_else(|p| p.into_inner());
            *last = Some(Latched {
                payload,
                attachment: att,
                timestamp,
            });
        }
        put.await
            .map_err(|e| NodeError::zenoh("publishing a ROS 2 message", e))
    }
}

/// The last sample of a transient-local publisher.
#[derive(Clone)]
struct Latched {
    payload: ZBytes,
    attachment: ZBytes,
    timestamp: Timestamp,
}

/// A transient-local publisher's cache (depth 1), as zenoh-ext's `AdvancedPublisher` with
/// `cache` and `publisher_detection` offers it: a liveliness token and a queryable on
/// `<topic key>/@adv/pub/<zid>/uhlc/_`, answering with the last sample on the topic's key.
struct Latch {
    session: Session,
    last: Arc<Mutex<Option<Latched>>>,
    server: tokio::task::JoinHandle<()>,
    _token: LivelinessToken,
}

impl Latch {
    async fn declare(session: &Session, topic_key: &str) -> Result<Self> {
        let err = |e| NodeError::zenoh("declaring a transient-local ROS 2 publisher", e);
        let cache_key = rz::advanced_cache_key(topic_key, &session.zid().to_string());
        let queryable = session
            .declare_queryable(cache_key.clone())
            .await
            .map_err(err)?;
        let token = session
            .liveliness()
            .declare_token(cache_key)
            .await
            .map_err(err)?;
        let last: Arc<Mutex<Option<Latched>>> = Arc::default();
        let (reply_key, cached) = (topic_key.to_string(), Arc::clone(&last));
        let server = tokio::spawn(async move {
            while let Ok(query) = queryable.recv_async().await {
                let sample = cached.lock().map_or(None, |l| l.clone());
                if let Some(s) = sample {
                    let reply = query
                        .reply(reply_key.as_str(), s.payload)
                        .attachment(s.attachment)
                        .timestamp(s.timestamp);
                    if let Err(e) = reply.await {
                        tracing::debug!(error = %e, "answering a late ROS 2 subscriber");
                    }
                }
            }
        });
        Ok(Self {
            session: session.clone(),
            last,
            server,
            _token: token,
        })
    }
}

/// The point-query service's server (`--ros2-query-service`), as rmw_zenoh serves a
/// service: a complete queryable on `<domain>/<service>/<type>/<hash>` (here any hash, so
/// Humble's clients are served too), a liveliness token of kind `SS` with the `--ros2-distro`'s
/// hash, and each reply on the request's key with the attachment of the request's sequence
/// number, the reply's time and the client's GID, in the request's form. Requests go to the
/// node's loop ([`ServiceCall`]); a request that is not one is refused with an error reply,
/// logged.
struct QueryService {
    server: tokio::task::JoinHandle<()>,
    _token: LivelinessToken,
}

impl QueryService {
    async fn declare(
        session: &Session,
        graph: &mut Graph<'_>,
        name: &str,
        (tx, counts): CallSink,
    ) -> Result<Self> {
        let err = |e| NodeError::zenoh("declaring the ROS 2 query service", e);
        let mut e = graph.entity(Kind::ServiceServer, None);
        e.topic = Some((
            name.to_string(),
            service::dds_name(),
            graph.s.distro.type_hash(service::rihs01),
            Qos::DEFAULT.field(),
        ));
        // Any hash: clients of Humble's rmw_zenoh and of Jazzy's are answered alike.
        let queryable = session
            .declare_queryable(service::key_any(graph.s.domain, name))
            .complete(true)
            .await
            .map_err(err)?;
        let tok = token(session, &e).await?;
        let server = tokio::spawn(async move {
            while let Ok(query) = queryable.recv_async().await {
                serve(query, &tx, &counts);
            }
        });
        Ok(Self {
            server,
            _token: tok,
        })
    }
}

/// One request: decoded and queued for the node, whose answer a task sends back; or refused.
fn serve(query: Query, tx: &tokio::sync::mpsc::Sender<ServiceCall>, counts: &Arc<ServiceCounts>) {
    let attachment = query
        .attachment()
        .and_then(|z| rz::parse_attachment(&z.to_bytes()));
    let payload = query.payload().map(|p| p.to_bytes().into_owned());
    let call = match (attachment, payload) {
        (None, _) => Err(
            "no rmw_zenoh attachment (sequence number, time, client GID): call it with a ROS 2 \
             client"
                .to_string(),
        ),
        (_, None) => Err(format!("an empty request: {}", service::SERVICE_TYPE)),
        (Some(a), Some(p)) => service::decode_request(&p)
            .map(|names| (a, names))
            .map_err(|e| e.to_string()),
    };
    let (request, names) = match call {
        Ok(c) => c,
        Err(why) => return refuse(query, counts, why),
    };
    let (reply, answer) = tokio::sync::oneshot::channel();
    if tx.try_send(ServiceCall { names, reply }).is_err() {
        let why = format!("busy: {CALL_QUEUE} calls are waiting; try again");
        return refuse(query, counts, why);
    }
    let counts = Arc::clone(counts);
    tokio::spawn(async move {
        let Ok(answers) = answer.await else {
            tracing::debug!("a ROS 2 service call dropped unanswered (the node is stopping)");
            return;
        };
        let bytes = service::encode_response(&answers, coolgp_ros2::cdr::Endian::Little);
        let att = rz::Attachment {
            source_ns: now_ns(),
            ..request
        };
        let key = query.key_expr().clone();
        match query.reply(key, bytes).attachment(att.to_bytes()).await {
            Ok(()) => {
                counts.answered.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => tracing::debug!(error = %e, "answering a ROS 2 service call"),
        }
    });
}

/// Refuses a request with an error reply saying why, logged and counted.
fn refuse(query: Query, counts: &Arc<ServiceCounts>, why: String) {
    counts.refused.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(error = %why, "a ROS 2 query-service request refused");
    tokio::spawn(async move {
        if let Err(e) = query.reply_err(why).await {
            tracing::debug!(error = %e, "refusing a ROS 2 service call");
        }
    });
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
                    self.s.distro.type_hash(|| coolgp_ros2::hash::rihs01(ty)),
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
    durability: MapDurability,
) -> Result<RosPublisher> {
    let qos = match durability {
        MapDurability::Volatile => Qos::DEFAULT,
        MapDurability::TransientLocal => Qos::LATCHED,
    };
    let e = graph.entity(Kind::Publisher, Some((topic, ty, qos)));
    let key = rz::topic_key(graph.s.domain, topic, ty, graph.s.distro);
    let latch = match durability {
        MapDurability::Volatile => None,
        MapDurability::TransientLocal => Some(Latch::declare(session, &key).await?),
    };
    let tok = token(session, &e).await?;
    let p = session
        .declare_publisher(key)
        .congestion_control(zenoh::qos::CongestionControl::Drop)
        .await
        .map_err(|err| NodeError::zenoh("declaring a ROS 2 publisher", err))?;
    Ok(RosPublisher {
        publisher: p,
        gid: rz::gid(&e.token()),
        seq: 0,
        _token: tok,
        latch,
    })
}

/// The type `name`, which the type table has (checked by a test of `coolgp-ros2`).
fn known(name: &str) -> Result<&'static MsgType> {
    lookup(name).ok_or_else(|| NodeError::Config(format!("{name} is not a known type")))
}

/// The rmw_zenoh side of a node.
pub struct ZenohSide {
    session: Session,
    map: Option<RosPublisher>,
    diagnostics: RosPublisher,
    query_service: Option<QueryService>,
    _subscribers: Vec<Subscriber<()>>,
    _tokens: Vec<LivelinessToken>,
}

impl ZenohSide {
    /// Opens the session and declares the node, its subscriptions (into `feed`), its
    /// publishers and its query service (calls into `calls`).
    ///
    /// # Errors
    /// [`NodeError::Zenoh`] if the session or a declaration fails.
    pub(super) async fn open(
        s: &Ros2Settings,
        feed: Option<Arc<Feed>>,
        calls: Option<CallSink>,
    ) -> Result<Self> {
        let session = transport::open(&s.zenoh, Role::Client).await?;
        let mut graph = Graph {
            s,
            zid: session.zid().to_string(),
            next: 0,
        };
        let mut tokens = vec![token(&session, &graph.entity(Kind::Node, None)).await?];
        let mut subscribers = Vec::new();
        if let (Some(spec), Some(feed)) = (&s.live, feed) {
            for (bare, ty) in spec.topics() {
                let topic = format!("/{bare}");
                let e = graph.entity(Kind::Subscription, Some((&topic, ty, Qos::DEFAULT)));
                tokens.push(token(&session, &e).await?);
                let feed = Arc::clone(&feed);
                let want = ty.dds_name();
                let sub = session
                    .declare_subscriber(rz::topic_key_any(s.domain, &topic))
                    .callback(move |sample| {
                        if sample.key_expr().as_str().rsplit('/').nth(1) != Some(want.as_str()) {
                            feed.wrong_type();
                            return;
                        }
                        let sent_ns = sample
                            .attachment()
                            .and_then(|z| rz::parse_attachment(&z.to_bytes()))
                            .map_or_else(now_ns, |a| a.source_ns);
                        feed.push(&topic, &sample.payload().to_bytes(), sent_ns);
                    })
                    .await
                    .map_err(|e| NodeError::zenoh("declaring a ROS 2 subscription", e))?;
                subscribers.push(sub);
            }
        }
        let map = match &s.map {
            Some(_) => {
                let ty = known(s.map_format.type_name())?;
                let d = s.map_durability;
                Some(publisher(&session, &mut graph, &s.map_topic, ty, d).await?)
            }
            None => None,
        };
        let ty = known("diagnostic_msgs/msg/DiagnosticArray")?;
        let volatile = MapDurability::Volatile;
        let diagnostics = publisher(&session, &mut graph, DIAGNOSTICS_TOPIC, ty, volatile).await?;
        let query_service = match (&s.query_service, calls) {
            (Some(name), Some(sink)) => {
                Some(QueryService::declare(&session, &mut graph, name, sink).await?)
            }
            _ => None,
        };
        Ok(Self {
            session,
            map,
            diagnostics,
            query_service,
            _subscribers: subscribers,
            _tokens: tokens,
        })
    }

    /// Publishes a map; false if the node has no map publisher.
    pub(super) async fn publish_map(&mut self, bytes: Vec<u8>) -> Result<bool> {
        match self.map.as_mut() {
            Some(p) => p.put(bytes).await.map(|()| true),
            None => Ok(false),
        }
    }

    pub(super) async fn publish_diagnostics(&mut self, bytes: Vec<u8>) -> Result<()> {
        self.diagnostics.put(bytes).await
    }

    pub(super) async fn close(self) {
        if let Some(latch) = self.map.as_ref().and_then(|m| m.latch.as_ref()) {
            latch.server.abort();
        }
        if let Some(q) = &self.query_service {
            q.server.abort();
        }
        drop(self._tokens);
        if let Err(e) = self.session.close().await {
            tracing::debug!(error = %e, "closing the ROS 2 session");
        }
    }
}
