//! The member check in the simulator (issue 29, docs/MEMBERS.md): after each fusion, each
//! agent's rows against its nearest peers' own models ([`coolgp::members::check`]); under
//! `--suspects contain` every suspect is withheld ([`Agent::set_withheld`]) and the fleet
//! fuses again, so the rest of the fleet holds the model without it, and its rows and
//! answers leave the pooled fits, the calibration and the fleet query ([`Watch::excluded`]).

use coolgp::members::{evidence_among, judge, CheckOptions, Evidence, Policy, Standing};
use coolgp::{Agent, Posterior, View};
use rayon::prelude::*;
use serde::Serialize;

use super::union::cpu_seconds;
use super::Fleet;

/// The member check's state over a run.
#[derive(Clone, Debug)]
pub(super) struct Watch {
    /// `--suspects`.
    policy: Policy,
    /// The check's settings.
    opts: CheckOptions,
    /// Each agent's standing after the last check.
    standing: Vec<Standing>,
    /// Each agent's evidence at the last check.
    evidence: Vec<Option<Evidence>>,
    /// The median verifiable member's score at the last check.
    median: f64,
    /// The agent's own blocks when it was first marked suspect.
    first_suspect: Vec<Option<u64>>,
    /// Checks made.
    checks: usize,
    /// Per member, the check (count of [`Fleet::check_members`] calls) at which it is next
    /// measured, and the interval it backs off by ([`MAX_INTERVAL`]).
    due: Vec<usize>,
    interval: Vec<usize>,
    /// Members measured over all checks (≤ checks × members).
    measured: usize,
}

/// Longest interval, in fusions, between two measurements of a clearly trusted or a stuck
/// unverifiable member (issue 31): a member is measured at every fusion until it is clearly
/// trusted (score under `readmit` times the median and `z2` under half the interval bar) or
/// unverifiable with no more informed rows than at its last measurement (its peers are not
/// learning its place), then after 2, 4, then every 8 fusions while it stays so; any other verdict (a suspect, a trusted member near the bar)
/// measures it at the next fusion again. The nodes back off likewise (docs/MEMBERS.md §5).
pub const MAX_INTERVAL: usize = 8;

impl Watch {
    /// No check yet over `n` agents.
    pub fn new(policy: Policy, n: usize) -> Self {
        Self {
            policy,
            opts: CheckOptions::default(),
            standing: vec![Standing::Unchecked; n],
            evidence: vec![None; n],
            median: f64::NAN,
            first_suspect: vec![None; n],
            checks: 0,
            due: vec![0; n],
            interval: vec![1; n],
            measured: 0,
        }
    }

    /// The report's view of the last check (`agents`: whom the check has withheld).
    pub fn report(&self, agents: &[Agent]) -> MembersReport {
        MembersReport {
            policy: self.policy.name(),
            checks: self.checks,
            measured: self.measured,
            median_score: self.median,
            contained: self.policy == Policy::Contain,
            suspects: (0..self.standing.len())
                .filter(|&i| self.standing[i] == Standing::Suspect)
                .collect(),
            members: (0..self.standing.len())
                .map(|i| {
                    let e = self.evidence[i];
                    MemberReport {
                        id: i,
                        standing: self.standing[i].name(),
                        score: e.map_or(f64::NAN, |e| e.score),
                        ratio: e.map_or(f64::NAN, |e| e.score / self.median),
                        z2: e.map_or(f64::NAN, |e| e.z2),
                        rows: e.map_or(0, |e| e.rows),
                        informed: e.map_or(0, |e| e.informed),
                        first_suspect_block: self.first_suspect[i],
                        contained: agents[i].is_withheld(),
                    }
                })
                .collect(),
        }
    }
}

/// The member check in `summary.json` (`members`).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MembersReport {
    /// `--suspects`: off, flag or contain.
    pub policy: &'static str,
    /// Checks made (one after each fusion of q(u); their CPU seconds are
    /// `phases.members_cpu_s`).
    pub checks: usize,
    /// Members measured over all checks: a clearly trusted member is measured less often
    /// ([`MAX_INTERVAL`]).
    pub measured: usize,
    /// The median verifiable member's score at the last check (NaN: too few verifiable).
    pub median_score: f64,
    /// Suspects were contained (false under `flag`).
    pub contained: bool,
    /// The agents marked suspect at the last check.
    pub suspects: Vec<usize>,
    /// Every agent's standing and evidence at the last check.
    pub members: Vec<MemberReport>,
}

/// One agent's standing and evidence (docs/MEMBERS.md §1).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MemberReport {
    /// The agent.
    pub id: usize,
    /// trusted, suspect, unverifiable or unchecked.
    pub standing: &'static str,
    /// Median squared error of the others' model at its informed rows (standardized units).
    pub score: f64,
    /// `score` over the median member's.
    pub ratio: f64,
    /// Median squared error over the others' predictive variance.
    pub z2: f64,
    /// Rows checked.
    pub rows: usize,
    /// Rows the others know.
    pub informed: usize,
    /// Its own blocks absorbed when it was first marked suspect.
    pub first_suspect_block: Option<u64>,
    /// Contained at the end of the run.
    pub contained: bool,
}

impl Fleet<'_> {
    /// Per agent: true when it is contained (withheld as a suspect under `--suspects
    /// contain`); its rows and answers are then left out of pooled fits, calibration and
    /// fleet queries.
    pub(super) fn contained(&self) -> Vec<bool> {
        self.agents.iter().map(Agent::is_withheld).collect()
    }

    /// One member check (module docs) after a fusion; under `--suspects contain`, withholds
    /// each suspect and readmits each member that checks out. Returns true when who is
    /// withheld changed (the fleet must fuse again).
    pub(super) fn check_members(&mut self) -> bool {
        if !self.watch.policy.checks() {
            return false;
        }
        let cpu = cpu_seconds();
        let now = self.watch.checks;
        let due: Vec<bool> = self.watch.due.iter().map(|&d| d <= now).collect();
        let (was, evidence) = self.measure(&due);
        self.watch.measured += due.iter().filter(|&&d| d).count();
        let (standing, median) = judge(&evidence, &was, &self.watch.opts);
        let opts = self.watch.opts;
        let informed = |e: &Option<Evidence>| e.map_or(0, |e| e.informed);
        for i in (0..evidence.len()).filter(|&i| due[i]) {
            // Unverifiable and no better known than at its last measurement: its peers are
            // not learning its place (while they are, it is measured at every fusion).
            let stuck = standing[i] == Standing::Unverifiable
                && informed(&evidence[i]) <= informed(&self.watch.evidence[i]);
            let clear = stuck
                || standing[i] == Standing::Trusted
                    && evidence[i].is_some_and(|e| {
                        e.score < opts.readmit * median && e.z2 < 0.5 * opts.interval
                    });
            let w = &mut self.watch;
            w.interval[i] = if clear {
                (w.interval[i] * 2).min(MAX_INTERVAL)
            } else {
                1
            };
            // The first clear verdict waits 2 fusions, then 4, then 8.
            w.due[i] = now + if clear { w.interval[i] } else { 1 };
        }
        for (i, s) in standing.iter().enumerate() {
            if *s == Standing::Suspect && self.watch.first_suspect[i].is_none() {
                self.watch.first_suspect[i] = Some(self.agents[i].blocks());
            }
        }
        let w = &mut self.watch;
        (w.standing, w.evidence, w.median) = (standing, evidence, median);
        w.checks += 1;
        let mut changed = false;
        if w.policy == Policy::Contain {
            for (a, s) in self.agents.iter_mut().zip(&w.standing) {
                let on = *s == Standing::Suspect;
                if a.is_withheld() != on {
                    a.set_withheld(on);
                    changed = true;
                }
            }
        }
        self.phases.members_cpu_s += cpu.zip(cpu_seconds()).map_or(0.0, |(a, b)| b - a);
        changed
    }
}

impl Fleet<'_> {
    /// Members awaiting a clear verdict ([`Fleet::probe_pending`]): under a checking policy,
    /// each agent still unchecked, or holding fewer rows than the check reads (early in its
    /// stream, where how soon a fault is marked is decided) and either unverifiable (its rows
    /// still grow: a station of 5-row blocks found no informed row at its first two checks
    /// and was backed off until its block 13) or trusted near the bar (measured at every
    /// fusion, [`MAX_INTERVAL`]). Suspects are not probed. Later in the stream the check after
    /// each fusion alone judges (probing members of regions no peer knows at every site
    /// fusion cost 4× the check's CPU on airline by 100 regions).
    fn pending(&self) -> Vec<bool> {
        let w = &self.watch;
        (0..w.standing.len())
            .map(|i| {
                let early = w.evidence[i].map_or(0, |e| e.rows) < w.opts.rows;
                let open = match w.standing[i] {
                    Standing::Unchecked => true,
                    Standing::Unverifiable => early,
                    Standing::Trusted => early && w.interval[i] == 1,
                    Standing::Suspect => false,
                };
                w.policy.checks() && open
            })
            .collect()
    }

    /// Who is suspect now, and every member's evidence: measured afresh for the members
    /// `which` marks, the others' last ([`member_evidence`]).
    fn measure(&self, which: &[bool]) -> (Vec<bool>, Vec<Option<Evidence>>) {
        let was: Vec<bool> = self
            .watch
            .standing
            .iter()
            .map(|&s| s == Standing::Suspect)
            .collect();
        let fresh = member_evidence(&self.agents, &was, which, &self.watch.opts);
        let evidence = fresh
            .into_iter()
            .zip(&self.watch.evidence)
            .zip(which)
            .map(|((new, old), &w)| if w { new } else { *old })
            .collect();
        (was, evidence)
    }

    /// True when some member awaits a clear verdict: the stream then stops at every site
    /// fusion to probe it ([`Fleet::probe_pending`]).
    pub(super) fn awaits_verdict(&self) -> bool {
        self.pending().contains(&true)
    }

    /// Between two fusions of q(u) (at a site fusion), the evidence of the members awaiting
    /// a clear verdict, judged with every other member's last evidence: true when one of
    /// them would be suspect, and the stream then fuses at once, so the check after that
    /// fusion, which measures it, marks and contains it ([`Fleet::check_members`]). A faulty station is so marked
    /// as soon as its rows can be verified (32 informed rows: 7 blocks of 5), not at the next
    /// fusion of q(u), which the default cadence (a tenth of the stream, warm-ups at its 1,
    /// 2, 4, 8%) puts 8–20 blocks of 5 into a station's stream. A probe that finds no
    /// suspect changes nothing (the watch's state is the check's), so a run in which no one
    /// is marked is the run without probes, bit for bit.
    pub(super) fn probe_pending(&mut self) -> bool {
        let pending = self.pending();
        if !pending.contains(&true) {
            return false;
        }
        let cpu = cpu_seconds();
        let (was, evidence) = self.measure(&pending);
        let (standing, _) = judge(&evidence, &was, &self.watch.opts);
        let mut found = false;
        for i in (0..standing.len()).filter(|&i| pending[i] && standing[i] == Standing::Suspect) {
            // Measured by the check after the fusion this probe calls for.
            self.watch.due[i] = self.watch.checks;
            found = true;
        }
        self.phases.members_cpu_s += cpu.zip(cpu_seconds()).map_or(0.0, |(a, b)| b - a);
        found
    }
}

/// Peers each member is checked against: every other agent up to this many, else this many
/// nearest by the centre of their memories' inputs.
pub const PEERS: usize = 4;

/// Each `due` agent's evidence (`None`: nothing to check, or not due) under its peers' own
/// models, the best agreeing ([`evidence_among`]); the peers are the agents not suspect
/// (`was`) with rows to check, the [`PEERS`] nearest by the centre of those rows.
fn member_evidence(
    agents: &[Agent],
    was: &[bool],
    due: &[bool],
    opts: &CheckOptions,
) -> Vec<Option<Evidence>> {
    let centres: Vec<Option<Vec<f64>>> = agents.iter().map(centre).collect();
    let candidates: Vec<usize> = (0..agents.len())
        .filter(|&j| !was[j] && centres[j].is_some())
        .collect();
    let peers_of: Vec<Vec<usize>> = (0..agents.len())
        .into_par_iter()
        .map(|i| {
            if !due[i] {
                return Vec::new();
            }
            let mut peers: Vec<(f64, usize)> = candidates
                .iter()
                .filter(|&&j| j != i)
                .map(|&j| (distance(&centres[i], &centres[j]), j))
                .collect();
            if peers.len() > PEERS {
                peers.select_nth_unstable_by(PEERS - 1, |a, b| a.0.total_cmp(&b.0));
                peers.truncate(PEERS);
            }
            peers.into_iter().map(|p| p.1).collect()
        })
        .collect();
    // The own q(u) of every agent some due member is checked against, factored once.
    let mut needed = vec![false; agents.len()];
    peers_of.iter().flatten().for_each(|&j| needed[j] = true);
    let own: Vec<Option<Posterior>> = agents
        .par_iter()
        .zip(&needed)
        .map(|(a, &n)| n.then(|| a.posterior(View::Own).ok()).flatten())
        .collect();
    peers_of
        .par_iter()
        .enumerate()
        .map(|(i, peers)| {
            due[i]
                .then(|| evidence_among(agents, &own, i, peers, opts))
                .flatten()
        })
        .collect()
}

/// The mean input of an agent's memory rows, or without a memory of its newest rows (the
/// rows its check reads, [`coolgp::members::check_rows`]); `None` without rows.
fn centre(a: &Agent) -> Option<Vec<f64>> {
    let m = match a.local().memory() {
        m if m.is_empty() => a.recent_rows(),
        m => m,
    };
    if m.is_empty() {
        return None;
    }
    let mut c = vec![0.0; m.d()];
    for r in 0..m.len() {
        c.iter_mut().zip(m.row(r)).for_each(|(cj, v)| *cj += v);
    }
    c.iter_mut().for_each(|v| *v /= m.len() as f64);
    Some(c)
}

/// Squared distance between two centres (infinite when either is missing).
fn distance(a: &Option<Vec<f64>>, b: &Option<Vec<f64>>) -> f64 {
    match (a, b) {
        (Some(a), Some(b)) => a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum(),
        _ => f64::INFINITY,
    }
}
