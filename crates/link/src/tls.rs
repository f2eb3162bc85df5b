//! The `tls:HOST:PORT` transport: TCP with mutual TLS (rustls, via `offhost-access`).
//!
//! After the TLS handshake the server sends one byte, [`ADMITTED`], before anything else:
//! in TLS 1.3 a client finishes its handshake before the server has checked the client's
//! certificate, so without it a refused client would only learn of the refusal at its first
//! read. With it, [`connect`] returns only once the server has admitted the client, and a
//! refusal is an error of the connect call.
//!
//! The two halves share one rustls connection (see `offhost_access::stream`): the reading
//! half's wait polls the socket without holding it, so the driver's waiting reader never
//! keeps the writer (or the flusher) from writing.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use offhost_access::{ClientAuth, TlsClient, TlsReader, TlsServer, TlsWriter};

use crate::error::LinkError;
use crate::wire::{Input, WireRead, WireWrite, FEED_BUDGET};

/// The byte a server sends once it has admitted a client.
pub(crate) const ADMITTED: u8 = 0x5a;

/// Longest TLS handshake (and admission) a client waits for.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Reading half: plaintext handed to the driver where rustls holds it, a record at a time
/// (the protocol parser takes a data frame's payload as it arrives, so records cutting frames
/// cost no copy).
pub(crate) struct TlsRead {
    r: TlsReader,
    eof: bool,
}

/// Writing half.
pub(crate) struct TlsWrite {
    w: TlsWriter,
}

fn halves(r: TlsReader, w: TlsWriter) -> (TlsRead, TlsWrite) {
    (TlsRead { r, eof: false }, TlsWrite { w })
}

/// How long a TCP connect may take (per address the name resolves to): an address that
/// drops the SYN would otherwise hold the caller for the kernel's two minutes of retries.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A TCP connection to `addr` (`HOST:PORT`) with `TCP_NODELAY`, each address it resolves to
/// tried for at most [`CONNECT_TIMEOUT`]; `scheme` names the URL in errors.
pub(crate) fn tcp_connect(addr: &str, scheme: &str) -> Result<std::net::TcpStream, LinkError> {
    use std::net::ToSocketAddrs;
    let what = || format!("connect {scheme}:{addr}");
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the name resolves to no address");
    for a in addr
        .to_socket_addrs()
        .map_err(|e| LinkError::io(what(), e))?
    {
        match std::net::TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
            Ok(s) => {
                crate::tcp::tune(&s)?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(LinkError::io(what(), last))
}

/// Connects to a `tls:` server at `addr` (`HOST:PORT`): TCP, the handshake, then the server's
/// admission; the halves and the certificate the server presented.
pub(crate) fn connect(
    addr: &str,
    client: &TlsClient,
) -> Result<(TlsRead, TlsWrite, Option<Vec<u8>>), LinkError> {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let conn = client.connection(host)?;
    let s = tcp_connect(addr, "tls")?;
    let (mut r, w) = offhost_access::handshake(s.into(), conn, HANDSHAKE_TIMEOUT)?;
    r.set_timeout(Some(HANDSHAKE_TIMEOUT));
    let mut b = [0u8; 1];
    match r.read(&mut b) {
        Ok(1) if b[0] == ADMITTED => {}
        Ok(_) => {
            return Err(LinkError::io(
                format!("tls:{addr}"),
                io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    "the server closed the connection instead of admitting us",
                ),
            ))
        }
        Err(e) => return Err(LinkError::io(format!("tls:{addr}: not admitted"), e)),
    }
    r.set_timeout(None);
    let cert = r.peer_certificate();
    let (r, w) = halves(r, w);
    Ok((r, w, cert))
}

/// Runs the server side on an accepted TCP connection: the handshake (the client must present
/// a certificate of our CA) within `timeout`, then the admission byte; the halves and the
/// certificate the client presented.
/// `progressed` is called once the client's ClientHello has been taken.
pub(crate) fn accept(
    s: std::net::TcpStream,
    server: &TlsServer,
    timeout: Duration,
    progressed: &mut dyn FnMut(),
) -> Result<(TlsRead, TlsWrite, Option<Vec<u8>>), LinkError> {
    crate::tcp::tune(&s)?;
    let (r, mut w) =
        offhost_access::handshake_observed(s.into(), server.connection()?, timeout, progressed)?;
    w.write_all(&[ADMITTED])
        .and_then(|()| w.flush())
        .map_err(|e| LinkError::io("tls admission", e))?;
    let cert = r.peer_certificate();
    let (r, w) = halves(r, w);
    Ok((r, w, cert))
}

/// The server configuration for a `tls:` listener: client certificates required.
pub(crate) fn server_config(dir: &offhost_access::CertDir) -> Result<TlsServer, LinkError> {
    Ok(TlsServer::load(dir, ClientAuth::Required)?)
}

impl Drop for TlsRead {
    fn drop(&mut self) {
        // The session is over: let its last records (a refusal, say) reach the peer even if
        // it keeps sending (see `linger.rs`).
        if let Ok(fd) = self.r.try_clone_fd() {
            crate::linger::close(fd);
        }
    }
}

impl WireRead for TlsRead {
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        if self.eof || self.r.ready_nb()? {
            return Ok(());
        }
        let Some(t) = timeout else {
            return Err(io::ErrorKind::WouldBlock.into());
        };
        let deadline = Instant::now() + t;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            self.r.wait(Some(left))?;
            if self.r.ready_nb()? {
                return Ok(());
            }
        }
    }

    fn feed(&mut self, sink: &mut dyn FnMut(Input<'_>) -> bool) -> io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        match self
            .r
            .read_in_place(FEED_BUDGET, &mut |b| sink(Input::Bytes(b)))
        {
            Ok(0) => self.eof = true,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        Ok(!self.eof)
    }
}

impl WireWrite for TlsWrite {
    fn write_nb(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.w.write_nb(buf)
    }

    fn write_wait(&mut self, buf: &[u8], timeout: Duration) -> io::Result<usize> {
        match self.w.write_nb(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.w.wait(Some(timeout))?;
                self.w.write_nb(buf)
            }
            r => r,
        }
    }

    fn shutdown(&mut self) {
        self.w.shutdown();
    }

    fn writes_vectored(&self) -> bool {
        true
    }

    fn write_vectored_nb(&mut self, bufs: &[&[u8]]) -> io::Result<usize> {
        self.w.write_vectored_nb(bufs)
    }
}
