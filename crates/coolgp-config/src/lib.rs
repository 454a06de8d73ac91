//! # coolgp-config — the agent options, declared once
//!
//! The options that every driver of a [`coolgp::Agent`] shares (update mode, projection mode,
//! projection group, the fleet projection's site update, learning on or off) are declared here
//! once, in [`AgentArgs`]: the flags of `coolgp simulate` and `coolgp node` (flattened into
//! their own flag structs; `clap::Args` behind the cargo feature `clap`), the keys of their
//! TOML files (serde, kebab-case), and the keywords of the Python `Agent(...)` and
//! `coolgp.simulate(...)`. [`AgentArgs::validate`] turns them into a [`coolgp::AgentConfig`],
//! in one place for every driver; the drivers differ only where their runs do ([`Driver`]).
//!
//! Beside it: [`check_keys`], which refuses unknown keys of a configuration file or of
//! Python keywords (serde's `deny_unknown_fields` does not work with flattened structs), and
//! [`memory`], the check of sizes (inducing inputs, importance samples, the site window)
//! against the machine's memory.
//!
//! What it is not: no file is read here but `/proc/meminfo` ([`memory::machine_memory`],
//! which the drivers call at their edge); the math trusts what [`AgentArgs::validate`] returns.
//!
//! ```
//! use coolgp_config::{AgentArgs, Driver};
//!
//! let args = AgentArgs {
//!     projection: Some("fleet".into()),
//!     site_window: Some(40),
//!     ..AgentArgs::default()
//! };
//! let v = args.validate(Driver::Node)?;
//! assert_eq!(v.config.projection, coolgp::ProjectionMode::Fleet);
//! assert_eq!(v.config.site.window_points, 40);
//! // The site settings tune the fleet projection only: elsewhere they are refused by name.
//! let per_agent = AgentArgs { projection: None, ..args };
//! let e = per_agent.validate(Driver::Node).map(|_| ()).unwrap_err();
//! assert!(e.to_string().starts_with("--site-window tune the fleet projection's site update"));
//! # Ok::<(), coolgp_config::ConfigError>(())
//! ```

#![warn(missing_docs)]

mod agent;
mod families;
mod keys;
pub mod memory;
mod ros2;

pub use agent::{AgentArgs, Tunes, Validated, DEFAULT_LOCAL_MEMORY, DEFAULT_LOCAL_POLICY};
pub use families::{local_families, FitArgs};
pub use keys::check_keys;
pub use memory::{check_memory, machine_memory, Sizes};
pub use ros2::Ros2Args;

/// Who validates the options: the drivers accept different projection modes and spell the
/// options differently in their messages (`--projection` or `projection=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// `coolgp simulate` (and `coolgp.simulate`): every projection mode, also `both`; the
    /// projection group is a column of the data.
    Simulate,
    /// `coolgp node`: per-agent or fleet; the projection group is the node's group name.
    Node,
    /// The Python `Agent(...)`: keywords; the projection group is the agent's group name.
    Python,
}

impl Driver {
    /// `--name value` on the command line, `name=value` in Python (`_` for `-`).
    pub fn spell(self, key: &str, value: impl std::fmt::Display) -> String {
        match self {
            Driver::Simulate | Driver::Node => format!("--{key} {value}"),
            Driver::Python => format!("{}={value}", key.replace('-', "_")),
        }
    }
}

/// An option that cannot be used as given.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A value is missing, malformed, out of range or given where it does not apply; the
    /// message names the option and what to use instead.
    #[error("{0}")]
    Invalid(String),
    /// The update mode (`--mode`, `--samples`, `--normalization`) is unknown or out of range.
    #[error("{0}")]
    Mode(String),
    /// A setting of the fleet projection's site update is out of range or unknown.
    #[error("{0}")]
    Site(String),
    /// A size would need more memory than the machine has (see [`check_memory`]).
    #[error(
        "{option} needs {} for {what} ({formula}); this machine has {}",
        memory::gb(*.needed),
        memory::gib(*.machine)
    )]
    TooLarge {
        /// The option as given, e.g. `--inducing 100000` or `inducing=100000`.
        option: String,
        /// Bytes needed at least.
        needed: u128,
        /// What the bytes hold, e.g. `one m × m matrix`.
        what: String,
        /// How `needed` is counted, e.g. `m² × 8 bytes`.
        formula: String,
        /// The machine's memory in bytes.
        machine: u64,
    },
}
