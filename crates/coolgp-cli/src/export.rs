//! `coolgp export`: the standardized split that `simulate` streams, as CSV, so that a peer
//! (e.g. `bench/gpytorch_svgp.py`) or a notebook trains and tests on exactly the same rows.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use coolgp::faer::MatRef;

use crate::args::SimArgs;

/// Flags of `coolgp export`.
#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// Dataset flags, as for `simulate` (--dataset, --data, --target, --seed, --max-train, …).
    #[command(flatten)]
    pub args: Box<SimArgs>,
    /// Folder for train.csv, test.csv and split.json.
    #[arg(long)]
    pub out: PathBuf,
}

/// Writes `train.csv` (`x0..x{d−1},y` in stream order before the run's shuffle, plus
/// `group` for routed data: one group per `--agent-by` key), `test.csv` (`x0..,y,set`) and
/// `split.json` (rows, d, groups, `y_scale`: multiply an RMSE on this y by it to get original
/// units).
pub fn run(e: &ExportArgs) -> Result<()> {
    let args = e.args.as_ref().clone().with_config_file()?;
    let prep = coolgp_sim::prepare(&args)?;
    let work = &prep.work;
    std::fs::create_dir_all(&e.out).with_context(|| format!("creating {}", e.out.display()))?;
    let header: Vec<String> = (0..work.d).map(|j| format!("x{j}")).collect();
    // Routed data (--agent-by, stations) keep their routing group: one per key.
    let grouped = work.batches.iter().any(|b| b.group.is_some());
    let train_header = if grouped {
        format!("{},y,group", header.join(","))
    } else {
        format!("{},y", header.join(","))
    };
    let mut train = csv_file(&e.out.join("train.csv"), &train_header)?;
    let mut train_rows = 0;
    for b in &work.batches {
        write_rows(&mut train, b.x.as_ref(), &b.y, b.group.filter(|_| grouped))?;
        train_rows += b.y.len();
    }
    train.flush()?;
    let mut test = csv_file(
        &e.out.join("test.csv"),
        &format!("{},y,set", header.join(",")),
    )?;
    let mut test_rows = 0;
    for (k, t) in work.tests.iter().enumerate() {
        write_rows(&mut test, t.x.as_ref(), &t.y, Some(k))?;
        test_rows += t.y.len();
    }
    test.flush()?;
    let meta = serde_json::json!({
        "description": prep.description,
        "d": work.d,
        "train_rows": train_rows,
        "test_rows": test_rows,
        "test_sets": work.tests.len(),
        "groups": work.groups,
        "y_scale": work.y_scale,
    });
    std::fs::write(
        e.out.join("split.json"),
        serde_json::to_string_pretty(&meta)? + "\n",
    )?;
    println!(
        "coolgp export — {}\n  {train_rows} training rows, {test_rows} test rows, d = {} → {}",
        prep.description,
        work.d,
        e.out.display()
    );
    Ok(())
}

fn csv_file(path: &Path, header: &str) -> Result<std::io::BufWriter<std::fs::File>> {
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    writeln!(w, "{header}")?;
    Ok(w)
}

fn write_rows(w: &mut impl Write, x: MatRef<'_, f64>, y: &[f64], set: Option<usize>) -> Result<()> {
    for (r, yr) in y.iter().enumerate() {
        for j in 0..x.ncols() {
            write!(w, "{},", x[(r, j)])?;
        }
        match set {
            Some(k) => writeln!(w, "{yr},{k}")?,
            None => writeln!(w, "{yr}")?,
        }
    }
    Ok(())
}
