//! The agent's side of the local memory: offering a block's rows, refitting the residual
//! kernel against the global model's mean (or offering a sample to the fleet's pooled fit and
//! taking its result), and answering queries with the correction.

use faer::{Mat, MatRef};

use super::pool::{self, FitSample};
use super::{
    fit, HeldOutRows, LocalAnswer, LocalFit, ResidualFamily, ResidualKernel, ResidualKind,
};
use crate::error::{ensure_dim, ensure_finite, Result};
use crate::learn::robust::Likelihood;
use crate::model::predict::{predict, predict_mean};
use crate::model::Prediction;
use crate::protocol::{Agent, Event, View};

/// Under the robust likelihood, a row whose standardized residual against the agent's own
/// answer exceeds this many thresholds `c` stays out of the memory
/// ([`Agent::screen_for_memory`]; at the default c = 3: 9 standard deviations).
pub const MEMORY_DROP: f64 = 3.0;

impl Agent {
    /// Rows in the local memory (≤ its capacity; 0 when off).
    pub fn local_points(&self) -> usize {
        self.local().len()
    }

    /// The agent's answers at the rows of `x [q, d]` with the chosen q(u): the global part and
    /// the local correction ([`LocalAnswer`]). With the memory off or empty, the global model's
    /// answer alone: `(mean, var_f, var_y)` are [`Agent::predict`]'s, bit for bit.
    ///
    /// # Errors
    /// As [`Agent::predict`].
    pub fn local_answers(&self, x: MatRef<'_, f64>, view: View) -> Result<Vec<LocalAnswer>> {
        self.check_inputs(x, None)?;
        let post = self.posterior(view)?;
        let local = self.local();
        let proj = self.learning().projection();
        if local.is_empty() || !local.is_factored() {
            let p = predict(self.vocabulary(), proj, &post, x)?;
            let sn2 = proj.sigma_n() * proj.sigma_n();
            return Ok((0..p.mean.len())
                .map(|i| LocalAnswer::global_only(p.mean[i], p.var_f[i], sn2))
                .collect());
        }
        super::answer::answers(local, self.vocabulary(), proj, &post, x)
    }

    /// Where the memory's rows lie ([`super::coverage`]): at most
    /// [`super::coverage::MAX_BOXES`] boxes in the residual kernel's metric. `None` when the
    /// agent's answers carry no correction (memory off, empty or not factored).
    pub fn coverage(&self) -> Option<super::Coverage> {
        let local = self.local();
        if local.is_empty() || !local.is_factored() {
            return None;
        }
        super::Coverage::of_rows(
            local.memory().x(),
            &local.kernel().input_scale(),
            super::coverage::MAX_BOXES,
        )
    }

    /// The leave-one-out answers at memory rows `rows` ([`HeldOutRows`], docs/LOCAL.md §10):
    /// at each, what the agent would answer with the chosen q(u) had the row never entered its
    /// memory. Empty with the memory off or empty.
    ///
    /// # Errors
    /// As [`Agent::predict`]; [`crate::Error::DimensionMismatch`] for a row outside the
    /// memory; [`crate::Error::NotPositiveDefinite`] when the memory's A cannot be factored.
    pub fn local_held_out(&self, rows: &[usize], view: View) -> Result<HeldOutRows> {
        let local = self.local();
        if local.is_empty() {
            return Ok(HeldOutRows {
                x: faer::Mat::zeros(0, local.memory().d()),
                y: Vec::new(),
                answers: Vec::new(),
            });
        }
        let post = self.posterior(view)?;
        let proj = self.learning().projection();
        super::loo::loo_answers(local, self.vocabulary(), proj, &post, rows)
    }

    /// [`Agent::local_answers`] as a [`Prediction`] (`mean`, `var_f`, `var_y` of each
    /// answer); [`Agent::predict`]'s, bit for bit, with the memory off or empty.
    ///
    /// # Errors
    /// As [`Agent::predict`].
    pub fn predict_local(&self, x: MatRef<'_, f64>, view: View) -> Result<Prediction> {
        if self.local().is_empty() || !self.local().is_factored() {
            return self.predict(x, view);
        }
        let a = self.local_answers(x, view)?;
        Ok(Prediction {
            mean: a.iter().map(LocalAnswer::mean).collect(),
            var_f: a.iter().map(LocalAnswer::var_f).collect(),
            var_y: a.iter().map(LocalAnswer::var_y).collect(),
        })
    }

    /// Offers a checked, absorbed block to the memory (nothing when it is off) and refits
    /// the residual kernel when due (a learned kernel under [`LocalFit::Fleet`] waits for the
    /// fleet's fit instead).
    ///
    /// Under the robust likelihood the block is screened first ([`Agent::screen_for_memory`]).
    pub(crate) fn offer_local(&mut self, x: MatRef<'_, f64>, y: &[f64]) {
        let local = self.config().local;
        if !local.is_on() {
            return;
        }
        let screened = match self.config().likelihood {
            Likelihood::Robust { c } => Some(self.screen_for_memory(x, y, c)),
            Likelihood::Gaussian => None,
        };
        let (x, y) = match &screened {
            Some((sx, sy)) => (sx.as_ref(), &sy[..]),
            None => (x, y),
        };
        if y.is_empty() {
            return;
        }
        let vocab = self.vocabulary().clone();
        let pooled = local.fit == LocalFit::Fleet && local.kernel == ResidualKind::Learned;
        if self.local_mut().offer(&vocab, x, y) && !pooled {
            self.refit_local();
        }
    }

    /// The rows of a block `(x [n, d], y [n])` that may enter the memory under the robust
    /// likelihood with threshold `c` (docs/ROBUST.md §2a): with `r_n = (y_n − μ_n)/√var_y,n`
    /// against the agent's own answer (the global model plus the memory's correction, fused
    /// q(u)), a row with `|r_n| > MEMORY_DROP · c` is left out, and the others' targets are
    /// clipped to `μ_n ± c √var_y,n` (Huber's winsorization at c). The residual GP interpolates
    /// what it holds, so one gross outlier in the memory spoils every answer near it, which
    /// the tempered q(u) update cannot undo. Rows whose answer cannot be formed are kept as
    /// they are.
    fn screen_for_memory(&self, x: MatRef<'_, f64>, y: &[f64], c: f64) -> (Mat<f64>, Vec<f64>) {
        let keep_all = || (x.to_owned(), y.to_vec());
        let Ok(p) = self.predict_local(x, View::Fused) else {
            return keep_all();
        };
        let mut rows = Vec::with_capacity(y.len());
        let mut ys = Vec::with_capacity(y.len());
        for (i, &yi) in y.iter().enumerate() {
            let sd = p.var_y[i].sqrt();
            if !(sd > 0.0 && sd.is_finite() && p.mean[i].is_finite()) {
                rows.push(i);
                ys.push(yi);
                continue;
            }
            let r = (yi - p.mean[i]) / sd;
            if r.abs() > MEMORY_DROP * c {
                continue;
            }
            rows.push(i);
            ys.push(p.mean[i] + r.clamp(-c, c) * sd);
        }
        let xs = Mat::from_fn(rows.len(), x.ncols(), |k, j| x[(rows[k], j)]);
        (xs, ys)
    }

    /// This agent's part of the fleet's pooled fit ([`pool`]): `max_rows` evenly spaced rows of
    /// the memory (all of them if fewer) and their residuals against the global mean (fused
    /// q(u), the own one if the fused cannot be factored). Empty with the memory off or empty,
    /// or a kernel that is not learned. The sample is the agent's raw rows (docs/LOCAL.md §9).
    ///
    /// # Errors
    /// As [`Agent::mean_weights`] when neither q(u) can be factored.
    pub fn local_fit_sample(&self, max_rows: usize) -> Result<FitSample> {
        let local = self.local();
        let d = local.memory().d();
        if local.is_empty() || local.kernel().kind() != ResidualKind::Learned {
            return FitSample::new(d, Vec::new(), Vec::new());
        }
        let (x, r) = self.residuals(&pool::spaced(local.len(), max_rows))?;
        FitSample::new(d, x, r)
    }

    /// Memory rows `rows` (indices into the memory) and their residuals against the global
    /// mean, as [`Agent::local_fit_sample`] gives them: the rows of the fleet's neighbourhood
    /// groups ([`crate::local::groups`]). Empty with the memory off, or a kernel that is not
    /// learned.
    ///
    /// # Errors
    /// [`crate::Error::InvalidConfig`] for a row index past the memory; as
    /// [`Agent::mean_weights`] when neither q(u) can be factored.
    pub fn local_fit_rows(&self, rows: &[usize]) -> Result<FitSample> {
        let local = self.local();
        let d = local.memory().d();
        if local.is_empty() || local.kernel().kind() != ResidualKind::Learned {
            return FitSample::new(d, Vec::new(), Vec::new());
        }
        if let Some(&i) = rows.iter().find(|&&i| i >= local.len()) {
            return Err(crate::Error::InvalidConfig(format!(
                "local fit row {i} is past the memory's {} rows",
                local.len()
            )));
        }
        let (x, r) = self.residuals(rows)?;
        FitSample::new(d, x, r)
    }

    /// Sets the residual kernel's parameters in its family (the fleet's pooled fit,
    /// [`pool::fit_pooled`]) and refactors the memory's A once; the agent's own fit schedule
    /// restarts from here.
    ///
    /// # Errors
    /// [`crate::Error::DimensionMismatch`] for parameters of another length than the kernel's,
    /// [`crate::Error::NonFinite`] for a non-finite one, [`crate::Error::NotPositiveDefinite`] if
    /// A cannot be factored (the memory is then unused until the next fit).
    pub fn set_local_kernel_params(&mut self, params: &[f64]) -> Result<()> {
        let family = self.local().kernel().family();
        self.set_local_kernel(family, params)
    }

    /// Sets the learned residual kernel's family and parameters (the fleet's fit on
    /// neighbourhood groups chooses both, [`super::select`]) and refactors the memory's A
    /// once, as [`Agent::set_local_kernel_params`]; a `GlobalResidual` kernel keeps its own
    /// family.
    ///
    /// # Errors
    /// As [`Agent::set_local_kernel_params`].
    pub fn set_local_kernel(&mut self, family: ResidualFamily, params: &[f64]) -> Result<()> {
        self.check_local_kernel(family, params)?;
        let vocab = self.vocabulary().clone();
        self.local_mut().set_kernel(&vocab, family, params)
    }

    /// Takes the fleet's consensus of per-agent fits (`--local-fit agent`,
    /// [`super::consensus::median_kernel`]): the kernel as [`Agent::set_local_kernel`] sets
    /// it, the agent's own fit schedule kept ([`super::LocalModel::adopt_kernel`]): its next own fit
    /// starts from this kernel.
    ///
    /// # Errors
    /// As [`Agent::set_local_kernel_params`].
    pub fn adopt_local_kernel(&mut self, family: ResidualFamily, params: &[f64]) -> Result<()> {
        self.check_local_kernel(family, params)?;
        let vocab = self.vocabulary().clone();
        self.local_mut().adopt_kernel(&vocab, family, params)
    }

    /// The length and finiteness checks of a kernel's parameters offered to this agent.
    fn check_local_kernel(&self, family: ResidualFamily, params: &[f64]) -> Result<()> {
        let kernel = self.local().kernel();
        // A learned kernel takes the family's length (the sum has more parameters).
        let want = match kernel.kind() {
            ResidualKind::Learned => family.param_len(kernel.d()),
            ResidualKind::GlobalResidual => kernel.params().len(),
        };
        ensure_dim("local residual kernel parameters", want, params.len())?;
        ensure_finite("local residual kernel parameters", params)
    }

    /// Memory rows `rows` as `x [n·d]` (row-major) and their residuals `y − μ_g(x) [n]` against
    /// the global mean (fused q(u), the own one if the fused cannot be factored).
    fn residuals(&self, rows: &[usize]) -> Result<(Vec<f64>, Vec<f64>)> {
        let mem = self.local().memory();
        let d = mem.d();
        let x: Vec<f64> = rows
            .iter()
            .flat_map(|&i| mem.row(i).iter().copied())
            .collect();
        let xm = faer::Mat::from_fn(rows.len(), d, |i, j| x[i * d + j]);
        let alpha = self
            .mean_weights(View::Fused)
            .or_else(|_| self.mean_weights(View::Own))?;
        let mu = predict_mean(
            self.vocabulary(),
            self.learning().projection(),
            &alpha,
            xm.as_ref(),
        )?;
        let r = rows.iter().zip(&mu).map(|(&i, m)| mem.y()[i] - m).collect();
        Ok((x, r))
    }

    /// Refits the residual kernel: Learned by marginal likelihood on the memory's residuals
    /// against the global mean (fused q(u), the own one if the fused cannot be factored);
    /// GlobalResidual by taking the current W̄, σ_s, σ_n. Then refactors once.
    fn refit_local(&mut self) {
        let vocab = self.vocabulary().clone();
        let proj = self.learning().projection().clone();
        let local = self.local();
        let params = match local.kernel().kind() {
            ResidualKind::GlobalResidual => Some(
                ResidualKernel::initial(ResidualKind::GlobalResidual, &proj)
                    .params()
                    .to_vec(),
            ),
            ResidualKind::Learned => match self.residuals(&fit::fit_rows(local.len())) {
                Ok((x, r)) => {
                    let first = local.fit_state().0 == 0;
                    fit::fit_learned(local.kernel(), &x, &r, first)
                }
                Err(_) => None,
            },
        };
        let params = params.unwrap_or_else(|| self.local().kernel().params().to_vec());
        if self.local_mut().set_kernel_params(&vocab, &params).is_err() {
            self.push_event(Event::StepSkipped { reason: "local" });
        }
    }
}
