//! The peer process dies (SIGKILL): every blocked call returns an error instead of hanging.
//!
//! The engine runs as a child process: this test binary re-executed with the ignored test
//! `child_engine` and the URL in an environment variable.

mod common;

use std::time::Duration;

use offhost_link::{ChannelOptions, LinkError, SendMode, Server, Session};

const URL_VAR: &str = "OFFHOST_TEST_CHILD_URL";

#[test]
#[ignore = "run as a child process by the killed-peer tests"]
fn child_engine() {
    let url = std::env::var(URL_VAR).expect("child engine needs its URL");
    let server = Server::bind(&url).unwrap();
    println!("ready");
    let session = server.accept().unwrap();
    let _chans: Vec<_> = (0..2).map(|_| session.accept().unwrap()).collect();
    // Hold the channels, read nothing, wait to be killed.
    std::thread::sleep(Duration::from_secs(600));
}

fn killed_peer(transport: &str, url: &str) {
    let mut child = common::spawn_child_engine(URL_VAR, url);
    // Wait until the child listens.
    let session = (0..200)
        .find_map(|_| {
            Session::connect(url).ok().or_else(|| {
                std::thread::sleep(Duration::from_millis(50));
                None
            })
        })
        .unwrap_or_else(|| panic!("{transport}: child engine never listened"));
    let small = ChannelOptions {
        packet_size: 64,
        recv_buffer: 1024,
        max_message: 1024,
        send_mode: SendMode::Async,
    };
    let a = session.open("recv-side", small).unwrap();
    let b = session.open("send-side", small).unwrap();
    let sync = session.open(
        "sync",
        ChannelOptions {
            send_mode: SendMode::Sync,
            ..small
        },
    );
    // Fill b's credit so the next send blocks.
    b.send(&[0; 1024]).unwrap();
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::scope(|scope| {
        let t1 = tx.clone();
        let a = &a;
        scope.spawn(move || t1.send(("recv", a.recv().map(|_| ()))).unwrap());
        let t2 = tx.clone();
        let b = &b;
        scope.spawn(move || t2.send(("send", b.send(&[1; 1024]))).unwrap());
        let t3 = tx.clone();
        let s = &session;
        scope.spawn(move || t3.send(("accept", s.accept().map(|_| ()))).unwrap());
        if let Ok(sync) = &sync {
            let t4 = tx.clone();
            scope.spawn(move || t4.send(("sync send", sync.send(b"wait for me"))).unwrap());
        }
        std::thread::sleep(Duration::from_millis(300));
        child.kill().unwrap();
        child.wait().unwrap();
        let calls = if sync.is_ok() { 4 } else { 3 };
        for _ in 0..calls {
            // Generous guard against a hang on a loaded machine; the calls return within TICKs.
            let (what, r) = rx
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("{transport}: a blocked call hung"));
            assert!(
                matches!(r, Err(LinkError::PeerGone)),
                "{transport}: {what} returned {r:?}"
            );
        }
    });
}

#[test]
fn killed_tcp_peer() {
    let (url, _dir) = common::child_url("tcp");
    killed_peer("tcp", &url);
}

#[test]
fn killed_unix_peer() {
    let (url, _dir) = common::child_url("unix");
    killed_peer("unix", &url);
}

#[test]
fn killed_shm_peer() {
    let (url, _dir) = common::child_url("shm");
    killed_peer("shm", &url);
}
