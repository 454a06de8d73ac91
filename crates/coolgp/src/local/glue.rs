//! The agent's side of the local memory: offering a block's rows, refitting the residual
//! kernel against the global model's mean, and answering queries with the correction.

use faer::MatRef;

use super::{fit, LocalAnswer, ResidualKernel, ResidualKind};
use crate::error::Result;
use crate::model::predict::{predict, predict_mean};
use crate::model::Prediction;
use crate::protocol::{Agent, Event, View};

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
    /// the residual kernel when due.
    pub(crate) fn offer_local(&mut self, x: MatRef<'_, f64>, y: &[f64]) {
        if !self.config().local.is_on() {
            return;
        }
        let vocab = self.vocabulary().clone();
        if self.local_mut().offer(&vocab, x, y) {
            self.refit_local();
        }
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
            ResidualKind::Learned => {
                let rows = fit::fit_rows(local.len());
                let mem = local.memory();
                let d = mem.d();
                let x: Vec<f64> = rows
                    .iter()
                    .flat_map(|&i| mem.row(i).iter().copied())
                    .collect();
                let xm = faer::Mat::from_fn(rows.len(), d, |i, j| x[i * d + j]);
                let alpha = self
                    .mean_weights(View::Fused)
                    .or_else(|_| self.mean_weights(View::Own));
                let mu = alpha.and_then(|a| predict_mean(&vocab, &proj, &a, xm.as_ref()));
                match mu {
                    Ok(mu) => {
                        let r: Vec<f64> =
                            rows.iter().zip(&mu).map(|(&i, m)| mem.y()[i] - m).collect();
                        let first = local.fit_state().0 == 0;
                        fit::fit_learned(local.kernel(), &x, &r, first)
                    }
                    Err(_) => None,
                }
            }
        };
        let params = params.unwrap_or_else(|| self.local().kernel().params().to_vec());
        if self.local_mut().set_kernel_params(&vocab, &params).is_err() {
            self.push_event(Event::StepSkipped { reason: "local" });
        }
    }
}
