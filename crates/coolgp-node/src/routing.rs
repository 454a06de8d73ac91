//! Fleet-wide requests at scale (issue 31, docs/NODE.md §15): the brief status of every node
//! from one get ([`briefs`]), and the routing of `coolgp query --all --route K`: each query row
//! goes only to the K agents whose advertised coverage is nearest it
//! ([`coolgp::local::route`]), all in one get whose request names each agent's rows.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use coolgp::local::{route, Coverage};

use crate::coverage::Brief;
use crate::error::Result;
use crate::keys;

/// How long one round of [`briefs`] waits for replies before it is repeated.
const ATTEMPT: Duration = Duration::from_millis(1500);

/// A pause in the replies that ends a round of [`briefs`] early.
const QUIET: Duration = Duration::from_millis(200);

/// The brief status of every node that replies to one get on `coolgp/<fleet>/*/status?brief`,
/// by id; then, until every live member replied or `timeout` passed, gets on the status key
/// of each member still missing, all at once ([`ask_each`]), reading until every live member
/// is in; replies that are not brief
/// documents, or whose id is not their key's, are dropped (named in the second value).
///
/// A thousand briefs are about 3.5 MB; a few replies of such a burst are lost under load, and
/// asking the whole fleet again (as this did) sent the burst again: `coolgp status --all` on
/// a settled 1,000-agent fleet took 0.65–5.3 s (BENCHMARKS.md §16).
///
/// # Errors
/// [`NodeError::Zenoh`](crate::NodeError::Zenoh) if the first get cannot be sent.
pub async fn briefs(
    session: &zenoh::Session,
    fleet: &str,
    timeout: Duration,
) -> Result<(BTreeMap<u64, Brief>, Vec<String>)> {
    let deadline = Instant::now() + timeout;
    let mut got: BTreeMap<u64, Brief> = BTreeMap::new();
    let mut dropped = Vec::new();
    let mut alive: BTreeSet<u64> = BTreeSet::new();
    let mut rounds = 0;
    loop {
        rounds += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        let wait = ATTEMPT.min(left).max(Duration::from_millis(100));
        let live_wait = wait.min(Duration::from_millis(500));
        alive.extend(crate::fleet_query::members(session, fleet, live_wait).await);
        dropped.clear();
        let missing: Vec<u64> = alive
            .iter()
            .copied()
            .filter(|id| !got.contains_key(id))
            .collect();
        // The whole fleet at first (and while no member is known); then only who is missing.
        let keys = if got.is_empty() || alive.is_empty() {
            vec![format!("{}?brief=true", keys::status_all(fleet))]
        } else {
            missing
                .iter()
                .map(|&id| format!("{}?brief=true", keys::status(fleet, id)))
                .collect()
        };
        // Read replies as they come, and stop once every live member is in: a get's end waits
        // for every host's final word, which under load came a full attempt late.
        let mut take = |key: String, bytes: &[u8]| {
            let id = keys::parse_status(&key);
            match serde_json::from_slice::<Brief>(bytes) {
                Ok(b) if Some(b.id) == id => {
                    got.insert(b.id, b);
                }
                Ok(b) => dropped.push(format!("{key}: a brief of agent {} on its key", b.id)),
                Err(e) => dropped.push(format!("{key}: not a brief status: {e}")),
            }
            !alive.is_empty() && alive.iter().all(|id| got.contains_key(id))
        };
        ask_each(session, keys, wait, &mut take).await?;
        let everyone = !alive.is_empty() && alive.iter().all(|id| got.contains_key(id));
        if everyone || Instant::now() >= deadline {
            break;
        }
        if rounds > 1 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok((got, dropped))
}

/// Gets on every selector of `selectors` at once, each waiting at most `wait`; each reply
/// (key, payload) goes to `take`, and the reading stops when `take` returns true or after a
/// pause of [`QUIET`] ([`crate::fleet_query::read_merged`]).
///
/// # Errors
/// [`NodeError::Zenoh`](crate::NodeError::Zenoh) if a get cannot be sent.
async fn ask_each(
    session: &zenoh::Session,
    selectors: Vec<String>,
    wait: Duration,
    take: &mut (dyn FnMut(String, &[u8]) -> bool + Send),
) -> Result<()> {
    let mut channels = Vec::with_capacity(selectors.len());
    for sel in &selectors {
        channels.push(crate::fleet_query::get_all(session, sel, (None, None), wait).await?);
    }
    crate::fleet_query::read_merged(channels, Some(QUIET), &mut |reply| {
        reply.result().is_ok_and(|sample| {
            let key = sample.key_expr().as_str().to_owned();
            take(key, &sample.payload().to_bytes())
        })
    })
    .await;
    Ok(())
}

/// Which agents answer which rows of a routed query: per agent id (ascending), the rows of
/// `x` it answers (ascending).
pub type Routes = BTreeMap<u64, Vec<usize>>;

/// The routes of the rows of `x` (the query's `columns`, `None`: the agents' own order) to
/// `k` agents each among `briefs` (every agent that replied, except `leave_out`), by their
/// advertised coverage ([`route`]; an agent without one, or whose columns the query lacks,
/// is asked last); with `owners`, row `r` goes to `owners[r]` and the `k − 1` others
/// nearest (a calibration row: its owner's leave-one-out answer replaces its own). `None`
/// when every agent answers every row anyway (`k` at least the agents): the unrouted query,
/// bit for bit.
pub fn routes(
    briefs: &BTreeMap<u64, Brief>,
    leave_out: &[u64],
    columns: Option<&[String]>,
    x: &[Vec<f64>],
    k: usize,
    owners: Option<&[u64]>,
) -> Option<Routes> {
    let ids: Vec<u64> = briefs
        .keys()
        .copied()
        .filter(|id| !leave_out.contains(id))
        .collect();
    if k >= ids.len() {
        return None;
    }
    let covs: Vec<Option<Coverage>> = ids
        .iter()
        .map(|id| briefs[id].coverage.as_ref().and_then(|c| c.over(columns)))
        .collect();
    let mut out: Routes = ids.iter().map(|&id| (id, Vec::new())).collect();
    let every: Vec<Option<&Coverage>> = covs.iter().map(Option::as_ref).collect();
    for (r, row) in x.iter().enumerate() {
        let Some(owner) = owners.and_then(|o| o.get(r).copied()) else {
            for p in route(&every, row, k) {
                if let Some(v) = out.get_mut(&ids[p]) {
                    v.push(r);
                }
            }
            continue;
        };
        // A calibration row: its owner and the k − 1 others nearest.
        let pool: Vec<usize> = (0..ids.len()).filter(|&i| ids[i] != owner).collect();
        let refs: Vec<Option<&Coverage>> = pool.iter().map(|&i| every[i]).collect();
        for p in route(&refs, row, k.saturating_sub(1)) {
            if let Some(v) = out.get_mut(&ids[pool[p]]) {
                v.push(r);
            }
        }
        if let Some(v) = out.get_mut(&owner) {
            v.push(r);
        }
    }
    Some(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::coverage::{BoxJson, CoverageJson};

    /// A brief of agent `id` whose 10 memory rows lie in a box of width 1 around `centre` on
    /// its one column `x` (`None`: no memory).
    pub(crate) fn brief(id: u64, centre: Option<f64>) -> Brief {
        Brief {
            id,
            blocks: 0,
            points: 0,
            stream_ended: false,
            fleet_points: 0.0,
            round: 0,
            local_points: if centre.is_some() { 10 } else { 0 },
            withheld: false,
            messages_sent: 0,
            bytes_sent: 0,
            messages_received: 0,
            rejected: 0,
            inbound_dropped: 0,
            rmse_holdout: None,
            member: None,
            coverage: centre.map(|c| CoverageJson {
                columns: vec!["x".into()],
                scale: vec![1.0],
                boxes: vec![BoxJson {
                    lo: vec![c - 0.5],
                    hi: vec![c + 0.5],
                    rows: 10,
                }],
            }),
        }
    }

    #[test]
    fn each_row_goes_to_the_agents_that_cover_it() {
        let b: BTreeMap<u64, Brief> = [
            brief(1, Some(0.0)),
            brief(4, Some(10.0)),
            brief(7, Some(20.0)),
            brief(9, None),
        ]
        .into_iter()
        .map(|b| (b.id, b))
        .collect();
        let x = vec![vec![0.2], vec![19.0], vec![11.0]];
        let r = routes(&b, &[], None, &x, 1, None).expect("routed");
        assert_eq!(r[&1], vec![0]);
        assert_eq!(r[&4], vec![2]);
        assert_eq!(r[&7], vec![1]);
        assert!(r[&9].is_empty());
        // K at least the agents: no routing (the unrouted query).
        assert!(routes(&b, &[], None, &x, 4, None).is_none());
        // Left out (a suspect): never asked; with it gone K = 3 is everyone.
        assert!(routes(&b, &[4], None, &x, 3, None).is_none());
        let r = routes(&b, &[4], None, &x, 1, None).expect("routed");
        assert!(!r.contains_key(&4));
        assert_eq!(r[&7], vec![1, 2]);
        // A calibration row goes to its owner and the k − 1 others nearest.
        let r = routes(&b, &[], None, &x, 2, Some(&[9, 9, 9])).expect("routed");
        assert_eq!(r[&9], vec![0, 1, 2]);
        assert_eq!(
            (r[&1].clone(), r[&4].clone(), r[&7].clone()),
            (vec![0], vec![2], vec![1])
        );
        // A query without the agents' column: no coverage is usable, so everyone answers.
        let q = ["y".to_string()];
        let r = routes(&b, &[], Some(&q), &[vec![0.0]], 2, None).expect("routed");
        assert!(r.values().all(|v| v == &vec![0]), "{r:?}");
    }
}
