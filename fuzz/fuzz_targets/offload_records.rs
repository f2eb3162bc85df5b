//! Hostile off-host records and peer control messages: decoding never panics, and whatever
//! decodes encodes back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offhost_proto::offload::{Completion, Submission};
use offhost_proto::peer::{DataName, PeerMessage};

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = Submission::decode(data) {
        let mut out = vec![0u8; s.encoded_len()];
        s.encode(&mut out);
        assert_eq!(out, data, "submission round trip");
    }
    if let Ok(c) = Completion::decode(data) {
        let mut out = vec![0u8; c.encoded_len()];
        c.encode(&mut out);
        assert_eq!(out, data, "completion round trip");
    }
    if let Ok(m) = PeerMessage::decode(data) {
        let mut out = Vec::new();
        m.encode(&mut out);
        assert_eq!(out, data, "peer message round trip");
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Some(d) = DataName::parse(text) {
            assert_eq!(d.to_name(), text);
        }
    }
});
