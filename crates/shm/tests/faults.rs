//! Cross-process faults: a peer that scribbles on the rings, and peers killed with SIGKILL in
//! the middle of a transfer. The victim must report the fault (not crash, not hang) and nothing
//! may be left in /dev/shm or the socket directory.

mod common;

use common::{
    abstract_addr, connect_retry, forge_record, peek_u64, spawn_child, wait_child, ADDR, ROLE,
};
use offhost_shm::{Config, Endpoint, Listener, Mode, ShmError};
use std::time::{Duration, Instant};

const T: Option<Duration> = Some(Duration::from_secs(5));
/// The liveness promise: a side waiting on a dead peer errors within one second.
const ONE_SECOND: Option<Duration> = Some(Duration::from_secs(1));

fn config(mode: Mode) -> Config {
    Config {
        ring_bytes: 4096,
        pool_buffers: 4,
        buffer_size: 1024,
        mode,
        spin: Duration::from_micros(20),
        event_limit: None,
    }
}

/// Entry point of the child processes (does nothing in a normal test run).
#[test]
fn child_entry() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let addr = std::env::var(ADDR).expect("child needs an address");
    match role.as_str() {
        "echo" => {
            let listener = Listener::bind(&addr).expect("bind");
            let ep = listener.accept().expect("accept");
            match offhost_shm::echo(ep) {
                Ok(stats) => {
                    eprintln!("echo ended after {} records", stats.records);
                    std::process::exit(0)
                }
                Err(e) => {
                    eprintln!("echo error: {e}");
                    std::process::exit(3)
                }
            }
        }
        "host-stream" => {
            let mode: Mode = std::env::var("MODE").unwrap().parse().unwrap();
            let mut ep = connect_retry(&addr, &config(mode));
            let start = Instant::now();
            let mut i = 0u64;
            while start.elapsed() < Duration::from_secs(60) {
                ep.sender().send(&i.to_le_bytes(), T).expect("send");
                let r = ep.receiver().recv(T).expect("recv");
                assert_eq!(r.bytes(), i.to_le_bytes());
                i += 1;
            }
            std::process::exit(0)
        }
        other => panic!("unknown role {other}"),
    }
}

fn shm_entries() -> Vec<String> {
    common::dir_entries("/dev/shm")
        .into_iter()
        .filter(|n| n.contains("offhost"))
        .collect()
}

/// Starts an echo engine child and a host connected to it; checks a few records go through.
fn echo_child(mode: Mode) -> (std::process::Child, Endpoint) {
    let addr = abstract_addr("echo");
    let child = spawn_child("child_entry", "echo", &addr);
    let mut ep = connect_retry(&addr, &config(mode));
    for i in 0..10u32 {
        ep.sender().send(&i.to_le_bytes(), T).unwrap();
        assert_eq!(ep.receiver().recv(T).unwrap().bytes(), i.to_le_bytes());
    }
    (child, ep)
}

/// Forges a record in the host->engine ring with `write` (given the ring's data offset and the
/// position of the next record) and checks the engine child reports `expect` and stops.
fn engine_detects(expect: &str, write: impl FnOnce(&Endpoint, u64, u64)) {
    let (child, mut ep) = echo_child(Mode::Block);
    let (tail_off, _) = ep.layout().ring_index_offsets(0);
    let data_off = ep.layout().ring_data_offset(0);
    let tail = peek_u64(&ep, tail_off);
    write(&ep, data_off, tail);
    let (code, stderr) = wait_child(child, Duration::from_secs(10));
    assert_eq!(code, Some(3), "engine should fail; stderr: {stderr}");
    assert!(stderr.contains("corrupt peer"), "{stderr}");
    assert!(
        stderr.contains(expect),
        "stderr {stderr:?} lacks {expect:?}"
    );
    // The engine is gone: the host learns it instead of hanging.
    assert!(matches!(
        ep.receiver().recv(ONE_SECOND),
        Err(ShmError::PeerGone)
    ));
}

fn desc(index: u32, offset: u32, len: u32) -> [u8; 16] {
    let mut d = [0u8; 16];
    d[..4].copy_from_slice(&index.to_le_bytes());
    d[4..8].copy_from_slice(&offset.to_le_bytes());
    d[8..12].copy_from_slice(&len.to_le_bytes());
    d
}

#[test]
fn pad_record_that_does_not_end_the_ring_is_a_corrupt_peer() {
    engine_detects("pad record of 5 bytes", |ep, data_off, tail| {
        forge_record(ep, data_off, 4096, tail, 5, 3, &[]);
    });
}

#[test]
fn garbage_record_length_is_a_corrupt_peer() {
    engine_detects("overruns the ring end", |ep, data_off, tail| {
        forge_record(ep, data_off, 4096, tail, 0x7fff_fff0, 1, &[]);
    });
}

#[test]
fn unknown_record_kind_is_a_corrupt_peer() {
    engine_detects("unknown record kind 77", |ep, data_off, tail| {
        forge_record(ep, data_off, 4096, tail, 0, 77, &[]);
    });
}

#[test]
fn descriptor_out_of_pool_is_a_corrupt_peer() {
    engine_detects("descriptor names buffer 9999", |ep, data_off, tail| {
        forge_record(ep, data_off, 4096, tail, 16, 2, &desc(9999, 0, 0));
    });
}

#[test]
fn descriptor_of_a_buffer_the_host_does_not_hold_is_a_corrupt_peer() {
    // Buffer 5 is homed at the engine and free there: the host cannot be sending it.
    engine_detects("which the peer does not hold", |ep, data_off, tail| {
        forge_record(ep, data_off, 4096, tail, 16, 2, &desc(5, 0, 0));
    });
}

#[test]
fn descriptor_range_beyond_buffer_is_a_corrupt_peer() {
    engine_detects("exceeds the buffer size 1024", |ep, data_off, tail| {
        forge_record(ep, data_off, 4096, tail, 16, 2, &desc(0, 1000, 100));
    });
}

#[test]
fn corruption_is_latched_in_process_too() {
    let (mut host, engine) = offhost_shm::pair(&config(Mode::Poll)).unwrap();
    let data_off = host.layout().ring_data_offset(1);
    forge_record(&engine, data_off, 4096, 0, 0, 77, &[]);
    for _ in 0..3 {
        match host.receiver().try_recv() {
            Err(ShmError::CorruptPeer(m)) => assert!(m.contains("unknown record kind 77"), "{m}"),
            other => panic!("expected CorruptPeer, got {:?}", other.map(|r| r.is_some())),
        }
    }
    // The sender half stops too.
    assert!(matches!(
        host.sender().try_send(b"x"),
        Err(ShmError::CorruptPeer(_))
    ));
}

fn kill_engine_mid_transfer(mode: Mode) {
    let before = shm_entries();
    let (mut child, mut ep) = echo_child(mode);
    // Records in flight when the engine dies.
    for i in 0..50u32 {
        ep.sender().send(&i.to_le_bytes(), T).unwrap();
    }
    child.kill().expect("SIGKILL the engine");
    let _ = child.wait();
    let mut delivered = 0;
    let err = loop {
        match ep.receiver().recv(ONE_SECOND) {
            Ok(_) => delivered += 1,
            Err(e) => break e,
        }
        assert!(delivered <= 50, "more echoes than records sent");
    };
    assert!(matches!(err, ShmError::PeerGone), "{mode}: got {err:?}");
    // Sending into a full ring of a dead peer also ends.
    let r = (0..10_000).try_for_each(|_| ep.sender().send(&[0u8; 512], ONE_SECOND));
    assert!(matches!(r, Err(ShmError::PeerGone)), "{mode}: got {r:?}");
    drop(ep);
    assert_eq!(shm_entries(), before, "left in /dev/shm");
}

#[test]
fn kill_engine_mid_transfer_block() {
    kill_engine_mid_transfer(Mode::Block);
}

#[test]
fn kill_engine_mid_transfer_poll() {
    kill_engine_mid_transfer(Mode::Poll);
}

#[test]
fn kill_engine_mid_transfer_adaptive() {
    kill_engine_mid_transfer(Mode::Adaptive);
}

fn kill_host_mid_transfer(mode: Mode) {
    let before = shm_entries();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine.sock");
    let addr = path.to_str().unwrap().to_owned();
    let listener = Listener::bind(&addr).unwrap();
    let mode_env = mode.name();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["child_entry", "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, "host-stream")
        .env(ADDR, &addr)
        .env("MODE", mode_env)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ep = listener.accept().unwrap();
    let (mut tx, mut rx) = ep.split();
    let mut n = 0u64;
    let err = loop {
        let r = match rx.recv(ONE_SECOND) {
            Ok(r) => r,
            Err(e) => break e,
        };
        assert_eq!(r.bytes(), n.to_le_bytes(), "record {n}");
        tx.send(r.bytes(), ONE_SECOND).ok();
        drop(r);
        n += 1;
        if n == 1000 {
            child.kill().expect("SIGKILL the host");
            let _ = child.wait();
        }
        assert!(n < 1_000_000, "host never stopped");
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(n >= 1000, "host ended early after {n} records: {err}");
    assert!(matches!(err, ShmError::PeerGone), "{mode}: got {err:?}");
    drop((tx, rx));
    drop(listener);
    assert!(
        common::dir_entries(dir.path().to_str().unwrap()).is_empty(),
        "socket directory not empty"
    );
    assert_eq!(shm_entries(), before, "left in /dev/shm");
}

#[test]
fn kill_host_mid_transfer_block() {
    kill_host_mid_transfer(Mode::Block);
}

#[test]
fn kill_host_mid_transfer_adaptive() {
    kill_host_mid_transfer(Mode::Adaptive);
}

/// A side that waits in short slices (as the channel layer does, 100 ms at a time) must still
/// notice a dead peer: a wait that times out checks liveness first, in every mode.
fn short_waits_notice_a_killed_engine(mode: Mode) {
    let (mut child, mut ep) = echo_child(mode);
    child.kill().expect("SIGKILL the engine");
    let _ = child.wait();
    let start = Instant::now();
    let err = loop {
        match ep.receiver().wait_ready(Some(Duration::from_millis(20))) {
            Err(ShmError::Timeout) => {}
            Ok(()) => panic!("{mode}: nothing was sent, yet a record is ready"),
            Err(e) => break e,
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{mode}: 20 ms waits never noticed the dead engine"
        );
    };
    assert!(matches!(err, ShmError::PeerGone), "{mode}: got {err:?}");
}

#[test]
fn short_waits_notice_a_killed_engine_poll() {
    short_waits_notice_a_killed_engine(Mode::Poll);
}

#[test]
fn short_waits_notice_a_killed_engine_adaptive() {
    short_waits_notice_a_killed_engine(Mode::Adaptive);
}

#[test]
fn short_waits_notice_a_killed_engine_block() {
    short_waits_notice_a_killed_engine(Mode::Block);
}
