//! One simulated run: the paper's stream protocol over a fleet, with references.

use crate::fleet::{needs_tests, validate, Fleet, Progress};
use crate::report::Report;
use crate::workload::Workload;
use crate::{SimConfig, SimError};

/// Runs the paper's stream protocol (spec §13; paper §5): batches in random order, each to a
/// random (or routed) agent; every `fuse_every` batches the fleet runs its fusion rounds; at
/// the end the fleet and its references are evaluated on the test sets.
///
/// # Errors
/// [`SimError`] for an invalid configuration or workload.
pub fn run(cfg: &SimConfig, work: &Workload, progress: Progress<'_>) -> Result<Report, SimError> {
    validate(cfg, work)?;
    needs_tests(work)?;
    let mut fleet = Fleet::build(cfg, work)?;
    fleet.stream(progress)?;
    fleet.evaluate()
}
