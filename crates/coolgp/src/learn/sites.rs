//! Site sums keyed by projection group: what fleet-projection messages carry (spec §14 with
//! groups).
//!
//! Agents that observe the same phenomenon form a *projection group* and learn one q(W),
//! σ_s, σ_n together: the group's view is the prior plus `Σ_{i in g} s_i`. q(u) may still be
//! fused across every group (the paper's cross-domain setting). A message on a tree carries
//! the site sums of every group in the sender's subtree, so a [`Sites`] is a map
//! `group → Σ s_i`, summed key by key. A fleet without groups is the map with the single key
//! [`UNGROUPED`]; the per-agent mode is the limit where every agent is a group of its own.

use std::collections::BTreeMap;

use crate::learn::Site;

/// A projection group's identifier: [`group_id`] of its name; [`UNGROUPED`] for a fleet
/// without groups.
pub type GroupId = u64;

/// The key of a fleet without projection groups (never the id of a named group).
pub const UNGROUPED: GroupId = 0;

/// Most groups one message may carry (codec and validation limit).
pub const MAX_GROUPS: usize = 4096;

/// The id of the projection group named `name`: 64-bit FNV-1a of its UTF-8 bytes, never
/// [`UNGROUPED`] (0 maps to 1), so every process derives the same id from the same name.
pub fn group_id(name: &str) -> GroupId {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h.max(1)
}

/// Site sums per projection group (module docs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sites(BTreeMap<GroupId, Site>);

impl Sites {
    /// The sums of one group.
    pub fn single(group: GroupId, site: Site) -> Self {
        Self(BTreeMap::from([(group, site)]))
    }

    /// From `(group, sums)` pairs; a repeated group keeps the last.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (GroupId, Site)>) -> Self {
        Self(pairs.into_iter().collect())
    }

    /// The sums of `group`, if present.
    pub fn get(&self, group: GroupId) -> Option<&Site> {
        self.0.get(&group)
    }

    /// The sums of `group` to change in place, if present.
    pub fn get_mut(&mut self, group: GroupId) -> Option<&mut Site> {
        self.0.get_mut(&group)
    }

    /// `(group, sums)` in ascending group order.
    pub fn iter(&self) -> impl Iterator<Item = (GroupId, &Site)> + '_ {
        self.0.iter().map(|(g, s)| (*g, s))
    }

    /// Number of groups present.
    pub fn groups(&self) -> usize {
        self.0.len()
    }

    /// True when no group is present.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True for the sums of a fleet without groups (the single key [`UNGROUPED`]).
    pub fn is_ungrouped(&self) -> bool {
        self.0.len() == 1 && self.0.contains_key(&UNGROUPED)
    }

    /// `self += c·o`, group by group (a group missing in `self` starts at zero).
    pub fn add_scaled_in_place(&mut self, o: &Sites, c: f64) {
        for (g, s) in &o.0 {
            self.0
                .entry(*g)
                .or_insert_with(|| Site::zeros(s.len()))
                .add_scaled_in_place(s, c);
        }
    }

    /// `self += o`, group by group.
    pub fn add_in_place(&mut self, o: &Sites) {
        self.add_scaled_in_place(o, 1.0);
    }

    /// `self += c·s` for the one group `group`.
    pub fn add_site_scaled(&mut self, group: GroupId, s: &Site, c: f64) {
        self.0
            .entry(group)
            .or_insert_with(|| Site::zeros(s.len()))
            .add_scaled_in_place(s, c);
    }

    /// The same groups, every sum zero.
    pub fn zeros_like(&self) -> Self {
        Self(
            self.0
                .iter()
                .map(|(g, s)| (*g, Site::zeros(s.len())))
                .collect(),
        )
    }

    /// `c · self`.
    pub fn scaled(&self, c: f64) -> Self {
        let mut out = self.zeros_like();
        out.add_scaled_in_place(self, c);
        out
    }

    /// True if at least one and at most [`MAX_GROUPS`] groups are present and every sum is
    /// valid over `len` entries ([`Site::is_valid`]).
    pub fn is_valid(&self, len: usize) -> bool {
        (1..=MAX_GROUPS).contains(&self.0.len()) && self.0.values().all(|s| s.is_valid(len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(v: f64) -> Site {
        let mut s = Site::zeros(2);
        s.prec = vec![v, 2.0 * v];
        s.points = v;
        s
    }

    #[test]
    fn sums_add_group_by_group() {
        let mut a = Sites::single(3, site(1.0));
        let b = Sites::from_pairs([(3, site(2.0)), (7, site(5.0))]);
        a.add_in_place(&b);
        assert_eq!(a.groups(), 2);
        assert_eq!(a.get(3).map(|s| s.prec.clone()), Some(vec![3.0, 6.0]));
        assert_eq!(a.get(7).map(|s| s.points), Some(5.0));
        a.add_scaled_in_place(&b, -1.0);
        assert_eq!(a.get(3), Some(&site(1.0)));
        assert_eq!(a.get(7).map(|s| s.points), Some(0.0));
    }

    #[test]
    fn group_ids_are_stable_and_never_the_ungrouped_key() {
        assert_eq!(group_id("station-A"), group_id("station-A"));
        assert_ne!(group_id("station-A"), group_id("station-B"));
        assert_ne!(group_id(""), UNGROUPED);
        assert!(Sites::single(UNGROUPED, site(1.0)).is_ungrouped());
        assert!(!Sites::single(group_id("a"), site(1.0)).is_ungrouped());
    }

    #[test]
    fn validity_needs_a_group_and_valid_sums() {
        assert!(!Sites::default().is_valid(2));
        assert!(Sites::single(1, site(1.0)).is_valid(2));
        assert!(!Sites::single(1, site(-1.0)).is_valid(2));
        assert!(!Sites::single(1, site(1.0)).is_valid(3));
    }
}
