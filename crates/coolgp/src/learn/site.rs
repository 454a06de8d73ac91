//! The fleet-wide q(W), σ_s and σ_n as sums of per-agent natural-parameter sites (spec §14):
//! partitioned variational inference (Bui et al. 2018) with Bayesian-learning-rule site steps
//! (Khan & Lin 2017) and clipped Price curvature.
//!
//! Per entry of `W [d', d]`, with the prior N(0, 1):
//!
//! ```text
//! Λ = 1 + Σ_i Λ_i,   λ = Σ_i λ_i,   M = λ/Λ,   Σ² = 1/Λ
//! σ_s = max(A/B, 1e-3),   σ_n² = (YY − 2σ_s A + σ_s² B)/N       (A, B, YY, N summed over sites)
//! ```
//!
//! Because the fleet's q(W), σ_s and σ_n are functions of **sums**, the tree, two-pass and
//! push-sum machinery that fuses q(u) fuses them too, exactly, with no agreement on timing.
//!
//! **Initialization (improved on spec §14).** The shared initial q0(W) is a pseudo-site `P`
//! counted once, outside the agents' sites, with weight `w = exp(−N/N0)` where `N` is the
//! fleet's data points in the sums: the fleet forgets q0 as its data grow, as fast as one
//! learner with the same data would, rather than as each agent's own few blocks arrive. q0's
//! σ_s, σ_n enter as a fixed pseudo-site of `N_h` points (a conjugate-style prior counted once,
//! never forgotten): measured on the airline stream, it keeps the frozen q(u) statistics and
//! the scales consistent while q(u) is still weak (docs/HISTORY.md). Each agent's site is the running mean of its block targets
//! for its first `1/ρ` blocks, then their exponential average with rate ρ — or faster, when
//! the fleet's data have grown by many blocks since the agent's previous step:
//! `r_k = max(1/k, ρ, 1 − (1 − ρ_f)^{ΔN/n})` ([`SiteConfig::rate`]; improved on spec §14,
//! where an agent with a few blocks in a long stream kept its first, stale targets to the end). Each site carries its raw point count so `N` is itself a sum. A fleet
//! with no data holds exactly q0; no agent needs to know the fleet's size.
//!
//! ```text
//! view = prior N(0, 1) + w·P_W + P_h + Σ_i s_i,   w = exp(−Σ_i N_i / N0)
//! ```
//!
//! **Memory (beyond spec §14).** The above is [`SiteMemory::Recent`]. With
//! [`SiteMemory::Stream`] (the default) a site is instead the sum of its blocks' terms, each at
//! its own points (`c = 1`): a new block's taken on arrival, the window's re-evaluated when the
//! fused q(u) has grown by 5% since their last evaluation, older blocks' frozen at their last
//! evaluation. No rate, no scaling by `N/n`: it does not assume the stream is exchangeable.
//!
//! **The target's data (improved on spec §14).** A step's target is the data term over the
//! agent's newest blocks holding at least [`SiteConfig::window_points`] points
//! ([`crate::learn::RecentBlocks`]), re-evaluated under the current q(W) and fused q(u), not
//! over the newest block alone: less noise, with no stale linearization.

use faer::Mat;

use crate::learn::elbo::BlockElbo;
pub use crate::learn::hyper::HyperStats;
use crate::model::Projection;

/// Largest site window ([`SiteConfig::window_points`]): a site step may re-evaluate the window.
pub const MAX_WINDOW_POINTS: usize = 100_000;
/// [`SiteConfig::window_points`] when none is given under [`SiteMemory::Stream`] (the
/// default): an agent of a large fleet keeps all its blocks in the window, so none is frozen
/// at an early fusion's q(u).
pub const STREAM_WINDOW_POINTS: usize = 320;
/// [`SiteConfig::window_points`] when none is given under [`SiteMemory::Recent`], which
/// re-evaluates its window at every block.
pub const RECENT_WINDOW_POINTS: usize = 80;
/// One agent's site of the fleet's q(W), σ_s, σ_n — or a sum of sites (what messages carry).
///
/// `prec` (Λ) and `shift` (λ) are `[d', d]` flattened column-major like
/// [`Projection::to_flat`]'s M part.
#[derive(Clone, Debug, PartialEq)]
pub struct Site {
    /// Λ: precision contributions, `≥ 0`.
    pub prec: Vec<f64>,
    /// λ: precision-times-mean contributions.
    pub shift: Vec<f64>,
    /// Damped sums of the σ_s, σ_n statistics.
    pub hyper: HyperStats,
    /// Data points summed (the agent's own points, undamped): `N` of the pseudo-site weight.
    pub points: f64,
}

/// What an agent's site remembers of its stream (`--site-memory`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SiteMemory {
    /// The newest window's data term scaled to the agent's `N` points, damped toward at
    /// [`SiteConfig::rate`] (spec §14 with its refinements), the window re-evaluated at every
    /// block. It estimates the whole stream's term from the recent past, which assumes an
    /// exchangeable (randomly ordered) stream: in time order one learner fits the last `1/ρ`
    /// blocks as if they were all the data (EXPERIMENTS.md, "Time-ordered streams").
    Recent,
    /// The default: the sum of every own block's term, each counted once at its own points
    /// (no scaling, no damping) — the streaming form of partitioned VI, as q(u)'s frozen
    /// statistics are. A new block's term is taken alone on arrival, from the ψ̄ statistics its
    /// absorption computed; the window of newest blocks ([`SiteConfig::window_points`]) is
    /// re-evaluated under the current q(W) and fused q(u) when the fused q(u) has grown by
    /// [`crate::learn::fleet_site::STREAM_REFRESH_GROWTH`] since its last evaluation (a few
    /// hundred times in a stream, and after each fusion); a block that leaves the window keeps
    /// its share of the window's term, frozen. It holds in random and in time order
    /// (EXPERIMENTS.md, "Fleet projection on time-ordered streams (issue 18)").
    #[default]
    Stream,
}

impl SiteMemory {
    /// The command-line name: `recent` or `stream`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Recent => "recent",
            Self::Stream => "stream",
        }
    }

    /// The memory of a command-line name ([`SiteMemory::name`]).
    ///
    /// # Errors
    /// A message naming the accepted values.
    pub fn from_name(name: &str) -> Result<Self, String> {
        match name {
            "recent" => Ok(Self::Recent),
            "stream" => Ok(Self::Stream),
            other => Err(format!(
                "unknown site memory '{other}': use stream (the default; random or time-ordered \
                 streams) or recent (randomly ordered streams only)"
            )),
        }
    }
}

/// Settings of the site update (spec §14).
#[derive(Clone, Debug, PartialEq)]
pub struct SiteConfig {
    /// Damping ρ of the site step `s ← (1−r)s + r·target`, `r = max(1/k, ρ)` at the agent's
    /// k-th block: about 0.3 in a fleet whose sites fuse every round (or every 1% of the
    /// stream); about 0.01 for one learner alone.
    pub damping: f64,
    /// ρ_f: the damping per block of one learner holding the fleet's data (the central
    /// learner's, 0.01). An agent's rate is at least `1 − (1 − ρ_f)^{ΔN/n}`, `ΔN` the growth
    /// of its group's fused points since its previous site step and `n` the block's rows
    /// ([`SiteConfig::rate`]): the fleet's sum of sites then forgets an old block target about
    /// as fast as that one learner would, so an agent with few blocks keeps no stale targets.
    /// 0 turns this floor off (spec §14 as written).
    pub fleet_damping: f64,
    /// Points of the window of newest own blocks a site step's target is taken over
    /// ([`crate::learn::RecentBlocks`]: whole blocks, at least this many points, re-evaluated
    /// under the current q(W) and q(u)); 0: the newest block alone (spec §14 as written).
    /// Default [`STREAM_WINDOW_POINTS`], or [`RECENT_WINDOW_POINTS`] under
    /// [`SiteMemory::Recent`] ([`SiteConfig::from_options`]).
    pub window_points: usize,
    /// `N0`: the scale of the q0(W) pseudo-site's weight `exp(−N/N0)`.
    pub prior_points: f64,
    /// `N_h`: pseudo-points of q0's σ_s, σ_n (a fixed prior on the scales).
    pub scale_prior_points: f64,
    /// What the site remembers ([`SiteMemory`]); with `Stream`, `damping` and
    /// `fleet_damping` are unused.
    pub memory: SiteMemory,
}

impl Default for SiteConfig {
    fn default() -> Self {
        Self {
            damping: 0.3,
            fleet_damping: 0.01,
            window_points: STREAM_WINDOW_POINTS,
            prior_points: 2000.0,
            scale_prior_points: 100_000.0,
            memory: SiteMemory::Stream,
        }
    }
}

/// The site settings as given on a command line or in a node's configuration file: `None`
/// takes the default ([`SiteConfig::default`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SiteOptions {
    /// [`SiteConfig::damping`].
    pub damping: Option<f64>,
    /// [`SiteConfig::fleet_damping`].
    pub fleet_damping: Option<f64>,
    /// [`SiteConfig::window_points`].
    pub window_points: Option<usize>,
    /// [`SiteConfig::prior_points`].
    pub prior_points: Option<f64>,
    /// [`SiteConfig::scale_prior_points`].
    pub scale_prior_points: Option<f64>,
    /// [`SiteConfig::memory`].
    pub memory: Option<SiteMemory>,
}

impl SiteConfig {
    /// The settings given (the defaults for `None`; the window's depends on the memory),
    /// checked ([`SiteConfig::validate`]): what the command line and the node build from their
    /// flags.
    ///
    /// # Errors
    /// A message naming the bad value.
    pub fn from_options(o: SiteOptions) -> Result<Self, String> {
        let d = Self::default();
        let memory = o.memory.unwrap_or(d.memory);
        let window = match memory {
            SiteMemory::Stream => STREAM_WINDOW_POINTS,
            SiteMemory::Recent => RECENT_WINDOW_POINTS,
        };
        let c = Self {
            damping: o.damping.unwrap_or(d.damping),
            fleet_damping: o.fleet_damping.unwrap_or(d.fleet_damping),
            window_points: o.window_points.unwrap_or(window),
            prior_points: o.prior_points.unwrap_or(d.prior_points),
            scale_prior_points: o.scale_prior_points.unwrap_or(d.scale_prior_points),
            memory,
        };
        c.validate()?;
        Ok(c)
    }

    /// The rate `r` of the agent's `k`-th site step `s ← (1−r)s + r·target`, when its group's
    /// fused points grew by `fleet_blocks` blocks' worth since its previous step:
    ///
    /// ```text
    /// r = max(1/k, ρ, 1 − (1 − ρ_f)^fleet_blocks)
    /// ```
    ///
    /// `1/k` is the running mean of the first targets (no start-up bias), ρ the agent's own
    /// damping, the last term the fleet's forgetting ([`SiteConfig::fleet_damping`]).
    /// `fleet_blocks` counts at least the agent's own block (1); at 1 the last term is ρ_f
    /// exactly, so a fleet of one with `ρ = ρ_f` steps bit for bit like the central learner.
    pub fn rate(&self, k: u64, fleet_blocks: f64) -> f64 {
        let fleet = if fleet_blocks > 1.0 {
            1.0 - (1.0 - self.fleet_damping).powf(fleet_blocks)
        } else {
            self.fleet_damping
        };
        (1.0 / k.max(1) as f64).max(self.damping).max(fleet)
    }

    /// Checks the ranges: `0 < ρ ≤ 1`, `prior_points > 0`, all finite.
    ///
    /// # Errors
    /// A message naming the bad value.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.damping > 0.0 && self.damping <= 1.0) {
            return Err(format!(
                "site damping must be in (0, 1], got {}",
                self.damping
            ));
        }
        if !(self.fleet_damping >= 0.0 && self.fleet_damping < 1.0) {
            return Err(format!(
                "site fleet damping must be in [0, 1), got {}",
                self.fleet_damping
            ));
        }
        if self.window_points > MAX_WINDOW_POINTS {
            return Err(format!(
                "site window must be at most {MAX_WINDOW_POINTS} points, got {}",
                self.window_points
            ));
        }
        if !(self.scale_prior_points > 0.0 && self.scale_prior_points.is_finite()) {
            return Err(format!(
                "scale prior points must be finite and > 0, got {}",
                self.scale_prior_points
            ));
        }
        if !(self.prior_points > 0.0 && self.prior_points.is_finite()) {
            return Err(format!(
                "prior points must be finite and > 0, got {}",
                self.prior_points
            ));
        }
        Ok(())
    }
}

impl Site {
    /// The zero site (no agents) for `len = d'·d` entries.
    pub fn zeros(len: usize) -> Self {
        Self {
            prec: vec![0.0; len],
            shift: vec![0.0; len],
            hyper: HyperStats::default(),
            points: 0.0,
        }
    }

    /// Entries `d'·d`.
    pub fn len(&self) -> usize {
        self.prec.len()
    }

    /// True for a site over no entries.
    pub fn is_empty(&self) -> bool {
        self.prec.is_empty()
    }

    /// The pseudo-site of the shared initial `q0` (spec §14): `Λ = 1/σ0² − 1`, `λ = M0/σ0²`
    /// (σ0 the entries' standard deviations), and `scale_prior_points` pseudo-points at q0's
    /// σ_s, σ_n. With the prior it gives exactly q0. Its `points` are 0: it is not data.
    pub fn pseudo(q0: &Projection, cfg: &SiteConfig) -> Self {
        let share = 1.0;
        let (dz, d) = (q0.d_latent(), q0.d());
        let mut prec = Vec::with_capacity(dz * d);
        let mut shift = Vec::with_capacity(dz * d);
        for j in 0..d {
            for i in 0..dz {
                let p = 1.0 / q0.sigma2()[(i, j)];
                prec.push(share * (p - 1.0).max(0.0));
                shift.push(share * q0.mu()[(i, j)] * p);
            }
        }
        let (ss, sn) = (q0.sigma_s(), q0.sigma_n());
        let n0 = cfg.scale_prior_points;
        Self {
            prec,
            shift,
            // The maximiser returns (ss, sn) for A = ss·N0, B = N0, YY = (ss² + sn²)·N0.
            hyper: HyperStats {
                a: ss * n0,
                b: n0,
                yy: (ss * ss + sn * sn) * n0,
                n: n0,
            },
            points: 0.0,
        }
    }

    /// The view the agent predicts and learns with, from the fused sums `self`: the q(W)
    /// part of `pseudo` with weight `exp(−N/N0)` (`N = self.points`) and its scale part whole
    /// (module docs).
    pub fn with_pseudo(mut self, pseudo: &Site, cfg: &SiteConfig) -> Site {
        let w = (-self.points.max(0.0) / cfg.prior_points).exp();
        for (a, b) in self.prec.iter_mut().zip(&pseudo.prec) {
            *a += w * b;
        }
        for (a, b) in self.shift.iter_mut().zip(&pseudo.shift) {
            *a += w * b;
        }
        self.hyper.axpby(1.0, &pseudo.hyper, 1.0);
        self
    }

    /// `self += o` (same length).
    pub fn add_in_place(&mut self, o: &Site) {
        self.add_scaled_in_place(o, 1.0);
    }

    /// `self += c·o` (same length).
    pub fn add_scaled_in_place(&mut self, o: &Site, c: f64) {
        for (a, b) in self.prec.iter_mut().zip(&o.prec) {
            *a += c * b;
        }
        for (a, b) in self.shift.iter_mut().zip(&o.shift) {
            *a += c * b;
        }
        self.hyper.axpby(1.0, &o.hyper, c);
        self.points += c * o.points;
    }

    /// `self ← c·self` (every number, the points too).
    pub fn scale_in_place(&mut self, c: f64) {
        for v in self.prec.iter_mut().chain(self.shift.iter_mut()) {
            *v *= c;
        }
        self.hyper.axpby(c, &HyperStats::default(), 0.0);
        self.points *= c;
    }

    /// The same sums at `weight` times their weight, claiming `points` times their points
    /// (issue 29's bounds on a neighbour's message, [`crate::members::bound::Scaling`]):
    ///
    /// ```text
    /// Λ, λ, A, B, YY, n  ←  weight · (Λ, λ, A, B, YY, n)        points ← points · points
    /// ```
    ///
    /// Every entry's mean `λ/Λ` is kept, and so are the σ_s, σ_n these sums alone imply
    /// (`A/B` and `(YY − 2σ_s A + σ_s² B)/n`, homogeneous of degree 0): the sums count in the
    /// fleet's as `weight` times as many rows of the same kind. `n` is the statistics' weight,
    /// scaled with them (else σ_n² would shrink by `weight`); `points` is the claim that fades
    /// the q0 pseudo-site (`exp(−N/N0)`), scaled only where the claim itself is bounded.
    pub fn reweighted(&self, weight: f64, points: f64) -> Site {
        let mut out = self.clone();
        for v in out.prec.iter_mut().chain(out.shift.iter_mut()) {
            *v *= weight;
        }
        out.hyper.axpby(weight, &HyperStats::default(), 0.0);
        out.points *= points;
        out
    }

    /// The damped site step `s ← (1−ρ)s + ρ·target` (spec §14, step 6); `points` is the
    /// target's (the agent's current count), not damped.
    pub fn damp_toward(&mut self, target: &Site, rho: f64) {
        for (a, b) in self.prec.iter_mut().zip(&target.prec) {
            *a = (1.0 - rho) * *a + rho * b;
        }
        for (a, b) in self.shift.iter_mut().zip(&target.shift) {
            *a = (1.0 - rho) * *a + rho * b;
        }
        self.hyper.axpby(1.0 - rho, &target.hyper, rho);
        self.points = target.points;
    }

    /// `‖self − other‖ / ‖other‖` over every number (Λ, λ, the statistics, the points).
    pub fn rel_dist(&self, other: &Site) -> f64 {
        let (a, b) = (self.numbers(), other.numbers());
        let diff: f64 = a
            .clone()
            .zip(b.clone())
            .map(|(x, y)| (x - y) * (x - y))
            .sum();
        let norm: f64 = b.map(|y| y * y).sum();
        (diff / norm.max(f64::MIN_POSITIVE)).sqrt()
    }

    /// Every number of the site, in wire order.
    fn numbers(&self) -> impl Iterator<Item = f64> + Clone + '_ {
        let h = self.hyper.to_array();
        self.prec
            .iter()
            .chain(&self.shift)
            .copied()
            .chain(h)
            .chain(std::iter::once(self.points))
    }

    /// True if every number is finite, every precision and the counts are `≥ 0`, and the
    /// length is `len`: what a receiver requires of a site it accepts.
    pub fn is_valid(&self, len: usize) -> bool {
        let h = self.hyper;
        self.prec.len() == len
            && self.shift.len() == len
            && self.prec.iter().all(|v| v.is_finite() && *v >= 0.0)
            && self.shift.iter().all(|v| v.is_finite())
            && h.to_array().iter().all(|v| v.is_finite())
            && h.b >= 0.0
            && h.yy >= 0.0
            && h.n >= 0.0
            && self.points.is_finite()
            && self.points >= 0.0
    }

    /// The q(W), σ_s, σ_n of a fleet whose sites sum to `self` (prior N(0, 1) counted once):
    /// `M = λ/(1 + Λ)`, `log Σ = −½ log(1 + Λ)`, `(σ_s, σ_n)` from [`HyperStats::maximiser`].
    /// `None` if the sums are unusable (then keep the previous q(W)).
    pub fn projection(&self, d_latent: usize, d: usize) -> Option<Projection> {
        if self.len() != d_latent * d || !self.is_valid(self.len()) {
            return None;
        }
        let (ss, sn) = self.hyper.maximiser()?;
        let mu = Mat::from_fn(d_latent, d, |i, j| {
            let k = j * d_latent + i;
            self.shift[k] / (1.0 + self.prec[k])
        });
        let log_sigma = Mat::from_fn(d_latent, d, |i, j| {
            -0.5 * (1.0 + self.prec[j * d_latent + i]).ln()
        });
        Some(Projection::new(mu, log_sigma, ss.ln(), sn.ln()))
    }

    /// The target of one block's site step (spec §14, steps 3–5), under the agent's current
    /// q(W) `proj` and the block's data-term gradient `elbo` (no KL term), scaled to the
    /// agent's `n_own` points by `c = n_own/n`:
    ///
    /// ```text
    /// h = max(0, −∂ℓ/∂log σ / σ²)   (Price's theorem, clipped)
    /// τ_Λ = c·h,   τ_λ = c·(∂ℓ/∂M + h∘M),   τ_hyper = c·(A, B, YY, n)
    /// ```
    pub fn block_target(proj: &Projection, elbo: &BlockElbo, n_own: f64, n: f64) -> Self {
        let (dz, d) = (proj.d_latent(), proj.d());
        let c = n_own / n;
        let mut prec = Vec::with_capacity(dz * d);
        let mut shift = Vec::with_capacity(dz * d);
        for j in 0..d {
            for i in 0..dz {
                let h = (-elbo.grad.log_sigma[(i, j)] / proj.sigma2()[(i, j)]).max(0.0);
                prec.push(c * h);
                shift.push(c * (elbo.grad.mu[(i, j)] + h * proj.mu()[(i, j)]));
            }
        }
        let s = elbo.hyper;
        Self {
            prec,
            shift,
            hyper: HyperStats {
                a: c * s.a,
                b: c * s.b,
                yy: c * s.yy,
                n: c * s.n,
            },
            points: n_own,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Vocabulary;

    #[test]
    fn the_pseudo_site_with_the_prior_is_q0_and_fades_with_the_fleets_points() {
        // Reference: spec §14, "Initialization": with no data the view is exactly q0.
        let vocab = Vocabulary::default_design(6, 2, 5).expect("design");
        let q0 = vocab.initial_projection(3);
        let cfg = SiteConfig::default();
        let pseudo = Site::pseudo(&q0, &cfg);
        let view = Site::zeros(6).with_pseudo(&pseudo, &cfg);
        let p = view.projection(2, 3).expect("valid sums");
        for (a, b) in p.to_flat().iter().zip(q0.to_flat()) {
            assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{a} vs {b}");
        }
        // N = N0 points of data in the sums: the q(W) pseudo-site weighs e^-1, the scales' whole.
        let mut data = Site::zeros(6);
        data.points = cfg.prior_points;
        let view = data.with_pseudo(&pseudo, &cfg);
        let want = (-1.0f64).exp() * pseudo.prec[0];
        assert!((view.prec[0] - want).abs() <= 1e-12 * want);
        assert_eq!(view.points, cfg.prior_points, "pseudo-points are not data");
        assert_eq!(view.hyper, pseudo.hyper);
    }

    #[test]
    fn invalid_sums_give_no_projection() {
        let mut s = Site::zeros(4);
        assert!(s.projection(2, 2).is_none(), "no points: σ_n undefined");
        s.hyper = HyperStats {
            a: 1.0,
            b: 1.0,
            yy: 2.0,
            n: 1.0,
        };
        assert!(s.projection(2, 2).is_some());
        assert!(s.projection(1, 2).is_none(), "wrong length");
        s.prec[1] = -1.0;
        assert!(!s.is_valid(4));
        assert!(s.projection(2, 2).is_none(), "negative precision");
        s.prec[1] = f64::NAN;
        assert!(s.projection(2, 2).is_none());
    }

    #[test]
    fn the_rate_is_the_running_mean_then_the_damping_or_the_fleets_forgetting() {
        let cfg = SiteConfig::default();
        // First blocks: the running mean (no start-up bias).
        assert_eq!(cfg.rate(1, 1.0), 1.0);
        assert_eq!(cfg.rate(2, 1.0), 0.5);
        // Later, with the fleet grown by a few blocks only: the agent's own damping.
        assert_eq!(cfg.rate(10, 5.0), cfg.damping);
        // The fleet grew by 1,000 blocks since this agent's previous step: one learner with
        // damping ρ_f would have kept (1 − ρ_f)^1000 of that target.
        let want = 1.0 - (1.0 - cfg.fleet_damping).powf(1000.0);
        assert!((cfg.rate(10, 1000.0) - want).abs() < 1e-15);
        assert!(want > 0.99 && want < 1.0);
        // A fleet of one at ρ = ρ_f steps exactly like one learner: max(1/k, ρ).
        let one = SiteConfig {
            damping: 0.01,
            ..SiteConfig::default()
        };
        assert_eq!(one.rate(500, 1.0), 0.01);
        assert_eq!(one.rate(50, 1.0), 1.0 / 50.0);
        // ρ_f = 0 turns the fleet term off.
        let off = SiteConfig {
            fleet_damping: 0.0,
            ..SiteConfig::default()
        };
        assert_eq!(off.rate(10, 1e6), off.damping);
    }

    #[test]
    fn site_options_fill_defaults_and_name_the_bad_value() {
        let c = SiteConfig::from_options(SiteOptions {
            fleet_damping: Some(0.05),
            ..SiteOptions::default()
        })
        .expect("valid");
        assert_eq!(c.fleet_damping, 0.05);
        assert_eq!(c.damping, SiteConfig::default().damping);
        for bad in [-0.1, 1.0, f64::NAN] {
            let e = SiteConfig::from_options(SiteOptions {
                fleet_damping: Some(bad),
                ..SiteOptions::default()
            })
            .expect_err("out of range");
            assert!(e.contains("fleet damping"), "{e}");
        }
    }

    #[test]
    fn damping_moves_a_fraction_rho_toward_the_target() {
        let mut s = Site::zeros(2);
        let mut t = Site::zeros(2);
        t.prec = vec![10.0, 20.0];
        t.shift = vec![-1.0, 3.0];
        t.hyper.n = 5.0;
        t.points = 40.0;
        s.damp_toward(&t, 0.25);
        assert_eq!(s.prec, vec![2.5, 5.0]);
        assert_eq!(s.shift, vec![-0.25, 0.75]);
        assert_eq!(s.hyper.n, 1.25);
        assert_eq!(s.points, 40.0, "the point count is the target's, undamped");
    }
}
