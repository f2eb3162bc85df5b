//! Fuzz the frame decoder and the connection's input path: no input may panic, and a receiver
//! that takes messages as they are parsed, or whole from records of one frame each (as on
//! shared memory), sees what `recv` would have shown it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offhost_proto::{CallError, Config, Connection, Frame, Received, Side};

/// What a receiver of channel 1 got, in order: messages, and loans (which a byte stream
/// carries as tokens).
#[derive(Debug, PartialEq)]
enum Got {
    Message(Vec<u8>),
    Loan { len: u64, token: u64 },
}

/// The messages and loans of `channel` that `recv` shows, up to the first call that has
/// nothing more; false when the channel turned out to be reset (which drops what was not
/// taken yet).
fn drain(conn: &mut Connection, channel: u32, into: &mut Vec<Got>) -> bool {
    loop {
        match conn.recv(channel) {
            Ok(Received::Message(m)) => into.push(Got::Message(m)),
            Ok(Received::Loan { len, token }) => into.push(Got::Loan { len, token }),
            Err(CallError::Reset { .. }) => return false,
            _ => return true,
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut at = 0;
    while let Ok(Some((frame, used))) = Frame::decode(&data[at..]) {
        let mut out = Vec::new();
        frame.encode(&mut out);
        // The padding after a body is not read (it is zero when sent): header and body round
        // trip, and the frame keeps its length.
        let body_end = offhost_proto::frame::HEADER_LEN
            + u32::from_le_bytes(data[at + 8..at + 12].try_into().unwrap()) as usize;
        assert_eq!(out.len(), used, "decode/encode length");
        assert_eq!(&out[..body_end], &data[at..at + body_end], "decode/encode round trip");
        at += used;
    }
    let mut conn = Connection::new(Config::new(Side::Server));
    let plain = conn.handle_input(data);
    let mut out = Vec::new();
    conn.poll_transmit(&mut out);
    // The same input with a receiver waiting on channel 1 (the first the peer opens), cut in
    // two where the last two bytes say (the first byte is a frame's kind, so it would always
    // cut inside the first header), receiving what is stored after each part. A cut inside
    // a large packet's payload takes it as it arrives.
    let cut = match data {
        [.., a, b] => usize::from(u16::from_le_bytes([*a, *b])) % (data.len() + 1),
        _ => 0,
    };
    let mut taking = Connection::new(Config::new(Side::Server));
    let mut got = Vec::new();
    let mut result = Ok(());
    for part in [&data[..cut], &data[cut..]] {
        // After the peer's goodbye the rest of the input is not read (one input stops there
        // too; a later one is refused with `LinkClosed`).
        if taking.peer_closed() {
            break;
        }
        result = result.and_then(|()| {
            taking
                .handle_input_taking(part, 1, &mut |m| got.push(Got::Message(m.to_vec())))
                .map(|_| ())
        });
        if result.is_ok() {
            let _ = drain(&mut taking, 1, &mut got);
        }
    }
    // The same input in records of one frame each (what decodes; the rest is one record), each
    // offered whole to a receiver waiting on channel 1, fed the usual way when declined.
    let mut whole = Connection::new(Config::new(Side::Server));
    let mut got_whole = Vec::new();
    let mut whole_result = Ok(());
    let mut at = 0;
    while at < data.len() && whole_result.is_ok() && !whole.peer_closed() {
        let len = match Frame::decode(&data[at..]) {
            Ok(Some((_, used))) => used,
            _ => data.len() - at,
        };
        let record = &data[at..at + len];
        at += len;
        if let Some(m) = whole.take_whole_message(record, 1) {
            got_whole.push(Got::Message(m.to_vec()));
            continue;
        }
        whole_result = whole.handle_input(record);
        if whole_result.is_ok() {
            let _ = drain(&mut whole, 1, &mut got_whole);
        }
    }
    // Taking (and receiving between the parts) grants credit earlier, so input that overruns
    // the plain connection's credit may still fit the taking one's; and a message taken before
    // a reset of its channel was parsed was delivered, where the plain connection drops it with
    // the reset. Otherwise they agree.
    if plain.is_ok() {
        assert!(result.is_ok(), "{result:?}");
        assert!(whole_result.is_ok(), "{whole_result:?}");
        let mut want = Vec::new();
        if drain(&mut conn, 1, &mut want) {
            assert_eq!(got, want);
            assert_eq!(got_whole, want);
        }
    }
});
