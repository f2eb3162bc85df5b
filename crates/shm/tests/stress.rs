//! Stress of the doorbell protocol: millions of hand-offs through a tiny ring, so both sides
//! keep running dry or full and keep going to sleep; every record must arrive once, in order.
//! Bounded in count and in time (a lost wake-up shows up as a receive timeout, not a hang).

use offhost_shm::{pair, Config, Mode};
use std::time::{Duration, Instant};

/// Longest any single wait may take before the test calls it a lost wake-up.
const STALL: Option<Duration> = Some(Duration::from_secs(10));
/// Longest the whole run may take.
const LIMIT: Duration = Duration::from_secs(240);

fn stress(mode: Mode, records: u64, ring_bytes: u64) {
    let config = Config {
        ring_bytes, // a few dozen 16-byte records: the ring is full or empty all the time
        pool_buffers: 0,
        buffer_size: 64,
        mode,
        spin: Duration::from_micros(5),
        event_limit: None,
    };
    let (host, engine) = pair(&config).unwrap();
    let (mut tx, _hrx) = host.split();
    let (_etx, mut rx) = engine.split();
    let start = Instant::now();
    let producer = std::thread::spawn(move || {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut i = 0u64;
        while i < records {
            // Bursts of 1..=32 records, one publication each (or more when the ring fills).
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let burst = (seed % 32 + 1).min(records - i);
            for _ in 0..burst {
                if !tx.write(&i.to_le_bytes()).unwrap() {
                    tx.send(&i.to_le_bytes(), STALL)
                        .unwrap_or_else(|e| panic!("producer stalled at {i}: {e}"));
                }
                i += 1;
            }
            tx.flush().unwrap();
            assert!(start.elapsed() < LIMIT, "producer ran out of time at {i}");
        }
        tx
    });
    for expect in 0..records {
        let r = rx
            .recv(STALL)
            .unwrap_or_else(|e| panic!("consumer stalled at record {expect}: {e}"));
        let got = u64::from_le_bytes(r.bytes().try_into().expect("8-byte record"));
        assert_eq!(got, expect, "record out of order or duplicated");
        if expect % 1_000_000 == 0 {
            assert!(
                start.elapsed() < LIMIT,
                "consumer ran out of time at {expect}"
            );
        }
    }
    let _tx = producer.join().unwrap();
    assert!(rx.try_recv().unwrap().is_none(), "extra records");
}

#[test]
fn ten_million_handoffs_adaptive() {
    stress(Mode::Adaptive, 10_000_000, 1024);
}

#[test]
fn one_million_handoffs_block() {
    stress(Mode::Block, 1_000_000, 256);
}
