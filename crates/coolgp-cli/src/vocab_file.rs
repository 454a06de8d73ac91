//! `coolgp vocab`: chooses the inducing inputs Z and saves the vocabulary file. The file
//! format (JSON: Z, jitter, init seed, fingerprint) is [`coolgp_store::vocab_file`]'s;
//! [`load`] and [`save`] are re-exported here.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use coolgp::faer::Mat;
use coolgp::Vocabulary;

pub use coolgp_store::vocab_file::{load, save};

/// Flags of `coolgp vocab`.
#[derive(Args, Debug)]
pub struct VocabArgs {
    /// Inducing inputs m.
    #[arg(long)]
    pub inducing: usize,
    /// Dimension d' of the standardized domain.
    #[arg(long)]
    pub dim: usize,
    /// Seed of the designs, of the simulations and of the shared initial q(W).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Pick Z from data: k-means of the shared initial projection applied to this CSV's
    /// (standardized) inputs (spec §13). Without it, Z is chosen by simulation (paper Remark 1).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Target column of --data (excluded from the inputs).
    #[arg(long)]
    pub target: Option<String>,
    /// Input columns of --data, comma-separated (default: every other numeric column).
    #[arg(long, value_delimiter = ',')]
    pub inputs: Option<Vec<String>>,
    /// Candidate designs compared by simulation.
    #[arg(long, default_value_t = 6)]
    pub candidates: usize,
    /// Synthetic draws of the unit GP per candidate.
    #[arg(long, default_value_t = 4)]
    pub draws: usize,
    /// Save the vocabulary here (JSON); `simulate --vocab FILE` and `node --vocab FILE` read it.
    #[arg(long)]
    pub save: Option<PathBuf>,
}

/// Candidate designs for selection by simulation: k-means of N(0, s²I) samples at a few
/// scales s, each from its own seed.
fn candidate(m: usize, dim: usize, seed: u64, i: usize) -> Result<Vocabulary> {
    let scales = [1.0, 0.75, 1.25, 0.5, 1.5, 2.0];
    let s = scales[i % scales.len()];
    let base = Vocabulary::default_design(m, dim, seed.wrapping_add(1000 + i as u64))?;
    let z = base.z();
    let z = Mat::from_fn(m, dim, |j, k| s * z[(j, k)]);
    Ok(Vocabulary::new(z, seed)?)
}

/// Mean test RMSE of a sparse GP with vocabulary `v` on `draws` functions drawn from the unit GP
/// in the standardized domain (inputs z ~ N(0, I), noise 0.1): the paper's Remark 1.
fn simulated_rmse(v: &Vocabulary, draws: usize, seed: u64) -> Result<f64> {
    use coolgp::model::psi::{accumulate_block, PsiWorkspace, UnitStats};
    use coolgp::model::{Excess, NaturalParams, Projection};
    let d = v.d_latent();
    let eye = Mat::from_fn(d, d, |i, j| if i == j { 1.0 } else { 0.0 });
    let proj = Projection::point(eye, 1.0, 0.1);
    let (n_train, n_test) = (40 * v.m(), 500);
    let mut total = 0.0;
    for t in 0..draws {
        let mut rng = coolgp::rng::Rng::new(seed, 0x5EED_0000 + t as u64);
        let u = coolgp_data::RandomFeatures::new(d, 1000, &mut rng);
        let draw = |n: usize, rng: &mut coolgp::rng::Rng| -> Result<(Mat<f64>, Vec<f64>)> {
            let x = Mat::from_fn(n, d, |_, _| rng.normal());
            let f = u.eval_rows(&x)?;
            Ok((x, f))
        };
        let (x, f) = draw(n_train, &mut rng)?;
        let y: Vec<f64> = f.iter().map(|v| v + 0.1 * rng.normal()).collect();
        let (xs, fs) = draw(n_test, &mut rng)?;
        let mut st = UnitStats::zeros(v.m());
        accumulate_block(
            v,
            &proj,
            x.as_ref(),
            &y,
            &mut st,
            &mut PsiWorkspace::default(),
        );
        let t = NaturalParams::from_excess(v, &Excess::from_unit_stats(&st, 1.0, 0.1));
        let post = t.posterior(v)?;
        let mean = coolgp::model::predict::predict_mean(v, &proj, &post.alpha, xs.as_ref())?;
        total += coolgp::model::predict::rmse(&mean, &fs);
    }
    Ok(total / draws.max(1) as f64)
}

/// Z from data: k-means of `M_init x` over (up to 40·m) standardized rows of the CSV, with the
/// shared initial projection of this seed (spec §13).
fn from_data(a: &VocabArgs, path: &Path) -> Result<Vocabulary> {
    let target = a.target.clone().context("--data needs --target COLUMN")?;
    let mut opts = coolgp_data::CsvOptions::new(target);
    opts.inputs = a.inputs.clone();
    let (mut ds, _) = coolgp_data::load_csv(path, &opts)?;
    let st = coolgp_data::Standardizer::fit(&ds)?;
    st.apply(&mut ds)?;
    let seed_vocab = Vocabulary::default_design(a.inducing, a.dim, a.seed)?;
    let init = seed_vocab.initial_projection(ds.dim());
    let mu = init.mu();
    let mut rng = coolgp::rng::Rng::new(a.seed, 0xDA7A);
    let mut rows: Vec<usize> = (0..ds.len()).collect();
    rng.shuffle(&mut rows);
    rows.truncate(40 * a.inducing);
    if rows.len() < a.inducing {
        bail!(
            "{} has {} rows, fewer than m = {}",
            path.display(),
            rows.len(),
            a.inducing
        );
    }
    let mut pts = Vec::with_capacity(rows.len() * a.dim);
    for &r in &rows {
        for i in 0..a.dim {
            pts.push(
                (0..ds.dim())
                    .map(|j| mu[(i, j)] * ds.x[(r, j)])
                    .sum::<f64>(),
            );
        }
    }
    let c = coolgp::model::vocabulary::kmeans(&pts, a.dim, a.inducing, 25, &mut rng)?;
    let z = Mat::from_fn(a.inducing, a.dim, |j, i| c[j * a.dim + i]);
    Ok(Vocabulary::new(z, a.seed)?)
}

/// Runs `coolgp vocab`.
pub fn run(a: &VocabArgs) -> Result<()> {
    let v = match &a.data {
        Some(p) => {
            let v = from_data(a, p)?;
            println!(
                "Z: k-means of the shared initial projection of {} (spec §13)",
                p.display()
            );
            v
        }
        None => {
            let mut best: Option<(f64, Vocabulary)> = None;
            println!(
                "choosing Z by simulation: {} candidate designs × {} draws of the unit GP in {} dimensions",
                a.candidates.max(1),
                a.draws.max(1),
                a.dim
            );
            for i in 0..a.candidates.max(1) {
                let v = candidate(a.inducing, a.dim, a.seed, i)?;
                let r = simulated_rmse(&v, a.draws.max(1), a.seed)?;
                println!("  candidate {i}: mean RMSE {r:.4}");
                if best.as_ref().is_none_or(|(b, _)| r < *b) {
                    best = Some((r, v));
                }
            }
            best.map(|(_, v)| v).context("no candidate design")?
        }
    };
    println!(
        "vocabulary: m = {}, d' = {}, jitter {:e}, fingerprint {}",
        v.m(),
        v.d_latent(),
        v.jitter(),
        v.fingerprint()
    );
    if let Some(p) = &a.save {
        save(&v, p)?;
        println!("saved to {}", p.display());
    }
    Ok(())
}
