//! Tests of `--local-families` (docs/NODE.md §13 "Its family"): the flag and the file key
//! reach the settings the pooled fit takes its families from.

use super::*;

/// A minimal valid node's flags.
fn base() -> NodeArgs {
    NodeArgs {
        id: Some(1),
        fleet: Some("lab".into()),
        inputs: vec!["a".into()],
        ..NodeArgs::default()
    }
}

#[test]
fn the_families_flag_parses_and_reaches_the_settings() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        node: NodeArgs,
    }
    let cli = Cli::try_parse_from([
        "node",
        "--id",
        "1",
        "--fleet",
        "lab",
        "--inputs",
        "a",
        "--local-families",
        "se,sum",
    ])
    .expect("flags");
    let s = cli.node.resolve_for_memory(None).expect("valid");
    let (se, sum) = (ResidualFamily::SquaredExponential, ResidualFamily::Sum);
    assert_eq!(s.local_families, vec![se, sum]);
    // The default: the squared exponential alone (select::FAMILIES).
    let s = base().resolve_for_memory(None).expect("valid");
    assert_eq!(s.local_families, vec![se]);
}

#[test]
fn the_families_come_from_the_file_and_a_bad_name_is_refused_naming_the_valid_ones() {
    let dir = std::env::temp_dir().join(format!("coolgp-node-fam-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("node.toml");
    std::fs::write(
        &path,
        "id = 2\nfleet = \"lab\"\ninputs = [\"a\"]\nlocal-families = [\"matern52\", \"sum\"]\n",
    )
    .expect("write");
    let file = NodeArgs {
        config: Some(path.clone()),
        ..NodeArgs::default()
    };
    let s = file.resolve_for_memory(None).expect("valid");
    let want = vec![ResidualFamily::Matern52, ResidualFamily::Sum];
    assert_eq!(s.local_families, want);
    // The flag wins over the file.
    let flag = NodeArgs {
        config: Some(path),
        fit: FitArgs {
            local_families: Some(vec!["se".into()]),
        },
        ..NodeArgs::default()
    };
    let s = flag.resolve_for_memory(None).expect("valid");
    assert_eq!(s.local_families, vec![ResidualFamily::SquaredExponential]);
    let bad = NodeArgs {
        fit: FitArgs {
            local_families: Some(vec!["se".into(), "rbf".into()]),
        },
        ..base()
    };
    let e = bad.resolve_for_memory(None).map(|_| ()).expect_err("rbf");
    assert!(
        e.to_string()
            .contains("unknown --local-families 'rbf': use se, matern32, matern52, sum"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
