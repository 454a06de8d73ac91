//! The node: one [`Agent`] driven by a zenoh session, a data stream, a round timer and
//! durable checkpoints.
//!
//! Each round: absorb up to `--blocks-per-round` blocks from the stream, write a checkpoint
//! if anything was absorbed (only then are the blocks *acknowledged*: counted in `status`), or
//! every `--checkpoint-every` rounds; tick the agent and publish its messages. Between rounds,
//! received messages are drained from the fair inbound queues and queries are answered.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use coolgp::faer::Mat;
use coolgp::protocol::codec;
use coolgp::protocol::{Body, Message};
use coolgp::{Agent, Event, Excess, FusionRule, View, Vocabulary};
use coolgp_data::Standardizer;
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;
use zenoh::handlers::FifoChannelHandler;
use zenoh::qos::CongestionControl;
use zenoh::query::{Query, Queryable};
use zenoh::sample::SampleKind;

use crate::auth::{Auth, SIGNATURE_LEN};
use crate::checkpoint::{self, ModelIdentity, NodeMeta, StreamPos};
use crate::config::{DataSource, NodeSettings, VocabSource};
use crate::error::{NodeError, Result};
use crate::inbound::{Inbound, Raw, Rejects};
use crate::keys;
use crate::query::{Queries, QueryModel};
use crate::status::{projection_digest, ExcessJson, ProjectionSummary, Status};
use crate::stream::{self, Item, Layout};
use crate::transport::{self, Role};

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

/// Loads a vocabulary file (`--vocab FILE`); supplied by the CLI, which owns the file format.
pub type VocabLoader<'a> = &'a (dyn Fn(&Path) -> std::result::Result<Vocabulary, String> + Sync);

pub use crate::query::{MAX_QUERY_BYTES, MAX_QUERY_ROWS};
/// Received messages handled before the loop looks at its timer and queries again.
const DRAIN_BUDGET: usize = 256;
/// Accepted (round, version) pairs remembered per sender for duplicate detection.
const SEEN_PER_SENDER: usize = 32;
/// Relative change of the fused excess that counts as a change (convergence timing).
const FUSED_CHANGE_TOL: f64 = 1e-12;

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

struct Holdout {
    x: Mat<f64>,
    y: Vec<f64>,
}

struct Node {
    s: NodeSettings,
    agent: Agent,
    layout: Layout,
    scaler: Option<Standardizer>,
    holdout: Option<Holdout>,
    publishers: BTreeMap<u64, zenoh::pubsub::Publisher<'static>>,
    inbound: Arc<Inbound>,
    members: Arc<Mutex<BTreeSet<u64>>>,
    rejects: Rejects,
    /// Signing key and roster (`--tls`): every message out is signed, every one in verified.
    auth: Option<Auth>,
    queries: Queries,
    seen: BTreeMap<u64, VecDeque<(u64, u64)>>,
    data_rx: Option<mpsc::Receiver<Item>>,
    pending_x: Vec<Vec<f64>>,
    pending_y: Vec<f64>,
    /// Stream position including pending rows.
    cursor: StreamPos,
    /// Stream position after the last absorbed block (what a checkpoint records).
    committed: StreamPos,
    acked_blocks: u64,
    acked_points: u64,
    last_ckpt_round: u64,
    checkpoints: u64,
    checkpoint_bytes: u64,
    last_checkpoint: Option<Instant>,
    rounds_run: u64,
    messages_sent: u64,
    bytes_sent: u64,
    /// Unchanged tree messages not published (`--resend-every`).
    messages_unchanged_held: u64,
    /// Per neighbour: the payload last published and the round it went out.
    last_published: BTreeMap<u64, (Arc<Excess>, u64)>,
    messages_received: u64,
    bytes_received: u64,
    messages_accepted: u64,
    last_block_unix_ms: Option<u64>,
    fused_changed_unix_ms: Option<u64>,
    fused_last: Option<Excess>,
    degenerate_logged: Option<Instant>,
    last_heard: BTreeMap<u64, Instant>,
    started: Instant,
}

/// Builds the vocabulary for input dimension `d`.
fn vocabulary(src: &VocabSource, d: usize, loader: VocabLoader<'_>) -> Result<Vocabulary> {
    match src {
        VocabSource::File(p) => loader(p).map_err(NodeError::Config),
        VocabSource::Default { m, d_latent, seed } => Ok(Vocabulary::default_design(
            *m,
            d_latent.unwrap_or(d),
            *seed,
        )?),
    }
}

fn load_holdout(
    path: &Path,
    layout: &Layout,
    target: &str,
    scaler: Option<&Standardizer>,
) -> Result<Holdout> {
    let t = stream::read_table(path)?;
    let col = |name: &str| {
        t.names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| NodeError::Data {
                source_name: path.display().to_string(),
                reason: format!("no column '{name}'"),
            })
    };
    let idx: Vec<usize> = layout
        .inputs
        .iter()
        .map(|n| col(n))
        .collect::<Result<_>>()?;
    let ti = col(target)?;
    let mut x = Mat::from_fn(t.rows.len(), idx.len(), |i, j| t.rows[i][idx[j]]);
    if let Some(s) = scaler {
        s.apply_x(&mut x)
            .map_err(|e| NodeError::Config(e.to_string()))?;
    }
    Ok(Holdout {
        x,
        y: t.rows.iter().map(|r| r[ti]).collect(),
    })
}

/// Runs a node until SIGTERM/SIGINT (then writes a final checkpoint).
///
/// # Errors
/// Start-up failures (configuration, data header, vocabulary, checkpoint, zenoh) and a failed
/// checkpoint write (the node stops rather than acknowledge data it could not persist).
pub async fn run(s: NodeSettings, loader: VocabLoader<'_>) -> Result<()> {
    // 1. Column layout (and the input dimension) from the data header or --inputs.
    let mut opened = match &s.data {
        Some(src) => Some(stream::open(src, &s.target, s.inputs.as_deref(), None)?),
        None => None,
    };
    let layout = match &opened {
        Some(o) => o.layout.clone(),
        None => {
            let inputs = s.inputs.clone().unwrap_or_default();
            Layout {
                input_idx: (0..inputs.len()).collect(),
                target_idx: inputs.len(),
                ncols: inputs.len() + 1,
                inputs,
            }
        }
    };
    let d = layout.inputs.len();
    let vocab = Arc::new(vocabulary(&s.vocab, d, loader)?);
    let scaler = match &s.standardize {
        Some(p) => Some(crate::standardize::load(p, d)?),
        None => None,
    };
    let holdout = match &s.holdout {
        Some(p) => Some(load_holdout(p, &layout, &s.target, scaler.as_ref())?),
        None => None,
    };

    // 2. The agent: from the newest checkpoint, or fresh.
    let mut resume = None;
    let mut committed = StreamPos {
        source: s.data.as_ref().map_or_else(String::new, DataSource::name),
        ..StreamPos::default()
    };
    let (mut acked_blocks, mut acked_points) = (0, 0);
    let restored = match &s.state {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| NodeError::io("creating state directory", dir, e))?;
            checkpoint::load_latest(dir, &vocab, d)?
        }
        None => None,
    };
    let mut agent = match restored {
        Some(cp) => {
            let dir = s.state.clone().unwrap_or_default();
            let mismatch = |reason: String| NodeError::StateMismatch {
                path: dir.clone(),
                reason,
            };
            if cp.meta.model.fleet != s.fleet || cp.meta.model.id != s.id {
                return Err(mismatch(format!(
                    "it holds agent {} of fleet '{}'",
                    cp.meta.model.id, cp.meta.model.fleet
                )));
            }
            if cp.meta.model.inputs != layout.inputs {
                return Err(mismatch(format!(
                    "its input columns are {:?}",
                    cp.meta.model.inputs
                )));
            }
            if cp.snapshot.config != s.agent {
                let diffs: Vec<String> = crate::config::setting_differences(
                    &cp.snapshot.config,
                    &s.agent,
                    s.projection_group.as_deref(),
                )
                .iter()
                .map(ToString::to_string)
                .collect();
                return Err(NodeError::StateSettings {
                    path: dir.clone(),
                    settings: if diffs.is_empty() {
                        // Only a value without a usable comparison (NaN) can get here.
                        format!("other settings ({:?})", cp.snapshot.config)
                    } else {
                        crate::config::join_and(&diffs)
                    },
                });
            }
            if cp.meta.stream.source != committed.source {
                tracing::warn!(
                    checkpoint = %cp.meta.stream.source,
                    now = %committed.source,
                    "the data source differs from the checkpoint's; resuming at its offset anyway"
                );
            }
            let mut snap = cp.snapshot;
            // Round lease: at most `checkpoint_every` rounds were sent after the checkpoint,
            // so neighbours never see a round number twice.
            snap.round = snap.round.saturating_add(s.checkpoint_every);
            let mut a = Agent::restore(vocab.clone(), snap)?;
            a.set_neighbors(s.neighbors.iter().copied())?;
            acked_blocks = cp.meta.blocks;
            acked_points = cp.meta.points;
            committed.offset = cp.meta.stream.offset;
            committed.rows = cp.meta.stream.rows;
            committed.rows_skipped = cp.meta.stream.rows_skipped;
            committed.ended = cp.meta.stream.ended;
            resume = Some((committed.offset, committed.rows));
            tracing::info!(
                path = %cp.path.display(),
                blocks = acked_blocks,
                points = acked_points,
                offset = committed.offset,
                round = a.round(),
                "resumed from checkpoint"
            );
            a
        }
        None => {
            let mut snap = Agent::new(s.id, vocab.clone(), d, s.agent.clone())?.snapshot();
            // A fresh agent (new, or whose state was lost) starts its rounds from the clock,
            // so that neighbours which remember an earlier incarnation do not take it for
            // a replay.
            snap.round = unix_ms() / (s.round.as_millis().max(1) as u64);
            let mut a = Agent::restore(vocab.clone(), snap)?;
            a.set_neighbors(s.neighbors.iter().copied())?;
            a
        }
    };
    // Drain anything restore or construction queued.
    while agent.poll_event().is_some() {}

    // 3. The data thread (a file resumes at the checkpoint's offset).
    let data_rx = if committed.ended {
        None
    } else {
        match (&s.data, resume) {
            (Some(src @ DataSource::File(_)), Some(r)) => {
                opened = Some(stream::open(src, &s.target, s.inputs.as_deref(), Some(r))?);
            }
            (Some(DataSource::Stdin), Some(_)) => tracing::warn!(
                rows = committed.rows,
                "standard input cannot be rewound: the producer must resume after the rows already consumed"
            ),
            _ => {}
        }
        opened.map(|o| {
            let (tx, rx) = mpsc::channel(4 * s.batch.max(16));
            o.spawn(s.follow, tx);
            rx
        })
    };

    // 4. zenoh (and, with --tls, the signing key and the fleet's roster).
    let auth = match &s.zenoh.tls {
        Some(dir) => Some(Auth::load(dir, &s.fleet, s.id)?),
        None => None,
    };
    let session = transport::open(&s.zenoh, Role::Node(s.id)).await?;
    let max_len = inbound_max_len(vocab.m(), vocab.d_latent() * d, auth.is_some());
    let inbound = Arc::new(Inbound::new(&s.neighbors, s.queue, max_len));
    let mut publishers = BTreeMap::new();
    for &j in &s.neighbors {
        let p = session
            .declare_publisher(keys::message(&s.fleet, s.id, j))
            .congestion_control(CongestionControl::Block)
            .await
            .map_err(|e| NodeError::zenoh("declaring publisher", e))?;
        publishers.insert(j, p);
    }
    let inb = inbound.clone();
    let _subscriber = session
        .declare_subscriber(keys::inbox(&s.fleet, s.id))
        .callback(move |sample| {
            let key_from = keys::parse_message(sample.key_expr().as_str()).map(|(f, _)| f);
            let payload = sample.payload();
            inb.push(key_from, payload.len(), || payload.to_bytes().into_owned());
        })
        .await
        .map_err(|e| NodeError::zenoh("declaring subscriber", e))?;
    let status_q: Queryable<FifoChannelHandler<Query>> = session
        .declare_queryable(keys::status(&s.fleet, s.id))
        .await
        .map_err(|e| NodeError::zenoh("declaring status queryable", e))?;
    let predict_q: Queryable<FifoChannelHandler<Query>> = session
        .declare_queryable(keys::predict(&s.fleet, s.id))
        .await
        .map_err(|e| NodeError::zenoh("declaring predict queryable", e))?;
    let members = Arc::new(Mutex::new(BTreeSet::new()));
    let mem = members.clone();
    let _alive_sub = session
        .liveliness()
        .declare_subscriber(keys::alive_all(&s.fleet))
        .history(true)
        .callback(move |sample| {
            if let Some(id) = keys::parse_alive(sample.key_expr().as_str()) {
                let mut m = mem.lock().unwrap_or_else(|p| p.into_inner());
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
        .map_err(|e| NodeError::zenoh("declaring liveliness subscriber", e))?;
    let token = session
        .liveliness()
        .declare_token(keys::alive(&s.fleet, s.id))
        .await
        .map_err(|e| NodeError::zenoh("declaring liveliness token", e))?;

    tracing::info!(
        fleet = %s.fleet,
        id = s.id,
        neighbors = ?s.neighbors,
        m = vocab.m(),
        d,
        fingerprint = %vocab.fingerprint().short(),
        projection = s.agent.projection.name(),
        projection_group = s.projection_group.as_deref().unwrap_or("none"),
        fusion = match s.agent.fusion {
            FusionRule::Tree => "tree",
            FusionRule::PushSum { .. } => "push-sum",
        },
        durable = s.state.is_some(),
        listen = ?s.zenoh.listen,
        connect = ?s.zenoh.connect,
        tls = auth.is_some(),
        roster = ?auth.as_ref().map(|a| a.roster.ids()),
        "node started"
    );

    let last_ckpt_round = agent.round();
    let mut node = Node {
        agent,
        layout,
        scaler,
        holdout,
        publishers,
        inbound: inbound.clone(),
        members,
        rejects: Rejects::default(),
        auth,
        queries: Queries::default(),
        seen: BTreeMap::new(),
        data_rx,
        pending_x: Vec::new(),
        pending_y: Vec::new(),
        cursor: committed.clone(),
        committed,
        acked_blocks,
        acked_points,
        last_ckpt_round,
        checkpoints: 0,
        checkpoint_bytes: 0,
        last_checkpoint: None,
        rounds_run: 0,
        messages_sent: 0,
        bytes_sent: 0,
        messages_unchanged_held: 0,
        last_published: BTreeMap::new(),
        messages_received: 0,
        bytes_received: 0,
        messages_accepted: 0,
        last_block_unix_ms: None,
        fused_changed_unix_ms: None,
        fused_last: None,
        degenerate_logged: None,
        last_heard: BTreeMap::new(),
        started: Instant::now(),
        s,
    };
    node.note_fused_change();
    // The round lease starts now: a crash before the first periodic checkpoint must not
    // reuse round numbers.
    node.checkpoint()?;

    let result = node.event_loop(&inbound, &status_q, &predict_q).await;
    let last = if result.is_ok() {
        if node.s.state.is_some() {
            tracing::info!("shutting down: final checkpoint");
        } else {
            tracing::info!("shutting down: no --state, so no checkpoint is written");
        }
        node.checkpoint()
    } else {
        Ok(())
    };
    drop(token);
    if let Err(e) = session.close().await {
        tracing::debug!(error = %e, "closing zenoh session");
    }
    result.and(last)
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch SIGTERM; only Ctrl-C stops the node cleanly");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

impl Node {
    async fn event_loop(
        &mut self,
        inbound: &Inbound,
        status_q: &Queryable<FifoChannelHandler<Query>>,
        predict_q: &Queryable<FifoChannelHandler<Query>>,
    ) -> Result<()> {
        let mut ticker = tokio::time::interval(self.s.round);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let shutdown = shutdown_signal();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                biased;
                () = &mut shutdown => return Ok(()),
                _ = ticker.tick() => self.on_round().await?,
                q = status_q.recv_async() => {
                    if let Ok(q) = q {
                        self.answer_status(q).await;
                    }
                }
                q = predict_q.recv_async() => {
                    if let Ok(q) = q {
                        self.queries.submit(q, || self.query_model());
                    }
                }
                () = inbound.notify.notified() => self.drain_inbound(inbound),
            }
        }
    }

    fn drain_inbound(&mut self, inbound: &Inbound) {
        for o in inbound.take_oversize() {
            // Counted by the queues (`rejected.oversize`); logged here, rate-limited.
            self.rejects.log(
                o.key_from,
                "oversize",
                &format_args!(
                    "payload of {} bytes dropped unread: longer than any valid message ({} bytes)",
                    o.len, o.max_len
                ),
            );
        }
        for _ in 0..DRAIN_BUDGET {
            match inbound.pop() {
                Some(raw) => self.handle_raw(raw),
                None => return,
            }
        }
        // More is waiting: come back after the timer and the queries had a chance.
        inbound.notify.notify_one();
    }

    fn handle_raw(&mut self, raw: Raw) {
        self.messages_received += 1;
        self.bytes_received += raw.bytes.len() as u64;
        // Origin first: in a TLS fleet nothing unsigned or forged reaches the codec or agent.
        let bytes = match self.auth.as_mut() {
            Some(a) => match a.roster.verify(&raw.bytes) {
                Ok(b) => b,
                Err(e) => {
                    self.rejects.record(raw.key_from, "signature", &e);
                    return;
                }
            },
            None => raw.bytes,
        };
        let msg = match codec::decode(&bytes) {
            Ok(m) => m,
            Err(reason) => {
                self.rejects.record(raw.key_from, reason.label(), &reason);
                return;
            }
        };
        let h = &msg.header;
        let sender = h.sender;
        if raw.key_from != Some(sender) {
            self.rejects.record(
                raw.key_from,
                "key_mismatch",
                &format_args!("key names sender {:?}, header {}", raw.key_from, sender),
            );
            return;
        }
        if self.s.fuse_within {
            let own = self.agent.site_key();
            if let Some(g) = msg
                .sites
                .as_ref()
                .and_then(|s| s.iter().find(|(g, _)| *g != own))
            {
                self.rejects.record(
                    Some(sender),
                    "foreign_group",
                    &format_args!(
                        "sums of projection group {:#x} under --fuse-groups within",
                        g.0
                    ),
                );
                return;
            }
        }
        let key = (h.round, h.version);
        if self.seen.get(&sender).is_some_and(|s| s.contains(&key)) {
            self.rejects.record(
                Some(sender),
                "duplicate",
                &format_args!("round {} v{} again", key.0, key.1),
            );
            return;
        }
        match self.agent.handle_message(msg) {
            Ok(()) => {
                self.messages_accepted += 1;
                self.last_heard.insert(sender, Instant::now());
                let s = self.seen.entry(sender).or_default();
                s.push_back(key);
                if s.len() > SEEN_PER_SENDER {
                    s.pop_front();
                }
                self.note_fused_change();
            }
            Err(reason) => {
                self.rejects.record(Some(sender), reason.label(), &reason);
            }
        }
        self.drain_events();
    }

    fn drain_events(&mut self) {
        while let Some(e) = self.agent.poll_event() {
            match e {
                Event::Jitter { what, jitter } => tracing::debug!(what, jitter, "extra jitter"),
                Event::StepSkipped { reason } => tracing::warn!(reason, "optimizer step skipped"),
                Event::ImportanceWeights(d) if d.degenerate => {
                    let due = self
                        .degenerate_logged
                        .is_none_or(|t| t.elapsed() >= crate::inbound::LOG_EVERY);
                    if due {
                        tracing::warn!(
                            ess = d.ess,
                            max_log_w = d.max_log_w,
                            overflowed = d.overflowed,
                            "degenerate importance weights"
                        );
                        self.degenerate_logged = Some(Instant::now());
                    }
                }
                _ => {}
            }
        }
    }

    fn note_fused_change(&mut self) {
        let (e, _) = self.agent.fused_excess();
        let changed = match &self.fused_last {
            None => true,
            Some(old) => {
                let base = old.norm_sq().max(e.norm_sq());
                base > 0.0 && e.rel_dist(old) > FUSED_CHANGE_TOL
            }
        };
        if changed {
            self.fused_changed_unix_ms = Some(unix_ms());
        }
        self.fused_last = Some(e);
    }

    async fn on_round(&mut self) -> Result<()> {
        let absorbed = self.pull_blocks();
        let durable = self.s.state.is_some();
        let lease_due =
            self.agent.round() >= self.last_ckpt_round.saturating_add(self.s.checkpoint_every);
        if absorbed > 0 || (durable && lease_due) {
            self.checkpoint()?;
        }
        self.agent.handle_tick();
        self.rounds_run += 1;
        while let Some(msg) = self.agent.poll_transmit() {
            let to = msg.header.receiver;
            if self.hold_unchanged(&msg) {
                self.messages_unchanged_held += 1;
                continue;
            }
            let bytes = match &self.auth {
                Some(a) => a.signer.seal(codec::encode(&msg)),
                None => codec::encode(&msg),
            };
            let Some(p) = self.publishers.get(&to) else {
                continue;
            };
            let len = bytes.len() as u64;
            match p.put(bytes).await {
                Ok(()) => {
                    self.messages_sent += 1;
                    self.bytes_sent += len;
                }
                Err(e) => tracing::warn!(to, error = %e, "publishing failed"),
            }
        }
        self.drain_events();
        Ok(())
    }

    /// True when `msg` is a tree message with the same payload as the last one published to
    /// its receiver, fewer than `resend_every` rounds ago (the agent keeps an unchanged
    /// payload in the same `Arc`). Otherwise records it as published now. Push-sum messages
    /// always go out: each carries a share of the mass.
    fn hold_unchanged(&mut self, msg: &Message) -> bool {
        let Body::Tree { excess, .. } = &msg.body else {
            return false;
        };
        let to = msg.header.receiver;
        let now = self.rounds_run;
        if let Some((prev, at)) = self.last_published.get(&to) {
            if Arc::ptr_eq(prev, excess) && now - at < self.s.resend_every {
                return true;
            }
        }
        self.last_published.insert(to, (Arc::clone(excess), now));
        false
    }

    /// Pulls rows from the stream and absorbs up to `blocks_per_round` blocks.
    fn pull_blocks(&mut self) -> usize {
        let mut absorbed = 0;
        while absorbed < self.s.blocks_per_round {
            let Some(rx) = self.data_rx.as_mut() else {
                break;
            };
            let item = match rx.try_recv() {
                Ok(item) => item,
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    self.data_rx = None;
                    break;
                }
            };
            match item {
                Item::Row { x, y, end } => {
                    self.pending_x.push(x);
                    self.pending_y.push(y);
                    self.cursor.offset = end;
                    self.cursor.rows += 1;
                    if self.pending_y.len() >= self.s.batch {
                        absorbed += self.absorb_pending();
                    }
                }
                Item::Skipped { line, reason, end } => {
                    self.cursor.offset = end;
                    self.cursor.rows += 1;
                    self.cursor.rows_skipped += 1;
                    self.rejects_row(line, &reason);
                    if self.pending_y.is_empty() {
                        self.committed = self.cursor.clone();
                    }
                }
                Item::Idle => absorbed += self.absorb_pending(),
                Item::End => {
                    absorbed += self.absorb_pending();
                    self.cursor.ended = true;
                    self.committed = self.cursor.clone();
                    self.data_rx = None;
                    tracing::info!(rows = self.cursor.rows, "data stream ended");
                }
                Item::Failed(e) => {
                    tracing::error!(error = %e, "data stream failed; no more data will be read");
                    self.data_rx = None;
                }
            }
        }
        absorbed
    }

    fn rejects_row(&mut self, line: u64, reason: &str) {
        // Rows are user data, not peer messages: log them with the same once-a-minute limit.
        let due = self.cursor.rows_skipped == 1 || self.cursor.rows_skipped.is_power_of_two();
        if due {
            tracing::warn!(
                line,
                reason,
                skipped = self.cursor.rows_skipped,
                "skipped data row"
            );
        }
    }

    fn absorb_pending(&mut self) -> usize {
        if self.pending_y.is_empty() {
            return 0;
        }
        let rows = std::mem::take(&mut self.pending_x);
        let mut y = std::mem::take(&mut self.pending_y);
        let mut x = Mat::from_fn(rows.len(), self.layout.inputs.len(), |i, j| rows[i][j]);
        if let Some(sc) = &self.scaler {
            if let Err(e) = sc.apply_x(&mut x) {
                tracing::error!(error = %e, "standardizing a block failed; block dropped");
                self.committed = self.cursor.clone();
                return 0;
            }
            for v in &mut y {
                *v = sc.scale_y(*v);
            }
        }
        let result = self.agent.handle_block(x.as_ref(), &y);
        self.committed = self.cursor.clone();
        match result {
            Ok(()) => {
                self.last_block_unix_ms = Some(unix_ms());
                self.note_fused_change();
                self.drain_events();
                if self.s.state.is_none() {
                    self.acked_blocks = self.agent.blocks();
                    self.acked_points = self.agent.n_own() as u64;
                }
                1
            }
            Err(e) => {
                tracing::error!(error = %e, rows = y.len(), "block rejected by the agent; dropped");
                0
            }
        }
    }

    fn model_identity(&self) -> ModelIdentity {
        let vocab = self.agent.vocabulary();
        ModelIdentity {
            fleet: self.s.fleet.clone(),
            id: self.s.id,
            fingerprint: vocab.fingerprint().to_string(),
            m: vocab.m(),
            d_latent: vocab.d_latent(),
            inputs: self.layout.inputs.clone(),
            target: self.s.target.clone(),
        }
    }

    fn meta(&self) -> NodeMeta {
        NodeMeta {
            model: self.model_identity(),
            stream: self.committed.clone(),
            blocks: self.agent.blocks(),
            points: self.agent.n_own() as u64,
            round: self.agent.round(),
            written_unix_ms: unix_ms(),
            agent: checkpoint::AgentMeta::default(),
        }
    }

    /// Writes a checkpoint (if `--state`) and acknowledges what it holds.
    fn checkpoint(&mut self) -> Result<()> {
        let Some(dir) = self.s.state.clone() else {
            return Ok(());
        };
        let mut meta = self.meta();
        let n = checkpoint::write(&dir, &self.agent, &mut meta)?;
        self.acked_blocks = meta.blocks;
        self.acked_points = meta.points;
        self.last_ckpt_round = meta.round;
        self.checkpoints += 1;
        self.checkpoint_bytes = n as u64;
        self.last_checkpoint = Some(Instant::now());
        Ok(())
    }

    fn status(&self, with_fused: bool) -> Status {
        let (dropped, oversize) = self.inbound.dropped();
        let queries = self.queries.counts();
        let mut rejected = self.rejects.counts.clone();
        if oversize > 0 {
            rejected.insert("oversize".into(), oversize);
        }
        let rmse_holdout = self.holdout.as_ref().and_then(|h| {
            let p = self.agent.predict(h.x.as_ref(), View::Fused).ok()?;
            let n = h.y.len().max(1) as f64;
            let se: f64 = p
                .mean
                .iter()
                .zip(&h.y)
                .map(|(m, y)| {
                    let m = self.scaler.as_ref().map_or(*m, |s| s.unscale_y(*m));
                    (m - y) * (m - y)
                })
                .sum();
            Some((se / n).sqrt())
        });
        let (fused, own) = if with_fused {
            let (e, pts) = self.agent.fused_excess();
            (
                Some(ExcessJson::new(&e, pts)),
                Some(ExcessJson::new(
                    self.agent.own_excess(),
                    self.agent.n_own() as f64,
                )),
            )
        } else {
            (None, None)
        };
        let proj = self.agent.projection();
        let unscale_std = |v: f64| self.scaler.as_ref().map_or(v, |s| s.unscale_std(v));
        Status {
            model: self.model_identity(),
            fusion: match self.s.agent.fusion {
                FusionRule::Tree => "tree".into(),
                FusionRule::PushSum { .. } => "push-sum".into(),
            },
            projection: self.s.agent.projection.name().into(),
            projection_group: self.s.projection_group.clone(),
            site_memory: (self.s.agent.projection == coolgp::ProjectionMode::Fleet)
                .then(|| self.s.agent.site.memory.name().to_owned()),
            blocks: self.acked_blocks,
            points: self.acked_points,
            rows_skipped: self.committed.rows_skipped,
            stream_ended: self.cursor.ended,
            durable: self.s.state.is_some(),
            fleet_points: self.agent.fleet_points(),
            round: self.agent.round(),
            rounds_run: self.rounds_run,
            neighbors: self.s.neighbors.clone(),
            neighbors_heard: self.agent.neighbors_heard(),
            heard_ms_ago: self
                .last_heard
                .iter()
                .map(|(k, t)| {
                    (
                        *k,
                        u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX),
                    )
                })
                .collect(),
            members_alive: self
                .members
                .lock()
                .map(|m| m.iter().copied().collect())
                .unwrap_or_default(),
            rejected,
            messages_accepted: self.messages_accepted,
            messages_received: self.messages_received,
            bytes_received: self.bytes_received,
            inbound_dropped: dropped,
            messages_sent: self.messages_sent,
            bytes_sent: self.bytes_sent,
            messages_unchanged_held: self.messages_unchanged_held,
            checkpoints: self.checkpoints,
            checkpoint_bytes: self.checkpoint_bytes,
            checkpoint_age_ms: self
                .last_checkpoint
                .map(|t| u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)),
            projection_digest: projection_digest(proj),
            projection_summary: ProjectionSummary::of(proj),
            sigma_s: Some(unscale_std(proj.sigma_s())),
            sigma_n: Some(unscale_std(proj.sigma_n())),
            last_block_unix_ms: self.last_block_unix_ms,
            fused_changed_unix_ms: self.fused_changed_unix_ms,
            rmse_holdout,
            uptime_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            tls: self.auth.is_some(),
            queries_running: queries.running,
            queries_answered: queries.answered,
            queries_refused_busy: queries.refused_busy,
            fused,
            own,
        }
    }

    async fn answer_status(&mut self, q: Query) {
        let with_fused = q.parameters().get("fused").is_some();
        let st = self.status(with_fused);
        let reply = match serde_json::to_vec(&st) {
            Ok(b) => q.reply(q.key_expr().clone(), b).await,
            Err(e) => q.reply_err(e.to_string()).await,
        };
        if let Err(e) = reply {
            tracing::debug!(error = %e, "status reply failed");
        }
    }

    /// A copy of what a predict query needs (taken on the loop, used off it).
    fn query_model(&self) -> QueryModel {
        QueryModel {
            agent: self.agent.clone(),
            inputs: self.layout.inputs.clone(),
            scaler: self.scaler.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coolgp::fuse::Mass;
    use coolgp::learn::{Site, Sites, UNGROUPED};
    use coolgp::model::Fingerprint;
    use coolgp::protocol::Header;

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
