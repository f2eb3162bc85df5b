//! The plain transports offhost is measured against, in the same run: pipes, Unix sockets and
//! TCP used directly (`pipe-raw`, `unix-raw`, `tcp-raw`) and an in-process crossbeam channel
//! (`crossbeam`). Each echo or sink peer runs in a thread of this process pinned on the engine
//! core. `tls-raw` is plain too but needs certificates: `offhost-bench-suite` makes its pair of
//! endpoints and runs them with [`start_pair`].

use std::fs::File;
use std::io::{self, ErrorKind, Read, Write};
use std::os::fd::OwnedFd;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use rustix::event::{PollFd, PollFlags};

use crate::affinity;
use crate::run::{serve, Conn, Role};
use crate::transport::{Kind, Transport};

/// A byte-stream endpoint over a file descriptor for each direction.
pub struct FdConn {
    rx: File,
    tx: File,
    nonblocking: bool,
}

fn eof() -> io::Error {
    io::Error::new(ErrorKind::UnexpectedEof, "peer closed the connection")
}

impl FdConn {
    /// An endpoint reading `rx` and writing `tx` (may be the same socket, duplicated).
    pub fn new(rx: OwnedFd, tx: OwnedFd) -> FdConn {
        FdConn {
            rx: File::from(rx),
            tx: File::from(tx),
            nonblocking: false,
        }
    }

    /// Moves `out` and fills `inb` at once, waiting in poll(2) only when neither can move.
    fn transfer(&mut self, out: &[u8], inb: &mut [u8]) -> io::Result<()> {
        let (mut w, mut r) = (0, 0);
        while w < out.len() || r < inb.len() {
            let mut moved = false;
            if w < out.len() {
                match self.tx.write(&out[w..]) {
                    Ok(n) => (w, moved) = (w + n, true),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
            if r < inb.len() {
                match self.rx.read(&mut inb[r..]) {
                    Ok(0) => return Err(eof()),
                    Ok(n) => (r, moved) = (r + n, true),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
            if !moved {
                let mut fds = Vec::with_capacity(2);
                if w < out.len() {
                    fds.push(PollFd::new(&self.tx, PollFlags::OUT));
                }
                if r < inb.len() {
                    fds.push(PollFd::new(&self.rx, PollFlags::IN));
                }
                rustix::event::poll(&mut fds, None)?;
            }
        }
        Ok(())
    }
}

impl Conn for FdConn {
    fn send(&mut self, msg: &[u8]) -> io::Result<()> {
        if self.nonblocking {
            self.transfer(msg, &mut [])
        } else {
            self.tx.write_all(msg)
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<()> {
        if self.nonblocking {
            self.transfer(&[], buf)
        } else {
            self.rx.read_exact(buf)
        }
    }

    fn exchange(&mut self, out: &[u8], inb: &mut [u8]) -> io::Result<()> {
        if self.nonblocking {
            self.transfer(out, inb)
        } else {
            self.send(out)?;
            self.recv(inb)
        }
    }

    fn set_exchange_mode(&mut self, on: bool) -> io::Result<()> {
        rustix::io::ioctl_fionbio(&self.rx, on)?;
        rustix::io::ioctl_fionbio(&self.tx, on)?;
        self.nonblocking = on;
        Ok(())
    }
}

/// An endpoint over two crossbeam channels: a send copies the message into a new buffer, a
/// receive copies it out (the same two copies a socket makes).
pub struct ChannelConn {
    tx: Sender<Vec<u8>>,
    rx: Receiver<Vec<u8>>,
}

impl Conn for ChannelConn {
    fn send(&mut self, msg: &[u8]) -> io::Result<()> {
        self.tx
            .send(msg.to_vec())
            .map_err(|_| io::Error::new(ErrorKind::BrokenPipe, "peer dropped the channel"))
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<()> {
        let v = self.rx.recv().map_err(|_| eof())?;
        if v.len() != buf.len() {
            return Err(io::Error::new(
                ErrorKind::InvalidData,
                format!("expected {} bytes, got {}", buf.len(), v.len()),
            ));
        }
        buf.copy_from_slice(&v);
        Ok(())
    }
}

/// A running plain transport: the host's endpoint and the peer thread, joined on drop.
pub struct PeerRun {
    host: Option<Box<dyn Conn>>,
    thread: Option<JoinHandle<()>>,
}

impl PeerRun {
    /// The host's endpoint.
    pub fn conn(&mut self) -> &mut dyn Conn {
        self.host
            .as_deref_mut()
            .expect("endpoint present until drop")
    }
}

impl Drop for PeerRun {
    fn drop(&mut self) {
        drop(self.host.take()); // closing the host side ends the peer's loop
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Accepts on `l` the connection whose far end is `from` (a connection this process made,
/// already in `l`'s backlog), closing any other that came first: anyone on the machine (or
/// in the namespace) may connect to a listening port, and a stranger must not become a
/// bench's peer. The backlog is first in, first out, so only connections queued before
/// `from`'s are turned away, and the wait ends.
pub fn accept_from(
    l: &std::net::TcpListener,
    from: std::net::SocketAddr,
) -> io::Result<std::net::TcpStream> {
    loop {
        let (s, peer) = l.accept()?;
        if peer == from {
            return Ok(s);
        }
    }
}

/// Two ends of a `tcp-raw` connection (`TCP_NODELAY`): this thread's, connected to `l`
/// (made on the other side: in another network namespace, say), and the one `l` accepts
/// from it ([`accept_from`]).
pub fn tcp_pair(l: std::net::TcpListener) -> io::Result<(Box<dyn Conn>, Box<dyn Conn>)> {
    let a = std::net::TcpStream::connect(l.local_addr()?)?;
    let b = accept_from(&l, a.local_addr()?)?;
    a.set_nodelay(true)?;
    b.set_nodelay(true)?;
    let (a2, b2) = (a.try_clone()?, b.try_clone()?);
    Ok((
        Box::new(FdConn::new(a.into(), a2.into())),
        Box::new(FdConn::new(b.into(), b2.into())),
    ))
}

fn pair(t: Transport) -> io::Result<(Box<dyn Conn>, Box<dyn Conn>)> {
    Ok(match t {
        Transport::PipeRaw => {
            let (r1, w1) = rustix::pipe::pipe()?;
            let (r2, w2) = rustix::pipe::pipe()?;
            (Box::new(FdConn::new(r2, w1)), Box::new(FdConn::new(r1, w2)))
        }
        Transport::UnixRaw => {
            let (a, b) = std::os::unix::net::UnixStream::pair()?;
            let (a2, b2) = (a.try_clone()?, b.try_clone()?);
            (
                Box::new(FdConn::new(a.into(), a2.into())),
                Box::new(FdConn::new(b.into(), b2.into())),
            )
        }
        Transport::TcpRaw => return tcp_pair(std::net::TcpListener::bind("127.0.0.1:0")?),
        Transport::Crossbeam => {
            let (t1, r1) = crossbeam_channel::unbounded();
            let (t2, r2) = crossbeam_channel::unbounded();
            (
                Box::new(ChannelConn { tx: t1, rx: r2 }),
                Box::new(ChannelConn { tx: t2, rx: r1 }),
            )
        }
        Transport::TlsRaw => {
            return Err(io::Error::new(
                ErrorKind::InvalidInput,
                "tls-raw needs certificates: offhost-bench-suite starts it",
            ))
        }
        Transport::Iceoryx2 => return Err(io::Error::new(
            ErrorKind::InvalidInput,
            "iceoryx2 needs a doorbell mode and the iceoryx2 crate: offhost-bench-suite starts it",
        )),
        other => {
            return Err(io::Error::new(
                ErrorKind::InvalidInput,
                format!("{other} is not a plain transport"),
            ))
        }
    })
}

/// Starts the plain transport `t` with a peer serving `role` for `size`-byte messages in a
/// thread pinned on the engine core (every plain transport but `tls-raw`).
pub fn start(t: Transport, role: Role, size: usize) -> io::Result<PeerRun> {
    let (host, peer) = pair(t)?;
    start_pair(t, host, peer, role, size)
}

/// Runs `peer` serving `role` for `size`-byte messages in a thread (named after `t`) pinned on
/// the engine core, with `host` as the measuring side: a plain transport whose two ends were
/// made elsewhere.
pub fn start_pair(
    t: Transport,
    host: Box<dyn Conn>,
    mut peer: Box<dyn Conn>,
    role: Role,
    size: usize,
) -> io::Result<PeerRun> {
    let (_, engine_core) = affinity::host_engine_cores();
    let thread = std::thread::Builder::new()
        .name(format!("peer-{t}"))
        .spawn(move || {
            let _ = affinity::pin_current_thread(engine_core);
            serve(peer.as_mut(), role, size);
        })?;
    Ok(PeerRun {
        host: Some(host),
        thread: Some(thread),
    })
}

/// The plain transports [`start`] starts, in report order (all but `tls-raw` and `iceoryx2`).
pub fn all() -> impl Iterator<Item = Transport> {
    Transport::ALL
        .into_iter()
        .filter(|t| t.kind() == Kind::Plain && !t.is_tls() && *t != Transport::Iceoryx2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{measure, Pattern, Plan};

    /// Every peer carries every pattern, including messages larger than a socket buffer in
    /// both directions at once (exchange of 1 MiB would deadlock with blocking writes).
    #[test]
    fn every_peer_runs_every_pattern() {
        let plan = Plan::preset("small").unwrap();
        for kind in all() {
            for pattern in [
                Pattern::PingPong,
                Pattern::Exchange,
                Pattern::Stream { window: 8 },
            ] {
                for size in [8, 1 << 20] {
                    let mut run = start(kind, pattern.role(), size).unwrap();
                    let m = measure(run.conn(), pattern, size, &plan, None, None)
                        .unwrap_or_else(|e| panic!("{kind:?} {pattern:?} {size}: {e}"));
                    assert_eq!(m.samples.len(), plan.reps);
                    let row = m.row("x", kind.name(), "-", size).unwrap();
                    assert!(row.one_way_ns_median > 0.0);
                    assert!(row.wakeups_per_msg.is_some());
                    // The measuring thread did work for every message.
                    assert!(row.host_cpu_us_per_msg.is_some_and(|c| c > 0.0), "{row:?}");
                }
            }
        }
    }

    /// The echo returns the bytes sent, not just the count.
    #[test]
    fn echo_returns_the_same_bytes() {
        for kind in all() {
            let mut run = start(kind, Role::Echo, 5000).unwrap();
            let msg: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
            let mut back = vec![0u8; 5000];
            run.conn().send(&msg).unwrap();
            run.conn().recv(&mut back).unwrap();
            assert_eq!(msg, back, "{kind:?}");
        }
    }

    /// A connection a stranger made to the listener first is closed, not taken for the
    /// bench's own.
    #[test]
    fn a_tcp_pair_takes_only_its_own_connection() {
        use std::time::Duration;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut stranger = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut a, mut b) = tcp_pair(l).unwrap();
        a.send(b"own").unwrap();
        let mut got = [0u8; 3];
        b.recv(&mut got).unwrap();
        assert_eq!(&got, b"own");
        // The stranger's connection was closed: end of stream (or a reset), not silence.
        stranger
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        match stranger.read(&mut got) {
            Ok(0) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            other => panic!("the stranger's connection is still open: {other:?}"),
        }
    }

    #[test]
    fn a_dead_peer_is_an_error_not_a_hang() {
        for kind in all() {
            let (mut host, peer) = pair(kind).unwrap();
            drop(peer);
            let mut buf = [0u8; 8];
            assert!(host.recv(&mut buf).is_err(), "{kind:?}");
        }
    }

    #[test]
    fn only_plain_transports_start_here() {
        assert_eq!(all().count(), 4);
        let e = start(Transport::Tcp, Role::Echo, 8)
            .err()
            .expect("tcp channels are not plain");
        assert!(e.to_string().contains("not a plain transport"), "{e}");
        let e = start(Transport::TlsRaw, Role::Echo, 8)
            .err()
            .expect("tls-raw needs certificates");
        assert!(e.to_string().contains("needs certificates"), "{e}");
    }
}
