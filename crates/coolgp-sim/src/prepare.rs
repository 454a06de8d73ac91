//! From options to a [`Workload`]: load (a built-in dataset, a CSV file or the SYNTHETIC
//! domain), split, standardize (training statistics), batch, route.

use std::collections::BTreeMap;

use coolgp::faer::Mat;
use coolgp::rng::Rng;
use coolgp_data::{
    builtin, builtin_options, data_dir, load_csv, CsvOptions, Dataset, Standardizer,
    SyntheticConfig,
};

use crate::args::SimArgs;
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
    /// The routing keys in group order (group `g` is `group_names[g]`; empty if not keyed).
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
    let st = Standardizer::fit(&train)
        .map_err(SimError::from)
        .map_err(context("standardizing the training data"))?;
    st.apply(&mut train)?;
    st.apply(&mut test)?;
    let batch = args.batch.unwrap_or(20).max(1);
    let (batches, groups, group_names) = batches(&train, batch, file_order);
    let description = format!(
        "{desc}: {} training rows in {} batches of ≤{batch}, {} test rows, {} inputs ({}) → {}{}",
        train.len(),
        batches.len(),
        test.len(),
        train.dim(),
        train.input_names.join(","),
        train.target_name,
        groups.map_or(String::new(), |g| format!(", {g} routing groups"))
    );
    Ok(Prepared {
        work: Workload {
            d: train.dim(),
            batches,
            tests: vec![TestSet {
                x: test.x,
                y: test.y,
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

/// The training rows cut into batches of `batch` rows: keyed rows (stations) one group per
/// key, each key's rows in order, the keys one after the other or (`file_order`) on one clock;
/// else in order. Also the number of groups and the keys in group order.
fn batches(
    train: &Dataset,
    batch: usize,
    file_order: bool,
) -> (Vec<Batch>, Option<usize>, Vec<String>) {
    let mut batches = Vec::new();
    let mut group_names = Vec::new();
    let groups = match &train.keys {
        Some(keys) => {
            // One group per key; rows of a key keep their order and are cut into batches.
            let mut by_key: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
            for (i, k) in keys.iter().enumerate() {
                by_key.entry(k.as_str()).or_default().push(i);
            }
            group_names = by_key.keys().map(|k| (*k).to_owned()).collect();
            let per_key: Vec<Vec<&[usize]>> = by_key
                .values()
                .map(|rows| rows.chunks(batch).collect())
                .collect();
            if file_order {
                // One clock: the k-th batch of every key, then the (k+1)-th.
                let longest = per_key.iter().map(Vec::len).max().unwrap_or(0);
                for k in 0..longest {
                    for (g, chunks) in per_key.iter().enumerate() {
                        if let Some(c) = chunks.get(k) {
                            batches.push(to_batch(train, c, Some(g)));
                        }
                    }
                }
            } else {
                for (g, chunks) in per_key.iter().enumerate() {
                    for c in chunks {
                        batches.push(to_batch(train, c, Some(g)));
                    }
                }
            }
            Some(by_key.len())
        }
        None => {
            let idx: Vec<usize> = (0..train.len()).collect();
            for c in idx.chunks(batch) {
                batches.push(to_batch(train, c, None));
            }
            None
        }
    };
    (batches, groups, group_names)
}

fn to_batch(d: &Dataset, rows: &[usize], group: Option<usize>) -> Batch {
    Batch {
        group,
        x: Mat::from_fn(rows.len(), d.dim(), |i, j| d.x[(rows[i], j)]),
        y: rows.iter().map(|&r| d.y[r]).collect(),
    }
}

fn load_tables(args: &SimArgs, seed: u64) -> Result<(Dataset, Dataset, String), SimError> {
    let frac = args.test_fraction.unwrap_or(0.1);
    if !(0.0..1.0).contains(&frac) {
        return Err(SimError::Config(format!(
            "--test-fraction must be in [0, 1), got {frac}"
        )));
    }
    let (full, name) = match &args.data {
        Some(path) => {
            let target = args.target.clone().ok_or_else(|| {
                SimError::Config("--data needs --target COLUMN (the column to predict)".into())
            })?;
            let mut opts = CsvOptions::new(target);
            opts.inputs = args.inputs.clone();
            opts.agent_by = args.agent_by.clone();
            opts.skip_bad_rows = args.skip_bad_rows;
            let (ds, report) = load_csv(path, &opts)?;
            if report.rows_skipped > 0 {
                eprintln!(
                    "warning: skipped {} malformed rows of {} (first: {})",
                    report.rows_skipped,
                    path.display(),
                    report.first_skipped.join("; ")
                );
            }
            if let Some(test) = &args.test {
                // The test rows need the training inputs and the target, not the routing
                // column (the fleet is scored on every test row).
                let mut test_opts = opts.clone();
                test_opts.agent_by = None;
                test_opts.inputs = Some(ds.input_names.clone());
                let (t, _) = load_csv(test, &test_opts)?;
                return Ok((ds, t, path.display().to_string()));
            }
            (ds, path.display().to_string())
        }
        None => {
            let name = args.dataset.as_deref().unwrap_or("synthetic");
            let ds = match (name, &args.agent_by) {
                (_, None) => builtin(name, &data_dir())?,
                (_, Some(col)) => {
                    let (file, mut opts) = builtin_options(name)?;
                    opts.agent_by = Some(col.clone());
                    load_csv(&data_dir().join(file), &opts)?.0
                }
            };
            (ds, name.to_string())
        }
    };
    let (train, test) = full.split(frac, seed);
    Ok((train, test, name))
}

/// The paper's SYNTHETIC domain: two phenomena `u(W_a x)`, `u(W_b x)` in 6-d, routed by
/// phenomenon (agent i observes phenomenon i mod 2) and tested on its own phenomenon.
fn synthetic(args: &SimArgs, seed: u64) -> Result<Prepared, SimError> {
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
                .map(|(_, x, y)| TestSet { x, y })
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
            let ys: Vec<f64> = p
                .work
                .batches
                .iter()
                .filter(|b| b.group == Some(g))
                .flat_map(|b| b.y.iter().copied())
                .collect();
            assert!(ys.windows(2).all(|w| w[0] < w[1]), "key {g}: {ys:?}");
        }
        // The random order (the default) keeps the key-by-key layout the simulator shuffles.
        let r = prepare(&args(keyed_csv("random.csv"), None)).expect("prepared");
        let rg: Vec<usize> = r.work.batches.iter().filter_map(|b| b.group).collect();
        assert!(rg.windows(2).all(|w| w[0] <= w[1]), "{rg:?}");
        assert_ne!(groups, rg);
    }

    #[test]
    fn an_unknown_stream_order_is_refused_by_name() {
        let err = prepare(&args(keyed_csv("bad.csv"), Some("sorted")))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("--stream-order 'sorted'"), "{err}");
    }
}
