//! Memory goes back (issue 46): a write whose payload stops holds what arrived, not what it
//! announced, and after its connection ends the server is back near its idle size. Before, 64
//! writers that announced 32 MiB and sent one byte made the server hold 2.28 GB (zeroed
//! payload buffers), which it kept after they closed. Alone in its test binary, so that the
//! process's resident size is the server's.

use std::time::Duration;

use offhost_nbd::{hostile, Export, Limits, ListenAddr, Server};

/// This process's resident set (`VmRSS`), in MiB.
fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/self/status");
    kb / 1024
}

#[test]
fn stalled_writers_hold_what_they_sent_and_the_memory_goes_back_when_they_close() {
    let exports = vec![Export::from_spec("disk=mem:64M").unwrap()];
    let mut server = Server::bind(&ListenAddr::Tcp("127.0.0.1:0".into()), exports, None).unwrap();
    server.set_limits(Limits {
        io_timeout: Duration::from_secs(60),
        ..Limits::default()
    });
    let addr: ListenAddr = server.local_addr().parse().unwrap();
    std::thread::spawn(move || server.serve());
    // Warm up: one connection's threads and buffers, so that idle is idle.
    drop(hostile::idle(&addr, "disk").unwrap());
    std::thread::sleep(Duration::from_millis(200));
    let idle = rss_mib();
    // 16 writers announce 32 MiB each (512 MiB) and send one byte.
    let stalled: Vec<_> = (0..16)
        .map(|_| hostile::stalled_write(&addr, "disk", 32 << 20).unwrap())
        .collect();
    // Time for the server to take each request (it would have allocated at once).
    std::thread::sleep(Duration::from_secs(1));
    let held = rss_mib();
    assert!(
        held < idle + 128,
        "16 stalled writers of 32 MiB: {held} MiB resident, {idle} MiB idle"
    );
    drop(stalled);
    // The connections end when their sockets close; give them a moment.
    std::thread::sleep(Duration::from_secs(1));
    let after = rss_mib();
    assert!(
        after < idle + 64,
        "after they closed: {after} MiB, {idle} MiB idle"
    );
}
