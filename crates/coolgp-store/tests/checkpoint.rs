//! The checkpoint format: every field of the agent survives a write/read bit for bit in every
//! update mode and fusion rule, the restored agent behaves identically, and any corruption is
//! detected by the checksum. (The node's state directory, newest and previous file, is tested
//! in coolgp-node.)

use std::sync::Arc;

use coolgp::faer::Mat;
use coolgp::learn::IsNormalization;
use coolgp::protocol::memory;
use coolgp::protocol::AgentSnapshot;
use coolgp::{Agent, AgentConfig, FusionRule, UpdateMode, View, Vocabulary};
use coolgp_store::checkpoint::{self, ModelIdentity, NodeMeta, StreamPos};

fn block(seed: usize, n: usize, d: usize) -> (Mat<f64>, Vec<f64>) {
    let x = Mat::from_fn(n, d, |i, j| {
        ((seed * 31 + i * 7 + j * 3) as f64 * 0.37).sin() * 1.5
    });
    let y = (0..n)
        .map(|i| x[(i, 0)].sin() + 0.3 * x[(i, d - 1)])
        .collect();
    (x, y)
}

fn meta(vocab: &Vocabulary, id: u64) -> NodeMeta {
    NodeMeta {
        model: ModelIdentity {
            fleet: "f".into(),
            id,
            fingerprint: vocab.fingerprint().to_string(),
            m: vocab.m(),
            d_latent: vocab.d_latent(),
            inputs: vec!["a".into(), "b".into(), "c".into()],
            target: "y".into(),
        },
        stream: StreamPos {
            source: "data.csv".into(),
            offset: 1234,
            rows: 40,
            rows_skipped: 1,
            ended: false,
        },
        blocks: 0,
        points: 0,
        round: 0,
        written_unix_ms: 0,
        agent: serde_json::from_str(
            r#"{"n_own":0,"blocks":0,"version":0,"round":0,"neighbors":[],"last_round":{},
            "adam_t":0,"mode":"","normalization":null,"fusion":"","learn":true,"seed":0,
            "cache_points":0,"cache_len":0,"inbox":[],"inbox_shares":[],"push_received":[]}"#,
        )
        .expect("agent meta"),
    }
}

/// Three agents on a path, a few blocks and rounds each, so that every field is non-trivial.
fn trained(cfg: AgentConfig, vocab: &Arc<Vocabulary>) -> Agent {
    let d = 3;
    let mut agents: Vec<Agent> = (0..3)
        .map(|i| {
            Agent::new(
                i,
                vocab.clone(),
                d,
                AgentConfig {
                    seed: i,
                    ..cfg.clone()
                },
            )
            .expect("agent")
        })
        .collect();
    agents[0].set_neighbors([1]).expect("neighbours");
    agents[1].set_neighbors([0, 2]).expect("neighbours");
    agents[2].set_neighbors([1]).expect("neighbours");
    for r in 0..4 {
        for (i, a) in agents.iter_mut().enumerate() {
            let (x, y) = block(r * 3 + i, 7, d);
            a.handle_block(x.as_ref(), &y).expect("block");
            a.handle_tick();
        }
        memory::deliver_all(&mut agents).expect("valid");
    }
    agents.swap_remove(1)
}

fn round_trip(cfg: AgentConfig) {
    round_trip_as(cfg, false);
}

/// [`round_trip`] of an agent that withholds its data (`withheld`, issue 29) or not.
fn round_trip_as(cfg: AgentConfig, withheld: bool) {
    let vocab = Arc::new(Vocabulary::default_design(8, 2, 3).expect("vocab"));
    let mut agent = trained(cfg, &vocab);
    agent.set_withheld(withheld);
    let mut m = meta(&vocab, agent.id());
    let bytes = checkpoint::to_bytes(&agent, &mut m).expect("serialize");
    let cp = checkpoint::from_bytes("mem".as_ref(), &bytes, &vocab, 3).expect("load");
    let want: AgentSnapshot = agent.snapshot();
    assert_eq!(cp.snapshot, want, "snapshot differs after the round trip");
    assert_eq!(cp.meta, m);
    // The restored agent behaves bit-identically from here on.
    let mut a = agent.clone();
    let mut b = Agent::restore(vocab.clone(), cp.snapshot).expect("restore");
    for k in 0..3 {
        let (x, y) = block(100 + k, 5, 3);
        a.handle_block(x.as_ref(), &y).expect("block");
        b.handle_block(x.as_ref(), &y).expect("block");
        a.handle_tick();
        b.handle_tick();
        // Every message, in order: an outbox that is longer or shorter is a difference too.
        let ma: Vec<_> = std::iter::from_fn(|| a.poll_transmit()).collect();
        let mb: Vec<_> = std::iter::from_fn(|| b.poll_transmit()).collect();
        assert!(!ma.is_empty(), "the agent has neighbours: a tick sends");
        assert_eq!(ma, mb);
    }
    let (x, _) = block(7, 4, 3);
    assert_eq!(
        a.predict(x.as_ref(), View::Fused).expect("p"),
        b.predict(x.as_ref(), View::Fused).expect("p")
    );
    assert_eq!(a.snapshot(), b.snapshot());
    // Any flipped byte is detected.
    for pos in [9, bytes.len() / 2, bytes.len() - 3] {
        let mut bad = bytes.clone();
        bad[pos] ^= 0x40;
        assert!(
            checkpoint::from_bytes("mem".as_ref(), &bad, &vocab, 3).is_err(),
            "corruption at {pos} not detected"
        );
    }
    assert!(checkpoint::from_bytes("mem".as_ref(), &bytes[..bytes.len() - 8], &vocab, 3).is_err());
    // Another vocabulary is refused.
    let other = Vocabulary::default_design(8, 2, 4).expect("vocab");
    assert!(checkpoint::from_bytes("mem".as_ref(), &bytes, &other, 3).is_err());
}

#[test]
fn frozen_tree() {
    round_trip(AgentConfig::default());
}

#[test]
fn robust_frozen_tree_keeps_its_likelihood_and_old_files_read_gaussian() {
    // Issue 29 item 4: the likelihood is part of the agent's settings in the metadata.
    let robust = coolgp::learn::Likelihood::Robust { c: 2.5 };
    round_trip(AgentConfig {
        likelihood: robust,
        ..AgentConfig::default()
    });
    let vocab = Arc::new(Vocabulary::default_design(8, 2, 3).expect("vocab"));
    let agent = trained(
        AgentConfig {
            likelihood: robust,
            ..AgentConfig::default()
        },
        &vocab,
    );
    let mut m = meta(&vocab, agent.id());
    let bytes = checkpoint::to_bytes(&agent, &mut m).expect("serialize");
    let cp = checkpoint::from_bytes("mem".as_ref(), &bytes, &vocab, 3).expect("load");
    assert_eq!(cp.snapshot.config.likelihood, robust);
    assert_eq!(
        (cp.meta.agent.likelihood.as_deref(), cp.meta.agent.robust_c),
        (Some("robust"), Some(2.5))
    );
    // A checkpoint written before the choice existed restores Gaussian.
    let old = include_bytes!("data/checkpoint_v1.safetensors");
    let v1 = Arc::new(Vocabulary::default_design(4, 2, 0).expect("vocab"));
    let cp = checkpoint::from_bytes("v1".as_ref(), old, &v1, 2).expect("a v1 file reads");
    assert_eq!(
        cp.snapshot.config.likelihood,
        coolgp::learn::Likelihood::Gaussian
    );
}

#[test]
fn importance_tree() {
    round_trip(AgentConfig {
        mode: UpdateMode::Importance {
            samples: 4,
            normalization: IsNormalization::SelfNormalized,
        },
        ..AgentConfig::default()
    });
}

#[test]
fn exact_push_sum() {
    round_trip(AgentConfig {
        mode: UpdateMode::Exact,
        fusion: FusionRule::PushSum {
            agents: 3.0,
            weight: 1.0,
        },
        ..AgentConfig::default()
    });
}

#[test]
fn fleet_push_sum() {
    // The site parts of the push-sum masses (spec §14 under push-sum) are stored and restored.
    round_trip(AgentConfig {
        projection: coolgp::ProjectionMode::Fleet,
        fusion: FusionRule::PushSum {
            agents: 3.0,
            weight: 1.0,
        },
        ..AgentConfig::default()
    });
}

#[test]
fn a_withheld_push_sum_agent_round_trips_withheld() {
    // Under push-sum a withheld agent's mass lacks its own data: the flag must come back.
    round_trip_as(
        AgentConfig {
            projection: coolgp::ProjectionMode::Fleet,
            fusion: FusionRule::PushSum {
                agents: 3.0,
                weight: 1.0,
            },
            ..AgentConfig::default()
        },
        true,
    );
}

#[test]
fn fleet_stream_memory() {
    // SiteMemory::Stream's frozen terms and last window term are node state
    // (`site/frozen/…`, `site/window_term/…`, metadata `site_memory`, `site_window_term_points`).
    round_trip(AgentConfig {
        projection: coolgp::ProjectionMode::Fleet,
        site: coolgp::learn::SiteConfig {
            memory: coolgp::learn::SiteMemory::Stream,
            window_points: 8,
            ..coolgp::learn::SiteConfig::default()
        },
        ..AgentConfig::default()
    });
}

#[test]
fn a_fleet_checkpoint_keeps_the_site_clock_and_older_metadata_still_parses() {
    // The fleet damping's clock (SiteConfig::fleet_damping) is node state: it is written and
    // read back; metadata written before it existed parses with neither field (restored with
    // ρ_f = 0, the rule such a checkpoint was written under).
    let vocab = Arc::new(Vocabulary::default_design(8, 2, 3).expect("vocab"));
    let cfg = AgentConfig {
        projection: coolgp::ProjectionMode::Fleet,
        ..AgentConfig::default()
    };
    let agent = trained(cfg, &vocab);
    let mut m = meta(&vocab, agent.id());
    let bytes = checkpoint::to_bytes(&agent, &mut m).expect("serialize");
    let clock = agent.snapshot().site_clock;
    assert!(clock > 0.0, "the agent took site steps: {clock}");
    assert_eq!(m.agent.site_clock, Some(clock));
    assert_eq!(
        m.agent.site_fleet_damping,
        Some(coolgp::learn::SiteConfig::default().fleet_damping)
    );
    let cp = checkpoint::from_bytes("mem".as_ref(), &bytes, &vocab, 3).expect("load");
    assert_eq!(cp.snapshot.site_clock, clock);
    let mut old = serde_json::to_value(&m.agent).expect("json");
    let obj = old.as_object_mut().expect("object");
    assert!(obj.remove("site_clock").is_some() && obj.remove("site_fleet_damping").is_some());
    // Written before the site memory existed (the decoder restores it as `recent`, the rule
    // it ran; today's default is `stream`).
    assert_eq!(obj.remove("site_memory"), Some(serde_json::json!("stream")));
    let parsed: checkpoint::AgentMeta = serde_json::from_value(old).expect("older metadata");
    assert_eq!((parsed.site_clock, parsed.site_fleet_damping), (None, None));
    assert_eq!(parsed.site_memory, None);
}

/// An agent with a local memory of `capacity` rows (issue 19), trained as [`trained`].
fn with_memory(capacity: usize, policy: coolgp::local::MemoryPolicy) -> (Arc<Vocabulary>, Agent) {
    let vocab = Arc::new(Vocabulary::default_design(8, 2, 3).expect("vocab"));
    let cfg = AgentConfig {
        local: coolgp::local::LocalConfig {
            capacity,
            policy,
            ..coolgp::local::LocalConfig::default()
        },
        ..AgentConfig::default()
    };
    let agent = trained(cfg, &vocab);
    (vocab, agent)
}

#[test]
fn local_memory_round_trips_and_answers_the_same() {
    // Issue 19: the memory (rows, targets, the policy's counter, the residual kernel) is node
    // state: written as `local/*` and metadata `local`, restored bit for bit.
    for policy in coolgp::local::MemoryPolicy::ALL {
        round_trip(AgentConfig {
            local: coolgp::local::LocalConfig {
                capacity: 12,
                policy,
                ..coolgp::local::LocalConfig::default()
            },
            ..AgentConfig::default()
        });
    }
    let (vocab, agent) = with_memory(12, coolgp::local::MemoryPolicy::Recent);
    assert_eq!(agent.local_points(), 12);
    let mut m = meta(&vocab, agent.id());
    let bytes = checkpoint::to_bytes(&agent, &mut m).expect("serialize");
    let local = m.agent.local.clone().expect("local metadata");
    assert_eq!(
        (local.capacity, local.rows, local.policy.as_str()),
        (12, 12, "recent")
    );
    let cp = checkpoint::from_bytes("mem".as_ref(), &bytes, &vocab, 3).expect("load");
    assert_eq!(cp.snapshot.config.local, agent.config().local);
    let b = Agent::restore(vocab.clone(), cp.snapshot).expect("restore");
    let (x, _) = block(11, 5, 3);
    let want = agent
        .local_answers(x.as_ref(), View::Fused)
        .expect("answers");
    assert_eq!(
        b.local_answers(x.as_ref(), View::Fused).expect("answers"),
        want
    );
    assert!(
        want.iter().any(|a| a.residual_mean != 0.0),
        "the memory corrects"
    );
}

/// `bytes` with tensor `name` replaced by `(shape, values)`, re-signed (the checksum of the
/// module docs), as a writer that got the memory wrong would have written it.
fn rewritten(bytes: &[u8], name: &str, shape: Vec<usize>, values: &[f64]) -> Vec<u8> {
    rebuilt(bytes, |tensors, _| {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        tensors.insert(name.to_owned(), (shape, data));
    })
}

/// A file's tensors by name, as [`rebuilt`] edits them: `(shape, data)`.
type Tensors = std::collections::BTreeMap<String, (Vec<usize>, Vec<u8>)>;

/// `bytes` with its tensors and its `coolgp` metadata JSON edited by `edit`, re-signed (the
/// checksum of the module docs).
fn rebuilt(bytes: &[u8], edit: impl FnOnce(&mut Tensors, &mut serde_json::Value)) -> Vec<u8> {
    use safetensors::tensor::{Dtype, TensorView};
    use sha2::{Digest, Sha256};
    let (_, md) = safetensors::SafeTensors::read_metadata(bytes).expect("metadata");
    let mut info = md.metadata().clone().expect("metadata map");
    let st = safetensors::SafeTensors::deserialize(bytes).expect("tensors");
    let mut tensors: Tensors = st
        .tensors()
        .into_iter()
        .map(|(k, v)| (k, (v.shape().to_vec(), v.data().to_vec())))
        .collect();
    let mut json: serde_json::Value = serde_json::from_str(&info["coolgp"]).expect("json");
    edit(&mut tensors, &mut json);
    info.insert("coolgp".into(), json.to_string());
    let mut h = Sha256::new();
    for (k, (shape, data)) in &tensors {
        h.update(k.as_bytes());
        h.update([0u8]);
        for s in shape {
            h.update((*s as u64).to_le_bytes());
        }
        h.update(data);
    }
    h.update(info["coolgp"].as_bytes());
    let sum: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    info.insert("sha256".into(), sum);
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(k, (s, d))| {
            (
                k.clone(),
                TensorView::new(Dtype::F64, s.clone(), d).expect("view"),
            )
        })
        .collect();
    safetensors::serialize(views, Some(info)).expect("serialize")
}

#[test]
fn the_kernel_family_round_trips_and_older_checkpoints_restore_as_the_squared_exponential() {
    // Issue 28, docs/LOCAL.md §12a: the learned kernel's family is node state (metadata
    // `local.family`, absent for the squared exponential); a checkpoint without it (every
    // one written before the families) restores as the squared exponential, and a family
    // this build does not know is refused by name.
    use coolgp::local::ResidualFamily;
    let (x, _) = block(11, 5, 3);
    for family in ResidualFamily::ALL {
        let (vocab, mut agent) = with_memory(12, coolgp::local::MemoryPolicy::Recent);
        let mut p = agent.local().kernel().params().to_vec();
        if family == ResidualFamily::Sum {
            // The sum's 2d + 4: the short part's, then σ_o, σ_l and longer lengthscales.
            let long: Vec<f64> = p[2..].iter().map(|l| l + 1.0).collect();
            p.extend([-0.5, 0.1]);
            p.extend(long);
        }
        agent.set_local_kernel(family, &p).expect("kernel");
        let mut m = meta(&vocab, agent.id());
        let bytes = checkpoint::to_bytes(&agent, &mut m).expect("serialize");
        let written = m.agent.local.clone().expect("local metadata").family;
        let se = family == ResidualFamily::SquaredExponential;
        assert_eq!(written, (!se).then(|| family.name().to_owned()));
        let cp = checkpoint::from_bytes("mem".as_ref(), &bytes, &vocab, 3).expect("load");
        assert_eq!(cp.snapshot.local.as_ref().map(|l| l.family), Some(family));
        let b = Agent::restore(vocab.clone(), cp.snapshot).expect("restore");
        assert_eq!(b.local().kernel().family(), family);
        let want = agent.local_answers(x.as_ref(), View::Fused).expect("a");
        assert_eq!(
            b.local_answers(x.as_ref(), View::Fused).expect("b"),
            want,
            "{family:?}"
        );
        if se {
            continue;
        }
        // The same file as a build before the families wrote it: no `family`.
        let local = |j: &mut serde_json::Value| j["agent"]["local"].take();
        let old = rebuilt(&bytes, |_, j| {
            let mut l = local(j);
            assert!(l.as_object_mut().and_then(|o| o.remove("family")).is_some());
            j["agent"]["local"] = l;
        });
        let cp = checkpoint::from_bytes("old".as_ref(), &old, &vocab, 3).expect("old file");
        if family == ResidualFamily::Sum {
            // No older build wrote a sum; its 2d + 4 parameters without the family are
            // refused by length, not misread.
            let e = Agent::restore(vocab.clone(), cp.snapshot).map(|_| ());
            let e = e.expect_err("a sum's parameters as a squared exponential's");
            assert!(e.to_string().contains("parameters"), "{e}");
            continue;
        }
        let b = Agent::restore(vocab.clone(), cp.snapshot).expect("restore");
        assert_eq!(
            b.local().kernel().family(),
            ResidualFamily::SquaredExponential
        );
        assert_eq!(b.local().kernel().params(), &p[..]);
        let unknown = rebuilt(&bytes, |_, j| {
            j["agent"]["local"]["family"] = serde_json::json!("matern12");
        });
        let e = checkpoint::from_bytes("new".as_ref(), &unknown, &vocab, 3)
            .map(|_| ())
            .expect_err("unknown family")
            .to_string();
        assert!(
            e.contains("unknown residual kernel family 'matern12'"),
            "{e}"
        );
    }
}

#[test]
fn a_memory_row_of_the_wrong_width_or_not_finite_is_refused_by_name() {
    let (vocab, agent) = with_memory(6, coolgp::local::MemoryPolicy::Recent);
    let mut m = meta(&vocab, agent.id());
    let bytes = checkpoint::to_bytes(&agent, &mut m).expect("serialize");
    let snap = agent.snapshot();
    let x = &snap.local.as_ref().expect("memory").x;
    let n = x.nrows();
    let load = |b: &[u8]| {
        checkpoint::from_bytes("st/checkpoint.safetensors".as_ref(), b, &vocab, 3)
            .map(|_| ())
            .expect_err("refused")
            .to_string()
    };
    // Rows of 4 inputs for an agent of 3.
    let wide = rewritten(&bytes, "local/x", vec![n, 4], &vec![0.5; n * 4]);
    let e = load(&wide);
    assert!(
        e.contains("st/checkpoint.safetensors")
            && e.contains("local memory rows have shape [6, 4]")
            && e.contains("3 inputs"),
        "{e}"
    );
    // A NaN in row 2, an infinite target.
    let mut rows: Vec<f64> = (0..n)
        .flat_map(|i| (0..3).map(move |j| (i, j)))
        .map(|(i, j)| x[(i, j)])
        .collect();
    rows[2 * 3 + 1] = f64::NAN;
    let e = load(&rewritten(&bytes, "local/x", vec![n, 3], &rows));
    assert!(e.contains("local memory row 2 is not finite"), "{e}");
    let mut y = snap.local.as_ref().expect("memory").y.clone();
    y[0] = f64::INFINITY;
    let e = load(&rewritten(&bytes, "local/y", vec![n], &y));
    assert!(e.contains("local memory target 0 is not finite"), "{e}");
    // More rows than the metadata says.
    let e = load(&rewritten(
        &bytes,
        "local/x",
        vec![n + 1, 3],
        &vec![0.5; (n + 1) * 3],
    ));
    assert!(e.contains("holds 7 rows, its metadata says 6"), "{e}");
}

#[test]
fn a_version_1_checkpoint_without_memory_still_restores() {
    // `tests/data/checkpoint_v1.safetensors` was written by `coolgp node` before the local
    // memory existed (format version 1; `--id 1 --fleet old --inducing 4 --batch 3` on
    // `checkpoint_v1.csv`, stopped by SIGTERM): it restores with the memory off.
    let bytes = include_bytes!("data/checkpoint_v1.safetensors");
    let (_, md) = safetensors::SafeTensors::read_metadata(bytes).expect("metadata");
    let info = md.metadata().clone().expect("metadata map");
    assert_eq!(info["format_version"], "1");
    assert_eq!(checkpoint::FORMAT_VERSION, 2);
    let vocab = Arc::new(Vocabulary::default_design(4, 2, 0).expect("vocab"));
    let cp = checkpoint::from_bytes("v1".as_ref(), bytes, &vocab, 2).expect("a v1 file reads");
    assert_eq!((cp.meta.model.fleet.as_str(), cp.meta.points), ("old", 6));
    assert_eq!(cp.meta.agent.local, None);
    assert_eq!(cp.snapshot.local, None);
    assert_eq!(
        cp.snapshot.config.local,
        coolgp::local::LocalConfig::default()
    );
    let agent = Agent::restore(vocab, cp.snapshot).expect("restore");
    assert_eq!(agent.local_points(), 0);
    let x = Mat::from_fn(2, 2, |i, j| (i + j) as f64 * 0.3);
    let p = agent.predict(x.as_ref(), View::Fused).expect("predict");
    assert!(p.mean.iter().chain(&p.var_y).all(|v| v.is_finite()));
    // A version this build does not know is refused by name.
    let mut info2 = info.clone();
    info2.insert("format_version".into(), "3".into());
    let st = safetensors::SafeTensors::deserialize(bytes).expect("tensors");
    let newer = safetensors::serialize(st.tensors(), Some(info2)).expect("serialize");
    let e = checkpoint::from_bytes(
        "v3".as_ref(),
        &newer,
        &Vocabulary::default_design(4, 2, 0).expect("v"),
        2,
    )
    .map(|_| ())
    .expect_err("refused")
    .to_string();
    assert!(e.contains("this build reads 1 to 2"), "{e}");
}

#[test]
fn robust_fleet_exact_and_importance_agents_round_trip() {
    // Issue 29 item 4 (docs/ROBUST.md §2): the rows' weights of the robust likelihood are
    // node state wherever a cache is re-evaluated later: the fleet projection's site window
    // (`site/recent/w/<i>`, either site memory) and the exact mode's blocks (`cache/w/<i>`);
    // the importance mode folds them into its sums.
    let robust = coolgp::learn::Likelihood::Robust { c: 2.0 };
    for memory in [
        coolgp::learn::SiteMemory::Recent,
        coolgp::learn::SiteMemory::Stream,
    ] {
        round_trip(AgentConfig {
            projection: coolgp::ProjectionMode::Fleet,
            site: coolgp::learn::SiteConfig {
                memory,
                window_points: 15,
                ..coolgp::learn::SiteConfig::default()
            },
            likelihood: robust,
            ..AgentConfig::default()
        });
    }
    for mode in [
        UpdateMode::Exact,
        UpdateMode::Importance {
            samples: 4,
            normalization: IsNormalization::SelfNormalized,
        },
    ] {
        round_trip(AgentConfig {
            mode,
            likelihood: robust,
            ..AgentConfig::default()
        });
    }
}

/// Three robust fleet-projection agents on a path, `blocks` blocks each from `from`, with
/// every 9th row 20 too high, a fusion round after each block.
fn robust_stream(agents: &mut [Agent], from: usize, blocks: usize) {
    for b in from..from + blocks {
        for (i, a) in agents.iter_mut().enumerate() {
            let (x, mut y) = block(b * 3 + i, 6, 3);
            for (r, v) in y.iter_mut().enumerate() {
                if (b * 6 + r) % 9 == 4 {
                    *v += 20.0;
                }
            }
            a.handle_block(x.as_ref(), &y).expect("block");
        }
        memory::round(agents).expect("valid");
    }
}

#[test]
fn a_robust_fleet_agent_resumes_from_its_checkpoint_bit_for_bit() {
    // Issue 29 item 4: the checkpoint keeps the site window's weights, so a node stopped
    // mid-stream and restored from the real file goes on exactly as one never stopped: after
    // the same remaining blocks and rounds, the same q(u) and q(W) bit for bit. A file without
    // the weights (written before they were stored) still restores, with the weights taken
    // again against the restored predictive (close to, not equal to, the kept ones).
    let vocab = Arc::new(Vocabulary::default_design(8, 2, 3).expect("vocab"));
    let cfg = AgentConfig {
        projection: coolgp::ProjectionMode::Fleet,
        site: coolgp::learn::SiteConfig {
            window_points: 18,
            ..coolgp::learn::SiteConfig::default()
        },
        likelihood: coolgp::learn::Likelihood::Robust { c: 2.0 },
        ..AgentConfig::default()
    };
    let mut fleet: Vec<Agent> = (0..3)
        .map(|i| Agent::new(i, vocab.clone(), 3, cfg.clone()).expect("agent"))
        .collect();
    for (i, a) in fleet.iter_mut().enumerate() {
        let ns = [i.checked_sub(1), (i < 2).then_some(i + 1)];
        a.set_neighbors(ns.into_iter().flatten().map(|j| j as u64))
            .expect("neighbours");
    }
    robust_stream(&mut fleet, 0, 6);
    let mut m = meta(&vocab, 1);
    let bytes = checkpoint::to_bytes(&fleet[1], &mut m).expect("serialize");
    assert!(m.agent.site_recent_weights && m.agent.site_recent > 1);
    let stored = fleet[1].snapshot().recent_weights.expect("weights");
    assert!(
        stored.iter().flatten().flatten().any(|&w| w < 0.3),
        "an outlier in the window"
    );
    let load = |b: &[u8]| {
        let cp = checkpoint::from_bytes("mem".as_ref(), b, &vocab, 3).expect("load");
        Agent::restore(vocab.clone(), cp.snapshot).expect("restore")
    };
    let mut resumed = fleet.clone();
    resumed[1] = load(&bytes);
    // The same file as a build before the weights wrote it.
    let old = rebuilt(&bytes, |tensors, j| {
        tensors.retain(|k, _| !k.starts_with("site/recent/w/"));
        let obj = j["agent"].as_object_mut().expect("agent");
        assert_eq!(
            obj.remove("site_recent_weights"),
            Some(serde_json::json!(true))
        );
    });
    let mut retaken = fleet.clone();
    retaken[1] = load(&old);
    assert_eq!(retaken[1].own_excess(), fleet[1].own_excess());
    assert_ne!(
        retaken[1].fleet_site().recent().stacked_weights(),
        fleet[1].fleet_site().recent().stacked_weights(),
        "re-taken against the restored predictive"
    );
    for f in [&mut fleet, &mut resumed, &mut retaken] {
        robust_stream(f, 6, 4);
    }
    for (a, b) in fleet.iter().zip(&resumed) {
        assert_eq!(a.natural_params(View::Fused), b.natural_params(View::Fused));
        assert_eq!(a.natural_params(View::Own), b.natural_params(View::Own));
        assert_eq!(a.projection(), b.projection());
        assert_eq!(a.snapshot(), b.snapshot());
    }
    let (a, b) = (fleet[1].projection(), retaken[1].projection());
    let d = (a.to_flat().iter().zip(b.to_flat())).fold(0.0f64, |m, (p, q)| m.max((p - q).abs()));
    eprintln!("q(W) after the re-taken weights: max |Δθ| = {d:e}");
    assert!(
        d > 0.0,
        "the kept weights are what made the resumed agent exact"
    );
}
