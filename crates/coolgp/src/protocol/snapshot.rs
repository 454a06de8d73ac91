//! A plain-data image of an [`Agent`]'s state, for checkpoints (the node writes it to disk;
//! the core never does I/O). Restoring a snapshot gives an agent that behaves bit-identically
//! (a robust fleet-projection agent's site window weights included, when the snapshot has
//! them: [`AgentSnapshot::recent_weights`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use faer::Mat;

use crate::error::{Error, Result};
use crate::fuse::{Mass, PushSum};
use crate::learn::{Adam, Learner, Likelihood, RecentBlocks, Site, Sites};
use crate::local::LocalSnapshot;
use crate::model::{Excess, Projection, Vocabulary};
use crate::protocol::agent::{Agent, AgentConfig, FusionRule, ProjectionMode};
use crate::protocol::fusion::Inbound;
use crate::protocol::message::{AgentId, ProjectionShare};

/// What one neighbour last sent (tree rule).
#[derive(Clone, Debug, PartialEq)]
pub struct InboundSnapshot {
    /// The excess `D_ki`.
    pub excess: Excess,
    /// Points it represents.
    pub points: f64,
    /// Projection sums (shared mode).
    pub projection: Option<ProjectionShare>,
    /// Site sums per projection group (fleet projection mode).
    pub sites: Option<Sites>,
}

/// Every field of an agent's state, as plain data. The own excess is not stored: it is
/// recomputed from the caches and θ on restore.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentSnapshot {
    /// Agent id.
    pub id: AgentId,
    /// Settings.
    pub config: AgentConfig,
    /// q(W), σ_s, σ_n: `M [d', d]`.
    pub mu: Mat<f64>,
    /// `log Σ [d', d]`.
    pub log_sigma: Mat<f64>,
    /// `log σ_s`.
    pub log_sigma_s: f64,
    /// `log σ_n`.
    pub log_sigma_n: f64,
    /// Adam state.
    pub adam: Adam,
    /// The learner's caches.
    pub learner: Learner,
    /// Own points absorbed.
    pub n_own: usize,
    /// Blocks absorbed.
    pub blocks: u64,
    /// Data version.
    pub version: u64,
    /// Round counter.
    pub round: u64,
    /// Neighbours.
    pub neighbors: Vec<AgentId>,
    /// Last accepted message from each neighbour (tree rule).
    pub inbox: BTreeMap<AgentId, InboundSnapshot>,
    /// Push-sum mass (with its site part in the fleet projection mode).
    pub push_mass: Mass,
    /// Push-sum running total sent.
    pub push_sent: Mass,
    /// Push-sum running totals received.
    pub push_received: BTreeMap<AgentId, Mass>,
    /// Push-sum own changes not yet in the mass ([`PushSum::pending`]).
    pub push_pending: Mass,
    /// Last accepted round per sender.
    pub last_round: BTreeMap<AgentId, u64>,
    /// Own site of the fleet's q(W) (fleet projection mode; empty otherwise).
    pub site: Site,
    /// The fleet's points at the last site step ([`crate::learn::SiteConfig::fleet_damping`]).
    pub site_clock: f64,
    /// The site window's blocks `(x [n, d], y [n])`, oldest first ([`crate::learn::RecentBlocks`]).
    pub recent: Vec<(Mat<f64>, Vec<f64>)>,
    /// A robust fleet-projection agent's site window weights: one entry per block of
    /// [`AgentSnapshot::recent`], the rows' weights `w [n]` taken when the block arrived
    /// (`None` for a block absorbed without them). `None` for every other agent, and for a
    /// snapshot that does not have them (a checkpoint written before they were stored): a
    /// robust agent's restore then takes them again against the restored agent's predictive,
    /// close to, not equal to, the original's (docs/ROBUST.md §2).
    pub recent_weights: Option<Vec<Option<Vec<f64>>>>,
    /// [`crate::learn::SiteMemory::Stream`]: the frozen terms of the blocks that left the
    /// window (zeros otherwise).
    pub site_frozen: Site,
    /// [`crate::learn::SiteMemory::Stream`]: the last window term and its points (0: none).
    pub window_term: (Site, f64),
    /// The local memory (issue 19; `None` when off): rows, targets, the policy's counter, the
    /// residual kernel's parameters and fit schedule. Restoring factors it once.
    pub local: Option<LocalSnapshot>,
    /// The agent withholds its own data ([`Agent::set_withheld`]): under push-sum its mass
    /// then holds none of it, so a restore must know.
    pub withheld: bool,
}

impl Agent {
    /// A plain-data image of the whole state.
    pub fn snapshot(&self) -> AgentSnapshot {
        let (learning, fusion, site) = (self.learning(), self.fusion(), self.fleet_site());
        let proj = learning.projection();
        let pushsum = fusion.pushsum();
        AgentSnapshot {
            id: self.id(),
            config: self.config().clone(),
            mu: proj.mu().to_owned(),
            log_sigma: proj.log_sigma().to_owned(),
            log_sigma_s: proj.log_sigma_s(),
            log_sigma_n: proj.log_sigma_n(),
            adam: learning.adam().clone(),
            learner: learning.learner().clone(),
            n_own: learning.n_own(),
            blocks: learning.blocks(),
            version: learning.version(),
            round: fusion.round(),
            neighbors: fusion.neighbors().iter().copied().collect(),
            inbox: fusion
                .inbox()
                .iter()
                .map(|(k, v)| {
                    (
                        *k,
                        InboundSnapshot {
                            excess: (*v.excess).clone(),
                            points: v.points,
                            projection: v.projection.clone(),
                            sites: v.sites.clone(),
                        },
                    )
                })
                .collect(),
            push_mass: pushsum.mass.clone(),
            push_sent: pushsum.sent.clone(),
            push_received: pushsum.received.clone(),
            push_pending: pushsum.pending.clone(),
            last_round: fusion.last_rounds().clone(),
            site: site.own().clone(),
            site_clock: site.clock(),
            recent: site.recent().blocks().cloned().collect(),
            recent_weights: (self.is_fleet() && self.config().likelihood != Likelihood::Gaussian)
                .then(|| {
                    site.recent()
                        .weights()
                        .map(|w| w.map(<[f64]>::to_vec))
                        .collect()
                }),
            site_frozen: site.frozen().clone(),
            window_term: site.window_term().clone(),
            local: self.local().snapshot(),
            withheld: self.is_withheld(),
        }
    }

    /// Rebuilds an agent from a snapshot taken under `vocab`.
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] when the snapshot's shapes (q(W), excesses, the learner's
    /// caches, the Adam moments, the local memory's rows) do not fit the vocabulary or d,
    /// [`Error::NonFinite`] for NaN in θ or in a cache, [`Error::InvalidConfig`] for a learner
    /// of another update mode or site window weights that do not fit the window or the agent.
    pub fn restore(vocab: Arc<Vocabulary>, mut s: AgentSnapshot) -> Result<Self> {
        let (m, dz) = (vocab.m(), vocab.d_latent());
        let d = s.mu.ncols();
        if s.mu.nrows() != dz || s.log_sigma.nrows() != dz || s.log_sigma.ncols() != d {
            return Err(Error::DimensionMismatch {
                what: "snapshot q(W) rows (d')",
                expected: dz,
                found: s.mu.nrows(),
            });
        }
        check_excesses(&mut s, m)?;
        super::learner_check::check_learner(&s.learner, s.config.mode, m, dz, d)?;
        let push_sites = s.config.projection == ProjectionMode::Fleet
            && matches!(s.config.fusion, FusionRule::PushSum { .. });
        check_push_sites(
            std::iter::once(&s.push_mass)
                .chain(std::iter::once(&s.push_sent))
                .chain(std::iter::once(&s.push_pending))
                .chain(s.push_received.values()),
            push_sites.then_some(dz * d),
        )?;
        let seed = s.config.seed;
        let mut agent = Agent::new(s.id, vocab.clone(), d, s.config)?;
        agent.local_mut().restore_in_place(&vocab, seed, s.local)?;
        let proj = Projection::new(s.mu, s.log_sigma, s.log_sigma_s, s.log_sigma_n);
        let theta = proj.to_flat();
        crate::error::ensure_finite("snapshot θ", &theta)?;
        if s.adam.m1.len() != theta.len() || s.adam.m2.len() != theta.len() {
            return Err(Error::DimensionMismatch {
                what: "snapshot Adam moments",
                expected: theta.len(),
                found: s.adam.m1.len(),
            });
        }
        let counts = (s.n_own, s.blocks, s.version);
        agent
            .learning_mut()
            .restore(proj, s.adam, s.learner, counts);
        let inbox: BTreeMap<AgentId, Inbound> = s
            .inbox
            .into_iter()
            .map(|(k, v)| {
                (
                    k,
                    Inbound {
                        excess: Arc::new(v.excess),
                        points: v.points,
                        projection: v.projection,
                        sites: v.sites,
                    },
                )
            })
            .collect();
        let pushsum = PushSum {
            mass: s.push_mass,
            sent: s.push_sent,
            received: s.push_received,
            pending: s.push_pending,
        };
        let neighbors = s.neighbors.into_iter().collect::<BTreeSet<_>>();
        if agent.is_fleet() {
            check_fleet_site(&inbox, &s.site, &s.site_frozen, &s.window_term, dz * d)?;
            let recent = restore_window(s.recent, d)?;
            if !(s.site_clock.is_finite() && s.site_clock >= 0.0) {
                return Err(Error::InvalidConfig(format!(
                    "snapshot site clock must be finite and >= 0, got {}",
                    s.site_clock
                )));
            }
            agent.fleet_site_mut().restore(
                s.site,
                s.site_clock,
                recent,
                s.site_frozen,
                s.window_term,
            );
        }
        agent
            .fusion_mut()
            .restore(s.round, neighbors, inbox, pushsum, s.last_round);
        let own = agent.excess_from_caches().0;
        agent.fusion_mut().restore_own(own);
        // The mass already reflects a withheld agent's state: only the flag is restored.
        agent.fusion_mut().restore_withheld(s.withheld);
        agent.restore_window_weights(s.recent_weights)?;
        Ok(agent)
    }
}

/// Checks that every excess of a snapshot has `m` rows and columns, and symmetrizes the
/// inbox's (stored state is exactly symmetric).
fn check_excesses(s: &mut AgentSnapshot, m: usize) -> Result<()> {
    let check_excess = |e: &Excess| -> Result<()> {
        if e.m() != m || e.d1.nrows() != m || e.d1.ncols() != m {
            return Err(Error::DimensionMismatch {
                what: "snapshot excess (m)",
                expected: m,
                found: e.m(),
            });
        }
        Ok(())
    };
    for v in s.inbox.values_mut() {
        check_excess(&v.excess)?;
        v.excess.symmetrize_in_place();
    }
    check_excess(&s.push_mass.x)?;
    check_excess(&s.push_sent.x)?;
    check_excess(&s.push_pending.x)?;
    for v in s.push_received.values() {
        check_excess(&v.x)?;
    }
    Ok(())
}

/// Checks a fleet site's sums of `len` entries: the inbox's, the own site, the stream
/// memory's frozen terms and window term.
fn check_fleet_site(
    inbox: &BTreeMap<AgentId, Inbound>,
    site: &Site,
    frozen: &Site,
    window_term: &(Site, f64),
    len: usize,
) -> Result<()> {
    let bad_inbox = inbox
        .values()
        .filter_map(|v| v.sites.as_ref())
        .any(|v| !v.is_valid(len));
    let good_memory = frozen.is_valid(len)
        && window_term.0.is_valid(len)
        && window_term.1.is_finite()
        && window_term.1 >= 0.0;
    if bad_inbox || !good_memory || !site.is_valid(len) {
        return Err(Error::InvalidConfig(
            "snapshot site sums: wrong length, negative precision or non-finite".into(),
        ));
    }
    Ok(())
}

/// The site window of a snapshot, each block with `d` finite input columns and one finite
/// target per row.
fn restore_window(blocks: Vec<(Mat<f64>, Vec<f64>)>, d: usize) -> Result<RecentBlocks> {
    let bad_window = blocks.iter().any(|(x, y)| {
        x.ncols() != d
            || x.nrows() != y.len()
            || y.is_empty()
            || y.iter().any(|v| !v.is_finite())
            || (0..x.ncols()).any(|j| x.col_as_slice(j).iter().any(|v| !v.is_finite()))
    });
    if bad_window {
        return Err(Error::InvalidConfig(format!(
            "snapshot site window: every block needs {d} finite input columns and one \
             finite target per row"
        )));
    }
    Ok(RecentBlocks::from_blocks(blocks))
}

/// Checks that every push-sum mass of a snapshot has a site part of `len` finite entries when
/// `len` is given (fleet projection under push-sum) and none otherwise. A mass's site may be
/// negative in places (injected site changes), so only lengths and finiteness are checked.
fn check_push_sites<'a>(masses: impl Iterator<Item = &'a Mass>, len: Option<usize>) -> Result<()> {
    for mass in masses {
        let ok = match (&mass.site, len) {
            (None, None) => true,
            (Some(sites), Some(len)) => sites.iter().all(|(_, site)| {
                let h = site.hyper.to_array();
                site.prec.len() == len
                    && site.shift.len() == len
                    && site
                        .prec
                        .iter()
                        .chain(&site.shift)
                        .chain(&h)
                        .chain(std::iter::once(&site.points))
                        .all(|v| v.is_finite())
            }),
            _ => false,
        };
        if !ok {
            return Err(Error::InvalidConfig(
                "snapshot push-sum site part: missing, unexpected, wrong length or non-finite"
                    .into(),
            ));
        }
    }
    Ok(())
}
