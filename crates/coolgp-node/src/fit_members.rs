//! Who a pooled fit asks for rows (issue 31, item 3; docs/NODE.md §15): in a large fleet the
//! fitter takes its anchors from at most [`FIT_MEMBERS`] members spread over the field
//! ([`spread`]), and asks for the rows near each anchor only the anchor's own member and the
//! members whose advertised coverage is nearest it ([`near_routes`], [`NEAR_MEMBERS`] in all),
//! so one fit costs the same whatever the fleet's size. A fleet of at most [`NEAR_MEMBERS`]
//! members is asked in full, as before.

use std::collections::BTreeMap;

use crate::coverage::Brief;
use crate::routing::{routes, Routes};

/// Members a pooled fit takes its anchors from at the most: 256 anchors
/// ([`coolgp::local::groups::GROUP_OPTIONS`]) are 4 rows of each.
pub const FIT_MEMBERS: usize = 64;

/// Members asked for the rows near one anchor: its own and the 15 nearest it by coverage, so
/// a group's 13 other members ([`coolgp::local::groups::GROUP_OPTIONS`]`.others`) are chosen
/// among 15.
pub const NEAR_MEMBERS: usize = 16;

/// At most `limit` of the members in `briefs` (those with memory rows, not in `exclude`),
/// spread over the field: farthest-point sampling over the centres of their coverages (each
/// the row-weighted mean of its boxes' midpoints over `inputs`, in original units, each input
/// scaled by the centres' spread), starting from the centre nearest the mean; members without
/// a coverage fill what is left, by id. Ascending ids; `None` when there are at most `limit`
/// members (ask them all).
pub fn spread(
    briefs: &BTreeMap<u64, Brief>,
    inputs: &[String],
    exclude: &[u64],
    limit: usize,
) -> Option<Vec<u64>> {
    let ids: Vec<u64> = briefs
        .values()
        .filter(|b| b.local_points > 0 && !exclude.contains(&b.id))
        .map(|b| b.id)
        .collect();
    if ids.len() <= limit {
        return None;
    }
    let d = inputs.len();
    let centres: Vec<(u64, Vec<f64>)> = ids
        .iter()
        .filter_map(|id| {
            let c = briefs[id].coverage.as_ref()?.over(Some(inputs))?;
            let rows: f64 = c.boxes().iter().map(|b| b.rows as f64).sum();
            let centre = (0..d)
                .map(|k| {
                    let sum: f64 = c
                        .boxes()
                        .iter()
                        .map(|b| b.rows as f64 * 0.5 * (b.lo[k] + b.hi[k]))
                        .sum();
                    sum / rows
                })
                .collect();
            Some((*id, centre))
        })
        .collect();
    let mut chosen = farthest_points(&centres, d, limit);
    for &id in &ids {
        if chosen.len() >= limit {
            break;
        }
        if !chosen.contains(&id) {
            chosen.push(id);
        }
    }
    chosen.sort_unstable();
    Some(chosen)
}

/// Farthest-point sampling of up to `limit` of `points` (id, `[d]`), each input scaled by the
/// points' standard deviation along it: the first is the point nearest the mean, each next the
/// one farthest from those taken (ties: the first in `points`' order). Ids in the order taken.
fn farthest_points(points: &[(u64, Vec<f64>)], d: usize, limit: usize) -> Vec<u64> {
    let n = points.len();
    if n == 0 || limit == 0 {
        return Vec::new();
    }
    let mean: Vec<f64> = (0..d)
        .map(|k| points.iter().map(|p| p.1[k]).sum::<f64>() / n as f64)
        .collect();
    let inv: Vec<f64> = (0..d)
        .map(|k| {
            let var = points
                .iter()
                .map(|p| (p.1[k] - mean[k]).powi(2))
                .sum::<f64>()
                / n as f64;
            if var > 0.0 && var.is_finite() {
                1.0 / var.sqrt()
            } else {
                1.0
            }
        })
        .collect();
    let dist = |a: &[f64], b: &[f64]| -> f64 {
        a.iter()
            .zip(b)
            .zip(&inv)
            .map(|((u, v), s)| ((u - v) * s).powi(2))
            .sum()
    };
    let first = (0..n)
        .min_by(|&i, &j| {
            dist(&points[i].1, &mean)
                .total_cmp(&dist(&points[j].1, &mean))
                .then(i.cmp(&j))
        })
        .unwrap_or(0);
    let mut nearest: Vec<f64> = points
        .iter()
        .map(|p| dist(&p.1, &points[first].1))
        .collect();
    let mut taken = vec![first];
    nearest[first] = f64::NEG_INFINITY;
    while taken.len() < limit.min(n) {
        let next = (0..n)
            .max_by(|&i, &j| nearest[i].total_cmp(&nearest[j]).then(j.cmp(&i)))
            .unwrap_or(0);
        if nearest[next] == f64::NEG_INFINITY {
            break;
        }
        taken.push(next);
        nearest[next] = f64::NEG_INFINITY;
        for (i, p) in points.iter().enumerate() {
            if nearest[i] != f64::NEG_INFINITY {
                nearest[i] = nearest[i].min(dist(&p.1, &points[next].1));
            }
        }
    }
    taken.into_iter().map(|i| points[i].0).collect()
}

/// Which members are asked for the rows near which anchors (`x`: the anchors in original
/// units over `inputs`, `owners`: each anchor's member): its owner and the
/// [`NEAR_MEMBERS`]` − 1` members whose coverage is nearest it ([`routes`]), members named for
/// no anchor left out. `None` (ask every member about every anchor) when `briefs` holds at
/// most [`NEAR_MEMBERS`] members.
pub fn near_routes(
    briefs: &BTreeMap<u64, Brief>,
    exclude: &[u64],
    inputs: &[String],
    x: &[Vec<f64>],
    owners: &[u64],
) -> Option<Routes> {
    let mut r = routes(briefs, exclude, Some(inputs), x, NEAR_MEMBERS, Some(owners))?;
    r.retain(|_, rows| !rows.is_empty());
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(centres: &[(u64, [f64; 2])]) -> Vec<(u64, Vec<f64>)> {
        centres.iter().map(|(id, c)| (*id, c.to_vec())).collect()
    }

    #[test]
    fn farthest_points_take_one_member_of_each_cluster_first() {
        // Four clusters of three members each, at the corners of a square.
        let mut c = Vec::new();
        for (q, corner) in [[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]]
            .iter()
            .enumerate()
        {
            for i in 0..3 {
                let id = (q * 3 + i) as u64;
                c.push((id, [corner[0] + 0.1 * i as f64, corner[1] - 0.1 * i as f64]));
            }
        }
        let taken = farthest_points(&points(&c), 2, 4);
        let mut clusters: Vec<u64> = taken.iter().map(|id| id / 3).collect();
        clusters.sort_unstable();
        assert_eq!(clusters, vec![0, 1, 2, 3], "taken {taken:?}");
        assert_eq!(
            farthest_points(&points(&c), 2, 100).len(),
            12,
            "never more than there are"
        );
        assert!(farthest_points(&[], 2, 4).is_empty());
    }

    #[test]
    fn a_large_fleet_is_asked_through_members_spread_over_the_field() {
        use crate::routing::tests::brief;
        // Members 0..30 at 0, 1, ..., 29; member 30 has no memory, member 31 is a suspect.
        let mut b: BTreeMap<u64, Brief> = (0..30).map(|i| (i, brief(i, Some(i as f64)))).collect();
        b.insert(30, brief(30, None));
        b.insert(31, brief(31, Some(100.0)));
        let x = ["x".to_string()];
        assert_eq!(
            spread(&b, &x, &[31], 30),
            None,
            "30 members with rows: all asked"
        );
        let taken = spread(&b, &x, &[31], 3).expect("spread");
        assert_eq!(
            taken,
            vec![0, 14, 29],
            "the middle (of 14 and 15, the first), then both ends"
        );
        // Anchors at 3 and 20, owned by members 3 and 20: each goes to its owner and the 15
        // nearest others, and members named for no anchor are not asked.
        let r = near_routes(&b, &[31], &x, &[vec![3.0], vec![20.0]], &[3, 20]).expect("routed");
        let asked_about = |a: usize| r.iter().filter(|(_, v)| v.contains(&a)).count();
        assert_eq!(
            (asked_about(0), asked_about(1)),
            (NEAR_MEMBERS, NEAR_MEMBERS)
        );
        assert!(r.values().all(|v| !v.is_empty()));
        assert!(r[&3].contains(&0) && r[&20].contains(&1));
        assert!(!r.contains_key(&31) && !r.contains_key(&29), "{r:?}");
        // A small fleet: everyone is asked about every anchor.
        let small: BTreeMap<u64, Brief> = (0..NEAR_MEMBERS as u64)
            .map(|i| (i, brief(i, Some(i as f64))))
            .collect();
        assert!(near_routes(&small, &[], &x, &[vec![3.0]], &[3]).is_none());
    }
}
