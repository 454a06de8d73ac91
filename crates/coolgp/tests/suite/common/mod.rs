//! Helpers shared by the integration tests: JSON vectors and tolerance checks.
#![allow(dead_code)]

use coolgp::faer::Mat;
use coolgp::learn::{Site, SiteConfig};
use coolgp::model::psi::{accumulate_block, PsiWorkspace, UnitStats};
use coolgp::model::{Excess, NaturalParams, Projection, Vocabulary};
use coolgp::rng::Rng;
use coolgp::{Agent, AgentConfig, ProjectionMode};
use serde_json::Value;

/// Loads `tests/vectors/NAME`.
pub fn vector(name: &str) -> Value {
    let path = format!("{}/tests/vectors/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

pub fn vecf(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(num)
        .collect()
}

pub fn mat(v: &Value) -> Mat<f64> {
    let rows: Vec<Vec<f64>> = v.as_array().expect("matrix").iter().map(vecf).collect();
    let (r, c) = (rows.len(), rows.first().map_or(0, Vec::len));
    Mat::from_fn(r, c, |i, j| rows[i][j])
}

pub fn mat_flat(m: &Mat<f64>) -> Vec<f64> {
    (0..m.nrows())
        .flat_map(|i| (0..m.ncols()).map(move |j| (i, j)))
        .map(|(i, j)| m[(i, j)])
        .collect()
}

/// Max-norm relative error `max|got − want| / max|want|`.
pub fn rel_err(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "length mismatch");
    let scale = want
        .iter()
        .fold(0.0f64, |a, b| a.max(b.abs()))
        .max(f64::MIN_POSITIVE);
    got.iter()
        .zip(want)
        .fold(0.0f64, |a, (g, w)| a.max((g - w).abs()))
        / scale
}

#[track_caller]
pub fn close(name: &str, got: &[f64], want: &[f64], tol: f64) {
    let e = rel_err(got, want);
    assert!(
        e <= tol,
        "{name}: relative error {e:e} > {tol:e}\n got  {got:?}\n want {want:?}"
    );
}

#[track_caller]
pub fn close_mat(name: &str, got: &Mat<f64>, want: &Value, tol: f64) {
    let w = mat(want);
    assert_eq!(
        (got.nrows(), got.ncols()),
        (w.nrows(), w.ncols()),
        "{name}: shape"
    );
    close(name, &mat_flat(got), &mat_flat(&w), tol);
}

#[track_caller]
pub fn close_vec(name: &str, got: &[f64], want: &Value, tol: f64) {
    close(name, got, &vecf(want), tol);
}

#[track_caller]
pub fn close_num(name: &str, got: f64, want: &Value, tol: f64) {
    close(name, &[got], &[num(want)], tol);
}

/// The unit-scale statistics of one block under `p` (spec §4c).
pub fn unit_stats(v: &Vocabulary, p: &Projection, x: &Mat<f64>, y: &[f64]) -> UnitStats {
    let mut st = UnitStats::zeros(v.m());
    accumulate_block(v, p, x.as_ref(), y, &mut st, &mut PsiWorkspace::default());
    st
}

/// The exact q(u) of one block under `p` (spec §3, K-form).
pub fn exact_t(v: &Vocabulary, p: &Projection, x: &Mat<f64>, y: &[f64]) -> NaturalParams {
    let st = unit_stats(v, p, x, y);
    NaturalParams::from_excess(v, &Excess::from_unit_stats(&st, p.sigma_s(), p.sigma_n()))
}

/// A random data block `(x [n, d], y [n])`: `x ~ N(0, I)`, `y = sin(x_0 + x_{d−1}/2) + 0.1 ε`.
pub fn block(rng: &mut coolgp::rng::Rng, n: usize, d: usize) -> (Mat<f64>, Vec<f64>) {
    let mut x = Mat::zeros(n, d);
    for i in 0..n {
        for j in 0..d {
            x[(i, j)] = rng.normal();
        }
    }
    let y = (0..n)
        .map(|i| (x[(i, 0)] + 0.5 * x[(i, d - 1)]).sin() + 0.1 * rng.normal())
        .collect();
    (x, y)
}

/// Largest entrywise `|a − b| / max(|b|, 1)`.
pub fn max_rel(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() / y.abs().max(1.0))
        .fold(0.0, f64::max)
}

/// Every number of a site in wire order: Λ, λ, A, B, YY, N, points.
pub fn site_flat(s: &Site) -> Vec<f64> {
    let mut v = s.prec.clone();
    v.extend(&s.shift);
    v.extend(s.hyper.to_array());
    v.push(s.points);
    v
}

/// One round with seeded loss: every agent ticks, each message is dropped with probability
/// `p`, and every delivered message must be accepted.
pub fn lossy_round(agents: &mut [Agent], rng: &mut Rng, p: f64) {
    for a in agents.iter_mut() {
        a.handle_tick();
    }
    let msgs: Vec<_> = agents
        .iter_mut()
        .flat_map(|a| std::iter::from_fn(|| a.poll_transmit()).collect::<Vec<_>>())
        .collect();
    for msg in msgs {
        if rng.uniform() < p {
            continue;
        }
        let to = msg.header.receiver as usize;
        agents[to]
            .handle_message(msg)
            .expect("a valid running total");
    }
}

/// The fleet projection mode with a site update fit for a few small blocks (N0 = N_h = 50
/// points, so the data soon outweigh q0), the other settings at their defaults.
pub fn fleet_config() -> AgentConfig {
    AgentConfig {
        projection: ProjectionMode::Fleet,
        site: SiteConfig {
            damping: 0.3,
            prior_points: 50.0,
            scale_prior_points: 50.0,
            ..SiteConfig::default()
        },
        ..AgentConfig::default()
    }
}
