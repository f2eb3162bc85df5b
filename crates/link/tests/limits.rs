//! A server's budgets: peers that ask for more than they give back are refused or dropped,
//! with errors naming the limit and its flag, and the next peer is served.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use offhost_link::{ChannelOptions, Limits, LinkError, Server, Session};
use offhost_proto::Frame;

/// An echo server on `transport` held to `limits`; returns its URL.
fn echo_with(transport: &str, limits: Limits) -> (String, tempfile::TempDir) {
    let (url, dir) = common::fresh_url(transport);
    let mut server = Server::bind(&url).expect("bind");
    server.set_limits(limits);
    let url = server.url().to_owned();
    std::thread::spawn(move || offhost_link::serve_echo(&server));
    (url, dir)
}

/// The echo answers a fresh session's message: the server still serves.
fn served(url: &str) {
    let s = Session::connect(url).expect("connect");
    let ch = s.open("ok", ChannelOptions::default()).expect("open");
    ch.send(b"still here").unwrap();
    let m = ch.recv_wait(Duration::from_secs(20)).unwrap();
    assert_eq!(m.as_deref(), Some(&b"still here"[..]));
}

#[test]
fn a_session_opening_10000_channels_is_refused_past_its_budget_and_the_next_is_served() {
    let (url, _dir) = echo_with("tcp", Limits::default());
    let s = Session::connect(&url).unwrap();
    let chans: Vec<_> = (0..10_000)
        .map(|i| s.open(&format!("c{i}"), ChannelOptions::default()))
        .take_while(Result::is_ok)
        .map(Result::unwrap)
        .collect();
    // The first ones are served; past the limit the link reports the refusal (a channel
    // refused, or, once the peer keeps too many refused ones open, the whole link).
    chans[0].send(b"first").unwrap();
    let why = loop {
        match chans.last().unwrap().recv_wait(Duration::from_secs(20)) {
            Err(e) => break e.to_string(),
            Ok(Some(_)) => continue,
            Ok(None) => panic!("channel ended without a refusal"),
        }
    };
    assert!(why.contains("--max-channels"), "{why}");
    served(&url);
}

#[test]
fn channels_whose_windows_are_too_large_are_refused_and_the_session_goes_on() {
    let (url, _dir) = echo_with("tcp", Limits::default());
    let s = Session::connect(&url).unwrap();
    let huge = ChannelOptions {
        recv_buffer: 1 << 30,
        max_message: 1 << 30,
        ..ChannelOptions::default()
    };
    let big = s.open("big", huge).unwrap();
    match big.recv_wait(Duration::from_secs(20)) {
        Err(LinkError::Reset { reason, .. }) => {
            assert!(
                reason.contains("max_channel_window") && reason.contains("--max-channel-window"),
                "{reason}"
            )
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let ok = s.open("ok", ChannelOptions::default()).unwrap();
    ok.send(b"fine").unwrap();
    assert_eq!(
        ok.recv_wait(Duration::from_secs(20)).unwrap().as_deref(),
        Some(&b"fine"[..])
    );
}

#[test]
fn sessions_past_the_limit_are_refused_naming_the_flag() {
    for transport in ["tcp", "unix", "shm"] {
        let limits = Limits {
            max_sessions: 2,
            ..Limits::default()
        };
        let (url, _dir) = echo_with(transport, limits);
        let a = Session::connect(&url).unwrap();
        let b = Session::connect(&url).unwrap();
        for s in [&a, &b] {
            let ch = s.open("x", ChannelOptions::default()).unwrap();
            ch.send(b"x").unwrap();
            assert!(ch.recv_wait(Duration::from_secs(20)).unwrap().is_some());
        }
        let why = match Session::connect(&url) {
            Err(e) => e.to_string(),
            Ok(c) => {
                let ch = c.open("x", ChannelOptions::default()).unwrap();
                let _ = ch.send(b"x");
                match ch.recv_wait(Duration::from_secs(20)) {
                    Err(e) => e.to_string(),
                    Ok(m) => panic!("{transport}: a third session was served: {m:?}"),
                }
            }
        };
        // Text from the server: the limit by its id, and the flag that raises it there.
        assert!(
            why.contains("over the limit max_sessions of 2 sessions")
                && why.contains("offhost engine or echo --max-sessions"),
            "{transport}: {why}"
        );
        // A session that ends frees its slot.
        drop(a);
        let t0 = std::time::Instant::now();
        loop {
            let r = std::panic::catch_unwind(|| served(&url));
            if r.is_ok() {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "{transport}: slot never freed"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn silent_shared_memory_hosts_do_not_hold_up_a_good_one() {
    let (url, dir) = echo_with("shm", Limits::default());
    let path = dir.path().join("engine.sock");
    // Six hosts that connect and never send their segment.
    let silent: Vec<_> = (0..6)
        .map(|_| std::os::unix::net::UnixStream::connect(&path).unwrap())
        .collect();
    // Before, the accept loop ran each handshake for its full 5 s and the good host's own
    // handshake timed out behind them.
    served(&url);
    drop(silent);
}

/// Raw frames of a peer that opens a channel, grants itself (as receiver) all the credit in
/// the world, and then sends without ever reading a byte.
fn greedy_peer(url: &str) -> std::io::Result<u64> {
    let addr = url.strip_prefix("tcp:").unwrap();
    let mut s = TcpStream::connect(addr)?;
    let mut out = Vec::new();
    Frame::Open {
        channel: 1,
        packet_shift: 14,
        sync: false,
        recv_buffer: 1 << 20,
        max_message: 1 << 20,
        name: "greedy",
    }
    .encode(&mut out);
    for channel in [0, 1] {
        Frame::Credit {
            channel,
            limit: u64::MAX / 2,
            delivered: 0,
        }
        .encode(&mut out);
    }
    s.write_all(&out)?;
    let payload = vec![0x5a; 16 << 10];
    let mut chunk = Vec::new();
    for _ in 0..64 {
        Frame::Data {
            channel: 1,
            last: true,
            payload: &payload,
        }
        .encode(&mut chunk);
    }
    s.set_write_timeout(Some(Duration::from_secs(30)))?;
    let mut sent = 0u64;
    // At most 1 GiB: the server must have dropped us long before.
    while sent < 1 << 30 {
        s.write_all(&chunk)?;
        sent += chunk.len() as u64;
        // More credit, as a lying receiver would.
        let mut c = Vec::new();
        Frame::Credit {
            channel: 1,
            limit: u64::MAX / 2 + sent,
            delivered: 0,
        }
        .encode(&mut c);
        s.write_all(&c)?;
    }
    // Still connected after all that: whatever the server sends now.
    let mut b = [0u8; 1];
    let _ = s.read(&mut b)?;
    Ok(sent)
}

#[test]
fn a_peer_that_reads_nothing_is_dropped_at_its_unsent_limit() {
    let limits = Limits {
        max_unsent: 8 << 20,
        write_stall: Some(Duration::from_secs(2)),
        ..Limits::default()
    };
    let (url, _dir) = echo_with("tcp", limits);
    match greedy_peer(&url) {
        // Dropped: the server closed the connection (not merely stopped reading).
        Err(e) => assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ),
            "{e:?}"
        ),
        Ok(n) => panic!("the server took {n} bytes from a peer that reads nothing"),
    }
    served(&url);
}

/// A server that pings a client session and reads nothing: the client's answers do not pile
/// up without end; once its socket is full it stops reading too, so the server can push no
/// more than the sockets' buffers and a little (the client's memory stays bounded).
#[test]
fn a_client_answering_pings_to_a_server_that_reads_nothing_stops_reading() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("tcp:{}", l.local_addr().unwrap());
    let server = std::thread::spawn(move || -> (u64, std::io::Error) {
        let (mut s, _) = l.accept().unwrap();
        let mut chunk = Vec::new();
        for token in 0..4096u64 {
            Frame::Ping {
                token,
                reply: false,
            }
            .encode(&mut chunk);
        }
        s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut sent = 0u64;
        // At most 256 MiB of pings.
        while sent < 256 << 20 {
            if let Err(e) = s.write_all(&chunk) {
                return (sent, e);
            }
            sent += chunk.len() as u64;
        }
        panic!("the client took {sent} bytes of pings without its answers being read");
    });
    let session = Session::connect_with(&url, &offhost_link::LinkOptions::new()).unwrap();
    let (sent, e) = server.join().unwrap();
    assert!(
        matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        "{e:?}"
    );
    assert!(sent < 64 << 20, "{sent} bytes of pings taken");
    eprintln!("the client stopped reading after {sent} bytes of pings");
    drop(session);
}
