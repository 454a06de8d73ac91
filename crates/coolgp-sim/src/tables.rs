//! The rows of a run: a CSV file (`--data`, with `--test`) or a built-in dataset (its
//! inputs chosen by `--inputs`, routed by `--agent-by`), split into training and test rows;
//! and the counts refused before any row is read. [`crate::prepare`] standardizes, batches
//! and routes them.

use coolgp_data::{builtin, builtin_options, data_dir, load_csv, CsvOptions, Dataset};

use crate::args::SimArgs;
use crate::SimError;

/// The built-in dataset `name`, its rows routed by `--agent-by` and its inputs chosen by
/// `--inputs` when given (the CSV-backed sets: airline, wind, air). `--target` belongs to
/// `--data`: a built-in set predicts its own column.
fn builtin_table(args: &SimArgs, name: &str) -> Result<Dataset, SimError> {
    if args.target.is_some() {
        return Err(SimError::Config(format!(
            "--target applies to --data FILE; the built-in `{name}` predicts its own column \
             (drop --target)"
        )));
    }
    if args.agent_by.is_none() && args.inputs.is_none() {
        return Ok(builtin(name, &data_dir())?);
    }
    if name == "traffic" {
        return Err(SimError::Config(
            "--agent-by and --inputs choose columns of a CSV (--data FILE, or the built-in \
             airline, wind or air); the built-in `traffic` is generated (inputs slot, e1..e5; \
             route it with --agents or --regions)"
                .into(),
        ));
    }
    let (file, mut opts) = builtin_options(name)?;
    if let Some(col) = &args.agent_by {
        opts.agent_by = Some(col.clone());
    }
    if let Some(inputs) = &args.inputs {
        opts.inputs = Some(inputs.clone());
    }
    Ok(load_csv(&data_dir().join(file), &opts)?.0)
}

/// Counts that must be positive, the member check's settings and the likelihood's, refused
/// before any data is read (a batch of 0 rows used to become 1 without a word, a fleet of 0
/// agents failed only after loading).
pub(crate) fn check_counts(args: &SimArgs) -> Result<(), SimError> {
    for (flag, v) in [("--batch", args.batch), ("--agents", args.agents)] {
        if v == Some(0) {
            return Err(SimError::Config(format!("{flag} must be at least 1")));
        }
    }
    if let Some(p) = args.suspects.as_deref() {
        coolgp::members::Policy::from_name(p).map_err(SimError::Config)?;
    }
    args.agent
        .influence_cap()
        .map_err(|e| SimError::Config(e.to_string()))?;
    args.agent
        .row_rate()
        .map_err(|e| SimError::Config(e.to_string()))?;
    args.agent
        .likelihood(coolgp_config::Driver::Simulate)
        .map_err(|e| SimError::Config(e.to_string()))?;
    Ok(())
}

/// The rows of a rosbag2 recording, paired as `--ros2-input` and `--ros2-target` say
/// (docs/ROS2.md); the CSV options that name columns are refused, naming the ROS 2 ones.
fn load_bag(args: &SimArgs, path: &std::path::Path) -> Result<Dataset, SimError> {
    if args.target.is_some() || args.inputs.is_some() || args.agent_by.is_some() {
        return Err(SimError::Config(format!(
            "{} is a ROS 2 recording: name its fields with --ros2-input TOPIC:TYPE:FIELDS and \
             --ros2-target TOPIC:TYPE:FIELD (not --target, --inputs or --agent-by; every robot's \
             topics, /*/fix, give one agent per robot)",
            path.display()
        )));
    }
    let r = &args.ros2;
    let (Some(inputs), Some(target)) = (&r.ros2_input, &r.ros2_target) else {
        return Err(SimError::Config(format!(
            "{} is a ROS 2 recording: say what to learn with --ros2-input \
             TOPIC:TYPE:FIELDS (e.g. /fix:sensor_msgs/msg/NavSatFix:latitude,longitude) and \
             --ros2-target TOPIC:TYPE:FIELD (e.g. /temp:sensor_msgs/msg/Temperature:temperature)",
            path.display()
        )));
    };
    let tol = r.ros2_tolerance.unwrap_or(coolgp_ros2::DEFAULT_TOLERANCE);
    let spec = coolgp_ros2::RowSpec::parse(inputs, target, tol)
        .map_err(|e| SimError::Config(e.to_string()))?;
    let (ds, counts) =
        coolgp_ros2::load_bag(path, &spec).map_err(|e| SimError::Config(e.to_string()))?;
    let dropped = counts.bad_cdr + counts.non_finite + counts.stamp_backwards;
    if dropped + counts.unpaired_targets > 0 {
        eprintln!(
            "note: {}: {} rows from {} messages; {} targets unpaired, {} messages dropped \
             ({} undecodable, {} non-finite, {} stamps backwards)",
            path.display(),
            counts.rows,
            counts.messages,
            counts.unpaired_targets,
            dropped,
            counts.bad_cdr,
            counts.non_finite,
            counts.stamp_backwards
        );
    }
    Ok(ds)
}

pub(crate) fn load_tables(
    args: &SimArgs,
    seed: u64,
) -> Result<(Dataset, Dataset, String), SimError> {
    let frac = args.test_fraction.unwrap_or(0.1);
    if !(0.0..1.0).contains(&frac) {
        return Err(SimError::Config(format!(
            "--test-fraction must be in [0, 1), got {frac}"
        )));
    }
    let (full, name) = match &args.data {
        Some(path) if coolgp_ros2::is_bag(path) => {
            let train = load_bag(args, path)?;
            if let Some(test) = &args.test {
                let t = load_bag(args, test)?;
                return Ok((train, t, path.display().to_string()));
            }
            (train, path.display().to_string())
        }
        Some(path) => {
            if args.ros2.any() {
                return Err(SimError::Config(format!(
                    "--ros2-input/--ros2-target read a rosbag2 recording (.mcap or a bag \
                     directory); {} is not one",
                    path.display()
                )));
            }
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
            (builtin_table(args, name)?, name.to_string())
        }
    };
    let (train, test) = full.split(frac, seed);
    Ok((train, test, name))
}
