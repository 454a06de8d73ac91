//! From options to a [`Workload`]: load (a built-in dataset, a CSV file or the SYNTHETIC
//! domain), split, standardize (training statistics), batch, route.

use std::collections::BTreeMap;

use coolgp::faer::Mat;
use coolgp::rng::Rng;
use coolgp_data::{scale_outliers, Dataset, Standardizer, SyntheticConfig};

use crate::args::SimArgs;
use crate::regions::Regions;
use crate::tables::{check_counts, load_tables};
use crate::workload::{Batch, TestSet, Workload};
use crate::SimError;

/// `source`, explained by what was being done (`context`).
fn context(context: impl Into<String>) -> impl FnOnce(SimError) -> SimError {
    let context = context.into();
    move |e| SimError::Context {
        context,
        source: Box::new(e),
    }
}

/// A prepared workload plus what the user should be told about it.
pub struct Prepared {
    /// The stream and test sets.
    pub work: Workload,
    /// Human-readable description (dataset, rows, columns, skipped rows).
    pub description: String,
    /// Number of routing groups (stations), if routed.
    pub groups: Option<usize>,
    /// The routing keys in group order (group `g` is `group_names[g]`; `region-g` under
    /// `--regions`; empty if not routed).
    pub group_names: Vec<String>,
}

/// Builds the workload the options describe. Reads the data files (or the built-in datasets'
/// folder, [`coolgp_data::data_dir`]); warns on stderr of skipped malformed rows.
///
/// # Errors
/// [`SimError::Data`] for data that cannot be read, [`SimError::Config`] for options that do
/// not fit the data, [`SimError::Context`] naming the option that led to a data error.
pub fn prepare(args: &SimArgs) -> Result<Prepared, SimError> {
    let seed = args.seed.unwrap_or(0);
    check_counts(args)?;
    if args.data.is_none() && args.dataset.as_deref().unwrap_or("synthetic") == "synthetic" {
        return synthetic(args, seed);
    }
    // Projection groups by a column: its values route the rows (unless --agent-by does).
    let group_col = args
        .agent
        .projection_group
        .as_deref()
        .filter(|c| *c != "none")
        .map(str::to_owned);
    check_regions(args, group_col.as_deref())?;
    if let (Some(g), Some(k)) = (&group_col, &args.agent_by) {
        if g != k {
            return Err(SimError::Config(format!(
                "--projection-group {g} with --agent-by {k}: a grouping column other than the \
                 routing column is not supported; route by the group (drop --agent-by) or give \
                 --projection-group {k} (one group per key)"
            )));
        }
    }
    let routed = SimArgs {
        agent_by: args.agent_by.clone().or_else(|| group_col.clone()),
        ..args.clone()
    };
    let loaded = load_tables(&routed, seed);
    let (mut train, mut test, desc) = match (&group_col, &args.agent_by) {
        (Some(g), None) => loaded.map_err(context(format!(
            "--projection-group {g} routes the rows by that column"
        )))?,
        _ => loaded?,
    };
    // The split keeps file order; the paper's protocol streams a random sample in random order.
    // Keyed (station) data keep their time order within each key.
    let mut rng = Rng::new(seed, 0xBA7C);
    let mut shuffled = |d: &Dataset| {
        let mut idx: Vec<usize> = (0..d.len()).collect();
        rng.shuffle(&mut idx);
        d.select(&idx)
    };
    test = shuffled(&test).head(args.max_test.unwrap_or(10_000));
    let file_order = args.file_order()?;
    if train.keys.is_none() && !file_order {
        train = shuffled(&train);
    }
    if let Some(n) = args.max_train {
        train = train.head(n);
    }
    if train.is_empty() || test.is_empty() {
        return Err(SimError::Config(format!(
            "no rows left for training ({}) or testing ({})",
            train.len(),
            test.len()
        )));
    }
    let mut st = Standardizer::fit(&train)
        .map_err(SimError::from)
        .map_err(context("standardizing the training data"))?;
    st.apply(&mut train)?;
    st.apply(&mut test)?;
    let batch = args.batch.unwrap_or(20).max(1);
    let route = routing(args, &train, &test, seed)?;
    let scale_note = fleet_scale(&mut st, &mut train, &mut test, &route);
    let batches = batches(&train, &route, batch, file_order);
    let groups = route.of_train.as_ref().map(|_| route.names.len());
    let description = format!(
        "{desc}: {} training rows in {} batches of ≤{batch}, {} test rows, {} inputs ({}) → {}{}{}",
        train.len(),
        batches.len(),
        test.len(),
        train.dim(),
        train.input_names.join(","),
        train.target_name,
        groups.map_or(String::new(), |g| format!(", {g} {}", route.what)),
        scale_note
    );
    let group_names = route.names;
    Ok(Prepared {
        work: Workload {
            d: train.dim(),
            batches,
            tests: vec![TestSet {
                x: test.x,
                y: test.y,
                groups: route.of_test,
            }],
            groups: groups.unwrap_or(0),
            test_by_group: false,
            projection_groups: if group_col.is_some() {
                group_names.clone()
            } else {
                Vec::new()
            },
            y_scale: st.unscale_std(1.0),
        },
        description,
        groups,
        group_names,
    })
}

/// How the training rows are routed to groups of agents, and the groups of the test rows.
struct Routing {
    /// The group of each training row (`None`: no groups, each batch to a random agent).
    of_train: Option<Vec<usize>>,
    /// The groups' names, in group order (the keys, sorted; `region-0`, …).
    names: Vec<String>,
    /// The group of each test row where known (empty without groups).
    of_test: Vec<Option<usize>>,
    /// What a group is, for the description (`routing groups`, `regions (k-means over …)`).
    what: String,
}

/// The routing of the rows: by region (`--regions`, after standardization), by key (each
/// distinct key one group, in sorted key order; a test row whose key no training row has
/// belongs to no group), or none.
fn routing(
    args: &SimArgs,
    train: &Dataset,
    test: &Dataset,
    seed: u64,
) -> Result<Routing, SimError> {
    if let Some(cols) = &args.regions {
        return region_routing(cols, args.agents.unwrap_or(10), train, test, seed);
    }
    let Some(keys) = &train.keys else {
        return Ok(Routing {
            of_train: None,
            names: Vec::new(),
            of_test: Vec::new(),
            what: String::new(),
        });
    };
    let index: BTreeMap<&str, usize> = keys
        .iter()
        .map(String::as_str)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .enumerate()
        .map(|(g, k)| (k, g))
        .collect();
    Ok(Routing {
        of_train: Some(keys.iter().map(|k| index[k.as_str()]).collect()),
        names: index.keys().map(|k| (*k).to_owned()).collect(),
        of_test: test.keys.as_ref().map_or(Vec::new(), |tk| {
            tk.iter().map(|k| index.get(k.as_str()).copied()).collect()
        }),
        what: "routing groups".into(),
    })
}

/// The target's scale is the fleet's, which no one group sets: a group whose rows alone widen
/// y's spread ([`scale_outliers`]: a broken sensor's noise, offset or unit mix-up) is left out
/// of the mean and scale, and every standardized target moves to them. The groups' rows stay
/// in the run. Returns a note for the description (empty when no group is left out: the
/// standardization is then untouched, bit for bit).
fn fleet_scale(
    st: &mut Standardizer,
    train: &mut Dataset,
    test: &mut Dataset,
    route: &Routing,
) -> String {
    let Some(of_train) = &route.of_train else {
        return String::new();
    };
    let out = scale_outliers(&train.y, of_train, route.names.len());
    if out.is_empty() {
        return String::new();
    }
    let (mu, sigma) = st.refit_y(&train.y, |i| !out.contains(&of_train[i]));
    for v in train.y.iter_mut().chain(test.y.iter_mut()) {
        *v = (*v - mu) / sigma;
    }
    let names: Vec<&str> = out.iter().map(|&g| route.names[g].as_str()).collect();
    format!(
        "; y's scale without {} {names:?}, whose rows alone widen its spread over {:.2}×",
        route.what,
        coolgp_data::standardize::SCALE_LEVERAGE
    )
}

/// Refuses `--regions` where another routing is asked for (`--agent-by`, a projection-group
/// column) or given no columns.
fn check_regions(args: &SimArgs, group_col: Option<&str>) -> Result<(), SimError> {
    let Some(cols) = &args.regions else {
        return Ok(());
    };
    if cols.is_empty() {
        return Err(SimError::Config(
            "--regions needs input columns (e.g. --regions lon,lat)".into(),
        ));
    }
    let other = match (&args.agent_by, group_col) {
        (Some(k), _) => format!("--agent-by {k}"),
        (None, Some(g)) => format!("--projection-group {g}"),
        (None, None) if args.keyed() => "every robot's topics (/*/)".to_string(),
        (None, None) => return Ok(()),
    };
    Err(SimError::Config(format!(
        "--regions {} with {other}: a row is routed either by region or by a column; drop one",
        cols.join(",")
    )))
}

/// Regions over the (standardized) input columns `cols` (`all`: every input column): k-means
/// with `k` = the agents ([`Regions::fit`]), every training and test row in the region of its
/// nearest centre.
fn region_routing(
    cols: &[String],
    k: usize,
    train: &Dataset,
    test: &Dataset,
    seed: u64,
) -> Result<Routing, SimError> {
    let cols = match cols {
        [one] if one == "all" => &train.input_names[..],
        _ => cols,
    };
    let idx = cols
        .iter()
        .map(|c| {
            train
                .input_names
                .iter()
                .position(|n| n == c)
                .ok_or_else(|| {
                    SimError::Config(format!(
                        "--regions: unknown column '{c}'; the input columns are {}",
                        train.input_names.join(", ")
                    ))
                })
        })
        .collect::<Result<Vec<usize>, _>>()?;
    let points = |d: &Dataset| -> Vec<f64> {
        (0..d.len())
            .flat_map(|i| idx.iter().map(move |&j| d.x[(i, j)]))
            .collect()
    };
    let regions = Regions::fit(&points(train), idx.len(), k, seed)?;
    Ok(Routing {
        of_train: Some(regions.assign(&points(train))),
        names: (0..k).map(|r| format!("region-{r}")).collect(),
        of_test: regions
            .assign(&points(test))
            .into_iter()
            .map(Some)
            .collect(),
        what: format!("regions (k-means over {})", cols.join(",")),
    })
}

/// The training rows cut into batches of `batch` rows: routed rows (stations, regions) one
/// group per group of `route`, each group's rows in order, the groups one after the other or
/// (`file_order`) on one clock; else in order.
fn batches(train: &Dataset, route: &Routing, batch: usize, file_order: bool) -> Vec<Batch> {
    let mut batches = Vec::new();
    match &route.of_train {
        Some(of) => {
            // Rows of a group keep their order and are cut into batches.
            let mut by_group: Vec<Vec<usize>> = vec![Vec::new(); route.names.len()];
            for (i, &g) in of.iter().enumerate() {
                by_group[g].push(i);
            }
            let per_group: Vec<Vec<&[usize]>> = by_group
                .iter()
                .map(|rows| rows.chunks(batch).collect())
                .collect();
            if file_order {
                // One clock: the k-th batch of every group, then the (k+1)-th.
                let longest = per_group.iter().map(Vec::len).max().unwrap_or(0);
                for k in 0..longest {
                    for (g, chunks) in per_group.iter().enumerate() {
                        if let Some(c) = chunks.get(k) {
                            batches.push(to_batch(train, c, Some(g)));
                        }
                    }
                }
            } else {
                for (g, chunks) in per_group.iter().enumerate() {
                    for c in chunks {
                        batches.push(to_batch(train, c, Some(g)));
                    }
                }
            }
        }
        None => {
            let idx: Vec<usize> = (0..train.len()).collect();
            for c in idx.chunks(batch) {
                batches.push(to_batch(train, c, None));
            }
        }
    }
    batches
}

fn to_batch(d: &Dataset, rows: &[usize], group: Option<usize>) -> Batch {
    Batch {
        group,
        x: Mat::from_fn(rows.len(), d.dim(), |i, j| d.x[(rows[i], j)]),
        y: rows.iter().map(|&r| d.y[r]).collect(),
    }
}

/// The paper's SYNTHETIC domain: two phenomena `u(W_a x)`, `u(W_b x)` in 6-d, routed by
/// phenomenon (agent i observes phenomenon i mod 2) and tested on its own phenomenon.
fn synthetic(args: &SimArgs, seed: u64) -> Result<Prepared, SimError> {
    let columns = [
        ("--target", args.target.is_some()),
        ("--inputs", args.inputs.is_some()),
        ("--agent-by", args.agent_by.is_some()),
        ("--test", args.test.is_some()),
    ];
    if let Some((flag, _)) = columns.iter().find(|(_, given)| *given) {
        return Err(SimError::Config(format!(
            "{flag}: the synthetic dataset is drawn, it has no columns; give --data FILE (or \
             --dataset wind|air|airline)"
        )));
    }
    if args.regions.is_some() {
        return Err(SimError::Config(
            "--regions: the synthetic dataset routes its rows by phenomenon; give --dataset \
             wind|air|airline or --data FILE"
                .into(),
        ));
    }
    if args.file_order()? {
        return Err(SimError::Config(
            "--stream-order file: the synthetic dataset is drawn, not read from a file; give \
             --dataset wind|air|airline or --data FILE"
                .into(),
        ));
    }
    let mut cfg = SyntheticConfig {
        seed,
        ..SyntheticConfig::default()
    };
    if let Some(b) = args.batch {
        cfg.batch = b.max(1);
    }
    if let Some(d) = args.synthetic_dim {
        cfg.d = d;
        cfg.d_latent = d;
    }
    if let Some(r) = args.relatedness {
        cfg.relatedness = r;
    }
    if let Some(n) = args.max_train {
        cfg.batches_per_phenomenon = (n / (cfg.batch * cfg.phenomena)).max(1);
    }
    if let Some(n) = args.max_test {
        cfg.test_points = n.max(cfg.phenomena);
    }
    // The synthetic dataset's projection groups are its phenomena.
    let projection_groups = match args.agent.projection_group.as_deref() {
        None | Some("phenomenon") => (0..cfg.phenomena)
            .map(|p| format!("phenomenon-{p}"))
            .collect(),
        Some("none") => Vec::new(),
        Some(other) => {
            return Err(SimError::Config(format!(
                "--projection-group {other}: the synthetic dataset's groups are 'phenomenon' \
                 (the default) or 'none'"
            )))
        }
    };
    let syn = coolgp_data::generate(&cfg)
        .map_err(SimError::from)
        .map_err(context("generating the synthetic domain"))?;
    let batches = syn
        .train_batches
        .into_iter()
        .map(|(p, x, y)| Batch {
            group: Some(p),
            x,
            y,
        })
        .collect::<Vec<_>>();
    let description = format!(
        "synthetic: {} phenomena u(W_p x) in {}-d, relatedness {} (u: {} random Fourier features of the unit GP), {} batches of {}, {} test points",
        cfg.phenomena,
        cfg.d,
        cfg.relatedness,
        cfg.features,
        batches.len(),
        cfg.batch,
        cfg.test_points
    );
    Ok(Prepared {
        work: Workload {
            d: cfg.d,
            batches,
            tests: syn
                .test
                .into_iter()
                .map(|(p, x, y)| TestSet {
                    groups: vec![Some(p); y.len()],
                    x,
                    y,
                })
                .collect(),
            groups: cfg.phenomena,
            test_by_group: true,
            projection_groups,
            y_scale: 1.0,
        },
        description,
        groups: Some(cfg.phenomena),
        group_names: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// A keyed CSV: three stations, rows in time order `t = 0, 1, …`, `y = t`.
    fn keyed_csv(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("coolgp-workload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut s = String::from("station,t,y\n");
        for t in 0..120 {
            s.push_str(&format!("s{},{t},{t}\n", t % 3));
        }
        let p = dir.join(name);
        std::fs::write(&p, s).expect("write csv");
        p
    }

    fn args(csv: PathBuf, order: Option<&str>) -> SimArgs {
        SimArgs {
            data: Some(csv),
            target: Some("y".into()),
            agent_by: Some("station".into()),
            batch: Some(5),
            stream_order: order.map(str::to_owned),
            ..SimArgs::default()
        }
    }

    /// The targets of routing group `g`'s batches, in stream order.
    fn group_targets(p: &Prepared, g: usize) -> Vec<f64> {
        p.work
            .batches
            .iter()
            .filter(|b| b.group == Some(g))
            .flat_map(|b| b.y.iter().copied())
            .collect()
    }

    #[test]
    fn file_order_gives_every_key_one_clock() {
        let p = prepare(&args(keyed_csv("file.csv"), Some("file"))).expect("prepared");
        let groups: Vec<usize> = p.work.batches.iter().filter_map(|b| b.group).collect();
        // The k-th batch of every key before any key's (k+1)-th (keys that run out drop out).
        let first_round: Vec<usize> = groups.iter().take(3).copied().collect();
        assert_eq!(first_round, [0, 1, 2]);
        let mut seen = [0usize; 3];
        for &g in &groups {
            seen[g] += 1;
            let (lo, hi) = (seen.iter().min(), seen.iter().max());
            assert!(hi.zip(lo).is_some_and(|(h, l)| h - l <= 1), "{groups:?}");
        }
        // Inside a key, time (the standardized target here) only moves forward.
        for g in 0..3 {
            let ys = group_targets(&p, g);
            assert!(ys.windows(2).all(|w| w[0] < w[1]), "key {g}: {ys:?}");
        }
        // The random order (the default) keeps the key-by-key layout the simulator shuffles.
        let r = prepare(&args(keyed_csv("random.csv"), None)).expect("prepared");
        let rg: Vec<usize> = r.work.batches.iter().filter_map(|b| b.group).collect();
        assert!(rg.windows(2).all(|w| w[0] <= w[1]), "{rg:?}");
        assert_ne!(groups, rg);
    }

    /// Two clusters in (a, b) (around (0, 0) and (10, 10)), a noise column c, target y.
    fn clustered_csv(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("coolgp-regions-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut s = String::from("a,b,c,y\n");
        for i in 0..200 {
            let (o, j) = (10 * (i % 2), (i * 7 % 5) as f64 * 0.1);
            s.push_str(&format!(
                "{},{},{},{}\n",
                o as f64 + j,
                o as f64 - j,
                i % 13,
                i % 2
            ));
        }
        let p = dir.join(name);
        std::fs::write(&p, s).expect("write csv");
        p
    }

    #[test]
    fn regions_route_each_cluster_to_one_agent_and_test_rows_to_their_region() {
        let args = SimArgs {
            data: Some(clustered_csv("regions.csv")),
            target: Some("y".into()),
            regions: Some(vec!["a".into(), "b".into()]),
            agents: Some(2),
            batch: Some(5),
            ..SimArgs::default()
        };
        let p = prepare(&args).expect("prepared");
        assert_eq!(p.groups, Some(2));
        // A region's batches hold one cluster only (y is the cluster here, standardized).
        for g in 0..2 {
            let ys = group_targets(&p, g);
            assert!(
                !ys.is_empty() && ys.iter().all(|&y| y == ys[0]),
                "{g}: {ys:?}"
            );
        }
        let t = &p.work.tests[0];
        assert_eq!(t.groups.len(), t.y.len());
        let region_of_y = |y: f64| {
            let b = p
                .work
                .batches
                .iter()
                .find(|b| b.y[0] == y)
                .expect("a batch");
            b.group
        };
        for (i, &y) in t.y.iter().enumerate() {
            assert_eq!(t.group(i), region_of_y(y), "test row {i}");
        }
        // The same seed routes the same way.
        let q = prepare(&args).expect("prepared");
        assert_eq!(q.work.tests[0].groups, t.groups);
        // `all` is every input column.
        let every = |cols: &[&str]| SimArgs {
            regions: Some(cols.iter().map(|c| (*c).to_owned()).collect()),
            ..args.clone()
        };
        let all = prepare(&every(&["all"])).expect("prepared");
        let abc = prepare(&every(&["a", "b", "c"])).expect("prepared");
        assert_eq!(all.work.tests[0].groups, abc.work.tests[0].groups);
        assert_ne!(all.work.tests[0].groups, t.groups);
    }

    #[test]
    fn bad_regions_are_refused_with_a_clear_message() {
        let base = SimArgs {
            data: Some(clustered_csv("bad-regions.csv")),
            target: Some("y".into()),
            ..SimArgs::default()
        };
        let err = |a: SimArgs| prepare(&a).err().map(|e| e.to_string()).unwrap_or_default();
        let e = err(SimArgs {
            regions: Some(vec!["lat".into()]),
            ..base.clone()
        });
        assert!(
            e.contains("unknown column 'lat'") && e.contains("a, b, c"),
            "{e}"
        );
        let e = err(SimArgs {
            regions: Some(vec!["a".into()]),
            agents: Some(500),
            ..base.clone()
        });
        assert!(e.contains("500 regions"), "{e}");
        let e = err(SimArgs {
            regions: Some(vec!["t".into()]),
            ..args(keyed_csv("regions-keyed.csv"), None)
        });
        assert!(e.contains("--regions t with --agent-by station"), "{e}");
    }

    #[test]
    fn keyed_test_rows_keep_their_station() {
        // Station s{k}'s rows have y = k: a test row's group has batches of its own y.
        let dir = std::env::temp_dir().join(format!("coolgp-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut s = String::from("station,t,y\n");
        for t in 0..120 {
            s.push_str(&format!("s{},{t},{}\n", t % 3, t % 3));
        }
        let path = dir.join("keys.csv");
        std::fs::write(&path, s).expect("write csv");
        let p = prepare(&args(path, None)).expect("prepared");
        let t = &p.work.tests[0];
        assert_eq!(t.groups.len(), t.y.len());
        for (i, &y) in t.y.iter().enumerate() {
            let g = t
                .group(i)
                .expect("every test station is a training station");
            let b = p.work.batches.iter().find(|b| b.group == Some(g));
            assert_eq!(b.map(|b| b.y[0]), Some(y), "test row {i}");
        }
    }

    #[test]
    fn an_unknown_stream_order_is_refused_by_name() {
        let err = prepare(&args(keyed_csv("bad.csv"), Some("sorted")))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("--stream-order 'sorted'"), "{err}");
    }

    #[test]
    fn a_station_whose_rows_alone_widen_y_is_left_out_of_its_scale() {
        // Ten stations of y = ±1 (sd 1); station s9 reports ×10 (issue 29's unit mix-up).
        let dir = std::env::temp_dir().join(format!("coolgp-scale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let csv = |name: &str, k: f64| {
            let mut s = String::from("station,t,y\n");
            for t in 0..400 {
                let (st, y) = (t % 10, if t / 10 % 2 == 0 { 1.0 } else { -1.0 });
                s.push_str(&format!("s{st},{t},{}\n", if st == 9 { k * y } else { y }));
            }
            let p = dir.join(name);
            std::fs::write(&p, s).expect("write csv");
            prepare(&args(p, None)).expect("prepared")
        };
        let honest = csv("honest.csv", 1.0);
        assert!(!honest.description.contains("y's scale"));
        let p = csv("scaled.csv", 10.0);
        assert!(
            p.description
                .contains("y's scale without routing groups [\"s9\"]"),
            "{}",
            p.description
        );
        // The honest stations' rows are on the scale they have alone: y_scale 1, not 3.2.
        assert!((p.work.y_scale - 1.0).abs() < 0.05, "{}", p.work.y_scale);
        assert!((honest.work.y_scale - 1.0).abs() < 0.05);
        let g0: Vec<f64> = group_targets(&p, 0);
        assert!(g0.iter().all(|y| (y.abs() - 1.0).abs() < 0.1), "{g0:?}");
    }
}
