//! `coolgp.simulate(**flags)`: `coolgp simulate` in-process. Keywords are the command line's
//! flags with `_` for `-` (`max_train=50000` is `--max-train 50000`), read into the
//! simulator's own [`SimArgs`] (unknown keywords are refused with the list of known ones),
//! turned into a workload and a configuration by the simulator's code the command line runs
//! too ([`coolgp_sim::prepare`], [`coolgp_sim::sim_config`]), and run with the GIL released.

use std::path::PathBuf;
use std::sync::Arc;

use coolgp_sim::args::{sim_config, SimArgs};
use coolgp_sim::summary::run_fields;
use coolgp_sim::SimError;
use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Value};

use crate::fence::{fenced, value_err};

/// A float keyword as JSON. JSON has no NaN or infinity (serde_json would turn them into
/// null, which reads as "not given" and would silently run with the default), so they are
/// refused here, naming the keyword.
fn finite(key: &str, x: f64) -> PyResult<Value> {
    if x.is_finite() {
        Ok(Value::from(x))
    } else {
        Err(PyValueError::new_err(format!(
            "{key}: expected a finite number, got {x}"
        )))
    }
}

/// One keyword value as JSON: bool, int, float, str, path-like, or a list of those.
fn to_json(key: &str, v: &Bound<'_, PyAny>) -> PyResult<Value> {
    if v.is_instance_of::<PyBool>() {
        return Ok(Value::Bool(v.extract()?));
    }
    if v.is_instance_of::<PyInt>() {
        return match v.extract::<u64>() {
            Ok(n) => Ok(Value::from(n)),
            Err(_) => Err(PyValueError::new_err(format!(
                "{key}: expected a non-negative integer, got {v}"
            ))),
        };
    }
    if v.is_instance_of::<PyFloat>() {
        return finite(key, v.extract::<f64>()?);
    }
    if v.is_instance_of::<PyString>() {
        let s: String = v.extract()?;
        // --inputs is comma-separated on the command line (a list's items are names as given).
        if key == "inputs" {
            return Ok(Value::from(
                s.split(',').map(str::to_string).collect::<Vec<_>>(),
            ));
        }
        return Ok(Value::String(s));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let items: Vec<Value> = v
            .try_iter()?
            .map(|item| {
                let item = item?;
                // A list of input names: each item is one name, not a comma-separated list.
                if key == "inputs" && item.is_instance_of::<PyString>() {
                    return Ok(Value::String(item.extract()?));
                }
                to_json(key, &item)
            })
            .collect::<PyResult<_>>()?;
        return Ok(Value::Array(items));
    }
    // numpy scalars and other number-likes (`__index__`, then `__float__`).
    if let Ok(n) = v.extract::<u64>() {
        return Ok(Value::from(n));
    }
    if let Ok(x) = v.extract::<f64>() {
        return finite(key, x);
    }
    let os = v.py().import("os")?;
    match os.call_method1("fspath", (v,)) {
        Ok(p) => Ok(Value::String(p.extract()?)),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{key}: expected a bool, number, string, path or list, got {}",
            v.get_type().name()?
        ))),
    }
}

/// A simulator error with its chain of causes (`context: cause: …`), as `ValueError`.
fn sim_err(e: SimError) -> PyErr {
    PyValueError::new_err(coolgp::error::chain_message(&e))
}

/// The keywords as [`SimArgs`], plus `out` (where to write summary.json).
fn parse(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<(SimArgs, Option<PathBuf>)> {
    let mut obj = Map::new();
    let (mut out, mut config) = (None, None);
    for (k, v) in kwargs.map(|d| d.iter()).into_iter().flatten() {
        let key: String = k.extract()?;
        if v.is_none() {
            continue;
        }
        match key.as_str() {
            // Accepted for symmetry with the command line: no progress bar is ever drawn.
            "quiet" => {}
            "out" => out = Some(v.extract::<PathBuf>()?),
            "config" => config = Some(v.extract::<PathBuf>()?),
            _ => {
                obj.insert(key.replace('_', "-"), to_json(&key, &v)?);
            }
        }
    }
    let refused = |e: String| {
        let msg = format!("simulate: {}", e.replace('-', "_"));
        if msg.contains("unknown field") {
            PyTypeError::new_err(msg.replace("unknown field", "unknown keyword"))
        } else {
            PyValueError::new_err(msg)
        }
    };
    SimArgs::check_keys(obj.keys().map(String::as_str)).map_err(refused)?;
    let mut args: SimArgs =
        serde_json::from_value(Value::Object(obj)).map_err(|e| refused(e.to_string()))?;
    args.config = config;
    Ok((args, out))
}

/// Runs `coolgp simulate` with these flags (as keywords, `_` for `-`) and returns its
/// summary.json as a dict (`rmse_pre`, `rmse_post`, `rmse_central`, `agents`, `points`,
/// `wall_s`, `fusion_max_rel_err`, `network`, ...; docs/CLI.md, "summary.json"). `out=DIR` also
/// writes DIR/summary.json (the plots and CSVs are the command line's). `quiet` is accepted
/// and ignored; `config=FILE` reads flags from a TOML file as `--config` does.
/// Releases the GIL while the fleet runs.
///
/// Raises TypeError for an unknown keyword, ValueError for a bad value, a missing file, a size
/// that needs more memory than the machine has (`inducing=100000`), or a failed run.
#[pyfunction]
#[pyo3(signature = (**kwargs))]
pub fn simulate<'py>(
    py: Python<'py>,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    let (args, out) = parse(kwargs)?;
    let summary = py.detach(|| {
        fenced("simulate", || {
            let args = args.with_config_file().map_err(sim_err)?;
            if args.agent.projection.as_deref() == Some("both") {
                return Err(PyValueError::new_err(
                    "projection='both' is the command line's side-by-side run: call simulate once with projection='per-agent' and once with 'shared'",
                ));
            }
            args.check_fleet_flags().map_err(sim_err)?;
            let prep = coolgp_sim::prepare(&args).map_err(sim_err)?;
            let vocab = match &args.vocab {
                Some(p) => Some(Arc::new(coolgp_store::vocab_file::load(p).map_err(value_err)?)),
                None => None,
            };
            let (n, groups) = (prep.work.batches.len(), prep.groups);
            let cfg = sim_config(&args, n, groups, vocab).map_err(sim_err)?;
            // Sizes this machine cannot hold are refused before the run, naming the memory.
            if let Some(machine) = coolgp_config::machine_memory() {
                coolgp_sim::check_memory(&cfg, prep.work.d, prep.work.points(), machine).map_err(sim_err)?;
            }
            let report = coolgp_sim::run(&cfg, &prep.work, &|_, _| {}).map_err(sim_err)?;
            let mut summary = serde_json::to_value(&report).map_err(value_err)?;
            // The fields `coolgp simulate --out` adds beside the report.
            let fields = run_fields(&args, &cfg, &prep.work.projection_groups);
            if let (Some(obj), Value::Object(add)) = (summary.as_object_mut(), fields) {
                obj.extend(add);
            }
            Ok(serde_json::to_string_pretty(&summary).map_err(value_err)? + "\n")
        })
    })?;
    if let Some(dir) = out {
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join("summary.json"), &summary))
            .map_err(|e| {
                PyOSError::new_err(format!("writing {}/summary.json: {e}", dir.display()))
            })?;
    }
    py.import("json")?.call_method1("loads", (summary,))
}
