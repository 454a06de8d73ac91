//! # coolgp — collective online learning of Gaussian processes
//!
//! The sans-IO core of COOL-GP (T. N. Hoang, Q. M. Hoang, K. H. Low & J. P. How, "Collective
//! Online Learning of Gaussian Processes in Massive Multi-Agent Systems", AAAI 2019, arXiv
//! 1805.09266): all the math and the agent state machine, and nothing else — no clock, socket,
//! file, thread or OS randomness. The simulator (`coolgp-sim`) and the networked node
//! (`coolgp-node`) are drivers of the same [`Agent`].
//!
//! Each agent learns a sparse GP online with its *own* projection q(W) of its inputs into a
//! shared unit-scale domain, keeps q(u) over the shared inducing outputs as constant-size
//! natural parameters, and fuses with peers by adding them: `T_ab = T_a + T_b − T0`.
//!
//! ## Where things are
//! - [`model`]: what the model *is* — [`Vocabulary`] (Z, K, T0, fingerprint), [`Projection`]
//!   (q(W)), psi statistics, [`NaturalParams`] (q(u) in K-form), prediction.
//! - [`learn`]: how it is *updated* — the online modes (frozen, importance, exact), the ELBO and
//!   its gradients, Adam, and the sites of a fleet-wide q(W) ([`learn::Site`], spec §14; an
//!   agent's own part of it is its [`learn::FleetSite`]).
//! - [`fuse`]: pairwise fusion, [`Topology`], tree message passing, push-sum.
//! - [`baselines`]: dDTC and dPITC (spec §8).
//! - [`local`]: an agent's local memory of its own rows and the exact residual GP on them
//!   (issue 19, docs/LOCAL.md): [`LocalAnswer`], and the fleet rule [`combine`] that merges
//!   several agents' answers.
//! - [`protocol`]: the [`Agent`], its [`Message`]s and [`Event`]s. The agent owns three parts:
//!   its learning state (q(W), Adam, caches), its fusion state (`E_i`, neighbours, inbox,
//!   push-sum) and its [`learn::FleetSite`].
//! - [`error`]: the [`Error`] of the crate and the [`protocol::RejectReason`] of a peer's
//!   message; it depends on nothing above it.
//!
//! ## Which projection mode
//! [`ProjectionMode::PerAgent`] is the paper's (each agent its own q(W)). In a fleet observing
//! one phenomenon, [`ProjectionMode::Fleet`] learns one q(W), σ_s, σ_n together (spec §14): the
//! prior plus a sum of per-agent natural-parameter sites, fused by the same tree or push-sum
//! messages as q(u) and adopted whenever the fused sums change, so that agents holding the
//! same sums predict identically. Agents observing different phenomena set a projection
//! group ([`AgentConfig::group`], [`learn::group_id`]): each group learns its own q(W), σ_s,
//! σ_n from its members' sites ([`learn::Sites`]) while q(u) is fused across every group.
//! Spec §14 as written is refined by three defaults of [`learn::SiteConfig`], each measured
//! (EXPERIMENTS.md; how each was chosen: docs/HISTORY.md): the shared initial q0(W) is a
//! pseudo-site counted once whose weight fades as exp(−N/N0) (`prior_points`), with a fixed
//! prior on σ_s, σ_n (`scale_prior_points`), instead of the spec's 1/s share per agent; a step's
//! target is taken over a window of the agent's newest ≥ 320 points (`window_points`,
//! [`learn::RecentBlocks`]); and sites forget old targets in fleet time (`fleet_damping`). The
//! simulator adds warm-up q(u) fusions for tree fleets (`coolgp_sim::SimConfig::fuse_warmup`).
//! The site memory [`learn::SiteMemory::Stream`] (every block's term once, the window
//! re-evaluated when the fused q(u) has grown by 5%) is the default, right in random and in
//! time order; [`learn::SiteMemory::Recent`] (the spec's estimator, window 80) assumes
//! randomly ordered rows. The fleet site is one type,
//! [`learn::FleetSite`].
//!
//! ## Which mode to use
//! [`UpdateMode::Frozen`] (the default). The paper's importance-sampled estimator (Eq. 3.7,
//! [`UpdateMode::Importance`]) is implemented faithfully, but its weights degenerate
//! exponentially in `d·d'`: for any learned q(W) in d ≥ 6 the unnormalized estimate is ≈ the
//! prior, i.e. the agent forgets its data (spec §4). [`UpdateMode::Exact`] keeps all data and is
//! a test oracle only.
//!
//! ## Where the paper is wrong or silent (spec §12), and what this crate does
//! 1. The Gaussian q(W) is an assumption of the family, not the optimal marginal.
//! 2. No psi statistics, predictive equations or gradients are given: they are here (spec §2,
//!    §5, §6), checked against the spec's vectors, finite differences and Monte Carlo.
//! 3. Agents cannot use "different inducing inputs": fusion needs the same Z, kernel and jitter
//!    bit for bit; the [`Fingerprint`] enforces it. Only W, σ_s, σ_n differ per agent.
//! 4. Eq. 3.7's variance is exponential in `d·d'` (Lemma 1's constant hides it); Lemma 1's last
//!    inequality is reversed and Theorem 1's proof writes log(ms/ε) for log(ms/δ).
//! 5. Caching `K_UD` per block is unnecessary: per-sample sums over blocks give constant memory.
//! 6. The `N` of the stochastic gradient is unknown online: `c = N_own/n*` is used, with Adam
//!    (lr 0.01) and a Robbins–Monro decay (the paper gives no schedule).
//! 7. σ_s and σ_n are learned too, which requires unit-scale caches.
//! 8. Message passing needs diameter − 1 rounds, double counts on any cycle (use push-sum
//!    there), and needs the own E_i kept apart from received messages.
//! 9. The baselines' fault-tolerance comparison assumes one-shot uploads.
//! 10. Appendix D's factorization is exact for the variational bound, not for the GP.
//! 11. The initial q(W) is unspecified; independent draws make fusion harmful. Here it is part
//!     of the vocabulary: every agent with the same d starts from the same q(W).
//!
//! ## Example
//! ```
//! use std::sync::Arc;
//! use coolgp::{Agent, AgentConfig, Vocabulary, View};
//! use faer::Mat;
//!
//! let vocab = Arc::new(Vocabulary::default_design(20, 2, 7)?);
//! let mut a = Agent::new(0, vocab.clone(), 2, AgentConfig::default())?;
//! let mut b = Agent::new(1, vocab.clone(), 2, AgentConfig::default())?;
//! a.set_neighbors([1])?;
//! b.set_neighbors([0])?;
//! let x = Mat::from_fn(10, 2, |i, j| (i as f64 * 0.3 + j as f64).sin());
//! let y: Vec<f64> = (0..10).map(|i| (i as f64 * 0.5).cos()).collect();
//! a.handle_block(x.as_ref(), &y)?;
//! a.handle_tick();
//! while let Some(msg) = a.poll_transmit() {
//!     b.handle_message(msg).expect("valid message");
//! }
//! let pred = b.predict(x.as_ref(), View::Fused)?;
//! assert_eq!(pred.mean.len(), 10);
//! # Ok::<(), coolgp::Error>(())
//! ```

#![warn(missing_docs)]

pub mod baselines;
pub mod error;
mod fingerprint;
pub mod fuse;
pub mod learn;
pub mod linalg;
pub mod local;
pub mod members;
pub mod model;
pub mod protocol;
pub mod rng;
pub(crate) mod simd;

pub use error::{Error, Result};
pub use fuse::Topology;
pub use learn::UpdateMode;
pub use local::{
    combine, FleetRule, LocalAnswer, LocalConfig, MemoryPolicy, ResidualFamily, ResidualKind,
};
pub use model::{
    Excess, Fingerprint, NaturalParams, Posterior, Prediction, Projection, Vocabulary,
};
pub use protocol::{Agent, AgentConfig, AgentId, Event, FusionRule, Message, ProjectionMode, View};

/// Re-export of the matrix library used in the public API.
pub use faer;

/// The README's library example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
