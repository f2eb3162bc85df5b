//! State shared by the halves of one endpoint: the mapped segment, the control connection, the
//! failure latch, the pool bookkeeping, and the wait loop that implements the doorbell modes.

use rustix::thread::futex;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::bell;
use crate::config::Mode;
use crate::control;
use crate::endpoint::Side;
use crate::error::ShmError;
use crate::layout::bell_index;
use crate::pool::Pool;
use crate::segment::Segment;
use crate::spin::{SpinBackoff, SpinStats};

/// How often a waiting side checks that its peer is still alive.
pub(crate) const LIVENESS_SLICE: Duration = Duration::from_millis(100);
/// After spinning this long without progress, a spinning side yields the CPU between checks,
/// so that a peer (or anyone else) waiting for this CPU gets to run.
const YIELD_AFTER: Duration = Duration::from_micros(20);
/// Looks at the condition a spinning wait takes before it reads the clock (a few hundred
/// nanoseconds at most, so timeouts stay exact to well under a microsecond).
const QUICK_LOOKS: u32 = 8;
/// A spinning wait whose looks at the clock (every 128 looks at the condition, a few
/// microseconds apart, or before and after a yield) are this far apart was off the CPU in
/// between while a thread that wanted it for a while ran: it competes for the CPU. (A
/// yield to another spinner comes back within a few microseconds.)
const OFF_CPU: Duration = Duration::from_micros(40);

pub(crate) struct Shared {
    pub seg: Segment,
    pub sock: UnixStream,
    /// Which end of the segment this process is.
    pub side: Side,
    mode: AtomicU32,
    spin_ns: AtomicU64,
    /// Whether adaptive waits spin, per doorbell (`[send, rx]`).
    spins: [SpinBackoff; 2],
    failed: AtomicBool,
    failure: Mutex<Option<String>>,
    pub pool: Mutex<Pool>,
    /// Endpoint halves still alive; the last one to go closes the control connection.
    halves: AtomicUsize,
}

impl Shared {
    pub(crate) fn new(
        seg: Segment,
        sock: UnixStream,
        side: Side,
        mode: Mode,
        spin: Duration,
    ) -> Shared {
        let pool = Pool::new(&seg, side);
        Shared {
            seg,
            sock,
            side,
            mode: AtomicU32::new(mode.to_wire()),
            spin_ns: AtomicU64::new(spin.as_nanos().min(u64::MAX as u128) as u64),
            spins: Default::default(),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            pool: Mutex::new(pool),
            halves: AtomicUsize::new(2),
        }
    }

    /// Called when a sender or receiver half is dropped: when both are gone the peer is told
    /// (end of file on the control connection), even while pool buffers are still held here.
    pub(crate) fn half_dropped(&self) {
        // AcqRel: the last half sees everything the other half did before it dropped.
        if self.halves.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _ = self.sock.shutdown(std::net::Shutdown::Both);
        }
    }

    pub(crate) fn set_mode(&self, mode: Mode, spin: Duration) {
        self.mode.store(mode.to_wire(), Ordering::Relaxed);
        self.spin_ns.store(
            spin.as_nanos().min(u64::MAX as u128) as u64,
            Ordering::Relaxed,
        );
    }

    pub(crate) fn mode(&self) -> (Mode, Duration) {
        let mode = Mode::from_wire(self.mode.load(Ordering::Relaxed)).unwrap_or(Mode::Block);
        (
            mode,
            Duration::from_nanos(self.spin_ns.load(Ordering::Relaxed)),
        )
    }

    /// What this side's waits on its receive (`rx`) or send doorbell did with their spins.
    pub(crate) fn spin_stats(&self, rx: bool) -> SpinStats {
        self.spins[usize::from(rx)].stats()
    }

    /// Returns the latched corruption error, if this side has stopped using the segment.
    #[inline]
    pub(crate) fn check(&self) -> Result<(), ShmError> {
        if self.failed.load(Ordering::Acquire) {
            return Err(self.latched());
        }
        Ok(())
    }

    /// The latched corruption error (the rare path of [`check`](Self::check), kept out of line).
    #[cold]
    #[inline(never)]
    fn latched(&self) -> ShmError {
        let msg = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        ShmError::CorruptPeer(msg.clone().unwrap_or_default())
    }

    /// Latches a corruption error so that every later operation fails too; passes `e` through.
    pub(crate) fn latch(&self, e: ShmError) -> ShmError {
        if let ShmError::CorruptPeer(msg) = &e {
            let mut f = self.failure.lock().unwrap_or_else(|p| p.into_inner());
            f.get_or_insert_with(|| msg.clone());
            // Release: pairs with the Acquire in `check`, publishing the message.
            self.failed.store(true, Ordering::Release);
        }
        e
    }

    fn bell(&self, side: Side, rx: bool) -> &AtomicU32 {
        &self.seg.map.control().bells[bell_index(side, rx)]
    }

    /// Rings the peer's doorbell: `rx` for "data to receive", else "room or buffers to send".
    /// Makes a system call only when the peer announced that it sleeps.
    pub(crate) fn wake_peer(&self, rx: bool) {
        let b = self.bell(self.side.peer(), rx);
        if bell::notify(b) {
            let _ = futex::wake(b, futex::Flags::empty(), 1);
        }
    }

    /// Rings the peer's data doorbell after a publication, honouring the event limit the peer
    /// may have set (see `bell`): `ready` yields the bytes published and not yet consumed.
    pub(crate) fn wake_peer_when(&self, ready: impl Fn() -> u64) {
        let b = self.bell(self.side.peer(), true);
        if bell::notify_when(b, ready) {
            let _ = futex::wake(b, futex::Flags::empty(), 1);
        }
    }

    pub(crate) fn check_alive(&self) -> Result<(), ShmError> {
        control::check_alive(&self.sock).map_err(|e| self.latch(e))
    }

    /// Waits on this side's `rx` (or send) doorbell until `cond` yields a value, the deadline
    /// passes, the peer dies, or `cond` reports corruption. When it sleeps, it asks to be woken
    /// only once `want` [`bell::WANT_UNIT`]s are published past its head (0: at once); the
    /// condition is still looked at on every wake-up.
    pub(crate) fn wait<T>(
        &self,
        rx: bool,
        want: u32,
        timeout: Option<Duration>,
        mut cond: impl FnMut() -> Result<Option<T>, ShmError>,
    ) -> Result<T, ShmError> {
        let mut cond = || cond().map_err(|e| self.latch(e));
        if let Some(v) = cond()? {
            return Ok(v);
        }
        let (mode, spin) = self.mode();
        if mode != Mode::Block {
            // A peer that answers at once is seen before the clock is read (a clock read costs
            // as much as a look at the ring, and delays noticing a quick answer).
            for _ in 0..QUICK_LOOKS {
                std::hint::spin_loop();
                if let Some(v) = cond()? {
                    return Ok(v);
                }
            }
        }
        let start = Instant::now();
        let deadline = timeout.map(|t| start + t);
        let spin_until = match mode {
            Mode::Poll => None,
            Mode::Block => Some(start),
            Mode::Adaptive => Some(start + spin),
        };
        let backoff = &self.spins[usize::from(rx)];
        let adaptive = mode == Mode::Adaptive;
        let mut last_live = start;
        let mut i: u32 = 0;
        // Spin phase (poll for ever, adaptive for its budget while spinning is free or pays
        // off). A look at the clock that comes long after the last one means this thread was
        // off the CPU: another thread wanted it (or got it when this one yielded).
        if mode == Mode::Poll || adaptive && backoff.should_spin() {
            let mut last_look = start;
            let mut contended = false;
            loop {
                if let Some(v) = cond()? {
                    if adaptive {
                        backoff.ended_with_condition(contended);
                    }
                    return Ok(v);
                }
                i = i.wrapping_add(1);
                if i.is_multiple_of(128) {
                    let now = Instant::now();
                    contended |= now - last_look >= OFF_CPU;
                    last_look = now;
                    if deadline.is_some_and(|d| now >= d) {
                        // A caller that waits in short slices never reaches the liveness
                        // check below: look at the peer before saying "not yet".
                        self.check_alive()?;
                        return Err(ShmError::Timeout);
                    }
                    if now - last_live >= LIVENESS_SLICE {
                        self.check_alive()?;
                        last_live = now;
                    }
                    if spin_until.is_some_and(|s| now >= s) {
                        backoff.ended(contended);
                        break;
                    }
                    if now - start >= YIELD_AFTER {
                        std::thread::yield_now();
                        // Another thread may have run meanwhile; the next look at the
                        // condition may end the wait before the next look at the clock.
                        last_look = Instant::now();
                        contended |= last_look - now >= OFF_CPU;
                    }
                }
                std::hint::spin_loop();
            }
        }
        // Sleep phase.
        let bell = self.bell(self.side, rx);
        loop {
            let word = bell::announce(bell, want);
            if let Some(v) = cond().inspect_err(|_| bell::retract(bell))? {
                bell::retract(bell);
                return Ok(v);
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                bell::retract(bell);
                self.check_alive()?;
                return Err(ShmError::Timeout);
            }
            if now - last_live >= LIVENESS_SLICE {
                self.check_alive().inspect_err(|_| bell::retract(bell))?;
                last_live = now;
            }
            let slice = deadline.map_or(LIVENESS_SLICE, |d| (d - now).min(LIVENESS_SLICE));
            let ts = futex::Timespec {
                tv_sec: slice.as_secs() as _,
                tv_nsec: slice.subsec_nanos() as _,
            };
            match futex::wait(bell, futex::Flags::empty(), word, Some(&ts)) {
                Ok(()) | Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::TIMEDOUT) => {
                    self.check_alive().inspect_err(|_| bell::retract(bell))?;
                    last_live = Instant::now();
                }
                Err(e) => {
                    bell::retract(bell);
                    return Err(ShmError::io("futex wait")(e));
                }
            }
        }
    }
}
