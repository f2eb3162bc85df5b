//! Scratch: single-thread CPU cost of a channel round trip vs the raw ring (min of trials).
use offhost_link::{ChannelOptions, SendMode, Server, Session};
use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let addr = format!("@overhead-{}", std::process::id());
    let url = format!("shm:{addr}");
    let server = Server::bind(&url).unwrap();
    let t = std::thread::spawn(move || server.accept().unwrap());
    let cfg = offhost_shm::Config {
        mode: offhost_shm::Mode::Poll,
        ..offhost_link::default_shm_config()
    };
    let a = Session::connect_shm(&addr, &cfg).unwrap();
    let b = t.join().unwrap();
    let opts = ChannelOptions {
        packet_size: 64,
        recv_buffer: 1 << 20,
        max_message: 64,
        send_mode: SendMode::Async,
    };
    let ca = a.open("x", opts).unwrap();
    let cb = b.accept().unwrap();
    let msg = [7u8; 64];
    let mut buf = Vec::with_capacity(64);
    let (h, e) = offhost_shm::pair(&cfg).unwrap();
    let (mut htx, mut hrx) = h.split();
    let (mut etx, mut erx) = e.split();
    let (mut best_c, mut best_r, mut best_s, mut best_v) = (f64::MAX, f64::MAX, f64::MAX, f64::MAX);
    let only_chan = std::env::args().nth(2).is_some();
    for _ in 0..15 {
        let t0 = Instant::now();
        for _ in 0..n {
            ca.send(&msg).unwrap();
            cb.recv_into(&mut buf).unwrap();
            cb.send(&buf).unwrap();
            ca.recv_into(&mut buf).unwrap();
        }
        best_c = best_c.min(t0.elapsed().as_nanos() as f64 / n as f64);
        if only_chan {
            continue;
        }
        let t0 = Instant::now();
        for _ in 0..n {
            htx.send(&msg, None).unwrap();
            {
                let r = erx.recv(None).unwrap();
                buf.clear();
                buf.extend_from_slice(r.bytes());
            }
            etx.send(&buf, None).unwrap();
            {
                let r = hrx.recv(None).unwrap();
                buf.clear();
                buf.extend_from_slice(r.bytes());
            }
        }
        best_r = best_r.min(t0.elapsed().as_nanos() as f64 / n as f64);
        let k = 500;
        let (mut ts, mut tr) = (0u128, 0u128);
        for _ in 0..n / k {
            let t0 = Instant::now();
            for _ in 0..k {
                ca.send(&msg).unwrap();
            }
            let t1 = Instant::now();
            for _ in 0..k {
                cb.recv_into(&mut buf).unwrap();
            }
            ts += (t1 - t0).as_nanos();
            tr += t1.elapsed().as_nanos();
        }
        best_s = best_s.min(ts as f64 / n as f64);
        best_v = best_v.min(tr as f64 / n as f64);
    }
    println!("round trip: channel {best_c:.0} ns, raw {best_r:.0} ns, extra per hop {:.0} ns; batched send {best_s:.0} recv {best_v:.0}", (best_c - best_r) / 2.0);
}
