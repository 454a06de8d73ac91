//! Projection groups in the fleet projection mode (spec §14 with groups): agents of a group
//! learn one q(W), σ_s, σ_n from their group's site sums, while q(u) is fused across groups.
//! Reference: spec §14 (sites), §7 (tree messages, push-sum), §9 (validation).

use crate::common;
use std::sync::Arc;

use common::{fleet_config, lossy_round, mat_flat, max_rel, site_flat};
use coolgp::faer::Mat;
use coolgp::learn::{group_id, GroupId, Sites};
use coolgp::protocol::{memory, RejectReason};
use coolgp::rng::Rng;
use coolgp::{Agent, AgentConfig, Excess, FusionRule, Topology, View, Vocabulary};

const D: usize = 3;

fn vocab() -> Arc<Vocabulary> {
    Arc::new(Vocabulary::default_design(9, 2, 11).expect("design"))
}

fn cfg(group: Option<GroupId>) -> AgentConfig {
    AgentConfig {
        group,
        ..fleet_config()
    }
}

/// Agent i belongs to group "a" (even i) or "b" (odd i).
fn group_of(i: usize) -> GroupId {
    group_id(if i.is_multiple_of(2) { "a" } else { "b" })
}

fn fleet(topo: &Topology, v: &Arc<Vocabulary>, fusion: FusionRule) -> Vec<Agent> {
    (0..topo.len())
        .map(|i| {
            let c = AgentConfig {
                fusion,
                ..cfg(Some(group_of(i)))
            };
            let mut a = Agent::new(i as u64, v.clone(), D, c).expect("agent");
            a.set_neighbors(topo.neighbors(i).iter().map(|&j| j as u64))
                .expect("neighbours");
            a
        })
        .collect()
}

/// `k` blocks of 10 rows; the two groups see the same function through different inputs.
fn feed(a: &mut Agent, rng: &mut Rng, k: usize, group_b: bool) {
    for _ in 0..k {
        let x = Mat::from_fn(10, D, |_, _| rng.normal());
        let y: Vec<f64> = (0..10)
            .map(|r| {
                let z = if group_b {
                    x[(r, 1)] + 0.3 * x[(r, 2)]
                } else {
                    x[(r, 0)] - 0.5 * x[(r, 1)]
                };
                z.sin() + 0.1 * rng.normal()
            })
            .collect();
        a.handle_block(x.as_ref(), &y).expect("block");
    }
}

/// `Σ_{i in g} s_i` for every group.
fn group_sums(agents: &[Agent]) -> Sites {
    let mut s = Sites::default();
    for a in agents {
        s.add_in_place(&Sites::single(a.site_key(), a.site().clone()));
    }
    s
}

/// Worst relative error of any agent's fused sums of any group against `Σ_{i in g} s_i`
/// (panics if an agent lacks a group).
fn worst_group_sum_err(agents: &[Agent]) -> f64 {
    let want = group_sums(agents);
    let mut worst = 0.0f64;
    for a in agents {
        let got = a.fused_sites();
        for (g, s) in want.iter() {
            let have = got.get(g).expect("group present");
            worst = worst.max(max_rel(&site_flat(have), &site_flat(s)));
        }
    }
    worst
}

fn fed_tree(n: usize, seed: u64) -> (Vec<Agent>, Topology) {
    let v = vocab();
    let topo = Topology::random_tree(n, seed);
    let mut agents = fleet(&topo, &v, FusionRule::Tree);
    let mut rng = Rng::new(seed, 5);
    for (i, a) in agents.iter_mut().enumerate() {
        feed(a, &mut rng, 1 + i % 3, i % 2 == 1);
    }
    (agents, topo)
}

#[test]
fn each_group_learns_from_its_own_sites_and_q_u_is_fused_across_groups_exactly() {
    // On a tree, after the sites settle, every agent holds Σ_{i in g} s_i of *every* group
    // (messages carry all groups), predicts with its own group's q(W), and — one more pass
    // after the scales settle — holds T0 + Σ_i E_i with E_i in the scales of i's group.
    for seed in 0..4 {
        let (mut agents, topo) = fed_tree(5 + 2 * seed as usize, seed);
        let diam = topo.diameter().unwrap_or(1);
        for _ in 0..diam {
            memory::round(&mut agents).expect("valid");
        }
        assert_eq!(group_sums(&agents).groups(), 2);
        let err = worst_group_sum_err(&agents);
        assert!(err <= 1e-12, "seed {seed}: group sums off by {err:e}");
        // Same group: the same q(W), σ_s, σ_n; other group: another one.
        let theta = |i: usize| agents[i].projection().to_flat();
        for i in 2..agents.len() {
            let same = max_rel(&theta(i), &theta(i % 2));
            assert!(
                same <= 1e-12,
                "seed {seed}: agent {i} differs from its group by {same:e}"
            );
        }
        assert!(max_rel(&theta(0), &theta(1)) > 1e-6, "groups share a q(W)");
        // The scales have settled: another `diameter` rounds fuse q(u) exactly.
        for _ in 0..diam {
            memory::round(&mut agents).expect("valid");
        }
        let mut e_sum = Excess::zeros(agents[0].own_excess().m());
        for a in &agents {
            e_sum.add_in_place(a.own_excess());
        }
        for a in &agents {
            let tg = a.natural_params_of(&e_sum);
            let got = a.natural_params(View::Fused);
            let err = max_rel(&mat_flat(&got.t1), &mat_flat(&tg.t1)).max(max_rel(&got.t2, &tg.t2));
            assert!(err <= 1e-10, "seed {seed}: fused q(u) off by {err:e}");
        }
    }
}

#[test]
fn the_own_excess_is_in_the_groups_current_scales() {
    // With groups E_i = (σ_s² Ψ̄2/σ_n², σ_s Ψ̄1ᵀy/σ_n²) under the group's current σ_s, σ_n
    // (spec §3), re-scaled whenever the group's sums move them.
    let (mut agents, topo) = fed_tree(6, 9);
    for _ in 0..topo.diameter().unwrap_or(1) {
        memory::round(&mut agents).expect("valid");
    }
    for a in &agents {
        let p = a.projection();
        let mut unit = a.clone();
        let mut c = cfg(None);
        c.fusion = FusionRule::Tree;
        // The same caches read in unit scale (an ungrouped agent) and scaled by hand.
        let snap = {
            let mut s = unit.snapshot();
            s.config = c;
            s.inbox.clear();
            s
        };
        unit = Agent::restore(vocab(), snap).expect("restore");
        let e = unit.own_excess();
        let want = Excess::from_unit_parts(&e.d1, &e.d2, p.sigma_s(), p.sigma_n());
        let got = a.own_excess();
        assert!(max_rel(&got.d2, &want.d2) <= 1e-12);
        assert!(
            max_rel(&mat_flat(&got.d1), &mat_flat(&want.d1)) <= 1e-12,
            "E_i is not in the group's scales"
        );
    }
}

#[test]
fn grouped_and_ungrouped_agents_refuse_each_others_sums() {
    // A fleet has groups everywhere or nowhere: q(u) in unit scale (no groups) and in the
    // groups' scales cannot be summed, so such messages are rejected and change nothing.
    let v = vocab();
    let mut rng = Rng::new(1, 1);
    let mut grouped = Agent::new(0, v.clone(), D, cfg(Some(group_id("a")))).expect("agent");
    let mut plain = Agent::new(1, v.clone(), D, cfg(None)).expect("agent");
    for a in [&mut grouped, &mut plain] {
        a.set_neighbors([if a.id() == 0 { 1 } else { 0 }])
            .expect("neighbours");
        feed(a, &mut rng, 2, false);
        a.handle_tick();
    }
    let to_plain = grouped.poll_transmit().expect("message");
    let to_grouped = plain.poll_transmit().expect("message");
    let (before_p, before_g) = (plain.snapshot(), grouped.snapshot());
    assert!(matches!(
        plain.handle_message(to_plain),
        Err(RejectReason::BadSite(_))
    ));
    assert!(matches!(
        grouped.handle_message(to_grouped),
        Err(RejectReason::BadSite(_))
    ));
    assert_eq!(plain.snapshot(), before_p);
    assert_eq!(grouped.snapshot(), before_g);
}

#[test]
fn a_grouped_agent_restores_bit_identically() {
    let (mut agents, topo) = fed_tree(5, 4);
    for _ in 0..topo.diameter().unwrap_or(1) {
        memory::round(&mut agents).expect("valid");
    }
    let snap = agents[2].snapshot();
    let back = Agent::restore(vocab(), snap.clone()).expect("restore");
    assert_eq!(back.snapshot(), snap);
    assert_eq!(back.fused_sites(), agents[2].fused_sites());
    assert_eq!(
        back.natural_params(View::Fused),
        agents[2].natural_params(View::Fused)
    );
}

#[test]
fn group_sums_are_exact_over_push_sum_with_loss() {
    // Spec §7 alternative 2 with grouped site mass: every agent's estimate of every group's
    // Σ_{i in g} s_i converges under 30% loss, site changes injected mid-way included.
    let v = vocab();
    let topo = Topology::ring(8);
    let fusion = FusionRule::PushSum {
        agents: 8.0,
        weight: 1.0,
    };
    let mut agents = fleet(&topo, &v, fusion);
    let mut rng = Rng::new(2, 2);
    let mut loss = Rng::new(3, 3);
    for (i, a) in agents.iter_mut().enumerate() {
        feed(a, &mut rng, 1 + i % 2, i % 2 == 1);
    }
    for round in 0..600 {
        if round == 50 {
            feed(&mut agents[3], &mut rng, 2, true);
        }
        lossy_round(&mut agents, &mut loss, 0.3);
    }
    let err = worst_group_sum_err(&agents);
    assert!(err <= 1e-9, "push-sum group sums off by {err:e}");
}
