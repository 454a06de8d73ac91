//! `--local-fit agent` on a node (docs/LOCAL.md §12b): each node fits the residual kernel on
//! its own memory and shares no row; the fitter (the lowest live id), when a pooled fit would
//! be due, reads the members' statuses, takes the elementwise median of the kernels they
//! fitted on their own rows ([`coolgp::local::consensus::median_kernel`]; a status's
//! `local_kernel` is signed by its node under `--tls` and checked against the roster) and
//! publishes it as its kernel. Every node takes it as the pooled fit's followers do
//! ([`super::pooled`]), keeping its own fit schedule ([`coolgp::Agent::adopt_local_kernel`]).

use coolgp::local::consensus::median_kernel;
use coolgp::local::ResidualFamily;
use tokio::task::JoinSet;

use crate::auth::PublicKey;
use crate::client::fetch_status;
use crate::fit_members::FIT_MEMBERS;
use crate::kernel_auth::{kernel_of_words, taken_from, KernelClaim};
use crate::pooled_fit::SAMPLE_TIMEOUT;

/// One consensus of the members' own fits, off the loop.
pub(super) struct ConsensusJob {
    pub(super) session: zenoh::Session,
    pub(super) fleet: String,
    /// The members asked, each with its roster key under `--tls` (`Some(None)`: not in the
    /// roster, its kernel is not taken; `None`: an open fleet).
    pub(super) members: Vec<(u64, Option<Option<PublicKey>>)>,
    /// The fitter's own kernel, if it has fitted on its own rows.
    pub(super) own: Option<(ResidualFamily, Vec<f64>)>,
    /// Inputs per row, d.
    pub(super) d: usize,
}

impl ConsensusJob {
    /// The members this fitter asks: the live ones but itself and the suspects, at most
    /// [`FIT_MEMBERS`] of them evenly spaced over the ids (a median of 64 fits is as good as
    /// of a thousand, and the fitter's gets stay bounded; issue 31).
    pub(super) fn asked(live: &[u64], me: u64, suspects: &[u64]) -> Vec<u64> {
        let others: Vec<u64> = live
            .iter()
            .copied()
            .filter(|id| *id != me && !suspects.contains(id))
            .collect();
        let n = others.len();
        if n <= FIT_MEMBERS {
            return others;
        }
        (0..FIT_MEMBERS)
            .map(|i| others[i * n / FIT_MEMBERS])
            .collect()
    }

    /// Reads the asked members' statuses at once and returns the median of the kernels
    /// fitted on their own rows (`local_fitted_rows > 0`) and the fitter's own; `None` when
    /// none has fitted. Unreachable members, unsigned or wrongly signed kernels (`--tls`) and
    /// kernels of another shape are left out and logged.
    pub(super) async fn run(self) -> Option<(ResidualFamily, Vec<f64>)> {
        let mut asks = JoinSet::new();
        for (id, key) in self.members {
            let (session, fleet) = (self.session.clone(), self.fleet.clone());
            asks.spawn(async move {
                let st = fetch_status(&session, &fleet, id, false, SAMPLE_TIMEOUT).await;
                (id, key, st)
            });
        }
        let len = 2 + self.d;
        let mut kernels: Vec<(ResidualFamily, Vec<f64>)> = self.own.into_iter().collect();
        let mut unread = 0usize;
        while let Some(done) = asks.join_next().await {
            let Ok((id, key, st)) = done else { continue };
            let Ok(s) = st else {
                unread += 1;
                continue;
            };
            if s.local_fitted_rows == 0 || s.local_kernel.is_empty() {
                continue;
            }
            let claim = KernelClaim::of(&self.fleet, id, &s);
            if !taken_from(key, id, &claim, &s.local_kernel_sig, "member's own kernel") {
                continue;
            }
            match kernel_of_words(&s.local_kernel, len) {
                Ok((family, p)) => kernels.push((family, p.to_vec())),
                Err(why) => tracing::warn!(agent = id, "member's own kernel left out: {why}"),
            }
        }
        let consensus = median_kernel(self.d, kernels.iter().map(|(f, p)| (*f, &p[..])));
        tracing::info!(
            kernels = kernels.len(),
            unread,
            "consensus of the members' own kernels"
        );
        consensus
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fitter_asks_the_live_members_but_itself_and_the_suspects_at_most_fit_members() {
        assert_eq!(ConsensusJob::asked(&[0, 1, 2, 3], 0, &[2]), vec![1, 3]);
        let live: Vec<u64> = (0..1000).collect();
        let asked = ConsensusJob::asked(&live, 0, &[]);
        assert_eq!(asked.len(), FIT_MEMBERS);
        assert!(!asked.contains(&0));
        assert!(asked.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(*asked.last().unwrap(), 1 + 63 * 999 / 64);
    }
}
