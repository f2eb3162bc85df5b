//! TLS for the benches: a throw-away certificate directory per run ([`Pki`]), and `tls-raw`,
//! one plain rustls connection on TCP loopback ([`RawTls`], [`start_raw`]) that `tls`
//! channels are compared with.
//!
//! `tls-raw` is to `tls` what `tcp-raw` is to `tcp`: the same bytes under the same
//! encryption (the same rustls configurations, from the same kind of directory, so the same
//! cipher suite) without the channel protocol and without `offhost-access`'s split halves. It
//! is rustls used the way one thread uses it best: plaintext written through
//! `Connection::writer` two records at a time and their records sent at once (as the split
//! stream does, [`WRITE_PIECE`]), ciphertext received up to [`RECV_CHUNK`] bytes per
//! `read(2)` and handed to rustls from memory, and every copy between its buffers and rustls's
//! made in slices that glibc copies with its vector loop (as the split stream does,
//! [`offhost_access::stream::COPY_SLICE`]). Its `vs_raw` therefore
//! says what the channel (and the halves shared by two threads) costs over TLS, and its
//! `throughput_vs_tcp` what TLS itself costs over `tcp-raw`.

use std::io::{self, ErrorKind, Read};
use std::net::{TcpListener, TcpStream};
use std::path::Path;

use offhost_access::stream::{write_sliced, Sliced, WRITE_PIECE};
use offhost_access::{CertDir, ClientAuth, TlsClient, TlsServer};
use offhost_bench::plain::{self, PeerRun};
use offhost_bench::run::{Conn, Role};
use offhost_bench::transport::Transport;
use offhost_link::LinkOptions;
use rustix::event::{PollFd, PollFlags};

use crate::error::Result;

/// Ciphertext one `read(2)` of [`RawTls`] takes at most.
pub const RECV_CHUNK: usize = 256 * 1024;

/// A certificate directory made for one run in a temporary directory (a CA, a server
/// certificate for `localhost`, `127.0.0.1` and `::1`, a client certificate), removed when
/// dropped.
#[derive(Debug)]
pub struct Pki {
    _tmp: tempfile::TempDir,
    certs: CertDir,
}

impl Pki {
    /// Generates the directory (`offhost_access::certs::generate` in a fresh temporary one).
    pub fn generate() -> Result<Pki> {
        Pki::generate_for(&[])
    }

    /// The same, the server certificate naming `hosts` (names or addresses) too.
    pub fn generate_for(hosts: &[String]) -> Result<Pki> {
        let tmp = tempfile::tempdir()?;
        let certs = offhost_access::certs::generate(&tmp.path().join("pki"), hosts)?;
        Ok(Pki { _tmp: tmp, certs })
    }

    /// A directory if any of `transports` needs one (`tls`, `tls-raw`), else `None`.
    pub fn for_transports(transports: &[Transport]) -> Result<Option<Pki>> {
        match transports.iter().any(|t| t.is_tls()) {
            true => Pki::generate().map(Some),
            false => Ok(None),
        }
    }

    /// The directory (as `--tls-certificates DIR` takes it).
    pub fn dir(&self) -> &Path {
        self.certs.path()
    }

    /// Link options naming the directory, for `tls:` servers and sessions.
    pub fn link_options(&self) -> LinkOptions {
        LinkOptions::new().tls_certificates(self.dir())
    }
}

/// One end of a plain rustls connection over TCP (`TCP_NODELAY`): whole messages of a size
/// both sides know.
pub struct RawTls {
    conn: rustls::Connection,
    sock: TcpStream,
    /// Ciphertext received and not yet handed to rustls: `inbuf[start..end]`.
    inbuf: Vec<u8>,
    start: usize,
    end: usize,
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, format!("tls: {e}"))
}

fn eof() -> io::Error {
    io::Error::new(ErrorKind::UnexpectedEof, "peer closed the connection")
}

impl RawTls {
    /// Runs the handshake of `conn` on `sock` (blocking) and returns the connected end.
    fn handshake(mut conn: rustls::Connection, mut sock: TcpStream) -> io::Result<RawTls> {
        sock.set_nodelay(true)?;
        while conn.is_handshaking() {
            conn.complete_io(&mut sock)?;
        }
        Ok(RawTls {
            conn,
            sock,
            inbuf: vec![0; RECV_CHUNK],
            start: 0,
            end: 0,
        })
    }

    /// Sends what rustls holds; the bytes the socket took (it may take fewer when
    /// non-blocking).
    fn push(&mut self) -> io::Result<usize> {
        let mut sent = 0;
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.sock) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(sent)
    }

    /// Moves decrypted bytes into `buf`; how many there were.
    fn take(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.conn.reader().read(buf) {
            Ok(0) if !buf.is_empty() => Err(eof()), // the peer's close_notify
            Ok(n) => Ok(n),
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// Receives ciphertext (when none is left over) and has rustls decrypt it; false when the
    /// socket had none (non-blocking). Call only with rustls's plaintext taken.
    fn pull(&mut self) -> io::Result<bool> {
        if self.start == self.end {
            match self.sock.read(&mut self.inbuf) {
                Ok(0) => return Err(eof()),
                Ok(n) => (self.start, self.end) = (0, n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => return Ok(true),
                Err(e) => return Err(e),
            }
        }
        let n = self
            .conn
            .read_tls(&mut Sliced(&self.inbuf[self.start..self.end]))?;
        self.start += n;
        self.conn.process_new_packets().map_err(tls_error)?;
        Ok(true)
    }

    /// Sends `out` and fills `inb` at once; with a non-blocking socket it waits in poll(2)
    /// only when neither direction can move.
    fn transfer(&mut self, out: &[u8], inb: &mut [u8]) -> io::Result<()> {
        let (mut w, mut r) = (0, 0);
        while w < out.len() || r < inb.len() || self.conn.wants_write() {
            let mut moved = false;
            if w < out.len() {
                let end = out.len().min(w + WRITE_PIECE);
                let n = write_sliced(&mut self.conn.writer(), &out[w..end])?;
                (w, moved) = (w + n, n > 0);
            }
            moved |= self.push()? > 0;
            if r < inb.len() {
                let n = self.take(&mut inb[r..])?;
                r += n;
                moved |= n > 0;
                if r < inb.len() {
                    moved |= self.pull()?;
                }
            }
            if !moved {
                let mut fds = Vec::with_capacity(1);
                let mut events = PollFlags::empty();
                if self.conn.wants_write() {
                    events |= PollFlags::OUT;
                }
                if r < inb.len() {
                    events |= PollFlags::IN;
                }
                fds.push(PollFd::new(&self.sock, events));
                rustix::event::poll(&mut fds, None)?;
            }
        }
        Ok(())
    }
}

impl Conn for RawTls {
    fn send(&mut self, msg: &[u8]) -> io::Result<()> {
        self.transfer(msg, &mut [])
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<()> {
        self.transfer(&[], buf)
    }

    fn exchange(&mut self, out: &[u8], inb: &mut [u8]) -> io::Result<()> {
        self.transfer(out, inb)
    }

    fn set_exchange_mode(&mut self, on: bool) -> io::Result<()> {
        self.sock.set_nonblocking(on)
    }
}

/// Two connected ends of a `tls-raw` connection over loopback, mutually authenticated with
/// `pki`'s certificates (the client end first).
pub fn pair(pki: &Pki) -> io::Result<(RawTls, RawTls)> {
    pair_over(pki, TcpListener::bind("127.0.0.1:0")?)
}

/// Like [`pair`], the server's end accepted on `l` (made where the server's side is: in
/// another network namespace, say) and the client's end connecting from this thread;
/// `pki`'s server certificate must name `l`'s address.
pub fn pair_over(pki: &Pki, l: TcpListener) -> io::Result<(RawTls, RawTls)> {
    let server = TlsServer::load(&pki.certs, ClientAuth::Required).map_err(io::Error::other)?;
    let client = TlsClient::load(&pki.certs).map_err(io::Error::other)?;
    let addr = l.local_addr()?;
    // Connected before the accepting thread starts (the listener's backlog holds it), so
    // that a connection that fails leaves no thread waiting in accept.
    let sock = TcpStream::connect(addr)?;
    let from = sock.local_addr()?;
    let accepting = std::thread::spawn(move || -> io::Result<RawTls> {
        // Only this connection: a stranger's, queued first, would hold the handshake.
        let s = plain::accept_from(&l, from)?;
        let conn = server.connection().map_err(io::Error::other)?;
        RawTls::handshake(conn.into(), s)
    });
    let conn = client
        .connection(&addr.ip().to_string())
        .map_err(io::Error::other);
    // A failed handshake here drops the socket, which ends the other side's.
    let host = conn.and_then(|c| RawTls::handshake(c.into(), sock));
    let peer = accepting
        .join()
        .map_err(|_| io::Error::other("tls-raw accept thread panicked"))?;
    Ok((host?, peer?))
}

/// Starts `tls-raw` with a peer serving `role` for `size`-byte messages on a thread pinned on
/// the engine core.
pub fn start_raw(pki: &Pki, role: Role, size: usize) -> io::Result<PeerRun> {
    let (host, peer) = pair(pki)?;
    plain::start_pair(
        Transport::TlsRaw,
        Box::new(host),
        Box::new(peer),
        role,
        size,
    )
}

/// Starts plain transport `t` (`tls-raw` with `pki`'s certificates, or making its own when
/// `pki` is `None`; the others as [`plain::start`] does).
pub fn start_plain(t: Transport, pki: Option<&Pki>, role: Role, size: usize) -> Result<PeerRun> {
    if t != Transport::TlsRaw {
        return Ok(plain::start(t, role, size)?);
    }
    match pki {
        Some(p) => Ok(start_raw(p, role, size)?),
        None => Ok(start_raw(&Pki::generate()?, role, size)?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use offhost_bench::run::{measure, Pattern, Plan};

    /// The raw TLS connection echoes the bytes sent, in every pattern, including messages
    /// larger than a socket buffer both ways at once.
    #[test]
    fn raw_tls_carries_every_pattern() {
        let pki = Pki::generate().unwrap();
        let mut run = start_raw(&pki, Role::Echo, 70_000).unwrap();
        let msg: Vec<u8> = (0..70_000u32).map(|i| (i * 13) as u8).collect();
        let mut back = vec![0u8; msg.len()];
        run.conn().send(&msg).unwrap();
        run.conn().recv(&mut back).unwrap();
        assert_eq!(msg, back);
        drop(run);
        let plan = Plan::preset("small").unwrap();
        for pattern in [
            Pattern::PingPong,
            Pattern::Exchange,
            Pattern::Stream { window: 8 },
        ] {
            for size in [8, 1 << 20] {
                let mut run = start_raw(&pki, pattern.role(), size).unwrap();
                let m = measure(run.conn(), pattern, size, &plan, None, None)
                    .unwrap_or_else(|e| panic!("{pattern:?} {size}: {e}"));
                assert_eq!(m.samples.len(), plan.reps);
            }
        }
    }

    /// The certificates are checked: a client whose CA the server does not know is refused.
    #[test]
    fn a_client_of_another_ca_is_refused() {
        let (ours, theirs) = (Pki::generate().unwrap(), Pki::generate().unwrap());
        let server = TlsServer::load(&ours.certs, ClientAuth::Required).unwrap();
        let client = TlsClient::load(&theirs.certs).unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            RawTls::handshake(server.connection().unwrap().into(), s).map(drop)
        });
        let conn = client.connection("127.0.0.1").unwrap();
        let r = RawTls::handshake(conn.into(), TcpStream::connect(addr).unwrap());
        assert!(
            r.is_err(),
            "the client's handshake with a foreign server succeeded"
        );
        assert!(t.join().unwrap().is_err());
    }

    #[test]
    fn a_directory_is_made_only_for_tls_and_removed_after() {
        assert!(Pki::for_transports(&[Transport::Tcp, Transport::TcpRaw])
            .unwrap()
            .is_none());
        let pki = Pki::for_transports(&[Transport::Tcp, Transport::Tls])
            .unwrap()
            .unwrap();
        let dir = pki.dir().to_owned();
        assert!(CertDir::new(&dir).has_client_identity());
        assert_eq!(pki.link_options().tls_certificates.as_deref(), Some(&*dir));
        drop(pki);
        assert!(!dir.exists());
    }

    #[test]
    fn a_dead_peer_is_an_error_not_a_hang() {
        let pki = Pki::generate().unwrap();
        let (mut host, peer) = pair(&pki).unwrap();
        drop(peer);
        let mut buf = [0u8; 8];
        assert!(host.recv(&mut buf).is_err());
    }
}
