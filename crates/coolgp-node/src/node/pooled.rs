//! `--local-fit fleet` on a node: one residual kernel for the fleet, as in the simulator. The
//! node with the lowest live id (the *fitter*) makes the pooled fits: after a round, when the
//! fused model has grown by [`crate::pooled_fit::POOL_GROWTH`] since its last one, or grew and
//! then settled ([`due`]), it gathers every node's memory sample and fits the kernel on them
//! ([`crate::pooled_fit`]) on other threads. Every other node polls the fitter's status every
//! [`FOLLOW_EVERY`] and takes its kernel whenever the fitter has made a new fit. A later round
//! applies a result; one job at a time.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use coolgp::local::groups::GROUP_OPTIONS;
use coolgp::local::pool::{cold_due, COLD_GROWTH};
use coolgp::local::{FitSample, LocalFit, ResidualFamily, ResidualKernel, ResidualKind};
use coolgp::Vocabulary;
use tokio::sync::oneshot;

use super::consensus::ConsensusJob;
use super::Node;
use crate::auth::PublicKey;
use crate::auth::Signer;
use crate::client::fetch_status;
use crate::family_task::family_on_the_fleet_task;
use crate::fit_members::{near_routes, spread, FIT_MEMBERS, NEAR_MEMBERS};
use crate::kernel_auth::{kernel_of_words, taken_from, ConsensusClaim, KernelClaim};
use crate::pooled_fit::{
    anchors, cap_samples, due, fetch_samples, fit, fit_near, inv_scale, near_groups, near_request,
    to_sample, SampleRequest, Start, MAX_SAMPLE_ROWS, NEAR_ROWS, SAMPLE_TIMEOUT,
};
use crate::routing::briefs;
use crate::status::{PredictRequest, Status};

/// How often a node that is not the fitter asks the fitter's status for its kernel, at
/// first and whenever the fleet's points change or a new kernel is taken.
pub const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// Followers per second the fitter is asked by at most (a fleet of n members asks every
/// `max(1, n / FOLLOW_SCALE)` seconds at the most often).
pub const FOLLOW_SCALE: u32 = 64;

/// The longest wait between two asks while nothing changes: each ask that brings nothing new
/// doubles the wait up to this (issue 31: a thousand followers asking one fitter every second
/// were most of a converged fleet's idle cost).
pub const MAX_FOLLOW_EVERY: Duration = Duration::from_secs(16);

/// Each family's last fit by this fitter, family → parameters ([`Start::chains`]).
type Chains = Vec<(ResidualFamily, Vec<f64>)>;

/// A finished job's kernel.
struct Outcome {
    /// Its family.
    family: ResidualFamily,
    /// Its parameters.
    params: Vec<f64>,
    /// When taken from a fitter: its id and fit count.
    from: Option<(u64, u64)>,
    /// After this node's fit on neighbourhood groups: each family's last fit, the chains of
    /// its next exploration ([`coolgp::local::select::GroupedFit::keep_chains`]).
    chains: Option<Chains>,
}

impl Outcome {
    /// A kernel alone (no chains), from `from` if taken from a fitter.
    fn of(family: ResidualFamily, params: Vec<f64>, from: Option<(u64, u64)>) -> Self {
        Self {
            family,
            params,
            from,
            chains: None,
        }
    }
}

/// The pooled fit's state on a node.
pub(super) struct Pooled {
    /// The agents' initial kernel (the cold start).
    initial: ResidualKernel,
    /// Fused points at the last pooled fit started (0: none yet in this process).
    last_points: f64,
    /// Pooled fits made or taken by this process (status `local_pooled_fits`).
    pub(super) fits: u64,
    /// The fitter and its fit count whose kernel this node holds (`(_, 0)`: none). Another
    /// fitter's kernel (the lowest live id changed: a node joined or left) is taken at its
    /// first fit, whatever the count.
    followed: (u64, u64),
    /// The wait before the next ask ([`FOLLOW_EVERY`] .. [`MAX_FOLLOW_EVERY`]), and the
    /// fleet's points when it was set.
    follow_wait: (Duration, f64),
    /// The running job is an ask of the fitter (not this node's own fit).
    following: bool,
    /// When (Unix ms) this node last asked the fitter (`None`: never); compared with the
    /// fused model's last change.
    asked_at_ms: Option<u64>,
    /// The running job's result, if one runs.
    pending: Option<oneshot::Receiver<Option<Outcome>>>,
    /// Each family's last fit by this node as the fitter: an exploring fit continues them
    /// (docs/LOCAL.md §12c; the simulator's `keep_chains`).
    chains: Chains,
    /// `--local-fit agent`: the fitter's job is the consensus of the members' own fits
    /// ([`super::consensus`]) and a kernel is adopted with the node's own fit schedule kept.
    consensus: bool,
    /// The consensus this node last made or took (`--local-fit agent`; its status's
    /// `local_consensus`, which followers take).
    made: Option<(ResidualFamily, Vec<f64>)>,
}

impl Pooled {
    /// The state for `agent`'s node, `None` unless its memory is on with a learned kernel
    /// (fitted by the fleet, or by each node with the fleet's consensus).
    pub(super) fn for_agent(agent: &coolgp::Agent) -> Option<Self> {
        let local = agent.config().local;
        (local.is_on() && local.kernel == ResidualKind::Learned).then(|| Self {
            consensus: local.fit == LocalFit::Agent,
            made: None,
            initial: ResidualKernel::initial(ResidualKind::Learned, agent.projection()),
            last_points: 0.0,
            fits: 0,
            followed: (0, 0),
            follow_wait: (FOLLOW_EVERY, 0.0),
            following: false,
            asked_at_ms: None,
            pending: None,
            chains: Vec::new(),
        })
    }

    /// The consensus this node last made or took (`--local-fit agent`), if any.
    pub(super) fn consensus_made(&self) -> Option<(ResidualFamily, &[f64])> {
        self.made.as_ref().map(|(f, p)| (*f, &p[..]))
    }
}

impl Node {
    /// Applies a finished job; starts the next one when due (module doc).
    /// Without a pooled fit (no memory, or the agents' own fits) the member check runs alone,
    /// on the memory's rows or without a memory on the newest rows (issue 29).
    pub(super) fn pooled_fit_step(&mut self, session: &zenoh::Session) {
        let me = self.s.id;
        let fitter = self
            .peers
            .members
            .lock()
            .ok()
            .and_then(|m| m.first().copied())
            .map_or(me, |low| low.min(me));
        if self.pooled.is_none() {
            let rows = self.agent.local_points() + self.agent.recent_rows().len();
            if rows > 0 {
                self.member_check_step(session, fitter);
            }
            return;
        }
        if !self.pooled_result() || self.agent.local_points() == 0 {
            return;
        }
        self.member_check_step(session, fitter);
        let consensus = self.pooled.as_ref().is_some_and(|p| p.consensus);
        if fitter == me {
            self.start_fit(session);
            // The calibration reads rows; a fleet of own fits shares none.
            if !consensus {
                self.calibration_step(session);
            }
        } else {
            self.follow(session, fitter);
        }
    }

    /// Takes a finished job's kernel; false while a job runs.
    fn pooled_result(&mut self) -> bool {
        let Some(p) = self.pooled.as_mut() else {
            return false;
        };
        let Some(rx) = p.pending.as_mut() else {
            return true;
        };
        let outcome = match rx.try_recv() {
            Err(oneshot::error::TryRecvError::Empty) => return false,
            Err(oneshot::error::TryRecvError::Closed) => None,
            Ok(outcome) => outcome,
        };
        p.pending = None;
        if std::mem::take(&mut p.following) {
            // Nothing new from the fitter: ask half as often, down to MAX_FOLLOW_EVERY.
            let wait = match outcome {
                Some(_) => FOLLOW_EVERY,
                None => (2 * p.follow_wait.0).min(MAX_FOLLOW_EVERY),
            };
            p.follow_wait.0 = wait;
        }
        if let Some(Outcome {
            family,
            params,
            from,
            chains,
        }) = outcome
        {
            if let Some(chains) = chains {
                p.chains = chains;
            }
            let taken = match p.consensus {
                true => self.agent.adopt_local_kernel(family, &params),
                false => self.agent.set_local_kernel(family, &params),
            };
            match taken {
                Ok(()) => {
                    p.fits += 1;
                    if p.consensus {
                        p.made = Some((family, params.clone()));
                    }
                    if let Some(from) = from {
                        p.followed = from;
                    }
                    let family = family.name();
                    tracing::info!(family, ?params, from = ?from, "pooled residual kernel taken");
                }
                Err(e) => tracing::warn!(error = %e, "pooled residual kernel not applied"),
            }
        }
        true
    }

    /// The fitter's step: a pooled fit when due.
    fn start_fit(&mut self, session: &zenoh::Session) {
        let now = self.agent.fleet_points();
        let settled = self
            .progress
            .fused_changed_unix_ms
            .map_or(0, |t| super::unix_ms().saturating_sub(t));
        let Some(p) = self.pooled.as_mut() else {
            return;
        };
        if !due(p.last_points, now, settled) {
            return;
        }
        if p.consensus {
            p.last_points = now;
            self.start_consensus(session);
            return;
        }
        let members = self.peers.members.lock().map_or(1, |m| m.len()).max(1);
        let first = self.agent.local().fit_state().0 == 0;
        let warm = (!first).then(|| self.agent.local().kernel().clone());
        let start = Start {
            warm,
            initial: p.initial.clone(),
            cold: cold_due(p.last_points as u64, now as u64, COLD_GROWTH),
            families: self.s.local_families.clone(),
            chains: p.chains.clone(),
        };
        tracing::info!(
            fused_points = now,
            members,
            cold = start.cold,
            "pooled fit: started"
        );
        p.last_points = now;
        let signer = self
            .peers
            .auth
            .as_ref()
            .map(|a| (a.signer.clone(), self.s.id));
        let job = Job {
            session: session.clone(),
            fleet: self.s.fleet.clone(),
            signer,
            members,
            inputs: self.inputs.layout.inputs.clone(),
            scaler: self.inputs.scaler.clone(),
            vocab: self.agent.vocabulary().clone(),
            start,
            exclude: self.watch.suspects().to_vec(),
        };
        spawn_job(p, job.run());
    }

    /// The fitter's consensus of the members' own fits ([`ConsensusJob`]), off the loop.
    fn start_consensus(&mut self, session: &zenoh::Session) {
        let me = self.s.id;
        let live: Vec<u64> = self
            .peers
            .members
            .lock()
            .map_or(Vec::new(), |m| m.iter().copied().collect());
        let asked = ConsensusJob::asked(&live, me, self.watch.suspects());
        let members = asked
            .into_iter()
            .map(|id| {
                let key = self.peers.auth.as_mut().map(|a| a.roster.key_reloading(id));
                (id, key)
            })
            .collect();
        let local = self.agent.local();
        let own = (local.fit_state().0 > 0)
            .then(|| (local.kernel().family(), local.kernel().params().to_vec()));
        let job = ConsensusJob {
            session: session.clone(),
            fleet: self.s.fleet.clone(),
            members,
            own,
            d: local.kernel().d(),
        };
        let Some(p) = self.pooled.as_mut() else {
            return;
        };
        spawn_job(p, async move {
            let made = job.run().await;
            made.map(|(family, params)| Outcome::of(family, params, None))
        });
    }

    /// A follower's step: the fitter's kernel if it made a new fit, asked every
    /// [`FOLLOW_EVERY`] while anything changes and less often, up to [`MAX_FOLLOW_EVERY`],
    /// while nothing does.
    fn follow(&mut self, session: &zenoh::Session, fitter: u64) {
        let points = self.agent.fleet_points();
        // A large fleet asks less often (issue 31): at least a second per FOLLOW_SCALE
        // members, so the fitter answers about FOLLOW_SCALE asks a second whatever the size.
        let live = self.peers.members.lock().map_or(1, |m| m.len()) as u32;
        let floor = FOLLOW_EVERY * (live / FOLLOW_SCALE).max(1);
        let Some(p) = self.pooled.as_mut() else {
            return;
        };
        if points != p.follow_wait.1 {
            p.follow_wait = (FOLLOW_EVERY, points);
        }
        let now = super::unix_ms();
        let wait = u64::try_from(p.follow_wait.0.max(floor).as_millis()).unwrap_or(u64::MAX);
        if p.asked_at_ms.is_some_and(|t| now.saturating_sub(t) < wait) {
            return;
        }
        // Idle (issue 31): at the longest wait, with the fused model unchanged since the last
        // ask, the fitter (which fits only after its fused model changes) has nothing new.
        let fused_at = self.progress.fused_changed_unix_ms.unwrap_or(u64::MAX);
        if p.follow_wait.0 >= MAX_FOLLOW_EVERY && p.asked_at_ms.is_some_and(|t| fused_at < t) {
            return;
        }
        p.asked_at_ms = Some(now);
        p.following = true;
        let held = match p.followed {
            (id, n) if id == fitter => n,
            _ => 0,
        };
        let (session, fleet) = (session.clone(), self.s.fleet.clone());
        // A squared exponential's parameter count, 2 + d (whatever family this node holds).
        let len = 2 + self.agent.local().kernel().d();
        // With --tls, the fitter's roster key (None: not in the roster, nothing is taken; a
        // fitter added with `certs --add` since start-up is found by a reload).
        let key = self
            .peers
            .auth
            .as_mut()
            .map(|a| a.roster.key_reloading(fitter));
        let consensus = p.consensus;
        let (tx, rx) = oneshot::channel();
        p.pending = Some(rx);
        tokio::spawn(async move {
            let st = fetch_status(&session, &fleet, fitter, false, SAMPLE_TIMEOUT).await;
            // A fleet of own fits takes the fitter's consensus, not the kernel it holds now
            // (its own refit since).
            let words = |s: &Status| match consensus {
                true => s.local_consensus.clone(),
                false => s.local_kernel.clone(),
            };
            let taken = st
                .ok()
                .filter(|s| s.local_pooled_fits > held && !words(s).is_empty())
                .filter(|s| signed_by(key, &fleet, fitter, s, consensus))
                .and_then(|s| match kernel_of_words(&words(&s), len) {
                    Ok((family, p)) => {
                        let from = Some((fitter, s.local_pooled_fits));
                        Some(Outcome::of(family, p.to_vec(), from))
                    }
                    Err(why) => {
                        tracing::warn!(fitter, "pooled residual kernel refused: {why}");
                        None
                    }
                });
            let _ = tx.send(taken);
        });
    }
}

/// Runs this node's own job (a pooled fit or a consensus) off the loop; its kernel lands in
/// `p.pending`, applied by a later round.
fn spawn_job<F>(p: &mut Pooled, job: F)
where
    F: std::future::Future<Output = Option<Outcome>> + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    p.pending = Some(rx);
    tokio::spawn(async move {
        let _ = tx.send(job.await);
    });
}

/// Whether a follower may take the kernel (or, `consensus`, the consensus) of `fitter`'s
/// status `s` ([`taken_from`]: with `--tls` only if signed by the fitter's roster key).
fn signed_by(
    key: Option<Option<PublicKey>>,
    fleet: &str,
    fitter: u64,
    s: &Status,
    consensus: bool,
) -> bool {
    if consensus {
        let claim = ConsensusClaim::of(fleet, fitter, s);
        let sig = &s.local_consensus_sig;
        return taken_from(key, fitter, &claim, sig, "consensus residual kernel");
    }
    let claim = KernelClaim::of(fleet, fitter, s);
    taken_from(
        key,
        fitter,
        &claim,
        &s.local_kernel_sig,
        "pooled residual kernel",
    )
}

/// One pooled fit, off the loop.
struct Job {
    session: zenoh::Session,
    fleet: String,
    /// Signs the requests for rows in a TLS fleet.
    signer: Option<(Arc<Signer>, u64)>,
    /// The fleet's live members (liveliness tokens) when the fit started.
    members: usize,
    inputs: Vec<String>,
    scaler: Option<coolgp_data::Standardizer>,
    vocab: std::sync::Arc<Vocabulary>,
    start: Start,
    /// The suspects, whose rows stay out of the fit (issue 29).
    exclude: Vec<u64>,
}

impl Job {
    /// Gathers the anchors and the rows near them, converts them, fits on neighbourhood
    /// groups on a blocking thread (docs/LOCAL.md §11); if no node offers rows near the
    /// anchors, the pooled fit of §9 on the anchors. `None` if nothing could be fitted.
    ///
    /// Who is asked (issue 31, [`crate::fit_members`]): in a fleet of more than
    /// [`NEAR_MEMBERS`] members the fitter reads every member's brief status (its coverage)
    /// in one get; the anchors (each asked member's share of
    /// [`GROUP_OPTIONS`]`.anchors`, the even ones fit, the odd ones scored) come from at most
    /// [`FIT_MEMBERS`] members spread over the field, and each anchor's near rows from its own
    /// member and the members whose coverage is nearest it.
    ///
    /// Where the groups scored more than one family, the family is chosen on the fleet query's
    /// own task ([`family_on_the_fleet_task`]); the outcome carries each family's last fit
    /// (the chains).
    async fn run(self) -> Option<Outcome> {
        let briefs = if self.members > NEAR_MEMBERS {
            match briefs(&self.session, &self.fleet, SAMPLE_TIMEOUT).await {
                Ok((b, _)) => b,
                Err(e) => {
                    tracing::warn!(error = %e, "pooled fit: the members' coverage unread; asking all");
                    BTreeMap::new()
                }
            }
        } else {
            BTreeMap::new()
        };
        let chosen = spread(&briefs, &self.inputs, &self.exclude, FIT_MEMBERS);
        let asked = chosen.as_ref().map_or(self.members, Vec::len).max(1);
        let request = PredictRequest {
            fit_sample: Some(GROUP_OPTIONS.anchors.div_ceil(asked).max(2)),
            route: chosen.map(|ids| ids.into_iter().map(|id| (id, Vec::new())).collect()),
            ..PredictRequest::default()
        };
        let samples = cap_samples(self.gather(&request).await, MAX_SAMPLE_ROWS);
        let anchors = anchors(&samples);
        let d = self.inputs.len();
        let inv = inv_scale(&anchors, d);
        let mut near = near_request(&anchors, &self.inputs, self.scaler.as_ref(), &inv);
        let owners: Vec<u64> = anchors.iter().map(|a| a.node).collect();
        let routes = near_routes(&briefs, &self.exclude, &self.inputs, &near.x, &owners);
        tracing::info!(
            samples = samples.len(),
            anchors = anchors.len(),
            near_members = routes.as_ref().map_or(self.members, BTreeMap::len),
            "pooled fit: anchors gathered"
        );
        near.route.clone_from(&routes);
        let near_rows = self.gather(&near).await;
        tracing::info!(
            nodes = near_rows.len(),
            "pooled fit: rows near the anchors gathered"
        );
        // The rows the warm kernel claims are correlated with each anchor (its own metric,
        // 1/ℓ in standardized units), so the groups can test its claims (docs/LOCAL.md §11).
        let claimed = match &self.start.warm {
            Some(w) if !near_rows.is_empty() => {
                // The warm kernel's metric (the sum's short part).
                let kernel = w.input_scale();
                let mut req = near_request(&anchors, &self.inputs, self.scaler.as_ref(), &kernel);
                if let Some(n) = req.near.as_mut() {
                    n.k = NEAR_ROWS + GROUP_OPTIONS.own;
                }
                req.route.clone_from(&routes);
                Some(self.gather(&req).await)
            }
            _ => None,
        };
        let (incumbent, chains) = (self.start.incumbent(), self.start.chains.clone());
        let (start, vocab) = (self.start, self.vocab);
        let fitted = tokio::task::spawn_blocking(move || {
            let both = (&near_rows, claimed.as_ref());
            let (fit_groups, held) =
                near_groups(&anchors, both, routes.as_ref(), &inv, &GROUP_OPTIONS);
            if fit_groups.is_empty() || held.is_empty() {
                tracing::warn!("pooled fit: no rows near the anchors; the spaced pooled fit");
                let samples: Vec<FitSample> = samples.into_values().collect();
                let spaced = fit(&start, &vocab, &samples);
                return spaced.map(|(family, params)| Err(Outcome::of(family, params, None)));
            }
            fit_near(&start, (&fit_groups, &held)).map(Ok)
        })
        .await
        .ok()
        .flatten()?;
        let grouped = match fitted {
            Ok(g) => g,
            Err(spaced) => return Some(spaced),
        };
        let signing = self.signer.as_ref().map(|(s, id)| (&**s, *id));
        let asked = (&self.exclude[..], self.members);
        let (session, fleet) = (&self.session, &self.fleet);
        let g = family_on_the_fleet_task(session, fleet, signing, asked, grouped, incumbent).await;
        let mut kept = chains;
        g.keep_chains(&mut kept);
        Some(Outcome {
            family: g.family,
            params: g.params,
            from: None,
            chains: Some(kept),
        })
    }

    /// Each node's reply to `request` in this node's standardized units, by node id; replies
    /// that are refused or cannot be converted are logged and left out, and so are the
    /// suspects'.
    async fn gather(&self, request: &PredictRequest) -> BTreeMap<u64, FitSample> {
        let signing = self.signer.as_ref().map(|(s, id)| (&**s, *id));
        let request = SampleRequest::of(request, &self.fleet, signing, super::unix_ms());
        let (rows, dropped) =
            fetch_samples(&self.session, &self.fleet, &request, SAMPLE_TIMEOUT).await;
        for (peer, why) in dropped {
            tracing::warn!(%peer, %why, "pooled fit: sample dropped");
        }
        rows.iter()
            .filter(|(id, _)| !self.exclude.contains(id))
            .filter_map(
                |(&id, r)| match to_sample(r, &self.inputs, self.scaler.as_ref()) {
                    Ok(s) => Some((id, s)),
                    Err(why) => {
                        tracing::warn!(agent = id, %why, "pooled fit: sample left out");
                        None
                    }
                },
            )
            .collect()
    }
}
