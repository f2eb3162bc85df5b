//! Fuzz the frame decoder and the connection's input path: no input may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offhost_proto::{Config, Connection, Frame, Side};

fuzz_target!(|data: &[u8]| {
    let mut at = 0;
    while let Ok(Some((frame, used))) = Frame::decode(&data[at..]) {
        let mut out = Vec::new();
        frame.encode(&mut out);
        assert_eq!(&out[..], &data[at..at + used], "decode/encode round trip");
        at += used;
    }
    let mut conn = Connection::new(Config::new(Side::Server));
    let _ = conn.handle_input(data);
    let mut out = Vec::new();
    conn.poll_transmit(&mut out);
});
