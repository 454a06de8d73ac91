//! The union rule of the fleet-wide query (issue 19, docs/LOCAL.md §7): with k = 1 it is the
//! most informed agent's own answer, and scoring it leaves every other figure unchanged.

use coolgp::local::{LocalConfig, MemoryPolicy, UnionRule};
use coolgp_sim::{run, SimConfig};

use super::scores::gp_stream;

#[test]
fn union_of_one_is_the_most_informed_answer_and_changes_nothing_else() {
    // Reference: docs/LOCAL.md §7 (k = 1: the union is the chosen agent's own memory).
    let w = gp_stream(0.3, 6);
    let base = SimConfig {
        agents: 4,
        inducing: 12,
        fuse_every: 40,
        baselines: false,
        central: false,
        local: LocalConfig {
            capacity: 40,
            policy: MemoryPolicy::Reservoir,
            ..LocalConfig::default()
        },
        ..SimConfig::default()
    };
    let with = SimConfig {
        union: [1, 2].map(|k| UnionRule::new(k).expect("k ≥ 1")).to_vec(),
        ..base.clone()
    };
    let plain = run(&base, &w, &|_, _| {}).expect("runs");
    let r = run(&with, &w, &|_, _| {}).expect("runs");
    assert!(plain.fleet_query_union.is_empty());
    for (name, s) in &plain.fleet_query_rules {
        assert_eq!(r.fleet_query_rules.get(name), Some(s), "{name} unchanged");
    }
    assert_eq!(r.rmse_fleet_query, plain.rmse_fleet_query);
    let one = r.fleet_query_rules["union-1"];
    let informed = r.fleet_query_rules["most-informed"];
    // The union rules are neither weighted nor calibrated (docs/LOCAL.md §10, §12): compare
    // with the most informed answers as combined.
    assert_eq!((one.var_scale, one.weight), (1.0, 1.0));
    assert!(
        (one.rmse - informed.rmse_unweighted).abs() < 1e-9,
        "union-1 {one:?} vs most-informed {informed:?}"
    );
    let two = r.fleet_query_rules["union-2"];
    assert!(two.rmse.is_finite() && two.nlpd.is_finite(), "{two:?}");
    let stats = r.fleet_query_union["union-2"];
    assert!(
        stats.sets >= 1 && stats.rows_mean > 40.0 && stats.rows_mean <= 80.0,
        "{stats:?}"
    );
    assert_eq!((stats.fallbacks, stats.global_only), (0, 0));
    assert_eq!(r.fleet_query_union["union-1"].rows_mean, 40.0);
}
