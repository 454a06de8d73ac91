//! The data of a run: the stream of batches and the test sets.

use coolgp::faer::Mat;

/// One arriving batch. With `group = Some(g)` it goes to a random agent of group g (agent i
/// belongs to group `i % groups`; with fewer agents than groups, to agent `g % agents`);
/// otherwise to a uniformly random agent.
#[derive(Clone, Debug)]
pub struct Batch {
    /// Routing group (a phenomenon, a station).
    pub group: Option<usize>,
    /// Inputs `[n, d]` (standardized).
    pub x: Mat<f64>,
    /// Targets `[n]` (on the fleet-wide scale).
    pub y: Vec<f64>,
}

/// A test set.
#[derive(Clone, Debug)]
pub struct TestSet {
    /// Inputs `[n, d]`.
    pub x: Mat<f64>,
    /// Targets `[n]`.
    pub y: Vec<f64>,
    /// The routing group of each row where known (its station under `--agent-by`, its region
    /// under `--regions`, its phenomenon in the synthetic domain): the agents of that group
    /// are the row's oracle (the fleet-query scores' `*_oracle_local`). Empty when no row's
    /// group is known (random routing).
    pub groups: Vec<Option<usize>>,
}

impl TestSet {
    /// A test set whose rows' groups are unknown.
    pub fn new(x: Mat<f64>, y: Vec<f64>) -> Self {
        Self {
            x,
            y,
            groups: Vec::new(),
        }
    }

    /// The routing group of row `i`, if known.
    pub fn group(&self, i: usize) -> Option<usize> {
        self.groups.get(i).copied().flatten()
    }
}

/// The data of a run.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Input dimension d.
    pub d: usize,
    /// The stream (shuffled by the run).
    pub batches: Vec<Batch>,
    /// Test sets.
    pub tests: Vec<TestSet>,
    /// Number of routing groups (0 when batches carry none).
    pub groups: usize,
    /// Agent i is tested on `tests[(i % groups) % tests.len()]` (else every agent on test 0).
    pub test_by_group: bool,
    /// The projection group (spec §14 with groups) of each routing group, by name: agents of
    /// routing group r learn q(W) with every agent whose routing group has the same name
    /// (fleet projection mode), and `--fuse-groups within` fuses q(u) only among them. Empty:
    /// no projection groups (the whole fleet is one group).
    pub projection_groups: Vec<String>,
    /// Multiply RMSE by this to report it in original units (the y standard deviation).
    pub y_scale: f64,
}

impl Workload {
    /// Training points in the stream.
    pub fn points(&self) -> usize {
        self.batches.iter().map(|b| b.y.len()).sum()
    }
}
