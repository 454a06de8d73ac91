//! ROS 2 over rmw_zenoh: a zenoh session of its own, rmw_zenoh's key expressions,
//! attachments and liveliness tokens ([`coolgp_ros2::rmw_zenoh`]).

use std::sync::Arc;

use coolgp_ros2::rmw_zenoh::{self as rz, Entity, Kind, Qos};
use coolgp_ros2::types::{lookup, MsgType};
use zenoh::liveliness::LivelinessToken;
use zenoh::pubsub::{Publisher, Subscriber};
use zenoh::Session;

use super::{now_ns, Feed, Ros2Settings, DIAGNOSTICS_TOPIC};
use crate::error::{NodeError, Result};
use crate::transport::{self, Role};

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

/// The type `name`, which the type table has (checked by a test of `coolgp-ros2`).
fn known(name: &str) -> Result<&'static MsgType> {
    lookup(name).ok_or_else(|| NodeError::Config(format!("{name} is not a known type")))
}

/// The rmw_zenoh side of a node.
pub struct ZenohSide {
    session: Session,
    map: Option<RosPublisher>,
    diagnostics: RosPublisher,
    _subscribers: Vec<Subscriber<()>>,
    _tokens: Vec<LivelinessToken>,
}

impl ZenohSide {
    /// Opens the session and declares the node, its subscriptions (into `feed`) and its
    /// publishers.
    ///
    /// # Errors
    /// [`NodeError::Zenoh`] if the session or a declaration fails.
    pub(super) async fn open(s: &Ros2Settings, feed: Option<Arc<Feed>>) -> Result<Self> {
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
                            .map_or_else(now_ns, |(_, ts, _)| ts);
                        feed.push(&topic, &sample.payload().to_bytes(), sent_ns);
                    })
                    .await
                    .map_err(|e| NodeError::zenoh("declaring a ROS 2 subscription", e))?;
                subscribers.push(sub);
            }
        }
        let map = match &s.map {
            Some(_) => {
                let ty = known("sensor_msgs/msg/PointCloud2")?;
                Some(publisher(&session, &mut graph, &s.map_topic, ty).await?)
            }
            None => None,
        };
        let ty = known("diagnostic_msgs/msg/DiagnosticArray")?;
        let diagnostics = publisher(&session, &mut graph, DIAGNOSTICS_TOPIC, ty).await?;
        Ok(Self {
            session,
            map,
            diagnostics,
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
        drop(self._tokens);
        if let Err(e) = self.session.close().await {
            tracing::debug!(error = %e, "closing the ROS 2 session");
        }
    }
}
