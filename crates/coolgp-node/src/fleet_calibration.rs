//! The fleet's calibration as its fitter measures and publishes it (issue 28 item 5: nodes as
//! good as the simulator).
//!
//! The simulator chooses the fleet rule and the safety net's weight on held-out memory rows
//! (`--fleet-rule auto`, docs/LOCAL.md §12); a node's `coolgp query --all` did so only with
//! `--calibrate K`, and otherwise combined by rBCM with no weight, which on twelve wind nodes
//! trailed the calibrated query by 6% (docs/LOCAL.md §11). Now the fitter (the lowest live
//! id, which makes the pooled fits) measures every rule after each of its fits, once the
//! followers had time to take the kernel ([`CALIBRATE_AFTER`]): it asks the fleet for
//! memory rows and their leave-one-out answers and for every agent's answers there
//! ([`crate::fleet_query::calibrate`], routed as a query is), and reports the best rule, its
//! weight and its variance scale in its status (`fleet_calibration`, signed in a TLS fleet
//! like its kernel). `coolgp query --all` without `--fleet-rule` or `--calibrate` applies it.
//!
//! Signed bytes: [`CALIBRATION_TAG`] | fleet | `0` | node id (u64 LE) | pooled fits (u64 LE) |
//! the rule's index in [`FleetRule::ALL`], the rows (u64 LE), the weight and the scale (f64 LE).

use std::time::Duration;

use coolgp::local::calibrate::{chosen_rule, RuleCalibration, MIN_CALIBRATION_ROWS, SCALE_RANGE};
use coolgp::local::FleetRule;
use serde::{Deserialize, Serialize};

use crate::config::DEFAULT_ROUTE;
use crate::fleet_query::{self, AnswersUnder, Calibrated, Member};
use crate::kernel_auth::{claim_bytes, Claim};
use crate::request::TrialKernel;
use crate::routing;
use crate::status::Status;

/// Memory rows the fitter's calibration asks the fleet for in all: each agent offers
/// `CALIBRATION_ROWS / members` of its rows, at least 1 and at most [`MAX_ROWS_PER_AGENT`].
pub const CALIBRATION_ROWS: usize = 768;

/// The most memory rows one agent offers the fitter's calibration (`--calibrate 64`, the
/// figure measured on the wind nodes).
pub const MAX_ROWS_PER_AGENT: usize = 64;

/// How long after a pooled fit the fitter measures (the followers take the kernel within
/// about a second while the fleet changes: [`crate::node`]'s follow schedule).
pub const CALIBRATE_AFTER: Duration = Duration::from_secs(5);

/// How long the calibration's gets wait for replies.
pub const CALIBRATION_TIMEOUT: Duration = Duration::from_secs(10);

/// Domain tag of a calibration signature.
pub const CALIBRATION_TAG: &[u8] = b"coolgp calibration v1\0";

/// The fleet rule and calibration the fitter measured (status `fleet_calibration`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetCalibration {
    /// The rule with the smallest held-out error ([`FleetRule::name`]).
    pub rule: String,
    /// The safety net's weight on the residual correction, in [0, 1].
    pub weight: f64,
    /// The variance scale of the weighted answers.
    pub scale: f64,
    /// Held-out memory rows it was measured on.
    pub rows: u64,
    /// The fitter's pooled fits when it was measured (`local_pooled_fits`).
    pub fit: u64,
}

impl FleetCalibration {
    /// The calibration a query applies, or `None` if it is not one this build can apply: an
    /// unknown rule, fewer than [`MIN_CALIBRATION_ROWS`] rows, a weight outside [0, 1] or a
    /// scale outside [`SCALE_RANGE`] (a fitter of another build, or a damaged status).
    pub fn checked(&self) -> Option<RuleCalibration> {
        let rule = FleetRule::from_name(&self.rule)?;
        let ok = self.rows >= MIN_CALIBRATION_ROWS as u64
            && (0.0..=1.0).contains(&self.weight)
            && (SCALE_RANGE.0..=SCALE_RANGE.1).contains(&self.scale);
        ok.then_some(RuleCalibration {
            rule,
            weight: self.weight,
            scale: self.scale,
            mse: f64::NAN,
        })
    }
}

/// The calibration node `node` reports, as signed (module doc).
#[derive(Clone, Copy, Debug)]
pub struct CalibrationClaim<'a> {
    /// The fleet's name.
    pub fleet: &'a str,
    /// The reporting node's id.
    pub node: u64,
    /// Its calibration.
    pub calibration: &'a FleetCalibration,
}

impl Claim for CalibrationClaim<'_> {
    fn signed_bytes(&self) -> Vec<u8> {
        let c = self.calibration;
        let rule = FleetRule::ALL
            .iter()
            .position(|r| r.name() == c.rule)
            .map_or(u64::MAX, |i| i as u64);
        let words = [
            rule.to_le_bytes(),
            c.rows.to_le_bytes(),
            c.weight.to_le_bytes(),
            c.scale.to_le_bytes(),
        ];
        claim_bytes(CALIBRATION_TAG, self.fleet, self.node, c.fit, &words)
    }
}

/// The fitter's job (module doc): every rule measured on up to [`CALIBRATION_ROWS`] memory
/// rows of the fleet's `members` agents, `suspects` left out, the request for rows signed by
/// `signer` in a TLS fleet; `None` when fewer than [`MIN_CALIBRATION_ROWS`] rows came back or
/// a get failed (logged).
pub async fn measure(
    session: &zenoh::Session,
    fleet: &str,
    signer: Option<Member<'_>>,
    (suspects, members, fit): (&[u64], usize, u64),
) -> Option<FleetCalibration> {
    let asked = (suspects, members);
    let c = match measured(session, fleet, signer, asked, (None, DEFAULT_ROUTE)).await {
        Ok(c) => c,
        Err(why @ NotMeasured::TooFewRows(_)) => {
            tracing::info!(%why, "fleet calibration: not measured");
            return None;
        }
        Err(why) => {
            tracing::warn!(%why, "fleet calibration: not measured");
            return None;
        }
    };
    let rule = chosen_rule(&c.rules)?;
    let cal = c.rules.iter().find(|r| r.rule == rule)?;
    let scores: Vec<(&str, f64)> = c.rules.iter().map(|r| (r.rule.name(), r.mse)).collect();
    tracing::info!(
        ?scores,
        chosen = rule.name(),
        rows = c.rows,
        "fleet calibration: held-out mse"
    );
    Some(FleetCalibration {
        rule: rule.name().to_owned(),
        weight: cal.weight,
        scale: cal.scale,
        rows: c.rows as u64,
        fit,
    })
}

/// Why [`measured`] measured nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotMeasured {
    /// Fewer than [`MIN_CALIBRATION_ROWS`] memory rows came back (a young fleet).
    #[error("too few rows ({0})")]
    TooFewRows(usize),
    /// The members' briefs were unread, or a get failed.
    #[error("{0}")]
    Failed(String),
}

/// Every rule of [`FleetRule::ALL`] measured on the fleet's held-out memory rows (as
/// [`measure`]: up to [`CALIBRATION_ROWS`] rows of the `members` agents, `suspects` left out,
/// signed by `signer`), each row answered by its owner (leave-one-out) and the `route − 1`
/// agents nearest it by coverage ([`routing::routes`]), every answer under `trial` where
/// given ([`crate::request::PredictRequest::trial`]: the fitter's score of a kernel family on
/// the fleet's task, docs/LOCAL.md §12c).
///
/// # Errors
/// [`NotMeasured`]: fewer than [`MIN_CALIBRATION_ROWS`] rows came back, or the members'
/// briefs were unread or a get failed.
pub async fn measured(
    session: &zenoh::Session,
    fleet: &str,
    signer: Option<Member<'_>>,
    (suspects, members): (&[u64], usize),
    (trial, route): (Option<&TrialKernel>, usize),
) -> Result<Calibrated, NotMeasured> {
    let timeout = CALIBRATION_TIMEOUT;
    let briefs = routing::briefs(session, fleet, timeout)
        .await
        .map_err(|e| NotMeasured::Failed(format!("the members' briefs unread: {e}")))?
        .0;
    let routed = |x: &[Vec<f64>], columns: Option<&[String]>, owners: Option<&[u64]>| {
        routing::routes(&briefs, suspects, columns, x, route, owners)
    };
    let k = (CALIBRATION_ROWS / members.max(1)).clamp(1, MAX_ROWS_PER_AGENT);
    let ks = ((k, suspects), &routed as &fleet_query::Router<'_>);
    let under = AnswersUnder {
        view: None,
        trial: trial.cloned(),
    };
    let rules = &FleetRule::ALL;
    let c = fleet_query::calibrate(session, fleet, (under, signer), ks, rules, timeout)
        .await
        .map_err(|e| NotMeasured::Failed(e.to_string()))?;
    if c.rows < MIN_CALIBRATION_ROWS {
        return Err(NotMeasured::TooFewRows(c.rows));
    }
    Ok(c)
}

/// The calibration in the fitter's status `st` that a query may apply: checked
/// ([`FleetCalibration::checked`]) and, with a `roster` (a TLS fleet), signed by the fitter's
/// key. `Err` says why a calibration present is not applied (for the querier's notes).
pub fn published(
    fleet: &str,
    fitter: u64,
    st: &Status,
    roster: Option<&crate::auth::Roster>,
) -> Result<Option<RuleCalibration>, String> {
    let Some(c) = &st.fleet_calibration else {
        return Ok(None);
    };
    if let Some(r) = roster {
        let claim = CalibrationClaim {
            fleet,
            node: fitter,
            calibration: c,
        };
        if !r
            .key(fitter)
            .is_some_and(|k| claim.verifies(&k, &st.fleet_calibration_sig))
        {
            return Err(format!(
                "agent {fitter}'s fleet calibration is not signed by its key; not applied"
            ));
        }
    }
    c.checked().map(Some).ok_or_else(|| {
        format!("agent {fitter}'s fleet calibration {c:?} is not one this querier can apply")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Signer;
    use ring::rand::SystemRandom;
    use ring::signature::Ed25519KeyPair;
    use std::path::Path;

    fn cal() -> FleetCalibration {
        FleetCalibration {
            rule: "bcm".into(),
            weight: 0.97,
            scale: 1.2,
            rows: 700,
            fit: 4,
        }
    }

    #[test]
    fn only_a_sound_calibration_is_applied() {
        let c = cal().checked().expect("sound");
        assert_eq!((c.rule, c.weight, c.scale), (FleetRule::Bcm, 0.97, 1.2));
        for bad in [
            FleetCalibration {
                rule: "median".into(),
                ..cal()
            },
            FleetCalibration { rows: 5, ..cal() },
            FleetCalibration {
                weight: 1.5,
                ..cal()
            },
            FleetCalibration {
                weight: f64::NAN,
                ..cal()
            },
            FleetCalibration {
                scale: 1e6,
                ..cal()
            },
        ] {
            assert!(bad.checked().is_none(), "{bad:?}");
        }
    }

    #[test]
    fn a_calibration_verifies_only_as_signed_by_that_node() {
        let signer = || {
            let der = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("key");
            Signer::from_pkcs8(der.as_ref(), Path::new("test")).expect("signer")
        };
        let (fitter, other) = (signer(), signer());
        let c = cal();
        let claim = |node: u64, c: &FleetCalibration| {
            CalibrationClaim {
                fleet: "f",
                node,
                calibration: c,
            }
            .signed_bytes()
        };
        let sig = CalibrationClaim {
            fleet: "f",
            node: 0,
            calibration: &c,
        }
        .sign(&fitter);
        let ok =
            |bytes: Vec<u8>, key: &Signer| crate::auth::verifies(&key.public_key(), &bytes, &sig);
        assert!(ok(claim(0, &c), &fitter));
        assert!(!ok(claim(0, &c), &other));
        assert!(!ok(claim(1, &c), &fitter));
        for changed in [
            FleetCalibration {
                rule: "rbcm".into(),
                ..c.clone()
            },
            FleetCalibration {
                weight: 0.5,
                ..c.clone()
            },
            FleetCalibration {
                scale: 2.0,
                ..c.clone()
            },
            FleetCalibration {
                fit: 5,
                ..c.clone()
            },
            FleetCalibration {
                rows: 701,
                ..c.clone()
            },
        ] {
            assert!(!ok(claim(0, &changed), &fitter), "{changed:?}");
        }
    }
}
