//! Hostile NBD clients, for tests and measurements of any NBD server (this one, nbdkit,
//! qemu-nbd): each speaks just enough of the protocol to ask for more than it gives back.
//!
//! - [`pipelined_reads`]: negotiates, sends `count` reads of `len` bytes and never reads a
//!   reply (the server's memory for replies is what it shows);
//! - [`stalled_write`]: a write request of `len` bytes followed by one byte of its payload;
//! - [`trickle_handshake`]: one byte of handshake every interval;
//! - [`option_flood`]: `NBD_OPT_LIST` after `NBD_OPT_LIST`, never reading the replies;
//! - [`idle`]: negotiates, then sends nothing;
//! - [`stalled_starttls`]: asks for TLS with `NBD_OPT_STARTTLS`, then never says hello.
//!
//! And the good client they are measured against: [`certified_go`], a client certificate's
//! whole way in over TLS ([`send_option`] and [`read_reply`] speak the options of any stream).
//!
//! Each is bounded in time by its caller's arguments; [`dropped`] tells whether the server has
//! closed a connection, without reading what it sent.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use crate::proto::*;
use crate::server::{ListenAddr, Stream};

/// Connects to `addr`.
pub fn connect(addr: &ListenAddr) -> io::Result<Stream> {
    Ok(match addr {
        ListenAddr::Tcp(a) => {
            let s = std::net::TcpStream::connect(a)?;
            s.set_nodelay(true)?;
            Stream::Tcp(s)
        }
        ListenAddr::Unix(p) => Stream::Unix(std::os::unix::net::UnixStream::connect(p)?),
    })
}

fn read_n(s: &mut impl Read, n: usize) -> io::Result<Vec<u8>> {
    let mut b = vec![0u8; n];
    s.read_exact(&mut b)?;
    Ok(b)
}

/// Reads the server's greeting and answers with the fixed-newstyle flags.
pub fn greet(s: &mut Stream) -> io::Result<()> {
    let hello = read_n(s, 18)?;
    if hello[..8] != NBD_MAGIC.to_be_bytes() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not an NBD server",
        ));
    }
    s.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes())
}

fn option(out: &mut Vec<u8>, opt: u32, data: &[u8]) {
    out.extend_from_slice(&IHAVEOPT.to_be_bytes());
    out.extend_from_slice(&opt.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
}

/// Sends option `opt` with `data`, in one write.
pub fn send_option(s: &mut impl Write, opt: u32, data: &[u8]) -> io::Result<()> {
    let mut out = Vec::with_capacity(16 + data.len());
    option(&mut out, opt, data);
    s.write_all(&out)?;
    s.flush()
}

/// Reads one option reply: its type and its data.
pub fn read_reply(s: &mut impl Read) -> io::Result<(u32, Vec<u8>)> {
    let h = read_n(s, 20)?;
    let typ = u32::from_be_bytes(h[12..16].try_into().expect("4 bytes"));
    let len = u32::from_be_bytes(h[16..20].try_into().expect("4 bytes"));
    Ok((typ, read_n(s, len as usize)?))
}

/// `NBD_OPT_GO` of `export` (simple replies), then its replies until the last: its type and
/// data (`NBD_REP_ACK` when the server enters transmission).
fn go(s: &mut (impl Read + Write), export: &str) -> io::Result<(u32, Vec<u8>)> {
    let mut data = (export.len() as u32).to_be_bytes().to_vec();
    data.extend_from_slice(export.as_bytes());
    data.extend_from_slice(&0u16.to_be_bytes());
    send_option(s, OPT_GO, &data)?;
    loop {
        let (typ, body) = read_reply(s)?;
        if typ != REP_INFO {
            return Ok((typ, body));
        }
    }
}

/// Negotiates `export` with `NBD_OPT_GO` (simple replies) and enters transmission.
pub fn negotiate(s: &mut Stream, export: &str) -> io::Result<()> {
    greet(s)?;
    match go(s, export)? {
        (REP_ACK, _) => Ok(()),
        (_, body) => Err(io::Error::other(format!(
            "NBD_OPT_GO refused: {}",
            String::from_utf8_lossy(&body)
        ))),
    }
}

/// A certified client's whole way in to the TCP server at `addr`: greeting, `NBD_OPT_STARTTLS`,
/// TLS with the client certificate of `pki` (the server's checked against its CA as
/// 127.0.0.1), `NBD_OPT_GO` of `export`. Returns the last reply to GO (its type and message)
/// and the connection; what failed before it is the error, saying which step. Every read
/// waits at most `timeout`.
pub fn certified_go(
    addr: &str,
    pki: &std::path::Path,
    export: &str,
    timeout: Duration,
) -> io::Result<(u32, Vec<u8>, offhost_access::TlsStream)> {
    let step =
        |what: &'static str| move |e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
    let tls = |e: offhost_access::AccessError| io::Error::other(format!("tls: {e}"));
    let mut s = std::net::TcpStream::connect(addr).map_err(step("connect"))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(timeout))?;
    read_n(&mut s, 18).map_err(step("greeting"))?;
    s.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes())
        .map_err(step("flags"))?;
    send_option(&mut s, OPT_STARTTLS, &[]).map_err(step("starttls"))?;
    let (typ, msg) = read_reply(&mut s).map_err(step("starttls reply"))?;
    if typ != REP_ACK {
        return Err(io::Error::other(format!(
            "NBD_OPT_STARTTLS answered {typ:#x}: {}",
            String::from_utf8_lossy(&msg)
        )));
    }
    let client =
        offhost_access::TlsClient::load(&offhost_access::CertDir::new(pki)).map_err(tls)?;
    let (mut r, w) = offhost_access::handshake(
        s.into(),
        client.connection("127.0.0.1").map_err(tls)?,
        timeout,
    )
    .map_err(tls)?;
    r.set_timeout(Some(timeout));
    let mut t = offhost_access::TlsStream::new(r, w);
    let (typ, msg) = go(&mut t, export).map_err(step("go"))?;
    Ok((typ, msg, t))
}

/// Connects, negotiates `export`, sends `count` reads of `len` bytes at offset 0 and returns
/// the connection without reading a reply.
pub fn pipelined_reads(
    addr: &ListenAddr,
    export: &str,
    count: u64,
    len: u32,
) -> io::Result<Stream> {
    let mut s = connect(addr)?;
    negotiate(&mut s, export)?;
    let mut out = Vec::new();
    for handle in 0..count {
        encode_request(&mut out, 0, 0, handle, 0, len);
    }
    s.write_all(&out)?;
    Ok(s)
}

/// Connects, negotiates `export` and sends a write of `len` bytes with one byte of payload.
pub fn stalled_write(addr: &ListenAddr, export: &str, len: u32) -> io::Result<Stream> {
    let mut s = connect(addr)?;
    negotiate(&mut s, export)?;
    let mut out = Vec::new();
    encode_request(&mut out, 0, 1, 1, 0, len);
    out.push(0x5a);
    s.write_all(&out)?;
    Ok(s)
}

/// Connects, negotiates `export` and sends nothing more.
pub fn idle(addr: &ListenAddr, export: &str) -> io::Result<Stream> {
    let mut s = connect(addr)?;
    negotiate(&mut s, export)?;
    Ok(s)
}

/// Connects and sends the handshake one byte every `every` until the server drops the
/// connection (returns how long that took) or `give_up` passes (`TimedOut`).
pub fn trickle_handshake(
    addr: &ListenAddr,
    every: Duration,
    give_up: Duration,
) -> io::Result<Duration> {
    let mut s = connect(addr)?;
    let t0 = Instant::now();
    read_n(&mut s, 18)?;
    let mut bytes = (FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES)
        .to_be_bytes()
        .to_vec();
    option(&mut bytes, OPT_LIST, &[]);
    let mut at = 0;
    while t0.elapsed() < give_up {
        if dropped(&s, every) {
            return Ok(t0.elapsed());
        }
        // The bytes of one option after another, for ever.
        if s.write_all(&bytes[at % bytes.len()..][..1]).is_err() {
            return Ok(t0.elapsed());
        }
        at += 1;
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        format!("still connected after {give_up:?}"),
    ))
}

/// Connects and sends `NBD_OPT_LIST` options without reading the replies, until the server
/// drops the connection (returns how long that took) or `give_up` passes (`TimedOut`).
pub fn option_flood(addr: &ListenAddr, give_up: Duration) -> io::Result<Duration> {
    let mut s = connect(addr)?;
    let t0 = Instant::now();
    greet(&mut s)?;
    let mut burst = Vec::new();
    for _ in 0..256 {
        option(&mut burst, OPT_LIST, &[]);
    }
    set_write_timeout(&s, Some(Duration::from_millis(200)))?;
    while t0.elapsed() < give_up {
        match s.write_all(&burst) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                // The server stopped reading (its replies fill the socket): is it still there?
                if dropped(&s, Duration::from_millis(100)) {
                    return Ok(t0.elapsed());
                }
            }
            Err(_) => return Ok(t0.elapsed()),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        format!("still connected after {give_up:?}"),
    ))
}

fn set_write_timeout(s: &Stream, t: Option<Duration>) -> io::Result<()> {
    match s {
        Stream::Tcp(s) => s.set_write_timeout(t),
        Stream::Unix(s) => s.set_write_timeout(t),
    }
}

/// Connects, asks for TLS with `NBD_OPT_STARTTLS` and, once the server has acknowledged it,
/// returns the connection without starting the TLS handshake.
pub fn stalled_starttls(addr: &ListenAddr) -> io::Result<Stream> {
    let mut s = connect(addr)?;
    greet(&mut s)?;
    let mut out = Vec::new();
    option(&mut out, OPT_STARTTLS, &[]);
    s.write_all(&out)?;
    let h = read_n(&mut s, 20)?;
    let reply = u32::from_be_bytes(h[12..16].try_into().expect("4 bytes"));
    let len = u32::from_be_bytes(h[16..20].try_into().expect("4 bytes"));
    let body = read_n(&mut s, len as usize)?;
    if reply != REP_ACK {
        return Err(io::Error::other(format!(
            "NBD_OPT_STARTTLS refused: {}",
            String::from_utf8_lossy(&body)
        )));
    }
    Ok(s)
}

/// Whether the server closed (or reset) the connection, waiting up to `within`; what it sent
/// and the client did not read stays unread.
pub fn dropped(s: &Stream, within: Duration) -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let fd = match s {
        Stream::Tcp(s) => s.as_fd(),
        Stream::Unix(s) => s.as_fd(),
    };
    let ts = Timespec::try_from(within).unwrap_or(Timespec {
        tv_sec: 1,
        tv_nsec: 0,
    });
    let mut fds = [PollFd::new(&fd, PollFlags::RDHUP)];
    match poll(&mut fds, Some(&ts)) {
        Ok(n) if n > 0 => fds[0]
            .revents()
            .intersects(PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR),
        _ => false,
    }
}

/// Waits up to `within` for the server to drop `s`; returns how long that took.
pub fn dropped_within(s: &Stream, within: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if dropped(s, Duration::from_millis(100)) {
            return Some(t0.elapsed());
        }
    }
    None
}
