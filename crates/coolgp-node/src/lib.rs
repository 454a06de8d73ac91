//! # coolgp-node — a COOL-GP agent as a networked process
//!
//! The third driver of the sans-IO [`coolgp::Agent`] (after the simulator and the tests): one
//! agent per process, learning online from its own data stream, exchanging constant-size
//! model messages with its neighbours over [zenoh](https://zenoh.io) peer to peer, answering
//! prediction and status queries, and surviving `kill -9` through durable checkpoints.
//!
//! What it is **not**: no math (all of it is in [`coolgp`]), no server, no home-made wire
//! protocol (zenoh carries the [`coolgp::protocol::codec`] bytes). Security: with `--tls DIR`
//! every link is mutual TLS against the fleet CA and every message is signed end to end
//! ([`auth`], [`tls`], [`certs`]); without it a fleet is open and trusts its network.
//!
//! ## Pieces
//! - [`keys`]: the key-expression layout (`coolgp/<fleet>/<from>/msg/<to>`, `…/predict`,
//!   `…/status`, `…/alive`).
//! - [`transport`]: the zenoh configuration (peer mode, explicit endpoints, no multicast
//!   scouting unless asked, `--zenoh-config` for TLS and routers).
//! - [`inbound`]: bounded per-sender queues served round-robin, reject counting and
//!   rate-limited logs.
//! - [`checkpoint`]: the state directory's checkpoints (temp file, fsync, rename, the previous
//!   one as fallback) in [`coolgp_store`]'s format (safetensors + JSON metadata, checksum).
//! - [`stream`]: the CSV data stream with byte offsets (`--follow`, stdin).
//! - [`node`]: the event loop; [`query`]: predict queries off the loop ([`request`]: their
//!   request and its trial kernel); [`client`]: `query`
//!   and `status`; [`fleet_query`]: `query --all`, every agent asked and their answers
//!   combined.
//! - [`certs`]: `coolgp certs`; [`tls`]: the certificate directory and zenoh's mTLS settings;
//!   [`auth`]: signed messages and the roster; [`row_auth`]: who receives raw memory rows.
//! - [`config`]: the clap flags and TOML file of the three subcommands.
//!
//! ## Example (the CLI does exactly this)
//! ```no_run
//! use clap::Parser;
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     node: coolgp_node::NodeArgs,
//! }
//! let cli = Cli::parse_from([
//!     "coolgp-node", "--id", "1", "--fleet", "demo", "--neighbors", "2",
//!     "--data", "agent1.csv", "--target", "y", "--state", "state1",
//!     "--listen", "tcp/127.0.0.1:7447",
//! ]);
//! let loader = |p: &std::path::Path| -> Result<coolgp::Vocabulary, String> {
//!     Err(format!("no vocabulary loader for {}", p.display()))
//! };
//! coolgp_node::run_node(cli.node, &loader)?;
//! # Ok::<(), coolgp_node::NodeError>(())
//! ```

#![warn(missing_docs)]

pub mod auth;
pub mod certs;
pub mod checkpoint;
pub mod client;
pub mod config;
pub mod coverage;
pub mod error;
pub mod family_task;
pub mod fit_members;
pub mod fleet_calibration;
pub mod fleet_query;
pub mod host;
pub mod inbound;
pub mod kernel_auth;
pub mod keys;
pub mod node;
pub mod pooled_fit;
pub mod query;
pub mod request;
pub mod ros2;
pub mod routing;
pub mod row_auth;
pub mod standardize;
pub mod status;
pub mod stream;
pub mod tls;
pub mod transport;

use std::io::Write;
use std::time::Duration;

use coolgp::local::calibrate::{chosen_rule, RuleCalibration, MIN_CALIBRATION_ROWS};

pub use certs::CertsArgs;
pub use config::{LogFormat, NodeArgs, NodeSettings, QueryArgs, StatusArgs, ZenohArgs};
pub use coolgp::local::FleetRule;
pub use error::{NodeError, Result};
pub use node::VocabLoader;
pub use status::{PredictReply, PredictRequest, Status};

/// Re-export of the zenoh crate used here (tests and tools that join a fleet's key space).
pub use zenoh;

fn runtime() -> Result<tokio::runtime::Runtime> {
    runtime_with(2)
}

/// Worker threads of a host's runtime (`coolgp host`): more than the cores, so that agents
/// waiting on a congested link (a reply, a blocking put) do not hold up the others.
pub const HOST_WORKERS: usize = 8;

/// A multi-threaded runtime with `workers` worker threads.
fn runtime_with(workers: usize) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(|e| NodeError::io("starting the async runtime", "", e))
}

/// Installs the `tracing` subscriber on stderr (level from `RUST_LOG`, default `info` with
/// zenoh at `warn`). Safe to call more than once.
pub fn init_logging(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        // RustDDS (--ros2 dds) warns for every peer that left without saying goodbye.
        EnvFilter::new("info,zenoh=warn,zenoh_transport=warn,zenoh_link_tcp=warn,rustdds=error")
    });
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => b.try_init(),
        LogFormat::Json => b.json().try_init(),
    };
}

/// `coolgp node`: validates the flags, then runs the node until SIGTERM/SIGINT.
///
/// # Errors
/// Configuration, data, checkpoint and zenoh errors at start-up; a failed checkpoint write.
pub fn run_node(args: NodeArgs, load_vocab: VocabLoader<'_>) -> Result<()> {
    let settings = args.resolve()?;
    init_logging(settings.log_format);
    runtime()?.block_on(node::run(settings, load_vocab))
}

/// `coolgp host FILE`: many agents in one process on one zenoh session ([`host`]), until
/// SIGTERM/SIGINT.
///
/// # Errors
/// The file's errors (naming the agent), an agent's start-up failure (named), zenoh's, and
/// the first agent that stopped on an error.
pub fn run_host(args: host::HostArgs, load_vocab: VocabLoader<'_>) -> Result<()> {
    let host = args.resolve()?;
    if let Some(s) = host.agents.first() {
        init_logging(s.log_format);
    }
    runtime_with(HOST_WORKERS)?.block_on(node::run_many(host, load_vocab))
}

/// `coolgp certs`: writes a fleet's CA and certificates (or adds nodes); prints the files.
///
/// # Errors
/// See [`certs::run`].
pub fn run_certs(args: &CertsArgs) -> Result<()> {
    let files = certs::run(args)?;
    let mut out = std::io::stdout().lock();
    for f in files {
        writeln!(out, "{}", f.display()).map_err(|e| NodeError::io("writing", "stdout", e))?;
    }
    Ok(())
}

/// `coolgp query`: prints `mean,var_f,var_y` per input row (one header line) to stdout, of
/// one agent (`--agent`) or of the fleet (`--all`: the agents' answers combined by
/// `--fleet-rule`; who answered, who was dropped and why, on stderr). `--parts` adds each
/// answer's parts as columns.
///
/// # Errors
/// Unreadable input, an unknown fleet rule, no reply, or the node's error.
pub fn run_query(args: QueryArgs) -> Result<()> {
    keys::validate_fleet(&args.fleet)?;
    // `auto` (the default with --calibrate): the rule with the smallest error on the
    // calibration's held-out rows (docs/LOCAL.md §12); it needs those rows.
    let rule = match args.fleet_rule.as_deref() {
        Some("auto") if args.calibrate.is_none() => {
            return Err(NodeError::Config(
                "--fleet-rule auto chooses the rule on held-out rows: give --calibrate K too, \
                 or name a rule (rbcm, bcm, min-variance, most-informed)"
                    .into(),
            ))
        }
        Some("auto") => None,
        Some(name) => Some(FleetRule::from_name(name).ok_or_else(|| {
            let known: Vec<&str> = FleetRule::ALL.iter().map(|r| r.name()).collect();
            NodeError::Config(format!(
                "unknown --fleet-rule '{name}': use auto, {}",
                known.join(", ")
            ))
        })?),
        // Chosen by --calibrate's rows, else the fitter's calibration, else DEFAULT_FLEET_RULE.
        None => None,
    };
    let table = stream::read_table(&args.input)?;
    let req = PredictRequest {
        columns: Some(table.names),
        x: table.rows,
        view: Some(args.view.clone()),
        parts: args.parts,
        ..PredictRequest::default()
    };
    let timeout = Duration::from_millis(args.timeout_ms);
    // `--sign-as ID` (clap requires --tls with it): the member key that signs row requests.
    let signer = match (args.sign_as, &args.zenoh.tls) {
        (Some(id), Some(dir)) => Some((auth::Signer::load(dir, id)?, id)),
        _ => None,
    };
    // With --tls, the fleet's roster verifies the fitter's list of suspects.
    let roster = args
        .zenoh
        .tls
        .as_ref()
        .map(|dir| auth::Roster::load(dir, &args.fleet))
        .transpose()?;
    let reply = runtime()?.block_on(async {
        let session = client::open(&args.zenoh).await?;
        let r = match args.agent {
            Some(agent) if !args.all => {
                client::fetch_predictions(&session, &args.fleet, agent, &req, timeout).await
            }
            _ => {
                let calibrate = (args.calibrate, signer.as_ref().map(|(s, id)| (s, *id)));
                let roster = roster.as_ref();
                let route = (args.route > 0).then_some(args.route);
                let mut notes = Vec::new();
                let r = fleet_answers(
                    &session,
                    &args.fleet,
                    &req,
                    (rule, calibrate, route),
                    timeout,
                    roster,
                    &mut notes,
                )
                .await;
                for n in notes {
                    eprintln!("{n}");
                }
                r
            }
        };
        let _ = session.close().await;
        r
    })?;
    let mut out = std::io::stdout().lock();
    out.write_all(client::predictions_csv(&reply).as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| NodeError::io("writing", "stdout", e))
}

/// `--calibrate K` and who signs its request for rows (`--sign-as`).
pub type Calibrate<'a> = (Option<usize>, Option<fleet_query::Member<'a>>);

/// The fleet rule of `coolgp query --all` without `--fleet-rule`.
pub const DEFAULT_FLEET_RULE: FleetRule = coolgp::local::calibrate::DEFAULT_RULE;

/// [`NodeError::NoReply`] for `key` after `timeout`.
fn no_reply(key: String, timeout: Duration) -> NodeError {
    NodeError::NoReply {
        key,
        timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
    }
}

/// The rule and calibration of `query --all --calibrate K` ([`fleet_query::calibrate`]): the
/// named `rule`, or the one with the smallest held-out error; the calibration measured for it
/// (a unit one below [`MIN_CALIBRATION_ROWS`] rows), reported on stderr.
///
/// # Errors
/// As [`fleet_query::calibrate`].
async fn calibrated_rule(
    session: &zenoh::Session,
    fleet: &str,
    from: (fleet_query::AnswersUnder, Option<fleet_query::Member<'_>>),
    ks: ((usize, &[u64]), &fleet_query::Router<'_>),
    rule: Option<FleetRule>,
    timeout: Duration,
    notes: &mut Vec<String>,
) -> Result<(FleetRule, RuleCalibration)> {
    let rules: Vec<FleetRule> = rule.map_or(FleetRule::ALL.to_vec(), |r| vec![r]);
    let c = fleet_query::calibrate(session, fleet, from, ks, &rules, timeout).await?;
    let rule = rule
        .or_else(|| chosen_rule(&c.rules))
        .unwrap_or(DEFAULT_FLEET_RULE);
    let cal = c
        .rules
        .iter()
        .find(|r| r.rule == rule)
        .copied()
        .unwrap_or(RuleCalibration::unit(rule));
    if c.rows >= MIN_CALIBRATION_ROWS {
        notes.push(format!(
            "calibration: rule {} (weight {:.6} on the residual correction), variance x{:.6} from {} leave-one-out memory rows of agent(s) {:?} (their raw rows, sent to this querier)",
            rule.name(),
            cal.weight,
            cal.scale,
            c.rows,
            c.owners
        ));
    } else {
        notes.push(format!(
            "warning: calibration: {} rows are too few for a scale ({MIN_CALIBRATION_ROWS} needed); answers uncalibrated",
            c.rows,
        ));
    }
    Ok((rule, cal))
}

/// How a fleet query combines and routes: the rule (None: chosen on `--calibrate`'s rows, or
/// without them the fitter's calibration, [`fleet_calibration`]), the
/// calibration (`--calibrate K` and its signer), `--route K`.
pub type FleetAsk<'a> = (Option<FleetRule>, Calibrate<'a>, Option<usize>);

/// `coolgp query --all` (and a node's fleet map, docs/ROS2.md §4): every agent's answers,
/// combined by `rule`, as one reply, with `calibrate = (Some(k), signer)` every variance times
/// the rule's scale measured on up to k memory rows per agent ([`fleet_query::calibrate`],
/// the request for rows signed by `signer` if given); the fitter's suspects' answers and rows
/// are left out ([`fleet_query::suspects`], verified with `roster` in a TLS fleet). Who
/// answered, who was dropped, left out and stayed silent are pushed to `notes` (the command
/// line prints them on stderr).
///
/// # Errors
/// No answer at all, or a calibration or routing request that fails.
pub async fn fleet_answers(
    session: &zenoh::Session,
    fleet: &str,
    req: &PredictRequest,
    (rule, calibrate, route): FleetAsk<'_>,
    timeout: Duration,
    roster: Option<&auth::Roster>,
    notes: &mut Vec<String>,
) -> Result<PredictReply> {
    // The fleet's suspects (issue 29) answer nothing and offer no calibration rows; the
    // fitter's calibration (issue 28) is the default rule's.
    let fitter = fleet_query::fitter_status(session, fleet, timeout).await;
    let suspects = fitter.as_ref().map_or(Vec::new(), |(f, st)| {
        fleet_query::suspects_in(fleet, *f, st, roster)
    });
    // `--route K` (issue 31): every node's coverage from one brief-status request.
    let route = match route {
        Some(k) => {
            let (briefs, dropped) = routing::briefs(session, fleet, timeout).await?;
            for d in dropped {
                notes.push(format!("warning: routing: dropped {d}"));
            }
            Some((briefs, k))
        }
        None => None,
    };
    let routed = |x: &[Vec<f64>], columns: Option<&[String]>, owners: Option<&[u64]>| {
        route
            .as_ref()
            .and_then(|(briefs, k)| routing::routes(briefs, &suspects, columns, x, *k, owners))
    };
    let (rule, cal) = match calibrate.0 {
        Some(k) => {
            let ks = (
                (k, suspects.as_slice()),
                &routed as &fleet_query::Router<'_>,
            );
            let under = fleet_query::AnswersUnder {
                view: req.view.clone(),
                trial: None,
            };
            let from = (under, calibrate.1);
            calibrated_rule(session, fleet, from, ks, rule, timeout, notes).await?
        }
        None => match rule {
            Some(rule) => (rule, RuleCalibration::unit(rule)),
            None => fitters_calibration(fleet, fitter.as_ref(), roster, notes),
        },
    };
    let req = &PredictRequest {
        route: routed(&req.x, req.columns.as_deref(), None),
        ..req.clone()
    };
    if let (Some(r), Some((briefs, k))) = (&req.route, &route) {
        let asked: usize = r.values().map(Vec::len).sum();
        notes.push(format!(
            "routed: each row to the {k} agents nearest it by coverage, of {} ({} answers for {} rows; {} agents advertise a coverage)",
            r.len(),
            asked,
            req.x.len(),
            briefs.values().filter(|b| b.coverage.is_some()).count()
        ));
    }
    let mut got = fleet_query::fetch_all(session, fleet, req, timeout).await?;
    let suspects = got.leave_out(&suspects);
    if !suspects.is_empty() {
        notes.push(format!(
            "left out the answers of agent(s) {suspects:?}: suspects of the fleet's member check (docs/MEMBERS.md)"
        ));
    }
    if got.answers.is_empty() {
        return Err(no_reply(keys::predict_all(fleet), timeout));
    }
    for (peer, why) in &got.dropped {
        notes.push(format!("warning: dropped the reply of {peer}: {why}"));
    }
    if !got.silent.is_empty() {
        notes.push(format!(
            "warning: no answer within {} ms from live agent(s) {:?}",
            timeout.as_millis(),
            got.silent
        ));
    }
    notes.push(format!(
        "answers from agent(s) {:?} of fleet '{fleet}', combined by {}",
        got.who(),
        rule.name()
    ));
    let combined: Vec<_> = got
        .combined(rule, req.x.len())
        .ok_or_else(|| no_reply(keys::predict_all(fleet), timeout))?
        .iter()
        .map(|a| cal.apply(a))
        .collect();
    Ok(query::reply_of(&combined, None, req.parts))
}

/// The rule and calibration of `query --all` with neither `--fleet-rule` nor `--calibrate`:
/// the fitter's ([`fleet_calibration::published`]), else [`DEFAULT_FLEET_RULE`] uncalibrated;
/// which one, on `notes`.
fn fitters_calibration(
    fleet: &str,
    fitter: Option<&(u64, status::Status)>,
    roster: Option<&auth::Roster>,
    notes: &mut Vec<String>,
) -> (FleetRule, RuleCalibration) {
    let unit = (
        DEFAULT_FLEET_RULE,
        RuleCalibration::unit(DEFAULT_FLEET_RULE),
    );
    let Some((id, st)) = fitter else {
        return unit;
    };
    match fleet_calibration::published(fleet, *id, st, roster) {
        Ok(Some(cal)) => {
            let c = st.fleet_calibration.as_ref();
            notes.push(format!(
                "calibration: agent {id}'s (the fitter, after its pooled fit {}): rule {} (weight {:.6} on the residual correction), variance x{:.6}, measured on {} leave-one-out memory rows",
                c.map_or(0, |c| c.fit),
                cal.rule.name(),
                cal.weight,
                cal.scale,
                c.map_or(0, |c| c.rows)
            ));
            (cal.rule, cal)
        }
        Ok(None) => unit,
        Err(why) => {
            notes.push(format!("warning: {why}"));
            unit
        }
    }
}

/// `coolgp status --all`: every node's brief status from one request, with the fleet's
/// aggregates ([`coverage::FleetBrief`]), as pretty JSON `{"fleet": …, "agents": [...]}`;
/// dropped replies go to stderr.
async fn fleet_status(session: &zenoh::Session, fleet: &str, timeout: Duration) -> Result<String> {
    let (briefs, dropped) = routing::briefs(session, fleet, timeout).await?;
    for d in dropped {
        eprintln!("warning: dropped {d}");
    }
    if briefs.is_empty() {
        return Err(no_reply(keys::status_all(fleet), timeout));
    }
    let agents: Vec<coverage::Brief> = briefs.into_values().collect();
    let doc = serde_json::json!({
        "fleet": coverage::FleetBrief::of(&agents),
        "agents": agents,
    });
    serde_json::to_string_pretty(&doc).map_err(|e| NodeError::Config(e.to_string()))
}

/// `coolgp status`: prints the agent's status (or with `--all` the fleet's briefs) as pretty
/// JSON to stdout.
///
/// # Errors
/// No reply, or the node's error.
pub fn run_status(args: StatusArgs) -> Result<()> {
    keys::validate_fleet(&args.fleet)?;
    let timeout = Duration::from_millis(args.timeout_ms);
    let text = runtime()?.block_on(async {
        let session = client::open(&args.zenoh).await?;
        let r = match args.agent {
            Some(agent) if !args.all => {
                client::fetch_status(&session, &args.fleet, agent, args.fused, timeout)
                    .await
                    .and_then(|st| {
                        serde_json::to_string_pretty(&st)
                            .map_err(|e| NodeError::Config(e.to_string()))
                    })
            }
            _ => fleet_status(&session, &args.fleet, timeout).await,
        };
        let _ = session.close().await;
        r
    })?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")
        .and_then(|()| out.flush())
        .map_err(|e| NodeError::io("writing", "stdout", e))
}
