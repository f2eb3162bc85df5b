//! `[SUN-T]`'s host/transputer transfer disciplines, rebuilt between two threads on two cores
//! through memory shared by both (the link's FIFO is a set of slots of atomics):
//!
//! - **unbuffered**: one readiness check per byte (a one-byte FIFO, polled);
//! - **buffered, full FIFO**: wait until the whole FIFO is empty, fill it, one check per FIFO;
//! - **buffered, half FIFO**: two halves, so one can drain while the other fills;
//! - **interrupt-driven**: the half-FIFO transfer, but each side sleeps until the other wakes
//!   it (a blocking doorbell: `thread::park`/`unpark`, a futex with a need-wake-up state, so no
//!   system call is made while the waiter is awake).
//!
//! Data are written byte by byte, as the paper's drivers wrote the FIFO's data register.

use std::io;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use offhost_bench::affinity;
use offhost_bench::run::{serve, Conn, Role};

/// A transfer discipline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discipline {
    /// One readiness check per byte.
    Unbuffered,
    /// One check per full FIFO.
    FullFifo,
    /// One check per half FIFO; the halves alternate.
    HalfFifo,
    /// Half FIFO, sleeping until woken.
    Interrupt,
}

impl Discipline {
    /// Every discipline, in the paper's order.
    pub const ALL: [Discipline; 4] = [
        Discipline::Unbuffered,
        Discipline::FullFifo,
        Discipline::HalfFifo,
        Discipline::Interrupt,
    ];

    /// Short name for rows and plots.
    pub fn name(self) -> &'static str {
        match self {
            Discipline::Unbuffered => "unbuffered",
            Discipline::FullFifo => "fifo-full",
            Discipline::HalfFifo => "fifo-half",
            Discipline::Interrupt => "interrupt",
        }
    }

    /// (slots, bytes per slot) for a FIFO of `fifo` bytes.
    fn geometry(self, fifo: usize) -> (usize, usize) {
        match self {
            Discipline::Unbuffered => (1, 1),
            Discipline::FullFifo => (1, fifo.max(1)),
            Discipline::HalfFifo | Discipline::Interrupt => (2, (fifo / 2).max(1)),
        }
    }
}

struct Slot {
    /// Bytes in the slot; 0 = empty. Release by the filler, Acquire by the drainer, and the
    /// reverse for emptying: the data stores happen-before the count that publishes them.
    count: CachePadded<AtomicUsize>,
    data: Box<[AtomicU8]>,
}

/// One direction: slots shared by a writer and a reader thread.
struct Fifo {
    slots: Box<[Slot]>,
    blocking: bool,
    writer: OnceLock<Thread>,
    reader: OnceLock<Thread>,
}

impl Fifo {
    fn new(d: Discipline, fifo: usize) -> Fifo {
        let (n, cap) = d.geometry(fifo);
        Fifo {
            slots: (0..n)
                .map(|_| Slot {
                    count: CachePadded::new(AtomicUsize::new(0)),
                    data: (0..cap).map(|_| AtomicU8::new(0)).collect(),
                })
                .collect(),
            blocking: d == Discipline::Interrupt,
            writer: OnceLock::new(),
            reader: OnceLock::new(),
        }
    }

    /// Waits until `ready` holds, spinning or sleeping by discipline.
    fn wait(&self, ready: impl Fn() -> bool) {
        while !ready() {
            if self.blocking {
                // A pending unpark makes park return at once, so a wake-up that came between
                // the check and here is not lost; spurious returns re-check.
                std::thread::park();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    fn wake(&self, who: &OnceLock<Thread>) {
        if self.blocking {
            if let Some(t) = who.get() {
                t.unpark();
            }
        }
    }
}

/// One side of a pair of FIFOs as a suite endpoint.
pub struct FifoConn {
    tx: Arc<Fifo>,
    rx: Arc<Fifo>,
    w: usize,
    r: usize,
}

impl FifoConn {
    fn register(&self) {
        let _ = self.tx.writer.set(std::thread::current());
        let _ = self.rx.reader.set(std::thread::current());
    }
}

impl Conn for FifoConn {
    fn send(&mut self, msg: &[u8]) -> io::Result<()> {
        let f = &*self.tx;
        let cap = f.slots[0].data.len();
        for part in msg.chunks(cap) {
            let slot = &f.slots[self.w];
            // Ordering: Acquire pairs with the reader's Release store of 0 below: its reads of the
            // slot's bytes happen before we overwrite them.
            f.wait(|| slot.count.load(Ordering::Acquire) == 0);
            for (d, &b) in slot.data.iter().zip(part) {
                d.store(b, Ordering::Relaxed);
            }
            // Ordering: Release pairs with the reader's Acquire loads of `count`: the Relaxed byte
            // stores above are visible before the count says the slot is full.
            slot.count.store(part.len(), Ordering::Release);
            f.wake(&f.reader);
            self.w = (self.w + 1) % f.slots.len();
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<()> {
        let f = &*self.rx;
        let mut at = 0;
        while at < buf.len() {
            let slot = &f.slots[self.r];
            // Ordering: Acquire (both loads) pairs with the writer's Release store of `count`,
            // making the slot's bytes visible to the Relaxed loads below.
            f.wait(|| slot.count.load(Ordering::Acquire) != 0);
            let n = slot.count.load(Ordering::Acquire);
            if n > buf.len() - at {
                // Also how the end of stream arrives (see `FifoRun::stop`).
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "FIFO holds more than the message: end of stream",
                ));
            }
            for (b, d) in buf[at..at + n].iter_mut().zip(slot.data.iter()) {
                *b = d.load(Ordering::Relaxed);
            }
            // Ordering: Release pairs with the writer's Acquire load of `count == 0`: our reads of
            // the slot happen before it refills it.
            slot.count.store(0, Ordering::Release);
            f.wake(&f.writer);
            self.r = (self.r + 1) % f.slots.len();
            at += n;
        }
        Ok(())
    }
}

/// A running FIFO pair: the host's endpoint and the echo or sink thread on the engine core.
pub struct FifoRun {
    host: FifoConn,
    thread: Option<JoinHandle<()>>,
}

/// Starts a peer thread serving `role` for `size`-byte messages through FIFOs of `fifo`
/// bytes with discipline `d`. The calling thread becomes the host side.
pub fn start(d: Discipline, fifo: usize, role: Role, size: usize) -> io::Result<FifoRun> {
    let a = Arc::new(Fifo::new(d, fifo));
    let b = Arc::new(Fifo::new(d, fifo));
    let host = FifoConn {
        tx: a.clone(),
        rx: b.clone(),
        w: 0,
        r: 0,
    };
    host.register();
    let mut peer = FifoConn {
        tx: b,
        rx: a,
        w: 0,
        r: 0,
    };
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (_, engine_core) = affinity::host_engine_cores();
    let thread = std::thread::Builder::new()
        .name(format!("fifo-{}", d.name()))
        .spawn(move || {
            let _ = affinity::pin_current_thread(engine_core);
            peer.register();
            let _ = ready_tx.send(());
            serve(&mut peer, role, size);
        })?;
    // Both sides are registered before the first transfer: no wake-up can miss its thread.
    ready_rx
        .recv()
        .map_err(|_| io::Error::other("FIFO peer thread died"))?;
    Ok(FifoRun {
        host,
        thread: Some(thread),
    })
}

impl FifoRun {
    /// The host's endpoint.
    pub fn conn(&mut self) -> &mut dyn Conn {
        &mut self.host
    }

    /// Ends the peer thread and joins it (also done on drop).
    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        // Mark end of stream: a count the peer can never expect (larger than any message it
        // was started for) makes its receive fail and its loop return.
        let f = &*self.host.tx;
        let slot = &f.slots[self.host.w];
        // A peer stuck elsewhere (it never is in a finished run) must not hang the host:
        // give it a second to drain the slot, else leave the thread detached.
        let deadline = Instant::now() + Duration::from_secs(1);
        // Ordering: Acquire pairs with the reader's Release store of 0: it has finished with the
        // slot.
        while slot.count.load(Ordering::Acquire) != 0 {
            if Instant::now() > deadline {
                self.thread.take();
                return;
            }
            std::thread::yield_now();
        }
        // Ordering: Release pairs with the reader's Acquire loads of `count`: the end marker is
        // seen after everything before it.
        slot.count.store(usize::MAX, Ordering::Release);
        f.wake(&f.reader);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for FifoRun {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use offhost_bench::run::{measure, Pattern, Plan};

    #[test]
    fn every_discipline_echoes_the_bytes_and_ends() {
        for d in Discipline::ALL {
            for size in [1, 4, 1000, 5000] {
                let mut run = start(d, 1024, Role::Echo, size).unwrap();
                let msg: Vec<u8> = (0..size).map(|i| (i * 13 + 1) as u8).collect();
                let mut back = vec![0u8; size];
                for _ in 0..3 {
                    run.conn().send(&msg).unwrap();
                    run.conn().recv(&mut back).unwrap();
                    assert_eq!(msg, back, "{d:?} {size}");
                }
                run.finish();
            }
        }
    }

    #[test]
    fn every_discipline_measures() {
        let plan = Plan::preset("small").unwrap();
        for d in Discipline::ALL {
            let mut run = start(d, 64, Role::Echo, 256).unwrap();
            let m = measure(run.conn(), Pattern::PingPong, 256, &plan, None, None).unwrap();
            assert_eq!(m.samples.len(), plan.reps);
        }
    }
}
