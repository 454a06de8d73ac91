//! Flags of the fleet's clients: `coolgp query` and `coolgp status`.

use std::path::PathBuf;

use clap::Args;

use super::ZenohArgs;

/// The default `--route K` of `coolgp query --all` (issue 31; EXPERIMENTS.md "Routing").
pub const DEFAULT_ROUTE: usize = 16;

/// Flags of `coolgp query`: ask an agent, or every agent of the fleet, for predictions.
#[derive(Args, Debug, Clone)]
pub struct QueryArgs {
    /// Fleet name.
    #[arg(long)]
    pub fleet: String,
    /// Agent id to ask.
    #[arg(long, required_unless_present = "all", conflicts_with = "all")]
    pub agent: Option<u64>,
    /// Ask every agent of the fleet (one query over `coolgp/<fleet>/*/predict`; the client
    /// must reach every node, e.g. one --connect per node) and print their answers combined
    /// by --fleet-rule; stderr names who answered.
    #[arg(long)]
    pub all: bool,
    /// With --all: how the agents' answers at a point are combined: min-variance (the answer
    /// with the smallest predictive variance), bcm or rbcm (the agents' residual corrections
    /// by a (robust) Bayesian committee machine), most-informed, or auto (with --calibrate:
    /// the rule with the smallest error on the calibration's held-out rows, docs/LOCAL.md
    /// §12) [default: auto with --calibrate; else the fitter's calibration (the rule, weight
    /// and variance scale the fleet's fitter measured on held-out memory rows after its last
    /// pooled fit, signed in a TLS fleet); else rbcm]. A named rule is applied uncalibrated.
    #[arg(long, value_name = "NAME", requires = "all")]
    pub fleet_rule: Option<String>,
    /// With --all: calibrate the combined answers' variances (docs/LOCAL.md §10). Each node
    /// that pools rows (--local-fit fleet, the default) offers up to K of its memory rows (RAW
    /// DATA, sent to this querier) with its leave-one-out answers there (nodes started with
    /// --local-fit agent refuse, and with --tls every node refuses: rows go only to the
    /// fleet's members, and a querier is a reader); every node
    /// answers at those rows; the same rows choose the rule (auto), weigh the combined
    /// residual correction (the safety net: 1 unless the rows show it overshooting,
    /// docs/LOCAL.md §12) and scale the variances so that 95% of those rows fall inside
    /// mean ± 1.96 sd (rule, weight and scale go to stderr). Without it the answers are
    /// uncalibrated. E.g. 64.
    #[arg(long, value_name = "K", requires = "all")]
    pub calibrate: Option<usize>,
    /// With --calibrate and --tls DIR: sign the request for rows with DIR/node-ID.key, as
    /// member ID of the fleet (in a TLS fleet nodes send rows only to a member's signed
    /// request: a reader gets none; docs/NODE.md §13). The querier then holds a node's key.
    #[arg(long, value_name = "ID", requires_all = ["calibrate", "tls"])]
    pub sign_as: Option<u64>,
    /// With --all: ask each row only the K agents whose memory lies nearest it, by the
    /// coverage every node advertises (a few boxes around its memory rows in its residual
    /// kernel's metric; read from one `status?brief` request), in one query naming each
    /// agent's rows; an agent without a memory is asked last. 0: every agent answers every
    /// row. With K at least the fleet's size every agent answers, as with 0, bit for bit.
    /// The calibration's rows are routed the same way (each to its owner and the K − 1
    /// nearest others). docs/NODE.md §15.
    #[arg(long, value_name = "K", default_value_t = DEFAULT_ROUTE)]
    pub route: usize,
    /// Also print each answer's parts: global_mean, global_var (the fused global model),
    /// residual_mean, residual_var, residual_prior (the local residual GP on the agent's
    /// memory) and noise_var.
    #[arg(long)]
    pub parts: bool,
    /// CSV with a header; columns are matched to the agent's inputs by name (extra columns,
    /// e.g. the target, are ignored).
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
    /// fused (default) or own.
    #[arg(long, default_value = "fused")]
    pub view: String,
    /// Give up after this many milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub zenoh: ZenohArgs,
}

/// Flags of `coolgp status`: print an agent's status as JSON.
#[derive(Args, Debug, Clone)]
pub struct StatusArgs {
    /// Fleet name.
    #[arg(long)]
    pub fleet: String,
    /// Agent id to ask.
    #[arg(long, required_unless_present = "all", conflicts_with = "all")]
    pub agent: Option<u64>,
    /// Every agent's brief status from one request (`coolgp/<fleet>/*/status?brief`): the
    /// fleet's aggregates (agents, points, fleet points, rounds, traffic, suspects) and each
    /// agent's brief, as JSON. What a fleet of hundreds asks instead of one call per agent.
    #[arg(long)]
    pub all: bool,
    /// Include the fused and own excess (upper triangle of D1, and D2).
    #[arg(long, conflicts_with = "all")]
    pub fused: bool,
    /// Give up after this many milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub zenoh: ZenohArgs,
}
