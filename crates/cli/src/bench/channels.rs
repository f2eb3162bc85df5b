//! Ping-pong through offhost channels (tcp, unix, shm) and through plain sockets and pipes
//! (the raw peers), for `offhost bench pingpong`.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

/// Measures one transport at one size; returns its report name and the one-way times (ns).
pub(super) fn pingpong(
    t: Transport,
    mode: Mode,
    size: usize,
    iters: usize,
    cpus: Option<(usize, usize)>,
) -> Result<(&'static str, Vec<f64>)> {
    let data: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
    // As in the raw-ring bench: the measuring thread on one CPU, the echo side (thread or
    // process, and the threads it starts) on another, when two are allowed.
    if let Some((a, _)) = cpus {
        affinity::pin_current_thread(a);
    }
    let pin_echo = move || {
        if let Some((_, b)) = cpus {
            affinity::pin_current_thread(b);
        }
    };
    match t {
        Transport::Tcp => Ok((
            "tcp",
            channel_in_thread("tcp:127.0.0.1:0", &data, iters, pin_echo)?,
        )),
        Transport::Unix => {
            let dir = tempfile::tempdir()?;
            let url = format!("unix:{}", dir.path().join("bench.sock").display());
            Ok(("unix", channel_in_thread(&url, &data, iters, pin_echo)?))
        }
        Transport::ShmChan => Ok((
            "shm-chan",
            channel_over_shm(mode, &data, iters, cpus.map(|c| c.1))?,
        )),
        Transport::TcpRaw => {
            let l = std::net::TcpListener::bind("127.0.0.1:0")?;
            let addr = l.local_addr()?;
            let echo = std::thread::spawn(move || -> Result<()> {
                pin_echo();
                let (mut s, _) = l.accept()?;
                s.set_nodelay(true)?;
                raw_echo(&mut s.try_clone()?, &mut s, size)
            });
            let mut s = std::net::TcpStream::connect(addr)?;
            s.set_nodelay(true)?;
            let r = raw_pingpong(&mut s.try_clone()?, &mut s, &data, iters);
            drop(s);
            join(echo)?;
            Ok(("tcp-raw", r?))
        }
        Transport::UnixRaw => {
            let (mut a, mut b) = std::os::unix::net::UnixStream::pair()?;
            let echo = std::thread::spawn(move || {
                pin_echo();
                raw_echo(&mut b.try_clone()?, &mut b, size)
            });
            let r = raw_pingpong(&mut a.try_clone()?, &mut a, &data, iters);
            drop(a);
            join(echo)?;
            Ok(("unix-raw", r?))
        }
        Transport::PipeRaw => {
            let (r1, w1) = rustix::pipe::pipe()?;
            let (r2, w2) = rustix::pipe::pipe()?;
            let (mut r1, mut w1) = (std::fs::File::from(r1), std::fs::File::from(w1));
            let (mut r2, mut w2) = (std::fs::File::from(r2), std::fs::File::from(w2));
            let echo = std::thread::spawn(move || {
                pin_echo();
                raw_echo(&mut r1, &mut w2, size)
            });
            let r = raw_pingpong(&mut r2, &mut w1, &data, iters);
            drop(w1);
            join(echo)?;
            Ok(("pipe-raw", r?))
        }
        Transport::Shm | Transport::Mem => bail!("raw rings are measured by the ring bench"),
    }
}

fn join(h: std::thread::JoinHandle<Result<()>>) -> Result<()> {
    h.join()
        .map_err(|_| anyhow::anyhow!("echo thread panicked"))?
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

fn raw_pingpong(
    r: &mut impl Read,
    w: &mut impl Write,
    data: &[u8],
    iters: usize,
) -> Result<Vec<f64>> {
    let mut back = vec![0u8; data.len()];
    let s = time(iters, data.len(), || {
        w.write_all(data)?;
        r.read_exact(&mut back)?;
        Ok(())
    })?;
    ensure!(back == data, "echoed bytes differ");
    Ok(s)
}

fn channel_pingpong(session: &Session, data: &[u8], iters: usize) -> Result<Vec<f64>> {
    let ch = session.open("pingpong", options(data.len()))?;
    let mut last = Vec::with_capacity(data.len());
    let s = time(iters, data.len(), || {
        ch.send(data)?;
        ensure!(ch.recv_into(&mut last)?, "echo ended the stream");
        Ok(())
    })?;
    ensure!(last == data, "echoed bytes differ");
    Ok(s)
}

/// Channels with the echo service on threads of this process.
fn channel_in_thread(
    url: &str,
    data: &[u8],
    iters: usize,
    pin_echo: impl FnOnce() + Send + 'static,
) -> Result<Vec<f64>> {
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
    let r = channel_pingpong(&session, data, iters);
    session.close();
    join(echo)?;
    r
}

/// Channels over shared memory with `offhost echo` in another process (as the raw ring bench).
fn channel_over_shm(mode: Mode, data: &[u8], iters: usize, pin: Option<usize>) -> Result<Vec<f64>> {
    let addr = format!("@offhost-bench-chan-{}", std::process::id());
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
        ring_bytes: ((data.len() + 4096).next_power_of_two() as u64 * 4).max(1 << 20),
        mode,
        ..offhost_link::default_shm_config()
    };
    let session = connect_retry(&addr, &config, &mut child)?;
    let r = channel_pingpong(&session, data, iters);
    session.close();
    drop(session);
    let deadline = Instant::now() + Duration::from_secs(5);
    while child.try_wait()?.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    if child.try_wait()?.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    r
}

pub(super) fn connect_retry(
    addr: &str,
    config: &offhost_shm::Config,
    child: &mut Child,
) -> Result<Session> {
    super::pingpong::until_accepted(child, || Session::connect_shm(addr, config))
}
