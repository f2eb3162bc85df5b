//! The byte pipe under a session: one reading half and one writing half per transport.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::net::{RecvFlags, SendFlags};

/// The reading half of a transport.
pub(crate) trait WireRead: Send {
    /// Reads some bytes into `buf`. `Ok(0)` means the peer closed the pipe. With `timeout`
    /// `None` the call does not wait; otherwise it waits at most `timeout`. Nothing arriving in
    /// time is an error of kind `WouldBlock` or `TimedOut`.
    fn read(&mut self, buf: &mut [u8], timeout: Option<Duration>) -> io::Result<usize>;

    /// Moves the zero-copy buffers that arrived so far into `out` (shared memory only).
    fn take_loans(&mut self, _out: &mut Vec<offhost_shm::Buf>) {}
}

/// The writing half of a transport.
pub(crate) trait WireWrite: Send {
    /// Writes a prefix of `buf` without waiting; `WouldBlock` when nothing fits now.
    fn write_nb(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// Writes a prefix of `buf`, waiting at most `timeout` for room; `WouldBlock` or `TimedOut`
    /// when nothing fitted in time.
    fn write_wait(&mut self, buf: &[u8], timeout: Duration) -> io::Result<usize>;
    /// Tells the peer no more bytes will come.
    fn shutdown(&mut self);

    /// Takes a free buffer of the shared pool, waiting at most `timeout` (shared memory only).
    fn alloc_loan(&mut self, _timeout: Duration) -> io::Result<Option<offhost_shm::Buf>> {
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Sends a pool buffer by descriptor, waiting at most `timeout` for room (shared memory only).
    fn send_loan(&mut self, _buf: offhost_shm::Buf, _timeout: Duration) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// True for the error kinds that mean "nothing yet".
pub(crate) fn is_idle(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Reading half of a stream socket (TCP or Unix).
pub(crate) struct SockRead {
    fd: OwnedFd,
    timeout: Option<Duration>,
}

/// Writing half of a stream socket (TCP or Unix).
pub(crate) struct SockWrite {
    fd: OwnedFd,
}

/// Splits a connected stream socket into its two halves.
pub(crate) fn sock_pair(fd: OwnedFd) -> io::Result<(SockRead, SockWrite)> {
    let w = fd.try_clone()?;
    Ok((SockRead { fd, timeout: None }, SockWrite { fd: w }))
}

impl WireRead for SockRead {
    fn read(&mut self, buf: &mut [u8], timeout: Option<Duration>) -> io::Result<usize> {
        let Some(t) = timeout else {
            return rustix::net::recv(&self.fd, buf, RecvFlags::DONTWAIT)
                .map(|(n, _)| n)
                .map_err(Into::into);
        };
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
        rustix::net::recv(&self.fd, buf, RecvFlags::empty())
            .map(|(n, _)| n)
            .map_err(Into::into)
    }
}

impl WireWrite for SockWrite {
    fn write_nb(&mut self, buf: &[u8]) -> io::Result<usize> {
        rustix::net::send(&self.fd, buf, SendFlags::DONTWAIT | SendFlags::NOSIGNAL)
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
