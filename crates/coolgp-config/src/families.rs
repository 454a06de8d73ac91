//! `--local-families`: the residual kernel families the fleet's fit on neighbourhood groups
//! chooses among (docs/LOCAL.md §12a), for the drivers that make that fit: `coolgp node`
//! ([`FitArgs`], flattened into its flags and TOML keys) and `coolgp simulate` (its own flag,
//! parsed by [`local_families`]).

use coolgp::local::select::FAMILIES;
use coolgp::local::ResidualFamily;
use serde::{Deserialize, Serialize};

use crate::{ConfigError, Driver};

/// The options of the fleet's fit of the residual kernel (a node's pooled fit).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(rename_all = "kebab-case")]
pub struct FitArgs {
    /// The residual kernel families the fleet's pooled fit on neighbourhood groups chooses
    /// among by held-out score (comma separated; in a file a list, `local-families = ["se",
    /// "sum"]`): se (squared exponential), matern32, matern52, sum (a per-agent offset + a
    /// short-range + a smooth part). Default se alone (docs/LOCAL.md §12a). Only the node
    /// that fits (the lowest live id) uses it; the others take its kernel, whatever its family.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', value_name = "FAMILY")
    )]
    pub local_families: Option<Vec<String>>,
}

impl FitArgs {
    /// The keys of a configuration file.
    pub const KEYS: [&'static str; 1] = ["local-families"];

    /// These options over `file`'s: what is given here wins.
    pub fn merged(self, file: FitArgs) -> FitArgs {
        FitArgs {
            local_families: self.local_families.or(file.local_families),
        }
    }

    /// The families ([`local_families`]).
    ///
    /// # Errors
    /// As [`local_families`].
    pub fn families(&self, driver: Driver) -> Result<Vec<ResidualFamily>, ConfigError> {
        local_families(self.local_families.as_deref(), driver)
    }
}

/// The residual kernel families named by `names` (`None`: the default, [`FAMILIES`], the
/// squared exponential alone), in the order given, each once; names are trimmed.
///
/// # Errors
/// [`ConfigError::Invalid`] for an unknown name (naming the known ones, in `driver`'s
/// spelling) or an empty list.
pub fn local_families(
    names: Option<&[String]>,
    driver: Driver,
) -> Result<Vec<ResidualFamily>, ConfigError> {
    let Some(names) = names else {
        return Ok(FAMILIES.to_vec());
    };
    let option = match driver {
        Driver::Python => "local_families".to_string(),
        _ => "--local-families".to_string(),
    };
    let mut out = Vec::new();
    for name in names {
        let f = ResidualFamily::from_name(name.trim()).ok_or_else(|| {
            let known: Vec<&str> = ResidualFamily::ALL.iter().map(|f| f.name()).collect();
            ConfigError::Invalid(format!(
                "unknown {option} '{name}': use {}",
                known.join(", ")
            ))
        })?;
        if !out.contains(&f) {
            out.push(f);
        }
    }
    if out.is_empty() {
        return Err(ConfigError::Invalid(format!("{option} needs a family")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(s: &[&str]) -> Vec<String> {
        s.iter().map(|v| v.to_string()).collect()
    }

    #[test]
    fn families_parse_in_order_once_and_default_to_the_squared_exponential() {
        let se = ResidualFamily::SquaredExponential;
        assert_eq!(
            local_families(None, Driver::Node).expect("default"),
            vec![se]
        );
        let given = names(&["sum", " se", "sum", "matern52"]);
        assert_eq!(
            local_families(Some(&given), Driver::Node).expect("parsed"),
            vec![ResidualFamily::Sum, se, ResidualFamily::Matern52]
        );
        let args = FitArgs {
            local_families: Some(names(&["se", "sum"])),
        };
        assert_eq!(
            args.families(Driver::Node).expect("parsed"),
            vec![se, ResidualFamily::Sum]
        );
        // The command line wins over the file.
        let file = FitArgs {
            local_families: Some(names(&["matern32"])),
        };
        assert_eq!(args.clone().merged(file.clone()), args);
        assert_eq!(FitArgs::default().merged(file.clone()), file);
    }

    #[test]
    fn a_bad_family_is_refused_naming_the_valid_ones() {
        let e = local_families(Some(&names(&["se", "rbf"])), Driver::Node).expect_err("rbf");
        assert_eq!(
            e.to_string(),
            "unknown --local-families 'rbf': use se, matern32, matern52, sum"
        );
        let e = local_families(Some(&[]), Driver::Simulate).expect_err("empty");
        assert_eq!(e.to_string(), "--local-families needs a family");
    }
}
