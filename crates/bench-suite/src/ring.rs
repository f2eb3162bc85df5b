//! The raw shared-memory rings of `offhost-shm` (transport `shm`) as a suite target: a host
//! endpoint and an engine thread on a segment made by `offhost_shm::pair`, each side waiting in
//! the chosen doorbell mode. Messages larger than a ring record are sent as several records.

use std::io;
use std::thread::JoinHandle;

use offhost_bench::affinity;
use offhost_bench::run::{serve, Conn, Role};
use offhost_shm::{Config, Mode, ShmError};

use crate::error::Result;

/// One side of the rings as a suite endpoint.
pub struct RingConn {
    ep: offhost_shm::Endpoint,
    chunk: usize,
    ring_bytes: usize,
}

fn io_err(e: ShmError) -> io::Error {
    io::Error::other(e)
}

fn overrun(record: usize, message: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("record of {record} bytes overruns a {message}-byte message"),
    )
}

impl RingConn {
    fn new(mut ep: offhost_shm::Endpoint, ring_bytes: usize) -> RingConn {
        // A quarter ring per record lets the reader drain one while the writer fills another.
        let max = ep.sender().max_record();
        RingConn {
            chunk: max.min(ring_bytes / 4).max(8),
            ring_bytes,
            ep,
        }
    }
}

impl Conn for RingConn {
    fn send(&mut self, msg: &[u8]) -> io::Result<()> {
        let chunk = self.chunk;
        let tx = self.ep.sender();
        for part in msg.chunks(chunk) {
            tx.send(part, None).map_err(io_err)?;
        }
        Ok(())
    }

    fn send_many(&mut self, msg: &[u8], count: usize) -> io::Result<()> {
        // Stage every record and publish when the ring is full and at the end: batched
        // publication, one wake-up per batch.
        let chunk = self.chunk;
        let tx = self.ep.sender();
        for _ in 0..count {
            for part in msg.chunks(chunk) {
                if !tx.write(part).map_err(io_err)? {
                    tx.send(part, None).map_err(io_err)?;
                }
            }
        }
        tx.flush().map_err(io_err)
    }

    fn exchange(&mut self, out: &[u8], inb: &mut [u8]) -> io::Result<()> {
        // When a whole message fits in half a ring, sending first cannot block on a peer that
        // is itself sending. Larger ones move chunk by chunk in both directions at once, with
        // non-blocking calls (this side then spins and yields rather than sleeping).
        let fits = out.len().div_ceil(self.chunk) * (self.chunk + 8) <= self.ring_bytes / 2;
        if fits {
            self.send(out)?;
            return self.recv(inb);
        }
        let chunk = self.chunk;
        let (mut w, mut r) = (0, 0);
        while w < out.len() || r < inb.len() {
            let mut moved = false;
            if w < out.len() {
                let end = (w + chunk).min(out.len());
                let tx = self.ep.sender();
                if tx.write(&out[w..end]).map_err(io_err)? {
                    tx.flush().map_err(io_err)?;
                    (w, moved) = (end, true);
                }
            }
            if r < inb.len() {
                if let Some(rec) = self.ep.receiver().try_recv().map_err(io_err)? {
                    let b = rec.bytes();
                    let end = r + b.len();
                    if end > inb.len() {
                        return Err(overrun(b.len(), inb.len()));
                    }
                    inb[r..end].copy_from_slice(b);
                    (r, moved) = (end, true);
                }
            }
            if !moved {
                std::thread::yield_now();
            }
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<()> {
        let rx = self.ep.receiver();
        let mut at = 0;
        while at < buf.len() || buf.is_empty() {
            let rec = rx.recv(None).map_err(io_err)?;
            let b = rec.bytes();
            let end = at + b.len();
            if end > buf.len() {
                return Err(overrun(b.len(), buf.len()));
            }
            buf[at..end].copy_from_slice(b);
            at = end;
            if buf.is_empty() {
                break;
            }
        }
        Ok(())
    }
}

/// A running raw-ring target: the host endpoint and the engine thread.
pub struct RingRun {
    host: Option<RingConn>,
    thread: Option<JoinHandle<()>>,
}

impl RingRun {
    /// Starts the engine thread serving `role` for `size`-byte messages, both sides in `mode`.
    pub fn start(mode: Mode, role: Role, size: usize) -> Result<RingRun> {
        let config = Config {
            mode,
            ..Config::default()
        };
        let ring = config.ring_bytes as usize;
        let (host, engine) = offhost_shm::pair(&config)?;
        let (_, engine_core) = affinity::host_engine_cores();
        let mut engine = RingConn::new(engine, ring);
        let thread = std::thread::Builder::new()
            .name("shm-engine".into())
            .spawn(move || {
                let _ = affinity::pin_current_thread(engine_core);
                serve(&mut engine, role, size);
            })?;
        Ok(RingRun {
            host: Some(RingConn::new(host, ring)),
            thread: Some(thread),
        })
    }

    /// The host's endpoint.
    pub fn conn(&mut self) -> &mut dyn Conn {
        self.host.as_mut().expect("present until drop")
    }
}

impl Drop for RingRun {
    fn drop(&mut self) {
        drop(self.host.take()); // the engine sees the peer gone and returns
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use offhost_bench::run::{measure, Pattern, Plan};

    /// Messages larger than a record (a quarter ring) cross in several records, and in an
    /// exchange both ways at once.
    #[test]
    fn the_rings_carry_every_pattern_in_every_mode() {
        let plan = Plan::preset("small").unwrap();
        for mode in [Mode::Poll, Mode::Block, Mode::Adaptive] {
            for pattern in [
                Pattern::PingPong,
                Pattern::Exchange,
                Pattern::Stream { window: 4 },
            ] {
                for size in [8, 300_000] {
                    let mut run = RingRun::start(mode, pattern.role(), size).unwrap();
                    let m = measure(run.conn(), pattern, size, &plan, None, None)
                        .unwrap_or_else(|e| panic!("{mode:?} {pattern:?} {size}: {e}"));
                    assert_eq!(m.samples.len(), plan.reps);
                }
            }
        }
    }
}
