//! The `shm:ADDR` transport: the protocol's bytes travel as inline records of the shared-memory
//! rings, loans as buffer descriptors.

use std::io;
use std::time::Duration;

use offhost_shm::{Buf, ShmError};

use crate::wire::{WireRead, WireWrite};

/// Segment the host creates when the URL gives no configuration: 1 MiB rings, and 8 buffers of
/// 1 MiB per side for loans.
pub fn default_config() -> offhost_shm::Config {
    offhost_shm::Config {
        pool_buffers: 8,
        buffer_size: 1 << 20,
        ..offhost_shm::Config::default()
    }
}

fn to_io(e: ShmError) -> io::Error {
    match e {
        ShmError::Timeout => io::ErrorKind::TimedOut.into(),
        ShmError::PeerGone => io::ErrorKind::BrokenPipe.into(),
        other => io::Error::other(other),
    }
}

/// Reading half: copies inline records into the caller's buffer; keeps descriptors as loans.
pub(crate) struct ShmRead {
    rx: offhost_shm::Receiver,
    left: Vec<u8>,
    pos: usize,
    loans: Vec<Buf>,
}

/// Writing half: stages records and publishes them in one batch per call.
pub(crate) struct ShmWrite {
    tx: offhost_shm::Sender,
}

/// Splits an endpoint into the two halves.
pub(crate) fn halves(ep: offhost_shm::Endpoint) -> (ShmRead, ShmWrite) {
    let (tx, rx) = ep.split();
    (
        ShmRead {
            rx,
            left: Vec::new(),
            pos: 0,
            loans: Vec::new(),
        },
        ShmWrite { tx },
    )
}

/// Copies one inline record into `buf` (the rest into `left`), or keeps a descriptor's buffer.
fn take(
    rec: offhost_shm::Record<'_>,
    buf: &mut [u8],
    left: &mut Vec<u8>,
    pos: &mut usize,
    loans: &mut Vec<Buf>,
) -> usize {
    if rec.is_buf() {
        loans.extend(rec.take_buf());
        return 0;
    }
    let bytes = rec.bytes();
    let n = bytes.len().min(buf.len());
    buf[..n].copy_from_slice(&bytes[..n]);
    if n < bytes.len() {
        left.clear();
        left.extend_from_slice(&bytes[n..]);
        *pos = 0;
    }
    n
}

impl WireRead for ShmRead {
    fn read(&mut self, buf: &mut [u8], timeout: Option<Duration>) -> io::Result<usize> {
        if self.pos < self.left.len() {
            let n = buf.len().min(self.left.len() - self.pos);
            buf[..n].copy_from_slice(&self.left[self.pos..self.pos + n]);
            self.pos += n;
            return Ok(n);
        }
        let mut n = 0;
        let mut got_any = false;
        if let Some(t) = timeout {
            match self.rx.recv(Some(t)) {
                Ok(rec) => {
                    got_any = true;
                    n += take(rec, buf, &mut self.left, &mut self.pos, &mut self.loans);
                }
                Err(ShmError::PeerGone) => return Ok(0),
                Err(e) => return Err(to_io(e)),
            }
        }
        // Take whatever else is ready, as long as it fits whole.
        while self.pos >= self.left.len() && n < buf.len() {
            match self.rx.try_recv() {
                Ok(Some(rec)) => {
                    got_any = true;
                    n += take(
                        rec,
                        &mut buf[n..],
                        &mut self.left,
                        &mut self.pos,
                        &mut self.loans,
                    );
                }
                Ok(None) => break,
                Err(ShmError::PeerGone) if !got_any => return Ok(0),
                Err(ShmError::PeerGone) => break,
                Err(e) => return Err(to_io(e)),
            }
        }
        if !got_any {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        if n == 0 && self.loans.is_empty() {
            // Only empty records: report nothing arrived yet rather than end of file.
            return Err(io::ErrorKind::WouldBlock.into());
        }
        if n == 0 {
            // Loans only: the driver collects them; no bytes this time.
            return Err(io::ErrorKind::Interrupted.into());
        }
        Ok(n)
    }

    fn take_loans(&mut self, out: &mut Vec<Buf>) {
        out.append(&mut self.loans);
    }
}

impl ShmWrite {
    /// Largest record written: a quarter of the ring, so a record never waits for the ring to
    /// drain completely (records do not wrap).
    fn chunk(&self) -> usize {
        (self.tx.max_record() / 4).max(64)
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

    fn alloc_loan(&mut self, timeout: Duration) -> io::Result<Option<Buf>> {
        match self.tx.alloc(Some(timeout)) {
            Ok(b) => Ok(Some(b)),
            Err(ShmError::Timeout) => Ok(None),
            Err(e) => Err(to_io(e)),
        }
    }

    fn send_loan(&mut self, buf: Buf, timeout: Duration) -> io::Result<()> {
        self.tx.send_buf(buf, Some(timeout)).map_err(to_io)
    }
}
