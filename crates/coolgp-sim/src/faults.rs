//! The faulty-station field of issue 29 (docs/MEMBERS.md §4), built in: ten stations observe
//! `f(x1, x2) = sin x1 + 0.5·cos 2x2 + N(0, 0.1²)` at inputs uniform on [−3, 3]², 500 rows
//! each; chosen stations report through a [`Fault`]. The test set is 1,000 noise-free rows
//! of f, each tagged with one of the honest stations. Deterministic in its seed.

use coolgp::faer::Mat;
use coolgp::rng::Rng;

use coolgp::local::{LocalConfig, LocalFit};
use coolgp::members::Policy;
use coolgp::ProjectionMode;
use coolgp_config::{DEFAULT_LOCAL_MEMORY, DEFAULT_LOCAL_POLICY};

use crate::config::SimConfig;
use crate::workload::{Batch, TestSet, Workload};

/// Stations of the field.
pub const STATIONS: usize = 10;
/// Rows per station.
pub const ROWS: usize = 500;
/// Noise-free test rows.
pub const TEST_ROWS: usize = 1_000;

/// How a broken station reports its target (the four faults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// `y + 5`: an offset after a bad calibration.
    Offset,
    /// `y ~ N(0, 10²)`: pure noise from a loose wire.
    Noise,
    /// `y = 3`: a probe stuck at one value.
    Stuck,
    /// `y × 10`: a unit mix-up.
    Scaled,
}

impl Fault {
    /// Every fault, in the order.
    pub const ALL: [Fault; 4] = [Fault::Offset, Fault::Noise, Fault::Stuck, Fault::Scaled];

    /// The fault's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Offset => "offset",
            Self::Noise => "noise",
            Self::Stuck => "stuck",
            Self::Scaled => "scaled",
        }
    }

    /// What the station reports when it measures `y`.
    fn report(self, y: f64, rng: &mut Rng) -> f64 {
        match self {
            Self::Offset => y + 5.0,
            Self::Noise => 10.0 * rng.normal(),
            Self::Stuck => 3.0,
            Self::Scaled => 10.0 * y,
        }
    }
}

/// The field's phenomenon.
fn f(x1: f64, x2: f64) -> f64 {
    x1.sin() + 0.5 * (2.0 * x2).cos()
}

/// The field with `faults` (station, fault) in batches of `batch` rows, each batch one
/// station's (its routing group: run with as many agents as [`STATIONS`]). Inputs are
/// standardized by the uniform's spread (√3) and targets by the training rows' mean and
/// standard deviation without the stations that alone widen it, as a CSV run's are
/// (`y_scale` restores the original units).
///
/// # Panics
/// If `batch` is 0.
pub fn field(faults: &[(usize, Fault)], batch: usize, seed: u64) -> Workload {
    build(STATIONS, faults, batch, seed)
}

/// The clean field of the first `stations` stations alone (run by as many agents: see
/// [`config_for`]): every kept station's rows and the test rows are those of [`field`] with
/// the same seed, so `field_of(STATIONS - 1, …)` is the fleet that never had station 9: the
/// floor a contained fault at station 9 can reach (docs/MEMBERS.md §4).
///
/// # Panics
/// If `batch` is 0 or `stations` is 0 or above [`STATIONS`].
pub fn field_of(stations: usize, batch: usize, seed: u64) -> Workload {
    assert!(
        (1..=STATIONS).contains(&stations),
        "1 to {STATIONS} stations"
    );
    build(stations, &[], batch, seed)
}

/// [`field`] over the first `stations` stations (the rows of the others are drawn and
/// dropped, so every kept row is the same for any `stations`).
fn build(stations: usize, faults: &[(usize, Fault)], batch: usize, seed: u64) -> Workload {
    assert!(batch > 0, "batches of at least one row");
    let mut rng = Rng::new(seed, 0x29);
    let x_scale = 1.0 / 3f64.sqrt();
    let mut rows: Vec<(usize, [f64; 2], f64)> = Vec::with_capacity(STATIONS * ROWS);
    for s in 0..STATIONS {
        let fault = faults.iter().find(|(k, _)| *k == s).map(|p| p.1);
        for _ in 0..ROWS {
            let x = [6.0 * rng.uniform() - 3.0, 6.0 * rng.uniform() - 3.0];
            let y = f(x[0], x[1]) + 0.1 * rng.normal();
            let y = fault.map_or(y, |k| k.report(y, &mut rng));
            if s < stations {
                rows.push((s, x, y));
            }
        }
    }
    let (mean, sd) = fleet_scale(&rows, stations);
    let batches = rows
        .chunks(batch)
        .flat_map(|c| {
            // A chunk never spans two stations when `batch` divides ROWS; split it if it does.
            let mut out: Vec<Vec<&(usize, [f64; 2], f64)>> = Vec::new();
            for r in c {
                match out.last_mut() {
                    Some(b) if b[0].0 == r.0 => b.push(r),
                    _ => out.push(vec![r]),
                }
            }
            out
        })
        .map(|b| Batch {
            group: Some(b[0].0),
            x: Mat::from_fn(b.len(), 2, |i, j| b[i].1[j] * x_scale),
            y: b.iter().map(|r| (r.2 - mean) / sd).collect(),
        })
        .collect();
    let honest: Vec<usize> = (0..STATIONS)
        .filter(|&s| s < stations)
        .filter(|s| !faults.iter().any(|(k, _)| k == s))
        .collect();
    let mut test_rng = Rng::new(seed, 0x7E57);
    let mut x = Mat::zeros(TEST_ROWS, 2);
    let mut y = Vec::with_capacity(TEST_ROWS);
    let mut groups = Vec::with_capacity(TEST_ROWS);
    for i in 0..TEST_ROWS {
        let (a, b) = (
            6.0 * test_rng.uniform() - 3.0,
            6.0 * test_rng.uniform() - 3.0,
        );
        x[(i, 0)] = a * x_scale;
        x[(i, 1)] = b * x_scale;
        y.push((f(a, b) - mean) / sd);
        groups.push(honest.get(i % honest.len().max(1)).copied());
    }
    Workload {
        d: 2,
        batches,
        tests: vec![TestSet { x, y, groups }],
        groups: stations,
        test_by_group: false,
        projection_groups: Vec::new(),
        y_scale: sd,
    }
}

/// The target's mean and standard deviation over the rows of the stations that do not alone
/// widen its spread ([`coolgp_data::scale_outliers`]: the simulator's rule for a CSV routed by
/// station, so a broken station cannot rescale every member's data).
fn fleet_scale(rows: &[(usize, [f64; 2], f64)], stations: usize) -> (f64, f64) {
    let moments = |keep: &dyn Fn(usize) -> bool| {
        let kept = || rows.iter().filter(|r| keep(r.0)).map(|r| r.2);
        let n = kept().count() as f64;
        let mean = kept().sum::<f64>() / n;
        (
            mean,
            (kept().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt(),
        )
    };
    let (mean, sd) = moments(&|_| true);
    let y: Vec<f64> = rows.iter().map(|r| (r.2 - mean) / sd).collect();
    let groups: Vec<usize> = rows.iter().map(|r| r.0).collect();
    let out = coolgp_data::scale_outliers(&y, &groups, stations);
    if out.is_empty() {
        (mean, sd)
    } else {
        moments(&|s| !out.contains(&s))
    }
}

/// The run the field is measured with: the command line's defaults (a memory of
/// [`DEFAULT_LOCAL_MEMORY`] rows, [`DEFAULT_LOCAL_POLICY`], fitted fleet-wide), one agent per
/// station, the fleet projection, m = 30 (the command), q(u) fused every 25 batches
/// of 20 rows (a tenth of the stream), no references; `suspects` and `seed` as given.
pub fn config(suspects: Policy, seed: u64) -> SimConfig {
    config_for(STATIONS, suspects, seed)
}

/// [`config`] for a fleet of `agents` stations ([`field_of`]).
pub fn config_for(agents: usize, suspects: Policy, seed: u64) -> SimConfig {
    SimConfig {
        agents,
        inducing: 30,
        projection: ProjectionMode::Fleet,
        baselines: false,
        central: false,
        fuse_every: 25,
        seed,
        suspects,
        local: LocalConfig {
            capacity: DEFAULT_LOCAL_MEMORY,
            policy: DEFAULT_LOCAL_POLICY,
            fit: LocalFit::Fleet,
            ..LocalConfig::default()
        },
        ..SimConfig::default()
    }
}
