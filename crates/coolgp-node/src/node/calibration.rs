//! The fitter's calibration of the fleet's answers ([`crate::fleet_calibration`]): measured
//! [`CALIBRATE_AFTER`] after each pooled fit this node makes, on other tasks, one job at a
//! time; the last one measured is in the status.

use std::time::Instant;

use tokio::sync::oneshot;

use super::Node;
use crate::fleet_calibration::{measure, FleetCalibration, CALIBRATE_AFTER};

/// The calibration's state on a node.
#[derive(Default)]
pub(super) struct Calibration {
    /// The last calibration measured (status `fleet_calibration`).
    pub(super) held: Option<FleetCalibration>,
    /// The pooled fit count last seen, and when it was first seen.
    seen: Option<(u64, Instant)>,
    /// The fit count last measured after (or tried: a failed try waits for the next fit).
    tried: u64,
    /// The running job's result, if one runs.
    pending: Option<oneshot::Receiver<Option<FleetCalibration>>>,
}

impl Node {
    /// The fitter's step: applies a finished job; starts one [`CALIBRATE_AFTER`] after a new
    /// pooled fit of this node.
    pub(super) fn calibration_step(&mut self, session: &zenoh::Session) {
        let fits = self.pooled.as_ref().map_or(0, |p| p.fits);
        let c = &mut self.calibration;
        if let Some(rx) = c.pending.as_mut() {
            match rx.try_recv() {
                Err(oneshot::error::TryRecvError::Empty) => return,
                Err(oneshot::error::TryRecvError::Closed) => c.pending = None,
                Ok(got) => {
                    c.pending = None;
                    if let Some(got) = got {
                        tracing::info!(
                            rule = %got.rule,
                            weight = got.weight,
                            scale = got.scale,
                            rows = got.rows,
                            fit = got.fit,
                            "fleet calibration measured"
                        );
                        c.held = Some(got);
                    }
                }
            }
        }
        if fits == 0 || fits == c.tried {
            return;
        }
        let now = Instant::now();
        match c.seen {
            Some((f, at)) if f == fits => {
                if now.duration_since(at) < CALIBRATE_AFTER {
                    return;
                }
            }
            _ => {
                c.seen = Some((fits, now));
                return;
            }
        }
        c.tried = fits;
        let members = self.peers.members.lock().map_or(1, |m| m.len()).max(1);
        let suspects = self.watch.suspects().to_vec();
        let signer = self.peers.auth.as_ref().map(|a| a.signer.clone());
        let (session, fleet, id) = (session.clone(), self.s.fleet.clone(), self.s.id);
        let (tx, rx) = oneshot::channel();
        c.pending = Some(rx);
        tokio::spawn(async move {
            let signer = signer.as_deref().map(|s| (s, id));
            let got = measure(&session, &fleet, signer, (&suspects, members, fits)).await;
            let _ = tx.send(got);
        });
    }
}
