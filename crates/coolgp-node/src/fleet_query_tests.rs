//! Tests of [`super`]: replies refused with a reason, the rules' calibration.
use super::*;
use coolgp::local::calibrate::variance_scale;

fn answer(mean: f64, var: f64) -> LocalAnswer {
    LocalAnswer {
        global_mean: mean,
        global_var: var,
        residual_mean: 0.0,
        residual_var: 0.0,
        residual_prior: 0.0,
        noise_var: 0.1,
    }
}

#[test]
fn malformed_replies_are_refused_with_a_reason() {
    let good = PredictReply {
        mean: vec![1.0],
        var_f: vec![0.5],
        var_y: vec![0.6],
        parts: Some(AnswerParts::from_answers(&[answer(1.0, 0.5)])),
        held_out: None,
        fit_sample: None,
    };
    let bytes = serde_json::to_vec(&good).expect("json");
    assert_eq!(
        parse_reply(&bytes, Some(1)),
        Ok((vec![answer(1.0, 0.5)], None))
    );
    assert!(parse_reply(&bytes, Some(2))
        .unwrap_err()
        .contains("1 values for 2 points"));
    assert!(parse_reply(&bytes, None)
        .unwrap_err()
        .contains("no held-out rows"));
    assert!(parse_reply(b"{\"mean\": [1]}", Some(1))
        .unwrap_err()
        .contains("not a prediction document"));
    let rows = OfferedRows {
        columns: vec!["a".into(), "b".into()],
        x: vec![vec![0.5, 1.5]],
        y: vec![2.0],
    };
    let offered = PredictReply {
        held_out: Some(rows.clone()),
        ..good.clone()
    };
    let bytes = serde_json::to_vec(&offered).expect("json");
    assert_eq!(
        parse_reply(&bytes, None),
        Ok((vec![answer(1.0, 0.5)], Some(rows.clone())))
    );
    for (bad, why) in [
        (vec![vec![0.5]], "has 1 values for 2 columns"),
        (
            vec![vec![0.5, 1.5], vec![1.0, 1.0]],
            "2 held-out rows for 1 targets",
        ),
    ] {
        let reply = PredictReply {
            held_out: Some(OfferedRows {
                x: bad,
                ..rows.clone()
            }),
            ..good.clone()
        };
        let bytes = serde_json::to_vec(&reply).expect("json");
        assert!(
            parse_reply(&bytes, None).unwrap_err().contains(why),
            "{why}"
        );
    }
    let bare = PredictReply {
        parts: None,
        ..good
    };
    let bytes = serde_json::to_vec(&bare).expect("json");
    assert!(parse_reply(&bytes, Some(1))
        .unwrap_err()
        .contains("no answer parts"));
}

#[test]
fn the_calibration_replaces_each_owner_s_answer_by_its_leave_one_out_answer() {
    // Agents 1 and 4 offer 12 rows each; agents 1, 4 and 6 answer at the 24 stacked rows.
    // Under min-variance the owner's leave-one-out answer (var 0.5) wins at its rows; had
    // its own answer there (mean 100) been used, agent 6's (var 1) would.
    let y: Vec<f64> = (0..24).map(|j| 0.1 * j as f64 - 1.0).collect();
    let mut held = FleetAnswers::default();
    for (k, id) in [1u64, 4].into_iter().enumerate() {
        let ys = y[12 * k..12 * (k + 1)].to_vec();
        held.answers.insert(id, vec![answer(0.0, 0.5); 12]);
        held.held_out.insert(
            id,
            OfferedRows {
                columns: vec!["a".into()],
                x: ys.iter().map(|v| vec![*v]).collect(),
                y: ys,
            },
        );
    }
    let (columns, x, warnings) = held.stacked_rows();
    assert_eq!(
        (columns, x.len(), warnings.len()),
        (vec!["a".to_string()], 24, 0)
    );
    let mut at = FleetAnswers::default();
    at.answers.insert(1, vec![answer(100.0, 2.0); 24]);
    at.answers.insert(4, vec![answer(100.0, 2.0); 24]);
    at.answers.insert(6, vec![answer(0.0, 1.0); 24]);
    let want: Vec<f64> = y.iter().map(|v| v / 0.6f64.sqrt()).collect();
    let cal = calibration(&[FleetRule::MinVariance], &held, &at);
    assert_eq!(cal.len(), 1);
    assert_eq!(Some(cal[0].scale), variance_scale(&want));
    assert!(variance_scale(&want).is_some());
    // No residual part in these answers: nothing to weigh.
    assert_eq!(cal[0].weight, 1.0);
}

#[test]
fn the_fleet_answer_combines_the_agents_answers_point_by_point() {
    let mut f = FleetAnswers::default();
    f.answers
        .insert(2, vec![answer(1.0, 0.5), answer(2.0, 0.1)]);
    f.answers
        .insert(7, vec![answer(3.0, 0.2), answer(4.0, 0.3)]);
    let c = f.combined(FleetRule::MinVariance, 2).expect("answers");
    assert_eq!(c, vec![answer(3.0, 0.2), answer(2.0, 0.1)]);
    assert_eq!(f.who(), vec![2, 7]);
    assert_eq!(
        FleetAnswers::default().combined(FleetRule::MinVariance, 1),
        None
    );
}
