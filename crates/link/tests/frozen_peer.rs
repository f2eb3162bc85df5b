//! The peer process is frozen (SIGSTOP): its kernel keeps the connection up, so only the
//! heartbeats can tell. A session with a peer deadline ends within it, and every blocked call
//! returns [`LinkError::PeerSilent`]; a live peer that reads nothing and sends nothing of its
//! own is never taken for a frozen one, in either direction.
//!
//! The engine runs as a child process: this test binary re-executed with the ignored test
//! `child_engine` and the URL in an environment variable.

mod common;

use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use offhost_link::{ChannelOptions, LinkError, LinkOptions, Server, Session};

const URL_VAR: &str = "OFFHOST_TEST_CHILD_URL";
/// Long enough that a loaded test machine (the whole suite at once on two cores) does not
/// starve a live peer's heartbeats past it.
const DEADLINE: Duration = Duration::from_secs(3);

#[test]
#[ignore = "run as a child process by the frozen-peer tests"]
fn child_engine() {
    let url = std::env::var(URL_VAR).expect("child engine needs its URL");
    let mut server = Server::bind(&url).unwrap();
    server.set_limits(offhost_link::Limits {
        peer_deadline: Some(DEADLINE),
        ..Default::default()
    });
    println!("ready");
    let session = server.accept().unwrap();
    let _ch = session.accept().unwrap();
    // Hold the channel, read nothing, send nothing: only the heartbeats speak for us.
    std::thread::sleep(Duration::from_secs(600));
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

fn frozen_peer(transport: &str, url: &str) {
    let mut child = common::spawn_child_engine(URL_VAR, url);
    let options = LinkOptions::new().peer_deadline(Some(DEADLINE));
    let session = (0..200)
        .find_map(|_| {
            Session::connect_with(url, &options).ok().or_else(|| {
                std::thread::sleep(Duration::from_millis(50));
                None
            })
        })
        .unwrap_or_else(|| panic!("{transport}: child engine never listened"));
    let ch = session.open("idle", ChannelOptions::default()).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|scope| {
        let ch = &ch;
        scope.spawn(move || tx.send(ch.recv()).unwrap());
        // Three deadlines of a live peer that says nothing but its heartbeats: nobody ends
        // the session (had the child ended it, the receive would have returned).
        std::thread::sleep(DEADLINE * 3);
        if let Ok(r) = rx.try_recv() {
            panic!("{transport}: a live, idle peer was taken for a dead one: {r:?}");
        }
        signal(child.id(), "-STOP");
        let frozen = Instant::now();
        // Generous guard against a hang on a loaded machine.
        let r = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{transport}: the receive hung on a frozen peer"));
        let took = frozen.elapsed();
        assert!(
            matches!(r, Err(LinkError::PeerSilent(d)) if d == DEADLINE),
            "{transport}: the receive returned {r:?}"
        );
        // The deadline runs from the last heartbeat heard, which came up to a heartbeat
        // period (a fifth of it) and a tick before the freeze.
        assert!(
            took >= DEADLINE / 2,
            "{transport}: declared silent {took:?} after the freeze, long before its deadline"
        );
        eprintln!("{transport}: a frozen peer was found silent after {took:?}");
    });
    // Waits after the fact fail at once, naming the silence too.
    let late = ch.recv();
    assert!(matches!(late, Err(LinkError::PeerSilent(_))), "{late:?}");
    let late = session.accept();
    assert!(matches!(late, Err(LinkError::PeerSilent(_))), "{late:?}");
    signal(child.id(), "-CONT");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn frozen_tcp_peer() {
    let (url, _dir) = common::child_url("tcp");
    frozen_peer("tcp", &url);
}

#[test]
fn frozen_unix_peer() {
    let (url, _dir) = common::child_url("unix");
    frozen_peer("unix", &url);
}

#[test]
fn frozen_shm_peer() {
    let (url, _dir) = common::child_url("shm");
    frozen_peer("shm", &url);
}
