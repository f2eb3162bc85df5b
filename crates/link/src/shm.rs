//! The `shm:ADDR` transport: the protocol's bytes travel as inline records of the shared-memory
//! rings, loans as buffer descriptors.

use std::io;
use std::time::Duration;

use offhost_shm::{Buf, ShmError};

use crate::wire::{Input, LoanAlloc, WireRead, WireWrite, FEED_BUDGET};

/// Segment the host creates when the URL gives no configuration: 1 MiB rings, and 8 buffers of
/// 1 MiB per side for loans.
pub fn default_config() -> offhost_shm::Config {
    offhost_shm::Config {
        pool_buffers: 8,
        buffer_size: 1 << 20,
        ..offhost_shm::Config::default()
    }
}

/// Largest record the link writes: a quarter of the ring, so a record never waits for the ring
/// to drain completely (records do not wrap).
pub(crate) fn record_limit(tx: &offhost_shm::Sender) -> usize {
    (tx.max_record() / 2).max(64)
}

pub(crate) fn to_io(e: ShmError) -> io::Error {
    match e {
        ShmError::Timeout => io::ErrorKind::TimedOut.into(),
        ShmError::PeerGone => io::ErrorKind::BrokenPipe.into(),
        other => io::Error::other(other),
    }
}

/// Reading half: hands inline records to the driver in place, descriptors as loans.
pub(crate) struct ShmRead {
    rx: offhost_shm::Receiver,
    /// The peer is gone: once the records it published are fed, the input ends.
    gone: bool,
}

/// Writing half: stages records and publishes them in one batch per call.
pub(crate) struct ShmWrite {
    tx: offhost_shm::Sender,
}

/// Splits an endpoint into the two halves.
pub(crate) fn halves(ep: offhost_shm::Endpoint) -> (ShmRead, ShmWrite) {
    let (tx, rx) = ep.split();
    (ShmRead { rx, gone: false }, ShmWrite { tx })
}

impl WireRead for ShmRead {
    fn cheap_poll(&self) -> bool {
        true
    }

    fn shm_receiver(&mut self) -> Option<&mut offhost_shm::Receiver> {
        Some(&mut self.rx)
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        if self.gone {
            return Ok(());
        }
        let r = match timeout {
            None => match self.rx.is_ready() {
                Ok(true) => Ok(()),
                Ok(false) => Err(ShmError::Timeout),
                Err(e) => Err(e),
            },
            Some(t) => self.rx.wait_ready(Some(t)),
        };
        match r {
            Ok(()) => Ok(()),
            Err(ShmError::PeerGone) => {
                self.gone = true;
                Ok(())
            }
            Err(ShmError::Timeout) => Err(io::ErrorKind::WouldBlock.into()),
            Err(e) => Err(to_io(e)),
        }
    }

    fn feed(&mut self, sink: &mut dyn FnMut(Input<'_>) -> bool) -> io::Result<bool> {
        let mut fed = 0;
        while fed < FEED_BUDGET {
            let rec = match self.rx.try_recv() {
                Ok(Some(rec)) => rec,
                Ok(None) => break,
                Err(e) => return Err(to_io(e)),
            };
            let more = if rec.is_buf() {
                match rec.take_buf() {
                    Some(b) => sink(Input::Loan(b)),
                    None => true,
                }
            } else {
                fed += rec.len();
                sink(Input::Bytes(rec.bytes()))
            };
            if !more {
                break;
            }
        }
        Ok(!self.gone)
    }
}

impl ShmWrite {
    fn chunk(&self) -> usize {
        record_limit(&self.tx)
    }
}

impl WireWrite for ShmWrite {
    fn write_nb(&mut self, buf: &[u8]) -> io::Result<usize> {
        let max = self.chunk();
        let mut at = 0;
        while at < buf.len() {
            let end = buf.len().min(at + max);
            if !self.tx.write(&buf[at..end]).map_err(to_io)? {
                break;
            }
            at = end;
        }
        self.tx.flush().map_err(to_io)?;
        if at == 0 && !buf.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(at)
    }

    fn write_wait(&mut self, buf: &[u8], timeout: Duration) -> io::Result<usize> {
        let n = buf.len().min(self.chunk());
        self.tx.send(&buf[..n], Some(timeout)).map_err(to_io)?;
        Ok(n)
    }

    fn shutdown(&mut self) {
        // Dropping the endpoint closes the control socket; the peer sees that.
    }

    fn shm_sender(&mut self) -> Option<&mut offhost_shm::Sender> {
        Some(&mut self.tx)
    }

    fn allocator(&self) -> Option<Box<dyn LoanAlloc>> {
        Some(Box::new(self.tx.allocator()))
    }

    fn alloc_loan(&mut self, timeout: Duration) -> io::Result<Option<Buf>> {
        match self.tx.alloc(Some(timeout)) {
            Ok(b) => Ok(Some(b)),
            Err(ShmError::Timeout) => Ok(None),
            Err(e) => Err(to_io(e)),
        }
    }

    fn send_loan_nb(&mut self, buf: Buf) -> io::Result<Result<(), Buf>> {
        let r = self.tx.write_buf(buf).map_err(to_io)?;
        self.tx.flush().map_err(to_io)?;
        Ok(r)
    }

    fn send_loan(&mut self, buf: Buf, timeout: Duration) -> io::Result<()> {
        self.tx.send_buf(buf, Some(timeout)).map_err(to_io)
    }
}

impl LoanAlloc for offhost_shm::Allocator {
    fn try_alloc(&self) -> io::Result<Option<Buf>> {
        offhost_shm::Allocator::try_alloc(self).map_err(to_io)
    }
}
