//! The byte pipe under a session: one reading half and one writing half per transport.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::net::{RecvFlags, SendFlags};

/// A chunk of input handed to the driver by [`WireRead::feed`].
pub(crate) enum Input<'a> {
    /// Protocol bytes, in order (borrowed from the transport: a shared-memory record is read
    /// in place).
    Bytes(&'a [u8]),
    /// A zero-copy buffer that arrived by descriptor (shared memory only).
    Loan(offhost_shm::Buf),
}

/// The reading half of a transport.
///
/// Reading is split in two so that the driver can wait without holding its state lock and
/// then parse the input where it lies, under the lock: [`wait`](Self::wait) blocks until input
/// is ready, [`feed`](Self::feed) hands the ready input over without waiting.
pub(crate) trait WireRead: Send {
    /// Waits at most `timeout` (`None`: does not wait) until input, or the end of the input,
    /// is ready for [`feed`](Self::feed). Nothing arriving in time is an error of kind
    /// `WouldBlock` or `TimedOut`.
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()>;

    /// Hands the input that is ready to `sink`, in order, without waiting, until about
    /// [`FEED_BUDGET`] bytes were fed or `sink` returns false. Returns false once the peer has
    /// closed the pipe and every byte before the close was fed.
    fn feed(&mut self, sink: &mut dyn FnMut(Input<'_>) -> bool) -> io::Result<bool>;

    /// The shared-memory receiver under this half, whose records the driver may take in
    /// place (see `Driver::receive_quick`); `None` for other transports.
    fn shm_receiver(&mut self) -> Option<&mut offhost_shm::Receiver> {
        None
    }

    /// True when `wait(None)` is cheap enough (no system call) to try under the driver's lock
    /// before every wait.
    fn cheap_poll(&self) -> bool {
        false
    }
}

/// Bytes one [`WireRead::feed`] hands over at most (a little more when a record is larger),
/// so that the driver's lock is released regularly under a continuous stream.
pub(crate) const FEED_BUDGET: usize = 256 * 1024;

/// The writing half of a transport.
pub(crate) trait WireWrite: Send {
    /// Writes a prefix of `buf` without waiting; `WouldBlock` when nothing fits now.
    fn write_nb(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// Writes a prefix of `buf`, waiting at most `timeout` for room; `WouldBlock` or `TimedOut`
    /// when nothing fitted in time.
    fn write_wait(&mut self, buf: &[u8], timeout: Duration) -> io::Result<usize>;
    /// Tells the peer no more bytes will come.
    fn shutdown(&mut self);

    /// Whether [`write_vectored_nb`](Self::write_vectored_nb) writes (byte streams: TLS and
    /// sockets); asked once, when the driver starts.
    fn writes_vectored(&self) -> bool {
        false
    }

    /// Writes a prefix of the bytes of `bufs`, one after another, without waiting and without
    /// joining them first (the contract of [`write_nb`](Self::write_nb) otherwise). Only
    /// called where [`writes_vectored`](Self::writes_vectored) says so.
    fn write_vectored_nb(&mut self, _bufs: &[&[u8]]) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }

    /// The shared-memory sender under this half, to which frames are written in place (into
    /// a ring record, without an intermediate buffer); `None` for other transports.
    fn shm_sender(&mut self) -> Option<&mut offhost_shm::Sender> {
        None
    }

    /// The allocator of zero-copy buffers that works apart from this half (shared memory only).
    fn allocator(&self) -> Option<Box<dyn LoanAlloc>> {
        None
    }

    /// Takes a free buffer of the shared pool, waiting at most `timeout` on this half's
    /// doorbell for the peer to return one (shared memory only).
    fn alloc_loan(&mut self, _timeout: Duration) -> io::Result<Option<offhost_shm::Buf>> {
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Sends a pool buffer by descriptor if there is room now; hands it back otherwise
    /// (shared memory only).
    fn send_loan_nb(&mut self, _buf: offhost_shm::Buf) -> io::Result<Result<(), offhost_shm::Buf>> {
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Sends a pool buffer by descriptor, waiting at most `timeout` for room (shared memory only).
    fn send_loan(&mut self, _buf: offhost_shm::Buf, _timeout: Duration) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Takes free zero-copy buffers without waiting, from any thread.
pub(crate) trait LoanAlloc: Send + Sync {
    /// A free buffer homed at this side, if there is one.
    fn try_alloc(&self) -> io::Result<Option<offhost_shm::Buf>>;
}

/// True for the error kinds that mean "nothing yet".
pub(crate) fn is_idle(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Reading half of a stream socket (TCP or Unix): `wait` receives into a buffer, `feed` hands
/// it over.
pub(crate) struct SockRead {
    fd: OwnedFd,
    timeout: Option<Duration>,
    /// How long a wait first looks for input without sleeping (see [`UNIX_SPIN`]).
    spin: Duration,
    buf: Vec<u8>,
    len: usize,
    eof: bool,
}

/// Writing half of a stream socket (TCP or Unix).
pub(crate) struct SockWrite {
    fd: OwnedFd,
}

/// Splits a connected stream socket into its two halves.
pub(crate) fn sock_pair(fd: OwnedFd) -> io::Result<(SockRead, SockWrite)> {
    let w = fd.try_clone()?;
    let unix = rustix::net::getsockname(&fd)
        .is_ok_and(|a| a.address_family() == rustix::net::AddressFamily::UNIX);
    let spin = if unix { UNIX_SPIN } else { Duration::ZERO };
    Ok((
        SockRead {
            fd,
            timeout: None,
            spin,
            buf: vec![0; FEED_BUDGET],
            len: 0,
            eof: false,
        },
        SockWrite { fd: w },
    ))
}

/// How long a wait on a Unix socket looks for input (non-blocking `recv`s) before it sleeps in
/// a blocking one. A thread asleep in `recv` on a Unix stream socket is woken whenever the
/// peer reads what this side sent (`unix_write_space` wakes every waiter of the socket for room
/// to write, readers among them), so in a request and its answer each side slept twice, and a
/// wake-up of an idle CPU in a VM costs tens of microseconds: a 64 KiB ping-pong took 1.4-1.9x
/// the raw socket's time, 0.6-0.7x with this spin (`docs/notes/link.md`, "Aligned frames").
/// TCP wakes writers only when a write found no room, so TCP waits do not spin. A wait spins
/// at most this long each time it finds nothing, then sleeps as before.
pub(crate) const UNIX_SPIN: Duration = Duration::from_micros(30);

impl SockRead {
    fn recv(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        let Some(t) = timeout else {
            return rustix::net::recv(&self.fd, &mut self.buf[..], RecvFlags::DONTWAIT)
                .map(|(n, _)| n)
                .map_err(Into::into);
        };
        if !self.spin.is_zero() {
            let start = std::time::Instant::now();
            loop {
                match rustix::net::recv(&self.fd, &mut self.buf[..], RecvFlags::DONTWAIT) {
                    Ok((n, _)) => return Ok(n),
                    Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(e.into()),
                }
                if start.elapsed() >= self.spin.min(t) {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        // A zero timeout would mean "for ever" to the kernel.
        let t = t.max(Duration::from_micros(1));
        if self.timeout != Some(t) {
            rustix::net::sockopt::set_socket_timeout(
                &self.fd,
                rustix::net::sockopt::Timeout::Recv,
                Some(t),
            )?;
            self.timeout = Some(t);
        }
        rustix::net::recv(&self.fd, &mut self.buf[..], RecvFlags::empty())
            .map(|(n, _)| n)
            .map_err(Into::into)
    }
}

impl Drop for SockRead {
    fn drop(&mut self) {
        // The session is over: let its last frames reach the peer (see `linger.rs`).
        if let Ok(fd) = self.fd.try_clone() {
            crate::linger::close(fd);
        }
    }
}

impl WireRead for SockRead {
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        if self.len > 0 || self.eof {
            return Ok(());
        }
        match self.recv(timeout)? {
            0 => self.eof = true,
            n => self.len = n,
        }
        Ok(())
    }

    fn feed(&mut self, sink: &mut dyn FnMut(Input<'_>) -> bool) -> io::Result<bool> {
        if self.len == 0 && !self.eof {
            match self.recv(None) {
                Ok(0) => self.eof = true,
                Ok(n) => self.len = n,
                Err(e) if is_idle(&e) => {}
                Err(e) => return Err(e),
            }
        }
        if self.len > 0 {
            let n = std::mem::take(&mut self.len);
            sink(Input::Bytes(&self.buf[..n]));
        }
        Ok(!self.eof)
    }
}

impl WireWrite for SockWrite {
    fn write_nb(&mut self, buf: &[u8]) -> io::Result<usize> {
        rustix::net::send(&self.fd, buf, SendFlags::DONTWAIT | SendFlags::NOSIGNAL)
            .map_err(Into::into)
    }

    fn writes_vectored(&self) -> bool {
        true
    }

    fn write_vectored_nb(&mut self, bufs: &[&[u8]]) -> io::Result<usize> {
        // At most IOV_MAX slices per call; the rest goes to the next.
        let slices: Vec<io::IoSlice<'_>> = bufs
            .iter()
            .take(1024)
            .map(|b| io::IoSlice::new(b))
            .collect();
        rustix::net::sendmsg(
            &self.fd,
            &slices,
            &mut rustix::net::SendAncillaryBuffer::default(),
            SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
        )
        .map_err(Into::into)
    }

    fn write_wait(&mut self, buf: &[u8], timeout: Duration) -> io::Result<usize> {
        {
            let fd = self.fd.as_fd();
            let mut fds = [PollFd::new(&fd, PollFlags::OUT)];
            let ts = Timespec::try_from(timeout).unwrap_or(Timespec {
                tv_sec: 1,
                tv_nsec: 0,
            });
            match rustix::event::poll(&mut fds, Some(&ts)) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.write_nb(buf)
    }

    fn shutdown(&mut self) {
        // The peer may already be gone; nothing to do about a failure here.
        let _ = rustix::net::shutdown(&self.fd, rustix::net::Shutdown::Write);
    }
}
