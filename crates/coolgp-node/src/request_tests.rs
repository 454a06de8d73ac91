//! A trial kernel's answers against the agent's after it sets the kernel, and hostile trial
//! kernels refused (docs/LOCAL.md §12c, docs/NODE.md §13 "Its family").

use std::sync::Arc;

use coolgp::faer::Mat;
use coolgp::local::calibrate::offered_rows;
use coolgp::local::{LocalAnswer, LocalConfig, LocalFit, ResidualFamily};
use coolgp::{Agent, AgentConfig, View, Vocabulary};

use super::*;
use crate::query::{predict, QueryModel};
use crate::row_auth::RowPolicy;
use crate::status::{AnswerParts, PredictReply};

/// Rows of the memory's field: `y = sin(2 x0) + 0.3 x1`, inputs in [−2, 2].
fn rows(n: usize, shift: f64) -> (Mat<f64>, Vec<f64>) {
    let x = Mat::from_fn(n, 2, |i, j| {
        (((i * 7 + j * 3) as f64 + shift) * 0.37).sin() * 2.0
    });
    let y = (0..n)
        .map(|i| (2.0 * x[(i, 0)]).sin() + 0.3 * x[(i, 1)])
        .collect();
    (x, y)
}

/// A node's query model: an agent of two inputs with a memory of 30 rows (the fleet fits its
/// learned kernel, so it holds its initial one), or with the memory off.
fn query_model(memory: usize) -> QueryModel {
    let vocab = Arc::new(Vocabulary::default_design(6, 2, 0).expect("vocab"));
    let config = AgentConfig {
        local: LocalConfig {
            capacity: memory,
            fit: LocalFit::Fleet,
            ..LocalConfig::default()
        },
        ..AgentConfig::default()
    };
    let mut agent = Agent::new(1, vocab, 2, config).expect("agent");
    for b in 0..4 {
        let (x, y) = rows(10, 10.0 * b as f64);
        agent.handle_block(x.as_ref(), &y).expect("block");
        agent.handle_tick();
    }
    QueryModel {
        agent,
        inputs: vec!["a".into(), "b".into()],
        scaler: None,
        key: "coolgp/f/1/predict".into(),
        id: 1,
        rows: RowPolicy::Anyone,
    }
}

/// The sum's `2d + 4` parameters, unlike the initial squared exponential.
const SUM: [f64; 8] = [-0.5, -2.0, -1.0, 0.2, -1.5, -0.7, 1.0, 1.5];

/// The reply to `req`, which must be answered.
fn ask(model: &QueryModel, req: &PredictRequest) -> PredictReply {
    let body = serde_json::to_vec(req).expect("json");
    predict(model, &body, None)
        .expect("answered")
        .expect("a reply")
}

/// The reply's answers (with their parts).
fn answers(reply: &PredictReply, n: usize) -> Vec<LocalAnswer> {
    let parts = reply.parts.as_ref().expect("parts");
    parts.to_answers(n).expect("answers")
}

/// Every part of every answer of `a` within 1e-12 of `b`'s (relative to 1 + |b|).
fn close(a: &[LocalAnswer], b: &[LocalAnswer]) -> bool {
    // The parts as the reply carries them, column by column.
    let flat = |a: &[LocalAnswer]| -> Vec<f64> {
        let v = serde_json::to_value(AnswerParts::from_answers(a)).expect("json");
        let columns = v
            .as_object()
            .map(|o| o.values().cloned().collect::<Vec<_>>());
        let values = columns
            .unwrap_or_default()
            .into_iter()
            .flat_map(|c| match c {
                serde_json::Value::Array(v) => v,
                _ => Vec::new(),
            });
        values.filter_map(|x| x.as_f64()).collect()
    };
    let (a, b) = (flat(a), flat(b));
    !a.is_empty()
        && a.len() == b.len()
        && a.iter()
            .zip(&b)
            .all(|(p, q)| (p - q).abs() <= 1e-12 * (1.0 + q.abs()))
}

#[test]
fn a_trial_kernel_answers_as_the_agent_that_set_it_and_changes_nothing() {
    let model = query_model(30);
    let own = model.agent.local();
    assert_eq!(own.len(), 30);
    let (kernel, version) = (own.kernel().clone(), own.version());
    let factor = own.factor().expect("the memory is factored");
    let mut set = model.agent.clone();
    set.set_local_kernel(ResidualFamily::Sum, &SUM)
        .expect("set");
    let trial = Some(TrialKernel::new(ResidualFamily::Sum, &SUM));
    // Answers at rows.
    let (x, _) = rows(7, 100.0);
    let at = PredictRequest {
        x: (0..7).map(|i| vec![x[(i, 0)], x[(i, 1)]]).collect(),
        parts: true,
        ..PredictRequest::default()
    };
    let under = ask(
        &model,
        &PredictRequest {
            trial: trial.clone(),
            ..at.clone()
        },
    );
    let want = set.local_answers(x.as_ref(), View::Fused).expect("answers");
    assert!(close(&answers(&under, 7), &want));
    let plain = answers(&ask(&model, &at), 7);
    assert!(
        !close(&plain, &want),
        "the trial kernel changed the answers"
    );
    // Leave-one-out answers at the offered rows.
    let held = PredictRequest {
        held_out: Some(10),
        parts: true,
        trial,
        ..PredictRequest::default()
    };
    let reply = ask(&model, &held);
    let h = set
        .local_held_out(&offered_rows(30, 10), View::Fused)
        .expect("held out");
    assert!(close(&answers(&reply, 10), &h.answers));
    assert_eq!(reply.held_out.expect("rows").y, h.y);
    // The agent's own kernel, rows and factor are as they were.
    let own = model.agent.local();
    assert_eq!((own.kernel(), own.version()), (&kernel, version));
    assert!(Arc::ptr_eq(&factor, &own.factor().expect("factor")));
}

#[test]
fn hostile_trial_kernels_are_refused_naming_what_is_wrong() {
    let model = query_model(30);
    let version = model.agent.local().version();
    let refused = |trial: TrialKernel, extra: &dyn Fn(&mut PredictRequest)| {
        let mut req = PredictRequest {
            x: vec![vec![0.0, 0.0]],
            trial: Some(trial),
            ..PredictRequest::default()
        };
        extra(&mut req);
        let body = serde_json::to_vec(&req).expect("json");
        predict(&model, &body, None).expect_err("refused")
    };
    let none = |_: &mut PredictRequest| {};
    let named = |family: &str, params: &[f64]| TrialKernel {
        family: family.into(),
        params: params.to_vec(),
    };
    let e = refused(named("rbf", &[0.0; 4]), &none);
    assert!(e.contains("unknown family 'rbf': use se, matern32"), "{e}");
    let e = refused(named("sum", &[0.0; 4]), &none);
    assert!(
        e.contains("4 parameters for family sum over 2 inputs, expected 8"),
        "{e}"
    );
    let e = refused(named("se", &[0.0, 0.0, 13.0, 0.0]), &none);
    assert!(
        e.contains("log parameter 2 = 13 is outside [-12, 12]"),
        "{e}"
    );
    let e = refused(named("se", &[0.0; 4]), &|r| r.fit_sample = Some(3));
    assert!(e.contains("not to fit_sample or near"), "{e}");
    // JSON carries no NaN or infinity: checked on the type.
    let nan = named("se", &[0.0, f64::NAN, 0.0, 0.0]);
    let e = nan.checked(&model.agent).expect_err("NaN").to_string();
    assert!(e.contains("parameter 1 is not finite"), "{e}");
    let inf = named("matern32", &[0.0, 0.0, 0.0, f64::NEG_INFINITY]);
    assert!(matches!(
        inf.checked(&model.agent),
        Err(TrialKernelError::NonFinite { index: 3, .. })
    ));
    assert_eq!(model.agent.local().version(), version, "nothing changed");
    // A node without a memory has no kernel to try.
    let off = query_model(0);
    let e = named("se", &[0.0; 4]).applied(&off.agent).err();
    assert_eq!(e, Some(TrialKernelError::NotLearned));
    // Backward compatible: a request without the field parses, and one without a trial does
    // not write it.
    let old: PredictRequest = serde_json::from_str(r#"{"x": [[1, 2]]}"#).expect("parses");
    assert_eq!(old.trial, None);
    let json = serde_json::to_string(&old).expect("json");
    assert!(!json.contains("trial"), "{json}");
}
