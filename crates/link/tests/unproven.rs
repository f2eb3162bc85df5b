//! Nothing unauthenticated holds what authenticated peers need: connections that never finish
//! their handshake (silent, or trickling bytes, reconnecting whenever they are closed) hold
//! places among the unproven, never a session slot, and never keep a good client out
//! (issue 46). Before, 100 such TCP connections held a `tls:` listener's 16 handshake turns
//! 5 s each and a certified client failed 3 tries of 3; 20 idle local connections did the
//! same to a `shm:` listener's good host after 5.1 s.

mod common;

use std::net::IpAddr;
use std::time::Duration;

use offhost_access::crowd::{Crowd, CrowdOptions, Target};
use offhost_link::{ChannelOptions, Server, Session};

fn echo(server: Server) {
    std::thread::spawn(move || offhost_link::serve_echo(&server));
}

/// The session answers an echo.
fn echoes(s: &Session) {
    let ch = s.open("ok", ChannelOptions::default()).expect("open");
    ch.send(b"still here").unwrap();
    let m = ch.recv_wait(Duration::from_secs(20)).unwrap();
    assert_eq!(m.as_deref(), Some(&b"still here"[..]));
}

fn loopback(n: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, n])
}

fn tls_crowd(url: &str, count: usize, sources: Vec<IpAddr>, trickle: Option<Duration>) -> Crowd {
    let addr = url.strip_prefix("tls:").unwrap().parse().unwrap();
    Crowd::start(CrowdOptions {
        target: Target::Tcp { addr, sources },
        count,
        trickle,
        at_most: Duration::from_secs(120),
    })
    .expect("start the crowd")
}

#[test]
fn a_certified_client_connects_while_100_silent_connections_reconnect() {
    let s = Server::bind_with("tls:127.0.0.1:0", &common::options()).unwrap();
    let url = s.url().to_owned();
    echo(s);
    // From the client's own address and from three others.
    let sources = vec![loopback(1), loopback(2), loopback(3), loopback(4)];
    let crowd = tls_crowd(&url, 100, sources, None);
    for i in 0..3 {
        let s = common::connect(&url)
            .unwrap_or_else(|e| panic!("try {i}: a certified client beside 100 silent: {e}"));
        echoes(&s);
    }
    let stats = crowd.stop();
    assert!(stats.opened >= 100, "{stats:?}");
}

#[test]
fn silent_connections_past_the_listen_queue_do_not_lock_out_a_certified_client() {
    let s = Server::bind_with("tls:127.0.0.1:0", &common::options()).unwrap();
    let url = s.url().to_owned();
    echo(s);
    // 145 filled std's listen queue of 128 behind 16 handshake turns.
    let sources = (2..12).map(loopback).collect();
    let crowd = tls_crowd(&url, 200, sources, None);
    let s = common::connect(&url).expect("a certified client beside 200 silent connections");
    echoes(&s);
    drop(crowd);
}

#[test]
fn a_certified_client_connects_while_trickling_connections_reconnect() {
    let s = Server::bind_with("tls:127.0.0.1:0", &common::options()).unwrap();
    let url = s.url().to_owned();
    echo(s);
    let sources = vec![loopback(1), loopback(5), loopback(6)];
    let crowd = tls_crowd(&url, 100, sources, Some(Duration::from_millis(200)));
    for i in 0..3 {
        let s = common::connect(&url)
            .unwrap_or_else(|e| panic!("try {i}: a certified client beside tricklers: {e}"));
        echoes(&s);
    }
    drop(crowd);
}

#[test]
fn idle_local_connections_of_our_uid_do_not_lock_out_a_shared_memory_host() {
    let (url, dir) = common::fresh_url("shm");
    let s = Server::bind(&url).unwrap();
    echo(s);
    let crowd = Crowd::start(CrowdOptions {
        target: Target::Unix(dir.path().join("engine.sock")),
        count: 20,
        trickle: None,
        at_most: Duration::from_secs(120),
    })
    .unwrap();
    for i in 0..3 {
        let s = Session::connect(&url)
            .unwrap_or_else(|e| panic!("try {i}: a good host beside 20 idle ones: {e}"));
        echoes(&s);
    }
    drop(crowd);
}

#[test]
fn a_crowd_holds_no_session_slot() {
    let mut s = Server::bind_with("tls:127.0.0.1:0", &common::options()).unwrap();
    s.set_limits(offhost_link::Limits {
        max_sessions: 1,
        ..offhost_link::Limits::default()
    });
    let url = s.url().to_owned();
    echo(s);
    let crowd = tls_crowd(&url, 50, vec![loopback(1)], None);
    // The one session slot is the certified client's.
    let s = common::connect(&url).expect("the one session");
    echoes(&s);
    drop(crowd);
}
