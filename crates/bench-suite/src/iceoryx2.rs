//! `iceoryx2`: the zero-copy shared-memory middleware a user would otherwise pick, measured as
//! a plain peer in the same run as offhost's rings (`offhost bench pingpong --transport
//! shm,iceoryx2`).
//!
//! Each direction is one iceoryx2 publish-subscribe service of byte slices (`[u8]`, one
//! publisher, one subscriber, room for 64 samples), in the `ipc_threadsafe` flavour (its ports
//! may move between threads), as iceoryx2's own `benchmark-publish-subscribe` uses them: a
//! send loans a sample, copies the message into it and publishes it; a receive takes the next
//! sample and copies it out (as every other transport's receive does, so both copies are in
//! the time). The wait follows the doorbell mode:
//!
//! - `poll`: spin on `receive` (iceoryx2's busy-waiting benchmark);
//! - `block`: each send also signals an iceoryx2 event service, and a receive that finds
//!   nothing waits on its listener (iceoryx2's `benchmark-event`);
//! - `adaptive`: spin for the spin budget, then wait as `block`.
//!
//! The peer runs on a thread pinned on the engine core, as every plain peer does. A peer whose
//! other side is gone (no publisher left on its input service) ends its loop. Built only with
//! the `iceoryx2` feature (on by default in the CLI); without it the transport is refused with
//! the reason.

use std::time::Duration;

use offhost_bench::plain::PeerRun;
use offhost_bench::run::Role;
use offhost_shm::Mode;

use crate::error::{Error, Result};

/// Whether this build has the iceoryx2 peer.
pub const AVAILABLE: bool = cfg!(feature = "iceoryx2");

/// Starts an iceoryx2 peer serving `role` for `size`-byte messages, both sides waiting in
/// `mode` (`spin`: the spin budget of `adaptive`).
pub fn start(mode: Mode, spin: Duration, role: Role, size: usize) -> Result<PeerRun> {
    imp::start(mode, spin, role, size)
}

/// `bench rate`'s stream through iceoryx2: `count` messages of `size` bytes published (each
/// loaned, written and sent, as offhost's `copy` path copies each message into the link) to
/// a sink on a thread pinned on the engine core, which looks at each in place (its first
/// byte, as offhost's sink does) and answers with the number it took. Returns nanoseconds per
/// message, from the first send until the answer; the services are set up before the clock
/// starts.
pub fn rate_run(mode: Mode, spin: Duration, size: usize, count: usize) -> Result<f64> {
    imp::rate_run(mode, spin, size, count)
}

#[cfg(not(feature = "iceoryx2"))]
mod imp {
    use super::*;

    fn refused() -> Error {
        Error::Invalid(
            "iceoryx2: this offhost was built without the iceoryx2 feature (cargo build --features iceoryx2)"
                .into(),
        )
    }

    pub(super) fn start(_: Mode, _: Duration, _: Role, _: usize) -> Result<PeerRun> {
        Err(refused())
    }

    pub(super) fn rate_run(_: Mode, _: Duration, _: usize, _: usize) -> Result<f64> {
        Err(refused())
    }
}

#[cfg(feature = "iceoryx2")]
mod imp {
    use std::io;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;

    use iceoryx2::port::listener::Listener;
    use iceoryx2::port::notifier::Notifier;
    use iceoryx2::port::publisher::Publisher;
    use iceoryx2::port::subscriber::Subscriber;
    use iceoryx2::prelude::*;
    use iceoryx2::service::ipc_threadsafe::Service as Ipc;
    use iceoryx2::service::port_factory::publish_subscribe::PortFactory;
    use iceoryx2::service::port_factory::PortFactory as _;
    use offhost_bench::plain;
    use offhost_bench::run::Conn;
    use offhost_bench::transport::Transport;

    use super::*;

    /// Samples a subscriber holds (a stream's window must fit).
    const QUEUE: usize = 64;
    /// How long one wait on the event listener lasts before the peer's presence is checked.
    const CHECK: Duration = Duration::from_millis(50);

    fn err(what: &str, e: impl std::fmt::Debug) -> io::Error {
        io::Error::other(format!("iceoryx2 {what}: {e:?}"))
    }

    /// One side: publishes on `out`, subscribes to `inp`.
    struct End {
        publisher: Publisher<Ipc, [u8], ()>,
        subscriber: Subscriber<Ipc, [u8], ()>,
        input: PortFactory<Ipc, [u8], ()>,
        _output: PortFactory<Ipc, [u8], ()>,
        events: Option<(Notifier<Ipc>, Listener<Ipc>)>,
        /// How long a receive spins before it waits on the listener (`None`: for ever).
        spin: Option<Duration>,
        _node: Node<Ipc>,
    }

    fn service(node: &Node<Ipc>, name: &str) -> io::Result<PortFactory<Ipc, [u8], ()>> {
        let name: ServiceName = name.try_into().map_err(|e| err("service name", e))?;
        node.service_builder(&name)
            .publish_subscribe::<[u8]>()
            .max_publishers(1)
            .max_subscribers(1)
            .history_size(0)
            .subscriber_max_buffer_size(QUEUE)
            .enable_safe_overflow(false)
            .open_or_create()
            .map_err(|e| err("service", e))
    }

    fn end(out: &str, inp: &str, size: usize, mode: Mode, spin: Duration) -> io::Result<End> {
        let node = NodeBuilder::new()
            .create::<Ipc>()
            .map_err(|e| err("node", e))?;
        let output = service(&node, out)?;
        let input = service(&node, inp)?;
        let publisher = output
            .publisher_builder()
            .initial_max_slice_len(size.max(1))
            .max_loaned_samples(2)
            .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
            .create()
            .map_err(|e| err("publisher", e))?;
        let subscriber = input
            .subscriber_builder()
            .create()
            .map_err(|e| err("subscriber", e))?;
        let events = if mode == Mode::Poll {
            None
        } else {
            let event = |n: &str| -> io::Result<_> {
                let name: ServiceName = format!("{n}/event")
                    .as_str()
                    .try_into()
                    .map_err(|e| err("service name", e))?;
                node.service_builder(&name)
                    .event()
                    .open_or_create()
                    .map_err(|e| err("event service", e))
            };
            let notifier = event(out)?
                .notifier_builder()
                .create()
                .map_err(|e| err("notifier", e))?;
            let listener = event(inp)?
                .listener_builder()
                .create()
                .map_err(|e| err("listener", e))?;
            Some((notifier, listener))
        };
        Ok(End {
            publisher,
            subscriber,
            input,
            _output: output,
            events,
            spin: match mode {
                Mode::Poll => None,
                Mode::Adaptive => Some(spin),
                _ => Some(Duration::ZERO),
            },
            _node: node,
        })
    }

    impl End {
        /// Whether the other side still publishes to us.
        fn peer_there(&self) -> bool {
            self.input.dynamic_config().number_of_publishers() > 0
        }
    }

    impl Conn for End {
        fn send(&mut self, msg: &[u8]) -> io::Result<()> {
            let sample = self
                .publisher
                .loan_slice_uninit(msg.len())
                .map_err(|e| err("loan", e))?;
            sample
                .write_from_slice(msg)
                .send()
                .map_err(|e| err("send", e))?;
            if let Some((n, _)) = &self.events {
                n.notify().map_err(|e| err("notify", e))?;
            }
            Ok(())
        }

        fn recv(&mut self, buf: &mut [u8]) -> io::Result<()> {
            self.take(|p| {
                if p.len() != buf.len() {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("expected {} bytes, got {}", buf.len(), p.len()),
                    ));
                }
                buf.copy_from_slice(p);
                Ok(())
            })
        }
    }

    impl End {
        /// Waits for the next sample (as the mode says) and hands its payload to `f` in place.
        fn take<T>(&mut self, f: impl FnOnce(&[u8]) -> io::Result<T>) -> io::Result<T> {
            let start = Instant::now();
            let mut polls = 0u32;
            loop {
                if let Some(s) = self.subscriber.receive().map_err(|e| err("receive", e))? {
                    return f(s.payload());
                }
                match (&self.events, self.spin) {
                    (Some((_, l)), Some(d)) if start.elapsed() >= d => {
                        l.timed_wait(|_| {}, CHECK).map_err(|e| err("wait", e))?;
                        if !self.peer_there() && !self.subscriber.has_samples().unwrap_or(false) {
                            return Err(io::ErrorKind::UnexpectedEof.into());
                        }
                    }
                    _ => {
                        polls = polls.wrapping_add(1);
                        if polls.is_multiple_of(4096) && !self.peer_there() {
                            return Err(io::ErrorKind::UnexpectedEof.into());
                        }
                        std::hint::spin_loop();
                    }
                }
            }
        }
    }

    /// The names of a fresh pair of services, one per direction.
    fn names() -> (String, String) {
        static RUN: AtomicU64 = AtomicU64::new(0);
        set_log_level(LogLevel::Error);
        let base = format!(
            "offhost/bench/{}/{}",
            std::process::id(),
            RUN.fetch_add(1, Ordering::Relaxed)
        );
        (format!("{base}/to-peer"), format!("{base}/to-host"))
    }

    fn peer_err(e: io::Error) -> Error {
        Error::Peer(e.to_string())
    }

    pub(super) fn rate_run(mode: Mode, spin: Duration, size: usize, count: usize) -> Result<f64> {
        let (a, b) = names();
        let mut host = end(&a, &b, size, mode, spin).map_err(peer_err)?;
        let mut sink = end(&b, &a, 8, mode, spin).map_err(peer_err)?;
        let (_, engine_core) = offhost_bench::affinity::host_engine_cores();
        let thread = std::thread::Builder::new()
            .name("peer-iceoryx2".into())
            .spawn(move || -> io::Result<End> {
                let _ = offhost_bench::affinity::pin_current_thread(engine_core);
                let mut seen = 0u8;
                for _ in 0..count {
                    seen ^= sink.take(|p| Ok(p.first().copied().unwrap_or(0)))?;
                }
                std::hint::black_box(seen);
                sink.send(&(count as u64).to_le_bytes())?;
                // Handed back, not dropped: a sample is readable only while its publisher
                // lives, so the sink's side lasts until the host has read the answer.
                Ok(sink)
            })?;
        let data = vec![0x5au8; size];
        let t0 = Instant::now();
        let sent = (0..count).try_for_each(|_| host.send(&data));
        let mut answer = [0u8; 8];
        let answered = sent.and_then(|()| host.recv(&mut answer));
        let elapsed = t0.elapsed();
        // Dropping the host's side ends a sink that is still waiting.
        drop(host);
        let sink = thread
            .join()
            .map_err(|_| Error::Peer("the iceoryx2 sink panicked".into()))?;
        answered.and(sink.map(drop)).map_err(peer_err)?;
        let got = u64::from_le_bytes(answer);
        crate::error::check(got == count as u64, || {
            format!("the iceoryx2 sink took {got} messages of {count}")
        })?;
        Ok(elapsed.as_nanos() as f64 / count as f64)
    }

    pub(super) fn start(mode: Mode, spin: Duration, role: Role, size: usize) -> Result<PeerRun> {
        let (a, b) = names();
        let host = end(&a, &b, size, mode, spin).map_err(peer_err)?;
        let peer = end(&b, &a, size, mode, spin).map_err(peer_err)?;
        Ok(plain::start_pair(
            Transport::Iceoryx2,
            Box::new(host),
            Box::new(peer),
            role,
            size,
        )?)
    }
}

#[cfg(all(test, feature = "iceoryx2"))]
mod tests {
    use super::*;
    use offhost_bench::run::{measure, Pattern, Plan};

    /// In every mode the echo returns the bytes sent, a stream's window fits, and dropping
    /// the host's side ends the peer (the run's drop joins its thread: no hang).
    #[test]
    fn echo_and_sink_in_every_mode() {
        for mode in [Mode::Poll, Mode::Block, Mode::Adaptive] {
            let mut run = start(mode, Duration::from_micros(50), Role::Echo, 5000).unwrap();
            let msg: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
            let mut back = vec![0u8; 5000];
            run.conn().send(&msg).unwrap();
            run.conn().recv(&mut back).unwrap();
            assert_eq!(msg, back, "{mode:?}");
            // A message of another size is an error, not a wrong answer.
            run.conn().send(&msg[..10]).unwrap();
            assert!(run.conn().recv(&mut back).is_err(), "{mode:?}");
            drop(run);
            let plan = Plan::preset("small").unwrap();
            let pattern = Pattern::Stream { window: 8 };
            let mut run = start(mode, Duration::from_micros(50), pattern.role(), 64).unwrap();
            let m = measure(run.conn(), pattern, 64, &plan, None, None).unwrap();
            assert_eq!(m.samples.len(), plan.reps, "{mode:?}");
        }
    }

    /// A rate run delivers every message (the sink's count is checked) in every mode, more
    /// messages than the subscriber's queue holds.
    #[test]
    fn a_rate_run_counts_every_message() {
        for mode in [Mode::Poll, Mode::Block, Mode::Adaptive] {
            let ns = rate_run(mode, Duration::from_micros(50), 4096, 1000).unwrap();
            assert!(ns > 0.0, "{mode:?}: {ns}");
        }
    }
}
