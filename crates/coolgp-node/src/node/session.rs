//! Step 3, the transport: the zenoh session of one node with its publishers (one per
//! neighbour), the subscriber feeding the fair inbound queues, the status and predict
//! queryables, and the fleet's liveliness (who is alive, and our own token).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use coolgp::protocol::codec;
use coolgp::Vocabulary;
use zenoh::handlers::{RingChannel, RingChannelHandler};
use zenoh::key_expr::KeyExpr;
use zenoh::liveliness::LivelinessToken;
use zenoh::pubsub::{Publisher, Subscriber};
use zenoh::qos::CongestionControl;
use zenoh::query::{Query, Queryable};
use zenoh::sample::SampleKind;
use zenoh::Session;

use super::{fusion_name, Peers};
use crate::auth::{Auth, SIGNATURE_LEN};
use crate::config::NodeSettings;
use crate::error::{NodeError, Result};
use crate::inbound::{Inbound, Rejects};
use crate::keys;
use crate::transport::{self, Role};

/// Queries a node's status or predict queryable holds before the oldest is dropped.
const QUERY_BACKLOG: usize = 256;

/// Most projection groups a message may carry into a node (its size cap, [`inbound_max_len`]).
const NODE_MAX_GROUPS: usize = 64;

/// The largest payload a node accepts for decoding: a push-sum body at `m` inducing inputs,
/// plus the site sums of up to [`NODE_MAX_GROUPS`] projection groups of `site_len = d'·d`
/// entries each, plus the signature when `signed` (`--tls`).
///
/// The same in every projection mode on purpose: a misconfigured peer's message (sites sent
/// to a per-agent node, group sums sent to a node without a group, or the other way round)
/// must reach the agent, which rejects it with its reason (`bad_site`), rather than be
/// dropped unread as `oversize`.
pub(crate) fn inbound_max_len(m: usize, site_len: usize, signed: bool) -> usize {
    let sites = 4 + NODE_MAX_GROUPS * (8 + codec::site_bytes(site_len));
    codec::encoded_len_push_sum(m, None) + sites + if signed { SIGNATURE_LEN } else { 0 }
}

/// What the loop reads from zenoh (the queryables), and what must live as long as the node
/// (the subscribers and the liveliness token are undeclared when dropped).
pub(super) struct Endpoints {
    session: Session,
    /// The session is this node's alone (`coolgp node`), not a host's shared one.
    owns_session: bool,
    pub(super) status: Queryable<RingChannelHandler<Query>>,
    pub(super) predict: Queryable<RingChannelHandler<Query>>,
    /// The inbox subscriber (kept alive here; replaced by `redeclare_inbox`).
    _inbox: Subscriber<()>,
    /// The keys of the messages the neighbours send this node, declared on the session
    /// ([`expected_keys`]; undeclared when dropped).
    _expected: Vec<KeyExpr<'static>>,
    _alive: Subscriber<()>,
    token: LivelinessToken,
}

impl Endpoints {
    /// The node's zenoh session (for the gets of the pooled fit).
    pub(super) fn session(&self) -> &Session {
        &self.session
    }

    /// True for an agent of a host (`coolgp host`), whose session is shared.
    pub(super) fn is_hosted(&self) -> bool {
        !self.owns_session
    }

    /// Declares this node's inbox subscriber again (the new one before the old one goes, so
    /// no message falls between), so that zenoh propagates it to the peers anew
    /// ([`super::heal`]).
    ///
    /// # Errors
    /// zenoh refusing the declaration (the old subscriber is kept).
    pub(super) async fn redeclare_inbox(
        &mut self,
        fleet: &str,
        id: u64,
        inbound: Arc<Inbound>,
    ) -> Result<()> {
        self._inbox = inbox(&self.session, fleet, id, inbound).await?;
        Ok(())
    }

    /// A new publisher to neighbour `to` ([`super::heal`]), with this node's congestion
    /// control.
    ///
    /// # Errors
    /// zenoh refusing the declaration.
    pub(super) async fn publisher(
        &self,
        fleet: &str,
        (from, to): (u64, u64),
    ) -> Result<Publisher<'static>> {
        publisher(
            &self.session,
            (fleet, from, to),
            congestion(self.owns_session),
        )
        .await
    }

    /// Withdraws the liveliness token and undeclares the rest; closes the session if it is
    /// the node's own (a host closes its shared one once every agent stopped).
    pub(super) async fn close(self) {
        drop(self.token);
        if self.owns_session {
            if let Err(e) = self.session.close().await {
                tracing::debug!(error = %e, "closing zenoh session");
            }
        }
    }
}

/// Opens the session and declares everything on it (with `--tls`, after loading the signing
/// key and the fleet's roster). Returns the endpoints and the peers' part of the node.
///
/// # Errors
/// Unreadable `--tls` files; zenoh refusing the session or a declaration.
pub(super) async fn open_transport(
    s: &NodeSettings,
    vocab: &Vocabulary,
    d: usize,
) -> Result<(Endpoints, Peers)> {
    let auth = match &s.zenoh.tls {
        Some(dir) => Some(Auth::load(dir, &s.fleet, s.id)?),
        None => None,
    };
    let session = transport::open(&s.zenoh, Role::Node(s.id)).await?;
    declare(session, true, s, vocab, d, auth).await
}

/// Declares one node's publishers, subscribers, queryables and liveliness token on
/// `session` (its own when `owns`, or a host's shared one), with its signing key and roster
/// `auth` (`--tls`).
///
/// # Errors
/// zenoh refusing a declaration.
pub(super) async fn declare(
    session: Session,
    owns: bool,
    s: &NodeSettings,
    vocab: &Vocabulary,
    d: usize,
    auth: Option<Auth>,
) -> Result<(Endpoints, Peers)> {
    let max_len = inbound_max_len(vocab.m(), vocab.d_latent() * d, auth.is_some());
    let inbound = Arc::new(Inbound::new(&s.neighbors, s.queue, max_len));
    let congestion = congestion(owns);
    let mut publishers = BTreeMap::new();
    for &j in &s.neighbors {
        publishers.insert(
            j,
            publisher(&session, (&s.fleet, s.id, j), congestion).await?,
        );
    }
    let messages = inbox(&session, &s.fleet, s.id, Arc::clone(&inbound)).await?;
    let expected = expected_keys(&session, &s.fleet, s.id, &s.neighbors).await?;
    // Ring channels: when the loop falls behind, the oldest queries are dropped (their
    // queriers time out and retry) rather than blocking zenoh's receive path, which a full
    // FIFO does (issue 31: with a hundred agents in a host that stalled every link).
    let status = session
        .declare_queryable(keys::status(&s.fleet, s.id))
        .with(RingChannel::new(QUERY_BACKLOG))
        .await
        .map_err(|e| NodeError::zenoh("declaring status queryable", e))?;
    let predict = session
        .declare_queryable(keys::predict(&s.fleet, s.id))
        .with(RingChannel::new(QUERY_BACKLOG))
        .await
        .map_err(|e| NodeError::zenoh("declaring predict queryable", e))?;
    let members = Arc::new(Mutex::new(BTreeSet::new()));
    let alive = alive_subscriber(&session, &s.fleet, Arc::clone(&members)).await?;
    let token = session
        .liveliness()
        .declare_token(keys::alive(&s.fleet, s.id))
        .await
        .map_err(|e| NodeError::zenoh("declaring liveliness token", e))?;
    let endpoints = Endpoints {
        session,
        owns_session: owns,
        status,
        predict,
        _inbox: messages,
        _expected: expected,
        _alive: alive,
        token,
    };
    let peers = Peers {
        publishers,
        last_published: BTreeMap::new(),
        last_sent: BTreeMap::new(),
        inbound,
        rejects: Rejects::default(),
        auth,
        seen: BTreeMap::new(),
        last_heard: BTreeMap::new(),
        members,
        alive_seen: BTreeSet::new(),
        rows_seen: Arc::default(),
    };
    Ok((endpoints, peers))
}

/// The congestion control of a node's publishers: a node of its own waits for a congested
/// link (backpressure on its own loop); a hosted agent (`owns` false) drops the message
/// instead (issue 31: one blocked put stalled a host's runtime, and with it a hundred agents;
/// a tree message goes out again at its next turn and push-sum's running totals absorb a
/// lost one).
fn congestion(owns: bool) -> CongestionControl {
    if owns {
        CongestionControl::Block
    } else {
        CongestionControl::Drop
    }
}

/// The publisher of `from`'s messages to `to` in `fleet`.
async fn publisher(
    session: &Session,
    (fleet, from, to): (&str, u64, u64),
    congestion: CongestionControl,
) -> Result<Publisher<'static>> {
    session
        .declare_publisher(keys::message(fleet, from, to))
        .congestion_control(congestion)
        .await
        .map_err(|e| NodeError::zenoh("declaring publisher", e))
}

/// The subscriber of everything addressed to `id`: the callback only copies each payload
/// into the sender's queue of `inbound`.
async fn inbox(
    session: &Session,
    fleet: &str,
    id: u64,
    inbound: Arc<Inbound>,
) -> Result<Subscriber<()>> {
    session
        .declare_subscriber(keys::inbox(fleet, id))
        .callback(move |sample| {
            let key_from = keys::parse_message(sample.key_expr().as_str()).map(|(f, _)| f);
            let payload = sample.payload();
            inbound.push(key_from, payload.len(), || payload.to_bytes().into_owned());
        })
        .await
        .map_err(|e| NodeError::zenoh("declaring subscriber", e))
}

/// Declares on `session` the key of each message `neighbours` send `id`
/// (`coolgp/<fleet>/<j>/msg/<id>`), so that zenoh's routing tables hold a resource for it.
///
/// The inbox subscribes to a wildcard (`*/msg/<id>`); without a resource for the concrete key,
/// zenoh computes each arriving message's route by matching its key against every
/// subscription it knows (`Resource::get_matches`: a thousand inboxes in a fleet of a
/// thousand; 42% of a settled 1,000-agent fleet's host CPU, EXPERIMENTS.md). With one, the
/// route is computed once and cached until the subscriptions change (issue 31's idle cost).
async fn expected_keys(
    session: &Session,
    fleet: &str,
    id: u64,
    neighbours: &[u64],
) -> Result<Vec<KeyExpr<'static>>> {
    let mut declared = Vec::with_capacity(neighbours.len());
    for &j in neighbours {
        declared.push(
            session
                .declare_keyexpr(keys::message(fleet, j, id))
                .await
                .map_err(|e| NodeError::zenoh("declaring a neighbour's message key", e))?,
        );
    }
    Ok(declared)
}

/// Keeps `members` equal to the fleet's ids with a liveliness token (history included).
async fn alive_subscriber(
    session: &Session,
    fleet: &str,
    members: Arc<Mutex<BTreeSet<u64>>>,
) -> Result<Subscriber<()>> {
    session
        .liveliness()
        .declare_subscriber(keys::alive_all(fleet))
        .history(true)
        .callback(move |sample| {
            if let Some(id) = keys::parse_alive(sample.key_expr().as_str()) {
                let mut m = members.lock().unwrap_or_else(|p| p.into_inner());
                match sample.kind() {
                    SampleKind::Put => {
                        m.insert(id);
                    }
                    SampleKind::Delete => {
                        m.remove(&id);
                    }
                }
            }
        })
        .await
        .map_err(|e| NodeError::zenoh("declaring liveliness subscriber", e))
}

/// The `node started` log line: who, what model, which transport.
pub(super) fn log_started(s: &NodeSettings, vocab: &Vocabulary, d: usize, auth: Option<&Auth>) {
    tracing::info!(
        fleet = %s.fleet,
        id = s.id,
        neighbors = ?s.neighbors,
        m = vocab.m(),
        d,
        fingerprint = %vocab.fingerprint().short(),
        projection = s.agent.projection.name(),
        projection_group = s.projection_group.as_deref().unwrap_or("none"),
        fusion = fusion_name(&s.agent.fusion),
        durable = s.state.is_some(),
        listen = ?s.zenoh.listen,
        connect = ?s.zenoh.connect,
        tls = auth.is_some(),
        roster = ?auth.map(|a| a.roster.ids()),
        "node started"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use coolgp::fuse::Mass;
    use coolgp::learn::{Site, Sites, UNGROUPED};
    use coolgp::model::Fingerprint;
    use coolgp::protocol::{Body, Header, Message};
    use coolgp::Excess;

    fn message(m: usize, push_sum: bool, sites: Option<Sites>) -> Message {
        Message {
            header: Header {
                fingerprint: Fingerprint([7; 32]),
                sender: 1,
                receiver: 2,
                round: 3,
                version: 4,
            },
            body: if push_sum {
                Body::PushSum {
                    total: Mass::zeros(m),
                }
            } else {
                Body::Tree {
                    excess: Arc::new(Excess::zeros(m)),
                    points: 1.0,
                }
            },
            projection: None,
            sites,
        }
    }

    fn groups(n: usize, count: usize) -> Sites {
        Sites::from_pairs((1..=count as u64).map(|g| (g, Site::zeros(n))))
    }

    #[test]
    fn the_inbound_limit_admits_every_modes_messages_whatever_the_nodes_own_mode() {
        // A per-agent node, a fleet node without a group and one with a group all take the
        // same limit, so a misconfigured peer's message is decoded and rejected by the agent
        // with its reason (`bad_site`) instead of being dropped as `oversize` (NODE.md §3).
        let (m, n) = (12, 2 * 3);
        let max = inbound_max_len(m, n, false);
        let kinds = [
            None,
            Some(Sites::single(UNGROUPED, Site::zeros(n))),
            Some(groups(n, 2)),
            Some(groups(n, NODE_MAX_GROUPS)),
        ];
        for sites in kinds {
            for push_sum in [false, true] {
                let len = codec::encode(&message(m, push_sum, sites.clone())).len();
                assert!(len <= max, "{len} > {max} (push-sum {push_sum}, {sites:?})");
            }
        }
        // The limit is tight: the largest admitted message fills it exactly, one more group
        // is refused, and a signature adds its length.
        let full = message(m, true, Some(groups(n, NODE_MAX_GROUPS)));
        assert_eq!(codec::encode(&full).len(), max);
        let over = message(m, true, Some(groups(n, NODE_MAX_GROUPS + 1)));
        assert!(codec::encode(&over).len() > max);
        assert_eq!(inbound_max_len(m, n, true), max + SIGNATURE_LEN);
    }
}
