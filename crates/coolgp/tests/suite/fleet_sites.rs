//! The fleet projection mode (spec §14): q(W), σ_s, σ_n as the prior plus a sum of per-agent
//! natural-parameter sites, fused by the same tree message passing or push-sum as q(u).
//! Reference: spec §14 (sites, initialization, σ_s and σ_n as sites), §7 (tree messages),
//! §9 (validation of received messages).

use crate::common;
use std::sync::Arc;

use common::{fleet_config, lossy_round, max_rel, site_flat};
use coolgp::faer::Mat;
use coolgp::fuse::tree::two_pass_schedule;
use coolgp::fuse::Mass;
use coolgp::learn::{Site, SiteConfig};
use coolgp::protocol::{memory, Body, RejectReason};
use coolgp::rng::Rng;
use coolgp::{
    Agent, AgentConfig, Error, Excess, FusionRule, Topology, UpdateMode, View, Vocabulary,
};

pub(crate) const D: usize = 3;

pub(crate) fn vocab() -> Arc<Vocabulary> {
    Arc::new(Vocabulary::default_design(9, 2, 11).expect("design"))
}

pub(crate) fn cfg() -> AgentConfig {
    fleet_config()
}

fn fleet_on(topo: &Topology, vocab: &Arc<Vocabulary>) -> Vec<Agent> {
    fleet_with(topo, vocab, &cfg())
}

pub(crate) fn fleet_with(
    topo: &Topology,
    vocab: &Arc<Vocabulary>,
    cfg: &AgentConfig,
) -> Vec<Agent> {
    (0..topo.len())
        .map(|i| {
            let mut a = Agent::new(i as u64, vocab.clone(), D, cfg.clone()).expect("agent");
            a.set_neighbors(topo.neighbors(i).iter().map(|&j| j as u64))
                .expect("neighbours");
            a
        })
        .collect()
}

/// `k` blocks of 10 rows of one phenomenon, to agent `i`.
pub(crate) fn feed(a: &mut Agent, rng: &mut Rng, k: usize) {
    for _ in 0..k {
        let x = Mat::from_fn(10, D, |_, _| rng.normal());
        let y: Vec<f64> = (0..10)
            .map(|r| (x[(r, 0)] - 0.5 * x[(r, 1)]).sin() + 0.1 * rng.normal())
            .collect();
        a.handle_block(x.as_ref(), &y).expect("block");
    }
}

/// The view of a fleet whose sites sum to `total`: the sums plus the faded pseudo-site of q0.
pub(crate) fn view_of(total: Site, v: &Vocabulary) -> Site {
    let c = cfg().site;
    total.with_pseudo(&Site::pseudo(&v.initial_projection(D), &c), &c)
}

#[test]
fn a_fleet_with_no_data_holds_exactly_the_shared_initial_projection() {
    // Spec §14 "Initialization": the pseudo-site of q0 plus the prior counted once is q0,
    // before any message and after.
    let v = vocab();
    let topo = Topology::random_tree(7, 3);
    let mut agents = fleet_on(&topo, &v);
    let q0 = v.initial_projection(D).to_flat();
    for a in &agents {
        assert!(max_rel(&a.projection().to_flat(), &q0) <= 1e-12);
    }
    for _ in 0..topo.diameter().unwrap_or(1) {
        memory::round(&mut agents).expect("valid");
    }
    for a in &agents {
        let got = a.projection().to_flat();
        assert!(max_rel(&got, &q0) <= 1e-12, "{:e}", max_rel(&got, &q0));
        assert_eq!(a.fleet_points(), 0.0);
    }
}

#[test]
fn site_sums_are_exact_over_random_trees() {
    // Spec §14: the fused sums are the tree's sums, so after `diameter` rounds every agent
    // holds Σ_i s_i and predicts with the same q(W) (to rounding: sums in different orders).
    for seed in 0..6 {
        let v = vocab();
        let n = 4 + seed as usize * 3;
        let topo = Topology::random_tree(n, seed);
        let mut agents = fleet_on(&topo, &v);
        let mut rng = Rng::new(seed, 5);
        for (i, a) in agents.iter_mut().enumerate() {
            feed(a, &mut rng, 1 + i % 3);
        }
        for _ in 0..topo.diameter().unwrap_or(1) {
            memory::round(&mut agents).expect("valid");
        }
        let mut total = Site::zeros(agents[0].site().len());
        for a in &agents {
            total.add_in_place(a.site());
        }
        let want = site_flat(&view_of(total, &v));
        let theta0 = agents[0].projection().to_flat();
        for a in &agents {
            let got = site_flat(&a.fused_site());
            assert!(
                max_rel(&got, &want) <= 1e-12,
                "seed {seed}: {:e}",
                max_rel(&got, &want)
            );
            assert!(max_rel(&a.projection().to_flat(), &theta0) <= 1e-12);
        }
        // One round fewer is not enough on a tree of diameter ≥ 2.
        if topo.diameter().unwrap_or(0) >= 2 {
            let mut late = fleet_on(&topo, &v);
            let mut rng = Rng::new(seed, 5);
            for (i, a) in late.iter_mut().enumerate() {
                feed(a, &mut rng, 1 + i % 3);
            }
            for _ in 0..topo.diameter().unwrap_or(1) - 1 {
                memory::round(&mut late).expect("valid");
            }
            assert!(late
                .iter()
                .any(|a| max_rel(&site_flat(&a.fused_site()), &want) > 1e-6));
        }
    }
}

#[test]
fn two_pass_and_rounds_give_the_same_fleet() {
    // The two-pass schedule (each D_ij once) and the paper's rounds fuse q(u) and the sites
    // to the same models (spec §7, §14).
    let v = vocab();
    let topo = Topology::random_tree(12, 8);
    let build = || {
        let mut agents = fleet_on(&topo, &v);
        let mut rng = Rng::new(4, 4);
        for (i, a) in agents.iter_mut().enumerate() {
            feed(a, &mut rng, 1 + i % 2);
        }
        agents
    };
    let mut rounds = build();
    for _ in 0..topo.diameter().unwrap_or(1) {
        memory::round(&mut rounds).expect("valid");
    }
    let mut two = build();
    for step in two_pass_schedule(&topo) {
        for (from, to) in step {
            two[from].handle_tick_to(to as u64);
        }
        memory::deliver_all(&mut two).expect("valid");
    }
    assert_same_models(&rounds, &two, 1e-12, 1e-10);
}

/// Agent by agent, fleets `a` and `b` hold the same fused sites (to `site_tol`) and predict
/// the same means and variances (to `pred_tol`) at a few fixed points.
fn assert_same_models(a: &[Agent], b: &[Agent], site_tol: f64, pred_tol: f64) {
    let x = Mat::from_fn(5, D, |i, j| (i as f64 - j as f64 * 0.7).cos());
    for (a, b) in a.iter().zip(b) {
        let e = max_rel(&site_flat(&a.fused_site()), &site_flat(&b.fused_site()));
        assert!(e <= site_tol, "agent {}: sites off by {e:e}", a.id());
        let (pa, pb) = (
            a.predict(x.as_ref(), View::Fused).expect("predict"),
            b.predict(x.as_ref(), View::Fused).expect("predict"),
        );
        assert!(max_rel(&pa.mean, &pb.mean) <= pred_tol);
        assert!(max_rel(&pa.var_y, &pb.var_y) <= pred_tol);
    }
}

#[test]
fn site_only_messages_fuse_the_sites_and_leave_q_u_alone() {
    let v = vocab();
    let topo = Topology::path(3);
    let mut agents = fleet_on(&topo, &v);
    let mut rng = Rng::new(1, 1);
    feed(&mut agents[0], &mut rng, 2);
    feed(&mut agents[2], &mut rng, 1);
    for _ in 0..2 {
        for a in agents.iter_mut() {
            a.handle_site_tick();
        }
        memory::deliver_all(&mut agents).expect("valid");
    }
    let want = site_flat(&view_of(
        {
            let mut t = agents[0].site().clone();
            t.add_in_place(agents[1].site());
            t.add_in_place(agents[2].site());
            t
        },
        &v,
    ));
    for a in &agents {
        assert!(max_rel(&site_flat(&a.fused_site()), &want) <= 1e-12);
    }
    // q(u) was not exchanged: agent 1 has no data and no q(u) message.
    assert_eq!(agents[1].fleet_points(), 0.0);
    assert_eq!(agents[1].fused_excess().0.d2, vec![0.0; v.m()]);
}

#[test]
fn nodes_holding_the_same_sums_predict_identically() {
    // Everything an agent predicts with is a function of the fused sums: a restored agent and
    // the original, and two agents after fusion, agree.
    let v = vocab();
    let topo = Topology::path(2);
    let mut agents = fleet_on(&topo, &v);
    let mut rng = Rng::new(2, 2);
    feed(&mut agents[0], &mut rng, 3);
    feed(&mut agents[1], &mut rng, 2);
    memory::round(&mut agents).expect("valid");
    let x = Mat::from_fn(4, D, |i, j| (i + 2 * j) as f64 * 0.3 - 1.0);
    let p0 = agents[0].predict(x.as_ref(), View::Fused).expect("predict");
    let p1 = agents[1].predict(x.as_ref(), View::Fused).expect("predict");
    assert!(
        max_rel(&p0.mean, &p1.mean) <= 1e-10,
        "{:e}",
        max_rel(&p0.mean, &p1.mean)
    );
    assert!(max_rel(&p0.var_y, &p1.var_y) <= 1e-10);
    let back = Agent::restore(v.clone(), agents[0].snapshot()).expect("restore");
    let pb = back.predict(x.as_ref(), View::Fused).expect("predict");
    assert_eq!(pb.mean, p0.mean, "restore is bit-identical");
    assert_eq!(back.site(), agents[0].site());
}

type Corrupt = fn(&mut coolgp::Message);

/// The ungrouped site sums of a fleet-projection message.
fn own_site(m: &mut coolgp::Message) -> &mut Site {
    m.sites
        .as_mut()
        .and_then(|s| s.get_mut(coolgp::learn::UNGROUPED))
        .expect("site sums")
}

/// Ways to spoil the site of a message (each must be rejected as [`RejectReason::BadSite`]).
fn corruptions() -> [(&'static str, Corrupt); 6] {
    [
        ("negative precision", |m| own_site(m).prec[0] = -1.0),
        ("NaN", |m| own_site(m).shift[1] = f64::NAN),
        ("wrong length", |m| {
            let s = own_site(m);
            s.prec.pop();
            s.shift.pop();
        }),
        ("negative count", |m| own_site(m).hyper.n = -5.0),
        ("infinite points", |m| own_site(m).points = f64::INFINITY),
        ("missing", |m| m.sites = None),
    ]
}

/// Two agents of `cfg` with data, and agent 0's first message to agent 1.
fn pair_and_message(v: &Arc<Vocabulary>, cfg: &AgentConfig) -> (Vec<Agent>, coolgp::Message) {
    let mut agents = fleet_with(&Topology::path(2), v, cfg);
    let mut rng = Rng::new(3, 3);
    feed(&mut agents[0], &mut rng, 2);
    feed(&mut agents[1], &mut rng, 1);
    agents[0].handle_tick();
    let good = agents[0].poll_transmit().expect("a message");
    (agents, good)
}

/// Every corruption of `good`'s site is rejected as a bad site and leaves `receiver`
/// bit-identical.
fn assert_corruptions_rejected(receiver: &mut Agent, good: &coolgp::Message) {
    let before = receiver.snapshot();
    for (what, corrupt) in corruptions() {
        let mut msg = good.clone();
        corrupt(&mut msg);
        let r = receiver.handle_message(msg);
        assert!(matches!(r, Err(RejectReason::BadSite(_))), "{what}: {r:?}");
        assert_eq!(receiver.snapshot(), before, "{what}: agent changed");
    }
}

#[test]
fn an_invalid_site_is_rejected_and_leaves_the_agent_bit_identical() {
    let v = vocab();
    let (mut agents, good) = pair_and_message(&v, &cfg());
    let receiver = &mut agents[1];
    assert_corruptions_rejected(receiver, &good);
    // A site-only body is a wrong kind for a per-agent agent, and a site in its messages is bad.
    let mut per_agent = Agent::new(1, v.clone(), D, AgentConfig::default()).expect("agent");
    per_agent.set_neighbors([0]).expect("neighbours");
    let mut site_only = good.clone();
    site_only.body = Body::Site;
    assert_eq!(
        per_agent.handle_message(site_only),
        Err(RejectReason::WrongKind)
    );
    assert!(matches!(
        per_agent.handle_message(good.clone()),
        Err(RejectReason::BadSite(_))
    ));
    // The honest message is accepted.
    receiver.handle_message(good).expect("valid");
}

#[test]
fn the_fleet_mode_refuses_the_importance_mode_and_bad_site_settings() {
    let v = vocab();
    let is = AgentConfig {
        mode: UpdateMode::parse(Some("importance"), Some(4), None).expect("mode"),
        ..cfg()
    };
    assert!(matches!(
        Agent::new(0, v.clone(), D, is),
        Err(Error::InvalidConfig(_))
    ));
    // Push-sum is accepted: its masses carry the sites (the push-sum tests below).
    let ps = AgentConfig {
        fusion: coolgp::FusionRule::PushSum {
            agents: 2.0,
            weight: 1.0,
        },
        ..cfg()
    };
    assert!(Agent::new(0, v.clone(), D, ps).is_ok());
    let bad = AgentConfig {
        site: SiteConfig {
            damping: 0.0,
            ..SiteConfig::default()
        },
        ..cfg()
    };
    let e = Agent::new(0, v, D, bad).expect_err("damping 0");
    assert!(e.to_string().contains("damping"), "{e}");
}

#[test]
fn the_site_step_learns_the_noise_scale_of_one_phenomenon() {
    // One agent alone (fleet of one), 300 points of sin(x0 − x1/2) + N(0, 0.1²): the fused
    // σ_n leaves its initial 0.5 toward the noise, and the fit beats the zero predictor.
    let v = vocab();
    let mut a = Agent::new(0, v.clone(), D, cfg()).expect("agent");
    let mut rng = Rng::new(6, 6);
    feed(&mut a, &mut rng, 30);
    let sn = a.projection().sigma_n();
    assert!(sn < 0.4, "σ_n {sn} did not move from 0.5 toward the noise");
    let x = Mat::from_fn(200, D, |_, _| rng.normal());
    let y: Vec<f64> = (0..200)
        .map(|r| (x[(r, 0)] - 0.5 * x[(r, 1)]).sin())
        .collect();
    let p = a.predict(x.as_ref(), View::Own).expect("predict");
    let zero = (y.iter().map(|v| v * v).sum::<f64>() / 200.0).sqrt();
    assert!(
        p.rmse(&y) < 0.6 * zero,
        "rmse {} vs zero {zero}",
        p.rmse(&y)
    );
}

// ---------------------------------------------------------------------------------------------
// push-sum: the sites are part of the push-sum mass (spec §7 alternative 2, §14)

pub(crate) fn ps_cfg(agents: usize) -> AgentConfig {
    AgentConfig {
        fusion: FusionRule::PushSum {
            agents: agents as f64,
            weight: 1.0,
        },
        ..cfg()
    }
}

/// `Σ_i s_i` and `Σ_i E_i` of a fleet.
pub(crate) fn fleet_sums(agents: &[Agent], m: usize) -> (Site, Excess) {
    let mut site = Site::zeros(agents[0].site().len());
    let mut e = Excess::zeros(m);
    for a in agents {
        site.add_in_place(a.site());
        e.add_in_place(a.own_excess());
    }
    (site, e)
}

/// Worst relative error of the agents' fused sites against the fleet's view `want`.
pub(crate) fn worst_site_err(agents: &[Agent], want: &[f64]) -> f64 {
    agents
        .iter()
        .map(|a| max_rel(&site_flat(&a.fused_site()), want))
        .fold(0.0, f64::max)
}

#[test]
fn site_sums_are_exact_over_push_sum_with_30_percent_loss() {
    // Reference: spec §7 alternative 2 (running sums heal lost messages) with the site mass
    // of spec §14: after enough lossy rounds every agent's estimate is the fleet's Σ_i s_i
    // (and Σ_i E_i), including site changes injected while the mass is spread out.
    for (name, topo) in [("ring", Topology::ring(10)), ("grid", Topology::grid(9))] {
        let v = vocab();
        let n = topo.len();
        let mut agents = fleet_with(&topo, &v, &ps_cfg(n));
        let mut data = Rng::new(11, n as u64);
        for (i, a) in agents.iter_mut().enumerate() {
            feed(a, &mut data, i % 3);
        }
        let mut loss = Rng::new(12, n as u64);
        for _ in 0..10 {
            lossy_round(&mut agents, &mut loss, 0.3);
        }
        let (early, _) = fleet_sums(&agents, v.m());
        let after_10 = worst_site_err(&agents, &site_flat(&view_of(early, &v)));
        // New blocks mid-fusion: the own sites change and the differences enter the masses.
        feed(&mut agents[1], &mut data, 2);
        feed(&mut agents[n - 1], &mut data, 1);
        for _ in 0..600 {
            lossy_round(&mut agents, &mut loss, 0.3);
        }
        let (total, excess) = fleet_sums(&agents, v.m());
        let points = total.points;
        let want = site_flat(&view_of(total, &v));
        let worst = worst_site_err(&agents, &want);
        assert!(worst <= 1e-9, "{name}: site sums off by {worst:e}");
        assert!(
            after_10 > 1e-6,
            "{name}: exact after 10 lossy rounds ({after_10:e})"
        );
        let theta0 = agents[0].projection().to_flat();
        for a in &agents {
            let e = a.fused_excess().0.rel_dist(&excess);
            assert!(e <= 1e-9, "{name}: q(u) sums off by {e:e}");
            assert!((a.fleet_points() - points).abs() <= 1e-9 * points);
            assert!(max_rel(&a.projection().to_flat(), &theta0) <= 1e-9);
        }
    }
}

#[test]
fn push_sum_on_a_tree_agrees_with_the_tree_rule() {
    // The same own sites and caches fused by push-sum and by the tree rule give the same q(u),
    // sites and predictions (spec §7: both estimate the same sums; the tree's are exact).
    let v = vocab();
    let topo = Topology::random_tree(8, 5);
    let mut ps = fleet_with(&topo, &v, &ps_cfg(topo.len()));
    let mut data = Rng::new(7, 7);
    for (i, a) in ps.iter_mut().enumerate() {
        feed(a, &mut data, 1 + i % 3);
    }
    for _ in 0..600 {
        memory::round(&mut ps).expect("valid");
    }
    // The tree fleet: each push-sum agent's state with the tree rule and no push-sum mass.
    let mut tree: Vec<Agent> = ps
        .iter()
        .map(|a| {
            let mut s = a.snapshot();
            s.config.fusion = FusionRule::Tree;
            s.push_mass = Mass::zeros(v.m());
            s.push_sent = Mass::zeros(v.m());
            s.push_pending = Mass::zeros(v.m());
            s.push_received.clear();
            Agent::restore(v.clone(), s).expect("restore as a tree agent")
        })
        .collect();
    for _ in 0..topo.diameter().unwrap_or(1) {
        memory::round(&mut tree).expect("valid");
    }
    for (a, b) in ps.iter().zip(&tree) {
        assert_eq!(a.site(), b.site());
        let e = a.fused_excess().0.rel_dist(&b.fused_excess().0);
        assert!(e <= 1e-9, "q(u): {e:e}");
    }
    assert_same_models(&ps, &tree, 1e-9, 1e-9);
}

#[test]
fn a_push_sum_fleet_with_no_data_holds_exactly_the_shared_initial_projection() {
    let v = vocab();
    let topo = Topology::ring(6);
    let mut agents = fleet_with(&topo, &v, &ps_cfg(6));
    let mut loss = Rng::new(1, 6);
    for _ in 0..30 {
        lossy_round(&mut agents, &mut loss, 0.3);
    }
    let want = view_of(Site::zeros(agents[0].site().len()), &v);
    let q0 = v.initial_projection(D).to_flat();
    for a in &agents {
        assert_eq!(a.fused_site(), want, "the estimate of no sites is zero");
        assert!(max_rel(&a.projection().to_flat(), &q0) <= 1e-12);
        assert_eq!(a.fleet_points(), 0.0);
    }
}

#[test]
fn an_invalid_site_in_a_push_sum_message_is_rejected_bit_identically() {
    let v = vocab();
    let (mut agents, good) = pair_and_message(&v, &ps_cfg(2));
    assert!(matches!(good.body, Body::PushSum { .. }));
    let receiver = &mut agents[1];
    assert_corruptions_rejected(receiver, &good);
    let before = receiver.snapshot();
    // Site-only messages are a tree-rule device.
    let mut site_only = good.clone();
    site_only.body = Body::Site;
    assert_eq!(
        receiver.handle_message(site_only),
        Err(RejectReason::WrongKind)
    );
    assert!(
        !receiver.handle_site_tick_to(0),
        "push-sum sends no site-only message"
    );
    assert_eq!(receiver.snapshot(), before);
    let view = receiver.fused_site();
    receiver.handle_message(good).expect("valid");
    assert_ne!(
        receiver.fused_site(),
        view,
        "the honest total moves the estimate"
    );
}

#[test]
fn a_push_sum_snapshot_restores_bit_identically() {
    let v = vocab();
    let topo = Topology::ring(4);
    let mut agents = fleet_with(&topo, &v, &ps_cfg(4));
    let mut data = Rng::new(5, 5);
    for a in agents.iter_mut() {
        feed(a, &mut data, 2);
    }
    let mut loss = Rng::new(6, 6);
    for _ in 0..20 {
        lossy_round(&mut agents, &mut loss, 0.3);
    }
    let a = &agents[1];
    let snap = a.snapshot();
    assert!(snap.push_mass.site.is_some() && !snap.push_received.is_empty());
    let mut back = Agent::restore(v.clone(), snap.clone()).expect("restore");
    assert_eq!(back.snapshot(), snap);
    let mut orig = a.clone();
    for b in [&mut orig, &mut back] {
        feed(b, &mut Rng::new(8, 8), 1);
        b.handle_tick();
    }
    let (ma, mb): (Vec<_>, Vec<_>) = (
        std::iter::from_fn(|| orig.poll_transmit()).collect(),
        std::iter::from_fn(|| back.poll_transmit()).collect(),
    );
    assert!(!ma.is_empty() && ma.iter().all(|m| m.sites.is_some()));
    assert_eq!(ma, mb);
    assert_eq!(orig.fused_site(), back.fused_site());
    assert_eq!(orig.snapshot(), back.snapshot());
    // The site window's blocks (SiteConfig::window_points) are state: both blocks are held.
    assert_eq!(snap.recent.len(), 2);
    // A snapshot whose push-sum mass lost its site part is refused, and so is a window block
    // with a NaN target or the wrong number of input columns.
    let mut bad = snap.clone();
    bad.push_mass.site = None;
    assert!(matches!(
        Agent::restore(v.clone(), bad),
        Err(Error::InvalidConfig(_))
    ));
    let mut bad = snap.clone();
    bad.recent[0].1[3] = f64::NAN;
    assert!(matches!(
        Agent::restore(v.clone(), bad),
        Err(Error::InvalidConfig(_))
    ));
    let mut bad = snap;
    bad.recent[1].0 = Mat::zeros(10, D + 1);
    assert!(matches!(
        Agent::restore(v, bad),
        Err(Error::InvalidConfig(_))
    ));
}

#[test]
fn push_sum_fleet_neighbours_are_free_until_mass_is_exchanged() {
    // The site part does not make a fresh agent look as if it had exchanged mass, and a tick
    // freezes the links as in the q(u)-only push-sum (fuse::pushsum::check_neighbor_change).
    let mut a = Agent::new(0, vocab(), D, ps_cfg(3)).expect("agent");
    a.set_neighbors([1]).expect("fresh");
    a.set_neighbors([2]).expect("still fresh");
    a.handle_tick();
    assert!(matches!(a.set_neighbors([1]), Err(Error::InvalidConfig(_))));
}
