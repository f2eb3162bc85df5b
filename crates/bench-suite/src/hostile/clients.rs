//! The certified clients `bench hostile` times: a link session over `tls:` and an NBD
//! connection with `NBD_OPT_STARTTLS`, each from connect to a first answer, and the
//! throughput of one that is established.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use offhost_access::{certs::CertDir, TlsClient, TlsStream};
use offhost_link::{ChannelOptions, LinkOptions, Session};
use offhost_nbd::proto::*;

use crate::error::{Error, Result};

/// How long one certified client may take before its try counts as failed.
pub const GIVE_UP: Duration = Duration::from_secs(30);

/// A link session at `url`, up to its first echoed message.
pub fn link_connect(url: &str, options: &LinkOptions) -> Result<Session> {
    let s = Session::connect_with(url, options)?;
    let ch = s.open("hello", ChannelOptions::default())?;
    ch.send(b"hello")?;
    match ch.recv_timeout(GIVE_UP)? {
        Some(m) if m == b"hello" => Ok(s),
        other => Err(Error::Check(format!("the echo answered {other:?}"))),
    }
}

/// Bytes per second through an established session: `count` echoes of `size` bytes.
pub fn link_throughput(s: &Session, size: usize, count: usize) -> Result<f64> {
    let ch = s.open("bulk", ChannelOptions::default())?;
    let msg = vec![0x5au8; size];
    let t0 = Instant::now();
    for _ in 0..count {
        ch.send(&msg)?;
        match ch.recv_timeout(GIVE_UP)? {
            Some(m) if m.len() == size => {}
            other => return Err(Error::Check(format!("echo of {size} bytes: {other:?}"))),
        }
    }
    Ok((2 * size * count) as f64 / t0.elapsed().as_secs_f64())
}

fn read_n(s: &mut impl Read, n: usize) -> io::Result<Vec<u8>> {
    let mut b = vec![0u8; n];
    s.read_exact(&mut b)?;
    Ok(b)
}

fn option(s: &mut impl Write, opt: u32, data: &[u8]) -> io::Result<()> {
    let mut m = IHAVEOPT.to_be_bytes().to_vec();
    m.extend_from_slice(&opt.to_be_bytes());
    m.extend_from_slice(&(data.len() as u32).to_be_bytes());
    m.extend_from_slice(data);
    s.write_all(&m)?;
    s.flush()
}

/// One option reply: its type and data.
fn reply(s: &mut impl Read) -> io::Result<(u32, Vec<u8>)> {
    let h = read_n(s, 20)?;
    let len = u32::from_be_bytes(h[16..20].try_into().expect("4 bytes")) as usize;
    let typ = u32::from_be_bytes(h[12..16].try_into().expect("4 bytes"));
    Ok((typ, read_n(s, len)?))
}

fn refused(what: &str, typ: u32, msg: &[u8]) -> Error {
    Error::Check(format!(
        "{what} answered {typ:#x}: {}",
        String::from_utf8_lossy(msg)
    ))
}

/// An NBD connection at `addr` over TLS with the client certificate of `pki`, in
/// transmission on `export` (simple replies).
pub fn nbd_connect(addr: &str, pki: &Path, export: &str) -> Result<TlsStream> {
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(GIVE_UP))?;
    read_n(&mut s, 18)?;
    s.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes())?;
    option(&mut s, OPT_STARTTLS, &[])?;
    let (typ, msg) = reply(&mut s)?;
    if typ != REP_ACK {
        return Err(refused("NBD_OPT_STARTTLS", typ, &msg));
    }
    let client = TlsClient::load(&CertDir::new(pki))?;
    let (mut r, w) = offhost_access::handshake(s.into(), client.connection("127.0.0.1")?, GIVE_UP)?;
    r.set_timeout(Some(GIVE_UP));
    let mut t = TlsStream::new(r, w);
    let mut d = (export.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(export.as_bytes());
    d.extend_from_slice(&0u16.to_be_bytes());
    option(&mut t, OPT_GO, &d)?;
    loop {
        let (typ, msg) = reply(&mut t)?;
        match typ {
            REP_ACK => return Ok(t),
            REP_INFO => {}
            _ => return Err(refused("NBD_OPT_GO", typ, &msg)),
        }
    }
}

/// Bytes per second of `count` writes of `size` bytes, one at a time, each answered.
pub fn nbd_throughput(t: &mut TlsStream, size: u32, count: u64) -> Result<f64> {
    let payload = vec![0x5au8; size as usize];
    let mut req = Vec::with_capacity(28 + payload.len());
    let t0 = Instant::now();
    for i in 0..count {
        req.clear();
        encode_request(&mut req, 0, 1, i, 0, size);
        req.extend_from_slice(&payload);
        t.write_all(&req)?;
        t.flush()?;
        let r = read_n(t, 16)?;
        let error = u32::from_be_bytes(r[4..8].try_into().expect("4 bytes"));
        if error != 0 {
            return Err(Error::Check(format!("write {i} failed with error {error}")));
        }
    }
    Ok((u64::from(size) * count) as f64 / t0.elapsed().as_secs_f64())
}
