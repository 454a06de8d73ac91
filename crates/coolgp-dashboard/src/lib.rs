//! # coolgp-dashboard — a live view of a fleet of `coolgp node` processes
//!
//! `coolgp dashboard --connect ENDPOINT --fleet F` joins the fleet's zenoh network as a
//! client that never listens, learns the membership from the nodes' liveliness tokens
//! (`coolgp/F/<id>/alive`) and asks each member for its `status` once per poll period; above
//! `--full-status-limit` members (default 64) it asks instead, once per poll period, for every
//! agent's brief status in one request (brief mode: aggregates, a grid of agents, fleet-level
//! series). It asks nothing else. It serves, on a loopback address unless told otherwise:
//!
//! | path            | what                                                             |
//! |-----------------|------------------------------------------------------------------|
//! | `/`             | the page (HTML, CSS, JS and uPlot embedded: works offline)       |
//! | `/api/fleet`    | `{"fleet": F, "nodes": [status…], "edges": [[a, b]…], …}`        |
//! | `/api/history`  | the time series kept so far (aligned on poll ticks)              |
//! | `/api/events`   | server-sent events: the `/api/fleet` document after every poll   |
//!
//! What it is **not**: no control of the nodes (read-only), no storage (history lives in
//! memory, 15 minutes at the default poll), no authentication of its own (bind it to
//! loopback and reach it through SSH, or put it behind your proxy).
//!
//! ## Pieces
//! - [`args`]: the flags; [`fleet`]: the sans-IO picture of the fleet (membership, rates,
//!   edges, convergence, problems) and the API document; [`brief`]: its brief mode for large
//!   fleets; [`problem`]: what the page lists at the top; [`history`]: the time series;
//! - [`watch`]: the zenoh side; [`http`]: the HTTP server; [`page`]: the embedded files.
//!
//! ## Example (the CLI does exactly this)
//! ```no_run
//! use clap::Parser;
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     dash: coolgp_dashboard::DashboardArgs,
//! }
//! let cli = Cli::parse_from([
//!     "coolgp-dashboard", "--fleet", "demo", "--connect", "tcp/127.0.0.1:7447",
//!     "--listen", "127.0.0.1:8080",
//! ]);
//! coolgp_dashboard::run_dashboard(cli.dash)?;
//! # Ok::<(), coolgp_dashboard::DashboardError>(())
//! ```

#![warn(missing_docs)]

pub mod args;
pub mod brief;
pub mod error;
pub mod fleet;
pub mod history;
pub mod http;
pub mod page;
pub mod problem;
pub mod watch;

use std::sync::{Arc, Mutex};

use coolgp_node::client;
use tokio::net::TcpListener;

pub use args::{DashboardArgs, Settings};
pub use error::{DashboardError, Result};
pub use fleet::FleetState;

/// `coolgp dashboard`: validates the flags, binds the HTTP address, opens the zenoh session
/// and serves until SIGTERM/SIGINT. Logs to stderr (`RUST_LOG`, as `coolgp node`).
///
/// # Errors
/// Invalid flags, an HTTP address that cannot be bound, or a zenoh configuration that
/// cannot be used. Problems of the fleet itself (nothing at the endpoint, an unknown fleet,
/// a node answering garbage) never stop the dashboard: they are shown on the page and
/// logged.
pub fn run_dashboard(args: DashboardArgs) -> Result<()> {
    let s = args.validate()?;
    coolgp_node::init_logging(coolgp_node::LogFormat::Text);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|source| DashboardError::Io {
            what: "starting the async runtime",
            source,
        })?;
    rt.block_on(serve(s))
}

async fn serve(s: Settings) -> Result<()> {
    let listener = TcpListener::bind(s.listen)
        .await
        .map_err(|source| DashboardError::Bind {
            addr: s.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| DashboardError::Io {
        what: "reading the bound address",
        source,
    })?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "serving on a non-loopback address: whoever reaches it sees the fleet's status");
    }
    let session = client::open(&s.zenoh).await?;
    let state = Arc::new(Mutex::new(
        FleetState::new(&s.fleet, &s.zenoh.connect, s.stale)
            .with_full_status_limit(s.full_status_limit),
    ));
    let (fleet_tx, fleet_rx) = tokio::sync::watch::channel::<Arc<str>>(Arc::from(""));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    // The first document exists before the first poll, so /api/fleet always answers JSON.
    let first = watch::lock(&state).snapshot(std::time::Instant::now(), watch::unix_ms());
    let _ = fleet_tx.send(first.to_string().into());
    let app = http::App {
        fleet: fleet_rx,
        state: state.clone(),
    };
    let server = tokio::spawn(http::serve(listener, app, stop_rx.clone()));
    tracing::info!(
        url = %format!("http://{addr}/"),
        fleet = %s.fleet,
        connect = ?s.zenoh.connect,
        "dashboard started"
    );
    let watcher = tokio::spawn(watch::run(
        session.clone(),
        s.clone(),
        state,
        fleet_tx,
        stop_rx,
    ));
    shutdown_signal().await?;
    tracing::info!("dashboard stopping");
    let _ = stop_tx.send(true);
    let _ = server.await;
    if let Ok(Err(e)) = watcher.await {
        tracing::warn!(error = %e, "fleet watcher ended with an error");
    }
    let _ = session.close().await;
    Ok(())
}

async fn shutdown_signal() -> Result<()> {
    let io = |source| DashboardError::Io {
        what: "installing the signal handler",
        source,
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).map_err(io)?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.map_err(io)?,
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await.map_err(io)?;
    Ok(())
}
