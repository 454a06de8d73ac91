//! The wire codec: round trips, truncations, hostile bytes, specific errors.

use coolgp::faer::Mat;
use coolgp::fuse::Mass;
use coolgp::learn::{HyperStats, Site, Sites, UNGROUPED};
use coolgp::model::{Excess, Fingerprint};
use coolgp::protocol::codec::{
    decode, encode, encoded_len, encoded_len_push_sum, sites_bytes, HEADER_LEN, MAX_M,
};
use coolgp::protocol::{Body, Header, Message, ProjectionShare, RejectReason};
use proptest::prelude::*;

fn header() -> Header {
    Header {
        fingerprint: Fingerprint([0xab; 32]),
        sender: 3,
        receiver: 5,
        round: 17,
        version: 2,
    }
}

fn sym_excess(m: usize, vals: &[f64]) -> Excess {
    let v = |k: usize| vals[k % vals.len()];
    let mut d1 = Mat::zeros(m, m);
    let mut k = 0;
    for i in 0..m {
        for j in i..m {
            d1[(i, j)] = v(k);
            d1[(j, i)] = v(k);
            k += 1;
        }
    }
    let d2 = (0..m).map(|i| v(k + i)).collect();
    Excess { d1, d2 }
}

fn tree_msg(m: usize, proj: Option<usize>) -> Message {
    let vals: Vec<f64> = (0..37).map(|k| (k as f64 * 0.7).sin() * 10.0).collect();
    Message {
        header: header(),
        body: Body::Tree {
            excess: sym_excess(m, &vals).into(),
            points: 12.0,
        },
        projection: proj.map(|n| ProjectionShare {
            weight: 4.5,
            theta: (0..n).map(|i| i as f64).collect(),
            m1: (0..n).map(|i| -(i as f64)).collect(),
            m2: (0..n).map(|i| 0.5 * i as f64).collect(),
        }),
        sites: None,
    }
}

/// A site-only message over `n` entries (spec §14).
fn site_msg(n: usize) -> Message {
    Message {
        header: header(),
        body: Body::Site,
        projection: None,
        sites: Some(Sites::single(UNGROUPED, site(n, 0.0))),
    }
}

fn site(n: usize, shift: f64) -> Site {
    Site {
        prec: (0..n).map(|i| i as f64 + 0.5 + shift).collect(),
        shift: (0..n).map(|i| -(i as f64)).collect(),
        hyper: HyperStats::from_array([1.0, 2.0, 3.0, 4.0 + shift]),
        points: 3.0,
    }
}

/// A site-only message with the sums of projection groups 5 and 9 (spec §14 with groups).
fn grouped_msg(n: usize) -> Message {
    Message {
        sites: Some(Sites::from_pairs([(5, site(n, 1.0)), (9, site(n, 2.0))])),
        ..site_msg(n)
    }
}

fn decode_err(bytes: &[u8]) -> String {
    match decode(bytes) {
        Err(RejectReason::Decode(s)) => s,
        other => panic!("expected a decode error, got {other:?}"),
    }
}

fn finite() -> impl Strategy<Value = f64> {
    -1e6f64..1e6
}

prop_compose! {
    fn arb_header()(fp in any::<[u8; 32]>(), sender in any::<u64>(), receiver in any::<u64>(),
                    round in any::<u64>(), version in any::<u64>()) -> Header {
        Header { fingerprint: Fingerprint(fp), sender, receiver, round, version }
    }
}

prop_compose! {
    fn arb_excess()(m in 1usize..8)
        (vals in prop::collection::vec(finite(), m * (m + 1) / 2 + m), m in Just(m)) -> Excess {
        sym_excess(m, &vals)
    }
}

prop_compose! {
    fn arb_projection()(n in 0usize..10)
        (weight in finite(),
         theta in prop::collection::vec(finite(), n),
         m1 in prop::collection::vec(finite(), n),
         m2 in prop::collection::vec(finite(), n)) -> ProjectionShare {
        ProjectionShare { weight, theta, m1, m2 }
    }
}

prop_compose! {
    fn arb_site()(n in 0usize..10)
        (prec in prop::collection::vec(finite(), n),
         shift in prop::collection::vec(finite(), n),
         tail in prop::collection::vec(finite(), 5)) -> Site {
        Site { prec, shift, hyper: HyperStats::from_array([tail[0], tail[1], tail[2], tail[3]]), points: tail[4] }
    }
}

/// Site sums without groups, or of 1–3 projection groups (ids never 0).
fn arb_sites() -> impl Strategy<Value = Sites> {
    prop_oneof![
        arb_site().prop_map(|s| Sites::single(UNGROUPED, s)),
        prop::collection::btree_map(1u64.., arb_site(), 1..4).prop_map(Sites::from_pairs),
    ]
}

fn arb_body() -> impl Strategy<Value = Body> {
    prop_oneof![
        (arb_excess(), finite()).prop_map(|(excess, points)| Body::Tree {
            excess: excess.into(),
            points,
        }),
        (arb_excess(), finite(), finite()).prop_map(|(x, w, points)| Body::PushSum {
            total: Mass {
                x,
                w,
                points,
                site: None,
            }
        }),
    ]
}

prop_compose! {
    fn arb_message()(header in arb_header(), body in arb_body(),
                     projection in prop::option::of(arb_projection()),
                     sites in prop::option::of(arb_sites())) -> Message {
        Message { header, body, projection, sites }
    }
}

prop_compose! {
    fn arb_site_message()(header in arb_header(),
                          projection in prop::option::of(arb_projection()),
                          sites in arb_sites()) -> Message {
        Message { header, body: Body::Site, projection, sites: Some(sites) }
    }
}

proptest! {
    #[test]
    fn round_trip(msg in arb_message()) {
        let bytes = encode(&msg);
        let m = msg.excess().map_or(0, Excess::m);
        let n = msg.projection.as_ref().map(|p| p.theta.len());
        let site = msg.sites.as_ref().map_or(0, sites_bytes);
        let expected_len = match msg.body {
            Body::Tree { .. } => encoded_len(m, n),
            Body::PushSum { .. } => encoded_len_push_sum(m, n),
            Body::Site => unreachable!("arb_message makes q(u) bodies"),
        } + site;
        prop_assert_eq!(bytes.len(), expected_len);
        let back = decode(&bytes).expect("valid message decodes");
        prop_assert_eq!(&back, &msg);
        prop_assert_eq!(encode(&back), bytes);
    }

    #[test]
    fn site_only_round_trip(msg in arb_site_message()) {
        // Reference: spec §14 (sites travel on their own): header, projection share if any,
        // site section; nothing else.
        let bytes = encode(&msg);
        let n = msg.projection.as_ref().map_or(0, |p| 12 + 24 * p.theta.len());
        let site = msg.sites.as_ref().map_or(0, sites_bytes);
        prop_assert_eq!(bytes.len(), HEADER_LEN + n + site);
        let back = decode(&bytes).expect("valid message decodes");
        prop_assert_eq!(&back, &msg);
        prop_assert_eq!(encode(&back), bytes);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = decode(&bytes);
    }

    #[test]
    fn random_bodies_after_valid_header_never_panic(
        kind in 0u8..3, flags in 0u8..4, m in 0u32..6,
        tail in prop::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut bytes = encode(&tree_msg(1, None))[..HEADER_LEN].to_vec();
        bytes[4] = kind;
        bytes[5] = flags;
        bytes[HEADER_LEN - 4..].copy_from_slice(&m.to_le_bytes());
        bytes.extend_from_slice(&tail);
        if let Ok(msg) = decode(&bytes) {
            prop_assert_eq!(encode(&msg), bytes);
        }
    }
}

#[test]
fn every_truncation_is_rejected() {
    let push = Message {
        body: Body::PushSum {
            total: Mass {
                x: sym_excess(4, &[1.0, -2.0, 3.5]),
                w: 0.25,
                points: 9.0,
                site: None,
            },
        },
        ..tree_msg(4, Some(3))
    };
    let tree_with_site = Message {
        sites: site_msg(4).sites,
        ..tree_msg(3, Some(2))
    };
    for msg in [
        tree_msg(3, None),
        tree_msg(3, Some(2)),
        push,
        site_msg(2),
        tree_with_site,
        grouped_msg(3),
    ] {
        let bytes = encode(&msg);
        for cut in 0..bytes.len() {
            assert!(
                matches!(decode(&bytes[..cut]), Err(RejectReason::Decode(_))),
                "prefix of {cut}/{} bytes accepted",
                bytes.len()
            );
        }
        assert_eq!(decode(&bytes).as_ref(), Ok(&msg));
    }
}

#[test]
fn specific_errors() {
    let good = encode(&tree_msg(2, None));

    assert_eq!(decode_err(&[]), "truncated header");
    assert_eq!(decode_err(&good[..HEADER_LEN - 1]), "truncated header");

    let mut b = good.clone();
    b[1] = b'X';
    assert_eq!(decode_err(&b), "bad magic");
    assert_eq!(decode_err(b"XY"), "bad magic");

    let mut b = good.clone();
    b[3] = 7;
    assert_eq!(decode_err(&b), "unsupported version 7");

    let mut b = good.clone();
    b[4] = 9;
    assert_eq!(decode_err(&b), "unknown body kind 9");

    let mut b = good.clone();
    b[5] = 0x08;
    assert_eq!(decode_err(&b), "unknown flags 0x08");

    // Site flag set but no site section; a site-only body without one; with m ≠ 0.
    let mut b = good.clone();
    b[5] = 0x02;
    assert_eq!(decode_err(&b), "truncated site section: need 4 bytes");
    let site_only = encode(&site_msg(3));
    let mut b = site_only.clone();
    b[5] = 0;
    assert_eq!(decode_err(&b), "site-only body without a site section");
    let mut b = site_only.clone();
    b[HEADER_LEN - 4..HEADER_LEN].copy_from_slice(&2u32.to_le_bytes());
    assert_eq!(decode_err(&b), "site-only body with m = 2 (must be 0)");
    let mut b = site_only.clone();
    b[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&(1u32 << 21).to_le_bytes());
    assert_eq!(
        decode_err(&b),
        "site length n = 2097152 exceeds limit 1048576"
    );

    let mut b = good.clone();
    b[HEADER_LEN - 4..HEADER_LEN].copy_from_slice(&100_000u32.to_le_bytes());
    assert_eq!(decode_err(&b), "m = 100000 exceeds limit 4096");

    let mut b = good.clone();
    b.push(0);
    assert_eq!(decode_err(&b), "trailing bytes");
    let mut b = encode(&tree_msg(2, Some(1)));
    b.extend_from_slice(&[1, 2, 3]);
    assert_eq!(decode_err(&b), "trailing bytes");

    // A push-sum kind on a tree-sized body is 8 bytes short.
    let mut b = good.clone();
    b[4] = 1;
    assert!(decode_err(&b).starts_with("truncated body"));

    // Projection flag set but no share.
    let mut b = good.clone();
    b[5] = 1;
    assert!(decode_err(&b).starts_with("truncated projection share"));

    // Projection length above the limit.
    let mut b = encode(&tree_msg(2, Some(0)));
    let at = b.len() - 4;
    b[at..].copy_from_slice(&(1u32 << 21).to_le_bytes());
    assert_eq!(
        decode_err(&b),
        "projection length n = 2097152 exceeds limit 1048576"
    );

    // NaN and infinities are structure-valid: validation happens later.
    let mut msg = tree_msg(2, None);
    if let Body::Tree { excess, points } = &mut msg.body {
        let excess = std::sync::Arc::make_mut(excess);
        excess.d1[(0, 1)] = f64::NAN;
        excess.d1[(1, 0)] = f64::NAN;
        *points = f64::INFINITY;
    }
    let back = decode(&encode(&msg)).expect("NaN decodes");
    assert!(back.excess().expect("tree body").d1[(1, 0)].is_nan());
}

#[test]
fn decoded_d1_is_symmetric_even_from_asymmetric_input() {
    let mut msg = tree_msg(3, None);
    if let Body::Tree { excess, .. } = &mut msg.body {
        std::sync::Arc::make_mut(excess).d1[(2, 0)] = 1e9; // lower triangle is not sent
    }
    let back = decode(&encode(&msg)).expect("decodes");
    let d1 = &back.excess().expect("tree body").d1;
    for i in 0..3 {
        for j in 0..3 {
            assert_eq!(d1[(i, j)].to_bits(), d1[(j, i)].to_bits());
        }
    }
}

#[test]
fn huge_claim_in_short_packet_is_rejected_before_allocating() {
    // The whole body length is checked against the bytes present before the 128 MB matrix of
    // m = MAX_M is allocated: the error names the claimed and the present length (no timing:
    // the machines are shared).
    let mut b = encode(&tree_msg(1, None));
    b[HEADER_LEN - 4..HEADER_LEN].copy_from_slice(&(MAX_M as u32).to_le_bytes());
    let need = 8 * (1 + MAX_M * (MAX_M + 1) / 2 + MAX_M);
    let have = b.len() - HEADER_LEN;
    assert_eq!(
        decode_err(&b),
        format!("truncated body: need {need} bytes, have {have}")
    );
    // And a 20-byte packet.
    assert_eq!(decode_err(&b[..20]), "truncated header");
}

#[test]
fn encoded_len_matches_layout() {
    assert_eq!(HEADER_LEN, 74);
    assert_eq!(encoded_len(0, None), 74 + 8);
    assert_eq!(encoded_len(2, None), 74 + 8 * (1 + 3 + 2));
    assert_eq!(encoded_len(2, Some(5)), 74 + 8 * 6 + 12 + 8 * 15);
    assert_eq!(encoded_len_push_sum(2, None), encoded_len(2, None) + 8);
    assert_eq!(encode(&tree_msg(5, Some(4))).len(), encoded_len(5, Some(4)));
    // m = 4096 (the limit): about 67 MB per message.
    assert_eq!(
        encoded_len(MAX_M, None),
        74 + 8 * (1 + 4096 * 4097 / 2 + 4096)
    );
    assert_eq!(encoded_len(usize::MAX, None), usize::MAX);
}

#[test]
fn grouped_site_errors() {
    // Reference: codec module docs, grouped sites: G in 1..=MAX_GROUPS, ids ascending, never 0.
    let good = encode(&grouped_msg(2));
    assert_eq!(good[5], 0x04, "grouped sums use flag bit 2");
    assert_eq!(
        encode(&site_msg(2))[5],
        0x02,
        "sums without groups keep the ungrouped layout"
    );
    let g0 = HEADER_LEN; // G (u32), then the first id (u64)
    let site_len = 4 + 8 * (2 * 2 + 5);
    let id2 = g0 + 4 + 8 + site_len;
    let mut b = good.clone();
    b[5] = 0x06;
    assert_eq!(
        decode_err(&b),
        "both site flags set (ungrouped and grouped)"
    );
    let mut b = good.clone();
    b[g0..g0 + 4].copy_from_slice(&0u32.to_le_bytes());
    assert_eq!(decode_err(&b), "group count 0 not in 1..=4096");
    let mut b = good.clone();
    b[g0..g0 + 4].copy_from_slice(&5000u32.to_le_bytes());
    assert_eq!(decode_err(&b), "group count 5000 not in 1..=4096");
    let mut b = good.clone();
    b[g0 + 4..g0 + 12].copy_from_slice(&0u64.to_le_bytes());
    assert_eq!(decode_err(&b), "group id 0 in a grouped site section");
    let mut b = good.clone();
    b[id2..id2 + 8].copy_from_slice(&5u64.to_le_bytes());
    assert_eq!(decode_err(&b), "group ids not strictly ascending");
    let mut b = good.clone();
    b[g0..g0 + 4].copy_from_slice(&3u32.to_le_bytes());
    assert_eq!(decode_err(&b), "truncated group id");
    assert_eq!(decode(&good), Ok(grouped_msg(2)));
}
