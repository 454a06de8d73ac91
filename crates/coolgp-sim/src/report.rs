//! What a run reports: headline figures, learning curves, per-agent rows, phase timings.

use serde::Serialize;

use std::collections::BTreeMap;

use crate::baselines::Uploads;
use crate::fleet::{QueryScores, UnionStats};
use crate::network::NetStats;

/// A point of the learning curves (mean RMSE over evaluated agents, original units).
#[derive(Clone, Debug, Serialize)]
pub struct CurvePoint {
    /// Batches seen by the fleet.
    pub batches: usize,
    /// Data points seen.
    pub points: usize,
    /// Mean own-model RMSE.
    pub rmse_pre: f64,
    /// Mean fused-model RMSE.
    pub rmse_post: f64,
    /// Central learner RMSE.
    pub rmse_central: Option<f64>,
    /// dDTC server RMSE.
    pub rmse_ddtc: Option<f64>,
    /// dPITC server RMSE.
    pub rmse_dpitc: Option<f64>,
    /// `(agent, pre, post)` RMSE of each evaluated agent.
    pub per_agent: Vec<(usize, f64, f64)>,
}

/// Per-agent final figures.
#[derive(Clone, Debug, Serialize)]
pub struct AgentRow {
    /// Agent id.
    pub id: usize,
    /// Blocks absorbed.
    pub blocks: u64,
    /// Own points.
    pub points: usize,
    /// Own-model RMSE.
    pub rmse_pre: f64,
    /// Fused-model RMSE.
    pub rmse_post: f64,
}

/// The outcome of a run (`summary.json`, `curves.csv`, `agents.csv`).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Mean own-model RMSE over agents (original units).
    pub rmse_pre: f64,
    /// Mean fused-model RMSE over agents.
    pub rmse_post: f64,
    /// `rmse_post` over the agents not marked suspect at the end (every agent without
    /// suspects or with `--suspects off`; issue 29).
    pub rmse_post_trusted: f64,
    /// The member check (`--suspects flag|contain`; absent with `off`): every agent's
    /// standing and evidence, the suspects, the checks' CPU seconds (docs/MEMBERS.md).
    pub members: Option<crate::fleet::MembersReport>,
    /// Central learner RMSE.
    pub rmse_central: Option<f64>,
    /// dDTC RMSE.
    pub rmse_ddtc: Option<f64>,
    /// dPITC RMSE.
    pub rmse_dpitc: Option<f64>,
    /// What became of the batch summaries of dDTC and dPITC (`[ddtc, dpitc]`): arrived, lost
    /// by the network, or failed to compute (dPITC's `Λ_b` not positive definite; such a
    /// batch is missing from the server's model just like a lost one).
    pub baseline_uploads: Option<[Uploads; 2]>,
    /// RMSE of the constant (training-mean) predictor.
    pub rmse_constant: f64,
    /// Mean Gaussian NLPD of the fused models (original units), over up to 50 agents × 1,000
    /// test points: the k-th evaluated agent on the k-th window of its test set, so that the
    /// agents together cover the test set.
    pub nlpd_post: f64,
    /// Mean Gaussian NLPD of the central learner (original units) on the same test points as
    /// `nlpd_post`.
    pub nlpd_central: Option<f64>,
    /// Fraction of test targets inside `mean ± 1.96·sqrt(var_y)` of the fused models (the
    /// central 95% predictive interval of y), averaged over the agents and points of
    /// `nlpd_post`.
    pub coverage95_post: f64,
    /// Mean over the agents of `nlpd_post` of the σ_s their fused models predict with
    /// (original units: the signal's standard deviation).
    pub sigma_s_post: f64,
    /// As `sigma_s_post` for σ_n (original units: the noise's standard deviation).
    pub sigma_n_post: f64,
    /// The central learner's σ_s (original units).
    pub sigma_s_central: Option<f64>,
    /// The central learner's σ_n (original units).
    pub sigma_n_central: Option<f64>,
    /// Fleet-wide query (issue 19) under the run's `fleet_rule`: RMSE (original units) of the
    /// fleet's combined answer on the first 2,000 rows of each test set (a deterministic
    /// subset: the test set is shuffled), every agent answering with its fused q(u) plus its
    /// local memory's correction (without memory: the global model alone).
    pub rmse_fleet_query: f64,
    /// As `rmse_fleet_query`, the mean Gaussian NLPD (original units) of the combined answer,
    /// its variance calibrated by `fleet_query_var_scale`.
    pub nlpd_fleet_query: f64,
    /// As `rmse_fleet_query`, the fraction of targets inside `mean ± 1.96·sqrt(var_y)`, the
    /// variance calibrated by `fleet_query_var_scale`.
    pub coverage95_fleet_query: f64,
    /// The rule's variance scale, measured on the agents' leave-one-out answers at their own
    /// memory rows (docs/LOCAL.md §10; 1 without memory).
    pub fleet_query_var_scale: f64,
    /// The safety net's weight on the residual correction, measured on the same held-out
    /// answers (docs/LOCAL.md §12; 1 without memory): the fleet query's answers are
    /// `global + weight · residual`.
    pub fleet_query_weight: f64,
    /// `rmse_fleet_query` of the answers without the safety net (weight 1).
    pub rmse_fleet_query_unweighted: f64,
    /// The global fused model alone on the fleet query's rows (the combined answers' global
    /// part): what `rmse_fleet_query` is to be compared with (`rmse_post` is over the whole
    /// test set, the fleet query over its first 2,000 rows).
    pub rmse_fleet_query_global: f64,
    /// `nlpd_fleet_query` of the uncalibrated answers.
    pub nlpd_fleet_query_raw: f64,
    /// `coverage95_fleet_query` of the uncalibrated answers.
    pub coverage95_fleet_query_raw: f64,
    /// Memory rows the calibration was measured on (over all agents).
    pub fleet_calibration_rows: usize,
    /// `--route K` of the fleet query and its calibration (issue 31; `None`: every agent).
    pub fleet_query_route: Option<usize>,
    /// Agents that answered each fleet-query row, on average (≤ K with `--route K`).
    pub fleet_query_answers_per_row: f64,
    /// The fleet rule of the `*_fleet_query` fields (`--fleet-rule`).
    pub fleet_rule: String,
    /// The fleet rule was chosen on the calibration's held-out rows (`--fleet-rule auto`, the
    /// default) rather than named.
    pub fleet_rule_auto: bool,
    /// The fleet-wide query's scores under every rule of the core (`min-variance`, `bcm`,
    /// `rbcm`, …: [`coolgp::local::FleetRule::ALL`]), on the same rows; with `--union-k`, the
    /// union rules too (`union-2`, …: [`coolgp::local::UnionRule`]).
    pub fleet_query_rules: BTreeMap<String, QueryScores>,
    /// What each union rule of `--union-k` did, by its name: sets of agents factored, their
    /// mean rows, fallbacks and wall seconds (absent without `--union-k`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub fleet_query_union: BTreeMap<String, UnionStats>,
    /// The oracle's RMSE (original units) on the rows of the fleet query whose routing group
    /// is known (`--agent-by`, `--regions`, the synthetic phenomena; `None` for random
    /// routing): the answer of the agent that holds the row's region or station (the
    /// smallest-variance one if several agents share it).
    pub rmse_oracle_local: Option<f64>,
    /// As `rmse_oracle_local`, the NLPD (original units).
    pub nlpd_oracle_local: Option<f64>,
    /// As `rmse_oracle_local`, the 95% interval coverage.
    pub coverage95_oracle_local: Option<f64>,
    /// Mean rows in the agents' local memories at the end of the stream (`--local-memory`).
    pub local_points_mean: f64,
    /// The residual kernel's family the agents hold at the end (agent 0's: `se`, `matern32`,
    /// `matern52` or `sum`; docs/LOCAL.md §12a–§12c).
    #[serde(default)]
    pub local_family: String,
    /// Mean bytes of local state per agent: the memory's rows and targets, the Cholesky
    /// factor of its residual kernel matrix and its weights (8 bytes per value).
    pub local_bytes_per_agent: f64,
    /// Agents.
    pub agents: usize,
    /// Inducing inputs m.
    pub inducing: usize,
    /// Training points streamed.
    pub points: usize,
    /// Batches streamed.
    pub batches: usize,
    /// Wall time of the run in seconds (everything but loading).
    pub wall_s: f64,
    /// Largest `‖T_fused,i − T_g‖_F / ‖T_g‖_F` over agents after the last fusion.
    pub fusion_max_rel_err: f64,
    /// Fusion rule used.
    pub fusion: String,
    /// Topology.
    pub topology: String,
    /// Diameter of the graph the fusion ran on (edges), if connected.
    pub diameter: Option<usize>,
    /// Rounds per fusion (with the two-pass schedule: its steps; for push-sum without
    /// `--rounds`, the most rounds one fusion took to settle).
    pub rounds: usize,
    /// Push-sum without `--rounds`: fusions that stopped at the round cap before every
    /// estimate settled (0 otherwise).
    pub rounds_capped: usize,
    /// `rounds` or `two-pass`.
    pub schedule: String,
    /// Transmission loss probability.
    pub loss: f64,
    /// Network counters.
    pub network: NetStats,
    /// Wall seconds spent per phase.
    pub phases: Phases,
    /// Seed.
    pub seed: u64,
    /// Vocabulary fingerprint.
    pub fingerprint: String,
    /// Learning curves.
    #[serde(skip)]
    pub curves: Vec<CurvePoint>,
    /// Per-agent rows.
    #[serde(skip)]
    pub per_agent: Vec<AgentRow>,
    /// RMSE of the fleet query (`fleet_rule`, original units) on the rows of each routing
    /// group (a station, a region; `None` for a group without a row of the query).
    #[serde(skip)]
    pub fleet_query_by_group: Vec<Option<f64>>,
}

/// Wall seconds per phase of a run (the fleet's blocks run alongside the central learner).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Phases {
    /// Agents absorbing blocks (and, concurrently, the central learner).
    pub learn_s: f64,
    /// Fusion rounds.
    pub fusion_s: f64,
    /// Learning-curve and final evaluation of every agent.
    pub eval_s: f64,
    /// dDTC and dPITC.
    pub baselines_s: f64,
    /// The fleet-wide queries: every agent's local answers and their combinations.
    pub local_s: f64,
    /// CPU seconds (all threads) of the fleet query's calibration, within `local_s`'s phase.
    pub calibration_cpu_s: f64,
    /// CPU seconds (all threads) of the member checks (issue 29), within `fusion_s`'s phase.
    pub members_cpu_s: f64,
}
