//! One running echo peer of any transport, ready for pingpong's round trips: the raw ring
//! (records inline or in pool buffers, the echo in `offhost echo --raw`, on a thread, or
//! remote), a channel (the link's echo service on a thread, or `offhost echo` over shm), or a
//! plain transport (an echo thread).

use std::thread::JoinHandle;
use std::time::Duration;

use offhost_bench::affinity;
use offhost_bench::cpu;
use offhost_bench::plain::PeerRun;
use offhost_bench::run::Role;
use offhost_bench::transport::{Kind, Placement, Transport};
use offhost_link::{Channel, ChannelOptions, SendMode, Session};
use offhost_shm::Config;

use super::Options;
use crate::channel::Served;
use crate::error::{check, Context as _, Error, Result};
use crate::process::{unique_name, PeerProcess, EXIT_GRACE, START_TIMEOUT};
use crate::tls::{self, Pki};
use offhost_link::Wait;

const T: Option<Duration> = Some(Duration::from_secs(10));

/// The measuring side's ends.
enum Ends {
    Ring(offhost_shm::Endpoint),
    Channel(Channel, Option<Session>),
    Plain(PeerRun),
}

/// The echo side.
enum Side {
    /// The ring's echo on a thread, with its thread id (for its CPU time).
    Thread(JoinHandle<Result<()>>, u32),
    /// A channel's echo service on a thread, with the host's session.
    Served(Served),
    Process(PeerProcess),
    Remote,
    /// A plain transport's echo, inside its [`PeerRun`].
    InRun,
}

/// A running echo peer.
pub(super) struct PingPeer {
    transport: Transport,
    placement: Placement,
    ends: Ends,
    side: Side,
    /// Raw ring: records larger than this go in pool buffers.
    loan_above: Option<usize>,
}

/// Channel options for a ping-pong of `size`-byte messages: one packet up to 64 KiB.
pub(crate) fn options(size: usize) -> ChannelOptions {
    let max = size.max(1) as u64;
    ChannelOptions {
        packet_size: size.clamp(8, 64 * 1024).next_power_of_two(),
        recv_buffer: (2 * max).max(1 << 20) as u32,
        max_message: max,
        send_mode: SendMode::Async,
    }
}

/// Where the echo of `t` runs unless told: `offhost echo` in another process for offhost's
/// shared memory (raw ring and channels), a thread of this process for the rest (iceoryx2
/// among them).
pub(super) fn default_placement(t: Transport) -> Placement {
    if t.is_offhost_shm() {
        Placement::Process
    } else {
        Placement::Thread
    }
}

impl PingPeer {
    /// Starts the echo peer of `t` for `size`-byte messages (the raw ring serves every size
    /// of `o`): the measuring thread is pinned to the first CPU of `cpus`, the echo side (and
    /// the threads it starts) to the second. `tls` and `tls-raw` use the run's certificates
    /// `pki`.
    pub(super) fn start(
        o: &Options,
        t: Transport,
        size: usize,
        cpus: Option<(usize, usize)>,
        pki: Option<&Pki>,
    ) -> Result<PingPeer> {
        let placement = o.placement(t)?;
        if let Some((a, _)) = cpus {
            let _ = affinity::pin_current_thread(a);
        }
        let mut echo_args: Vec<String> =
            cpus.map_or(vec![], |(_, b)| vec!["--pin".into(), b.to_string()]);
        if let Some(l) = o.event_limit {
            echo_args.extend(["--event-limit".into(), l.to_string()]);
        }
        let (ends, side) = match (t.kind(), placement) {
            (Kind::RawRing, Placement::Remote) => {
                let addr = o.connect.as_deref().unwrap_or_default();
                let ep = offhost_shm::connect(addr, &o.ring_config())
                    .with_context(|| format!("connect to echo engine at shm:{addr}"))?;
                (Ends::Ring(ep), Side::Remote)
            }
            (Kind::RawRing, Placement::Process) => {
                let addr = unique_name("ring");
                let mut args: Vec<String> = ["--raw", "--listen", &format!("shm:{addr}"), "--once"]
                    .map(String::from)
                    .into();
                args.extend(["--mode".into(), o.mode.name().into()]);
                args.extend(["--spin-us".into(), o.spin_us.to_string()]);
                args.extend(echo_args);
                if o.touch {
                    args.push("--touch".into());
                }
                let mut p = PeerProcess::echo(&o.exe, &args)?;
                let config = o.ring_config();
                let ep = p.until_ready(START_TIMEOUT, || offhost_shm::connect(&addr, &config))?;
                (Ends::Ring(ep), Side::Process(p))
            }
            (Kind::RawRing, Placement::Thread) => {
                let (host, engine) = offhost_shm::pair(&o.ring_config())?;
                let touch = o.touch;
                let (tid_tx, tid_rx) = std::sync::mpsc::channel();
                let handle = std::thread::spawn(move || {
                    if let Some((_, b)) = cpus {
                        let _ = affinity::pin_current_thread(b);
                    }
                    let _ = tid_tx.send(cpu::current_tid());
                    offhost_shm::echo_with(engine, touch)
                        .map(drop)
                        .context("echo thread")
                });
                let tid = tid_rx
                    .recv()
                    .map_err(|_| Error::Peer("echo thread did not start".into()))?;
                (Ends::Ring(host), Side::Thread(handle, tid))
            }
            (Kind::Channel, Placement::Process) => {
                let addr = unique_name("chan");
                let mut args = echo_args;
                args.extend(["--listen".into(), format!("shm:{addr}"), "--once".into()]);
                let mut p = PeerProcess::echo(&o.exe, &args)?;
                let config = channel_shm_config(o, size);
                let session =
                    p.until_ready(START_TIMEOUT, || Session::connect_shm(&addr, &config))?;
                let ch = session.open("pingpong", options(size))?;
                (Ends::Channel(ch, Some(session)), Side::Process(p))
            }
            (Kind::Channel, Placement::Thread) => {
                let config = channel_shm_config(o, size);
                let served = Served::start_with(t, Some(&config), pki, |session| {
                    offhost_link::echo_channel(&session.accept()?)?;
                    Ok(())
                })?;
                let ch = served.session().open("pingpong", options(size))?;
                (Ends::Channel(ch, None), Side::Served(served))
            }
            (Kind::Plain, Placement::Thread) if t == Transport::Iceoryx2 => (
                Ends::Plain(crate::iceoryx2::start(
                    o.mode,
                    Duration::from_micros(o.spin_us),
                    Role::Echo,
                    size,
                )?),
                Side::InRun,
            ),
            (Kind::Plain, Placement::Thread) => (
                Ends::Plain(tls::start_plain(t, pki, Role::Echo, size)?),
                Side::InRun,
            ),
            (_, p) => return Err(Error::Invalid(format!("{t} cannot run its echo as {p}"))),
        };
        Ok(PingPeer {
            transport: t,
            placement,
            ends,
            side,
            loan_above: (t == Transport::Shm).then(|| o.loan_above()),
        })
    }

    /// The transport.
    pub(super) fn transport(&self) -> Transport {
        self.transport
    }

    /// Where the echo runs.
    pub(super) fn placement(&self) -> Placement {
        self.placement
    }

    /// Sends `data` and receives its echo into `back` (resized to the length sent).
    pub(super) fn round_trip(&mut self, data: &[u8], back: &mut Vec<u8>) -> Result<()> {
        match &mut self.ends {
            Ends::Ring(ep) => {
                if self.loan_above.is_some_and(|max| data.len() > max) {
                    let mut buf = ep.sender().alloc(T)?;
                    buf.set_len(data.len())?;
                    buf.copy_from_slice(data);
                    ep.sender().send_buf(buf, T)?;
                } else {
                    ep.sender().send(data, T)?;
                }
                let r = ep.receiver().recv(T)?;
                check(r.len() == data.len(), || {
                    format!("echo of {} bytes for {} sent", r.len(), data.len())
                })?;
                back.resize(data.len(), 0);
                back.copy_from_slice(r.bytes());
            }
            Ends::Channel(ch, _) => {
                ch.send(data)?;
                check(ch.recv_into(back, Wait::Forever)?, || {
                    "echo ended the stream".into()
                })?;
            }
            Ends::Plain(run) => {
                run.conn().send(data)?;
                back.resize(data.len(), 0);
                run.conn().recv(back)?;
            }
        }
        Ok(())
    }

    /// CPU time the echo side has used so far, where it can be read (the raw ring's echo in
    /// another process or on a thread).
    pub(super) fn echo_cpu_time(&self) -> Option<Duration> {
        match &self.side {
            Side::Process(p) => cpu::process_cpu_time(p.id()),
            Side::Thread(_, tid) => cpu::thread_cpu_time(*tid),
            _ => None,
        }
    }

    /// Voluntary context switches (sleeps, so wake-ups) so far of this process and of the
    /// echo's process when it has one; `None` where /proc cannot tell.
    pub(super) fn switches(&self) -> Option<u64> {
        let mine = cpu::account(None, &[]).ok()?.voluntary_switches;
        Some(match &self.side {
            Side::Process(p) => mine + cpu::account(Some(p.id()), &[]).ok()?.voluntary_switches,
            _ => mine,
        })
    }

    /// Hangs up and waits for the echo side to end (a process that does not is killed after
    /// 5 s, and a note says so); reports an echo thread's failure.
    pub(super) fn finish(self) -> Result<Option<String>> {
        match self.ends {
            Ends::Channel(ch, session) => {
                drop(ch);
                if let Some(s) = session {
                    s.close();
                }
            }
            Ends::Ring(ep) => drop(ep), // the echo engine sees the hang-up and ends
            Ends::Plain(run) => drop(run),
        }
        match self.side {
            Side::Thread(h, _) => h
                .join()
                .map_err(|_| Error::Check("echo thread panicked".into()))?
                .map(|()| None),
            Side::Served(s) => s.finish().map(|()| None),
            Side::Process(p) => Ok(p.reap(EXIT_GRACE)?.then(|| {
                format!(
                    "pingpong: {} echo engine did not exit on hang-up; killed it",
                    self.transport
                )
            })),
            Side::Remote | Side::InRun => Ok(None),
        }
    }
}

/// Shared-memory set-up of a channel's session for `size`-byte messages: rings of four
/// messages (at least 1 MiB), both sides in the pingpong's mode.
fn channel_shm_config(o: &Options, size: usize) -> Config {
    Config {
        ring_bytes: ((size + 4096).next_power_of_two() as u64 * 4).max(1 << 20),
        mode: o.mode,
        event_limit: o.event_limit,
        ..offhost_link::default_shm_config()
    }
}
