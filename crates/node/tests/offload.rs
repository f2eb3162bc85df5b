//! Off-host queues end to end in one process: two engines (alpha, beta) with their peer link
//! over loopback, hosts on shared memory, an in-host queue against an engine.

use std::sync::Arc;
use std::time::Duration;

use offhost_link::offload::{ChannelId, ErrorCode, HostQueue, OpenOptions, Outcome, RecvSize};
use offhost_link::peer::PeerConfig;
use offhost_link::{LinkOptions, Server};
use offhost_node::offload::{Offload, OffloadConfig};

static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

struct Engine {
    shm: String,
    url: String,
    offload: Arc<Offload>,
}

/// An engine named `name` with `peers`, serving hosts on an abstract shm socket and peer
/// links on plain tcp (loopback).
fn engine(name: &str, peers: &[(&str, &str)], tweak: impl FnOnce(&mut OffloadConfig)) -> Engine {
    engine_with(name, peers, tweak, None)
}

fn engine_with(
    name: &str,
    peers: &[(&str, &str)],
    tweak: impl FnOnce(&mut OffloadConfig),
    daemon: Option<Arc<offhost_node::daemon::Daemon>>,
) -> Engine {
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let shm = format!("@offload-test-{}-{n}-{name}", std::process::id());
    let opts = LinkOptions::new().insecure(true);
    let server = Server::bind_with("tcp:127.0.0.1:0", &opts).unwrap();
    let url = server.url().to_owned();
    let mut pc = PeerConfig::new(name).options(opts);
    for (p, u) in peers {
        pc = pc.peer(*p, *u);
    }
    let mut config = OffloadConfig::new(pc);
    tweak(&mut config);
    let offload = Offload::new(config, daemon.clone()).unwrap();
    let listener = offhost_shm::Listener::bind(&shm).unwrap();
    let o = offload.clone();
    std::thread::spawn(move || {
        o.serve_shm(listener, Arc::new(|s: offhost_link::Session| s.close()))
    });
    let o = offload.clone();
    std::thread::spawn(move || o.serve_links(&server, daemon));
    Engine {
        shm: format!("shm:{shm}"),
        url,
        offload,
    }
}

fn pattern(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|k| (k * 31 + i * 7) as u8).collect()
}

const T: Option<Duration> = Some(Duration::from_secs(20));

/// Streams `n` messages from `a` on `tx` to `b` on `rx`, small ones (which the engine writes a
/// batch at a time) with one of 200 KB in the middle, and checks that all arrive, in order,
/// within 30 s.
fn stream_small(
    a: &mut HostQueue,
    tx: ChannelId,
    b: &mut HostQueue,
    rx: ChannelId,
    n: usize,
    seed: usize,
) {
    let size = |i: usize| if i == n / 2 { 200_000 } else { (i * 37) % 3000 };
    for i in 0..n {
        b.push_recv(rx, RecvSize::Any, i as u64).unwrap();
    }
    b.submit().unwrap();
    let mut sent = 0;
    let mut got = Vec::new();
    let start = std::time::Instant::now();
    while got.len() < n {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{} of {n} small messages arrived",
            got.len()
        );
        while sent < n {
            match a.push_send(tx, &pattern(seed + sent, size(sent)), sent as u64) {
                Ok(()) => sent += 1,
                Err(_) => break,
            }
        }
        a.submit().unwrap();
        while a.pop().is_some() {}
        b.wait(1, Some(Duration::from_millis(20))).unwrap();
        while let Some(c) = b.pop() {
            assert!(matches!(c.outcome, Outcome::Ok(_)), "{c:?}");
            got.push(c.data.into_vec());
        }
        a.wait(0, Some(Duration::ZERO)).unwrap();
    }
    for (i, m) in got.iter().enumerate() {
        assert!(m == &pattern(seed + i, size(i)), "small message {i}");
    }
}

#[test]
fn hosts_streaming_at_once_on_one_peer_link_all_get_through() {
    // Each host's engine thread corks the one bulk session to beta while it takes a batch;
    // taking turns, they must never keep it from writing.
    let beta = engine("beta", &[], |_| {});
    let alpha = engine("alpha", &[("beta", &beta.url)], |_| {});
    std::thread::scope(|scope| {
        for k in 0..3usize {
            let (alpha, beta) = (&alpha, &beta);
            scope.spawn(move || {
                let mut a = HostQueue::connect(&alpha.shm).unwrap();
                let mut b = HostQueue::connect(&beta.shm).unwrap();
                let rx = b.open(&format!("s{k}"), OpenOptions::bulk()).unwrap();
                let tx = a.open(&format!("beta/s{k}"), OpenOptions::bulk()).unwrap();
                stream_small(&mut a, tx, &mut b, rx, 400, 10_000 * (k + 1));
            });
        }
    });
}

#[test]
fn messages_cross_two_engines_in_order_and_byte_exact() {
    let beta = engine("beta", &[], |_| {});
    let alpha = engine("alpha", &[("beta", &beta.url)], |_| {});
    let mut a = HostQueue::connect(&alpha.shm).unwrap();
    let mut b = HostQueue::connect(&beta.shm).unwrap();
    assert_eq!(a.mode(), "off-host");
    let rx = b.open("pet", OpenOptions::bulk()).unwrap();
    let tx = a.open("beta/pet", OpenOptions::bulk()).unwrap();
    // Inline ring records up to 16 KiB of body, pool buffers above (both sides of the line).
    let sizes = [
        0usize,
        1,
        64,
        4096,
        16 << 10,
        (16 << 10) + 1,
        65_000,
        70_000,
        300_000,
        1 << 20,
    ];
    for (i, &n) in sizes.iter().enumerate() {
        a.push_send(tx, &pattern(i, n), i as u64).unwrap();
    }
    let mut loan = a.loan(100_000).unwrap();
    loan.copy_from_slice(&pattern(99, 100_000));
    a.push_send_loan(tx, loan, 99).unwrap();
    a.submit().unwrap();
    // Receives posted after the messages arrived, and before: both work.
    for i in 0..=sizes.len() {
        b.push_recv(rx, RecvSize::Any, i as u64).unwrap();
    }
    b.submit().unwrap();
    let mut got = Vec::new();
    while got.len() < sizes.len() + 1 {
        b.wait(1, T).unwrap();
        while let Some(c) = b.pop() {
            assert!(matches!(c.outcome, Outcome::Ok(_)), "{c:?}");
            got.push(c.data.into_vec());
        }
    }
    for (i, &n) in sizes.iter().enumerate() {
        assert_eq!(got[i], pattern(i, n), "message {i} of {n} bytes");
    }
    assert_eq!(got[sizes.len()], pattern(99, 100_000));
    let mut done = 0;
    while done < sizes.len() + 1 {
        a.wait(1, T).unwrap();
        while let Some(c) = a.pop() {
            assert!(matches!(c.outcome, Outcome::Ok(_)), "{c:?}");
            done += 1;
        }
    }
    assert_eq!(a.outstanding(), 0);
    assert_eq!(a.bytes_in_flight(), 0);
    // A stream of small messages (the engine takes them in batches and writes those of a
    // batch together) with a large one among them: all of them, in order.
    stream_small(&mut a, tx, &mut b, rx, 300, 1000);
    // And back: beta's host answers alpha's over the link alpha made.
    let back = b.open("alpha/pet", OpenOptions::urgent()).unwrap();
    b.send(back, b"pong").unwrap();
    let m = a.recv(tx, T).unwrap().unwrap();
    assert_eq!(&*m, b"pong");
}

#[test]
fn local_channels_and_errors_come_back_as_completions() {
    let e = engine("solo", &[], |c| c.host.max_channels = 3);
    let mut h1 = HostQueue::connect(&e.shm).unwrap();
    let mut h2 = HostQueue::connect(&e.shm).unwrap();
    let a = h1.open("box", OpenOptions::bulk()).unwrap();
    let b = h2.open("box", OpenOptions::bulk()).unwrap();
    h1.send(a, b"hello").unwrap();
    assert_eq!(&*h2.recv(b, T).unwrap().unwrap(), b"hello");
    // A receive smaller than the message fails; the message stays for the next one.
    h1.send(a, &[7u8; 100]).unwrap();
    h2.push_recv(b, RecvSize::Max(10), 1).unwrap();
    h2.push_recv(b, RecvSize::Any, 2).unwrap();
    h2.submit().unwrap();
    h2.wait(2, T).unwrap();
    let c1 = h2.pop().unwrap();
    let c2 = h2.pop().unwrap();
    assert!(
        matches!(&c1.outcome, Outcome::Failed(f) if f.code == ErrorCode::TooLarge),
        "{c1:?}"
    );
    assert_eq!(c2.data.len(), 100);
    // Unknown peer, bad address.
    match h1.open("nowhere/x", OpenOptions::bulk()) {
        Err(offhost_link::offload::QueueError::Failed(f)) => {
            assert_eq!(f.code, ErrorCode::UnknownPeer, "{f}")
        }
        other => panic!("{other:?}"),
    }
    // Closing a channel ends its posted receives.
    h2.push_recv(b, RecvSize::Any, 3).unwrap();
    h2.submit().unwrap();
    h2.close(b).unwrap();
    h2.wait(1, T).unwrap();
    let c = h2.pop().unwrap();
    assert_eq!((c.tag, c.outcome), (3, Outcome::End));
    // The engine's channel budget (3 per host).
    let _x = h1.open("x", OpenOptions::bulk()).unwrap();
    let _y = h1.open("y", OpenOptions::bulk()).unwrap();
    assert!(h1.limits().max_channels == 3);
    assert!(matches!(
        h1.open("z", OpenOptions::bulk()),
        Err(offhost_link::offload::QueueError::Full("channels"))
    ));
}

#[test]
fn a_loan_waits_for_a_free_pool_buffer_at_most_its_timeout() {
    let e = engine("loans", &[], |_| {});
    let mut h = HostQueue::connect(&e.shm).unwrap();
    let buffers = offhost_link::offload::default_segment().pool_buffers as usize;
    let held: Vec<_> = (0..buffers).map(|_| h.loan(100).unwrap()).collect();
    let t = std::time::Instant::now();
    assert!(matches!(
        h.loan_within(100, Some(Duration::from_millis(100))),
        Err(offhost_link::offload::QueueError::Timeout)
    ));
    assert!(t.elapsed() >= Duration::from_millis(100));
    drop(held);
    assert!(h.loan_within(100, Some(Duration::from_secs(5))).is_ok());
}

#[test]
fn an_in_host_queue_talks_to_an_engine_with_the_same_api() {
    let beta = engine("beta", &[], |_| {});
    let mut b = HostQueue::connect(&beta.shm).unwrap();
    let rx = b.open("cam", OpenOptions::bulk()).unwrap();
    let mut a = HostQueue::in_host(
        PeerConfig::new("hostA")
            .peer("beta", &beta.url)
            .options(LinkOptions::new().insecure(true)),
    )
    .unwrap();
    assert_eq!(a.mode(), "in-host");
    let tx = a
        .open("beta/cam", OpenOptions::bulk().rate(50 << 20, 1 << 20))
        .unwrap();
    for i in 0..50 {
        a.push_send(tx, &pattern(i, 1000 + i * 997), i as u64)
            .unwrap();
    }
    a.submit().unwrap();
    for i in 0..50 {
        let m = b.recv(rx, T).unwrap().unwrap();
        assert_eq!(&*m, &pattern(i, 1000 + i * 997)[..], "message {i}");
    }
    let mut n = 0;
    while n < 50 {
        a.wait(1, T).unwrap();
        while let Some(c) = a.pop() {
            assert!(matches!(c.outcome, Outcome::Ok(_)), "{c:?}");
            n += 1;
        }
    }
    // The engine answers the in-host node over the link it made.
    let back = b.open("hostA/cam", OpenOptions::bulk()).unwrap();
    b.send(back, b"ack").unwrap();
    assert_eq!(&*a.recv(tx, T).unwrap().unwrap(), b"ack");
    assert!(beta.offload.peers().stats().sessions >= 1);
}

/// Regression: pings after a stream of small messages on the same lane got no answer.
#[test]
fn pings_still_cross_after_a_stream_on_the_same_lane() {
    let beta = engine("beta", &[], |_| {});
    let shm = beta.shm.clone();
    std::thread::spawn(move || {
        let mut b = HostQueue::connect(&shm).unwrap();
        let ping = b.open("ping", OpenOptions::bulk()).unwrap();
        let sink = b.open("sink", OpenOptions::bulk()).unwrap();
        let mut pong = None;
        for _ in 0..2 {
            b.push_recv(ping, RecvSize::Any, 1).unwrap();
        }
        for _ in 0..32 {
            b.push_recv(sink, RecvSize::Any, 2).unwrap();
        }
        b.submit().unwrap();
        loop {
            if b.wait(1, Some(Duration::from_secs(30))).unwrap() == 0 {
                return;
            }
            while let Some(c) = b.pop() {
                if c.op != offhost_link::offload::Op::Recv {
                    continue;
                }
                if c.channel == ping {
                    let p = *pong
                        .get_or_insert_with(|| b.open("hostA/pong", OpenOptions::bulk()).unwrap());
                    b.push_send(p, &c.data, 0).unwrap();
                }
                b.push_recv(c.channel, RecvSize::Any, 0).unwrap();
            }
            b.submit().unwrap();
        }
    });
    let mut a = HostQueue::in_host(
        PeerConfig::new("hostA")
            .peer("beta", &beta.url)
            .options(LinkOptions::new().insecure(true)),
    )
    .unwrap();
    let ping = a.open("beta/ping", OpenOptions::bulk()).unwrap();
    let pong = a.open("pong", OpenOptions::bulk()).unwrap();
    let sink = a.open("beta/sink", OpenOptions::bulk()).unwrap();
    let round = |a: &mut HostQueue, size: usize| {
        a.push_send(ping, &vec![1u8; size], 0).unwrap();
        a.push_recv(pong, RecvSize::Any, 9).unwrap();
        a.submit().unwrap();
        let mut got = false;
        while !got {
            assert!(a.wait(1, T).unwrap() > 0, "no answer to a {size}-byte ping");
            while let Some(c) = a.pop() {
                assert!(matches!(c.outcome, Outcome::Ok(_)), "{c:?}");
                if c.tag == 9 {
                    assert_eq!(c.data.len(), size);
                    got = true;
                }
            }
        }
    };
    for _ in 0..50 {
        round(&mut a, 64);
    }
    let msg = [5u8; 64];
    let (mut pushed, mut done) = (0, 0);
    while done < 20_000 {
        while pushed < 20_000 && a.outstanding() < 64 {
            a.push_send(sink, &msg, 0).unwrap();
            pushed += 1;
        }
        a.submit().unwrap();
        a.wait(1, T).unwrap();
        while let Some(c) = a.pop() {
            assert!(matches!(c.outcome, Outcome::Ok(_)), "{c:?}");
            done += 1;
        }
    }
    for size in [64, 4096, 65536] {
        round(&mut a, size);
    }
}

#[test]
fn a_remote_host_feeds_a_pipeline_through_its_host_in() {
    let daemon = offhost_node::daemon::Daemon::new(
        offhost_engine::Registry::with_builtins(),
        offhost_engine::EngineConfig::default(),
    );
    let beta = engine_with("beta", &[], |_| {}, Some(daemon));
    let alpha = engine("alpha", &[("beta", &beta.url)], |_| {});
    // The daemon's clients reach beta on the same listener as peer engines.
    let client =
        offhost_node::daemon::Client::connect_with(&beta.url, &LinkOptions::new().insecure(true))
            .unwrap();
    let sub = client
        .submit("host-in name=in >a:p(8,4096)\ncrc32c <a >b\nhost-out name=out <b\n")
        .unwrap();
    let output = client.open_output(sub.id, "out").unwrap();
    let mut a = HostQueue::connect(&alpha.shm).unwrap();
    let ch = a
        .open(&format!("beta/in/{}/in", sub.id), OpenOptions::bulk())
        .unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 241) as u8).collect();
    for part in data.chunks(7000) {
        a.send(ch, part).unwrap();
    }
    a.send(ch, b"").unwrap(); // the end of that input
    let mut got = Vec::new();
    while let Some(m) = output.recv_wait(Duration::from_secs(20)).unwrap() {
        got.extend_from_slice(&m);
    }
    assert_eq!(got, data);
    let v = client.wait(sub.id).unwrap();
    assert_eq!(v.state, "finished", "{v}");
    // A pipeline input that does not exist is refused, and says so.
    let bad = a.open("beta/in/99/in", OpenOptions::bulk()).unwrap();
    match a.send(bad, b"x") {
        Err(offhost_link::offload::QueueError::Failed(f)) => {
            assert_eq!(f.code, ErrorCode::Refused, "{f}");
            assert!(f.reason.contains("no pipeline 99"), "{f}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn engine_budgets_refuse_hosts_and_urgent_channels_get_their_own_session() {
    let beta = engine("beta", &[], |_| {});
    let alpha = engine("alpha", &[("beta", &beta.url)], |c| c.max_hosts = 1);
    let mut a = HostQueue::connect(&alpha.shm).unwrap();
    match HostQueue::connect(&alpha.shm) {
        Err(offhost_link::offload::QueueError::Refused(why)) => {
            assert!(why.contains("1 hosts at most"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    let bulk = a.open("beta/x", OpenOptions::bulk()).unwrap();
    let urgent = a.open("beta/y", OpenOptions::urgent()).unwrap();
    a.send(bulk, b"1").unwrap();
    assert_eq!(alpha.offload.peers().stats().sessions, 1);
    a.send(urgent, b"2").unwrap();
    assert_eq!(
        alpha.offload.peers().stats().sessions,
        2,
        "an urgent lane of its own"
    );
    // The host's outstanding budget is the engine's: pushes beyond it are refused at once.
    let limits = a.limits();
    let mut pushed = 0;
    let err = loop {
        match a.push_recv(bulk, RecvSize::Any, 0) {
            Ok(()) => pushed += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(pushed, limits.max_outstanding as usize);
    assert!(
        matches!(err, offhost_link::offload::QueueError::Full(_)),
        "{err}"
    );
}

/// A host writing its own records on the rings (as a hostile one would; the library keeps
/// to the limits by itself): said hello, and answered.
struct RawHost {
    ep: offhost_shm::Endpoint,
}

impl RawHost {
    fn connect(e: &Engine) -> RawHost {
        let path = e.shm.strip_prefix("shm:").unwrap();
        let ep = offhost_shm::connect(path, &offhost_shm::Config::default()).unwrap();
        let mut h = RawHost { ep };
        h.submit(offhost_proto::offload::Submission::Hello {
            version: offhost_proto::offload::VERSION,
        });
        let (c, _) = h.next();
        assert_eq!(
            c.status,
            offhost_proto::offload::Status::Ok,
            "hello answered"
        );
        h
    }

    fn submit(&mut self, s: offhost_proto::offload::Submission<'_>) {
        let mut rec = vec![0u8; s.encoded_len()];
        s.encode(&mut rec);
        self.ep.sender().send(&rec, T).unwrap();
    }

    /// The next completion's header and body (as text).
    fn next(&mut self) -> (offhost_proto::offload::CompletionHeader, String) {
        use offhost_proto::offload::{CompletionHeader, HEADER};
        let r = self.ep.receiver().recv(T).unwrap().bytes().to_vec();
        let h = CompletionHeader::decode(r[..HEADER].try_into().unwrap()).unwrap();
        (h, String::from_utf8_lossy(&r[HEADER..]).into_owned())
    }

    fn open(&mut self, handle: u32, address: &str) {
        self.submit(offhost_proto::offload::Submission::Open {
            handle,
            id: u64::from(handle),
            urgent: false,
            rate: 0,
            burst: 0,
            address,
        });
        let (c, why) = self.next();
        assert_eq!(c.status, offhost_proto::offload::Status::Ok, "open: {why}");
    }
}

/// A host that ignores the largest message the hello told it gets `TooLarge` for a send on a
/// local channel, which would otherwise be copied into the engine's memory whatever its size.
#[test]
fn a_local_send_over_the_largest_message_fails_too_large() {
    use offhost_proto::offload::{Status, Submission};
    let e = engine("strict", &[], |c| c.peers.max_message = 1000);
    let mut h = RawHost::connect(&e);
    h.open(1, "box");
    let big = vec![5u8; 2000];
    h.submit(Submission::Send {
        handle: 1,
        id: 2,
        data: &big,
    });
    let (c, why) = h.next();
    assert_eq!(c.id, 2);
    assert_eq!(c.status, Status::Error(ErrorCode::TooLarge), "{why}");
    assert!(why.contains("2000 bytes, 1000 at most"), "{why}");
    // The host is still served: a message within the limit goes.
    h.submit(Submission::Send {
        handle: 1,
        id: 3,
        data: &big[..1000],
    });
    let (c, why) = h.next();
    assert_eq!((c.id, c.status), (3, Status::Ok), "{why}");
}

/// Receives count against the host's budget of outstanding submissions, as sends do: past
/// it they fail with `Budget` instead of piling up at the engine.
#[test]
fn receives_past_the_outstanding_budget_fail_with_budget() {
    use offhost_proto::offload::{Status, Submission};
    let e = engine("frugal", &[], |c| c.host.max_outstanding = 4);
    let mut h = RawHost::connect(&e);
    h.open(1, "box");
    for id in 10..30 {
        h.submit(Submission::Recv {
            handle: 1,
            id,
            max: 0,
        });
    }
    // None of them can complete (nothing is sent to "box") but those over the budget: the
    // first four wait, the other sixteen fail.
    let mut refused = Vec::new();
    for _ in 0..16 {
        let (c, why) = h.next();
        assert_eq!(c.status, Status::Error(ErrorCode::Budget), "{why}");
        assert!(why.contains("4 outstanding submissions at most"), "{why}");
        refused.push(c.id);
    }
    assert_eq!(refused, (14..30).collect::<Vec<u64>>());
}

/// A message larger than any completion to a host can carry (its pool buffers are smaller)
/// fails that host's receive with `TooLarge` and stays for a host that can take it; it used
/// to be dropped, the receive never completing.
#[test]
fn a_message_larger_than_the_receiving_hosts_buffers_fails_its_receive_and_stays() {
    let e = engine("small", &[], |_| {});
    let small = offhost_shm::Config {
        ring_bytes: 64 << 10,
        pool_buffers: 4,
        buffer_size: 8 << 10,
        ..offhost_link::offload::default_segment()
    };
    let mut tiny = HostQueue::connect_with(&e.shm, &small).unwrap();
    let mut sender = HostQueue::connect(&e.shm).unwrap();
    let mut big = HostQueue::connect(&e.shm).unwrap();
    let t = tiny.open("box", OpenOptions::bulk()).unwrap();
    let s = sender.open("box", OpenOptions::bulk()).unwrap();
    let b = big.open("box", OpenOptions::bulk()).unwrap();
    let msg = pattern(1, 32 << 10);
    sender.send(s, &msg).unwrap();
    tiny.push_recv(t, RecvSize::Any, 1).unwrap();
    tiny.submit().unwrap();
    tiny.wait(1, T).unwrap();
    let c = tiny.pop().unwrap();
    assert!(
        matches!(&c.outcome, Outcome::Failed(f) if f.code == ErrorCode::TooLarge),
        "{c:?}"
    );
    assert_eq!(&*big.recv(b, T).unwrap().unwrap(), &msg[..]);
}

/// A host that submits without reaping its completions: once more of them wait for room in
/// its completion ring than it may have submissions outstanding, the engine takes nothing
/// more from it (its submission ring fills) instead of queueing completions without end;
/// once it reaps, every submission has its completion and it is served again.
#[test]
fn a_host_that_does_not_reap_is_not_read_until_it_does() {
    use offhost_proto::offload::{Status, Submission};
    let e = engine("patient", &[], |c| c.host.max_outstanding = 8);
    let mut h = RawHost::connect(&e);
    let mut rec = vec![0u8; 32];
    let mut accepted = 0u64;
    let mut stalled_since = None;
    let t = std::time::Instant::now();
    while accepted < 1_000_000 && t.elapsed() < Duration::from_secs(20) {
        Submission::Close {
            handle: 99,
            id: accepted,
        }
        .encode(&mut rec);
        if h.ep.sender().try_send(&rec).unwrap() {
            accepted += 1;
            stalled_since = None;
        } else if stalled_since
            .get_or_insert_with(std::time::Instant::now)
            .elapsed()
            > Duration::from_millis(300)
        {
            break;
        }
    }
    assert!(
        stalled_since.is_some() && accepted < 1_000_000,
        "the engine took {accepted} submissions from a host that reaps nothing"
    );
    for id in 0..accepted {
        let (c, why) = h.next();
        assert_eq!(c.id, id, "{why}");
        assert_eq!(c.status, Status::Error(ErrorCode::BadHandle), "{why}");
    }
    h.open(1, "box");
}

/// Sends waiting for room in a full mailbox go when their host does: they held its memory
/// (and its shared segment) for as long as nobody received from the mailbox.
#[test]
fn a_gone_hosts_sends_waiting_for_a_full_mailbox_go_with_it() {
    let e = engine("full", &[], |c| c.router.mailbox_bytes = 4096);
    let mut h = HostQueue::connect(&e.shm).unwrap();
    let ch = h.open("box", OpenOptions::bulk()).unwrap();
    for i in 0..10 {
        h.push_send(ch, &pattern(i, 3000), i as u64).unwrap();
    }
    h.submit().unwrap();
    let router = e.offload.router();
    let t = std::time::Instant::now();
    while router.waiting("box") < 9 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{}",
            router.waiting("box")
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(router.queued("box"), 1);
    drop(h);
    let t = std::time::Instant::now();
    while router.waiting("box") > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{} sends of a gone host still wait",
            router.waiting("box")
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // What was in the mailbox (its sender was told so) stays for a receiver.
    let mut r = HostQueue::connect(&e.shm).unwrap();
    let rc = r.open("box", OpenOptions::bulk()).unwrap();
    assert_eq!(&*r.recv(rc, T).unwrap().unwrap(), &pattern(0, 3000)[..]);
}

/// Connections that say nothing hold up no other host: each handshake runs on its own
/// thread with its own deadline (they used to run one after another on the accepting
/// thread, five seconds each).
#[test]
fn silent_connections_do_not_hold_up_the_next_host() {
    use std::os::linux::net::SocketAddrExt;
    let e = engine("busy", &[], |_| {});
    let name = e.shm.strip_prefix("shm:@").unwrap();
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name).unwrap();
    let silent: Vec<_> = (0..3)
        .map(|_| std::os::unix::net::UnixStream::connect_addr(&addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let t = std::time::Instant::now();
    let mut h = HostQueue::connect(&e.shm).unwrap();
    let ch = h.open("box", OpenOptions::bulk()).unwrap();
    h.send(ch, b"here").unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "a host behind three silent connections waited {:?}",
        t.elapsed()
    );
    drop(silent);
}

/// Connections of the engine's own uid that connect and say nothing (100 of them, kept open
/// by reconnecting: more than the 64 handshakes that may run) keep no host out: they wait in
/// the lobby with no thread and no place among the unproven until they speak. Before, each
/// held one of the handshake places for the whole `handshake_timeout`, and the next host
/// waited in the listen queue behind them.
#[test]
fn a_crowd_of_silent_local_connections_keeps_no_host_out() {
    use offhost_access::crowd::{Crowd, CrowdOptions, Target};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine.sock");
    let offload = Offload::new(OffloadConfig::new(PeerConfig::new("crowded")), None).unwrap();
    let listener = offhost_shm::Listener::bind(path.to_str().unwrap()).unwrap();
    let o = offload.clone();
    std::thread::spawn(move || {
        o.serve_shm(listener, Arc::new(|s: offhost_link::Session| s.close()))
    });
    let crowd = Crowd::start(CrowdOptions {
        target: Target::Unix(path.clone()),
        count: 100,
        trickle: None,
        at_most: Duration::from_secs(120),
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let url = format!("shm:{}", path.display());
    for i in 0..3 {
        let mut h = HostQueue::connect(&url)
            .unwrap_or_else(|e| panic!("try {i}: a host beside 100 silent ones: {e}"));
        let ch = h.open("box", OpenOptions::bulk()).unwrap();
        h.send(ch, b"here").unwrap();
    }
    let stats = crowd.stop();
    assert!(stats.opened >= 100, "{stats:?}");
}
