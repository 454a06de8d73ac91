//! Projection groups in a simulated fleet (spec §14 with groups): which q(W) each agent
//! learns with, and which agents exchange messages at all (`--fuse-groups`).

use std::collections::BTreeMap;

use coolgp::learn::{group_id, GroupId};
use coolgp::Topology;

use crate::config::{FuseGroups, SimConfig, TopologyKind};
use crate::workload::Workload;
use crate::SimError;

/// The fleet's projection groups and fusion graph parts.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GroupPlan {
    /// Agents that share one graph: the whole fleet, or one part per group (`within`).
    pub parts: Vec<Vec<usize>>,
    /// Each agent's projection group (fleet projection mode with groups; else `None`).
    pub group_of: Vec<Option<GroupId>>,
    /// The size of each agent's part (push-sum's agent count s).
    pub part_len: Vec<usize>,
}

impl GroupPlan {
    /// Agent `i` of routing group `i % groups` belongs to projection group
    /// `work.projection_groups[i % groups]`; `fleet` gives the agents their group ids.
    ///
    /// # Errors
    /// [`SimError::Config`] for `--fuse-groups within` without groups, fewer agents than
    /// routing groups (an agent would see several groups), or a name list of the wrong size.
    pub fn new(cfg: &SimConfig, work: &Workload, fleet: bool) -> Result<Self, SimError> {
        let n = cfg.agents;
        let names = &work.projection_groups;
        let used = fleet || cfg.fuse_groups == FuseGroups::Within;
        if names.is_empty() || !used {
            if cfg.fuse_groups == FuseGroups::Within {
                return Err(SimError::Config(
                    "--fuse-groups within needs projection groups (--projection-group COLUMN, \
                     or the synthetic dataset's phenomena)"
                        .into(),
                ));
            }
            return Ok(Self {
                parts: vec![(0..n).collect()],
                group_of: vec![None; n],
                part_len: vec![n; n],
            });
        }
        let groups = work.groups.max(1);
        if names.len() != groups {
            return Err(SimError::Config(format!(
                "{} projection group names for {groups} routing groups",
                names.len()
            )));
        }
        if n < groups {
            return Err(SimError::Config(format!(
                "projection groups need at least one agent per routing group: {n} agents for \
                 {groups} groups (raise --agents or use --projection-group none)"
            )));
        }
        let name_of = |i: usize| names[i % groups].as_str();
        let group_of = (0..n)
            .map(|i| fleet.then(|| group_id(name_of(i))))
            .collect();
        let parts: Vec<Vec<usize>> = match cfg.fuse_groups {
            FuseGroups::Across => vec![(0..n).collect()],
            FuseGroups::Within => {
                let mut by: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
                for i in 0..n {
                    by.entry(name_of(i)).or_default().push(i);
                }
                by.into_values().collect()
            }
        };
        let mut part_len = vec![0; n];
        for p in &parts {
            for &i in p {
                part_len[i] = p.len();
            }
        }
        Ok(Self {
            parts,
            group_of,
            part_len,
        })
    }

    /// One graph of `kind` per part (part k seeded `seed + k`, so one part is the fleet's
    /// usual graph).
    pub fn graphs(&self, kind: TopologyKind, seed: u64) -> Vec<Topology> {
        self.parts
            .iter()
            .enumerate()
            .map(|(k, p)| kind.build(p.len(), seed.wrapping_add(k as u64)))
            .collect()
    }

    /// The fleet's graph: the parts' graphs side by side.
    pub fn union(&self, graphs: Vec<Topology>) -> Topology {
        match <[Topology; 1]>::try_from(graphs) {
            Ok([g]) => g,
            Err(graphs) => Topology::disjoint_union(self.part_len.len(), &self.parts, &graphs),
        }
    }
}
