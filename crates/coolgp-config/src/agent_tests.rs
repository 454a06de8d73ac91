//! Tests of [`super`]: the shared agent options, their TOML keys and their refusals.
use super::*;

#[test]
fn the_row_rate_is_off_by_default_and_refuses_bad_rates() {
    let rate = |v: Option<f64>| {
        AgentArgs {
            row_rate: v,
            ..AgentArgs::default()
        }
        .row_rate()
    };
    assert_eq!(rate(None).expect("default"), None);
    assert_eq!(rate(Some(0.0)).expect("off"), None);
    assert_eq!(rate(Some(40.0)).expect("on"), Some(40.0));
    for bad in [-1.0, f64::NAN, f64::INFINITY] {
        let e = rate(Some(bad)).expect_err("refused").to_string();
        assert!(
            e.contains("--row-rate must be 0 (off) or a positive"),
            "{e}"
        );
    }
}

#[test]
fn the_influence_cap_is_off_by_default_and_refuses_ratios_below_one() {
    let cap = |v: Option<f64>| {
        AgentArgs {
            influence_cap: v,
            ..AgentArgs::default()
        }
        .influence_cap()
    };
    assert_eq!(cap(None).expect("default"), None);
    assert_eq!(cap(Some(0.0)).expect("off"), None);
    assert_eq!(cap(Some(3.0)).expect("on"), Some(3.0));
    for bad in [-1.0, 0.5, f64::NAN, f64::INFINITY] {
        let e = cap(Some(bad)).expect_err("refused").to_string();
        assert!(
            e.contains("--influence-cap must be 0 (off) or at least 1"),
            "{e}"
        );
    }
}

#[test]
fn the_likelihood_is_gaussian_by_default_and_refuses_bad_values() {
    let lik = |name: Option<&str>, c: Option<f64>| AgentArgs {
        likelihood: name.map(str::to_string),
        robust_c: c,
        ..AgentArgs::default()
    };
    let ok = |a: AgentArgs| {
        a.validate(Driver::Simulate)
            .expect("valid")
            .config
            .likelihood
    };
    assert_eq!(ok(lik(None, None)), Likelihood::Gaussian);
    assert_eq!(
        ok(lik(Some("robust"), None)),
        Likelihood::Robust {
            c: coolgp::learn::DEFAULT_ROBUST_C
        }
    );
    assert_eq!(
        ok(lik(Some("robust"), Some(3.0))),
        Likelihood::Robust { c: 3.0 }
    );
    let err = |a: AgentArgs, d| a.validate(d).map(|_| ()).expect_err("refused").to_string();
    assert_eq!(
        err(lik(Some("student-t"), None), Driver::Simulate),
        "unknown --likelihood 'student-t': use gaussian, robust"
    );
    assert!(err(lik(Some("cauchy"), None), Driver::Python).contains("unknown likelihood"));
    for bad in [0.0, -2.0, f64::NAN, f64::INFINITY] {
        let e = err(lik(Some("robust"), Some(bad)), Driver::Simulate);
        assert!(e.contains("--robust-c must be finite and > 0"), "{e}");
    }
    assert!(err(lik(None, Some(2.0)), Driver::Node).contains("needs --likelihood robust"));
    // Every update mode keeps each row's weight from its arrival (docs/ROBUST.md §2).
    for mode in ["exact", "importance"] {
        let args = AgentArgs {
            mode: Some(mode.into()),
            ..lik(Some("robust"), None)
        };
        let cfg = args
            .validate(Driver::Simulate)
            .expect("robust in every mode");
        assert_eq!(
            cfg.config.likelihood,
            Likelihood::Robust { c: 3.0 },
            "{mode}"
        );
        assert_eq!(cfg.config.mode.name(), mode);
    }
    // The fleet projection keeps each row's weight in its site window (docs/ROBUST.md §2).
    let fleet = AgentArgs {
        projection: Some("fleet".into()),
        ..lik(Some("robust"), None)
    };
    let cfg = fleet
        .validate(Driver::Node)
        .expect("robust with the fleet projection")
        .config;
    assert_eq!(
        cfg.likelihood,
        Likelihood::Robust {
            c: coolgp::learn::DEFAULT_ROBUST_C
        }
    );
    assert_eq!(cfg.projection, coolgp::ProjectionMode::Fleet);
}

#[test]
fn the_key_list_is_every_field() {
    let value = serde_json::to_value(AgentArgs::default()).expect("serializable");
    let mut keys: Vec<&str> = value
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let mut known = AgentArgs::KEYS.to_vec();
    keys.sort_unstable();
    known.sort_unstable();
    assert_eq!(keys, known);
}

#[test]
fn the_flags_win_over_the_file() {
    let flags = AgentArgs {
        site_window: Some(10),
        ..AgentArgs::default()
    };
    let file: AgentArgs =
        toml::from_str("site-window = 40\nsite-memory = \"stream\"\nno-learn = true\n")
            .expect("valid keys");
    let m = flags.merged(file);
    assert_eq!(
        (m.site_window, m.site_memory.as_deref(), m.no_learn),
        (Some(10), Some("stream"), true)
    );
}

#[test]
fn fleet_only_options_are_refused_elsewhere_in_each_drivers_words() {
    let args = AgentArgs {
        site_window: Some(50),
        site_memory: Some("stream".into()),
        projection_group: Some("g".into()),
        ..AgentArgs::default()
    };
    assert_eq!(
        args.fleet_only(None),
        ["site-window", "site-memory", "projection-group"]
    );
    let err = |a: &AgentArgs, d| a.validate(d).map(|_| ()).expect_err("refused").to_string();
    assert_eq!(
        err(&args, Driver::Node),
        "--site-window, --site-memory tune the fleet projection's site update: add \
         --projection fleet or drop them"
    );
    assert!(err(&args, Driver::Python).starts_with("site settings need projection='fleet'"));
    let group = AgentArgs {
        projection_group: Some("g".into()),
        ..AgentArgs::default()
    };
    assert!(err(&group, Driver::Node).starts_with("--projection-group needs --projection fleet"));
    assert!(err(&group, Driver::Python).starts_with("projection_group needs projection='fleet'"));
    // simulate checks them on the flags as given (`--projection both` runs every mode).
    assert!(args.validate(Driver::Simulate).is_ok());
    let fleet = AgentArgs {
        projection: Some("fleet".into()),
        ..args
    };
    let v = fleet.validate(Driver::Node).expect("valid");
    assert_eq!(v.config.site.window_points, 50);
    assert_eq!(v.config.group, Some(group_id("g")));
    assert_eq!(v.group.as_deref(), Some("g"));
}

#[test]
fn the_local_fit_is_read_and_every_driver_pools_unless_told() {
    let fit = |name: Option<&str>, d| {
        AgentArgs {
            local_memory: Some(100),
            local_fit: name.map(str::to_owned),
            ..AgentArgs::default()
        }
        .validate(d)
        .map(|v| v.config.local.fit)
        .map_err(|e| e.to_string())
    };
    for d in [Driver::Simulate, Driver::Python, Driver::Node] {
        assert_eq!(fit(None, d), Ok(default_fit(d)));
        assert_eq!(fit(Some("agent"), d), Ok(LocalFit::Agent));
    }
    // The pooled fit is the default everywhere, nodes included (`agent` opts out).
    for d in [Driver::Simulate, Driver::Python, Driver::Node] {
        assert_eq!(fit(None, d), Ok(LocalFit::Fleet), "{d:?}");
    }
    for d in [Driver::Simulate, Driver::Python, Driver::Node] {
        assert_eq!(fit(Some("fleet"), d), Ok(LocalFit::Fleet));
    }
    assert_eq!(
        fit(Some("pooled"), Driver::Python),
        Err("unknown local_fit 'pooled': use agent, fleet".to_owned())
    );
    let file: AgentArgs = toml::from_str("local-fit = \"fleet\"\n").expect("valid key");
    assert_eq!(file.local_fit.as_deref(), Some("fleet"));
}

#[test]
fn local_memory_options_validate_with_clear_errors() {
    let args = AgentArgs {
        local_memory: Some(300),
        local_policy: Some("spread".into()),
        local_kernel: Some("global".into()),
        ..AgentArgs::default()
    };
    let v = args.validate(Driver::Node).expect("valid");
    assert_eq!(
        v.config.local,
        LocalConfig {
            capacity: 300,
            policy: MemoryPolicy::Spread,
            kernel: ResidualKind::GlobalResidual,
            fit: LocalFit::Fleet,
        }
    );
    // Default: B = 500, reservoir, the fleet's fit (on a node too);
    // `--local-memory 0` turns it off, and a policy without memory is fine.
    let on = AgentArgs::default()
        .validate(Driver::Simulate)
        .expect("valid");
    assert_eq!(
        on.config.local,
        LocalConfig {
            capacity: DEFAULT_LOCAL_MEMORY,
            policy: MemoryPolicy::Reservoir,
            kernel: ResidualKind::Learned,
            fit: LocalFit::Fleet,
        }
    );
    assert_eq!(DEFAULT_LOCAL_MEMORY, 500);
    let node = AgentArgs::default().validate(Driver::Node).expect("valid");
    assert_eq!(node.config.local.fit, LocalFit::Fleet);
    assert_eq!(node.config.local.capacity, DEFAULT_LOCAL_MEMORY);
    let off = AgentArgs {
        local_memory: Some(0),
        local_policy: Some("recent".into()),
        ..AgentArgs::default()
    };
    let off = off.validate(Driver::Simulate).expect("valid").config.local;
    assert!(!off.is_on());
    assert_eq!(off.policy, MemoryPolicy::Recent);
    let bad = AgentArgs {
        local_policy: Some("newest".into()),
        ..AgentArgs::default()
    };
    let err = |a: &AgentArgs, d| a.validate(d).map(|_| ()).expect_err("refused").to_string();
    assert_eq!(
        err(&bad, Driver::Simulate),
        "unknown --local-policy 'newest': use recent, reservoir, spread"
    );
    assert_eq!(
        err(&bad, Driver::Python),
        "unknown local_policy 'newest': use recent, reservoir, spread"
    );
    let bad = AgentArgs {
        local_kernel: Some("rbf".into()),
        ..AgentArgs::default()
    };
    assert_eq!(
        err(&bad, Driver::Node),
        "unknown --local-kernel 'rbf': use learned, global"
    );
    let file: AgentArgs =
        toml::from_str("local-memory = 50\nlocal-policy = \"recent\"\n").expect("valid keys");
    assert_eq!(file.local_memory, Some(50));
}

#[test]
fn projection_modes_and_group_settings_per_driver() {
    let shared = AgentArgs {
        projection: Some("shared".into()),
        ..AgentArgs::default()
    };
    assert!(shared.validate(Driver::Simulate).is_ok());
    let e = shared.validate(Driver::Node).map(|_| ()).expect_err("node");
    assert_eq!(
        e.to_string(),
        "unknown --projection 'shared': use per-agent or fleet"
    );
    let within = AgentArgs {
        projection: Some("fleet".into()),
        fuse_groups: Some("within".into()),
        ..AgentArgs::default()
    };
    let e = within
        .validate(Driver::Node)
        .map(|_| ())
        .expect_err("no group");
    assert!(
        e.to_string().contains("needs --projection-group NAME"),
        "{e}"
    );
    assert!(within
        .validate(Driver::Simulate)
        .is_ok_and(|v| v.fuse_within));
    let empty = AgentArgs {
        projection_group: Some(String::new()),
        ..within
    };
    let e = empty
        .validate(Driver::Python)
        .map(|_| ())
        .expect_err("empty");
    assert_eq!(e.to_string(), "projection_group must not be empty");
    let bad = AgentArgs {
        mode: Some("importance".into()),
        samples: Some(0),
        ..AgentArgs::default()
    };
    assert!(matches!(
        bad.validate(Driver::Python),
        Err(ConfigError::Mode(_))
    ));
}
