//! Agents' answers in Python (issue 19): `Agent.local_answers` as a dict of arrays, and
//! `coolgp.combine_answers`, the fleet rule ([`coolgp::local::combine`]) over several agents'
//! answers point by point, as `coolgp query --all` and `FleetRegressor.predict` apply it.

use coolgp::local::{combine, FleetRule, LocalAnswer};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert;

/// The six parts of an answer, in the order of the dict's keys.
const PARTS: [&str; 6] = [
    "global_mean",
    "global_var",
    "residual_mean",
    "residual_var",
    "residual_prior",
    "noise_var",
];

fn parts(a: &LocalAnswer) -> [f64; 6] {
    [
        a.global_mean,
        a.global_var,
        a.residual_mean,
        a.residual_var,
        a.residual_prior,
        a.noise_var,
    ]
}

/// A quantity derived from an answer (its mean or a variance).
type Derived = fn(&LocalAnswer) -> f64;

/// `answers` as a dict of float64 arrays (one per part, [`PARTS`]) plus 'mean', 'var_f' and
/// 'var_y'.
pub fn to_dict<'py>(py: Python<'py>, answers: &[LocalAnswer]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, name) in PARTS.iter().enumerate() {
        let col: Vec<f64> = answers.iter().map(|a| parts(a)[k]).collect();
        d.set_item(*name, convert::to_numpy_vec(py, col))?;
    }
    let derived: [(&str, Derived); 3] = [
        ("mean", LocalAnswer::mean),
        ("var_f", LocalAnswer::var_f),
        ("var_y", LocalAnswer::var_y),
    ];
    for (name, f) in derived {
        let col: Vec<f64> = answers.iter().map(f).collect();
        d.set_item(name, convert::to_numpy_vec(py, col))?;
    }
    Ok(d)
}

/// A dict of `Agent.local_answers` back to answers (every part an array of one length).
fn from_dict(d: &Bound<'_, PyAny>, which: usize) -> PyResult<Vec<LocalAnswer>> {
    let mut cols = Vec::with_capacity(PARTS.len());
    for name in PARTS {
        let v = d
            .get_item(name)
            .map_err(|_| PyValueError::new_err(format!("answers[{which}]: missing '{name}'")))?;
        let n = cols.first().map(Vec::len);
        cols.push(convert::vector(&v, name, n)?);
    }
    let n = cols[0].len();
    Ok((0..n)
        .map(|i| LocalAnswer {
            global_mean: cols[0][i],
            global_var: cols[1][i],
            residual_mean: cols[2][i],
            residual_var: cols[3][i],
            residual_prior: cols[4][i],
            noise_var: cols[5][i],
        })
        .collect())
}

/// The fleet rule of a name.
///
/// # Errors
/// `ValueError` naming the known rules.
pub fn rule(name: &str) -> PyResult<FleetRule> {
    FleetRule::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = FleetRule::ALL.iter().map(|r| r.name()).collect();
        PyValueError::new_err(format!(
            "unknown fleet_rule '{name}': use {}",
            known.join(", ")
        ))
    })
}

/// The agents' answers (`per_agent[i][p]`: agent i at point p) combined point by point.
///
/// # Errors
/// `ValueError` if the agents answered at different numbers of points or none answered.
pub fn combined(rule: FleetRule, per_agent: &[Vec<LocalAnswer>]) -> PyResult<Vec<LocalAnswer>> {
    let n = per_agent.first().map_or(0, Vec::len);
    if per_agent.iter().any(|a| a.len() != n) {
        return Err(PyValueError::new_err(
            "answers: every agent must answer at the same points",
        ));
    }
    (0..n)
        .map(|p| {
            let at: Vec<LocalAnswer> = per_agent.iter().map(|a| a[p]).collect();
            combined_at(rule, &at)
        })
        .collect()
}

/// The answers at one point (`at`: one per agent asked) combined by `rule`.
///
/// # Errors
/// `ValueError` if no agent answered.
pub fn combined_at(rule: FleetRule, at: &[LocalAnswer]) -> PyResult<LocalAnswer> {
    combine(rule, at).ok_or_else(|| PyValueError::new_err("answers: no agent answered"))
}

/// Combines several agents' answers at the same points (a list of `Agent.local_answers`
/// dicts) by a fleet rule, point by point: "min-variance" (the answer with the smallest
/// var_y), "bcm" or "rbcm" (default; a (robust) Bayesian committee machine over the agents'
/// residual corrections) or "most-informed". Returns a dict of the same keys.
///
/// Raises ValueError for an unknown rule, an empty list, or answers of different lengths.
#[pyfunction]
#[pyo3(signature = (answers, rule="rbcm"))]
pub fn combine_answers<'py>(
    py: Python<'py>,
    answers: Vec<Bound<'py, PyAny>>,
    rule: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let r = self::rule(rule)?;
    if answers.is_empty() {
        return Err(PyValueError::new_err("answers: an empty list"));
    }
    let per_agent = answers
        .iter()
        .enumerate()
        .map(|(i, d)| from_dict(d, i))
        .collect::<PyResult<Vec<_>>>()?;
    to_dict(py, &combined(r, &per_agent)?)
}
