//! Fuzzes the wire codec: decoding arbitrary bytes never panics, and every accepted message
//! is round-trip stable (it re-encodes to the same bytes and decodes to the same message).
#![no_main]

use coolgp::protocol::codec::{decode, encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(msg) = decode(data) else {
        return;
    };
    let bytes = encode(&msg);
    // The encoding is canonical: accepted bytes re-encode to themselves, bit for bit
    // (this also covers NaN payloads, which `PartialEq` cannot compare).
    assert_eq!(bytes, data, "accepted bytes do not re-encode to themselves");
    let again = decode(&bytes).expect("re-encoded message must decode");
    assert_eq!(encode(&again), bytes, "second round trip differs");
    // Without NaN, the messages themselves compare equal.
    #[allow(clippy::eq_op)]
    if msg == msg {
        assert_eq!(again, msg, "decoded message changed across a round trip");
    }
});
