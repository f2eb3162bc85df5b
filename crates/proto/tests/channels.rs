//! Behaviour of channels over a simulated link: packets, credits, close, errors.

mod common;

use common::{message, Pair};
use offhost_proto::{
    BatchEnd, CallError, ChannelOptions, Config, Connection, Event, Frame, Landed, ProtoError,
    Received, SendMode, Side,
};

fn small(packet_size: usize, recv_buffer: u32) -> ChannelOptions {
    ChannelOptions {
        packet_size,
        recv_buffer,
        max_message: u64::from(recv_buffer),
        send_mode: SendMode::Async,
    }
}

fn opened(c: &mut Connection) -> u32 {
    match c.poll_event() {
        Some(Event::Opened { channel, .. }) => channel,
        other => panic!("expected an open event, got {other:?}"),
    }
}

#[test]
fn messages_are_split_into_packets_and_reassembled() {
    let mut p = Pair::new();
    p.settle();
    let ch = p.a.open("data", small(8, 4096)).unwrap();
    let msg: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    p.a.send(ch, &msg).unwrap();
    let mut wire = Vec::new();
    p.a.poll_transmit(&mut wire);
    // open frame, then 125 data packets of 8 bytes, each with its header and padding
    let mut at = 0;
    let mut packets = 0;
    while let Some((f, used)) = Frame::decode(&wire[at..]).unwrap() {
        if let Frame::Data { payload, last, .. } = f {
            assert_eq!(payload.len(), 8);
            assert_eq!(last, packets == 124);
            packets += 1;
        }
        at += used;
    }
    assert_eq!(packets, 125);
    p.b.handle_input(&wire).unwrap();
    let id = opened(&mut p.b);
    assert_eq!(id, ch);
    assert_eq!(message(p.b.recv(id).unwrap()), msg);
    assert_eq!(p.b.recv(id).unwrap(), Received::Empty);
}

#[test]
fn recv_into_exchanges_buffers_for_messages_of_several_packets() {
    let mut p = Pair::new();
    p.settle();
    let ch = p.a.open("data", small(64, 8192)).unwrap();
    let big: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    p.a.send(ch, &big).unwrap();
    p.a.send(ch, b"small").unwrap();
    p.a.send(ch, &big[..500]).unwrap();
    let mut wire = Vec::new();
    p.a.poll_transmit(&mut wire);
    p.b.handle_input(&wire).unwrap();
    let id = opened(&mut p.b);
    let mut buf = Vec::with_capacity(2000);
    let given = buf.as_ptr();
    assert_eq!(p.b.recv_into(id, &mut buf).unwrap(), Landed::Message);
    assert_eq!(buf, big);
    // One packet: copied into the buffer the caller holds now.
    let held = buf.as_ptr();
    assert_eq!(p.b.recv_into(id, &mut buf).unwrap(), Landed::Message);
    assert_eq!((buf.as_slice(), buf.as_ptr()), (&b"small"[..], held));
    // The next large message arrived before any exchange, in a buffer of its own; the
    // buffers given in exchange (first `given`, now `held`) are kept for the next ones.
    assert_eq!(p.b.recv_into(id, &mut buf).unwrap(), Landed::Message);
    assert_eq!(buf, big[..500]);
    p.a.send(ch, &big).unwrap();
    let mut wire = Vec::new();
    p.a.poll_transmit(&mut wire);
    p.b.handle_input(&wire).unwrap();
    let mut other = Vec::new();
    assert_eq!(p.b.recv_into(id, &mut other).unwrap(), Landed::Message);
    assert_eq!((other.as_slice(), other.as_ptr()), (&big[..], held));
    assert_ne!(given, held);
    assert_eq!(p.b.recv_into(id, &mut other).unwrap(), Landed::Empty);
}

#[test]
fn empty_messages_are_delivered_and_cost_credit() {
    let mut p = Pair::new();
    p.settle();
    let ch = p.a.open("e", small(8, 8)).unwrap();
    for _ in 0..8 {
        p.a.send(ch, b"").unwrap();
    }
    assert_eq!(p.a.send(ch, b""), Err(CallError::Blocked));
    p.settle();
    let id = opened(&mut p.b);
    for _ in 0..8 {
        assert_eq!(message(p.b.recv(id).unwrap()), b"");
    }
}

#[test]
fn sender_blocks_at_credit_and_resumes_after_grant() {
    let mut p = Pair::new();
    p.settle();
    let ch = p.a.open("c", small(64, 256)).unwrap();
    for _ in 0..4 {
        p.a.send(ch, &[1; 64]).unwrap();
    }
    assert_eq!(p.a.send(ch, &[1; 64]), Err(CallError::Blocked));
    assert!(!p.a.can_send(ch, 1));
    p.settle();
    let id = opened(&mut p.b);
    for _ in 0..4 {
        message(p.b.recv(id).unwrap());
    }
    p.settle();
    assert!(p.a.can_send(ch, 256));
    p.a.send(ch, &[2; 256]).unwrap();
}

#[test]
fn a_lost_grant_is_covered_by_blocked_and_a_repeated_grant_is_harmless() {
    let mut p = Pair::new();
    p.settle();
    let ch = p.a.open("c", small(64, 256)).unwrap();
    p.a.send(ch, &[1; 256]).unwrap();
    p.settle();
    let id = opened(&mut p.b);
    message(p.b.recv(id).unwrap());
    // Lose b's grant on the way.
    let mut lost = Vec::new();
    p.b.poll_transmit(&mut lost);
    assert!(!lost.is_empty());
    assert_eq!(p.a.send(ch, &[1; 64]), Err(CallError::Blocked));
    p.settle(); // the blocked frame makes b grant again
    p.a.send(ch, &[1; 64]).unwrap();
    // Replaying the old grant changes nothing.
    p.a.handle_input(&lost).unwrap();
    p.a.send(ch, &[1; 64]).unwrap();
    p.a.send(ch, &[1; 128]).unwrap();
    assert_eq!(p.a.send(ch, &[1; 1]), Err(CallError::Blocked));
}

/// A message of the whole window, then a small one, then the whole window again (the pattern
/// of a buffer sent in parts: one full part and a short last one). The receiver takes each
/// message as it comes; the small one alone frees less than the half window a grant usually
/// waits for, so without the sender's `blocked` frame counting, no grant would ever come.
#[test]
fn a_sender_blocked_behind_a_small_message_gets_the_credit_it_frees() {
    let mut p = Pair::new();
    p.settle();
    let ch = p.a.open("parts", small(64, 256)).unwrap();
    let mut id = None;
    let mut got = Vec::new();
    let want: Vec<Vec<u8>> = (0..6u8)
        .map(|i| if i % 2 == 0 { vec![i; 256] } else { vec![i; 2] })
        .collect();
    let mut next = 0;
    for _ in 0..100 {
        while next < want.len() && p.a.send(ch, &want[next]).is_ok() {
            next += 1;
        }
        p.settle();
        let id = *id.get_or_insert_with(|| opened(&mut p.b));
        while let Received::Message(m) = p.b.recv(id).unwrap() {
            got.push(m.to_vec());
        }
        p.settle();
        if got.len() == want.len() {
            break;
        }
    }
    assert_eq!(got.len(), want.len(), "the sender stalled");
    assert!(got == want, "the messages changed on the way");
}

#[test]
fn a_slow_channel_does_not_stall_the_others() {
    let mut p = Pair::new();
    p.settle();
    let slow = p.a.open("slow", small(1024, 64 * 1024)).unwrap();
    let fast = p.a.open("fast", small(1024, 4096)).unwrap();
    // Fill the slow channel until it blocks; its reader never drains.
    let mut filled = 0;
    while p.a.send(slow, &[9; 4096]).is_ok() {
        filled += 1;
        p.settle();
    }
    assert_eq!(filled, 16);
    p.settle();
    let b_slow = opened(&mut p.b);
    let b_fast = opened(&mut p.b);
    assert_eq!((b_slow, b_fast), (slow, fast));
    // Many windows' worth on the fast channel still flow.
    for i in 0..1000u32 {
        let msg = i.to_le_bytes().repeat(256);
        p.a.send(fast, &msg)
            .unwrap_or_else(|e| panic!("fast channel stalled at {i}: {e}"));
        p.settle();
        assert_eq!(message(p.b.recv(b_fast).unwrap()), msg);
    }
    assert_eq!(p.a.send(slow, &[9; 1]), Err(CallError::Blocked));
}

#[test]
fn close_is_end_of_stream_and_channel_retires() {
    let mut p = Pair::new();
    let ch = p.a.open("x", ChannelOptions::default()).unwrap();
    p.a.send(ch, b"last words").unwrap();
    p.a.close(ch).unwrap();
    assert_eq!(p.a.send(ch, b"more"), Err(CallError::Closed));
    p.settle();
    let id = opened(&mut p.b);
    assert!(p.b.readable(id));
    assert_eq!(message(p.b.recv(id).unwrap()), b"last words");
    assert_eq!(p.b.recv(id).unwrap(), Received::End);
    p.b.send(id, b"reply").unwrap();
    p.b.close(id).unwrap();
    assert_eq!(p.b.recv(id).unwrap(), Received::End);
    p.settle();
    assert_eq!(message(p.a.recv(ch).unwrap()), b"reply");
    assert_eq!(p.a.recv(ch).unwrap(), Received::End);
    assert_eq!(p.a.channel_ids().count(), 0);
    assert_eq!(p.b.channel_ids().count(), 0);
}

#[test]
fn too_large_message_is_an_error_at_the_call() {
    let mut p = Pair::new();
    let ch = p.a.open("x", small(8, 100)).unwrap();
    assert_eq!(
        p.a.send(ch, &[0; 101]),
        Err(CallError::TooLarge { len: 101, max: 100 })
    );
}

#[test]
fn sync_channels_report_delivery() {
    let mut p = Pair::new();
    p.settle();
    let opts = ChannelOptions {
        send_mode: SendMode::Sync,
        ..ChannelOptions::default()
    };
    let ch = p.a.open("s", opts).unwrap();
    let seq = p.a.send(ch, b"m").unwrap();
    assert_eq!(seq, 1);
    p.settle();
    assert_eq!(p.a.delivered(ch).unwrap(), 0);
    let id = opened(&mut p.b);
    message(p.b.recv(id).unwrap());
    p.settle();
    assert_eq!(p.a.delivered(ch).unwrap(), 1);
}

#[test]
fn a_message_taken_as_it_is_parsed_counts_as_received_and_taken() {
    let mut p = Pair::new();
    p.settle();
    let opts = ChannelOptions {
        send_mode: SendMode::Sync,
        ..ChannelOptions::default()
    };
    let ch = p.a.open("t", opts).unwrap();
    p.settle();
    let id = opened(&mut p.b);
    // Nothing waits on the channel: the message goes to the taker, and the sender hears that
    // it was delivered, as after a `recv`.
    p.a.send(ch, b"one").unwrap();
    let mut got = Vec::new();
    assert!(p.deliver_taking(usize::MAX, false, id, &mut |m| got.push(m.to_vec())));
    assert_eq!(got, [b"one".to_vec()]);
    assert_eq!(p.b.recv(id).unwrap(), Received::Empty);
    p.settle();
    assert_eq!(p.a.delivered(ch).unwrap(), 1);
    // A message that waits comes first: the next one is stored behind it, not taken.
    p.a.send(ch, b"two").unwrap();
    p.deliver(usize::MAX);
    p.a.send(ch, b"three").unwrap();
    assert!(!p.deliver_taking(usize::MAX, false, id, &mut |m| got.push(m.to_vec())));
    assert_eq!(got.len(), 1);
    assert_eq!(message(p.b.recv(id).unwrap()), b"two");
    assert_eq!(message(p.b.recv(id).unwrap()), b"three");
    // Only the taker's channel is taken from; a frame cut across two inputs is taken once whole.
    let other = p.a.open("u", small(8, 4096)).unwrap();
    p.a.send(other, b"elsewhere").unwrap();
    p.a.send(ch, b"four").unwrap();
    p.deliver(usize::MAX);
    let id2 = opened(&mut p.b);
    assert_eq!(message(p.b.recv(id2).unwrap()), b"elsewhere");
    assert_eq!(got.len(), 1);
    assert_eq!(message(p.b.recv(id).unwrap()), b"four");
    p.a.send(ch, b"five").unwrap();
    assert!(!p.deliver_taking(10, false, id, &mut |m| got.push(m.to_vec())));
    assert!(p.deliver_taking(usize::MAX, false, id, &mut |m| got.push(m.to_vec())));
    assert_eq!(got, [b"one".to_vec(), b"five".to_vec()]);
    assert_eq!(p.b.recv(id).unwrap(), Received::Empty);
}

#[test]
fn a_whole_message_offered_in_one_record_is_taken_with_the_same_accounting() {
    let mut p = Pair::new();
    p.settle();
    let opts = ChannelOptions {
        send_mode: SendMode::Sync,
        ..small(8, 64)
    };
    let ch = p.a.open("w", opts).unwrap();
    p.settle();
    let id = opened(&mut p.b);
    // One frame holding the whole message: taken, and the sender hears it was delivered.
    p.a.send(ch, b"1234567").unwrap();
    assert_eq!(p.deliver_whole(false, id), Some(b"1234567".to_vec()));
    assert_eq!(p.b.recv(id).unwrap(), Received::Empty);
    p.settle();
    assert_eq!(p.a.delivered(ch).unwrap(), 1);
    // Declined, and then fed as usual: a message of several packets, one for another channel,
    // and one behind a message that waits.
    p.a.send(ch, b"0123456789").unwrap();
    assert_eq!(p.deliver_whole(false, id), None);
    assert_eq!(p.deliver_whole(false, id), None);
    assert_eq!(message(p.b.recv(id).unwrap()), b"0123456789");
    p.a.send(ch, b"a").unwrap();
    assert_eq!(p.deliver_whole(false, id + 2), None);
    p.a.send(ch, b"b").unwrap();
    assert_eq!(p.deliver_whole(false, id), None);
    assert_eq!(message(p.b.recv(id).unwrap()), b"a");
    assert_eq!(message(p.b.recv(id).unwrap()), b"b");
    // Behind a partial frame from earlier input, the bytes are not a frame start.
    p.a.send(ch, b"cd").unwrap();
    p.collect();
    let wire = std::mem::take(&mut p.a_to_b);
    p.b.handle_input(&wire[..5]).unwrap();
    assert_eq!(p.b.take_whole_message(&wire[5..], id), None);
    p.b.handle_input(&wire[5..]).unwrap();
    assert_eq!(message(p.b.recv(id).unwrap()), b"cd");
    // The same counts as `recv`: 64 bytes of credit in all, then the sender is blocked.
    p.settle();
    for _ in 0..8 {
        p.a.send(ch, &[7; 8]).unwrap();
        assert_eq!(p.deliver_whole(false, id), Some(vec![7; 8]));
    }
    p.settle();
    assert!(p.a.can_send(ch, 64));
    assert!(!p.a.can_send(ch, 65));
}

#[test]
fn a_whole_message_beyond_credit_is_declined_and_then_fails_the_link() {
    let open = Frame::Open {
        channel: 1,
        packet_shift: 4,
        sync: false,
        recv_buffer: 16,
        max_message: 16,
        name: "x",
    };
    let (mut b, r) = server_fed(std::slice::from_ref(&open));
    r.unwrap();
    let record = |payload: &[u8]| {
        let mut w = Vec::new();
        Frame::Data {
            channel: 1,
            last: true,
            payload,
        }
        .encode(&mut w);
        w
    };
    // 7 bytes taken are less than half the buffer: no fresh grant, the limit stays 16.
    let (seven, ten) = (record(&[1; 7]), record(&[2; 10]));
    assert_eq!(b.take_whole_message(&seven, 1), Some(&[1u8; 7][..]));
    // 7 + 10 > 16: not taken, and the usual path reports the overrun.
    assert_eq!(b.take_whole_message(&ten, 1), None);
    assert_eq!(
        b.handle_input(&ten),
        Err(ProtoError::CreditOverrun {
            channel: 1,
            offset: 17,
            limit: 16
        })
    );
    assert_eq!(b.take_whole_message(&record(&[3]), 1), None);
    // A packet longer than the channel's is declined too, as is a malformed header.
    let (mut b, _) = server_fed(&[open]);
    assert_eq!(b.take_whole_message(&record(&[4; 17]), 1), None);
    let mut bad = record(&[5; 4]);
    bad[2] = 1;
    assert_eq!(b.take_whole_message(&bad, 1), None);
    assert_eq!(b.take_whole_message(&record(&[5; 4])[..15], 1), None);
    assert_eq!(
        b.take_whole_message(&record(&[6; 4]), 1),
        Some(&[6u8; 4][..])
    );
}

#[test]
fn frames_of_parts_given_as_pieces_are_the_frames_send_parts_queues() {
    let mut p = Pair::new();
    p.settle();
    let ch = p.a.open("p", small(8, 256)).unwrap();
    p.settle();
    let id = opened(&mut p.b);
    let mut twin = Pair::new();
    twin.settle();
    let tch = twin.a.open("p", small(8, 256)).unwrap();
    twin.settle();
    let body: Vec<u8> = (0..40u8).collect();
    // Parts that end inside a packet, on a packet's end, and empty ones.
    let cases: [&[&[u8]]; 5] = [
        &[b"", b""],
        &[b"h", &body[..7]],
        &[b"h", &body[..], b"t"],
        &[&body[..8], &body[8..16], b""],
        &[b"", &body[..17], &body[17..33]],
    ];
    for parts in cases {
        twin.a.send_parts(tch, parts).unwrap();
        let mut want = Vec::new();
        twin.a.poll_transmit(&mut want);
        let permit = p.a.send_parts_in_place(ch, parts).expect("credit and room");
        let mut placed = vec![0xAA; permit.frames().len()];
        permit.frames().write_to(&mut placed);
        let mut headers = Vec::new();
        let mut pieces = Vec::new();
        permit.frames().pieces(&mut headers, &mut pieces);
        assert_eq!(pieces.concat(), want, "{parts:?} as pieces");
        drop(pieces);
        assert!(permit.commit() > 0);
        assert_eq!(placed, want, "{parts:?}");
        p.b.handle_input(&placed).unwrap();
        assert_eq!(message(p.b.recv(id).unwrap()), parts.concat());
    }
    // Parts over the channel's largest message: no permit, nothing charged.
    let big = vec![0u8; 300];
    assert!(p.a.send_parts_in_place(ch, &[&big[..]]).is_none());
    assert!(!p.a.has_transmit());
}

#[test]
fn frames_written_in_place_are_the_frames_send_queues() {
    let mut p = Pair::new();
    p.settle();
    let ch = p.a.open("p", small(8, 64)).unwrap();
    p.settle();
    let id = opened(&mut p.b);
    let mut twin = Pair::new();
    twin.settle();
    let tch = twin.a.open("p", small(8, 64)).unwrap();
    twin.settle();
    for msg in [&b""[..], b"1234567", b"12345678", b"0123456789abcdef0"] {
        // What `send` queues...
        twin.a.send(tch, msg).unwrap();
        let mut want = Vec::new();
        twin.a.poll_transmit(&mut want);
        // ...is what `send_in_place` writes, charged the same.
        let permit = p.a.send_in_place(ch, msg).expect("credit and room");
        let mut placed = vec![0xAA; permit.frames().len()];
        permit.frames().write_to(&mut placed);
        assert!(permit.commit() > 0);
        assert_eq!(placed, want, "{msg:?}");
        assert!(!p.a.has_transmit());
        p.b.handle_input(&placed).unwrap();
        assert_eq!(message(p.b.recv(id).unwrap()), msg);
    }
    // A permit dropped without a commit: nothing is charged, nothing is queued.
    p.settle();
    let room = (0..=64).filter(|&n| p.a.can_send(ch, n)).max().unwrap();
    assert!(room >= 4, "{room}");
    drop(p.a.send_in_place(ch, &[1; 4]).expect("credit"));
    assert!(p.a.can_send(ch, room));
    assert!(!p.a.has_transmit());
    // Short of credit: nothing placed, charged or queued; `send` then says it is blocked and
    // queues the `blocked` frame.
    p.settle();
    let mut sent = 0;
    while p.a.can_send(ch, 32) {
        p.a.send(ch, &[2; 32]).unwrap();
        sent += 1;
    }
    let mut wire = Vec::new();
    p.a.poll_transmit(&mut wire);
    assert!(
        p.a.send_in_place(ch, &[3; 32]).is_none(),
        "a permit without credit"
    );
    assert!(!p.a.has_transmit());
    assert_eq!(p.a.send(ch, &[3; 32]), Err(CallError::Blocked));
    let mut blocked = Vec::new();
    p.a.poll_transmit(&mut blocked);
    assert!(matches!(
        Frame::decode(&blocked).unwrap(),
        Some((Frame::Blocked { .. }, _))
    ));
    assert!(sent > 0);
}

#[test]
fn bad_options_from_the_peer_refuse_the_channel() {
    let mut b = Connection::new(Config::new(Side::Server));
    let mut wire = Vec::new();
    Frame::Open {
        channel: 1,
        packet_shift: 3,
        sync: false,
        recv_buffer: 4,
        max_message: 8,
        name: "x",
    }
    .encode(&mut wire);
    b.handle_input(&wire).unwrap();
    assert_eq!(b.poll_event(), None);
    let mut out = Vec::new();
    b.poll_transmit(&mut out);
    let mut at = 0;
    let mut refused = false;
    while let Some((f, used)) = Frame::decode(&out[at..]).unwrap() {
        refused |= matches!(
            f,
            Frame::Error {
                channel: 1,
                code: offhost_proto::CODE_REFUSED,
                ..
            }
        );
        at += used;
    }
    assert!(refused);
}

fn server_fed(frames: &[Frame<'_>]) -> (Connection, Result<(), ProtoError>) {
    let mut b = Connection::new(Config::new(Side::Server));
    let mut wire = Vec::new();
    for f in frames {
        f.encode(&mut wire);
    }
    let r = b.handle_input(&wire);
    (b, r)
}

/// How many of the frames `b` wants to send now are ones `want` picks.
fn frames_sent(b: &mut Connection, want: impl Fn(&Frame<'_>) -> bool) -> usize {
    let mut out = Vec::new();
    b.poll_transmit(&mut out);
    let mut at = 0;
    let mut n = 0;
    while let Some((f, used)) = Frame::decode(&out[at..]).unwrap() {
        n += usize::from(want(&f));
        at += used;
    }
    n
}

fn sends_link_error(b: &mut Connection) -> bool {
    let error = |f: &Frame<'_>| {
        matches!(
            f,
            Frame::Error {
                channel: 0,
                code: offhost_proto::CODE_PROTOCOL,
                ..
            }
        )
    };
    frames_sent(b, error) > 0
}

#[test]
fn data_for_an_unknown_channel_fails_the_link() {
    let (mut b, r) = server_fed(&[Frame::Data {
        channel: 5,
        last: true,
        payload: b"x",
    }]);
    assert_eq!(r, Err(ProtoError::UnknownChannel(5)));
    assert!(sends_link_error(&mut b));
    assert_eq!(b.handle_input(b"more"), Err(ProtoError::LinkClosed));
    assert_eq!(
        b.open("y", ChannelOptions::default()),
        Err(CallError::LinkClosed)
    );
}

#[test]
fn a_large_packet_cut_after_its_header_is_checked_at_once_and_taken_as_it_arrives() {
    let open = Frame::Open {
        channel: 1,
        packet_shift: 13,
        sync: false,
        recv_buffer: 1 << 16,
        max_message: 1 << 16,
        name: "x",
    };
    let msg: Vec<u8> = (0..12_000u32).map(|i| (i * 7) as u8).collect();
    let mut wire = Vec::new();
    open.encode(&mut wire);
    let opened = wire.len();
    for (i, p) in msg.chunks(8192).enumerate() {
        Frame::Data {
            channel: 1,
            last: i == 1,
            payload: p,
        }
        .encode(&mut wire);
    }
    // Fed in pieces cut inside headers and payloads alike.
    let mut b = Connection::new(Config::new(Side::Server));
    for piece in wire.chunks(1000) {
        b.handle_input(piece).unwrap();
        if b.readable(1) {
            break;
        }
    }
    assert_eq!(message(b.recv(1).unwrap()), msg);
    // A packet of the wrong size fails the link at its header, before its payload comes.
    let mut b = Connection::new(Config::new(Side::Server));
    let mut bad = Vec::new();
    Frame::Data {
        channel: 1,
        last: false,
        payload: &[1; 5000],
    }
    .encode(&mut bad);
    b.handle_input(&wire[..opened]).unwrap();
    assert_eq!(
        b.handle_input(&bad[..100]),
        Err(ProtoError::BadPacket {
            channel: 1,
            len: 5000,
            packet_size: 8192
        })
    );
    assert!(sends_link_error(&mut b));
}

#[test]
fn credit_overrun_fails_the_link() {
    let open = Frame::Open {
        channel: 1,
        packet_shift: 3,
        sync: false,
        recv_buffer: 16,
        max_message: 16,
        name: "x",
    };
    let d = Frame::Data {
        channel: 1,
        last: false,
        payload: &[0; 8],
    };
    let (mut b, r) = server_fed(&[open, d.clone(), d.clone(), d]);
    assert_eq!(
        r,
        Err(ProtoError::CreditOverrun {
            channel: 1,
            offset: 24,
            limit: 16
        })
    );
    assert!(sends_link_error(&mut b));
}

/// A large packet past the channel's credit fails the link at its header, before any of its
/// payload is stored (the path that takes a payload as it arrives).
#[test]
fn a_large_packet_past_the_credit_fails_the_link_at_its_header() {
    let open = Frame::Open {
        channel: 1,
        packet_shift: 13,
        sync: false,
        recv_buffer: 8192,
        max_message: 1 << 16,
        name: "x",
    };
    let mut wire = Vec::new();
    open.encode(&mut wire);
    for _ in 0..2 {
        Frame::Data {
            channel: 1,
            last: false,
            payload: &[7; 8192],
        }
        .encode(&mut wire);
    }
    let second = wire.len() - (8192 + offhost_proto::frame::HEADER_LEN);
    let mut b = Connection::new(Config::new(Side::Server));
    b.handle_input(&wire[..second]).unwrap();
    // Only the second packet's header and a few bytes of its payload.
    assert_eq!(
        b.handle_input(&wire[second..second + offhost_proto::frame::HEADER_LEN + 10]),
        Err(ProtoError::CreditOverrun {
            channel: 1,
            offset: 16384,
            limit: 8192
        })
    );
    assert!(sends_link_error(&mut b));
}

#[test]
fn short_inner_packet_fails_the_link() {
    let open = Frame::Open {
        channel: 1,
        packet_shift: 4,
        sync: false,
        recv_buffer: 64,
        max_message: 64,
        name: "x",
    };
    let (_, r) = server_fed(&[
        open,
        Frame::Data {
            channel: 1,
            last: false,
            payload: &[0; 8],
        },
    ]);
    assert_eq!(
        r,
        Err(ProtoError::BadPacket {
            channel: 1,
            len: 8,
            packet_size: 16
        })
    );
}

#[test]
fn reused_or_wrong_parity_channel_id_fails_the_link() {
    let open = |channel| Frame::Open {
        channel,
        packet_shift: 4,
        sync: false,
        recv_buffer: 64,
        max_message: 64,
        name: "x",
    };
    assert_eq!(
        server_fed(&[open(3), open(3)]).1,
        Err(ProtoError::BadChannelId(3))
    );
    assert_eq!(server_fed(&[open(2)]).1, Err(ProtoError::BadChannelId(2)));
}

#[test]
fn malformed_frame_reports_its_offset() {
    let mut wire = Vec::new();
    Frame::Ping {
        token: 1,
        reply: false,
    }
    .encode(&mut wire);
    wire.extend_from_slice(&[0x99; 16]);
    let mut b = Connection::new(Config::new(Side::Server));
    match b.handle_input(&wire) {
        Err(ProtoError::Frame { offset: 32, .. }) => {}
        other => panic!("unexpected {other:?}"),
    }
}

/// The frames of a channel with several messages (some of several packets), as the client
/// writes them, and the messages.
fn client_stream() -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut a = Connection::new(Config::new(Side::Client));
    let ch = a.open("split", small(16, 4096)).unwrap();
    let msgs: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i; usize::from(i) * 7]).collect();
    for m in &msgs {
        a.send(ch, m).unwrap();
    }
    let mut wire = Vec::new();
    a.poll_transmit(&mut wire);
    (wire, msgs)
}

#[test]
fn input_cut_anywhere_gives_the_same_messages() {
    let (wire, msgs) = client_stream();
    for chunk in [1, 2, 5, 11, 12, 13, 15, 16, 17, 29, 64, 1000] {
        let mut b = Connection::new(Config::new(Side::Server));
        for piece in wire.chunks(chunk) {
            b.handle_input(piece).unwrap();
        }
        let id = opened(&mut b);
        let mut got = Vec::new();
        b.recv_each(id, usize::MAX, |m| got.push(m.to_vec()))
            .unwrap();
        assert_eq!(got, msgs, "input in pieces of {chunk} bytes");
    }
}

#[test]
fn a_bad_frame_cut_anywhere_reports_the_same_offset() {
    let (mut wire, _) = client_stream();
    let at = wire.len() as u64;
    wire.extend_from_slice(&[0x99; 16]);
    for chunk in [1, 3, 12, 13, 16, 17, 100] {
        let mut b = Connection::new(Config::new(Side::Server));
        let err = wire
            .chunks(chunk)
            .find_map(|piece| b.handle_input(piece).err())
            .expect("the bad frame is an error");
        match err {
            ProtoError::Frame { offset, .. } => assert_eq!(offset, at, "pieces of {chunk}"),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn truncated_input_waits_for_the_rest() {
    let mut p = Pair::new();
    p.settle();
    let ch = p.a.open("t", ChannelOptions::default()).unwrap();
    p.a.send(ch, &[5; 40000]).unwrap();
    for _ in 0..100_000 {
        p.deliver(7);
        p.collect();
        if p.a_to_b.is_empty() {
            break;
        }
    }
    let id = opened(&mut p.b);
    assert_eq!(message(p.b.recv(id).unwrap()), vec![5; 40000]);
}

#[test]
fn ping_is_answered() {
    let mut p = Pair::new();
    p.a.ping(77).unwrap();
    p.settle();
    assert_eq!(p.a.poll_event(), Some(Event::Pong { token: 77 }));
}

#[test]
fn goodbye_ends_every_channel() {
    let mut p = Pair::new();
    let ch = p.a.open("g", ChannelOptions::default()).unwrap();
    p.a.send(ch, b"bye").unwrap();
    p.a.close_link();
    p.settle();
    let id = opened(&mut p.b);
    assert!(p.b.peer_closed());
    assert_eq!(message(p.b.recv(id).unwrap()), b"bye");
    assert_eq!(p.b.recv(id).unwrap(), Received::End);
}

#[test]
fn loans_travel_by_token_and_cost_credit() {
    let mut p = Pair::new();
    p.settle();
    let ch = p.a.open("loan", small(64, 4096)).unwrap();
    p.a.send(ch, b"inline first").unwrap();
    p.a.send_loan(ch, 4000, 17).unwrap();
    assert_eq!(p.a.send_loan(ch, 200, 18), Err(CallError::Blocked));
    assert!(matches!(
        p.a.send_loan(ch, 5000, 19),
        Err(CallError::TooLarge { .. })
    ));
    p.settle();
    let id = opened(&mut p.b);
    assert_eq!(message(p.b.recv(id).unwrap()), b"inline first");
    assert_eq!(
        p.b.recv(id).unwrap(),
        Received::Loan {
            len: 4000,
            token: 17
        }
    );
    p.settle();
    p.a.send_loan(ch, 4000, 18).unwrap();
}

#[test]
fn a_batch_receive_stops_before_a_loan_and_grants_credit_once() {
    let mut p = Pair::new();
    p.settle();
    let ch = p.a.open("batch", small(64, 4096)).unwrap();
    for m in [&b"one"[..], b"two", b"three"] {
        p.a.send(ch, m).unwrap();
    }
    p.a.send_loan(ch, 100, 5).unwrap();
    p.a.send(ch, b"after").unwrap();
    p.a.close(ch).unwrap();
    p.settle();
    let id = opened(&mut p.b);
    let mut got = Vec::new();
    assert_eq!(
        p.b.recv_each(id, 2, |m| got.push(m.to_vec())).unwrap(),
        (2, BatchEnd::Full)
    );
    assert_eq!(
        p.b.recv_each(id, 10, |m| got.push(m.to_vec())).unwrap(),
        (1, BatchEnd::Loan)
    );
    assert_eq!(got, [&b"one"[..], b"two", b"three"]);
    assert_eq!(p.b.recv(id).unwrap(), Received::Loan { len: 100, token: 5 });
    got.clear();
    assert_eq!(
        p.b.recv_each(id, 10, |m| got.push(m.to_vec())).unwrap(),
        (1, BatchEnd::End)
    );
    assert_eq!(got, [b"after"]);
    assert_eq!(p.b.recv_each(id, 10, |_| ()).unwrap(), (0, BatchEnd::End));
    // Everything taken was paid back: the sender can fill the whole buffer again.
    p.settle();
    let ch2 = p.a.open("again", small(64, 4096)).unwrap();
    p.settle();
    let id2 = opened(&mut p.b);
    p.a.send(ch2, &[1; 4096]).unwrap();
    p.settle();
    assert_eq!(
        p.b.recv_each(id2, 1, |m| assert_eq!(m.len(), 4096))
            .unwrap(),
        (1, BatchEnd::Full)
    );
    p.settle();
    p.a.send(ch2, &[2; 4096]).unwrap();
}

#[test]
fn loan_beyond_credit_fails_the_link() {
    let open = Frame::Open {
        channel: 1,
        packet_shift: 3,
        sync: false,
        recv_buffer: 16,
        max_message: 16,
        name: "x",
    };
    let (_, r) = server_fed(&[
        open.clone(),
        Frame::Loan {
            channel: 1,
            len: 17,
            token: 0,
        },
    ]);
    assert_eq!(
        r,
        Err(ProtoError::MessageTooLong {
            channel: 1,
            max: 16
        })
    );
    let loan = Frame::Loan {
        channel: 1,
        len: 16,
        token: 0,
    };
    let (_, r) = server_fed(&[open, loan.clone(), loan]);
    assert!(matches!(
        r,
        Err(ProtoError::CreditOverrun { channel: 1, .. })
    ));
}

/// A message sent in parts puts the same bytes on the wire as the joined message, for parts
/// that cut packets anywhere (and empty parts), and arrives as one message.
#[test]
fn a_message_sent_in_parts_is_the_joined_message_on_the_wire() {
    for packet in [8usize, 64, 4096] {
        for len in [0usize, 1, 7, 8, 9, 63, 64, 65, 300, 5000] {
            let msg: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            for cut in [0, 1, len / 2, len.saturating_sub(1), len] {
                let (a, b) = msg.split_at(cut.min(len));
                let wire = |send: &dyn Fn(&mut Connection, u32)| {
                    let mut p = Pair::new();
                    p.settle();
                    let ch = p.a.open("p", small(packet, 8192)).unwrap();
                    // The open frame goes first; only the message's frames are compared.
                    p.a.poll_transmit(&mut Vec::new());
                    send(&mut p.a, ch);
                    let mut w = Vec::new();
                    p.a.poll_transmit(&mut w);
                    w
                };
                // The joined message's frames, packet by packet, as `Frame` encodes them.
                let mut joined = Vec::new();
                let mut packets = msg.chunks(packet).peekable();
                if packets.peek().is_none() {
                    Frame::Data {
                        channel: 1,
                        last: true,
                        payload: &[],
                    }
                    .encode(&mut joined);
                }
                while let Some(payload) = packets.next() {
                    let last = packets.peek().is_none();
                    Frame::Data {
                        channel: 1,
                        last,
                        payload,
                    }
                    .encode(&mut joined);
                }
                let parted = wire(&|c, ch| {
                    c.send_parts(ch, &[a, &[], b]).unwrap();
                });
                assert!(!joined.is_empty());
                assert_eq!(joined, parted, "packet {packet}, len {len}, cut {cut}");
            }
        }
    }
    // And it arrives whole.
    let mut p = Pair::new();
    p.settle();
    let ch = p.a.open("p", small(8, 8192)).unwrap();
    p.a.send_parts(ch, &[&[1], &[2; 20], &[3; 5]]).unwrap();
    p.settle();
    let id = opened(&mut p.b);
    let mut want = vec![1u8];
    want.extend([2; 20]);
    want.extend([3; 5]);
    assert_eq!(message(p.b.recv(id).unwrap()), want);
}

/// The link-level credit frames (channel 0) in what `b` wants to send.
fn link_grants(b: &mut Connection) -> usize {
    frames_sent(b, |f| matches!(f, Frame::Credit { channel: 0, .. }))
}

#[test]
fn link_credit_is_granted_per_half_of_the_whole_link_window() {
    // A 4 MiB channel on a link with the default 1 MiB link window: 5 MiB in all, so a grant
    // is worth a frame once 2.5 MiB drained (not every 512 KiB, half the link window alone).
    let mut b = Connection::new(Config::new(Side::Server));
    let mut wire = Vec::new();
    Frame::Open {
        channel: 1,
        packet_shift: 16,
        sync: false,
        recv_buffer: 4 << 20,
        max_message: 1 << 16,
        name: "bulk",
    }
    .encode(&mut wire);
    b.handle_input(&wire).unwrap();
    link_grants(&mut b);
    let payload = vec![7u8; 1 << 16];
    let mut packet = Vec::new();
    Frame::Data {
        channel: 1,
        last: true,
        payload: &payload,
    }
    .encode(&mut packet);
    let mut grants = Vec::new();
    for _ in 0..48 {
        b.handle_input(&packet).unwrap();
        message(b.recv(1).unwrap());
        grants.push(link_grants(&mut b));
    }
    // 3 MiB received and taken: the first link grant after 2.5 MiB (the 40th message), and
    // none before it.
    let first = grants.iter().position(|&g| g > 0);
    assert_eq!(first, Some(39), "link grants per message: {grants:?}");
    assert_eq!(grants.iter().sum::<usize>(), 1);
}

#[test]
fn data_in_flight_to_a_channel_reset_and_closed_here_is_dropped_not_a_broken_link() {
    let mut p = Pair::new();
    p.settle();
    let id = p.a.open("in", small(64, 4096)).unwrap();
    p.deliver(usize::MAX);
    assert_eq!(opened(&mut p.b), id);
    // a sends before b's refusal reaches it; b refuses and closes its side meanwhile.
    p.a.send(id, &[1; 100]).unwrap();
    p.collect();
    p.b.reset(id, offhost_proto::CODE_REFUSED, "no such pipeline")
        .unwrap();
    p.b.close(id).unwrap();
    // b still knows the channel, drops what arrives for it and keeps the link.
    assert!(p.b.channel_ids().any(|c| c == id));
    p.settle();
    assert!(p.b.is_open() && p.a.is_open());
    // a learns of the refusal at its next send, and closing its side retires the channel on
    // both.
    assert!(matches!(
        p.a.send(id, b"more"),
        Err(CallError::Reset { ref reason, .. }) if reason == "no such pipeline"
    ));
    p.a.close(id).unwrap();
    p.settle();
    assert!(!p.b.channel_ids().any(|c| c == id));
    assert!(!p.a.channel_ids().any(|c| c == id));
    assert!(p.b.is_open() && p.a.is_open());
}

/// Opens a channel from `a` to `b` and exchanges the opening and its answer, so that nothing
/// waits for transmission at `b`.
fn opened_quietly(p: &mut Pair, name: &str, opts: ChannelOptions) -> u32 {
    p.settle();
    let ch = p.a.open(name, opts).unwrap();
    p.settle();
    while p.b.poll_event().is_some() {}
    assert!(!p.b.has_transmit());
    ch
}

/// Carries what `a` has to transmit to `b`.
fn carry_to_b(p: &mut Pair) {
    let mut wire = Vec::new();
    p.a.poll_transmit(&mut wire);
    p.b.handle_input(&wire).unwrap();
    while p.b.poll_event().is_some() {}
}

#[test]
fn a_grant_may_wait_while_the_peer_holds_a_quarter_of_the_window() {
    let mut p = Pair::new();
    let ch = opened_quietly(&mut p, "data", small(4096, 64 << 10));
    // 40 KiB of a 64 KiB window taken: a grant is due (half the window drained) and the
    // sender still holds 24 KiB, more than a quarter: it may wait.
    p.a.send(ch, &vec![7u8; 40 << 10]).unwrap();
    carry_to_b(&mut p);
    assert_eq!(message(p.b.recv(ch).unwrap()).len(), 40 << 10);
    assert!(p.b.has_transmit(), "a grant is queued");
    assert!(!p.b.has_urgent_transmit(), "it may wait");
    // Anything else queued behind it makes the whole transmission urgent.
    p.b.send(ch, b"answer").unwrap();
    assert!(p.b.has_urgent_transmit());
    let mut wire = Vec::new();
    p.b.poll_transmit(&mut wire);
    assert!(!p.b.has_transmit() && !p.b.has_urgent_transmit());
    p.a.handle_input(&wire).unwrap();
    // The sender was granted up to 104 KiB. 40 KiB and then 10 KiB more reach the
    // receiver (90 KiB in all) before it takes the 40: the grant that is then due leaves the
    // sender 14 KiB, less than a quarter of the window: it goes now.
    p.a.send(ch, &vec![1u8; 40 << 10]).unwrap();
    p.a.send(ch, &vec![2u8; 10 << 10]).unwrap();
    carry_to_b(&mut p);
    assert_eq!(message(p.b.recv(ch).unwrap()).len(), 40 << 10);
    assert!(
        p.b.has_urgent_transmit(),
        "the sender holds 14 KiB: the grant is urgent"
    );
}

#[test]
fn a_synchronous_channel_never_holds_its_grant_back() {
    let mut p = Pair::new();
    let opts = ChannelOptions {
        send_mode: SendMode::Sync,
        ..small(4096, 64 << 10)
    };
    let ch = opened_quietly(&mut p, "sync", opts);
    p.a.send(ch, &vec![1u8; 40 << 10]).unwrap();
    carry_to_b(&mut p);
    assert_eq!(message(p.b.recv(ch).unwrap()).len(), 40 << 10);
    assert!(
        p.b.has_urgent_transmit(),
        "the sender waits for the delivery report"
    );
}
