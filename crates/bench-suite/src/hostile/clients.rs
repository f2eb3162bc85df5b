//! The certified clients `bench hostile` times: a link session over `tls:` and an NBD
//! connection with `NBD_OPT_STARTTLS`, each from connect to a first answer, and the
//! throughput of one that is established.

use std::io::{self, Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use offhost_access::TlsStream;
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
    match ch.recv_wait(GIVE_UP)? {
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
        match ch.recv_wait(GIVE_UP)? {
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

/// An NBD connection at `addr` over TLS with the client certificate of `pki`, in
/// transmission on `export` (simple replies).
pub fn nbd_connect(addr: &str, pki: &Path, export: &str) -> Result<TlsStream> {
    match offhost_nbd::hostile::certified_go(addr, pki, export, GIVE_UP)? {
        (REP_ACK, _, t) => Ok(t),
        (typ, msg, _) => Err(Error::Check(format!(
            "NBD_OPT_GO answered {typ:#x}: {}",
            String::from_utf8_lossy(&msg)
        ))),
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
