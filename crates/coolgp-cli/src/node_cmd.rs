//! `coolgp node`, `coolgp host`, `coolgp query`, `coolgp status`, `coolgp certs`: glue to the `coolgp-node` library, which
//! owns the flags, the event loop and the clients. This file only supplies the vocabulary
//! file loader (the file format lives in `vocab_file.rs`) and maps errors to `anyhow`.

use std::path::Path;

use anyhow::Result;
pub use coolgp_node::host::HostArgs;
pub use coolgp_node::{CertsArgs, NodeArgs, QueryArgs, StatusArgs};

/// The vocabulary file loader the node library is given.
fn load_vocab(p: &Path) -> std::result::Result<coolgp::Vocabulary, String> {
    crate::vocab_file::load(p).map_err(|e| format!("{e:#}"))
}

/// Runs `coolgp node` until SIGTERM/SIGINT.
pub fn node(args: NodeArgs) -> Result<()> {
    coolgp_node::run_node(args, &load_vocab)?;
    Ok(())
}

/// Runs `coolgp host` until SIGTERM/SIGINT.
pub fn host(args: HostArgs) -> Result<()> {
    coolgp_node::run_host(args, &load_vocab)?;
    Ok(())
}

/// Runs `coolgp query`.
pub fn query(args: QueryArgs) -> Result<()> {
    coolgp_node::run_query(args)?;
    Ok(())
}

/// Runs `coolgp status`.
pub fn status(args: StatusArgs) -> Result<()> {
    coolgp_node::run_status(args)?;
    Ok(())
}

/// Runs `coolgp certs`.
pub fn certs(args: &CertsArgs) -> Result<()> {
    coolgp_node::run_certs(args)?;
    Ok(())
}
