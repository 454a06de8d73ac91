//! Tests of the node's flags and configuration file.

use super::*;

#[test]
fn flags_override_the_file() {
    let dir = std::env::temp_dir().join(format!("coolgp-node-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("node.toml");
    std::fs::write(
        &path,
        "id = 3\nfleet = \"lab\"\nneighbors = [2, 4]\nround-ms = 50\nbatch = 7\ninputs = [\"a\"]\nresend-every = 6\n",
    )
    .expect("write");
    let args = NodeArgs {
        config: Some(path),
        batch: Some(9),
        ..NodeArgs::default()
    };
    let s = args.resolve().expect("valid");
    assert_eq!((s.id, s.fleet.as_str(), s.batch), (3, "lab", 9));
    assert_eq!(s.neighbors, vec![2, 4]);
    assert_eq!(s.round, Duration::from_millis(50));
    assert_eq!(s.resend_every, 6);
    let zero = NodeArgs {
        id: Some(1),
        fleet: Some("lab".into()),
        inputs: vec!["a".into()],
        resend_every: Some(0),
        ..NodeArgs::default()
    };
    let e = zero.resolve().map(|_| ()).expect_err("0 is refused");
    assert!(e.to_string().contains("--resend-every"), "{e}");
    let bad = NodeArgs {
        id: Some(1),
        fleet: Some("a/b".into()),
        inputs: vec!["a".into()],
        ..NodeArgs::default()
    };
    assert!(bad.resolve().is_err());
}

#[test]
fn site_settings_need_the_fleet_projection_and_a_known_memory() {
    let base = || NodeArgs {
        id: Some(1),
        fleet: Some("lab".into()),
        inputs: vec!["a".into()],
        ..NodeArgs::default()
    };
    // Silently ignored before: a per-agent node with the fleet's site settings.
    let per_agent = NodeArgs {
        agent: AgentArgs {
            site_window: Some(50),
            site_memory: Some("stream".into()),
            ..AgentArgs::default()
        },
        ..base()
    };
    let e = per_agent.resolve().map(|_| ()).expect_err("refused");
    assert!(
        e.to_string()
            .contains("--site-window, --site-memory tune the fleet projection's"),
        "{e}"
    );
    let fleet = |memory: &str| NodeArgs {
        agent: AgentArgs {
            projection: Some("fleet".into()),
            site_memory: Some(memory.into()),
            ..AgentArgs::default()
        },
        ..base()
    };
    let s = fleet("stream").resolve().expect("valid");
    assert_eq!(s.agent.site.memory, coolgp::learn::SiteMemory::Stream);
    let e = fleet("forever").resolve().map(|_| ()).expect_err("refused");
    assert!(
        e.to_string().contains("unknown site memory 'forever'"),
        "{e}"
    );
    // A checkpoint written under the other memory names the flag that resumes it.
    let mut written = s.agent.clone();
    written.site.memory = coolgp::learn::SiteMemory::Recent;
    let d: Vec<String> = setting_differences(&written, &s.agent, None)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(join_and(&d), "--site-memory recent (now stream)");
}

#[test]
fn a_config_file_with_an_unknown_key_is_refused_by_name() {
    let dir = std::env::temp_dir().join(format!("coolgp-node-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("node.toml");
    let text = "id = 3\nfleet = \"lab\"\ninputs = [\"a\"]\nsite-window = 40\n\
                projection = \"fleet\"\nlisten = [\"tcp/127.0.0.1:7447\"]\n";
    std::fs::write(&path, text).expect("write");
    let args = || NodeArgs {
        config: Some(path.clone()),
        ..NodeArgs::default()
    };
    let s = args().resolve().expect("valid");
    assert_eq!(s.agent.site.window_points, 40);
    assert_eq!(s.zenoh.listen, ["tcp/127.0.0.1:7447"]);
    std::fs::write(&path, format!("{text}round_ms = 50\n")).expect("write");
    let e = args().resolve().map(|_| ()).expect_err("unknown key");
    assert!(
        e.to_string()
            .contains("unknown field `round_ms`, expected one of `id`"),
        "{e}"
    );
    let mut keys = NodeArgs::known_keys();
    let value = serde_json::to_value(NodeArgs::default()).expect("serializable");
    let mut fields: Vec<&str> = value
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort_unstable();
    fields.sort_unstable();
    assert_eq!(keys, fields);
}

#[test]
fn sizes_beyond_the_machine_are_refused_naming_the_memory() {
    let args = |inducing: usize, mode: &str| NodeArgs {
        id: Some(1),
        fleet: Some("lab".into()),
        inputs: vec!["a".into()],
        inducing: Some(inducing),
        agent: AgentArgs {
            mode: Some(mode.into()),
            ..AgentArgs::default()
        },
        ..NodeArgs::default()
    };
    let machine = Some(23 << 30);
    let e = args(100_000, "frozen")
        .resolve_for_memory(machine)
        .map(|_| ())
        .expect_err("too large");
    assert_eq!(
        e.to_string(),
        "invalid configuration: --inducing 100000 needs 80 GB for one m × m matrix (m² × 8 \
         bytes); this machine has 23 GiB"
    );
    // k = 20 importance caches of 20000² are 64 GB; one such matrix fits.
    let e = args(20_000, "importance")
        .resolve_for_memory(machine)
        .map(|_| ())
        .expect_err("too large");
    assert!(e.to_string().contains("--samples 20 needs 64 GB"), "{e}");
    assert!(args(20_000, "frozen").resolve_for_memory(machine).is_ok());
    assert!(args(100_000, "frozen").resolve_for_memory(None).is_ok());
}

#[test]
fn the_local_memory_comes_from_flags_and_the_file() {
    // Issue 19: --local-memory/--local-policy/--local-kernel (AgentArgs) and their file keys
    // reach the node's agent settings; a flag wins over the file.
    let dir = std::env::temp_dir().join(format!("coolgp-node-local-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("node.toml");
    let text = "id = 1\nfleet = \"lab\"\ninputs = [\"a\"]\nlocal-memory = 50\nlocal-policy = \"reservoir\"\nlocal-kernel = \"global\"\n";
    std::fs::write(&path, text).expect("write");
    let args = NodeArgs {
        config: Some(path.clone()),
        agent: AgentArgs {
            local_policy: Some("spread".into()),
            ..AgentArgs::default()
        },
        ..NodeArgs::default()
    };
    let s = args.resolve().expect("valid");
    assert_eq!(
        s.agent.local,
        coolgp::local::LocalConfig {
            capacity: 50,
            policy: coolgp::local::MemoryPolicy::Spread,
            kernel: coolgp::local::ResidualKind::GlobalResidual,
            // The node's default fit: the fleet's pooled one.
            fit: coolgp::local::LocalFit::Fleet,
        }
    );
    // `local-fit = "agent"` in the file opts out of the pooled fit.
    std::fs::write(&path, format!("{text}local-fit = \"agent\"\n")).expect("write");
    let opt_out = NodeArgs {
        config: Some(path.clone()),
        ..NodeArgs::default()
    };
    let s = opt_out.resolve().expect("valid");
    assert_eq!(s.agent.local.fit, coolgp::local::LocalFit::Agent);
    let bad = NodeArgs {
        id: Some(1),
        fleet: Some("lab".into()),
        inputs: vec!["a".into()],
        agent: AgentArgs {
            local_memory: Some(10),
            local_kernel: Some("rbf".into()),
            ..AgentArgs::default()
        },
        ..NodeArgs::default()
    };
    let e = bad.resolve().map(|_| ()).expect_err("refused");
    assert!(e.to_string().contains("--local-kernel 'rbf'"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ros2_options_resolve_and_refuse_with_the_fix() {
    let live = || NodeArgs {
        id: Some(7),
        fleet: Some("lab".into()),
        ros2: Ros2Args {
            ros2_input: Some(vec![
                "fix:sensor_msgs/msg/NavSatFix:latitude,longitude".into()
            ]),
            ros2_target: Some("/temp:sensor_msgs/msg/Temperature:temperature".into()),
            ros2_tolerance: None,
        },
        ros2_node: Ros2NodeArgs {
            ros2: Some("zenoh".into()),
            ros2_domain: Some(4),
            ros2_namespace: Some("robot1/".into()),
            ros2_map: Some("latitude=48:49:10,longitude=11:12:10".into()),
            ..Ros2NodeArgs::default()
        },
        ..NodeArgs::default()
    };
    let s = live().resolve().expect("valid");
    let r = s.ros2.as_ref().expect("ros2");
    assert_eq!(
        (r.domain, r.namespace.as_str(), r.node_name.as_str()),
        (4, "/robot1", "coolgp_7")
    );
    assert_eq!(r.map_topic, "/robot1/coolgp/map");
    assert_eq!(r.zenoh.connect, ["tcp/127.0.0.1:7447"]);
    let spec = r.live.as_ref().expect("live topics");
    assert_eq!(
        spec.inputs[0].topic, "/robot1/fix",
        "relative names resolve"
    );
    assert_eq!(spec.target.topic, "/temp", "absolute names stay");
    assert_eq!(
        s.inputs.as_deref(),
        Some(&["latitude".to_string(), "longitude".to_string()][..])
    );
    assert_eq!(s.target, "temperature");
    assert!(s.data.is_none());

    let refused = |a: NodeArgs, needle: &str| {
        let e = a.resolve().map(|_| ()).expect_err(needle).to_string();
        assert!(e.contains(needle), "{e} lacks {needle}");
    };
    let mut a = live();
    a.ros2_node.ros2 = Some("cyclone".into());
    refused(a, "use dds");
    let mut a = live();
    a.ros2_node.ros2 = Some("dds".into());
    let dds = a.clone().resolve().expect("dds without endpoints");
    assert_eq!(
        dds.ros2.map(|r| r.middleware),
        Some(crate::ros2::Middleware::Dds)
    );
    a.ros2_node.ros2_connect = vec!["tcp/127.0.0.1:7447".into()];
    refused(a, "DDS discovery");
    let mut a = live();
    a.ros2_node.ros2_localhost = true;
    refused(a, "for --ros2 dds");
    let mut a = live();
    a.ros2_node.ros2 = None;
    refused(a, "--ros2 zenoh");
    let mut a = live();
    a.ros2_node.ros2_node_name = Some("2fast".into());
    refused(a, "node name");
    let mut a = live();
    a.ros2_node.ros2_domain = Some(300);
    refused(a, "0-232");
    let mut a = live();
    a.ros2_node.ros2_map_every = Some(0.0);
    refused(a, "--ros2-map-every");
    let mut a = live();
    a.target = Some("y".into());
    refused(a, "not --target");
    let mut a = live();
    a.ros2.ros2_target = None;
    refused(a, "--ros2-target");
    let mut a = live();
    a.data = Some("rows.csv".into());
    refused(a, "not the columns of a CSV");
    let mut a = live();
    a.ros2.ros2_input = Some(vec!["/img:sensor_msgs/msg/Image:height".into()]);
    refused(a, "unsupported ROS 2 message type");
    let mut a = live();
    a.ros2.ros2_input = Some(vec!["/*/fix:sensor_msgs/msg/NavSatFix:latitude".into()]);
    a.ros2.ros2_target = Some("/*/temp:sensor_msgs/msg/Temperature:temperature".into());
    refused(a, "one robot's topics");
}

#[test]
fn ros2_map_durability_from_the_flag_and_the_file() {
    use crate::ros2::MapDurability;
    let dir = std::env::temp_dir().join(format!("coolgp-node-durab-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("node.toml");
    std::fs::write(
        &path,
        "id = 7\nfleet = \"lab\"\nros2 = \"dds\"\nros2-map-durability = \"transient-local\"\n\
         ros2-input = [\"/fix:sensor_msgs/msg/NavSatFix:latitude,longitude\"]\n\
         ros2-target = \"/temp:sensor_msgs/msg/Temperature:temperature\"\n",
    )
    .expect("write");
    let durability = |a: NodeArgs| a.resolve().expect("valid").ros2.map(|r| r.map_durability);
    let file = || NodeArgs {
        config: Some(path.clone()),
        ..NodeArgs::default()
    };
    assert_eq!(durability(file()), Some(MapDurability::TransientLocal));
    let mut flag = file();
    flag.ros2_node.ros2_map_durability = Some("volatile".into());
    assert_eq!(
        durability(flag),
        Some(MapDurability::Volatile),
        "the flag wins"
    );
    std::fs::write(
        &path,
        "id = 7\nfleet = \"lab\"\nros2 = \"zenoh\"\n\
         ros2-input = [\"/fix:sensor_msgs/msg/NavSatFix:latitude,longitude\"]\n\
         ros2-target = \"/temp:sensor_msgs/msg/Temperature:temperature\"\n",
    )
    .expect("write");
    assert_eq!(
        durability(file()),
        Some(MapDurability::Volatile),
        "volatile by default"
    );
    let mut bad = file();
    bad.ros2_node.ros2_map_durability = Some("latched".into());
    let e = bad.resolve().map(|_| ()).expect_err("refused").to_string();
    assert!(
        e.contains("--ros2-map-durability latched") && e.contains("transient-local"),
        "{e}"
    );
    let mut without = file();
    without.ros2_node.ros2 = None;
    without.ros2.ros2_input = None;
    without.ros2.ros2_target = None;
    without.ros2_node.ros2_map_durability = Some("transient-local".into());
    std::fs::write(&path, "id = 7\nfleet = \"lab\"\ninputs = [\"a\"]\n").expect("write");
    let e = without.resolve().map(|_| ()).expect_err("needs --ros2");
    assert!(e.to_string().contains("need --ros2"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ros2_map_format_from_the_flag_and_the_file() {
    use coolgp_ros2::grid_map::MapFormat;
    let dir = std::env::temp_dir().join(format!("coolgp-node-mapfmt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("node.toml");
    let toml = |extra: &str| {
        format!(
            "id = 7\nfleet = \"lab\"\nros2 = \"zenoh\"\n\
             ros2-input = [\"/fix:sensor_msgs/msg/NavSatFix:latitude,longitude\"]\n\
             ros2-target = \"/temp:sensor_msgs/msg/Temperature:temperature\"\n\
             ros2-map = \"latitude=48:48.0006:4,longitude=11:11.0004:3\"\n{extra}"
        )
    };
    std::fs::write(&path, toml("ros2-map-format = \"grid_map\"\n")).expect("write");
    let file = || NodeArgs {
        config: Some(path.clone()),
        ..NodeArgs::default()
    };
    let format = |a: NodeArgs| a.resolve().expect("valid").ros2.map(|r| r.map_format);
    assert_eq!(format(file()), Some(MapFormat::GridMap));
    let mut flag = file();
    flag.ros2_node.ros2_map_format = Some("pointcloud2".into());
    assert_eq!(format(flag), Some(MapFormat::PointCloud2), "the flag wins");
    let mut bad = file();
    bad.ros2_node.ros2_map_format = Some("gridmap".into());
    let e = bad.resolve().map(|_| ()).expect_err("refused").to_string();
    assert!(
        e.contains("--ros2-map-format gridmap") && e.contains("grid_map"),
        "{e}"
    );
    // Unequal spacings: refused at start-up for grid_map only, naming both inputs.
    let mut uneven = file();
    uneven.ros2_node.ros2_map = Some("latitude=48:48.0006:4,longitude=11:11.0004:5".into());
    let e = uneven
        .clone()
        .resolve()
        .map(|_| ())
        .expect_err("refused")
        .to_string();
    assert!(
        e.contains("`latitude`") && e.contains("`longitude`") && e.contains("equal spacings"),
        "{e}"
    );
    uneven.ros2_node.ros2_map_format = Some("pointcloud2".into());
    assert_eq!(format(uneven), Some(MapFormat::PointCloud2));
    std::fs::write(&path, toml("")).expect("write");
    assert_eq!(
        format(file()),
        Some(MapFormat::PointCloud2),
        "pointcloud2 by default"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ros2_query_service_from_the_flag_and_the_file() {
    let dir = std::env::temp_dir().join(format!("coolgp-node-qsvc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("node.toml");
    std::fs::write(
        &path,
        "id = 7\nfleet = \"lab\"\nros2 = \"zenoh\"\nros2-namespace = \"/robot1\"\n\
         ros2-input = [\"/fix:sensor_msgs/msg/NavSatFix:latitude,longitude\"]\n\
         ros2-target = \"/temp:sensor_msgs/msg/Temperature:temperature\"\n\
         ros2-query-service = \"coolgp/query\"\n",
    )
    .expect("write");
    let file = || NodeArgs {
        config: Some(path.clone()),
        ..NodeArgs::default()
    };
    let service = |a: NodeArgs| {
        a.resolve()
            .expect("valid")
            .ros2
            .and_then(|r| r.query_service)
    };
    // Relative: under the namespace; absolute stays.
    assert_eq!(service(file()).as_deref(), Some("/robot1/coolgp/query"));
    let mut flag = file();
    flag.ros2_node.ros2_query_service = Some("/gp_query".into());
    assert_eq!(service(flag).as_deref(), Some("/gp_query"), "the flag wins");
    for bad in ["", "/", "coolgp//query", "1query", "coolgp/que-ry"] {
        let mut a = file();
        a.ros2_node.ros2_query_service = Some(bad.into());
        let e = a.resolve().map(|_| ()).expect_err(bad).to_string();
        assert!(e.contains("--ros2-query-service"), "{bad}: {e}");
    }
    let mut without = file();
    without.ros2_node.ros2 = None;
    without.ros2.ros2_input = None;
    without.ros2.ros2_target = None;
    std::fs::write(
        &path,
        "id = 7\nfleet = \"lab\"\ninputs = [\"a\"]\nros2-query-service = \"q\"\n",
    )
    .expect("write");
    let e = without.resolve().map(|_| ()).expect_err("needs --ros2");
    assert!(e.to_string().contains("need --ros2"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
