use super::*;
use crate::hash::rihs01 as msg_hash;
use crate::types::lookup;

/// The hashes rosidl wrote into `share/rcl_interfaces/srv/GetParameters.json` of the
/// `ros-rcl-interfaces` 2.3.0 wheel (what rclpy's own build computed; the CI's Python step
/// checks the service hash against that file and zenoh-ros2-sdk live).
#[test]
fn hashes_equal_rosidls() {
    assert_eq!(
        rihs01(),
        "RIHS01_bf9803d5c74cf989a5de3e0c2e99444599a627c7ff75f97b8c05b01003675cbc"
    );
    assert_eq!(
        msg_hash(&REQUEST),
        "RIHS01_135a9e1c3d7cebef792f6687d7ddf99949b21a0bd9a320d863a9110a3f5cf4d6"
    );
    assert_eq!(
        msg_hash(&RESPONSE),
        "RIHS01_9fa773b46e39cc5d02db6224d8fd520bb9caeeffc2b27c96c1e59431baba9f2a"
    );
    for (name, want) in [
        (
            "rcl_interfaces/msg/ParameterValue",
            "RIHS01_115fc089a387e23c7ecd3525c9189c379109119d6ab82e8dfbde0fdf6a7f9b68",
        ),
        (
            "service_msgs/msg/ServiceEventInfo",
            "RIHS01_41bcbbe07a75c9b52bc96bfd5c24d7f0fc0a08c0cb7921b3373c5732345a6f45",
        ),
    ] {
        assert_eq!(msg_hash(lookup(name).expect("known")), want, "{name}");
    }
    assert_eq!(dds_name(), "rcl_interfaces::srv::dds_::GetParameters_");
    assert_eq!(
        REQUEST.dds_name(),
        "rcl_interfaces::srv::dds_::GetParameters_Request_"
    );
}

/// The service's keys: Jazzy's with the RIHS01 hash; Humble's rmw_zenoh (branch `humble`,
/// 0.1.9: `rmw_service_data.cpp` and `rmw_client_data.cpp` pass `"TypeHashNotSupported"` to
/// `TopicInfo`) with that constant; the node's queryable matches both.
#[test]
fn keys_of_both_distributions() {
    assert_eq!(
        key(0, "/robot1/coolgp/query", Distro::Jazzy),
        "0/robot1/coolgp/query/rcl_interfaces::srv::dds_::GetParameters_/\
         RIHS01_bf9803d5c74cf989a5de3e0c2e99444599a627c7ff75f97b8c05b01003675cbc"
    );
    assert_eq!(
        key(2, "/q/", Distro::Humble),
        "2/q/rcl_interfaces::srv::dds_::GetParameters_/TypeHashNotSupported"
    );
    assert_eq!(
        key_any(2, "/q"),
        "2/q/rcl_interfaces::srv::dds_::GetParameters_/*"
    );
}

#[test]
fn a_request_as_the_wire_has_it() {
    // One name "1,2": header, count 1, length 4 (with the NUL), "1,2\0".
    let le = encode_request(&["1,2"], Endian::Little);
    assert_eq!(
        le,
        [0, 1, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, b'1', b',', b'2', 0]
    );
    let be = encode_request(&["1,2"], Endian::Big);
    assert_eq!(
        be,
        [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 4, b'1', b',', b'2', 0]
    );
    for bytes in [&le, &be] {
        assert_eq!(decode_request(bytes).expect("request"), ["1,2"]);
    }
    let names = ["48.13,11.55", "", "0.1 , -2e-3"];
    for endian in [Endian::Little, Endian::Big] {
        let bytes = encode_request(&names, endian);
        assert_eq!(decode_request(&bytes).expect("request"), names);
    }
    assert!(decode_request(&encode_request(&[], Endian::Little))
        .expect("empty")
        .is_empty());
}

#[test]
fn responses_round_trip_in_both_byte_orders() {
    let answers = [
        Answer::Value {
            mean: 20.125,
            var_f: 1e-3,
            var_y: 0.0101,
        },
        Answer::Refused("`x` is not a finite decimal".into()),
        Answer::Value {
            mean: -f64::MIN_POSITIVE,
            var_f: 0.1 + 0.2,
            var_y: 7.0,
        },
    ];
    for endian in [Endian::Little, Endian::Big] {
        let bytes = encode_response(&answers, endian);
        assert_eq!(decode_response(&bytes).expect("response"), answers);
    }
    // The layout of one value (little endian): type 8, bool, pad to 8, i64, f64, an empty
    // string (length 1, NUL), three empty sequences, then the doubles aligned to 8.
    let one = encode_response(&answers[..1], Endian::Little);
    assert_eq!(one[4..8], [1, 0, 0, 0]);
    assert_eq!(one[8], PARAMETER_DOUBLE_ARRAY);
    // body offsets: count 0..4, type 4, bool 5, pad, i64 8..16, f64 16..24, string 24..29
    // (len 1 + NUL), pad to 32, three counts 32..44, the double count 44..48, doubles 48..72.
    assert_eq!(one[4 + 24..4 + 28], [1, 0, 0, 0]);
    assert_eq!(one[4 + 44..4 + 48], [3, 0, 0, 0]);
    assert_eq!(one[4 + 48..4 + 56], 20.125f64.to_le_bytes());
    assert_eq!(one.len(), 4 + 72 + 4);
}

#[test]
fn malformed_requests_are_errors_never_panics() {
    let good = encode_request(&["1.5,2.5", "3,4"], Endian::Little);
    // Every truncation.
    for cut in 0..good.len() {
        assert!(decode_request(&good[..cut]).is_err(), "cut at {cut}");
    }
    // XCDR2 and garbage headers.
    let mut xcdr2 = good.clone();
    xcdr2[1] = 7;
    assert!(matches!(
        decode_request(&xcdr2),
        Err(ServiceError::Cdr(CdrError::Encapsulation([0, 7])))
    ));
    // A count that the payload cannot hold, and one over the limit.
    let mut huge = vec![0, 1, 0, 0];
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        decode_request(&huge),
        Err(ServiceError::TooMany { .. })
    ));
    let mut many = vec![0, 1, 0, 0];
    many.extend_from_slice(&1000u32.to_le_bytes());
    assert!(matches!(decode_request(&many), Err(ServiceError::Cdr(_))));
    // A string without its NUL, and one that is not UTF-8.
    let mut no_nul = encode_request(&["ab"], Endian::Little);
    *no_nul.last_mut().expect("byte") = b'c';
    assert!(decode_request(&no_nul).is_err());
    let mut latin1 = encode_request(&["ab"], Endian::Little);
    latin1[12] = 0xe9;
    assert!(decode_request(&latin1).is_err());
    // Another type's bytes: a response is not a request.
    let resp = encode_response(
        &[Answer::Value {
            mean: 1.0,
            var_f: 2.0,
            var_y: 3.0,
        }],
        Endian::Little,
    );
    assert!(decode_request(&resp).is_err());
    let mut trailing = good.clone();
    trailing.extend_from_slice(&[0; 8]);
    assert_eq!(decode_request(&trailing), Err(ServiceError::Trailing(8)));
    // Garbage of every length from a fixed pattern.
    for len in 0..64 {
        let junk: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
        let _ = decode_request(&junk);
        let _ = decode_response(&junk);
    }
}

#[test]
fn points_parse_or_say_why() {
    assert_eq!(
        parse_point("48.13, 11.55", 2).expect("point"),
        [48.13, 11.55]
    );
    assert_eq!(parse_point("-1e-3", 1).expect("point"), [-1e-3]);
    // Decimal text from Rust's shortest round trip is exact.
    let v = 0.1 + 0.2;
    assert_eq!(parse_point(&format!("{v},{v}"), 2).expect("point"), [v, v]);
    for (name, want) in [
        ("1,2,3", "has 3 values"),
        ("", "has 1 values"),
        ("1,nan", "not a finite"),
        ("1,inf", "not a finite"),
        ("1;2", "has 1 values"),
        ("1,x", "`x` is not"),
    ] {
        let err = parse_point(name, 2).expect_err(name);
        assert!(err.contains(want), "{name}: {err}");
    }
}
