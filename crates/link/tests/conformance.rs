//! One conformance suite, run against every transport.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::{bytes, echo_server, server};
use offhost_link::Wait;
use offhost_link::{select, ChannelOptions, LinkError, SendMode, Server};

const T: Duration = Duration::from_secs(20);

fn opts(packet_size: usize, buf: u32) -> ChannelOptions {
    ChannelOptions {
        packet_size,
        recv_buffer: buf,
        max_message: u64::from(buf),
        send_mode: SendMode::Async,
    }
}

fn echo_of_every_size(transport: &str) {
    let (url, _dir) = echo_server(transport);
    let s = common::connect(&url).unwrap();
    let ch = s.open("echo", opts(4096, 1 << 20)).unwrap();
    for (i, len) in [0usize, 1, 7, 8, 9, 4095, 4096, 4097, 100_000, 1 << 20]
        .into_iter()
        .enumerate()
    {
        let msg = bytes(len, i as u64);
        ch.send(&msg).unwrap();
        assert_eq!(
            ch.recv_wait(T).unwrap().expect("message"),
            msg,
            "size {len}"
        );
    }
    ch.close().unwrap();
    assert_eq!(
        ch.recv_wait(T).unwrap(),
        None,
        "echo ends the stream after ours"
    );
}

fn many_channels_many_sessions(transport: &str) {
    let (url, _dir) = echo_server(transport);
    std::thread::scope(|scope| {
        for s in 0..3 {
            let url = url.clone();
            scope.spawn(move || {
                let session = common::connect(&url).unwrap();
                let chans: Vec<_> = (0..4)
                    .map(|c| session.open(&format!("c{c}"), opts(64, 8192)).unwrap())
                    .collect();
                std::thread::scope(|inner| {
                    for (c, ch) in chans.iter().enumerate() {
                        inner.spawn(move || {
                            for i in 0..200u64 {
                                let msg = bytes(
                                    (i as usize * 37) % 3000,
                                    s * 1_000_000 + c as u64 * 1000 + i,
                                );
                                ch.send(&msg).unwrap();
                                assert_eq!(ch.recv_wait(T).unwrap().unwrap(), msg);
                            }
                        });
                    }
                });
            });
        }
    });
}

/// Small messages (one packet each: on shm a waiting receiver takes them as they are parsed)
/// on four channels of one session, from four threads at once, each thread with its own mix
/// of receive calls: every echo comes back whole, in order, on its own channel.
fn threads_share_a_session_with_small_messages(transport: &str) {
    let (url, _dir) = echo_server(transport);
    let session = common::connect(&url).unwrap();
    let chans: Vec<_> = (0..4)
        .map(|c| session.open(&format!("small{c}"), opts(64, 4096)).unwrap())
        .collect();
    std::thread::scope(|scope| {
        for (c, ch) in chans.iter().enumerate() {
            scope.spawn(move || {
                let mut buf = Vec::new();
                for i in 0..500u64 {
                    let msg = bytes((i as usize * 13 + c) % 65, c as u64 * 10_000 + i);
                    ch.send(&msg).unwrap();
                    let got = match (c + i as usize) % 3 {
                        0 => ch.recv_wait(T).unwrap().unwrap(),
                        1 => {
                            assert!(ch.recv_into(&mut buf, T).unwrap());
                            buf.clone()
                        }
                        _ => ch.recv_message(Wait::Forever).unwrap().unwrap().into_vec(),
                    };
                    assert_eq!(got, msg, "channel {c} message {i}");
                }
            });
        }
    });
}

fn pipelined_stream_keeps_order(transport: &str) {
    let (url, _dir) = echo_server(transport);
    let s = common::connect(&url).unwrap();
    let ch = s.open("stream", opts(1024, 64 * 1024)).unwrap();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for i in 0..2000u32 {
                ch.send(&i.to_le_bytes().repeat(100)).unwrap();
            }
        });
        for i in 0..2000u32 {
            assert_eq!(
                ch.recv_wait(T).unwrap().unwrap(),
                i.to_le_bytes().repeat(100)
            );
        }
    });
}

/// Large messages of two parts (a header and a body, sent without joining them) from several
/// threads on one session, more than the socket buffers hold, so that writes straight from
/// the messages are cut short and the rest waits for the flusher: every message comes back
/// whole, in order on its channel.
fn parts_from_several_threads_keep_order_under_a_full_socket(transport: &str) {
    let (url, _dir) = echo_server(transport);
    let s = common::connect(&url).unwrap();
    let chans: Vec<_> = (0..3)
        .map(|c| s.open(&format!("parts{c}"), opts(16384, 4 << 20)).unwrap())
        .collect();
    std::thread::scope(|scope| {
        for (c, ch) in chans.iter().enumerate() {
            scope.spawn(move || {
                for i in 0..60u64 {
                    let body = bytes((i as usize * 7919 + c * 131) % 200_000, c as u64 * 1000 + i);
                    let head = [c as u8, i as u8];
                    ch.send_parts(&[&head, &body], T).unwrap();
                }
            });
            scope.spawn(move || {
                // Read late: the echoes fill the socket meanwhile (three windows of 4 MiB are
                // more than loopback buffers hold).
                std::thread::sleep(Duration::from_millis(300));
                for i in 0..60u64 {
                    let body = bytes((i as usize * 7919 + c * 131) % 200_000, c as u64 * 1000 + i);
                    let got = ch.recv_wait(T).unwrap().expect("message");
                    assert_eq!(&got[..2], &[c as u8, i as u8], "channel {c} message {i}");
                    assert!(
                        got[2..] == body[..],
                        "channel {c} message {i}: body differs"
                    );
                }
            });
        }
    });
}

fn too_large_is_an_error_at_the_call(transport: &str) {
    let (url, _dir) = echo_server(transport);
    let s = common::connect(&url).unwrap();
    let ch = s.open("big", opts(64, 1000)).unwrap();
    assert!(matches!(
        ch.send(&[0; 1001]),
        Err(LinkError::TooLarge {
            len: 1001,
            max: 1000
        })
    ));
    assert!(matches!(
        ch.send_wait(&[0; 1001], Wait::Never),
        Err(LinkError::TooLarge { .. })
    ));
    assert!(matches!(
        ch.send_parts(&[&[0; 1000], &[0]], Wait::Never),
        Err(LinkError::TooLarge { len: 1001, .. })
    ));
    // Parts go as one message (a fresh channel has credit for it).
    ch.send_parts(&[&[2; 600], &[3; 400]], Wait::Never).unwrap();
    let mut joined = vec![2; 600];
    joined.extend_from_slice(&[3; 400]);
    assert_eq!(ch.recv_wait(T).unwrap().unwrap(), joined);
    ch.send(&[1; 1000]).unwrap();
    assert_eq!(ch.recv_wait(T).unwrap().unwrap(), vec![1; 1000]);
}

fn timeouts_and_non_blocking_calls(transport: &str) {
    let (server, _dir) = server(transport);
    let url = server.url().to_owned();
    let engine = std::thread::spawn(move || {
        let s = server.accept().unwrap();
        let ch = s.accept().unwrap();
        // Never read: the host's credit runs out.
        assert_eq!(ch.recv_wait(T).unwrap().unwrap(), b"go");
        std::thread::sleep(Duration::from_millis(300));
        ch.send(b"late").unwrap();
        (s, ch)
    });
    let s = common::connect(&url).unwrap();
    let ch = s.open("t", opts(64, 256)).unwrap();
    assert!(matches!(
        ch.recv_wait(Wait::Never),
        Err(LinkError::WouldBlock)
    ));
    assert!(matches!(
        ch.recv_wait(Duration::from_millis(50)),
        Err(LinkError::Timeout)
    ));
    // Receiving into a buffer keeps the deadline too (on shm it first waits without the
    // general loop, for at most the time left), and leaves the buffer alone.
    let mut buf = b"kept".to_vec();
    let start = std::time::Instant::now();
    assert!(matches!(
        ch.recv_into(&mut buf, Duration::from_millis(50)),
        Err(LinkError::Timeout)
    ));
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(buf, b"kept");
    assert!(matches!(
        ch.recv_into(&mut buf, Wait::Never),
        Err(LinkError::WouldBlock)
    ));
    ch.send(b"go").unwrap();
    assert_eq!(ch.recv_wait(T).unwrap().unwrap(), b"late");
    // The engine keeps its end but does not read: fill the window, then block.
    let mut sent = 2;
    while sent + 64 <= 256 {
        ch.send_wait(&[0; 64], Wait::Never).unwrap();
        sent += 64;
    }
    assert!(matches!(
        ch.send_wait(&[0; 64], Wait::Never),
        Err(LinkError::WouldBlock)
    ));
    assert!(matches!(
        ch.send_parts(&[&[0; 32], &[0; 32]], Wait::Never),
        Err(LinkError::WouldBlock)
    ));
    assert!(matches!(
        ch.send_wait(&[0; 64], Duration::from_millis(50)),
        Err(LinkError::Timeout)
    ));
    drop(engine.join().unwrap());
}

fn synchronous_send_waits_for_the_receiver(transport: &str) {
    let (server, _dir) = server(transport);
    let url = server.url().to_owned();
    let (go_tx, go_rx) = crossbeam_channel::bounded::<()>(1);
    let engine = std::thread::spawn(move || {
        let s = server.accept().unwrap();
        let ch = s.accept().unwrap();
        go_rx.recv().unwrap();
        assert_eq!(ch.recv_wait(T).unwrap().unwrap(), b"one");
        assert_eq!(ch.recv_wait(T).unwrap().unwrap(), b"two");
        (s, ch)
    });
    let s = common::connect(&url).unwrap();
    let ch = s
        .open(
            "sync",
            ChannelOptions {
                send_mode: SendMode::Sync,
                ..ChannelOptions::default()
            },
        )
        .unwrap();
    // The receiver has not taken it: the rendezvous does not happen.
    assert!(matches!(
        ch.send_wait(b"one", Duration::from_millis(200)),
        Err(LinkError::Timeout)
    ));
    go_tx.send(()).unwrap();
    ch.send(b"two").unwrap();
    drop(engine.join().unwrap());
}

fn select_returns_the_ready_channel(transport: &str) {
    let (server, _dir) = server(transport);
    let url = server.url().to_owned();
    let engine = std::thread::spawn(move || {
        let s = server.accept().unwrap();
        let a = s.accept().unwrap();
        let b = s.accept().unwrap();
        let c = s.accept().unwrap();
        assert_eq!(b.name(), "b");
        b.send(b"on b").unwrap();
        assert_eq!(c.recv_wait(T).unwrap().unwrap(), b"done");
        a.send(b"on a").unwrap();
        (s, a, b, c)
    });
    let s = common::connect(&url).unwrap();
    let a = s.open("a", ChannelOptions::default()).unwrap();
    let b = s.open("b", ChannelOptions::default()).unwrap();
    let c = s.open("c", ChannelOptions::default()).unwrap();
    assert!(matches!(
        select(&[&a, &c], Some(Duration::from_millis(50))),
        Err(LinkError::Timeout)
    ));
    assert_eq!(select(&[&a, &b], Some(T)).unwrap(), 1);
    assert_eq!(b.recv().unwrap().unwrap(), b"on b");
    c.send(b"done").unwrap();
    assert_eq!(select(&[&a, &b], Some(T)).unwrap(), 0);
    assert_eq!(a.recv().unwrap().unwrap(), b"on a");
    assert!(matches!(select(&[], Some(T)), Err(LinkError::BadSelect)));
    // Nothing ready and no time to wait: the ALT's default branch.
    assert!(matches!(
        select(&[&a, &b], Some(Duration::ZERO)),
        Err(LinkError::WouldBlock)
    ));
    drop(engine.join().unwrap());
}

fn read_write_adapters_carry_a_byte_stream(transport: &str) {
    let (url, _dir) = echo_server(transport);
    let s = common::connect(&url).unwrap();
    let ch = s.open("bytes", ChannelOptions::default()).unwrap();
    let data = bytes(3 << 20 | 12345, 99);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut w = ch.writer();
            for piece in data.chunks(70_001) {
                w.write_all(piece).unwrap();
            }
            w.finish().unwrap();
        });
        let mut back = Vec::new();
        ch.reader().read_to_end(&mut back).unwrap();
        assert!(back == data, "echoed stream differs");
    });
}

fn slow_channel_does_not_stall_others(transport: &str) {
    let (server, _dir) = server(transport);
    let url = server.url().to_owned();
    let engine = std::thread::spawn(move || {
        let s = server.accept().unwrap();
        let slow = s.accept().unwrap();
        let fast = s.accept().unwrap();
        offhost_link::echo_channel(&fast).unwrap();
        (s, slow)
    });
    let s = common::connect(&url).unwrap();
    let slow = s.open("slow", opts(4096, 64 * 1024)).unwrap();
    let fast = s.open("fast", opts(4096, 64 * 1024)).unwrap();
    let mut n = 0;
    while slow.send_wait(&[7; 4096], Wait::Never).is_ok() {
        n += 1;
        assert!(n <= 16, "credit exceeded the receive buffer");
    }
    assert_eq!(n, 16);
    for i in 0..500u32 {
        let msg = i.to_le_bytes().repeat(1000);
        fast.send_wait(&msg, T).unwrap();
        assert_eq!(fast.recv_wait(T).unwrap().unwrap(), msg);
    }
    fast.close().unwrap();
    drop(engine.join().unwrap());
}

fn peer_close_ends_blocked_calls(transport: &str) {
    let (server, _dir) = server(transport);
    let url = server.url().to_owned();
    let engine = std::thread::spawn(move || {
        let s = server.accept().unwrap();
        let ch = s.accept().unwrap();
        assert_eq!(ch.recv_wait(T).unwrap().unwrap(), b"hello");
        std::thread::sleep(Duration::from_millis(200));
        s.close();
        drop(ch);
    });
    let s = common::connect(&url).unwrap();
    let ch = s.open("bye", ChannelOptions::default()).unwrap();
    ch.send(b"hello").unwrap();
    // Blocked in recv when the engine says goodbye: end of stream, then sends fail.
    assert_eq!(ch.recv_wait(T).unwrap(), None);
    engine.join().unwrap();
    let r = (0..100)
        .map(|_| ch.send_wait(&[0; 1000], T))
        .find(|r| r.is_err());
    assert!(matches!(r, Some(Err(LinkError::PeerGone))), "{r:?}");
    assert!(matches!(
        s.open("again", ChannelOptions::default()),
        Err(LinkError::PeerGone)
    ));
}

/// A receiver that has taken its messages keeps nothing from others: on shm the reading half
/// stays parked with the channel's last receiver between messages, and any other call (a
/// select, a receive on another channel, a close) must get it back at once.
fn a_finished_receiver_keeps_nothing_from_others(transport: &str) {
    let (server, _dir) = server(transport);
    let url = server.url().to_owned();
    let (go_tx, go_rx) = crossbeam_channel::bounded::<&str>(1);
    let engine = std::thread::spawn(move || {
        let s = server.accept().unwrap();
        let a = s.accept().unwrap();
        let b = s.accept().unwrap();
        for i in 0..10 {
            a.send(format!("a{i}").as_bytes()).unwrap();
        }
        for step in go_rx {
            match step {
                "b0" => b.send(b"b0").unwrap(),
                "b1 then a10" => {
                    b.send(b"b1").unwrap();
                    a.send(b"a10").unwrap();
                }
                _ => break,
            }
        }
        (s, a, b)
    });
    let s = common::connect(&url).unwrap();
    let a = s.open("a", ChannelOptions::default()).unwrap();
    let b = s.open("b", ChannelOptions::default()).unwrap();
    let quick = Duration::from_secs(1);
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut buf = Vec::new();
                for i in 0..10 {
                    assert!(a.recv_into(&mut buf, T).unwrap());
                    assert_eq!(buf, format!("a{i}").as_bytes());
                }
            })
            .join()
            .unwrap();
    });
    // The receiver of `a` is done; another thread's select sees `b` at once.
    go_tx.send("b0").unwrap();
    let start = std::time::Instant::now();
    assert_eq!(select(&[&b], Some(T)).unwrap(), 0);
    assert!(start.elapsed() < quick, "select took {:?}", start.elapsed());
    assert_eq!(b.recv_wait(Wait::Never).unwrap().unwrap(), b"b0");
    // A message of `b` ahead of `a`'s: `a`'s receiver stores it and goes on to its own.
    let mut buf = Vec::new();
    go_tx.send("b1 then a10").unwrap();
    assert!(a.recv_into(&mut buf, T).unwrap());
    assert_eq!(buf, b"a10");
    let start = std::time::Instant::now();
    assert_eq!(b.recv_wait(T).unwrap().unwrap(), b"b1");
    assert!(start.elapsed() < quick, "recv took {:?}", start.elapsed());
    // Closing the session ends a receive blocked on `a`, and later calls fail at once.
    std::thread::scope(|scope| {
        let blocked = scope.spawn(|| {
            let start = std::time::Instant::now();
            let r = a.recv_into(&mut buf, T);
            (r, start.elapsed())
        });
        std::thread::sleep(Duration::from_millis(100));
        s.close();
        let (r, took) = blocked.join().unwrap();
        assert!(r.is_err(), "{r:?}");
        assert!(
            took < Duration::from_secs(2),
            "a blocked receive took {took:?}"
        );
    });
    assert!(a.recv_wait(Wait::Never).is_err());
    drop(go_tx);
    drop(engine.join().unwrap());
}

/// Messages received at an offset (`recv_into_at`) come with that many zero bytes in front,
/// whatever path they take (one packet or several, a loan on shm, a buffer that held a longer
/// message before), and the same offset again after a receive at another.
fn receiving_at_an_offset_keeps_room_in_front(transport: &str) {
    let (url, _dir) = echo_server(transport);
    let s = common::connect(&url).unwrap();
    let ch = s.open("front", opts(4096, 1 << 20)).unwrap();
    let mut buf = vec![0xee; 200_000];
    for (i, (len, front)) in [
        (100_000, 63),
        (0, 63),
        (1, 63),
        (4097, 0),
        (4097, 63),
        (70_000, 7),
    ]
    .into_iter()
    .enumerate()
    {
        let msg = bytes(len, i as u64);
        ch.send(&msg).unwrap();
        if i % 2 == 0 {
            assert!(ch.recv_into_at(&mut buf, front, Wait::Forever).unwrap());
        } else {
            // The echo may not be back yet: look again until it is.
            let t = std::time::Instant::now();
            loop {
                match ch.recv_into_at(&mut buf, front, Wait::Never) {
                    Err(LinkError::WouldBlock) if t.elapsed() < T => {
                        std::thread::sleep(Duration::from_millis(1))
                    }
                    got => break assert!(got.unwrap()),
                }
            }
        }
        assert_eq!(buf.len(), front + len, "{transport}: size {len} at {front}");
        assert!(
            buf[..front].iter().all(|&b| b == 0),
            "{transport}: front {front}"
        );
        assert!(
            buf[front..] == msg[..],
            "{transport}: size {len} at {front}"
        );
    }
}

/// A receiver that takes a message and then leaves its session alone holds back the grant
/// that message earned only briefly (see `Driver::flush_taken`): a sender that needs it gets
/// it within the flusher's tick (its heartbeat flushes what waits), not when the receiver
/// next calls.
fn a_grant_held_back_reaches_a_sender_that_needs_it(transport: &str) {
    let (server, _dir) = server(transport);
    let url = server.url().to_owned();
    let window: u32 = 64 << 10;
    let (took_tx, took_rx) = crossbeam_channel::bounded::<()>(1);
    let engine = std::thread::spawn(move || {
        let s = server.accept().unwrap();
        let ch = s.accept().unwrap();
        assert_eq!(ch.recv_wait(T).unwrap().unwrap().len(), 40 << 10);
        took_tx.send(()).unwrap();
        // Nothing is called on the session for a while.
        std::thread::sleep(Duration::from_secs(3));
        assert_eq!(ch.recv_wait(T).unwrap().unwrap().len(), 40 << 10);
        (s, ch)
    });
    let s = common::connect(&url).unwrap();
    let ch = s.open("held", opts(4096, window)).unwrap();
    ch.send(&bytes(40 << 10, 1)).unwrap();
    took_rx.recv().unwrap();
    // 24 KiB of credit left: this one needs the grant for the first.
    let start = std::time::Instant::now();
    ch.send_wait(&bytes(40 << 10, 2), Duration::from_secs(2))
        .unwrap_or_else(|e| panic!("{transport}: the grant did not come: {e}"));
    assert!(start.elapsed() < Duration::from_secs(2));
    drop(engine.join().unwrap());
}

macro_rules! conformance {
    ($($transport:ident),*) => {$(
        mod $transport {
            const TR: &str = stringify!($transport);
            #[test] fn echo_of_every_size() { super::echo_of_every_size(TR) }
            #[test] fn many_channels_many_sessions() { super::many_channels_many_sessions(TR) }
            #[test] fn threads_share_a_session_with_small_messages() { super::threads_share_a_session_with_small_messages(TR) }
            #[test] fn pipelined_stream_keeps_order() { super::pipelined_stream_keeps_order(TR) }
            #[test] fn parts_from_several_threads_keep_order_under_a_full_socket() { super::parts_from_several_threads_keep_order_under_a_full_socket(TR) }
            #[test] fn too_large_is_an_error_at_the_call() { super::too_large_is_an_error_at_the_call(TR) }
            #[test] fn timeouts_and_non_blocking_calls() { super::timeouts_and_non_blocking_calls(TR) }
            #[test] fn synchronous_send_waits_for_the_receiver() { super::synchronous_send_waits_for_the_receiver(TR) }
            #[test] fn select_returns_the_ready_channel() { super::select_returns_the_ready_channel(TR) }
            #[test] fn read_write_adapters_carry_a_byte_stream() { super::read_write_adapters_carry_a_byte_stream(TR) }
            #[test] fn slow_channel_does_not_stall_others() { super::slow_channel_does_not_stall_others(TR) }
            #[test] fn peer_close_ends_blocked_calls() { super::peer_close_ends_blocked_calls(TR) }
            #[test] fn a_finished_receiver_keeps_nothing_from_others() { super::a_finished_receiver_keeps_nothing_from_others(TR) }
            #[test] fn receiving_at_an_offset_keeps_room_in_front() { super::receiving_at_an_offset_keeps_room_in_front(TR) }
            #[test] fn a_grant_held_back_reaches_a_sender_that_needs_it() { super::a_grant_held_back_reaches_a_sender_that_needs_it(TR) }
        }
    )*};
}

conformance!(mem, tcp, tls, unix, shm);

#[test]
fn a_cork_holds_a_sessions_messages_until_one_is_dropped() {
    for transport in ["mem", "tcp", "tls", "unix", "shm"] {
        let (server, _dir) = common::server(transport);
        let url = server.url().to_owned();
        // The server passes on what arrives, so that the client's session is left alone
        // (any call on it would write what waits).
        let (arrived, seen) = std::sync::mpsc::channel::<(String, Vec<u8>)>();
        std::thread::spawn(move || {
            let s = server.accept().unwrap();
            std::thread::scope(|scope| {
                for _ in 0..2 {
                    let ch = s.accept().unwrap();
                    let arrived = arrived.clone();
                    scope.spawn(move || {
                        while let Ok(Some(m)) = ch.recv() {
                            if arrived.send((ch.name().to_owned(), m)).is_err() {
                                return;
                            }
                        }
                    });
                }
            });
        });
        let s = common::connect(&url).unwrap();
        let ch = s.open("corked", opts(64, 4096)).unwrap();
        let other = s.open("other", opts(64, 4096)).unwrap();
        let outer = ch.cork();
        let inner = other.cork();
        assert!(
            outer.holds(&other) && inner.holds(&ch),
            "one session, one cork"
        );
        for i in 0..3u8 {
            ch.send_wait(&[i; 100], Wait::Never).unwrap();
        }
        other.send_wait(b"x", Wait::Never).unwrap();
        let wait = Duration::from_millis(200);
        assert!(
            seen.recv_timeout(wait).is_err(),
            "{transport}: a corked message went out"
        );
        // Dropping either cork writes all that waits, the other's messages too (holders
        // taking turns must never keep a session from writing), with no other call on it.
        drop(inner);
        let mut got: Vec<(String, Vec<u8>)> = (0..4)
            .map(|_| {
                seen.recv_timeout(T)
                    .expect("a corked message after a release")
            })
            .collect();
        let x = got.iter().position(|(n, _)| n == "other").expect("other's");
        assert_eq!(got.remove(x).1, b"x");
        for (i, (name, m)) in got.into_iter().enumerate() {
            assert_eq!(
                (name.as_str(), m),
                ("corked", vec![i as u8; 100]),
                "{transport}"
            );
        }
        // The cork still held holds what comes next, until it goes too.
        ch.send_wait(b"held", Wait::Never).unwrap();
        assert!(
            seen.recv_timeout(wait).is_err(),
            "{transport}: a message went out while a cork was still held"
        );
        drop(outer);
        assert_eq!(seen.recv_timeout(T).unwrap().1, b"held");
        // Uncorked, a message goes at once again.
        ch.send_wait(b"after", Wait::Never).unwrap();
        assert_eq!(seen.recv_timeout(T).unwrap().1, b"after");
    }
}

#[test]
fn batches_keep_order_and_respect_credit() {
    for transport in ["mem", "tcp", "tls", "unix", "shm"] {
        let (url, _dir) = echo_server(transport);
        let s = common::connect(&url).unwrap();
        // A window of 4 KiB: a batch of 64 KiB must wait for credit several times.
        let ch = s.open("batch", opts(64, 4096)).unwrap();
        let msgs: Vec<Vec<u8>> = (0..1024u32).map(|i| i.to_le_bytes().repeat(16)).collect();
        let refs: Vec<&[u8]> = msgs.iter().map(|m| m.as_slice()).collect();
        std::thread::scope(|scope| {
            scope.spawn(|| ch.send_batch(&refs).unwrap());
            let mut got = Vec::new();
            while got.len() < msgs.len() {
                assert!(ch.recv_batch(100, &mut got).unwrap() > 0);
            }
            assert!(got == msgs, "{transport}: batch order");
        });
        assert!(matches!(
            ch.send_batch(&[&[0; 4097]]),
            Err(LinkError::TooLarge { .. })
        ));
    }
}

/// An event limit on both sides of a shm session (the client's from its options, the
/// server's from its limits) coalesces wake-ups and loses nothing: a stream in order, and a
/// lone message in a ping-pong still arrives (after the delay); other transports ignore it.
#[test]
fn an_event_limit_on_both_sides_keeps_every_message() {
    let limit: offhost_shm::EventLimit = "16,2ms".parse().unwrap();
    assert_eq!(
        limit.to_string().parse::<offhost_shm::EventLimit>(),
        Ok(limit)
    );
    for transport in ["shm", "unix"] {
        let (url, _dir) = common::fresh_url(transport);
        let mut server = Server::bind(&url).unwrap();
        server.set_limits(offhost_link::Limits {
            event_limit: Some(limit),
            ..*server.limits()
        });
        let url = server.url().to_owned();
        let engine = std::thread::spawn(move || {
            let s = server.accept().unwrap();
            offhost_link::echo_channel(&s.accept().unwrap()).unwrap();
        });
        let options = offhost_link::LinkOptions::new().event_limit(Some(limit));
        let s = offhost_link::Session::connect_with(&url, &options).unwrap();
        let ch = s.open("stream", opts(1024, 64 * 1024)).unwrap();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for i in 0..500u32 {
                    ch.send(&i.to_le_bytes().repeat(10)).unwrap();
                }
            });
            for i in 0..500u32 {
                let got = ch.recv_wait(T).unwrap().unwrap();
                assert_eq!(got, i.to_le_bytes().repeat(10), "{transport} message {i}");
            }
        });
        for i in 0..20u8 {
            ch.send(&[i]).unwrap();
            assert_eq!(ch.recv_wait(T).unwrap().unwrap(), [i], "{transport}");
        }
        drop(ch);
        s.close();
        engine.join().unwrap();
    }
    for bad in ["0", "x", "8,0s", "8,2s", "8,soon"] {
        assert!(bad.parse::<offhost_shm::EventLimit>().is_err(), "{bad}");
    }
}

/// One select over channels of sessions on every transport at once: it returns the channel
/// that has a message, whichever session it is on; several ready ones each in turn; a zero
/// timeout with none ready is the default branch; a session that dies ends the select with
/// its error.
#[test]
fn select_spans_sessions_of_every_transport() {
    let transports = ["mem", "shm", "unix", "tcp", "tls"];
    let mut keep = Vec::new();
    let mut sessions = Vec::new();
    for t in transports {
        let (url, dir) = echo_server(t);
        keep.push(dir);
        sessions.push(common::connect(&url).unwrap());
    }
    let chans: Vec<_> = sessions
        .iter()
        .map(|s| s.open("alt", opts(1024, 64 * 1024)).unwrap())
        .collect();
    let refs: Vec<&offhost_link::Channel> = chans.iter().collect();
    assert!(matches!(
        select(&refs, Some(Duration::from_millis(50))),
        Err(LinkError::Timeout)
    ));
    assert!(matches!(
        select(&refs, Some(Duration::ZERO)),
        Err(LinkError::WouldBlock)
    ));
    // One ready at a time, on each transport in turn, while the select already waits.
    for (i, ch) in chans.iter().enumerate().rev() {
        std::thread::scope(|scope| {
            scope.spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                ch.send(transports[i].as_bytes()).unwrap();
            });
            assert_eq!(select(&refs, Some(T)).unwrap(), i, "{}", transports[i]);
        });
        assert_eq!(ch.recv_wait(T).unwrap().unwrap(), transports[i].as_bytes());
    }
    // Two ready at once (unix and tls): repeated selects return both, not always the first.
    for i in [2, 4] {
        chans[i].send(b"both").unwrap();
        select(&[refs[i]], Some(T)).unwrap();
    }
    let picked: std::collections::BTreeSet<usize> =
        (0..8).map(|_| select(&refs, Some(T)).unwrap()).collect();
    assert_eq!(picked, [2, 4].into(), "fair among the ready ones");
    for i in [2, 4] {
        assert_eq!(chans[i].recv_wait(T).unwrap().unwrap(), b"both");
    }
    // A session that ends: its channel is ready with its end of stream, or the select fails
    // with the session's error; either way it does not wait out its time.
    sessions[1].close();
    let t0 = std::time::Instant::now();
    match select(&refs, Some(T)) {
        Ok(i) => assert_eq!(i, 1),
        Err(e) => assert!(!matches!(e, LinkError::Timeout), "{e}"),
    }
    assert!(t0.elapsed() < T);
}
