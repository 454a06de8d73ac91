//! The node's side of the fleet-wide fit of the residual kernel (`--local-fit fleet`,
//! docs/LOCAL.md §9, docs/NODE.md): the node asks every node of the fleet for a sample of its
//! memory (one zenoh get over `coolgp/<fleet>/*/predict` with `"fit_sample": k`; each reply
//! carries up to k raw rows and their residuals, in original units), brings the samples into
//! its own standardized units, and fits the kernel on them as the simulator does
//! ([`fit_pooled_selected`]: the warm continuation and, when due, a cold start, chosen by
//! held-out evidence on the odd rows). Every node fits for itself, so nodes that pool the same
//! samples hold the same kernel; the fit runs off the node's loop.

use std::collections::BTreeMap;
use std::time::Duration;

use coolgp::local::composite::Groups;
use coolgp::local::groups::GroupOptions;
use coolgp::local::pool::{fit_pooled_selected, halves, shares};
use coolgp::local::select::{fit_grouped_selected, GroupedFit};
use coolgp::local::{FitSample, PoolOptions, ResidualFamily, ResidualKernel};
use coolgp::Vocabulary;
use coolgp_data::Standardizer;

use crate::auth::Signer;
use crate::keys;
use crate::routing::Routes;
use crate::row_auth::sign_request;
use crate::status::{NearRequest, OfferedRows, PredictReply, PredictRequest};

/// A pooled fit is due when the fused model's points have grown by this fraction since the
/// last one (the simulator fits after each of its ~10 fusions of the stream).
pub const POOL_GROWTH: f64 = 0.25;

/// How long a node waits for the fleet's samples.
pub const SAMPLE_TIMEOUT: Duration = Duration::from_millis(2500);

/// How long the fused model must stay unchanged before a node makes a last pooled fit on
/// what it grew since its previous one ([`due`]).
pub const SETTLED_MS: u64 = 2_000;

/// True when a pooled fit is due: the fused model holds points and, since the last pooled fit
/// at `last` fused points (0: none yet), they grew by [`POOL_GROWTH`], or grew at all and then
/// stayed unchanged for [`SETTLED_MS`] (`settled_ms`: how long it has been unchanged), so the
/// fleet's final memories get their fit when the streams end.
pub fn due(last: f64, now: f64, settled_ms: u64) -> bool {
    now > 0.0
        && (last <= 0.0
            || now >= last * (1.0 + POOL_GROWTH)
            || (now > last && settled_ms >= SETTLED_MS))
}

/// A pooled fit's request for samples: the query body and, in a TLS fleet, the attachment
/// that signs it as the requesting member's ([`crate::row_auth`]: nodes of a TLS fleet send
/// rows only for a member's signed request).
#[derive(Clone, Debug)]
pub struct SampleRequest {
    /// The JSON body (`{"fit_sample": k, ...}`).
    pub body: Vec<u8>,
    /// The signature attachment (`None` in an open fleet).
    pub attachment: Option<Vec<u8>>,
}

impl SampleRequest {
    /// Asks every node for up to `k` rows; with `signer` = (the node's key, its id) signs the
    /// request for `fleet` at `at_ms` (unix ms).
    pub fn new(k: usize, fleet: &str, signer: Option<(&Signer, u64)>, at_ms: u64) -> Self {
        let req = PredictRequest {
            fit_sample: Some(k),
            ..PredictRequest::default()
        };
        Self::of(&req, fleet, signer, at_ms)
    }

    /// The request `req`, signed as [`SampleRequest::new`] signs.
    pub fn of(
        req: &PredictRequest,
        fleet: &str,
        signer: Option<(&Signer, u64)>,
        at_ms: u64,
    ) -> Self {
        // A struct of plain fields always serializes.
        let body = serde_json::to_vec(req).unwrap_or_default();
        let attachment = signer.map(|(s, by)| sign_request(s, fleet, by, at_ms, &body));
        Self { body, attachment }
    }
}

/// Rows each node offers per anchor in the request for rows near the anchors: the anchor's
/// own node offers the anchor itself among them, so 3 leaves it
/// [`coolgp::local::groups::GROUP_OPTIONS`]`.own` = 2.
pub const NEAR_ROWS: usize = 3;

/// One anchor of the fit on neighbourhood groups (docs/LOCAL.md §11): its node, its row and
/// residual in this node's standardized units, and whether its group is held out (scored)
/// rather than fitted.
#[derive(Clone, Debug, PartialEq)]
pub struct Anchor {
    /// The node it came from.
    pub node: u64,
    /// Its inputs `[d]`.
    pub x: Vec<f64>,
    /// Its residual.
    pub r: f64,
    /// Scored, not fitted (each node's odd rows).
    pub held: bool,
}

/// The anchors of the nodes' samples (node-id order): each sample's even rows fit, its odd
/// rows are held out, as in the simulator ([`coolgp::local::groups::Neighbourhood::anchors`]).
pub fn anchors(samples: &BTreeMap<u64, FitSample>) -> Vec<Anchor> {
    samples
        .iter()
        .flat_map(|(&node, s)| {
            let d = s.d();
            (0..s.len()).map(move |i| Anchor {
                node,
                x: s.x()[i * d..(i + 1) * d].to_vec(),
                r: s.r()[i],
                held: i % 2 == 1,
            })
        })
        .collect()
}

/// Rows a pooled fit takes from the members' replies at the most: twice the anchors, which a
/// fit asks for in all ([`coolgp::local::groups::GROUP_OPTIONS`], at least 2 rows per member).
pub const MAX_SAMPLE_ROWS: usize = 512;

/// At most `total` rows of `samples` in all: when they hold more, node i (in id order) keeps
/// its first `2·p_i` rows, `p` the pairs of [`shares`]`(total / 2, nodes)` (even and odd
/// rows, fit and scored, stay paired); nodes left with none are dropped.
///
/// Why (issue 31): a node of a starting fleet that saw no lower live id yet counted itself the
/// fitter of a fleet of one and asked for 256 rows each; a thousand members replied, and the
/// exact fallback fit on them built a dense matrix of 0.86 GB per candidate (a host grew to
/// 3.7 GB, and to 13.1 GB in an earlier run).
pub fn cap_samples(samples: BTreeMap<u64, FitSample>, total: usize) -> BTreeMap<u64, FitSample> {
    let rows: usize = samples.values().map(FitSample::len).sum();
    if rows <= total {
        return samples;
    }
    let pairs = shares(total / 2, samples.len());
    samples
        .into_iter()
        .zip(pairs)
        .filter_map(|((id, s), p)| {
            let n = (2 * p).min(s.len());
            let d = s.d();
            let kept = FitSample::new(d, s.x()[..n * d].to_vec(), s.r()[..n].to_vec()).ok()?;
            (n > 0).then_some((id, kept))
        })
        .collect()
}

/// The metric's inverse scale per input: one over the anchors' standard deviation (1 for an
/// input they do not vary in), the simulator's metric estimated on the anchors.
pub fn inv_scale(anchors: &[Anchor], d: usize) -> Vec<f64> {
    let n = anchors.len().max(1) as f64;
    (0..d)
        .map(|j| {
            let mean = anchors.iter().map(|a| a.x[j]).sum::<f64>() / n;
            let var = anchors.iter().map(|a| (a.x[j] - mean).powi(2)).sum::<f64>() / n;
            if var > 0.0 && var.is_finite() {
                1.0 / var.sqrt()
            } else {
                1.0
            }
        })
        .collect()
}

/// The request for rows near `anchors` ([`PredictRequest::near`]): the anchors in original
/// units (this node's `inputs`, unstandardized by `scaler`) and the metric's scale per input in
/// original units (`1/inv` times the input's standard deviation).
pub fn near_request(
    anchors: &[Anchor],
    inputs: &[String],
    scaler: Option<&Standardizer>,
    inv: &[f64],
) -> PredictRequest {
    let unscale = |j: usize, v: f64| scaler.map_or(v, |s| s.mean[j] + s.std[j] * v);
    let std = |j: usize| scaler.map_or(1.0, |s| s.std[j]);
    PredictRequest {
        columns: Some(inputs.to_vec()),
        x: anchors
            .iter()
            .map(|a| {
                a.x.iter()
                    .enumerate()
                    .map(|(j, &v)| unscale(j, v))
                    .collect()
            })
            .collect(),
        near: Some(NearRequest {
            k: NEAR_ROWS,
            scale: inv.iter().enumerate().map(|(j, s)| std(j) / s).collect(),
        }),
        ..PredictRequest::default()
    }
}

/// The fit and held-out groups (docs/LOCAL.md §11) from the anchors and each node's rows near
/// them (`near`: node → its rows, `k` per anchor in anchor order, this node's standardized
/// units; with `routes`, `k` per anchor the route names for that node, in the route's order):
/// each group is the anchor, the nearest `opts.own` rows of its own node other than the anchor
/// itself, and the nearest row of each of the `opts.others` nodes whose nearest row is nearest
/// (ties: the lower node id). A node whose reply does not hold the same number of rows for
/// every anchor it was asked about is left out. With `claimed` (each node's rows near the
/// anchors in the warm kernel's metric, as `near`), the anchor's own node's first `opts.own`
/// of them not yet in the group join it, as in the simulator
/// ([`coolgp::local::groups::Neighbourhood::group`]).
pub fn near_groups(
    anchors: &[Anchor],
    (near, claimed): (&BTreeMap<u64, FitSample>, Option<&BTreeMap<u64, FitSample>>),
    routes: Option<&Routes>,
    inv: &[f64],
    opts: &GroupOptions,
) -> (Groups, Groups) {
    let d = inv.len();
    let dist = |a: &[f64], b: &[f64]| -> f64 {
        a.iter()
            .zip(b)
            .zip(inv)
            .map(|((u, v), s)| ((u - v) * s).powi(2))
            .sum()
    };
    let per = per_anchor(near, d, anchors.len(), routes);
    let claimed = claimed.map_or_else(BTreeMap::new, |c| per_anchor(c, d, anchors.len(), routes));
    let (mut fit, mut held) = (Groups::new(d), Groups::new(d));
    for (i, a) in anchors.iter().enumerate() {
        // Each row's node: the sum family's per-agent offset (docs/LOCAL.md §12a).
        let (mut x, mut r, mut ids) = (a.x.clone(), vec![a.r], vec![a.node]);
        let mut others: Vec<(f64, u64, usize)> = Vec::new();
        for (&id, offer) in &per {
            let Some(rows) = offer.rows(i) else { continue };
            let s = offer.sample;
            if id == a.node {
                let own = rows
                    .filter(|&j| dist(&s.x()[j * d..(j + 1) * d], &a.x) > 1e-16)
                    .take(opts.own);
                for j in own {
                    x.extend_from_slice(&s.x()[j * d..(j + 1) * d]);
                    r.push(s.r()[j]);
                    ids.push(id);
                }
                if let Some((c, rows)) = claimed.get(&id).and_then(|c| Some((c.sample, c.rows(i)?)))
                {
                    let fresh: Vec<usize> = rows
                        .filter(|&j| {
                            let row = &c.x()[j * d..(j + 1) * d];
                            !x.chunks_exact(d).any(|g| dist(g, row) <= 1e-16)
                        })
                        .take(opts.own)
                        .collect();
                    for j in fresh {
                        x.extend_from_slice(&c.x()[j * d..(j + 1) * d]);
                        r.push(c.r()[j]);
                        ids.push(id);
                    }
                }
            } else {
                let j = rows.start;
                others.push((dist(&s.x()[j * d..(j + 1) * d], &a.x), id, j));
            }
        }
        others.sort_by(|p, q| p.0.total_cmp(&q.0).then(p.1.cmp(&q.1)));
        for &(_, id, j) in others.iter().take(opts.others) {
            let s = per[&id].sample;
            x.extend_from_slice(&s.x()[j * d..(j + 1) * d]);
            r.push(s.r()[j]);
            ids.push(id);
        }
        let into = if a.held { &mut held } else { &mut fit };
        // Finite rows of width d (to_sample checked them), one node per row.
        let _ = into.push_from(&x, &r, &ids);
    }
    (fit, held)
}

/// One node's reply to a request for rows near the anchors: `k` rows per anchor it was asked
/// about (`at`, ascending; `None`: every anchor).
struct Offer<'a> {
    sample: &'a FitSample,
    k: usize,
    at: Option<&'a [usize]>,
}

impl Offer<'_> {
    /// The rows of the sample offered for anchor `i`, if it was asked about it.
    fn rows(&self, i: usize) -> Option<std::ops::Range<usize>> {
        let p = match self.at {
            None => i,
            Some(at) => at.binary_search(&i).ok()?,
        };
        Some(p * self.k..(p + 1) * self.k)
    }
}

/// The nodes' replies that hold `k > 0` rows of width `d` for each anchor they were asked
/// about (all `anchors`, or those `routes` names for them; a node a route does not name is
/// left out).
fn per_anchor<'a>(
    m: &'a BTreeMap<u64, FitSample>,
    d: usize,
    anchors: usize,
    routes: Option<&'a Routes>,
) -> BTreeMap<u64, Offer<'a>> {
    m.iter()
        .filter_map(|(&id, sample)| {
            let at = match routes {
                None => None,
                Some(r) => Some(r.get(&id)?.as_slice()),
            };
            let asked = at.map_or(anchors, <[usize]>::len);
            let ok = sample.d() == d && asked > 0 && sample.len() % asked == 0;
            let k = sample.len() / asked.max(1);
            (ok && k > 0).then_some((id, Offer { sample, k, at }))
        })
        .collect()
}

/// The fit on neighbourhood groups (docs/LOCAL.md §11, §12a) as the simulator makes it
/// ([`fit_grouped_selected`]: every start of every family of `start.families`
/// (`--local-families`, the squared exponential by default) at the first fit and when a cold
/// candidate is due, each other family's chain continued too ([`Start::chains`]), else the
/// warm chain in its own family unless its held-out errors are off). The fit, its choice by
/// the held-out groups; `None`: no fit (no groups).
pub fn fit_near(start: &Start, (fit, held): (&Groups, &Groups)) -> Option<GroupedFit> {
    let warm = start.warm.as_ref().map(|w| (w.family(), w.params()));
    let explore = start.cold || warm.is_none();
    // The fleet's chain first, then the other families' (none at a first fit).
    let others = start
        .chains
        .iter()
        .filter(|c| warm.is_some_and(|w| w.0 != c.0))
        .map(|(f, p)| (*f, &p[..]));
    let chains: Vec<(ResidualFamily, &[f64])> = warm.into_iter().chain(others).collect();
    let initial = start.initial.params();
    let s = fit_grouped_selected(&chains, initial, (fit, held), explore, &start.families)?;
    tracing::info!(
        groups = fit.len() + held.len(),
        rows = fit.rows() + held.rows(),
        family = s.family.name(),
        chosen = ?s.chosen,
        scores = ?s.scores,
        params = ?s.params,
        "pooled fit on neighbourhood groups: chosen"
    );
    Some(s)
}

/// Each node's sample in one get: agent id → its offered rows; replies that are not a valid
/// sample are dropped (returned with the reason: the peer is untrusted), and so are refusals
/// (returned with the node's error: e.g. a node that fits its own kernel).
pub async fn fetch_samples(
    session: &zenoh::Session,
    fleet: &str,
    req: &SampleRequest,
    timeout: Duration,
) -> (BTreeMap<u64, OfferedRows>, Vec<(String, String)>) {
    let (mut got, mut dropped) = (BTreeMap::new(), Vec::new());
    let replies = match crate::fleet_query::get_all(
        session,
        &keys::predict_all(fleet),
        (Some(req.body.clone()), req.attachment.clone()),
        timeout,
    )
    .await
    {
        Ok(r) => r,
        Err(e) => {
            dropped.push(("the fleet".into(), format!("sending the sample query: {e}")));
            return (got, dropped);
        }
    };
    while let Ok(reply) = replies.recv_async().await {
        let sample = match reply.result() {
            Ok(sample) => sample,
            Err(e) => {
                let why = e.payload().to_bytes();
                dropped.push(("a node".into(), String::from_utf8_lossy(&why).into_owned()));
                continue;
            }
        };
        let key = sample.key_expr().as_str().to_owned();
        let Some(id) = keys::parse_predict(&key) else {
            continue;
        };
        match parse_sample(&sample.payload().to_bytes()) {
            Ok(rows) => {
                got.insert(id, rows);
            }
            Err(why) => dropped.push((format!("agent {id}"), why)),
        }
    }
    (got, dropped)
}

/// The offered rows of a sample reply, checked, or why it is refused.
fn parse_sample(bytes: &[u8]) -> std::result::Result<OfferedRows, String> {
    let reply: PredictReply =
        serde_json::from_slice(bytes).map_err(|e| format!("not a sample document: {e}"))?;
    let rows = reply
        .fit_sample
        .ok_or("the reply carries no sample (a node of an older build?)")?;
    rows.check()?;
    Ok(rows)
}

/// A peer's rows (original units, its column order) as a [`FitSample`] in this node's
/// standardized units: columns matched to `inputs` by name, inputs standardized, residuals
/// divided by y's standard deviation.
///
/// # Errors
/// A missing input column, or a value the sample refuses (non-finite after scaling).
pub fn to_sample(
    rows: &OfferedRows,
    inputs: &[String],
    scaler: Option<&Standardizer>,
) -> std::result::Result<FitSample, String> {
    let idx: Vec<usize> = inputs
        .iter()
        .map(|name| {
            rows.columns
                .iter()
                .position(|c| c == name)
                .ok_or_else(|| format!("the sample has no column '{name}'"))
        })
        .collect::<std::result::Result<_, _>>()?;
    let x = rows
        .x
        .iter()
        .flat_map(|r| {
            idx.iter()
                .enumerate()
                .map(move |(j, &c)| scaler.map_or(r[c], |s| (r[c] - s.mean[j]) / s.std[j]))
        })
        .collect();
    let r = rows
        .y
        .iter()
        .map(|&v| scaler.map_or(v, |s| v / s.y_std))
        .collect();
    FitSample::new(inputs.len(), x, r).map_err(|e| e.to_string())
}

/// What one pooled fit starts from: the warm chain's kernel (`None` at the first fit), the
/// agents' initial kernel (the cold start), whether a cold candidate is due
/// ([`coolgp::local::pool::cold_due`]), and the families whose starts the fit on
/// neighbourhood groups tries (`--local-families`).
pub struct Start {
    /// The previous pooled fit's kernel.
    pub warm: Option<ResidualKernel>,
    /// The initial kernel.
    pub initial: ResidualKernel,
    /// Fit a cold candidate too.
    pub cold: bool,
    /// The families explored ([`fit_grouped_selected`]; the node's `--local-families`).
    pub families: Vec<ResidualFamily>,
    /// Each family's last fit by this fitter ([`GroupedFit::keep_chains`]): an exploring fit
    /// continues every other family's chain besides the warm one (docs/LOCAL.md §12c).
    pub chains: Vec<(ResidualFamily, Vec<f64>)>,
}

impl Start {
    /// The family kept on the fleet's task unless clearly beaten
    /// ([`coolgp::local::select::family_on_scores`]): the warm chain's, at a first fit the
    /// first family asked for.
    pub fn incumbent(&self) -> Option<ResidualFamily> {
        let warm = self.warm.as_ref().map(ResidualKernel::family);
        warm.or(self.families.first().copied())
    }
}

/// The pooled fit on `samples` (agent-id order) as the simulator makes it: each sample's even
/// rows fit, its odd rows validate ([`halves`], [`fit_pooled_selected`] with the default
/// [`PoolOptions`]; the choice and the candidates' held-out scores are logged; each candidate
/// in its start's family). `None`: no fit (too few rows).
pub fn fit(
    start: &Start,
    vocab: &Vocabulary,
    samples: &[FitSample],
) -> Option<(ResidualFamily, Vec<f64>)> {
    let (fit, validation): (Vec<FitSample>, Vec<FitSample>) = samples.iter().map(halves).unzip();
    fit_pooled_selected(
        start.warm.as_ref(),
        &start.initial,
        start.cold || start.warm.is_none(),
        vocab,
        &fit,
        &validation,
        &PoolOptions::default(),
    )
    .map(|s| {
        let rows: usize = samples.iter().map(FitSample::len).sum();
        tracing::info!(rows, family = s.family.name(), chosen = ?s.chosen, scores = ?s.scores, params = ?s.params, "pooled fit: chosen");
        (s.family, s.params)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use coolgp_data::Standardizer;

    #[test]
    fn a_fit_is_due_at_the_first_points_after_a_quarter_more_and_when_settled() {
        assert!(!due(0.0, 0.0, 0));
        assert!(due(0.0, 10.0, 0));
        assert!(!due(100.0, 124.0, SETTLED_MS - 1));
        assert!(due(100.0, 125.0, 0));
        assert!(due(100.0, 101.0, SETTLED_MS), "settled after growing");
        assert!(
            !due(100.0, 100.0, 10 * SETTLED_MS),
            "settled without growing"
        );
    }

    #[test]
    fn samples_beyond_the_cap_are_cut_to_even_shares() {
        let many: BTreeMap<u64, FitSample> = (0..10)
            .map(|id| (id, rows(id, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 0.5)))
            .collect();
        assert_eq!(
            cap_samples(many.clone(), 60),
            many,
            "60 rows: within the cap"
        );
        let cut = cap_samples(many.clone(), 20);
        assert_eq!(cut.len(), 10);
        assert!(cut.values().all(|s| s.len() == 2), "one pair each");
        assert_eq!(cut[&3].x(), &many[&3].x()[..4], "each node's first rows");
        // Fewer pairs than nodes: evenly spaced nodes keep one pair, the others are dropped.
        let few = cap_samples(many, 8);
        assert_eq!(few.values().map(FitSample::len).sum::<usize>(), 8);
        assert_eq!(few.len(), 4);
    }

    #[test]
    fn a_peer_s_rows_come_into_this_node_s_units_by_column_name() {
        let scaler = Standardizer {
            mean: vec![1.0, 10.0],
            std: vec![2.0, 5.0],
            y_mean: 3.0,
            y_std: 4.0,
        };
        // The peer lists its columns in another order.
        let rows = OfferedRows {
            columns: vec!["b".into(), "a".into()],
            x: vec![vec![20.0, 5.0], vec![10.0, 1.0]],
            y: vec![8.0, -4.0],
        };
        let inputs = vec!["a".to_string(), "b".to_string()];
        let s = to_sample(&rows, &inputs, Some(&scaler)).expect("sample");
        assert_eq!(s.x(), &[2.0, 2.0, 0.0, 0.0]);
        assert_eq!(s.r(), &[2.0, -1.0], "residuals scale by y_std only");
        let e = to_sample(&rows, &["c".to_string()], None).expect_err("no column c");
        assert!(e.contains("no column 'c'"), "{e}");
    }

    #[test]
    fn bad_sample_replies_are_refused_with_a_reason() {
        assert!(parse_sample(b"[]").unwrap_err().contains("not a sample"));
        let empty = serde_json::to_vec(&PredictReply::default()).expect("json");
        assert!(parse_sample(&empty).unwrap_err().contains("no sample"));
        let ragged = PredictReply {
            fit_sample: Some(OfferedRows {
                columns: vec!["a".into()],
                x: vec![vec![1.0, 2.0]],
                y: vec![0.5],
            }),
            ..PredictReply::default()
        };
        let bytes = serde_json::to_vec(&ragged).expect("json");
        assert!(parse_sample(&bytes)
            .unwrap_err()
            .contains("2 values for 1 columns"));
    }

    /// Node `id`'s rows as a sample of width 2 (input 0: its place, input 1: the day).
    fn rows(id: u64, days: &[f64], r: f64) -> FitSample {
        let x = days.iter().flat_map(|&t| [id as f64, t]).collect();
        FitSample::new(2, x, vec![r; days.len()]).expect("sample")
    }

    #[test]
    fn groups_hold_the_anchor_its_own_nearest_rows_and_the_nearest_other_nodes() {
        let samples: BTreeMap<u64, FitSample> =
            [(1, rows(1, &[10.0, 20.0], 0.1)), (2, rows(2, &[15.0], 0.2))].into();
        let a = anchors(&samples);
        assert_eq!(a.len(), 3);
        assert_eq!(
            (a[0].node, a[0].held, a[1].held, a[2].node),
            (1, false, true, 2)
        );
        let inv = inv_scale(&a, 2);
        // Each node offers 2 rows per anchor, nearest first: node 1 holds days 10, 11, 20, 21;
        // node 2 days 14, 15, 16; node 3 day 100.
        let near: BTreeMap<u64, FitSample> = [
            (1, rows(1, &[10.0, 11.0, 20.0, 21.0, 11.0, 10.0], 1.0)),
            (2, rows(2, &[14.0, 16.0, 16.0, 14.0, 15.0, 14.0], 2.0)),
            (3, rows(3, &[100.0, 100.0, 100.0, 100.0, 100.0, 100.0], 3.0)),
            (4, rows(4, &[1.0], 4.0)), // not 2 rows per anchor: left out
        ]
        .into();
        let opts = GroupOptions {
            anchors: 3,
            own: 2,
            others: 1,
        };
        let (fit, held) = near_groups(&a, (&near, None), None, &inv, &opts);
        assert_eq!((fit.len(), held.len()), (2, 1));
        // Routed (issue 31): a route that names every node for every anchor gives the same
        // groups; one that asks node 3 about nothing and node 2 only about its own anchor
        // leaves node 2 out of the others' groups.
        let every: Routes = near.keys().map(|&id| (id, vec![0, 1, 2])).collect();
        let (f2, h2) = near_groups(&a, (&near, None), Some(&every), &inv, &opts);
        assert_eq!(
            (f2.group(0), f2.group(1), h2.group(0)),
            (fit.group(0), fit.group(1), held.group(0))
        );
        let few: Routes = [(1, vec![0, 1, 2]), (2, vec![2])].into();
        let node2 = rows(2, &[15.0, 14.0], 2.0);
        let near_few: BTreeMap<u64, FitSample> = [(1, near[&1].clone()), (2, node2)].into();
        let (f3, _) = near_groups(&a, (&near_few, None), Some(&few), &inv, &opts);
        assert_eq!(
            f3.group(0).0,
            &[1.0, 10.0, 1.0, 11.0],
            "no other node was asked"
        );
        assert_eq!(f3.group(1).0, &[2.0, 15.0, 2.0, 14.0, 1.0, 11.0]);
        // Anchor day 10 at node 1: itself, its own day 11 (day 10 is the anchor), node 2's
        // day 14 (node 3 is farther).
        let (x, r) = fit.group(0);
        assert_eq!(x, &[1.0, 10.0, 1.0, 11.0, 2.0, 14.0]);
        assert_eq!(r, &[0.1, 1.0, 2.0]);
        // Each row carries its node (the sum family's per-agent offset).
        assert_eq!(fit.group_agents(0), &[1, 1, 2]);
        // Anchor day 15 at node 2: itself, its own day 14, node 1's day 11.
        let (x, _) = fit.group(1);
        assert_eq!(x, &[2.0, 15.0, 2.0, 14.0, 1.0, 11.0]);
        // The warm kernel claims node 1's days 10 (already in) and 30 for the first anchor,
        // node 2's days 25 and 35 for the third: the fresh ones join, after the own rows.
        let claimed: BTreeMap<u64, FitSample> = [
            (1, rows(1, &[10.0, 30.0, 0.0, 40.0, 50.0, 60.0], 5.0)),
            (2, rows(2, &[70.0, 80.0, 90.0, 95.0, 25.0, 35.0], 6.0)),
        ]
        .into();
        let (fit, _) = near_groups(&a, (&near, Some(&claimed)), None, &inv, &opts);
        assert_eq!(
            fit.group(0).0,
            &[1.0, 10.0, 1.0, 11.0, 1.0, 30.0, 2.0, 14.0]
        );
        assert_eq!(fit.group(0).1, &[0.1, 1.0, 5.0, 2.0]);
        assert_eq!(
            fit.group(1).0,
            &[2.0, 15.0, 2.0, 14.0, 2.0, 25.0, 2.0, 35.0, 1.0, 11.0]
        );
        // The request carries the anchors in original units and the metric's scale.
        let scaler = Standardizer {
            mean: vec![0.0, 10.0],
            std: vec![1.0, 2.0],
            y_mean: 0.0,
            y_std: 1.0,
        };
        let req = near_request(
            &a[..1],
            &["p".into(), "t".into()],
            Some(&scaler),
            &[0.5, 0.25],
        );
        assert_eq!(req.x, vec![vec![1.0, 30.0]]);
        let near = req.near.expect("a near request");
        assert_eq!((near.k, near.scale), (NEAR_ROWS, vec![2.0, 8.0]));
    }
}
