//! The off-host queue: submission records into the host -> engine ring, completion records
//! out of the engine -> host ring.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use offhost_proto::offload::{
    header_of, Completion as Record, CompletionHeader, ErrorCode, Op, QueueLimits, Status,
    Submission, HEADER, HELLO_BODY, VERSION,
};
use offhost_shm::{Buf, Receiver, Sender, ShmError};

use super::book::Book;
use super::{complete, Completion, Data, OpenOptions, Outcome, QueueError};
use crate::peer::Failure;

/// Sends of more bytes than this go in a pool buffer when the segment has buffers that hold
/// them. The engine hands a pool buffer to the link as it is, where an inline record is first
/// copied out of the ring (which must move on). Smaller sends stay inline: a window of them
/// needs more buffers than the pool has, and waiting for buffers woke the host twice as
/// often (16 KiB messages in pool buffers: 0.09 wake-ups per message against 0.04 inline).
/// `offhost bench offload`, this 2-vCPU machine, off-host/in-host throughput with inline
/// records up to 256 KiB: 0.81-0.86 at 64 KiB, 0.91-0.95 at 256 KiB; with this limit:
/// 0.91-1.00 and 1.01-1.10.
const INLINE_BODY_MAX: usize = 16 << 10;

/// How long connect waits for the engine's hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) struct OffHost {
    tx: Sender,
    rx: Receiver,
    /// Largest submission record written inline; larger sends go in a pool buffer.
    inline_max: usize,
    /// Set once the queue is closed: the engine went away, refused us or wrote garbage.
    closed: Option<String>,
    gone: bool,
}

fn shm(e: ShmError) -> QueueError {
    match e {
        ShmError::PeerGone => QueueError::EngineGone,
        e => QueueError::Shm(e),
    }
}

impl OffHost {
    pub(crate) fn connect(
        addr: &str,
        config: &offhost_shm::Config,
    ) -> Result<(OffHost, QueueLimits), QueueError> {
        let ep = offhost_shm::connect(addr, config)?;
        let (mut tx, mut rx) = ep.split();
        let mut hello = [0u8; HEADER + HELLO_BODY];
        Submission::Hello { version: VERSION }.encode(&mut hello);
        tx.send(&hello, Some(HELLO_TIMEOUT)).map_err(shm)?;
        let rec = match rx.recv(Some(HELLO_TIMEOUT)) {
            Ok(r) => r.bytes().to_vec(),
            Err(ShmError::Timeout) => {
                return Err(QueueError::Refused(
                    "no answer to the hello within 5 s (is it an offhost engine?)".into(),
                ))
            }
            Err(ShmError::PeerGone) => {
                return Err(QueueError::Refused(
                    "the engine closed the link before answering the hello".into(),
                ))
            }
            Err(e) => return Err(QueueError::Shm(e)),
        };
        let c = Record::decode(&rec).map_err(|e| QueueError::Corrupt(e.to_string()))?;
        let limits = match (c.op, c.status) {
            (Op::Hello, Status::Ok) => {
                QueueLimits::decode(c.body).map_err(|e| QueueError::Corrupt(e.to_string()))?
            }
            (Op::Refused, _) | (Op::Hello, Status::Error(_)) => {
                return Err(QueueError::Refused(c.reason().to_owned()))
            }
            _ => {
                return Err(QueueError::Corrupt(
                    "the answer to hello is not a hello".into(),
                ))
            }
        };
        let ring_max = (tx.max_record() / 2).clamp(HEADER + 64, 256 << 10);
        let inline_max = if tx.pool_buffers() > 0 && tx.buffer_size() >= ring_max {
            ring_max.min(HEADER + INLINE_BODY_MAX)
        } else {
            ring_max
        };
        let buffer_room = tx.buffer_size().saturating_sub(HEADER);
        let limits = QueueLimits {
            max_message: limits
                .max_message
                .min(buffer_room.max(inline_max - HEADER) as u32),
            ..limits
        };
        Ok((
            OffHost {
                tx,
                rx,
                inline_max,
                closed: None,
                gone: false,
            },
            limits,
        ))
    }

    pub(crate) fn error(&self) -> QueueError {
        match &self.closed {
            _ if self.gone => QueueError::EngineGone,
            Some(why) => QueueError::Refused(why.clone()),
            None => QueueError::Timeout,
        }
    }

    fn usable(&self) -> Result<(), QueueError> {
        if self.gone || self.closed.is_some() {
            return Err(self.error());
        }
        Ok(())
    }

    /// Stages a small record; when the ring is full, publishes what is staged and waits for
    /// room (the engine drains the ring as it reads it).
    fn write(&mut self, len: usize, fill: impl Fn(&mut [u8])) -> Result<(), QueueError> {
        self.usable()?;
        if self.tx.write_with(len, &fill).map_err(shm)? {
            return Ok(());
        }
        let mut rec = vec![0u8; len];
        fill(&mut rec);
        self.tx.send(&rec, None).map_err(shm)
    }

    pub(crate) fn open(
        &mut self,
        id: u64,
        handle: u32,
        address: &str,
        opts: OpenOptions,
    ) -> Result<(), QueueError> {
        let (rate, burst) = opts.rate.map_or((0, 0), |r| (r.bytes_per_sec, r.burst));
        let s = Submission::Open {
            handle,
            id,
            urgent: opts.urgent,
            rate,
            burst,
            address,
        };
        self.write(s.encoded_len(), |slot| s.encode(slot))
    }

    pub(crate) fn send(&mut self, id: u64, handle: u32, data: &[u8]) -> Result<(), QueueError> {
        let len = HEADER + data.len();
        if len <= self.inline_max {
            return self.write(len, |slot| {
                Submission::encode_send_header(handle, id, data.len() as u32, slot);
                slot[HEADER..].copy_from_slice(data);
            });
        }
        self.usable()?;
        // No waiting for a pool buffer here: they come home with completions, so the caller
        // reaps (one wake-up for a batch) rather than sleeping on each buffer's return.
        let Some(mut buf) = self.tx.try_alloc().map_err(shm)? else {
            self.tx.flush().map_err(shm)?;
            return Err(QueueError::Full("pool buffers"));
        };
        buf.set_range(0, len).map_err(QueueError::Shm)?;
        Submission::encode_send_header(handle, id, data.len() as u32, &mut buf);
        buf[HEADER..].copy_from_slice(data);
        self.write_buf(buf)
    }

    /// A pool buffer for a loan (its header room is in front of the data range).
    pub(crate) fn alloc(&mut self, timeout: Option<Duration>) -> Result<Buf, QueueError> {
        self.usable()?;
        match self.tx.alloc(timeout) {
            Err(ShmError::Timeout) => Err(QueueError::Timeout),
            r => r.map_err(shm),
        }
    }

    pub(crate) fn send_buf(
        &mut self,
        id: u64,
        handle: u32,
        mut buf: Buf,
    ) -> Result<(), QueueError> {
        self.usable()?;
        let len = buf.len();
        if buf.offset() != HEADER {
            return Err(QueueError::Corrupt("a loan's range was moved".into()));
        }
        buf.set_range(0, HEADER + len).map_err(QueueError::Shm)?;
        Submission::encode_send_header(handle, id, len as u32, &mut buf);
        self.write_buf(buf)
    }

    fn write_buf(&mut self, buf: Buf) -> Result<(), QueueError> {
        match self.tx.write_buf(buf).map_err(shm)? {
            Ok(()) => Ok(()),
            Err(buf) => self.tx.send_buf(buf, None).map_err(shm),
        }
    }

    pub(crate) fn recv(&mut self, id: u64, handle: u32, max: u32) -> Result<(), QueueError> {
        let s = Submission::Recv { handle, id, max };
        self.write(HEADER, |slot| s.encode(slot))
    }

    pub(crate) fn close(&mut self, id: u64, handle: u32) -> Result<(), QueueError> {
        let s = Submission::Close { handle, id };
        self.write(HEADER, |slot| s.encode(slot))
    }

    pub(crate) fn submit(&mut self) -> Result<(), QueueError> {
        self.usable()?;
        self.tx.flush().map_err(shm)
    }

    /// Every outstanding submission fails with `code` (the engine is gone or refused us).
    fn fail_all(&mut self, book: &mut Book, ready: &mut VecDeque<Completion>, f: &Failure) {
        for (id, e) in book.drain() {
            ready.push_back(complete(
                book,
                e,
                id,
                Outcome::Failed(f.clone()),
                Data::None,
            ));
        }
    }

    fn engine_gone(&mut self, book: &mut Book, ready: &mut VecDeque<Completion>) {
        self.gone = true;
        let f = Failure {
            code: ErrorCode::EngineGone,
            reason: "the local engine went away".into(),
        };
        self.fail_all(book, ready, &f);
    }

    fn corrupt(&mut self, book: &mut Book, ready: &mut VecDeque<Completion>, why: String) {
        tracing::warn!("offload queue: {why}");
        let f = Failure {
            code: ErrorCode::BadRecord,
            reason: format!("bad completion from the engine: {why}"),
        };
        self.closed = Some(f.reason.clone());
        self.fail_all(book, ready, &f);
    }

    /// Takes one completion record off the ring.
    fn take(
        &mut self,
        book: &mut Book,
        ready: &mut VecDeque<Completion>,
    ) -> Result<bool, Result<String, ShmError>> {
        let rec = match self.rx.try_recv() {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(false),
            Err(e) => return Err(Err(e)),
        };
        let bytes = rec.bytes();
        let h = header_of(bytes)
            .and_then(|h| CompletionHeader::decode(&h))
            .map_err(|e| Ok(e.to_string()))?;
        let c = Record::parse(&h, &bytes[HEADER..]).map_err(|e| Ok(e.to_string()))?;
        if c.op == Op::Refused {
            let why = c.reason().to_owned();
            drop(rec);
            self.closed = Some(why.clone());
            let f = Failure {
                code: ErrorCode::BadRecord,
                reason: format!("the engine refused this host: {why}"),
            };
            self.fail_all(book, ready, &f);
            return Ok(true);
        }
        let Some(e) = book.take(c.id, c.op) else {
            return Err(Ok(format!(
                "completion of {} {:#x}, which is not outstanding",
                c.op.name(),
                c.id
            )));
        };
        if e.handle != c.handle {
            return Err(Ok(format!(
                "completion of {:#x} names handle {}, not {}",
                c.id, c.handle, e.handle
            )));
        }
        let (outcome, reason) = match c.status {
            Status::Ok => (Outcome::Ok(c.value), None),
            Status::End => (Outcome::End, None),
            Status::Error(code) => (Outcome::Ok(0), Some((code, c.reason().to_owned()))),
        };
        let outcome = match reason {
            Some((code, reason)) => Outcome::Failed(Failure { code, reason }),
            None => outcome,
        };
        let (id, op, status, len) = (c.id, c.op, c.status, c.body.len());
        let data = if op == Op::Recv && status == Status::Ok {
            if rec.is_buf() {
                let mut b = rec.take_buf().expect("a buffer record");
                let at = b.offset() + HEADER;
                b.set_range(at, len).map_err(Err)?;
                Data::Loan(b)
            } else {
                Data::Bytes(c.body.to_vec())
            }
        } else {
            Data::None
        };
        ready.push_back(complete(book, e, id, outcome, data));
        Ok(true)
    }

    pub(crate) fn reap(
        &mut self,
        book: &mut Book,
        ready: &mut VecDeque<Completion>,
        min: usize,
        deadline: Option<Instant>,
    ) -> Result<(), QueueError> {
        loop {
            if self.gone || self.closed.is_some() {
                return Ok(());
            }
            loop {
                match self.take(book, ready) {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(Ok(why)) => {
                        self.corrupt(book, ready, why);
                        return Ok(());
                    }
                    Err(Err(ShmError::PeerGone)) => {
                        self.engine_gone(book, ready);
                        return Ok(());
                    }
                    Err(Err(e)) => {
                        self.corrupt(book, ready, e.to_string());
                        return Ok(());
                    }
                }
            }
            if ready.len() >= min {
                return Ok(());
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left.is_some_and(|l| l.is_zero()) {
                return Ok(());
            }
            // The event limit: sleep until the completions still wanted could all be there,
            // not just the next one (fewer wake-ups under a stream). Only outstanding
            // submissions complete, so never ask for more than those.
            let want = min
                .saturating_sub(ready.len())
                .min(book.outstanding())
                .max(1);
            match self.rx.wait_ready_for(want, HEADER, left) {
                Ok(()) | Err(ShmError::Timeout) => {}
                Err(ShmError::PeerGone) => {
                    self.engine_gone(book, ready);
                    return Ok(());
                }
                Err(e) => {
                    self.corrupt(book, ready, e.to_string());
                    return Ok(());
                }
            }
        }
    }
}
