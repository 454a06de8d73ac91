//! The fleet-wide fit of the learned residual kernel (docs/LOCAL.md §9): every agent offers a
//! small, deterministic sample of its memory — raw rows and their residuals against its global
//! model ([`crate::Agent::local_fit_sample`]) — the samples are pooled, the kernel is fitted once
//! on the pool by marginal likelihood ([`fit_pooled`], the per-agent fit's Adam steps of
//! [`super::fit::fit_learned`]), and every agent takes the result
//! ([`crate::Agent::set_local_kernel_params`]).
//!
//! Why pooled: an input an agent's memory does not vary in (a station's coordinates) leaves the
//! agent's likelihood flat in that input's lengthscale, and so does the sum of the agents'
//! likelihoods (each term is flat). Only a likelihood with rows of *different* agents in one
//! covariance sees how residuals at different places co-vary.

use super::factor::cholesky_seq_in_place;
use super::fit;
use super::kernel::{ResidualKernel, LOG_BOUNDS};
use super::{ResidualFamily, ResidualKind};
use crate::error::{ensure_dim, ensure_finite, Result};
use crate::linalg::dot;
use crate::model::Vocabulary;

/// Rows of the pooled sample in all, spread evenly over the agents ([`shares`]): the default of
/// [`PoolOptions::rows`].
pub const POOL_ROWS: usize = 512;

/// The default of [`PoolOptions::cold_growth`]: the cold candidate is fitted at the first pooled
/// fit, when the fleet's stream passes a power of 4 (rows seen) and when the warm one's
/// held-out msr exceeds [`COLD_ABOVE`]; the warm chain continues at every fusion. Measured in
/// docs/LOCAL.md §9: wind (B = 500, 2,000), air, traffic and airline identical to a cold
/// candidate at every fusion (1), with 6 of wind's 17 cold fits.
pub const COLD_GROWTH: u64 = 4;

/// Whether the fleet's pooled fit scores a cold candidate ([`Candidate::Cold`]) at a fusion
/// where its stream went from `before` rows (the previous fusion; 0 at the first) to `now`:
/// when a power of `growth` lies in `(before, now]`, or at the first fusion. A function of the
/// stream alone (deterministic). `growth ≤ 1`: at every fusion.
pub fn cold_due(before: u64, now: u64, growth: u64) -> bool {
    if growth <= 1 || before == 0 {
        return true;
    }
    let mut power = 1u64;
    while power <= before {
        match power.checked_mul(growth) {
            Some(p) => power = p,
            None => return false,
        }
    }
    power <= now
}

/// How the fleet fits the pooled kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolOptions {
    /// Pooled rows in all (each agent's share: [`shares`]).
    pub rows: usize,
    /// Rounds of [`super::fit::fit_learned`] per start, each from the previous round's best
    /// (so `rounds · FIT_STEPS` Adam steps).
    pub rounds: usize,
    /// Factors on the kernel's lengthscales to start from (at a first fit); each start is
    /// fitted and the largest log marginal likelihood kept.
    pub starts: Vec<f64>,
    /// Each fit after the first starts from the previous pooled parameters (`true`), or every
    /// fit is a first fit from the agents' initial kernel (`false`), so that the bounded
    /// number of Adam steps stays the regularizer it is for one fit (§4 of docs/LOCAL.md).
    pub warm_start: bool,
    /// Choose each fit's parameters by held-out evidence ([`fit_pooled_selected`]): every agent
    /// offers twice its share, the even rows are fitted and the odd rows score the candidates
    /// (the warm chain's continuation, a cold start, and a noise-calibrated one).
    pub validate: bool,
    /// With [`PoolOptions::validate`], how often the cold candidate is fitted ([`cold_due`]):
    /// when the stream has grown past the next power of `cold_growth` ([`COLD_GROWTH`]; 1: at
    /// every fusion).
    pub cold_growth: u64,
    /// Which rows the fleet fits on: neighbourhood groups ([`PoolSample::Near`], the default)
    /// or evenly spaced rows of every memory ([`PoolSample::Spaced`], the fit of the fields
    /// above).
    pub sample: PoolSample,
    /// With [`PoolSample::Near`], the kernel families whose starts the fit tries when it
    /// explores ([`super::select::fit_grouped_selected`]; default
    /// [`super::select::FAMILIES`], the squared exponential alone). The spaced fit keeps its
    /// kernel's family.
    pub families: Vec<ResidualFamily>,
}

/// The rows of the fleet's fit of the residual kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PoolSample {
    /// Evenly spaced rows of every memory, one exact likelihood ([`fit_pooled_selected`],
    /// docs/LOCAL.md §9).
    Spaced,
    /// Anchor rows with their nearest rows fleet-wide ([`super::groups`]), the block composite
    /// likelihood ([`super::composite`]) and a choice among several starts
    /// ([`super::select`]; docs/LOCAL.md §11).
    #[default]
    Near,
}

impl PoolSample {
    /// Every sample, in CLI order.
    pub const ALL: [Self; 2] = [Self::Near, Self::Spaced];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Near => "near",
            Self::Spaced => "spaced",
        }
    }

    /// The sample named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl Default for PoolOptions {
    fn default() -> Self {
        Self {
            rows: POOL_ROWS,
            rounds: 1,
            starts: vec![1.0],
            warm_start: true,
            validate: true,
            cold_growth: COLD_GROWTH,
            sample: PoolSample::default(),
            families: super::select::FAMILIES.to_vec(),
        }
    }
}

/// One agent's part of the pooled sample: raw rows `x [n, d]` (row-major) and their residuals
/// `r = y − μ_g(x) [n]` against the agent's global model.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FitSample {
    d: usize,
    x: Vec<f64>,
    r: Vec<f64>,
}

impl FitSample {
    /// A sample of `r.len()` rows of width `d`.
    ///
    /// # Errors
    /// [`crate::Error::DimensionMismatch`] if `x` does not hold `r.len()` rows of `d`,
    /// [`crate::Error::NonFinite`] for a non-finite value.
    pub fn new(d: usize, x: Vec<f64>, r: Vec<f64>) -> Result<Self> {
        ensure_dim("local fit sample rows", r.len() * d, x.len())?;
        ensure_finite("local fit sample rows", &x)?;
        ensure_finite("local fit sample residuals", &r)?;
        Ok(Self { d, x, r })
    }

    /// Rows in the sample.
    pub fn len(&self) -> usize {
        self.r.len()
    }

    /// True with no row.
    pub fn is_empty(&self) -> bool {
        self.r.is_empty()
    }

    /// The rows' width d.
    pub fn d(&self) -> usize {
        self.d
    }

    /// The rows, `[n, d]` row-major.
    pub fn x(&self) -> &[f64] {
        &self.x
    }

    /// The residuals, `[n]`.
    pub fn r(&self) -> &[f64] {
        &self.r
    }
}

/// Each of `agents` agents' share of a pooled sample of `total` rows:
/// `⌊total·(i+1)/agents⌋ − ⌊total·i/agents⌋` (they sum to `total`; with more agents than rows,
/// evenly spaced agents give one row each).
pub fn shares(total: usize, agents: usize) -> Vec<usize> {
    (0..agents)
        .map(|i| total * (i + 1) / agents - total * i / agents)
        .collect()
}

/// A sample's even rows (`0, 2, 4, …`: the fit half) and odd rows (the validation half). Of a
/// sample of [`spaced`]`(n, 2k)` rows with `2k ≤ n`, the even rows are exactly `spaced(n, k)`.
pub fn halves(s: &FitSample) -> (FitSample, FitSample) {
    let half = |parity: usize| {
        let rows = (0..s.len()).filter(|i| i % 2 == parity);
        FitSample {
            d: s.d,
            x: rows
                .clone()
                .flat_map(|i| s.x[i * s.d..(i + 1) * s.d].iter().copied())
                .collect(),
            r: rows.map(|i| s.r[i]).collect(),
        }
    };
    (half(0), half(1))
}

/// `k` of the indices `0..n`, evenly spaced (all of them when `k ≥ n`).
pub fn spaced(n: usize, k: usize) -> Vec<usize> {
    if k >= n {
        (0..n).collect()
    } else {
        (0..k).map(|i| i * n / k).collect()
    }
}

/// The learned kernel's parameters fitted on the pooled `samples` (concatenated in order; a
/// sample of another width than the kernel's is left out): for each start of
/// `opts.starts` (at the `first` fit; else the kernel's parameters alone), `opts.rounds` rounds
/// of [`super::fit::fit_learned`], and of the starts the one with the largest log marginal
/// likelihood. `None` for a kernel that is not learned, fewer than two rows, or no start that
/// could be evaluated. Deterministic: the same samples give the same parameters.
pub fn fit_pooled(
    kernel: &ResidualKernel,
    samples: &[FitSample],
    first: bool,
    opts: &PoolOptions,
) -> Option<Vec<f64>> {
    if kernel.kind() != ResidualKind::Learned {
        return None;
    }
    let d = kernel.d();
    let (x, r) = pooled(samples, d);
    let scales = kernel.family().variance_params(d);
    let starts: &[f64] = if first { &opts.starts } else { &[1.0] };
    let mut best: Option<(f64, Vec<f64>)> = None;
    for &c in starts {
        let mut p = kernel.params().to_vec();
        if c != 1.0 {
            // The lengthscales (every entry but the log standard deviations).
            (2..p.len())
                .filter(|i| !scales.contains(i))
                .for_each(|i| p[i] += c.ln());
        }
        let Some(p) = rounds((kernel.family(), p), d, (&x, &r), first, opts.rounds) else {
            continue;
        };
        if starts.len() == 1 {
            return Some(p);
        }
        let Ok((lml, _)) = kernel.log_marginal(&p, &x, &r) else {
            continue;
        };
        if best.as_ref().is_none_or(|b| lml > b.0) {
            best = Some((lml, p));
        }
    }
    best.map(|b| b.1)
}

/// The samples of width `d` concatenated in order: `(x [n·d], r [n])`.
fn pooled(samples: &[FitSample], d: usize) -> (Vec<f64>, Vec<f64>) {
    let used = || samples.iter().filter(|s| s.d == d);
    let x: Vec<f64> = used().flat_map(|s| s.x.iter().copied()).collect();
    let r: Vec<f64> = used().flat_map(|s| s.r.iter().copied()).collect();
    (x, r)
}

/// Held-out mean squared standardized residual above which the chosen candidate counts as
/// uncalibrated and the noise-calibrated candidate ([`Candidate::Calibrated`]) is scored.
pub const CALIBRATE_ABOVE: f64 = 2.0;

/// Held-out log density per validation row by which a candidate must beat the warm chain's
/// continuation to replace it ([`fit_pooled_selected`]): the chain's accumulated Adam steps are
/// the station gain, and on the stations the candidates' held-out densities differ by less
/// than 0.03 nats a row (docs/LOCAL.md §9), noise the chain must not be reset by; 0.1 kept
/// more of air's gain than 0.05 (8.52 against 9.71) and did better on airline (34.50, 35.02).
pub const SWITCH_MARGIN: f64 = 0.1;

/// Held-out mean squared standardized residual of the warm continuation above which
/// [`fit_pooled_selected`] fits the cold candidate even where [`cold_due`] does not ask for it:
/// on air the one cold start that won (fusion 15 of 16) met a warm msr of 1.48; on wind, where
/// the cold start never won, the warm msr stayed in 0.80–1.55.
pub const COLD_ABOVE: f64 = 1.3;

/// A candidate of [`fit_pooled_selected`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Candidate {
    /// The warm chain's continuation: [`fit_pooled`] from the previous pooled parameters.
    Warm,
    /// A cold start: [`fit_pooled`] from the agents' initial kernel (a first fit).
    Cold,
    /// The better of the two with `σ_r²` and `σ_rn²` both multiplied by its held-out mean
    /// squared standardized residual `c`: the same predictive mean, every predictive variance
    /// times `c` (the held-out log density's maximizer over such a scale).
    Calibrated,
}

/// A candidate's score on the validation rows under the exact GP conditioned on the fit rows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeldOut {
    /// `Σ_j ln N(r_j; μ_j, v_j)`: the held-out predictive log density, `v_j` with the noise.
    pub log_density: f64,
    /// `mean_j (r_j − μ_j)²/v_j`: 1 for a calibrated predictive.
    pub msr: f64,
}

impl HeldOut {
    /// The score, on the same `rows` validation rows, of the same predictive means with every
    /// variance times `c > 0` (a learned kernel with `σ_r²` and `σ_rn²` both times `c`: A, k*
    /// and k** scale by c, so μ stays and v becomes cv), in closed form: with `e_j² =
    /// (r_j − μ_j)²/v_j` and `Σ e² = rows · msr`,
    /// `Σ ln N(r_j; μ_j, c v_j) = log_density − ½ rows ln c + ½ (1 − 1/c) Σ e²` and
    /// `msr / c`.
    pub fn scaled(&self, c: f64, rows: usize) -> HeldOut {
        let (n, sum) = (rows as f64, rows as f64 * self.msr);
        HeldOut {
            log_density: self.log_density - 0.5 * n * c.ln() + 0.5 * (1.0 - 1.0 / c) * sum,
            msr: self.msr / c,
        }
    }
}

/// The outcome of [`fit_pooled_selected`].
#[derive(Clone, Debug, PartialEq)]
pub struct Selected {
    /// The chosen kernel's family (each candidate keeps its start's).
    pub family: ResidualFamily,
    /// The chosen parameters `[ln σ_r, ln σ_rn, ln ℓ_1..d]`.
    pub params: Vec<f64>,
    /// Which candidate they are.
    pub chosen: Candidate,
    /// Every scored candidate in the order scored (empty without validation rows).
    pub scores: Vec<(Candidate, HeldOut)>,
}

/// The held-out score of a residual kernel: the exact GP on the fit rows
/// `fit = (x [n·d], r [n])` (raw inputs), `A = K_r(X, X) + σ²I` with the kernel's noise, predicts
/// each validation row `val = (x* [n*·d], r* [n*])` with `μ = k*ᵀA⁻¹r`,
/// `v = k_r(x*, x*) − k*ᵀA⁻¹k* + σ²` (the covariances are the kernel's own
/// [`ResidualKernel::features`] and [`ResidualKernel::cov`]; one Cholesky of A and one
/// triangular solve with `n* + 1` right-hand sides). `None` with no row on either side, rows of
/// another width than the kernel's, or A not positive definite.
pub fn held_out(
    kernel: &ResidualKernel,
    vocab: &Vocabulary,
    fit: (&[f64], &[f64]),
    val: (&[f64], &[f64]),
) -> Option<HeldOut> {
    use faer::{Mat, Par};
    let ((x, r), (xv, rv)) = (fit, val);
    let (n, nv, d) = (r.len(), rv.len(), kernel.input_scale().len());
    if n == 0 || nv == 0 || d == 0 || x.len() != n * d || xv.len() != nv * d {
        return None;
    }
    let features = |x: &[f64]| {
        let mut f = Vec::new();
        x.chunks_exact(d)
            .for_each(|row| kernel.features(vocab, row, &mut f));
        f
    };
    let (fx, fv) = (features(x), features(xv));
    let flen = fx.len() / n;
    let (rows, vals): (Vec<&[f64]>, Vec<&[f64]>) = (
        fx.chunks_exact(flen).collect(),
        fv.chunks_exact(flen).collect(),
    );
    let noise = kernel.noise_var();
    let mut a = Mat::from_fn(n, n, |i, j| match i.cmp(&j) {
        std::cmp::Ordering::Less => 0.0,
        std::cmp::Ordering::Equal => kernel.cov(rows[i], rows[i]) + noise,
        std::cmp::Ordering::Greater => kernel.cov(rows[i], rows[j]),
    });
    if !cholesky_seq_in_place(a.as_mut()) {
        return None;
    }
    // Columns [L⁻¹r | L⁻¹K*]: μ_j = (L⁻¹r)ᵀ(L⁻¹k*_j), k*ᵀA⁻¹k* = ‖L⁻¹k*_j‖².
    let mut b = Mat::from_fn(n, nv + 1, |i, j| match j {
        0 => r[i],
        j => kernel.cov(rows[i], vals[j - 1]),
    });
    faer::linalg::triangular_solve::solve_lower_triangular_in_place(
        a.as_ref(),
        b.as_mut(),
        Par::Seq,
    );
    let w = b.col_as_slice(0);
    let (mut ld, mut z2) = (0.0, 0.0);
    for (j, &y) in rv.iter().enumerate() {
        let c = b.col_as_slice(j + 1);
        let mean = dot(w, c);
        let prior = kernel.cov(vals[j], vals[j]);
        let var = (prior - dot(c, c)).max(0.0) + noise;
        let e2 = (y - mean) * (y - mean) / var;
        ld -= 0.5 * ((2.0 * std::f64::consts::PI * var).ln() + e2);
        z2 += e2;
    }
    (ld.is_finite() && z2.is_finite()).then(|| HeldOut {
        log_density: ld,
        msr: z2 / nv as f64,
    })
}

/// The pooled fit chosen by held-out evidence (docs/LOCAL.md §9): the candidates
/// [`Candidate::Warm`] ([`fit_pooled`] from `warm`, if given) and [`Candidate::Cold`]
/// ([`fit_pooled`] from `initial`, a first fit; if `cold`, without `warm`, or when the warm
/// one's held-out msr exceeds [`COLD_ABOVE`]), both on the `fit` samples, are scored by
/// [`held_out`] on the `validation` samples and the larger log density is kept (a tie keeps the
/// earlier; the warm one is replaced only when beaten by more than [`SWITCH_MARGIN`] nats a
/// validation row; each candidate in its start's family); if its held-out mean squared
/// standardized residual exceeds [`CALIBRATE_ABOVE`],
/// [`Candidate::Calibrated`] is scored too and kept if better. Without a scorable candidate,
/// the first one that fitted (no scores). `None` if no candidate fitted. Deterministic. (`vocab`
/// is the fleet's; a learned kernel's features do not use it.)
pub fn fit_pooled_selected(
    warm: Option<&ResidualKernel>,
    initial: &ResidualKernel,
    cold: bool,
    vocab: &Vocabulary,
    fit: &[FitSample],
    validation: &[FitSample],
    opts: &PoolOptions,
) -> Option<Selected> {
    if initial.kind() != ResidualKind::Learned {
        return None;
    }
    let d = initial.d();
    let ((x, r), (xv, rv)) = (pooled(fit, d), pooled(validation, d));
    let score = |f: ResidualFamily, p: &[f64]| {
        let kernel = ResidualKernel::learned(f, p.to_vec(), d).ok()?;
        held_out(&kernel, vocab, (&x, &r), (&xv, &rv))
    };
    let scored = |f: ResidualFamily| {
        move |p: Vec<f64>| {
            let h = score(f, &p);
            (f, p, h)
        }
    };
    let warm = warm.and_then(|w| fit_pooled(w, fit, false, opts).map(scored(w.family())));
    // The cold start when due, without a scorable warm candidate, or when the warm one's
    // held-out errors are off ([`COLD_ABOVE`]).
    let off = |h: &Option<HeldOut>| h.is_none_or(|h| h.msr > COLD_ABOVE);
    let cold = (cold || warm.as_ref().is_none_or(|w| off(&w.2)))
        .then(|| fit_pooled(initial, fit, true, opts).map(scored(initial.family())))
        .flatten();
    let candidates = [(Candidate::Warm, warm), (Candidate::Cold, cold)];
    let mut fitted = candidates.into_iter().filter_map(|(c, p)| Some((c, p?)));
    let (c0, (f0, p0, h0)) = fitted.next()?;
    let mut out = Selected {
        family: f0,
        params: p0.clone(),
        chosen: c0,
        scores: Vec::new(),
    };
    consider(&mut out, (c0, f0), p0, h0, rv.len());
    for (c, (f, p, h)) in fitted {
        consider(&mut out, (c, f), p, h, rv.len());
    }
    let best = out
        .scores
        .iter()
        .find(|(c, _)| *c == out.chosen)
        .map(|s| s.1);
    if let Some(b) = best.filter(|b| b.msr > CALIBRATE_ABOVE) {
        // σ_r², σ_rn² times c = msr: the chosen one's score in closed form, re-scored only
        // where a log parameter meets its bounds (the variances are then not all times c).
        let mut p = out.params.clone();
        let half = 0.5 * b.msr.ln();
        let inside = |v: &f64| (LOG_BOUNDS.0..=LOG_BOUNDS.1).contains(&(v + half));
        let scales = out.family.variance_params(d);
        let h = scales
            .iter()
            .all(|&i| inside(&p[i]))
            .then(|| b.scaled(b.msr, rv.len()));
        for i in scales {
            p[i] = (p[i] + half).clamp(LOG_BOUNDS.0, LOG_BOUNDS.1);
        }
        let h = h.or_else(|| score(out.family, &p));
        let family = out.family;
        consider(&mut out, (Candidate::Calibrated, family), p, h, rv.len());
    }
    Some(out)
}

/// Records candidate `c` with parameters `p` and score `h` (none: not scorable) in `out`, and
/// makes it the chosen one if its log density beats the chosen one's (by [`SWITCH_MARGIN`]
/// nats a row of the `rows` validation rows if that is the warm one), or none was scored.
fn consider(
    out: &mut Selected,
    (c, family): (Candidate, ResidualFamily),
    p: Vec<f64>,
    h: Option<HeldOut>,
    rows: usize,
) {
    let Some(h) = h else { return };
    let chosen = out.scores.iter().find(|(k, _)| *k == out.chosen);
    let margin = match out.chosen {
        Candidate::Warm => SWITCH_MARGIN * rows as f64,
        _ => 0.0,
    };
    if chosen.is_none_or(|(_, b)| h.log_density > b.log_density + margin) {
        (out.params, out.chosen, out.family) = (p, c, family);
    }
    out.scores.push((c, h));
}

/// `rounds` rounds of [`super::fit::fit_learned`] from the learned kernel of `family` with
/// parameters `p` (the first one `first`) on `(x, r)`, each from the previous round's best;
/// `None` if the first fails.
fn rounds(
    (family, p): (ResidualFamily, Vec<f64>),
    d: usize,
    (x, r): (&[f64], &[f64]),
    first: bool,
    rounds: usize,
) -> Option<Vec<f64>> {
    let mut p = p;
    for k in 0..rounds.max(1) {
        let kernel = ResidualKernel::learned(family, p.clone(), d).ok()?;
        match fit::fit_learned(&kernel, x, r, first && k == 0) {
            Some(q) => p = q,
            None if k == 0 => return None,
            None => break,
        }
    }
    Some(p)
}

#[cfg(test)]
mod tests;
