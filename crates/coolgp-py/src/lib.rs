//! Python bindings of COOL-GP: the native module `coolgp._coolgp` behind the `coolgp` package.
//! Not a reimplementation: every number comes from the Rust crates (`coolgp`, `coolgp-sim` and
//! its `simulate` options, `coolgp-config`'s agent options, `coolgp-store`'s checkpoint and
//! vocabulary formats; no networking, command line or plotting is compiled in); the Python API and its
//! tests are in `python/coolgp` and `tests/` (pytest), the example in the package docstring.
//!
//! A thin layer over the Rust API: numpy arrays in and out, keyword configuration, exceptions
//! instead of panics. Each concern has its own module: [`convert`] (array-likes ↔ matrices,
//! with the checks), [`fence`] (errors and the panic fence), [`vocab`], [`agent`] (the sans-IO
//! agent and its wire bytes), [`answers`] (its answers and the fleet rule), [`persist`] (the checkpoint format the node writes), [`fleet`]
//! (`FleetRegressor`), [`sim`] (`simulate`).
//!
//! Not built with PyO3's deprecated `extension-module` feature: maturin tells PyO3 not to link
//! libpython when it builds the wheel, and `cargo build` of the workspace still links.

use pyo3::prelude::*;

pub mod agent;
pub mod answers;
pub mod config;
pub mod convert;
pub mod fence;
pub mod fleet;
mod fleet_settings;
pub mod persist;
pub mod sim;
pub mod vocab;

/// The native module: classes, functions, the exception type and `__version__`.
#[pymodule]
fn _coolgp(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "RejectedMessage",
        m.py().get_type::<fence::RejectedMessage>(),
    )?;
    m.add_class::<vocab::Vocabulary>()?;
    m.add_class::<agent::Agent>()?;
    m.add_class::<fleet::FleetRegressor>()?;
    m.add_function(wrap_pyfunction!(agent::message_info, m)?)?;
    m.add_function(wrap_pyfunction!(answers::combine_answers, m)?)?;
    m.add_function(wrap_pyfunction!(agent::_agent_from_checkpoint, m)?)?;
    m.add_function(wrap_pyfunction!(sim::simulate, m)?)?;
    m.add_function(wrap_pyfunction!(fence::_panic_fence_check, m)?)?;
    Ok(())
}
