//! Runs hostile NBD clients (see `offhost_nbd::hostile`) against any NBD server for a bounded
//! time; used by `scripts/nbd-hostile-rss` (offhost beside nbdkit) and `scripts/nbd-soak`.
//!
//! ```text
//! nbd_hostile --addr tcp:127.0.0.1:10809 [--export NAME] [--seconds 10] [--clients 10]
//!             [--mode reads|mix] [--count 80] [--len 32M]
//! ```
//!
//! `reads`: each client pipelines `--count` reads of `--len` bytes, never reads a reply, and
//! holds the connection (reconnecting when the server drops it). `mix`: each client cycles
//! through pipelined reads, a stalled write, a trickling handshake, an option flood and an
//! idle connection, each until the server drops it or the time is up. Prints what happened.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use offhost_nbd::hostile;
use offhost_nbd::ListenAddr;

struct Args {
    addr: ListenAddr,
    export: String,
    seconds: f64,
    clients: usize,
    mix: bool,
    count: u64,
    len: u32,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        addr: ListenAddr::Tcp("127.0.0.1:10809".into()),
        export: String::new(),
        seconds: 10.0,
        clients: 10,
        mix: false,
        count: 80,
        len: 32 << 20,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().ok_or(format!("{k} needs a value"));
        match k.as_str() {
            "--addr" => a.addr = v()?.parse().map_err(|e| format!("--addr: {e}"))?,
            "--export" => a.export = v()?,
            "--seconds" => a.seconds = v()?.parse().map_err(|e| format!("--seconds: {e}"))?,
            "--clients" => a.clients = v()?.parse().map_err(|e| format!("--clients: {e}"))?,
            "--count" => a.count = v()?.parse().map_err(|e| format!("--count: {e}"))?,
            "--len" => {
                let s = v()?;
                let n = offhost_units::parse_size(&s).map_err(|e| format!("--len: {e}"))?;
                a.len = u32::try_from(n).map_err(|_| "--len: at most 4 GiB - 1".to_string())?;
            }
            "--mode" => {
                a.mix = match v()?.as_str() {
                    "mix" => true,
                    "reads" => false,
                    m => return Err(format!("--mode {m}: expected reads or mix")),
                }
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

#[derive(Default)]
struct Counts {
    connected: AtomicU64,
    dropped: AtomicU64,
    refused: AtomicU64,
}

fn left(end: Instant) -> Duration {
    end.saturating_duration_since(Instant::now())
}

/// Holds `s` until the server drops it or `end`.
fn hold(s: &offhost_nbd::Stream, end: Instant, c: &Counts) {
    if hostile::dropped_within(s, left(end)).is_some() {
        c.dropped.fetch_add(1, Ordering::Relaxed);
    }
}

fn client(a: &Args, end: Instant, c: &Counts, k: usize) {
    let mut round = k;
    while Instant::now() < end {
        let r = if !a.mix {
            hostile::pipelined_reads(&a.addr, &a.export, a.count, a.len).map(|s| {
                c.connected.fetch_add(1, Ordering::Relaxed);
                hold(&s, end, c);
            })
        } else {
            round += 1;
            match round % 5 {
                0 => hostile::pipelined_reads(&a.addr, &a.export, a.count, a.len).map(|s| {
                    c.connected.fetch_add(1, Ordering::Relaxed);
                    hold(&s, end, c);
                }),
                1 => hostile::stalled_write(&a.addr, &a.export, a.len).map(|s| {
                    c.connected.fetch_add(1, Ordering::Relaxed);
                    hold(&s, end, c);
                }),
                2 => hostile::idle(&a.addr, &a.export).map(|s| {
                    c.connected.fetch_add(1, Ordering::Relaxed);
                    hold(&s, end, c);
                }),
                3 => {
                    c.connected.fetch_add(1, Ordering::Relaxed);
                    hostile::trickle_handshake(&a.addr, Duration::from_millis(200), left(end)).map(
                        |_| {
                            c.dropped.fetch_add(1, Ordering::Relaxed);
                        },
                    )
                }
                _ => {
                    c.connected.fetch_add(1, Ordering::Relaxed);
                    hostile::option_flood(&a.addr, left(end)).map(|_| {
                        c.dropped.fetch_add(1, Ordering::Relaxed);
                    })
                }
            }
        };
        if r.is_err() {
            // Refused (over the connection limit) or timed out: try again shortly.
            c.refused.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(100).min(left(end)));
        }
    }
}

fn main() {
    let a = match parse() {
        Ok(a) => Arc::new(a),
        Err(e) => {
            eprintln!("nbd_hostile: {e}");
            std::process::exit(2);
        }
    };
    let end = Instant::now() + Duration::from_secs_f64(a.seconds);
    let c = Arc::new(Counts::default());
    let threads: Vec<_> = (0..a.clients)
        .map(|k| {
            let (a, c) = (Arc::clone(&a), Arc::clone(&c));
            std::thread::spawn(move || client(&a, end, &c, k))
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    println!(
        "{{\"connected\":{},\"dropped\":{},\"refused_or_failed\":{}}}",
        c.connected.load(Ordering::Relaxed),
        c.dropped.load(Ordering::Relaxed),
        c.refused.load(Ordering::Relaxed)
    );
}
