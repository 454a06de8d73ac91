//! The node: one [`Agent`] driven by a zenoh session, a data stream, a round timer and
//! durable checkpoints.
//!
//! [`run`] reads as its four steps: open the data (columns, vocabulary, standardizer,
//! holdout: [`start`]), restore the agent from the newest checkpoint or create it, open the
//! transport (zenoh publishers, subscribers, queryables: [`session`]), then the loop.
//!
//! Each round: absorb up to `--blocks-per-round` blocks from the stream ([`intake`]), write a
//! checkpoint if anything was absorbed (only then are the blocks *acknowledged*: counted in
//! `status`), or every `--checkpoint-every` rounds; tick the agent and publish its messages
//! ([`exchange`]). Between rounds, received messages are drained from the fair inbound queues
//! and queries are answered ([`report`]).

mod calibration;
mod consensus;
mod exchange;
mod heal;
mod intake;
mod members;
mod pooled;
mod report;
mod ros2_query;
mod ros2_side;
mod session;
mod start;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use coolgp::faer::Mat;
use coolgp::{Agent, Event, Excess, FusionRule, Vocabulary};
use coolgp_data::Standardizer;
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;

use crate::auth::Auth;
use crate::checkpoint::{self, AgentMeta, ModelIdentity, NodeMeta, StreamPos};
use crate::config::NodeSettings;
use crate::error::{NodeError, Result};
use crate::inbound::{Inbound, Rejects};
use crate::query::Queries;
use crate::stream::{Item, Layout};

pub use crate::query::{MAX_QUERY_BYTES, MAX_QUERY_ROWS};

/// Loads a vocabulary file (`--vocab FILE`); supplied by the caller (the CLI passes
/// [`coolgp_store::vocab_file::load`]).
pub type VocabLoader<'a> = &'a (dyn Fn(&Path) -> std::result::Result<Vocabulary, String> + Sync);

/// Relative change of the fused excess that counts as a change (convergence timing).
const FUSED_CHANGE_TOL: f64 = 1e-12;

/// The fusion rule's name in the log and the status (`tree`, `push-sum`).
fn fusion_name(f: &FusionRule) -> &'static str {
    match f {
        FusionRule::Tree => "tree",
        FusionRule::PushSum { .. } => "push-sum",
    }
}

/// Rounds by which an agent's round may lead the clock's ([`clock_round`]): it starts at the
/// clock's and ticks at once, then at most once a period, so with the floors it leads by at
/// most 2; a restart resumes at least this far past the clock (start.rs).
const CLOCK_MARGIN: u64 = 3;

/// The round the clock gives at a round period of `round` (`unix ms / round ms`): where a
/// fresh agent's rounds start; an agent's round stays below it plus [`CLOCK_MARGIN`].
fn clock_round(round: std::time::Duration) -> u64 {
    unix_ms() / (round.as_millis().max(1) as u64)
}

/// Phases of a period among which a host's agents are spread (by id).
pub const ROUND_SLOTS: u64 = 8;

/// The first tick of hosted agent `id`'s rounds: the next instant at which the clock (`unix
/// ms`) is at its slot of the round period, `(id mod ROUND_SLOTS) / ROUND_SLOTS` of the way
/// through. The host's agents then tick in [`ROUND_SLOTS`] groups ([`round_ticker`]), so its
/// runtime wakes 8 times a period rather than once for each agent at its own phase (issue
/// 31's idle cost: a settled host of 100 agents spent a fifth of its CPU in the scheduler's
/// switches), and no more than an eighth of its agents publish at once (all at one instant,
/// a hundred agents' messages overflowed the links' queues, which hosted agents drop from).
fn aligned_start(round: std::time::Duration, id: u64) -> tokio::time::Instant {
    let period = round.as_millis().max(1) as u64;
    let slot = (id % ROUND_SLOTS) * period / ROUND_SLOTS;
    let wait = (period + slot - unix_ms() % period) % period;
    tokio::time::Instant::now() + std::time::Duration::from_millis(wait)
}

/// The timer of a node's rounds. A hosted agent's (`coolgp host`) ticks on the clock's phase
/// ([`aligned_start`]) and skips the ticks it missed, so that the phase holds and the host's
/// agents keep waking together; a node of its own ticks from its start and delays a missed
/// tick by a full period (rounds are never back to back).
fn round_ticker(round: std::time::Duration, hosted: Option<u64>) -> tokio::time::Interval {
    let mut ticker = match hosted {
        Some(id) => tokio::time::interval_at(aligned_start(round, id), round),
        None => tokio::time::interval(round),
    };
    ticker.set_missed_tick_behavior(if hosted.is_some() {
        MissedTickBehavior::Skip
    } else {
        MissedTickBehavior::Delay
    });
    ticker
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Held-out rows (`--holdout`) for the status's `rmse_holdout`, inputs standardized.
struct Holdout {
    x: Mat<f64>,
    y: Vec<f64>,
}

/// What the model reads from a row: the column layout, the standardizer, the holdout rows.
struct Inputs {
    layout: Layout,
    scaler: Option<Standardizer>,
    holdout: Option<Holdout>,
}

/// The data stream: the reader thread's channel, the rows of the block being collected, and
/// the stream positions.
struct Intake {
    /// `None` once the stream ended or failed (or with no `--data`).
    rx: Option<mpsc::Receiver<Item>>,
    pending_x: Vec<Vec<f64>>,
    pending_y: Vec<f64>,
    /// Stream position including pending rows.
    cursor: StreamPos,
    /// Stream position after the last absorbed block (what a checkpoint records).
    committed: StreamPos,
    /// The inputs of the latest row, original units (a map's unspanned inputs).
    latest_x: Option<Vec<f64>>,
}

/// Durability: what the newest checkpoint acknowledges, and when it was written.
struct Durability {
    /// Blocks and points acknowledged (in a checkpoint; without `--state`, as absorbed).
    acked_blocks: u64,
    acked_points: u64,
    /// The agent's round at the last checkpoint (the round lease counts from it).
    last_ckpt_round: u64,
    /// Checkpoints written by this process, the size of the last one, and when.
    checkpoints: u64,
    checkpoint_bytes: u64,
    last_checkpoint: Option<Instant>,
    /// What the newest checkpoint holds ([`Node::saved_stamp`]): a lease checkpoint is
    /// skipped while it is unchanged ([`Node::lease_needed`]).
    saved: Option<Saved>,
}

/// What a checkpoint of a node holds, as far as a lease checkpoint would change it: the
/// agent's data version, when its fused model last changed (Unix ms), the pooled kernels
/// taken, and whether it withholds its data.
type Saved = (u64, Option<u64>, u64, bool);

/// The exchange with the neighbours: one publisher each, the fair inbound queues, signatures,
/// duplicate detection, rejects, and who was heard or is alive.
struct Peers {
    publishers: BTreeMap<u64, zenoh::pubsub::Publisher<'static>>,
    /// Per neighbour: the payload last published and the round it went out.
    last_published: BTreeMap<u64, (Arc<Excess>, u64)>,
    /// Per neighbour: the bytes (signed with `--tls`) of the message last published to it,
    /// which a neighbour whose route zenoh lost pulls with a status query (`?msg=<id>`,
    /// [`heal`]).
    /// (zenoh's reference-counted bytes: kept and sent without a copy.)
    last_sent: BTreeMap<u64, zenoh::bytes::ZBytes>,
    inbound: Arc<Inbound>,
    rejects: Rejects,
    /// Signing key and roster (`--tls`): every message out is signed, every one in verified.
    auth: Option<Auth>,
    /// Accepted (round, version) pairs per sender, newest last.
    seen: BTreeMap<u64, VecDeque<(u64, u64)>>,
    last_heard: BTreeMap<u64, Instant>,
    /// Fleet members with a liveliness token (kept by the liveliness subscriber).
    members: Arc<Mutex<BTreeSet<u64>>>,
    /// The neighbours alive at the last round (one that (re)joins is sent its message at
    /// once).
    alive_seen: BTreeSet<u64>,
    /// Signatures of requests for rows answered recently (`--tls`, [`crate::row_auth`]).
    rows_seen: Arc<Mutex<crate::row_auth::Seen>>,
}

/// Traffic counters (status).
#[derive(Default)]
struct Traffic {
    rounds_run: u64,
    messages_sent: u64,
    bytes_sent: u64,
    /// Unchanged tree messages not published (`--resend-every`).
    messages_unchanged_held: u64,
    messages_received: u64,
    bytes_received: u64,
    messages_accepted: u64,
}

/// When the model last changed (status and convergence timing), and log rate limits.
struct Progress {
    started: Instant,
    last_block_unix_ms: Option<u64>,
    fused_changed_unix_ms: Option<u64>,
    /// The fused excess at the last change check.
    fused_last: Option<Excess>,
    degenerate_logged: Option<Instant>,
    /// Messages scaled down by the influence cap, per sender (issue 29).
    capped: BTreeMap<u64, u64>,
}

impl Progress {
    /// Logs what the agent reports (degenerate importance weights at most once a minute).
    fn drain_events(&mut self, agent: &mut Agent) {
        while let Some(e) = agent.poll_event() {
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
                Event::RateCapped {
                    from,
                    claimed,
                    allowed,
                } => {
                    let n = self.capped.entry(from).or_insert(0);
                    if *n == 0 {
                        tracing::warn!(
                            from,
                            claimed,
                            allowed,
                            "a neighbour's message claimed more new rows than --row-rate allows; scaled down"
                        );
                    }
                    *n += 1;
                }
                Event::Capped { from, factor } => {
                    let n = self.capped.entry(from).or_insert(0);
                    if *n == 0 {
                        tracing::warn!(
                            from,
                            factor,
                            "a neighbour's message carried more precision per row than the influence cap allows; scaled down"
                        );
                    }
                    *n += 1;
                }
                _ => {}
            }
        }
    }

    /// Records the time if `agent`'s fused excess moved since the last call.
    fn note_fused_change(&mut self, agent: &Agent) {
        let (e, _) = agent.fused_excess();
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
}

/// One agent as a networked process: the settings, the agent, and its parts (each with one
/// job; the methods are in the submodules by step).
struct Node {
    s: NodeSettings,
    agent: Agent,
    inputs: Inputs,
    intake: Intake,
    durability: Durability,
    peers: Peers,
    traffic: Traffic,
    progress: Progress,
    queries: Queries,
    /// `--local-fit fleet`: the pooled fit of the residual kernel ([`pooled`]).
    pooled: Option<pooled::Pooled>,
    /// The member check (issue 29, [`members`]).
    watch: members::Watch,
    /// Routes declared again to silent live neighbours ([`heal`]).
    heal: heal::Heal,
    /// The fitter's calibration of the fleet's answers ([`calibration`]).
    calibration: calibration::Calibration,
    /// The coverage advertised in the status, and the (data version, kernel fits) it was
    /// computed at ([`Node::refresh_coverage`]).
    advertised: Option<((u64, u64), Option<crate::coverage::CoverageJson>)>,
    /// The node as a ROS 2 participant (`--ros2`, [`ros2_side`]).
    ros2: Option<ros2_side::Ros2Side>,
}

/// Runs a node until SIGTERM/SIGINT (then writes a final checkpoint).
///
/// # Errors
/// Start-up failures (configuration, data header, vocabulary, checkpoint, zenoh) and a failed
/// checkpoint write (the node stops rather than acknowledge data it could not persist).
pub async fn run(s: NodeSettings, loader: VocabLoader<'_>) -> Result<()> {
    let data = start::open_data(&s, loader)?;
    let resumed = start::restore_or_create(&s, &data.vocab, &data.inputs.layout)?;
    let mut rx = start::start_stream(&s, data.opened, &resumed)?;
    let d = data.inputs.layout.inputs.len();
    let grid = match s.ros2.as_ref().and_then(|r| r.map.as_deref()) {
        Some(g) => Some(
            coolgp_ros2::map::MapGrid::parse(g, &data.inputs.layout.inputs)
                .map_err(|e| NodeError::Config(e.to_string()))?,
        ),
        None => None,
    };
    let (mut endpoints, peers) = session::open_transport(&s, &data.vocab, d).await?;
    let ros2 = match &s.ros2 {
        Some(r) => {
            let tx = r.live.as_ref().map(|_| {
                let (tx, live) = mpsc::channel(64 * s.batch.max(16));
                rx = Some(live);
                tx
            });
            let link = crate::ros2::Ros2Link::open(r, tx).await?;
            Some(ros2_side::Ros2Side::new(link, grid, r.every, r.map_fleet))
        }
        None => None,
    };
    session::log_started(&s, &data.vocab, d, peers.auth.as_ref());
    let mut node = Node::new(s, resumed, data.inputs, rx, peers);
    node.ros2 = ros2;
    let result = node.serve(&mut endpoints).await;
    if let Some(side) = node.ros2.take() {
        side.link.close().await;
    }
    endpoints.close().await;
    result
}

/// Runs the agents of a host (`coolgp host`, [`crate::host`]) on one zenoh session until
/// SIGTERM/SIGINT. Every agent's data, checkpoint and key are opened first, so a bad one
/// stops the host before it joins the network, named; then one session (presenting the
/// first agent's certificate under `--tls`), and each agent's declarations and loop as its
/// own task, its log lines in a span naming it. An agent whose loop fails (a checkpoint it
/// cannot write) stops alone; the host reports it when it ends.
///
/// # Errors
/// An agent's start-up failure (named), the session's, or the first agent's loop failure.
pub async fn run_many(host: crate::host::Host, loader: VocabLoader<'_>) -> Result<()> {
    use tracing::Instrument;
    let named = |id: u64| move |e: NodeError| NodeError::Config(format!("agent {id}: {e}"));
    let mut ready = Vec::with_capacity(host.agents.len());
    for s in host.agents {
        let id = s.id;
        let _span = tracing::info_span!("agent", id).entered();
        if s.ros2.is_some() {
            return Err(named(id)(NodeError::Config(
                "ROS 2 (--ros2) is per node: run a ROS 2 agent as `coolgp node`".into(),
            )));
        }
        let data = start::open_data(&s, loader).map_err(named(id))?;
        let resumed =
            start::restore_or_create(&s, &data.vocab, &data.inputs.layout).map_err(named(id))?;
        let auth = match &s.zenoh.tls {
            Some(dir) => Some(Auth::load(dir, &s.fleet, id).map_err(named(id))?),
            None => None,
        };
        ready.push((s, data, resumed, auth));
    }
    let Some(first) = ready.first().map(|r| r.0.id) else {
        return Err(NodeError::Config("a host needs at least one agent".into()));
    };
    let role = crate::transport::Role::Node(first);
    let session = crate::transport::open_host(&host.zenoh, role).await?;
    tracing::info!(
        agents = ready.len(),
        "host started: one session for every agent"
    );
    let mut tasks = tokio::task::JoinSet::new();
    for (s, data, resumed, auth) in ready {
        let id = s.id;
        let rx = start::start_stream(&s, data.opened, &resumed).map_err(named(id))?;
        let d = data.inputs.layout.inputs.len();
        let (mut endpoints, peers) =
            session::declare(session.clone(), false, &s, &data.vocab, d, auth).await?;
        session::log_started(&s, &data.vocab, d, peers.auth.as_ref());
        let mut node = Node::new(s, resumed, data.inputs, rx, peers);
        let task = async move {
            let r = node.serve(&mut endpoints).await;
            endpoints.close().await;
            (id, r)
        };
        tasks.spawn(task.instrument(tracing::info_span!("agent", id)));
    }
    let mut failed = None;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((_, Ok(()))) => {}
            Ok((id, Err(e))) => {
                tracing::error!(agent = id, error = %e, "agent stopped");
                failed.get_or_insert(named(id)(e));
            }
            Err(e) => {
                tracing::error!(error = %e, "an agent's task panicked");
                failed.get_or_insert(NodeError::Config(format!("an agent's task panicked: {e}")));
            }
        }
    }
    if let Err(e) = session.close().await {
        tracing::debug!(error = %e, "closing zenoh session");
    }
    failed.map_or(Ok(()), Err)
}

impl Node {
    fn new(
        s: NodeSettings,
        resumed: start::Resumed,
        inputs: Inputs,
        rx: Option<mpsc::Receiver<Item>>,
        peers: Peers,
    ) -> Self {
        let last_ckpt_round = resumed.agent.round();
        let pooled = pooled::Pooled::for_agent(&resumed.agent);
        Node {
            pooled,
            watch: members::Watch::default(),
            heal: heal::Heal::new(),
            calibration: calibration::Calibration::default(),
            advertised: None,
            ros2: None,
            agent: resumed.agent,
            inputs,
            intake: Intake {
                rx,
                pending_x: Vec::new(),
                pending_y: Vec::new(),
                cursor: resumed.committed.clone(),
                committed: resumed.committed,
                latest_x: None,
            },
            durability: Durability {
                acked_blocks: resumed.acked_blocks,
                acked_points: resumed.acked_points,
                last_ckpt_round,
                checkpoints: 0,
                checkpoint_bytes: 0,
                last_checkpoint: None,
                saved: None,
            },
            peers,
            traffic: Traffic::default(),
            progress: Progress {
                started: Instant::now(),
                last_block_unix_ms: None,
                fused_changed_unix_ms: None,
                fused_last: None,
                degenerate_logged: None,
                capped: BTreeMap::new(),
            },
            queries: Queries::default(),
            s,
        }
    }

    /// The node's life on an open transport: the first checkpoint (the round lease starts
    /// now: a crash before the first periodic checkpoint must not reuse round numbers), the
    /// loop, and the final checkpoint after a clean shutdown.
    async fn serve(&mut self, endpoints: &mut session::Endpoints) -> Result<()> {
        self.note_fused_change();
        self.checkpoint()?;
        self.event_loop(endpoints).await?;
        if self.s.state.is_some() {
            tracing::info!("shutting down: final checkpoint");
        } else {
            tracing::info!("shutting down: no --state, so no checkpoint is written");
        }
        self.checkpoint()
    }

    fn note_fused_change(&mut self) {
        self.progress.note_fused_change(&self.agent);
    }

    fn model_identity(&self) -> ModelIdentity {
        let vocab = self.agent.vocabulary();
        ModelIdentity {
            fleet: self.s.fleet.clone(),
            id: self.s.id,
            fingerprint: vocab.fingerprint().to_string(),
            m: vocab.m(),
            d_latent: vocab.d_latent(),
            inputs: self.inputs.layout.inputs.clone(),
            target: self.s.target.clone(),
        }
    }

    /// Writes a checkpoint (if `--state`) and acknowledges what it holds.
    fn checkpoint(&mut self) -> Result<()> {
        let Some(dir) = self.s.state.clone() else {
            return Ok(());
        };
        let mut meta = NodeMeta {
            model: self.model_identity(),
            stream: self.intake.committed.clone(),
            blocks: self.agent.blocks(),
            points: self.agent.n_own() as u64,
            round: self.agent.round(),
            written_unix_ms: unix_ms(),
            agent: AgentMeta::default(),
        };
        let n = checkpoint::write(&dir, &self.agent, &mut meta)?;
        let saved = self.saved_stamp();
        let d = &mut self.durability;
        d.acked_blocks = meta.blocks;
        d.acked_points = meta.points;
        d.last_ckpt_round = meta.round;
        d.checkpoints += 1;
        d.checkpoint_bytes = n as u64;
        d.last_checkpoint = Some(Instant::now());
        d.saved = Some(saved);
        Ok(())
    }

    /// What a checkpoint written now would hold ([`Saved`]).
    fn saved_stamp(&self) -> Saved {
        (
            self.agent.version(),
            self.progress.fused_changed_unix_ms,
            self.pooled.as_ref().map_or(0, |p| p.fits),
            self.agent.is_withheld(),
        )
    }

    /// Whether a lease checkpoint (`--checkpoint-every` rounds without one) must be written.
    /// Not when nothing was learned since the newest checkpoint and the clock alone guards
    /// the round numbers (issue 31: in a settled fleet of 1,000 agents, ten full checkpoints
    /// a second were a fifth of the hosts' CPU): tree fusion (push-sum's running totals move
    /// every round), the same [`Saved`] stamp, and the agent's round behind the clock's round
    /// plus [`CLOCK_MARGIN`], from which a restart resumes if it is ahead of the lease
    /// (start.rs): rounds start from the clock and advance at most once a period.
    fn lease_needed(&self) -> bool {
        let tree = matches!(self.s.agent.fusion, FusionRule::Tree);
        let unchanged = self.durability.saved == Some(self.saved_stamp());
        !(tree && unchanged && self.agent.round() < clock_round(self.s.round) + CLOCK_MARGIN)
    }

    async fn event_loop(&mut self, endpoints: &mut session::Endpoints) -> Result<()> {
        let inbound = Arc::clone(&self.peers.inbound);
        let hosted = endpoints.is_hosted().then_some(self.s.id);
        let mut ticker = round_ticker(self.s.round, hosted);
        let shutdown = shutdown_signal();
        tokio::pin!(shutdown);
        let mut calls = self.ros2.as_mut().and_then(|r| r.link.take_calls());
        loop {
            tokio::select! {
                biased;
                () = &mut shutdown => return Ok(()),
                _ = ticker.tick() => {
                    self.on_round().await?;
                    self.heal_routes(endpoints).await;
                    self.pooled_fit_step(endpoints.session());
                    self.ros2_step(endpoints.session()).await;
                }
                q = endpoints.status.recv_async() => {
                    if let Ok(q) = q {
                        self.answer_status(q).await;
                    }
                }
                q = endpoints.predict.recv_async() => {
                    if let Ok(q) = q {
                        self.know_requester(&q);
                        self.queries.submit(q, || self.query_model());
                    }
                }
                () = inbound.notify.notified() => self.drain_inbound(&inbound),
                call = ros2_query::next_call(&mut calls) => {
                    self.answer_ros2_call(call, endpoints.session());
                }
            }
        }
    }
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
