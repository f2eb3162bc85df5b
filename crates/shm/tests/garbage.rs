//! Random garbage in the shared indices, records and free rings: the reading side must either
//! deliver records whose bytes lie inside the segment or report a corrupt peer; it must never
//! panic, hang or read outside the segment.

mod common;

use common::{peek_u64, poke};

use offhost_shm::{pair, Config, Mode, ShmError, Side};
use std::time::Duration;

fn config() -> Config {
    Config {
        ring_bytes: 1024,
        pool_buffers: 4,
        buffer_size: 256,
        mode: Mode::Poll,
        spin: Duration::from_micros(1),
        event_limit: None,
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn random_ring_garbage_is_delivered_or_reported_never_out_of_bounds() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut corrupt = 0;
    for round in 0..2000 {
        let (mut host, engine) = pair(&config()).unwrap();
        let l = host.layout().clone();
        let data = l.ring_data_offset(1);
        // Scribble over the engine->host ring as a hostile engine would: every 16-byte slot
        // gets a stamp that is often right for its offset, and a plausible or noisy header.
        let mut bytes = vec![0u8; 1024];
        for (i, slot) in bytes.chunks_mut(16).enumerate() {
            let v = rng.next();
            let stamp = if !v.is_multiple_of(3) {
                i as u64 * 16 + 1
            } else {
                rng.next()
            };
            let header = if v.is_multiple_of(5) {
                rng.next()
            } else {
                (rng.next() % 300) | ((rng.next() % 5) << 32)
            };
            slot[..8].copy_from_slice(&stamp.to_le_bytes());
            slot[8..].copy_from_slice(&header.to_le_bytes());
        }
        poke(&engine, data, &bytes);
        let end = l.total_size();
        let mut got = 0;
        let failed = loop {
            match host.receiver().try_recv() {
                Ok(Some(r)) => {
                    assert!(
                        r.len() <= 1024,
                        "round {round}: record of {} bytes",
                        r.len()
                    );
                    let _ = r.bytes().iter().map(|&b| b as u64).sum::<u64>();
                    got += 1;
                    assert!(got <= 1024, "round {round}: endless records");
                }
                Ok(None) => break false,
                Err(ShmError::CorruptPeer(_)) => break true,
                Err(e) => panic!("round {round}: unexpected error {e}"),
            }
        };
        if failed {
            corrupt += 1;
            // Latched: the side has stopped using the segment.
            assert!(matches!(
                host.receiver().try_recv(),
                Err(ShmError::CorruptPeer(_))
            ));
        }
        assert!(peek_u64(&host, 0) == offhost_shm::MAGIC && end > 0);
        drop(engine);
    }
    assert!(
        corrupt > 500,
        "garbage was rarely detected: {corrupt} of 2000"
    );
}

#[test]
fn free_ring_returning_a_buffer_the_peer_does_not_hold_is_corrupt() {
    let (mut host, engine) = pair(&config()).unwrap();
    let held: Vec<_> = (0..4)
        .map(|_| host.sender().try_alloc().unwrap().unwrap())
        .collect();
    let l = host.layout().clone();
    let (tail_off, _) = l.free_index_offsets(Side::Host);
    // The engine "returns" host buffer 2, which the host holds itself.
    poke(&engine, l.free_data_offset(Side::Host), &2u32.to_le_bytes());
    poke(&engine, tail_off, &1u64.to_le_bytes());
    match host.sender().try_alloc() {
        Err(ShmError::CorruptPeer(m)) => assert!(m.contains("which it did not hold"), "{m}"),
        other => panic!("expected CorruptPeer, got {other:?}"),
    }
    drop(held);
}

#[test]
fn free_ring_index_from_the_wrong_side_is_corrupt() {
    let (mut host, engine) = pair(&config()).unwrap();
    let held: Vec<_> = (0..4)
        .map(|_| host.sender().try_alloc().unwrap().unwrap())
        .collect();
    let l = host.layout().clone();
    let (tail_off, _) = l.free_index_offsets(Side::Host);
    poke(&engine, l.free_data_offset(Side::Host), &6u32.to_le_bytes()); // homed at the engine
    poke(&engine, tail_off, &1u64.to_le_bytes());
    match host.sender().try_alloc() {
        Err(ShmError::CorruptPeer(m)) => assert!(m.contains("not homed here"), "{m}"),
        other => panic!("expected CorruptPeer, got {other:?}"),
    }
    drop(held);
}
