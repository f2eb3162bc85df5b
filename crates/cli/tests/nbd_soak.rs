//! A short soak of the real `offhost nbd`: fio with 8 connections writing and verifying
//! (crc32c) while hostile clients come and go; the server's RSS, sampled every second, stays
//! under the stated bound and every fio job verifies. `scripts/nbd-soak --seconds N` runs the
//! same for longer (and checks that RSS does not grow).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use offhost_nbd::{hostile, ListenAddr};

const SECONDS: u64 = 5;
/// 64 MiB for the server, and per connection (8 fio, 4 hostile) its bytes in flight
/// (64 MiB) and 8 MiB of buffers.
const BOUND_MIB: u64 = 64 + 12 * (64 + 8);

fn rss_mib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb >> 10)
}

/// One hostile client after another until `stop`: pipelined reads never read, a stalled
/// write, a trickling handshake, an option flood, an idle connection.
fn hostile_loop(addr: &ListenAddr, k: usize, stop: &AtomicBool) {
    let short = Duration::from_secs(3);
    let mut round = k;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        let held = match round % 5 {
            0 => hostile::pipelined_reads(addr, "disk", 80, 32 << 20).ok(),
            1 => hostile::stalled_write(addr, "disk", 32 << 20).ok(),
            2 => hostile::idle(addr, "disk").ok(),
            3 => {
                let _ = hostile::trickle_handshake(addr, Duration::from_millis(100), short);
                None
            }
            _ => {
                let _ = hostile::option_flood(addr, short);
                None
            }
        };
        if let Some(s) = held {
            let _ = hostile::dropped_within(&s, short);
        }
    }
}

#[test]
fn nbd_soak_fio_verifies_under_hostile_clients_and_rss_stays_bounded() {
    assert!(
        Command::new("fio").arg("--version").output().is_ok(),
        "fio is required by this test: install fio"
    );
    let mut server = Command::new(env!("CARGO_BIN_EXE_offhost"))
        .args([
            "nbd",
            "--insecure",
            "--listen",
            "tcp:127.0.0.1:0",
            "--export",
            "disk=mem:192M",
        ])
        .args([
            "--io-timeout",
            "1",
            "--handshake-timeout",
            "1",
            "--idle-timeout",
            "1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start offhost nbd");
    let pid = server.id();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: ListenAddr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .parse()
        .unwrap();
    let ListenAddr::Tcp(hp) = &addr else {
        unreachable!("tcp listener")
    };
    let scratch = tempfile::tempdir().unwrap();
    let fio = Command::new("fio")
        .current_dir(scratch.path())
        .args([
            "--name=soak",
            "--ioengine=nbd",
            &format!("--uri=nbd://{hp}/disk"),
            "--rw=randwrite",
            "--bssplit=4k/50:64k/40:1m/10",
            "--numjobs=8",
            "--size=16M",
            "--offset_increment=16M",
            "--verify=crc32c",
            "--verify_backlog=64",
            "--verify_fatal=1",
            "--verify_state_save=0",
            "--time_based",
            &format!("--runtime={SECONDS}"),
            "--group_reporting",
            "--output-format=json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fio");
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|k| {
            let (a, s) = (addr.clone(), Arc::clone(&stop));
            std::thread::spawn(move || hostile_loop(&a, k, &s))
        })
        .collect();
    let mut samples = Vec::new();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(SECONDS + 1) {
        samples.push(rss_mib(pid).expect("the server is alive"));
        std::thread::sleep(Duration::from_secs(1));
    }
    let out = fio.wait_with_output().unwrap();
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let alive = server.try_wait().unwrap().is_none();
    let _ = server.kill();
    let _ = server.wait();
    let (max, min) = (
        *samples.iter().max().unwrap(),
        *samples.iter().min().unwrap(),
    );
    eprintln!(
        "soak: RSS max {max} MiB, min {min} MiB over {} samples",
        samples.len()
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "fio failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(&text[text.find('{').expect("fio's JSON")..]).unwrap();
    let job = &json["jobs"][0];
    assert_eq!(job["error"], 0, "{job}");
    assert!(
        job["read"]["io_bytes"].as_u64().unwrap() > 0,
        "nothing was verified: {job}"
    );
    assert!(alive, "the server died");
    assert!(
        max < BOUND_MIB,
        "RSS peaked at {max} MiB, over {BOUND_MIB} MiB"
    );
}
