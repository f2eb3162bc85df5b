//! Property: random interleavings of sends (some written in place), receives, deliveries
//! (grants travel with them; some hand a message over as it is parsed, some offer one frame
//! whole as a shared-memory record would) and closes over a simulated lossless link deliver
//! every message exactly once, in order, per channel and direction.

mod common;

use std::collections::HashMap;

use common::Pair;
use offhost_proto::{BatchEnd, CallError, ChannelOptions, Connection, Event, Received, SendMode};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Send {
        from_a: bool,
        chan: usize,
        len: usize,
        /// Written in place (`Connection::send_in_place`) behind what was queued.
        in_place: bool,
    },
    Recv {
        at_a: bool,
        chan: usize,
        /// 0: one `recv`; more: one `recv_each` of up to this many.
        batch: usize,
    },
    Deliver {
        bytes: usize,
        /// The receiving side (a when true) and channel that take a message as it is parsed
        /// (`Connection::handle_input_taking`), if any.
        take: Option<(bool, usize)>,
    },
    Close {
        from_a: bool,
        chan: usize,
    },
    /// The frame at the head of the wire to the receiving side (a when true), offered whole
    /// for `chan` (`Connection::take_whole_message`), fed the usual way if declined.
    DeliverWhole {
        at_a: bool,
        chan: usize,
    },
}

/// Operations on messages of up to `700 * scale` bytes, delivered up to `400 * scale` bytes
/// at a time.
fn op(scale: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<bool>(), 0..4usize, 0..700 * scale, any::<bool>()).prop_map(|(from_a, chan, len, in_place)| Op::Send { from_a, chan, len, in_place }),
        4 => (any::<bool>(), 0..4usize, 0..4usize).prop_map(|(at_a, chan, batch)| Op::Recv { at_a, chan, batch }),
        3 => (1..400 * scale, proptest::option::of((any::<bool>(), 0..4usize))).prop_map(|(bytes, take)| Op::Deliver { bytes, take }),
        1 => (any::<bool>(), 0..4usize).prop_map(|(from_a, chan)| Op::Close { from_a, chan }),
        3 => (any::<bool>(), 0..4usize).prop_map(|(at_a, chan)| Op::DeliverWhole { at_a, chan }),
    ]
}

/// Channels for messages of up to `700 * scale` bytes: packets of 8 to 256 bytes times
/// `scale` (from 64 on, packets the parser takes piece by piece when they arrive cut).
fn options(scale: usize) -> impl Strategy<Value = ChannelOptions> {
    let shift = scale.trailing_zeros();
    let sc = scale as u32;
    (3 + shift..9 + shift, 700 * sc..3000 * sc, any::<bool>()).prop_map(
        move |(shift, buf, sync)| ChannelOptions {
            packet_size: 1 << shift,
            recv_buffer: buf,
            max_message: 700 * u64::from(sc),
            send_mode: if sync {
                SendMode::Sync
            } else {
                SendMode::Async
            },
        },
    )
}

/// Channel ids on both sides, learned from open events, by channel index.
struct Ids {
    a: [u32; 4],
    b: [Option<u32>; 4],
    a_known: [bool; 4],
}

fn learn(conn: &mut Connection, names: &mut HashMap<String, u32>) {
    while let Some(ev) = conn.poll_event() {
        if let Event::Opened { channel, name, .. } = ev {
            names.insert(name, channel);
        }
    }
}

fn payload(from_a: bool, chan: usize, seq: u32, len: usize) -> Vec<u8> {
    let tag = [
        u8::from(from_a),
        chan as u8,
        (seq & 0xff) as u8,
        (seq >> 8) as u8,
    ];
    (0..len).map(|i| tag[i % 4] ^ (i / 4) as u8).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
    #[test]
    fn every_message_exactly_once_in_order(
        opts in proptest::collection::vec(options(1), 4),
        ops in proptest::collection::vec(op(1), 1..300),
    ) {
        exchange(opts, ops)?;
    }

    /// The same with packets of 512 B to 16 KiB, delivered in pieces of up to 25 KiB: frames
    /// cut anywhere, their payload taken as it arrives.
    #[test]
    fn every_large_message_exactly_once_in_order(
        opts in proptest::collection::vec(options(64), 4),
        ops in proptest::collection::vec(op(64), 1..300),
    ) {
        exchange(opts, ops)?;
    }
}

/// Runs `ops` over a pair with channels of `opts` and checks what arrived.
fn exchange(opts: Vec<ChannelOptions>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut p = Pair::new();
    let mut names_b = HashMap::new();
    let mut names_a = HashMap::new();
    // Channels 0..3 opened by a, channel 3 opened by b.
    let mut ids = Ids {
        a: [0; 4],
        b: [None; 4],
        a_known: [true, true, true, false],
    };
    for (i, o) in opts.iter().enumerate().take(3) {
        ids.a[i] = p.a.open(&format!("c{i}"), *o).unwrap();
    }
    ids.b[3] = Some(p.b.open("c3", opts[3]).unwrap());
    // sent[dir][chan], got[dir][chan]; dir 0 = a->b, 1 = b->a.
    let mut sent = vec![vec![Vec::<Vec<u8>>::new(); 4]; 2];
    let mut got = vec![vec![Vec::<Vec<u8>>::new(); 4]; 2];
    let mut closed = [[false; 4]; 2];
    let mut ended = [[false; 4]; 2];

    let resolve =
        |ids: &mut Ids, names_a: &HashMap<String, u32>, names_b: &HashMap<String, u32>| {
            for i in 0..4 {
                let n = format!("c{i}");
                if ids.b[i].is_none() {
                    ids.b[i] = names_b.get(&n).copied();
                }
                if !ids.a_known[i] {
                    if let Some(&id) = names_a.get(&n) {
                        ids.a[i] = id;
                        ids.a_known[i] = true;
                    }
                }
            }
        };

    // `batch` 0 receives one message with `recv`, more takes up to that many with
    // `recv_each`.
    let recv_some =
        |conn: &mut Connection, id: u32, batch: usize, got: &mut Vec<Vec<u8>>, ended: &mut bool| {
            if batch > 0 {
                let (n, end) = conn
                    .recv_each(id, batch, |m| {
                        assert!(!*ended, "message after end");
                        got.push(m.to_vec())
                    })
                    .unwrap();
                assert!(n <= batch);
                match end {
                    BatchEnd::End => *ended = true,
                    BatchEnd::Full => assert_eq!(n, batch),
                    BatchEnd::Empty => {}
                    BatchEnd::Loan => panic!("no loans were sent"),
                }
                return;
            }
            match conn.recv(id).unwrap() {
                Received::Message(m) => {
                    assert!(!*ended, "message after end");
                    got.push(m)
                }
                Received::End => *ended = true,
                Received::Empty => {}
                Received::Loan { .. } => panic!("no loans were sent"),
            }
        };

    for op in ops {
        learn(&mut p.a, &mut names_a);
        learn(&mut p.b, &mut names_b);
        resolve(&mut ids, &names_a, &names_b);
        match op {
            Op::Send {
                from_a,
                chan,
                len,
                in_place,
            } => {
                let dir = usize::from(!from_a);
                let id = if from_a {
                    ids.a_known[chan].then_some(ids.a[chan])
                } else {
                    ids.b[chan]
                };
                let Some(id) = id else { continue };
                let msg = payload(from_a, chan, sent[dir][chan].len() as u32, len);
                p.collect();
                let (conn, wire) = if from_a {
                    (&mut p.a, &mut p.a_to_b)
                } else {
                    (&mut p.b, &mut p.b_to_a)
                };
                // In place when it can go now, else the usual way (as the link does).
                let placed = match conn.send_in_place(id, &msg).filter(|_| in_place) {
                    Some(permit) => {
                        let at = wire.len();
                        wire.resize(at + permit.frames().len(), 0);
                        permit.frames().write_to(&mut wire[at..]);
                        permit.commit();
                        true
                    }
                    None => false,
                };
                let r = if placed { Ok(0) } else { conn.send(id, &msg) };
                match r {
                    Ok(_) => sent[dir][chan].push(msg),
                    Err(CallError::Blocked) | Err(CallError::Closed) => {}
                    Err(e) => panic!("send failed: {e}"),
                }
            }
            Op::Recv { at_a, chan, batch } => {
                let dir = usize::from(at_a);
                if at_a && ids.a_known[chan] {
                    recv_some(
                        &mut p.a,
                        ids.a[chan],
                        batch,
                        &mut got[dir][chan],
                        &mut ended[dir][chan],
                    );
                } else if let (false, Some(id)) = (at_a, ids.b[chan]) {
                    recv_some(
                        &mut p.b,
                        id,
                        batch,
                        &mut got[dir][chan],
                        &mut ended[dir][chan],
                    );
                }
            }
            Op::Deliver { bytes, take: None } => p.deliver(bytes),
            Op::Deliver {
                bytes,
                take: Some((at_a, chan)),
            } => {
                let dir = usize::from(at_a);
                let id = if at_a {
                    ids.a_known[chan].then_some(ids.a[chan])
                } else {
                    ids.b[chan]
                };
                let Some(id) = id else {
                    p.deliver(bytes);
                    continue;
                };
                let (got, ended) = (&mut got[dir][chan], ended[dir][chan]);
                let mut n = 0;
                let took = p.deliver_taking(bytes, at_a, id, &mut |m| {
                    assert!(!ended, "message after end");
                    n += 1;
                    got.push(m.to_vec());
                });
                prop_assert_eq!(took, n == 1);
                prop_assert!(n <= 1);
            }
            Op::DeliverWhole { at_a, chan } => {
                let dir = usize::from(at_a);
                let id = if at_a {
                    ids.a_known[chan].then_some(ids.a[chan])
                } else {
                    ids.b[chan]
                };
                // A channel this side does not know yet: offered as channel 0 (never taken).
                if let Some(m) = p.deliver_whole(at_a, id.unwrap_or(0)) {
                    prop_assert!(id.is_some(), "taken for an unknown channel");
                    prop_assert!(!ended[dir][chan], "message after end");
                    got[dir][chan].push(m);
                }
            }
            Op::Close { from_a, chan } => {
                let dir = usize::from(!from_a);
                let id = if from_a {
                    ids.a_known[chan].then_some(ids.a[chan])
                } else {
                    ids.b[chan]
                };
                if let Some(id) = id {
                    let conn = if from_a { &mut p.a } else { &mut p.b };
                    conn.close(id).unwrap();
                    closed[dir][chan] = true;
                }
            }
        }
    }
    // Drain everything that was sent.
    for _ in 0..10_000 {
        p.settle();
        learn(&mut p.a, &mut names_a);
        learn(&mut p.b, &mut names_b);
        resolve(&mut ids, &names_a, &names_b);
        let mut progress = false;
        for chan in 0..4 {
            if let Some(id) = ids.b[chan] {
                let before = got[0][chan].len();
                recv_some(&mut p.b, id, chan, &mut got[0][chan], &mut ended[0][chan]);
                progress |= got[0][chan].len() > before;
            }
            if ids.a_known[chan] {
                let before = got[1][chan].len();
                recv_some(
                    &mut p.a,
                    ids.a[chan],
                    chan,
                    &mut got[1][chan],
                    &mut ended[1][chan],
                );
                progress |= got[1][chan].len() > before;
            }
        }
        if !progress {
            break;
        }
    }
    for dir in 0..2 {
        for chan in 0..4 {
            prop_assert_eq!(
                &got[dir][chan],
                &sent[dir][chan],
                "dir {} chan {}",
                dir,
                chan
            );
        }
    }
    // A closed direction shows end of stream once drained.
    for (chan, _) in closed[0].iter().enumerate().filter(|(_, c)| **c) {
        if let Some(id) = ids.b[chan] {
            prop_assert!(p.b.readable(id));
            prop_assert_eq!(p.b.recv(id).unwrap(), Received::End);
        }
    }
    Ok(())
}
