//! Routing of the fleet-wide query (issue 31, docs/LOCAL.md §13): with K at least the fleet
//! every agent answers, bit for bit as without routing; on a field whose agents hold regions
//! K agents answer each row and lose nothing measurable against asking all.

use coolgp::faer::Mat;
use coolgp::local::{LocalConfig, MemoryPolicy};
use coolgp_sim::{run, Batch, Report, SimConfig, TestSet, Workload};

use super::scores::gp_stream;

/// Regions along the first input.
const REGIONS: usize = 8;

/// `gp_stream`'s field, each row routed to the region of its first input (8 equal-count
/// bands), in blocks of up to 20 rows of one region; test rows carry their region.
fn regional(seed: u64) -> Workload {
    let w = gp_stream(0.1, seed);
    let rows: Vec<(f64, f64, f64)> = w
        .batches
        .iter()
        .flat_map(|b| (0..b.y.len()).map(move |i| (b.x[(i, 0)], b.x[(i, 1)], b.y[i])))
        .collect();
    let mut cuts: Vec<f64> = rows.iter().map(|r| r.0).collect();
    cuts.sort_by(f64::total_cmp);
    let edges: Vec<f64> = (1..REGIONS)
        .map(|k| cuts[k * cuts.len() / REGIONS])
        .collect();
    let region = |x1: f64| edges.iter().filter(|&&e| x1 >= e).count();
    let mut by_region: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); REGIONS];
    for r in rows {
        by_region[region(r.0)].push(r);
    }
    let mut batches = Vec::new();
    for (g, rows) in by_region.iter().enumerate() {
        for chunk in rows.chunks(20) {
            batches.push(Batch {
                group: Some(g),
                x: Mat::from_fn(
                    chunk.len(),
                    2,
                    |i, j| if j == 0 { chunk[i].0 } else { chunk[i].1 },
                ),
                y: chunk.iter().map(|r| r.2).collect(),
            });
        }
    }
    let tests = w
        .tests
        .into_iter()
        .map(|t| {
            let groups = (0..t.y.len()).map(|i| Some(region(t.x[(i, 0)]))).collect();
            TestSet { groups, ..t }
        })
        .collect();
    Workload {
        batches,
        tests,
        groups: REGIONS,
        ..w
    }
}

fn cfg(route: Option<usize>) -> SimConfig {
    SimConfig {
        agents: REGIONS,
        inducing: 12,
        fuse_every: 40,
        baselines: false,
        central: false,
        route,
        local: LocalConfig {
            capacity: 60,
            policy: MemoryPolicy::Reservoir,
            ..LocalConfig::default()
        },
        ..SimConfig::default()
    }
}

fn sim(route: Option<usize>, w: &Workload) -> Report {
    run(&cfg(route), w, &|_, _| {}).expect("runs")
}

#[test]
fn routing_to_at_least_every_agent_is_asking_all_bit_for_bit() {
    let w = regional(4);
    let all = sim(None, &w);
    assert_eq!(all.fleet_query_answers_per_row, REGIONS as f64);
    for k in [REGIONS, 100] {
        let r = sim(Some(k), &w);
        assert_eq!(r.fleet_query_route, Some(k));
        assert_eq!(r.fleet_query_answers_per_row, REGIONS as f64);
        assert_eq!(r.rmse_fleet_query.to_bits(), all.rmse_fleet_query.to_bits());
        assert_eq!(r.fleet_query_rules, all.fleet_query_rules, "K = {k}");
        assert_eq!(r.fleet_rule, all.fleet_rule);
    }
}

#[test]
fn on_a_field_of_regions_a_few_agents_answer_as_well_as_all() {
    for seed in [4, 5] {
        let w = regional(seed);
        let all = sim(None, &w);
        // A band's rows, and its two neighbours' (measured: K = 2 loses 5–28%, K = 3 0–3%,
        // K = 4 and 5 lose nothing on these seeds).
        let four = sim(Some(4), &w);
        assert_eq!(four.fleet_query_answers_per_row, 4.0);
        let (q, q_all, global) = (
            four.rmse_fleet_query,
            all.rmse_fleet_query,
            four.rmse_fleet_query_global,
        );
        eprintln!("seed {seed}: routed to 4 {q:.5}, all {q_all:.5}, global {global:.5}");
        assert!(q < 0.8 * global, "seed {seed}: {q} against global {global}");
        assert!(q < 1.05 * q_all, "seed {seed}: {q} against all {q_all}");
        // The oracle asks the row's own region's agent, routed or not.
        assert!(four.rmse_oracle_local.is_some());
        assert_eq!(four.rmse_oracle_local, all.rmse_oracle_local);
    }
}
