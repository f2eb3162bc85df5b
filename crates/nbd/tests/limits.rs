//! Clients that ask for more than they give back: each is bounded by the server's limits (and
//! dropped by its deadlines), and the next client is served.

use std::time::Duration;

use offhost_nbd::hostile;
use offhost_nbd::Limits;
use offhost_nbd::{Export, ListenAddr, Server};

fn start(limits: Limits) -> ListenAddr {
    let exports = vec![Export::from_spec("disk=mem:64M").unwrap()];
    let mut server = Server::bind(&ListenAddr::Tcp("127.0.0.1:0".into()), exports, None).unwrap();
    server.set_limits(limits);
    let addr: ListenAddr = server.local_addr().parse().unwrap();
    std::thread::spawn(move || server.serve());
    addr
}

fn short() -> Limits {
    Limits {
        handshake_timeout: Duration::from_millis(500),
        io_timeout: Duration::from_millis(500),
        idle_timeout: Some(Duration::from_millis(500)),
        ..Limits::default()
    }
}

/// A well-behaved client still gets its export.
fn served(addr: &ListenAddr) {
    let s = hostile::idle(addr, "disk").expect("a good client negotiates");
    drop(s);
}

const LONG: Duration = Duration::from_secs(30);

#[test]
fn a_trickling_handshake_is_dropped_at_its_deadline() {
    let addr = start(short());
    let took = hostile::trickle_handshake(&addr, Duration::from_millis(50), LONG).unwrap();
    assert!(took < LONG);
    served(&addr);
}

#[test]
fn an_option_flood_whose_replies_are_never_read_is_dropped() {
    let addr = start(short());
    hostile::option_flood(&addr, LONG).unwrap();
    served(&addr);
}

#[test]
fn an_idle_connection_is_dropped_past_the_idle_timeout() {
    let addr = start(short());
    let s = hostile::idle(&addr, "disk").unwrap();
    assert!(hostile::dropped_within(&s, LONG).is_some());
    // Without an idle timeout it stays.
    let addr = start(Limits {
        idle_timeout: None,
        ..short()
    });
    let s = hostile::idle(&addr, "disk").unwrap();
    assert!(!hostile::dropped(&s, Duration::from_millis(1500)));
}

#[test]
fn a_write_whose_payload_stops_is_dropped() {
    let addr = start(short());
    let s = hostile::stalled_write(&addr, "disk", 32 << 20).unwrap();
    assert!(hostile::dropped_within(&s, LONG).is_some());
    served(&addr);
}

#[test]
fn a_client_that_reads_no_replies_is_dropped_past_the_io_timeout() {
    let addr = start(Limits {
        idle_timeout: None,
        ..short()
    });
    let s = hostile::pipelined_reads(&addr, "disk", 80, 32 << 20).unwrap();
    assert!(hostile::dropped_within(&s, LONG).is_some());
    served(&addr);
}

#[test]
fn connections_past_the_limit_are_refused_naming_the_flag() {
    let addr = start(Limits {
        max_connections: 2,
        ..Limits::default()
    });
    let a = hostile::idle(&addr, "disk").unwrap();
    let b = hostile::idle(&addr, "disk").unwrap();
    let e = hostile::idle(&addr, "disk").expect_err("a third is refused");
    // The server's text: the limit by its id, and the flag that raises it there.
    assert!(
        e.to_string().contains("over the limit max_connections of 2 connections (the NBD server raises it with offhost nbd --max-connections)"),
        "{e}"
    );
    drop(a);
    let t0 = std::time::Instant::now();
    while hostile::idle(&addr, "disk").is_err() {
        assert!(t0.elapsed() < LONG, "the slot never came back");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(b);
}
