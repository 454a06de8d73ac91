//! Faulty members in the simulator (issue 29, docs/MEMBERS.md): the ten-station field with
//! one broken station, each fault kind; the member check finds it, containment removes it
//! from the fused model and the fleet query, and on the clean field the check changes
//! nothing.

use coolgp::members::Policy;
use coolgp_sim::faults::{config, field, Fault};
use coolgp_sim::{run, Report, SimConfig};

/// The field's run ([`config`]) at seed 0.
fn cfg(suspects: Policy) -> SimConfig {
    config(suspects, 0)
}

fn sim(cfg: &SimConfig, faults: &[(usize, Fault)]) -> Report {
    run(cfg, &field(faults, 20, 0), &|_, _| {}).expect("runs")
}

/// The mean fused-model RMSE of agents 0–8 (the honest stations).
fn honest_rmse(r: &Report) -> f64 {
    let rows: Vec<f64> = r
        .per_agent
        .iter()
        .filter(|a| a.id < 9)
        .map(|a| a.rmse_post)
        .collect();
    rows.iter().sum::<f64>() / rows.len() as f64
}

#[test]
fn each_fault_is_found_and_contained_and_the_clean_field_is_unchanged() {
    let clean = sim(&cfg(Policy::Contain), &[]);
    let members = clean.members.as_ref().expect("checked");
    assert!(members.suspects.is_empty(), "{members:?}");
    assert!(members.checks > 0);
    // Clearly trusted members are measured less often (issue 31: 1, 2, 4, then every 8
    // fusions), not at every check.
    assert!(
        members.measured < members.checks * 10,
        "{} of {}",
        members.measured,
        members.checks * 10
    );
    assert!(
        members.members.iter().all(|m| m.standing == "trusted"),
        "{members:?}"
    );
    // No suspect: flag and contain are the run without the check, bit for bit.
    let off = sim(&cfg(Policy::Off), &[]);
    let flag = sim(&cfg(Policy::Flag), &[]);
    for r in [&off, &flag] {
        assert_eq!(r.rmse_post.to_bits(), clean.rmse_post.to_bits());
        assert_eq!(
            r.rmse_fleet_query.to_bits(),
            clean.rmse_fleet_query.to_bits()
        );
    }
    assert!(off.members.is_none());
    let (g0, q0) = (honest_rmse(&clean), clean.rmse_fleet_query);
    for fault in Fault::ALL {
        let faults = [(9, fault)];
        let uncontained = sim(&cfg(Policy::Flag), &faults);
        let contained = sim(&cfg(Policy::Contain), &faults);
        for r in [&uncontained, &contained] {
            let m = r.members.as_ref().expect("checked");
            assert_eq!(m.suspects, vec![9], "{fault:?}: {m:?}");
            let first = m.members[9].first_suspect_block.expect("marked");
            assert!(first <= 10, "{fault:?}: marked at its block {first}");
        }
        let (g, q) = (honest_rmse(&contained), contained.rmse_fleet_query);
        let (gu, qu) = (honest_rmse(&uncontained), uncontained.rmse_fleet_query);
        eprintln!(
            "{fault:?}: honest global {g:.4} (uncontained {gu:.4}, clean {g0:.4}); fleet query \
             {q:.4} (uncontained {qu:.4}, clean {q0:.4})"
        );
        assert!(g < 1.1 * g0, "{fault:?}: global {g} against clean {g0}");
        assert!(
            q < 2.5 * q0,
            "{fault:?}: fleet query {q} against clean {q0}"
        );
        assert!(
            qu > 5.0 * q,
            "{fault:?}: containment must matter ({qu} vs {q})"
        );
        assert!(contained.members.as_ref().is_some_and(|m| m.contained));
        // The fused model is exact over the fleet without the suspect.
        assert!(
            contained.fusion_max_rel_err < 1e-9,
            "{}",
            contained.fusion_max_rel_err
        );
    }
}

#[test]
fn two_faulty_members_of_ten_are_both_contained() {
    let clean = sim(&cfg(Policy::Contain), &[]);
    let r = sim(
        &cfg(Policy::Contain),
        &[(8, Fault::Offset), (9, Fault::Scaled)],
    );
    let m = r.members.as_ref().expect("checked");
    assert_eq!(m.suspects, vec![8, 9], "{m:?}");
    let honest: Vec<f64> = r
        .per_agent
        .iter()
        .filter(|a| a.id < 8)
        .map(|a| a.rmse_post)
        .collect();
    let g = honest.iter().sum::<f64>() / honest.len() as f64;
    assert!(g < 1.1 * honest_rmse(&clean), "{g}");
    assert!(r.rmse_fleet_query < 2.5 * clean.rmse_fleet_query);
}

#[test]
fn push_sum_on_a_ring_contains_too() {
    // A graph with cycles fuses by push-sum: the suspect's data leave the running totals.
    let ring = |p: Policy| SimConfig {
        topology: coolgp_sim::TopologyKind::Ring,
        ..cfg(p)
    };
    let clean = sim(&ring(Policy::Contain), &[]);
    let r = sim(&ring(Policy::Contain), &[(9, Fault::Offset)]);
    let uncontained = sim(&ring(Policy::Flag), &[(9, Fault::Offset)]);
    let m = r.members.as_ref().expect("checked");
    assert_eq!(m.suspects, vec![9]);
    assert!(m.contained);
    assert_eq!(r.fusion, "push-sum");
    let (g, g0, gu) = (
        honest_rmse(&r),
        honest_rmse(&clean),
        honest_rmse(&uncontained),
    );
    eprintln!("push-sum ring: honest global {g:.4} (clean {g0:.4}, uncontained {gu:.4})");
    assert!(g < 1.1 * g0, "{g} against clean {g0}");
    assert!(gu > 1.3 * g, "containment must matter: {gu} vs {g}");
    assert!(r.fusion_max_rel_err < 1e-6, "{}", r.fusion_max_rel_err);
}

#[test]
fn without_memory_each_fault_is_found_by_the_newest_rows_and_contained() {
    // `--local-memory 0`: the check reads each member's newest rows (`Agent::recent_rows`).
    let no_memory = |p: Policy| {
        let mut c = cfg(p);
        c.local.capacity = 0;
        c
    };
    let clean = sim(&no_memory(Policy::Contain), &[]);
    let m = clean.members.as_ref().expect("checked");
    assert!(m.suspects.is_empty(), "{m:?}");
    assert!(
        m.members
            .iter()
            .all(|m| m.standing == "trusted" && m.rows > 0),
        "{m:?}"
    );
    let g0 = honest_rmse(&clean);
    for fault in Fault::ALL {
        let faults = [(9, fault)];
        let contained = sim(&no_memory(Policy::Contain), &faults);
        let uncontained = sim(&no_memory(Policy::Off), &faults);
        let m = contained.members.as_ref().expect("checked");
        assert_eq!(m.suspects, vec![9], "{fault:?}: {m:?}");
        let first = m.members[9].first_suspect_block.expect("marked");
        let (g, gu) = (honest_rmse(&contained), honest_rmse(&uncontained));
        eprintln!(
            "no memory, {fault:?}: marked at block {first}; honest global {g:.4} \
             (uncontained {gu:.4}, clean {g0:.4})"
        );
        assert!(first <= 10, "{fault:?}: marked at its block {first}");
        assert!(g < 1.1 * g0, "{fault:?}: global {g} against clean {g0}");
        assert!(contained.fusion_max_rel_err < 1e-9);
    }
}

#[test]
fn at_batch_5_each_fault_kind_is_marked_by_its_block_10_and_the_clean_field_marks_no_one() {
    // Blocks of 5 rows with the command line's cadence (q(u) fused every tenth of the stream,
    // warm-ups at its 1, 2, 4 and 8%): 32 informed rows take a station 7 blocks, and the
    // fusions of q(u) come at its blocks ~4, 8, 10, 20. A member awaiting a clear verdict is
    // probed at every site fusion, and the median member's score needs 16 informed rows of
    // three members, so a fault is marked by its block 8 here (the issue asks 10).
    let at_batch_5 = |seed: u64| SimConfig {
        fuse_every: 100,
        ..config(Policy::Contain, seed)
    };
    // Seed 0, every fault kind; the clean field at seeds 0 and 1. (At seed 1 the unit
    // mix-up is marked at its block 13: its peers' own models inform fewer than 32 of its
    // rows until then, docs/MEMBERS.md §7.)
    for seed in [0, 1] {
        let cfg = at_batch_5(seed);
        let clean = run(&cfg, &field(&[], 5, seed), &|_, _| {}).expect("runs");
        let m = clean.members.as_ref().expect("checked");
        assert!(
            m.members.iter().all(|m| m.first_suspect_block.is_none()),
            "seed {seed}: {m:?}"
        );
    }
    let cfg = at_batch_5(0);
    for fault in Fault::ALL {
        let r = run(&cfg, &field(&[(9, fault)], 5, 0), &|_, _| {}).expect("runs");
        let m = r.members.as_ref().expect("checked");
        assert_eq!(m.suspects, vec![9], "{fault:?}: {m:?}");
        let first = m.members[9].first_suspect_block.expect("marked");
        eprintln!("batch 5, {fault:?}: marked at its block {first}");
        assert!(first <= 8, "{fault:?}: marked at its block {first}");
        assert!(m.members[..9]
            .iter()
            .all(|m| m.first_suspect_block.is_none()));
    }
}
