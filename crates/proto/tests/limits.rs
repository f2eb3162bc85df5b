//! The receiving side's limits: channels a peer opens past them are refused (the reason, text
//! for the peer, names the limit and the flag that raises it on the receiving side), the link and the other channels go on, and what a peer can make
//! the receiver buffer stays within the receive windows the receiver granted.

mod common;

use common::Pair;
use offhost_proto::{
    CallError, ChannelOptions, Config, Connection, Event, Limits, ProtoError, Received, SendMode,
    Side,
};
use offhost_units::{Limit, OverLimit};
use proptest::prelude::*;

fn opts(recv_buffer: u32) -> ChannelOptions {
    ChannelOptions {
        packet_size: 1024,
        recv_buffer,
        max_message: u64::from(recv_buffer.min(4096)),
        send_mode: SendMode::Async,
    }
}

/// A client with no limits and a server with `limits`.
fn pair(limits: Limits) -> Pair {
    let mut server = Config::new(Side::Server);
    server.limits = limits;
    Pair {
        a: Connection::new(Config::new(Side::Client)),
        b: Connection::new(server),
        a_to_b: Vec::new(),
        b_to_a: Vec::new(),
    }
}

fn small_limits() -> Limits {
    Limits {
        max_channels: 4,
        max_channel_window: 64 << 10,
        max_session_window: 128 << 10,
    }
}

/// Channels the server was told about (admitted), in order.
fn admitted(c: &mut Connection) -> Vec<u32> {
    let mut v = Vec::new();
    while let Some(e) = c.poll_event() {
        if let Event::Opened { channel, .. } = e {
            v.push(channel);
        }
    }
    v
}

fn reset_reason(c: &mut Connection, ch: u32) -> String {
    match c.send(ch, b"x") {
        Err(CallError::Reset { reason, .. }) => reason,
        other => panic!("expected channel {ch} refused, got {other:?}"),
    }
}

#[test]
fn channels_past_the_limit_are_refused_and_the_link_goes_on() {
    let mut p = pair(small_limits());
    p.settle();
    let ids: Vec<u32> = (0..6)
        .map(|i| p.a.open(&format!("c{i}"), opts(1024)).unwrap())
        .collect();
    p.settle();
    assert_eq!(admitted(&mut p.b), ids[..4].to_vec());
    for &ch in &ids[4..] {
        let why = reset_reason(&mut p.a, ch);
        assert!(
            why.contains("4 channels open") && why.contains("--max-channels"),
            "{why}"
        );
    }
    // The admitted ones carry data.
    p.a.send(ids[0], b"hello").unwrap();
    p.settle();
    assert_eq!(
        p.b.recv(ids[0]).unwrap(),
        Received::Message(b"hello".to_vec())
    );
    // Closing an admitted channel makes room for a new one.
    p.a.close(ids[1]).unwrap();
    p.b.close(ids[1]).unwrap();
    p.settle();
    assert_eq!(p.b.recv(ids[1]).unwrap(), Received::End);
    let again = p.a.open("again", opts(1024)).unwrap();
    p.settle();
    assert_eq!(admitted(&mut p.b), vec![again]);
    assert!(p.a.is_open() && p.b.is_open());
}

#[test]
fn windows_past_the_limits_are_refused_naming_the_flag() {
    let mut p = pair(small_limits());
    p.settle();
    let big = p.a.open("big", opts(64 << 10 | 1)).unwrap();
    let a = p.a.open("a", opts(64 << 10)).unwrap();
    let b = p.a.open("b", opts(64 << 10)).unwrap();
    let c = p.a.open("c", opts(1)).unwrap();
    p.settle();
    assert_eq!(admitted(&mut p.b), vec![a, b]);
    let why = reset_reason(&mut p.a, big);
    assert!(
        why.contains("over the limit max_channel_window of 65536 bytes")
            && why.contains("offhost engine or echo --max-channel-window"),
        "{why}"
    );
    let why = reset_reason(&mut p.a, c);
    assert!(why.contains("--max-session-window"), "{why}");
}

#[test]
fn refused_channels_retire_when_the_peer_closes_them() {
    let mut p = pair(small_limits());
    p.settle();
    for round in 0..20 {
        let ch = p.a.open(&format!("r{round}"), opts(1 << 20)).unwrap();
        p.settle();
        assert!(reset_reason(&mut p.a, ch).contains("--max-channel-window"));
        p.a.close(ch).unwrap();
        p.settle();
    }
    assert!(p.b.is_open(), "{:?}", p.b.error());
    assert_eq!(p.b.channel_ids().count(), 0);
}

#[test]
fn a_peer_keeping_refused_channels_open_fails_the_link() {
    let mut p = pair(small_limits());
    p.settle();
    for i in 0..4 {
        p.a.open(&format!("r{i}"), opts(1 << 20)).unwrap();
    }
    p.settle();
    assert!(p.b.is_open());
    p.a.open("one more", opts(1 << 20)).unwrap();
    p.collect();
    let bytes = std::mem::take(&mut p.a_to_b);
    let e = p.b.handle_input(&bytes).unwrap_err();
    match &e {
        ProtoError::OverLimit { over, .. } => {
            assert_eq!(*over, OverLimit::new(Limit::MaxChannels, 4u32), "{e}")
        }
        other => panic!("expected the limit, got {other:?}"),
    }
    // The local error names no flag; the peer is told the server's.
    assert!(!e.to_string().contains("--"), "{e}");
    p.collect();
    let bytes = std::mem::take(&mut p.b_to_a);
    match p.a.handle_input(&bytes) {
        Err(ProtoError::Peer { reason, .. }) => assert!(
            reason.contains("max_channels") && reason.contains("--max-channels"),
            "{reason}"
        ),
        other => panic!("expected the failure, got {other:?}"),
    }
}

#[test]
fn a_refused_link_tells_the_peer_why() {
    let mut p = pair(small_limits());
    p.b.refuse_link("server has 64 sessions, its limit (raise it with --max-sessions)");
    p.collect();
    let bytes = std::mem::take(&mut p.b_to_a);
    match p.a.handle_input(&bytes) {
        Err(ProtoError::Peer { reason, .. }) => assert!(reason.contains("--max-sessions")),
        other => panic!("expected the refusal, got {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever channels a peer opens, and however much it sends on them without the server's
    /// application reading, the server buffers at most its session window, admits at most its
    /// channel limit, and refuses the rest with a reason, never failing the link.
    #[test]
    fn a_greedy_peer_stays_within_the_receivers_limits(
        windows in proptest::collection::vec(1u32..(96 << 10), 1..24),
        closes in proptest::collection::vec(any::<bool>(), 24),
    ) {
        let limits = small_limits();
        let mut p = pair(limits);
        p.settle();
        let mut open = Vec::new();
        for (i, &w) in windows.iter().enumerate() {
            let ch = p.a.open(&format!("c{i}"), opts(w)).unwrap();
            p.settle();
            let now = admitted(&mut p.b);
            if now.is_empty() {
                let why = reset_reason(&mut p.a, ch);
                prop_assert!(why.contains("(the server raises it with offhost engine or echo --max-"), "{}", why);
                p.a.close(ch).unwrap();
            } else {
                prop_assert_eq!(now, vec![ch]);
                open.push(ch);
            }
            if closes[i] && !open.is_empty() {
                let gone = open.remove(0);
                p.a.close(gone).unwrap();
                p.b.close(gone).unwrap();
                p.settle();
                while p.b.recv(gone).unwrap() != Received::End {}
            }
            p.settle();
        }
        prop_assert!(open.len() as u32 <= limits.max_channels);
        // Fill every admitted channel as far as credit goes; the server reads nothing.
        let msg = vec![7u8; 4096];
        for _ in 0..200 {
            let mut sent = false;
            for &ch in &open {
                let len = msg.len().min(p.a.channel_info(ch).unwrap().1.max_message as usize);
                if p.a.send(ch, &msg[..len]).is_ok() {
                    sent = true;
                }
            }
            p.settle();
            if !sent {
                break;
            }
        }
        prop_assert!(p.b.is_open(), "{:?}", p.b.error());
        let mut buffered = 0u64;
        for &ch in &open {
            while let Received::Message(m) = p.b.recv(ch).unwrap() {
                buffered += m.len() as u64;
            }
        }
        prop_assert!(buffered <= limits.max_session_window, "{} buffered", buffered);
    }
}

/// A loan whose length is near 2^64 (found by the `frame_decode` fuzz target, kept as its seed
/// `credit_overflow`) overruns the credit, counted without overflow: an error, not a panic.
#[test]
fn a_loan_of_nearly_two_to_the_64_bytes_is_a_credit_overrun() {
    let input = include_bytes!("../../../fuzz/seeds/frame_decode/credit_overflow");
    let mut conn = Connection::new(Config::new(Side::Server));
    let e = conn
        .handle_input(input)
        .expect_err("the input overruns the credit");
    assert!(e.to_string().contains("credit"), "{e}");
}
