//! The zenoh side: membership from the fleet's liveliness tokens, and one `status` query per
//! member per poll period, or above `--full-status-limit` members one brief request for the
//! whole fleet ([`coolgp_node::routing::briefs`]). Nothing else is asked of the nodes.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use coolgp_node::{client, keys, routing, NodeError};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;
use zenoh::sample::{Sample, SampleKind};

use crate::args::Settings;
use crate::brief::Mode;
use crate::fleet::FleetState;

/// How long after start (and between looks) the dashboard looks for other fleets when its
/// own has no member.
const DISCOVERY_EVERY: Duration = Duration::from_secs(3);

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The shared fleet picture (a poisoned lock is recovered: the state stays consistent
/// between method calls).
pub fn lock(state: &Mutex<FleetState>) -> MutexGuard<'_, FleetState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

fn apply_liveliness(state: &Mutex<FleetState>, sample: &Sample) {
    let Some(id) = keys::parse_alive(sample.key_expr().as_str()) else {
        return;
    };
    let mut st = lock(state);
    match sample.kind() {
        SampleKind::Put => st.member_joined(id, unix_ms()),
        SampleKind::Delete => st.member_left(id, unix_ms()),
    }
}

/// The fleet names of every visible liveliness token (`coolgp/*/*/alive`).
async fn fleets_seen(session: &zenoh::Session, timeout: Duration) -> Vec<String> {
    let mut out = BTreeSet::new();
    let all = format!("{}/*/*/alive", keys::ROOT);
    if let Ok(replies) = session.liveliness().get(all).timeout(timeout).await {
        while let Ok(r) = replies.recv_async().await {
            if let Ok(s) = r.result() {
                if let Some(f) = s.key_expr().as_str().split('/').nth(1) {
                    out.insert(f.to_string());
                }
            }
        }
    }
    out.into_iter().collect()
}

/// One poll: connectivity, the members' statuses (concurrently, each bounded by `timeout`) or
/// in brief mode every agent's brief from one request, other fleets if this one has no
/// member, then the history tick and a new snapshot.
async fn poll_once(
    session: &zenoh::Session,
    s: &Settings,
    state: &Mutex<FleetState>,
    last_discovery: &mut Instant,
) {
    let timeout = s.poll.mul_f64(0.8);
    let peers = session.info().peers_zid().await.count();
    let (members, mode): (Vec<u64>, Mode) = {
        let mut st = lock(state);
        st.set_peers(peers, unix_ms());
        (st.members().collect(), st.choose_mode(unix_ms()))
    };
    match mode {
        Mode::Full => poll_statuses(session, s, state, &members, timeout).await,
        Mode::Brief => match routing::briefs(session, &s.fleet, timeout).await {
            Ok((briefs, refused)) => {
                lock(state).brief_replies(briefs, refused, Instant::now(), unix_ms());
            }
            Err(e) => lock(state).briefs_failed(e.to_string(), unix_ms()),
        },
    }
    if members.is_empty() && peers > 0 && last_discovery.elapsed() >= DISCOVERY_EVERY {
        *last_discovery = Instant::now();
        let seen = fleets_seen(session, timeout).await;
        lock(state).set_fleets_seen(Some(seen), unix_ms());
    }
    lock(state).record_history(Instant::now(), unix_ms());
}

/// Full mode: one `status` get per member, concurrently, each bounded by `timeout`.
async fn poll_statuses(
    session: &zenoh::Session,
    s: &Settings,
    state: &Mutex<FleetState>,
    members: &[u64],
    timeout: Duration,
) {
    let mut asks = JoinSet::new();
    for id in members.iter().copied() {
        let (session, key) = (session.clone(), keys::status(&s.fleet, id));
        asks.spawn(async move { (id, client::get(&session, &key, None, timeout).await) });
    }
    while let Some(joined) = asks.join_next().await {
        let Ok((id, reply)) = joined else { continue };
        let mut st = lock(state);
        match reply {
            Ok(bytes) => st.status_reply(id, &bytes, Instant::now(), unix_ms()),
            Err(NodeError::NoReply { timeout_ms, .. }) => {
                let msg = format!("no status reply within {timeout_ms} ms");
                st.status_failed(id, msg, unix_ms());
            }
            Err(e) => st.status_failed(id, e.to_string(), unix_ms()),
        }
    }
}

/// Watches the fleet until `stop` turns true: keeps `state` current and sends each new
/// `/api/fleet` document (serialized) on `tx`.
///
/// # Errors
/// [`coolgp_node::NodeError`] if the liveliness subscriber cannot be declared.
pub async fn run(
    session: zenoh::Session,
    s: Settings,
    state: Arc<Mutex<FleetState>>,
    tx: watch::Sender<Arc<str>>,
    mut stop: watch::Receiver<bool>,
) -> coolgp_node::Result<()> {
    let st2 = state.clone();
    let _alive = session
        .liveliness()
        .declare_subscriber(keys::alive_all(&s.fleet))
        .history(true)
        .callback(move |sample| apply_liveliness(&st2, &sample))
        .await
        .map_err(|e| NodeError::Zenoh {
            what: "declaring liveliness subscriber",
            message: e.to_string(),
        })?;
    let mut tick = tokio::time::interval(s.poll);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The first look for other fleets waits for gossip to settle.
    let mut last_discovery = Instant::now();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => break,
        }
        if *stop.borrow() {
            break;
        }
        poll_once(&session, &s, &state, &mut last_discovery).await;
        let doc = lock(&state).snapshot(Instant::now(), unix_ms());
        let text: Arc<str> = doc.to_string().into();
        // No receiver is fine: the server holds one for the life of the process.
        let _ = tx.send(text);
    }
    Ok(())
}
