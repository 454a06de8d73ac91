//! The options of `coolgp simulate` ([`SimArgs`], declared with their TOML keys in
//! `coolgp-sim`, whose `clap` feature this crate turns on) and the edge of their validation:
//! the `--vocab` file and this machine's memory.

use std::sync::Arc;

use anyhow::Result;
pub use coolgp_sim::args::SimArgs;
use coolgp_sim::{SimConfig, Workload};

/// Resolves the flags into a simulator configuration for the stream `work` in `groups` routing
/// groups ([`coolgp_sim::sim_config`]): loads `--vocab`, and refuses sizes that need more
/// memory than this machine has ([`coolgp_sim::check_memory`]).
pub fn sim_config(a: &SimArgs, work: &Workload, groups: Option<usize>) -> Result<SimConfig> {
    let vocab = match &a.vocab {
        Some(p) => Some(Arc::new(crate::vocab_file::load(p)?)),
        None => None,
    };
    let cfg = coolgp_sim::sim_config(a, work.batches.len(), groups, vocab)?;
    if let Some(machine) = coolgp_config::machine_memory() {
        coolgp_sim::check_memory(&cfg, work.d, work.points(), machine)?;
    }
    Ok(cfg)
}
