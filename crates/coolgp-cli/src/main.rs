//! `coolgp`: the command line of COOL-GP. Glue only: flags → validated configuration → run.

mod args;
mod demo;
mod experiments;
mod export;
#[cfg(feature = "node")]
mod node_cmd;
mod output;
mod plot;
mod ros2_cmd;
mod vocab_file;

#[cfg(not(feature = "node"))]
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use coolgp_sim::SimConfig;
use indicatif::{ProgressBar, ProgressStyle};

pub use crate::args::sim_config;
use crate::args::SimArgs;

/// Collective online learning of Gaussian processes: many agents, each learning its own sparse
/// GP online, fusing knowledge peer to peer with no server.
#[derive(Parser, Debug)]
#[command(name = "coolgp", version, about, long_about = None, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What `--help` adds: whether this build has the networked commands.
#[cfg(feature = "node")]
const AFTER_HELP: &str = "This build has the networked commands (the `node` feature).";
#[cfg(not(feature = "node"))]
const AFTER_HELP: &str =
    "Networked commands (node, host, query, status, certs, dashboard): build with \
                          `cargo build --release --features node`.";

#[derive(Subcommand, Debug)]
enum Command {
    /// The built-in Irish wind stations, one agent per station: RMSE of each station alone,
    /// fused with per-agent q(W), fused with the fleet's q(W), and of a central learner.
    Demo {
        /// Write summary.json, curves.csv, agents.csv and plots here (the fleet run; the
        /// per-agent run in DIR/per-agent).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Seed of the train/test split, the tree and the run.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Accepted for symmetry with the other commands (the demo shows no progress bar).
        #[arg(long)]
        quiet: bool,
    },
    /// Run a fleet of agents in one process on a built-in dataset or any CSV, over a chosen
    /// network with message loss, against a central learner and the dDTC/dPITC baselines.
    Simulate {
        #[command(flatten)]
        args: Box<SimArgs>,
        /// Write summary.json, curves.csv, agents.csv and plots here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
    },
    /// Reproduce a figure of the paper end to end (results folder with CSV, JSON, PNG and SVG).
    Experiment(experiments::ExperimentArgs),
    /// Write the standardized train/test split that `simulate` streams (CSV), so that a peer
    /// method or a notebook uses exactly the same rows.
    Export(export::ExportArgs),
    /// Choose inducing inputs Z for (m, d') and save them as a vocabulary file.
    Vocab(vocab_file::VocabArgs),
    /// ROS 2: the supported message types and their hashes, the topics of a rosbag2
    /// recording. A recording is data for `simulate --data BAG.mcap --ros2-input … --ros2-target
    /// …` (docs/ROS2.md).
    #[command(subcommand)]
    Ros2(ros2_cmd::Ros2Command),
    /// Run one agent as its own networked process (zenoh peer): learn online from a data
    /// stream, fuse with neighbours, answer `query` and `status`; crash-safe with --state.
    ///
    /// Security: with `--tls DIR` (certificates from `coolgp certs`) only fleet members get a
    /// link (mutual TLS against DIR/ca.pem) and every model message is signed by its sender and
    /// verified. WITHOUT --tls THE FLEET IS OPEN: it trusts its network, and anyone who can
    /// reach a node's port can query it and publish well-formed but false messages under any
    /// neighbour's id. Use open fleets only on a network you trust.
    #[cfg(feature = "node")]
    Node {
        #[command(flatten)]
        args: Box<node_cmd::NodeArgs>,
    },
    /// Run many agents in one process on one zenoh session (a gateway for hundreds of
    /// agents): FILE lists them (the keys of `coolgp node`'s file: shared ones at the top,
    /// one `[[agent]]` table per agent with its id, data, state and neighbors). On the wire
    /// each agent is a node; hosts and single nodes mix in one fleet. docs/NODE.md §15.
    #[cfg(feature = "node")]
    Host(node_cmd::HostArgs),
    /// Ask a running agent for predictions at the rows of a CSV: prints `mean,var_f,var_y`.
    #[cfg(feature = "node")]
    Query(node_cmd::QueryArgs),
    /// Print a running agent's status as JSON.
    #[cfg(feature = "node")]
    Status(node_cmd::StatusArgs),
    /// Write a fleet's certificates for `--tls DIR` (Ed25519): ca.pem/.key, node-<id>.pem/.key
    /// (common name = the id) and reader.pem/.key; `--add 4` adds a node to an existing DIR.
    #[cfg(feature = "node")]
    Certs(node_cmd::CertsArgs),
    /// Serve a live web page of a running fleet: nodes, network, convergence (read-only).
    #[cfg(feature = "node")]
    Dashboard(coolgp_dashboard::DashboardArgs),
    /// A networked command in a build without them (see [`NETWORKED`]).
    #[cfg(not(feature = "node"))]
    #[command(external_subcommand)]
    Networked(Vec<OsString>),
}

/// The commands of the `node` feature (zenoh, tokio, TLS), left out of the default build.
#[cfg(not(feature = "node"))]
const NETWORKED: [&str; 6] = ["node", "host", "query", "status", "certs", "dashboard"];

/// The error for a networked command (or an unknown one) in a build without the `node` feature.
#[cfg(not(feature = "node"))]
fn networked(args: &[OsString]) -> Result<()> {
    let name = args.first().and_then(|a| a.to_str()).unwrap_or("");
    if NETWORKED.contains(&name) {
        anyhow::bail!(
            "`coolgp {name}` is part of the networked build, which this binary was built without \
             (it keeps the first build small): rebuild with `cargo build --release --features node` \
             (or run `cargo run --release --features node -- {name} ...`)"
        )
    }
    anyhow::bail!(
        "unknown command '{name}': see `coolgp --help` (networked commands, with `--features node`: {})",
        NETWORKED.join(", ")
    )
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo {
            out,
            seed,
            quiet: _,
        } => demo::run(out, seed),
        Command::Simulate { args, out, quiet } => simulate(*args, out, quiet),
        Command::Vocab(v) => vocab_file::run(&v),
        Command::Ros2(c) => ros2_cmd::run(&c),
        Command::Export(e) => export::run(&e),
        #[cfg(feature = "node")]
        Command::Node { args } => node_cmd::node(*args),
        #[cfg(feature = "node")]
        Command::Host(a) => node_cmd::host(a),
        #[cfg(feature = "node")]
        Command::Query(a) => node_cmd::query(a),
        #[cfg(feature = "node")]
        Command::Status(a) => node_cmd::status(a),
        #[cfg(feature = "node")]
        Command::Certs(a) => node_cmd::certs(&a),
        #[cfg(feature = "node")]
        Command::Dashboard(a) => coolgp_dashboard::run_dashboard(a).map_err(Into::into),
        Command::Experiment(e) => experiments::run(&e),
        #[cfg(not(feature = "node"))]
        Command::Networked(args) => networked(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", coolgp::error::chain_message(e.as_ref()));
            ExitCode::from(1)
        }
    }
}

/// A progress bar on stderr with ETA, hidden with `--quiet` or when stderr is not a terminal.
pub fn progress_bar(quiet: bool, len: u64, what: &str) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:40.cyan/blue}] {pos}/{len} batches, {elapsed} elapsed, ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

/// A simulated run: its report, configuration, workload description and projection groups.
type SimRun = (coolgp_sim::Report, SimConfig, String, Vec<String>);

fn run_sim(args: &SimArgs, quiet: bool, title: &str) -> Result<SimRun> {
    let prep = coolgp_sim::prepare(args)?;
    if !quiet {
        eprintln!("{}", prep.description);
    }
    let cfg = sim_config(args, &prep.work, prep.groups)?;
    let pb = progress_bar(quiet, prep.work.batches.len() as u64, title);
    let report = coolgp_sim::run(&cfg, &prep.work, &|done, _| pb.set_position(done as u64))?;
    pb.finish_and_clear();
    Ok((report, cfg, prep.description, prep.work.projection_groups))
}

fn simulate(args: SimArgs, out: Option<PathBuf>, quiet: bool) -> Result<()> {
    let args = args.with_config_file()?;
    args.check_fleet_flags()?;
    if args.agent.projection.as_deref() == Some("both") {
        println!(
            "coolgp simulate — the per-agent, shared and fleet projection modes side by side \
             (dDTC/dPITC fitted once, on the per-agent run's central q(W))"
        );
        experiments::both_modes(&args, quiet, out.as_deref(), "coolgp simulate")?;
        if let Some(dir) = out {
            println!(
                "  results in {} (per-agent/, shared/, fleet/, summary.csv)",
                dir.display()
            );
        }
        return Ok(());
    }
    let (report, cfg, desc, groups) = run_sim(&args, quiet, "simulate")?;
    let projection = match groups.len() {
        0 => format!("{} projection", cfg.projection.name()),
        n => format!(
            "{} projection, {n} projection groups",
            cfg.projection.name()
        ),
    };
    println!("coolgp simulate — {projection} — {desc}");
    output::print_report(&report);
    if let Some(dir) = out {
        let mut extra = coolgp_sim::summary::run_fields(&args, &cfg, &groups);
        extra["peak_rss_mb"] = serde_json::json!(experiments::peak_rss());
        output::write_run(
            &dir,
            &report,
            &format!("coolgp simulate ({projection})"),
            extra,
        )
        .context("writing results")?;
        println!("  results in {}", dir.display());
    }
    Ok(())
}
