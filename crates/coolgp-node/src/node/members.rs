//! The member check on nodes (issue 29, docs/MEMBERS.md §5). Every [`CHECK_ROUNDS`] rounds (up
//! to [`MAX_CHECK_ROUNDS`] while nothing changes) a node
//! reads the own excesses of up to [`PEERS`] other members (their `?fused` status, rotating
//! through the members) and reports in its status its own evidence: its memory rows under
//! each peer's own model, the best-agreeing peer's ([`best_agreement`]). The fitter (the
//! lowest live id, as for the pooled fit) also reads every member's reported evidence,
//! judges them ([`judge`]) and reports the suspects in its status, signed under `--tls`
//! ([`SuspectsClaim`]); every other node takes the verdict from the fitter's status. A node
//! that finds itself among the suspects withholds its own data from its messages
//! ([`coolgp::Agent::set_withheld`]) until a verdict clears it; the fitter leaves the
//! suspects' rows out of its pooled fits. This trusts each node's software to report its own
//! evidence and to withhold itself: it contains a broken sensor, not a lying member.

use std::collections::BTreeMap;

use coolgp::members::{best_agreement, check_rows, judge, CheckOptions, Evidence, Standing};
use coolgp::Excess;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use super::Node;
use crate::auth::PublicKey;
use crate::client::{fetch_own, fetch_status};
use crate::kernel_auth::{taken_from, Claim, SuspectsClaim};
use crate::pooled_fit::SAMPLE_TIMEOUT;
use crate::status::{MemberJson, Status};

/// How often (in the node's rounds) a node reads its peers and the fitter checks the members
/// while anything changes; a reading still running when the next is due delays it.
pub const CHECK_ROUNDS: u64 = 2;

/// The longest interval between readings: while nothing changes (the same peers' excesses,
/// the same verdict, no new own data) the interval doubles up to this, so a converged, idle
/// fleet reads rarely (issue 31: 16 made the readings most of a 1,000-agent fleet's idle
/// cost); any change brings it back to [`CHECK_ROUNDS`].
pub const MAX_CHECK_ROUNDS: u64 = 64;

/// Members per round of the shortest interval between readings: a fleet of n members reads
/// at most every `max(CHECK_ROUNDS, n / SCALE)` rounds (1,000 members: every 15 rounds; so
/// the fleet's readings per round stay at about `SCALE · PEERS`, not `n · PEERS / 2`).
pub const SCALE: u64 = 64;

/// Peers whose own models a node's rows are checked against.
pub const PEERS: usize = 4;

/// A verdict: suspects, check count, judge, signature (empty: the judge signs at status time).
type Verdict = (Vec<u64>, u64, u64, Vec<u8>);

/// What one round of reading brought: the peers' own excesses and a verdict, if any.
type Reading = (BTreeMap<u64, Excess>, Option<Verdict>);

/// The member check's state on a node.
#[derive(Default)]
pub(super) struct Watch {
    /// The suspects of the last verdict taken.
    suspects: Vec<u64>,
    /// That verdict's check count (0: none yet).
    checks: u64,
    /// Who judged it.
    by: Option<u64>,
    /// Its signature when taken from the fitter (this node signs its own at status time).
    sig: Vec<u8>,
    /// The peers' own excesses last read.
    peers: BTreeMap<u64, Excess>,
    /// Readings started (rotates the peers read).
    readings: u64,
    /// The round (this process's `rounds_run`) from which the next reading is due.
    next_round: u64,
    /// Rounds between readings now ([`CHECK_ROUNDS`] .. [`MAX_CHECK_ROUNDS`]).
    interval: u64,
    /// The agent's data version and pooled kernels taken at the last reading
    /// ([`Node::data_stamp`]).
    seen_version: u64,
    /// A digest of each peer's own excess as last read (whatever subset a reading reads).
    seen: BTreeMap<u64, u64>,
    /// The round (this process's `rounds_run`) at which this node last began to withhold its
    /// data.
    withheld_since: Option<u64>,
    /// The running reading.
    pending: Option<oneshot::Receiver<Reading>>,
    /// When (Unix ms) the last reading started.
    read_at_ms: u64,
    /// This node's own evidence, measured when a reading is applied (a status call reads it:
    /// measuring it per call made a converged fleet's status traffic its main cost).
    evidence: Option<MemberJson>,
}

impl Watch {
    /// The suspects of the last verdict taken.
    pub(super) fn suspects(&self) -> &[u64] {
        &self.suspects
    }
}

impl Node {
    /// This node's own evidence (status `member`) as last measured ([`Node::measure_evidence`],
    /// at each reading of its peers).
    pub(super) fn own_member_evidence(&self) -> Option<MemberJson> {
        self.watch.evidence
    }

    /// This node's own evidence under its peers' own models, in original units (`None`
    /// before any peer was read or without memory rows).
    fn measure_evidence(&self) -> Option<MemberJson> {
        let opts = CheckOptions::default();
        let (x, y) = check_rows(&self.agent, &opts)?;
        let preds = self
            .watch
            .peers
            .iter()
            .filter(|(id, _)| !self.watch.suspects.contains(id))
            .filter_map(|(_, e)| self.agent.predict_given(x.as_ref(), e).ok());
        let prior_var = self.agent.projection().sigma_s().powi(2);
        let e = best_agreement(&y, preds, prior_var, &opts)?;
        let sq = |v: f64| {
            self.inputs
                .scaler
                .as_ref()
                .map_or(v, |s| s.unscale_std(v.sqrt()).powi(2))
        };
        let finite = |v: f64| v.is_finite().then_some(v);
        Some(MemberJson {
            rows: e.rows,
            informed: e.informed,
            score: finite(sq(e.score)),
            z2: finite(e.z2),
        })
    }

    /// What the evidence depends on besides the peers: the agent's data version plus the
    /// pooled residual kernels taken (a new kernel re-measures every member).
    fn data_stamp(&self) -> u64 {
        let kernels = self.pooled.as_ref().map_or(0, |p| p.fits);
        self.agent
            .version()
            .wrapping_add(kernels.wrapping_mul(1 << 40))
    }

    /// One step of the member check (module doc): apply a finished reading; start the next
    /// every [`CHECK_ROUNDS`] rounds, as the fitter (`fitter == self`) or a follower.
    pub(super) fn member_check_step(&mut self, session: &zenoh::Session, fitter: u64) {
        if let Some(rx) = self.watch.pending.as_mut() {
            match rx.try_recv() {
                Err(oneshot::error::TryRecvError::Empty) => return,
                Err(oneshot::error::TryRecvError::Closed) => {}
                Ok((peers, verdict)) => {
                    // A peer read for the first time is no change: in a fleet of 1,000 the
                    // readings rotate through the members 4 at a time, and counting each first
                    // sight as one kept the interval at its shortest for an hour (issue 31:
                    // most of a settled 1,000-agent fleet's idle CPU, seen in perf).
                    let mut same_peers = true;
                    for (id, e) in &peers {
                        let d = digest(e);
                        same_peers &= self.watch.seen.insert(*id, d).is_none_or(|was| was == d);
                    }
                    let same_verdict = verdict.as_ref().is_none_or(|v| v.0 == self.watch.suspects);
                    // A new pooled kernel changes every member's evidence, as new data does.
                    let same_data = self.data_stamp() == self.watch.seen_version;
                    self.watch.seen_version = self.data_stamp();
                    self.watch.interval = if same_peers && same_verdict && same_data {
                        (2 * self.watch.interval).clamp(CHECK_ROUNDS, MAX_CHECK_ROUNDS)
                    } else {
                        CHECK_ROUNDS
                    };
                    // An idle follower's reading brings the verdict alone: its evidence stands.
                    if !peers.is_empty() {
                        self.watch.peers = peers;
                        self.watch.evidence = self.measure_evidence();
                    }
                    if let Some(v) = verdict {
                        self.take_verdict(v);
                    }
                }
            }
            self.watch.pending = None;
        }
        if self.traffic.rounds_run < self.watch.next_round {
            return;
        }
        // A large fleet reads less often (issue 31): at least one round per SCALE members, so
        // the fleet's readings per round stay bounded whatever its size.
        let live = self.peers.members.lock().map_or(1, |m| m.len()) as u64;
        let floor = CHECK_ROUNDS.max(live / SCALE);
        self.watch.next_round = self.traffic.rounds_run + self.watch.interval.max(floor);
        // Idle (issue 31): at the longest interval, with neither this node's fused model nor
        // its data changed since the last reading, nobody's own excess changed (on a tree the
        // fused model is their sum) and no reading could bring anything new. Not while a
        // suspect is held: its data leave the fused models, so its repaired rows show only in
        // its evidence, which a reading must bring for it to be readmitted.
        // A follower still asks the fitter's verdict then (one status get), without reading
        // its peers: the fitter may mark a member after the followers went idle, and a
        // follower that stopped asking would never learn it (node_members under load). The
        // fitter still judges then (one brief-status request, without reading its peers): a
        // member's own evidence may first arrive after the fitter went idle, which nothing
        // the fitter watches would show (node_members without memory, 1 run in 7).
        let me = self.s.id;
        let fused_at = self.progress.fused_changed_unix_ms.unwrap_or(u64::MAX);
        let idle = self.watch.suspects.is_empty()
            && self.watch.interval >= MAX_CHECK_ROUNDS
            && fused_at < self.watch.read_at_ms
            && self.data_stamp() == self.watch.seen_version;
        self.watch.read_at_ms = super::unix_ms();
        self.watch.readings += 1;
        let others: Vec<u64> = self
            .peers
            .members
            .lock()
            .map(|m| m.iter().copied().filter(|&i| i != me).collect())
            .unwrap_or_default();
        // Up to PEERS others, rotating through the members from one reading to the next.
        let start = (self.watch.readings as usize * PEERS) % others.len().max(1);
        let read = if idle { 0 } else { PEERS.min(others.len()) };
        let peers: Vec<u64> = others
            .iter()
            .cycle()
            .skip(start)
            .take(read)
            .copied()
            .collect();
        let judging = (fitter == me).then(|| Judging {
            me,
            own: self.own_member_evidence(),
            members: others.clone(),
            was: self.watch.suspects.clone(),
            checks: self.watch.checks + 1,
        });
        let follow = (fitter != me).then(|| Following {
            fitter,
            held: (self.watch.by, self.watch.checks),
            key: self
                .peers
                .auth
                .as_mut()
                .map(|a| a.roster.key_reloading(fitter)),
        });
        let (tx, rx) = oneshot::channel();
        self.watch.pending = Some(rx);
        let (session, fleet) = (session.clone(), self.s.fleet.clone());
        tokio::spawn(async move {
            let read = read_peers(&session, &fleet, &peers).await;
            let verdict = match (judging, follow) {
                (Some(j), _) => Some(j.judge(&session, &fleet).await),
                (None, Some(f)) => f.verdict(&session, &fleet).await,
                (None, None) => None,
            };
            let _ = tx.send((read, verdict));
        });
    }

    /// Takes a verdict: logs who became or stopped being a suspect, and withholds this
    /// node's own data while it is one.
    fn take_verdict(&mut self, (suspects, checks, by, sig): Verdict) {
        for s in suspects.iter().filter(|s| !self.watch.suspects.contains(s)) {
            tracing::warn!(suspect = s, by, checks, "member check: marked suspect");
        }
        for s in self.watch.suspects.iter().filter(|s| !suspects.contains(s)) {
            tracing::info!(member = s, by, checks, "member check: readmitted");
        }
        let me = suspects.contains(&self.s.id);
        if self.agent.is_withheld() != me {
            self.agent.set_withheld(me);
            if me {
                self.watch.withheld_since = Some(self.traffic.rounds_run);
                tracing::warn!(
                    round = self.traffic.rounds_run,
                    "member check: this node is a suspect; its own data is withheld from its messages"
                );
            } else {
                tracing::info!("member check: cleared; its own data is sent again");
            }
        }
        let w = &mut self.watch;
        (w.suspects, w.checks, w.by, w.sig) = (suspects, checks, Some(by), sig);
    }

    /// The round at which this node last began to withhold its data (status).
    pub(super) fn withheld_since(&self) -> Option<u64> {
        self.watch.withheld_since
    }

    /// Status fields of the check: suspects, check count, judge and (this node's own verdict
    /// under `--tls`) its signature.
    pub(super) fn suspects_status(&self) -> (Vec<u64>, u64, Option<u64>, Vec<u8>) {
        let w = &self.watch;
        let sig = match (&self.peers.auth, w.by) {
            (Some(a), Some(by)) if by == self.s.id => SuspectsClaim {
                fleet: &self.s.fleet,
                node: by,
                checks: w.checks,
                suspects: &w.suspects,
            }
            .sign(&a.signer),
            _ => w.sig.clone(),
        };
        (w.suspects.clone(), w.checks, w.by, sig)
    }
}

/// A 64-bit FNV-1a digest of an excess's bits (tells a changed peer from an unchanged one).
fn digest(e: &Excess) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |v: f64| {
        for b in v.to_bits().to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    for j in 0..e.d1.ncols() {
        e.d1.col_as_slice(j).iter().for_each(|v| eat(*v));
    }
    e.d2.iter().for_each(|v| eat(*v));
    h
}

/// The own excesses of `peers` (their `?fused` status; a peer that does not answer is left
/// out).
async fn read_peers(session: &zenoh::Session, fleet: &str, peers: &[u64]) -> BTreeMap<u64, Excess> {
    let mut set = JoinSet::new();
    for &id in peers {
        let (session, fleet) = (session.clone(), fleet.to_owned());
        set.spawn(async move {
            let own = fetch_own(&session, &fleet, id, SAMPLE_TIMEOUT).await;
            (id, own.ok().and_then(|o| o.to_excess()))
        });
    }
    let mut out = BTreeMap::new();
    while let Some(Ok((id, e))) = set.join_next().await {
        if let Some(e) = e.filter(|e| e.d2.iter().all(|v| v.is_finite())) {
            out.insert(id, e);
        }
    }
    out
}

/// The fitter's check (module doc).
struct Judging {
    me: u64,
    own: Option<MemberJson>,
    members: Vec<u64>,
    was: Vec<u64>,
    checks: u64,
}

impl Judging {
    /// Every member's reported evidence (its brief status, all from one request; none if it
    /// does not answer) and its own, judged in id order.
    async fn judge(self, session: &zenoh::Session, fleet: &str) -> Verdict {
        let briefs = crate::routing::briefs(session, fleet, SAMPLE_TIMEOUT)
            .await
            .map(|(b, _)| b)
            .unwrap_or_default();
        let mut all: Vec<(u64, Option<MemberJson>)> = vec![(self.me, self.own)];
        for id in self.members {
            all.push((id, briefs.get(&id).and_then(|b| b.member)));
        }
        all.sort_by_key(|p| p.0);
        let evidence: Vec<Option<Evidence>> = all
            .iter()
            .map(|(_, m)| {
                m.map(|m| Evidence {
                    rows: m.rows,
                    informed: m.informed,
                    score: m.score.unwrap_or(f64::NAN),
                    z2: m.z2.unwrap_or(f64::NAN),
                })
            })
            .collect();
        let was: Vec<bool> = all.iter().map(|(id, _)| self.was.contains(id)).collect();
        let (standing, _) = judge(&evidence, &was, &CheckOptions::default());
        let suspects = all
            .iter()
            .zip(standing)
            .filter(|(_, s)| *s == Standing::Suspect)
            .map(|((id, _), _)| *id)
            .collect();
        (suspects, self.checks, self.me, Vec::new())
    }
}

/// A follower's reading of the fitter's verdict.
struct Following {
    fitter: u64,
    /// The verdict held: its judge and check count.
    held: (Option<u64>, u64),
    /// With `--tls`, the fitter's roster key.
    key: Option<Option<PublicKey>>,
}

impl Following {
    /// The fitter's verdict if it is new and (with `--tls`) signed by the fitter.
    async fn verdict(self, session: &zenoh::Session, fleet: &str) -> Option<Verdict> {
        let f = self.fitter;
        let st = fetch_status(session, fleet, f, false, SAMPLE_TIMEOUT).await;
        st.ok()
            .filter(|s| s.member_checks > 0 && (Some(f), s.member_checks) != self.held)
            .filter(|s| signed_by(self.key, fleet, f, s))
            .map(|s| (s.suspects, s.member_checks, f, s.suspects_sig))
    }
}

/// Whether a follower may take the verdict of `fitter`'s status `s` ([`taken_from`]: with
/// `--tls` only if signed by the fitter's roster key).
fn signed_by(key: Option<Option<PublicKey>>, fleet: &str, fitter: u64, s: &Status) -> bool {
    let claim = SuspectsClaim::of(fleet, fitter, s);
    taken_from(
        key,
        fitter,
        &claim,
        &s.suspects_sig,
        "member check: verdict",
    )
}
