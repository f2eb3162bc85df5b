//! Ping-pong through offhost channels (tcp, unix, shm) and through plain sockets and pipes
//! (the raw peers), for `offhost bench pingpong`.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use offhost_bench::affinity;
use offhost_link::{ChannelOptions, SendMode, Server, Session};
use offhost_shm::Mode;

use super::pingpong::Transport;

/// Channel options for a ping-pong of `size`-byte messages: one packet up to 64 KiB.
fn options(size: usize) -> ChannelOptions {
    let max = size.max(1) as u64;
    ChannelOptions {
        packet_size: size.clamp(8, 64 * 1024).next_power_of_two(),
        recv_buffer: (2 * max).max(1 << 20) as u32,
        max_message: max,
        send_mode: SendMode::Async,
    }
}

/// One-way times (ns) of `iters` round trips after a tenth as many untimed ones.
fn time(iters: usize, size: usize, mut round_trip: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
    let pb = indicatif::ProgressBar::with_draw_target(
        Some((iters + iters / 10) as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    pb.set_message(format!("pingpong {size} B"));
    let warmup = iters / 10;
    let mut samples = Vec::with_capacity(iters);
    for k in 0..warmup + iters {
        let t0 = Instant::now();
        round_trip()?;
        if k >= warmup {
            samples.push(t0.elapsed().as_nanos() as f64 / 2.0);
        }
        if k % 256 == 0 {
            pb.set_position(k as u64);
        }
    }
    pb.finish_and_clear();
    Ok(samples)
}

/// A running echo peer of one channel or raw-socket transport, ready for round trips of one
/// message size: the measuring side's ends, and the echo side (a thread of this process, or
/// `offhost echo` in another process for shared memory).
pub(super) struct Echoed {
    name: &'static str,
    ends: Ends,
    echo: Echo,
    /// Where a Unix socket lives while the peer runs.
    _dir: Option<tempfile::TempDir>,
}

enum Ends {
    Channel(Session, offhost_link::Channel),
    Raw(Box<dyn Read + Send>, Box<dyn Write + Send>),
}

enum Echo {
    Thread(std::thread::JoinHandle<Result<()>>),
    Process(Child),
}

impl Echoed {
    /// Starts the echo peer of `t` for `size`-byte messages: the measuring thread is pinned to
    /// the first CPU of `cpus`, the echo side (and the threads it starts) to the second.
    pub(super) fn start(
        t: Transport,
        mode: Mode,
        size: usize,
        cpus: Option<(usize, usize)>,
    ) -> Result<Echoed> {
        if let Some((a, _)) = cpus {
            affinity::pin_current_thread(a);
        }
        let pin_echo = move || {
            if let Some((_, b)) = cpus {
                affinity::pin_current_thread(b);
            }
        };
        let raw = |name, r: Box<dyn Read + Send>, w: Box<dyn Write + Send>, echo| Echoed {
            name,
            ends: Ends::Raw(r, w),
            echo: Echo::Thread(echo),
            _dir: None,
        };
        Ok(match t {
            Transport::Tcp => channel_in_thread("tcp:127.0.0.1:0", size, pin_echo, None)?,
            Transport::Unix => {
                let dir = tempfile::tempdir()?;
                let url = format!("unix:{}", dir.path().join("bench.sock").display());
                channel_in_thread(&url, size, pin_echo, Some(dir))?
            }
            Transport::ShmChan => channel_over_shm(mode, size, cpus.map(|c| c.1))?,
            Transport::TcpRaw => {
                let l = std::net::TcpListener::bind("127.0.0.1:0")?;
                let addr = l.local_addr()?;
                let echo = std::thread::spawn(move || -> Result<()> {
                    pin_echo();
                    let (mut s, _) = l.accept()?;
                    s.set_nodelay(true)?;
                    raw_echo(&mut s.try_clone()?, &mut s, size)
                });
                let s = std::net::TcpStream::connect(addr)?;
                s.set_nodelay(true)?;
                raw("tcp-raw", Box::new(s.try_clone()?), Box::new(s), echo)
            }
            Transport::UnixRaw => {
                let (a, mut b) = std::os::unix::net::UnixStream::pair()?;
                let echo = std::thread::spawn(move || {
                    pin_echo();
                    raw_echo(&mut b.try_clone()?, &mut b, size)
                });
                raw("unix-raw", Box::new(a.try_clone()?), Box::new(a), echo)
            }
            Transport::PipeRaw => {
                let (r1, w1) = rustix::pipe::pipe()?;
                let (r2, w2) = rustix::pipe::pipe()?;
                let (mut r1, mut w2) = (std::fs::File::from(r1), std::fs::File::from(w2));
                let echo = std::thread::spawn(move || {
                    pin_echo();
                    raw_echo(&mut r1, &mut w2, size)
                });
                raw(
                    "pipe-raw",
                    Box::new(std::fs::File::from(r2)),
                    Box::new(std::fs::File::from(w1)),
                    echo,
                )
            }
            Transport::Shm | Transport::Mem => bail!("raw rings are measured by the ring bench"),
        })
    }

    /// The transport's name in reports.
    pub(super) fn name(&self) -> &'static str {
        self.name
    }

    /// Sends `data` and receives its echo into `back` (replacing its contents).
    pub(super) fn round_trip(&mut self, data: &[u8], back: &mut Vec<u8>) -> Result<()> {
        match &mut self.ends {
            Ends::Channel(_, ch) => {
                ch.send(data)?;
                ensure!(ch.recv_into(back)?, "echo ended the stream");
            }
            Ends::Raw(r, w) => {
                w.write_all(data)?;
                back.resize(data.len(), 0);
                r.read_exact(back)?;
            }
        }
        Ok(())
    }

    /// Hangs up and waits for the echo side to end (a process that does not is killed after
    /// 5 s); reports an echo thread's failure.
    pub(super) fn finish(self) -> Result<()> {
        match self.ends {
            Ends::Channel(session, ch) => {
                drop(ch);
                session.close();
            }
            Ends::Raw(r, w) => drop((r, w)),
        }
        match self.echo {
            Echo::Thread(h) => h
                .join()
                .map_err(|_| anyhow::anyhow!("echo thread panicked"))?,
            Echo::Process(mut child) => super::pingpong::reap(&mut child).map(drop),
        }
    }
}

/// Measures one transport at one size; returns its report name and the one-way times (ns).
pub(super) fn pingpong(
    t: Transport,
    mode: Mode,
    size: usize,
    iters: usize,
    cpus: Option<(usize, usize)>,
) -> Result<(&'static str, Vec<f64>)> {
    let data: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
    let mut peer = Echoed::start(t, mode, size, cpus)?;
    let mut back = Vec::with_capacity(size);
    let samples = time(iters, size, || peer.round_trip(&data, &mut back));
    let name = peer.name();
    let finished = peer.finish();
    let samples = samples?;
    finished?;
    ensure!(back == data, "echoed bytes differ");
    Ok((name, samples))
}

/// Echoes `size`-byte messages until end of file.
fn raw_echo(r: &mut impl Read, w: &mut impl Write, size: usize) -> Result<()> {
    let mut buf = vec![0u8; size];
    loop {
        match r.read_exact(&mut buf) {
            Ok(()) => w.write_all(&buf)?,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Channels with the echo service on threads of this process.
fn channel_in_thread(
    url: &str,
    size: usize,
    pin_echo: impl FnOnce() + Send + 'static,
    dir: Option<tempfile::TempDir>,
) -> Result<Echoed> {
    let server = Server::bind(url)?;
    let url = server.url().to_owned();
    let echo = std::thread::spawn(move || -> Result<()> {
        pin_echo();
        let session = server.accept()?;
        let ch = session.accept()?;
        offhost_link::echo_channel(&ch)?;
        Ok(())
    });
    let session = Session::connect(&url)?;
    let ch = session.open("pingpong", options(size))?;
    Ok(Echoed {
        name: if url.starts_with("tcp:") {
            "tcp"
        } else {
            "unix"
        },
        ends: Ends::Channel(session, ch),
        echo: Echo::Thread(echo),
        _dir: dir,
    })
}

/// Channels over shared memory with `offhost echo` in another process (as the raw ring bench).
fn channel_over_shm(mode: Mode, size: usize, pin: Option<usize>) -> Result<Echoed> {
    let addr = format!(
        "@offhost-bench-chan-{}-{}",
        std::process::id(),
        NEXT_ECHO.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let mut child = Command::new(std::env::current_exe()?)
        .arg("echo")
        .args(
            pin.map(|c| ["--pin".to_owned(), c.to_string()])
                .into_iter()
                .flatten(),
        )
        .args(["--listen", &format!("shm:{addr}"), "--once"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("start the echo engine")?;
    let config = offhost_shm::Config {
        ring_bytes: ((size + 4096).next_power_of_two() as u64 * 4).max(1 << 20),
        mode,
        ..offhost_link::default_shm_config()
    };
    let opened = connect_retry(&addr, &config, &mut child)
        .and_then(|session| Ok((session.open("pingpong", options(size))?, session)));
    match opened {
        Ok((ch, session)) => Ok(Echoed {
            name: "shm-chan",
            ends: Ends::Channel(session, ch),
            echo: Echo::Process(child),
            _dir: None,
        }),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}

/// Numbers the echo engines this process starts (several may run at once).
static NEXT_ECHO: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

pub(super) fn connect_retry(
    addr: &str,
    config: &offhost_shm::Config,
    child: &mut Child,
) -> Result<Session> {
    super::pingpong::until_accepted(child, || Session::connect_shm(addr, config))
}
