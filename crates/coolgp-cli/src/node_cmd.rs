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
    trim_freed_memory();
    coolgp_node::run_host(args, &load_vocab)?;
    Ok(())
}

/// How often a host hands the heap memory its allocator holds free back to the system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// Starts a thread that calls glibc's `malloc_trim(0)` every [`TRIM_EVERY`]. A query asking
/// all 1,000 agents of ten hosts about 1,000 rows (`--route 0`) left the hosts at 5.30 MB per
/// agent against 3.16 MB before it (issue 31): freed, but kept by the allocator.
fn trim_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let spawned = std::thread::Builder::new()
            .name("malloc-trim".into())
            .spawn(|| loop {
                std::thread::sleep(TRIM_EVERY);
                // SAFETY: malloc_trim only hands whole free pages of every arena back to the
                // system (glibc ≥ 2.8); it takes the allocator's own locks.
                unsafe {
                    libc::malloc_trim(0);
                }
            });
        if let Err(e) = spawned {
            eprintln!("warning: no thread to return freed memory to the system: {e}");
        }
    }
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
