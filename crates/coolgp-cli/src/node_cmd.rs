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
    few_malloc_arenas();
    coolgp_node::run_host(args, &load_vocab)?;
    Ok(())
}

/// Malloc arenas a host process keeps at the most (glibc's `M_ARENA_MAX`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const HOST_MALLOC_ARENAS: i32 = 2;

/// Limits glibc's malloc to [`HOST_MALLOC_ARENAS`] arenas in a host process. By default glibc
/// gives threads that allocate at once arenas of their own, up to 8 per core, and keeps what
/// they freed: a host of 100 agents (issue 31), whose predict answers run on up to a hundred
/// blocking threads at once, held 1.22 GB from the system with 227 MB in use (`malloc_stats`
/// read in gdb). With one arena per core the freed memory is reused.
fn few_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; it is called before any thread of
    // ours starts.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, HOST_MALLOC_ARENAS);
    }
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
