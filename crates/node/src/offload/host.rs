//! One host's queue at the engine: its submissions read off the ring, its completions
//! written back (by whichever thread finishes them), its channels and budgets.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use offhost_link::offload::{Address, HostSink, Posted};
use offhost_link::peer::{Failure, Lane, Notify, Outgoing, Payload, Rate, SendBatch, Stream};
use offhost_proto::offload::{
    header_of, Completion, ErrorCode, Op, QueueLimits, RecordError, Status, Submission,
    SubmissionHeader, HEADER, VERSION,
};
use offhost_shm::{Receiver, Sender, ShmError};
use offhost_units::{Limit, OverLimit};

use super::Offload;

/// Records taken from the ring before the completions they made are published.
const BATCH: usize = 64;

/// Records up to this many bytes are copied out of the ring onto the stack, not the heap.
const SMALL_RECORD: usize = 320;

/// Why the engine refuses a host: the text of its refusal completion, after which its queue
/// is closed.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refused {
    /// A record that does not decode.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A pool buffer carries a record that is not a send.
    #[error("a pool buffer carries a {0} record")]
    BufferNotSend(&'static str),
    /// The first record is not a hello.
    #[error("the first record is not a hello")]
    NoHello,
    /// A hello after the first record.
    #[error("a second hello")]
    SecondHello,
    /// A send record reached the decoding of the other records.
    #[error("a send decoded twice")]
    SendDecodedTwice,
    /// The host writes another version of the record format.
    #[error("record format version {0}; this engine speaks {VERSION}")]
    Version(u32),
    /// The engine serves as many hosts as it may.
    #[error("this engine serves {max} hosts at most, {over}")]
    OverHosts {
        /// `max_hosts`.
        max: usize,
        /// The limit and its value.
        #[source]
        over: OverLimit,
    },
    /// The host's rings failed.
    #[error(transparent)]
    Shm(#[from] ShmError),
}

impl Refused {
    /// The text the host is sent: past a limit, also how the engine raises it
    /// ([`OverLimit::for_peer`]).
    pub(super) fn for_host(&self) -> String {
        match self {
            Refused::OverHosts { over, .. } => format!("{self} {}", over.for_peer()),
            _ => self.to_string(),
        }
    }
}

struct Tx {
    tx: Sender,
    /// Completions that found no room (the ring full, or no pool buffer for a large one),
    /// with their channel handle, in order.
    overflow: VecDeque<(u32, Vec<u8>)>,
    dirty: bool,
}

struct Chan {
    channel: String,
    stream: Option<Stream>,
}

/// A host's queue (its completion side is shared with the links' threads).
pub(crate) struct HostConn {
    id: u64,
    tx: Mutex<Tx>,
    limits: QueueLimits,
    /// Submissions taken and not yet completed.
    outstanding: AtomicUsize,
    /// Bytes of sends taken and not yet completed.
    bytes: AtomicU64,
    inline_max: usize,
    /// The largest message a receive completion can carry to this host: one that fits a
    /// record inline, or one of the host's pool buffers.
    recv_max: u32,
}

impl HostConn {
    pub(crate) fn new(id: u64, tx: Sender, limits: QueueLimits) -> Arc<HostConn> {
        let inline_max = (tx.max_record() / 2).clamp(HEADER + 64, 64 << 10);
        let record_max = if tx.pool_buffers() > 0 {
            inline_max.max(tx.buffer_size())
        } else {
            inline_max
        };
        let recv_max = u32::try_from(record_max - HEADER).unwrap_or(u32::MAX);
        Arc::new(HostConn {
            id,
            tx: Mutex::new(Tx {
                tx,
                overflow: VecDeque::new(),
                dirty: false,
            }),
            limits,
            outstanding: AtomicUsize::new(0),
            bytes: AtomicU64::new(0),
            inline_max,
            recv_max,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Tx> {
        self.tx.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes one record into the ring (inline, or in a pool buffer when large); false when
    /// there is no room now. A dead ring takes everything (and drops it).
    fn try_put(&self, tx: &mut Tx, len: usize, fill: &dyn Fn(&mut [u8])) -> bool {
        if len <= self.inline_max {
            return match tx.tx.write_with(len, fill) {
                Ok(true) => {
                    tx.dirty = true;
                    true
                }
                Ok(false) => false,
                Err(_) => true,
            };
        }
        match tx.tx.try_alloc() {
            Ok(Some(mut b)) => {
                if b.set_range(0, len).is_err() {
                    return true;
                }
                fill(&mut b);
                match tx.tx.write_buf(b) {
                    Ok(Ok(())) => {
                        tx.dirty = true;
                        true
                    }
                    Ok(Err(_)) => false,
                    Err(_) => true,
                }
            }
            Ok(None) => false,
            Err(_) => true,
        }
    }

    /// Writes a completion, behind any that wait for room.
    #[allow(clippy::too_many_arguments)]
    fn put(
        &self,
        tx: &mut Tx,
        op: Op,
        status: Status,
        handle: u32,
        id: u64,
        value: u64,
        body: &[u8],
    ) {
        let len = HEADER + body.len();
        let fill = |out: &mut [u8]| {
            Completion::encode_header(op, status, handle, id, body.len() as u32, value, out);
            out[HEADER..].copy_from_slice(body);
        };
        // Completions of one channel keep their order; those of another channel (an open's
        // answer, say) need not wait behind them: a host blocked on that answer would not
        // release the pool buffers the waiting ones need.
        if !tx.overflow.iter().any(|(h, _)| *h == handle) && self.try_put(tx, len, &fill) {
            return;
        }
        let mut v = vec![0u8; len];
        fill(&mut v);
        tx.overflow.push_back((handle, v));
    }

    fn drain(&self, tx: &mut Tx) {
        while let Some((h, v)) = tx.overflow.pop_front() {
            if !self.try_put(tx, v.len(), &|out: &mut [u8]| out.copy_from_slice(&v)) {
                tx.overflow.push_front((h, v));
                break;
            }
        }
    }

    fn publish(&self, tx: &mut Tx) {
        self.drain(tx);
        if tx.dirty {
            tx.dirty = false;
            let _ = tx.tx.flush();
        }
    }

    /// Completes a submission the host thread finished itself.
    fn finish(&self, op: Op, handle: u32, id: u64, r: Result<(), Failure>) {
        let mut tx = self.lock();
        match r {
            Ok(()) => self.put(&mut tx, op, Status::Ok, handle, id, 0, &[]),
            Err(f) => {
                let c = Completion::error(op, f.code, handle, id, &f.reason);
                self.put(&mut tx, op, c.status, handle, id, 0, c.body);
            }
        }
        // Ordering: AcqRel on `outstanding` (here and below): a count checked against a limit; only
        // atomicity matters, stronger than needed.
        self.outstanding.fetch_sub(1, Ordering::AcqRel);
    }

    /// Serves the host until it goes away or is refused.
    pub(crate) fn run(self: Arc<Self>, mut rx: Receiver, off: &Offload) {
        let mut chans: HashMap<u32, Chan> = HashMap::new();
        let end = loop {
            let unwritten = self.lock().overflow.len();
            if unwritten >= self.limits.max_outstanding as usize {
                // More completions wait for room in the ring than the host may have
                // submissions outstanding: it does not reap them. Nothing more is taken from
                // it until it does, so that they cannot pile up.
                if self.lock().tx.check_peer().is_err() {
                    break None;
                }
                std::thread::sleep(Duration::from_millis(1));
                self.publish(&mut self.lock());
                continue;
            }
            let waiting = unwritten > 0;
            let timeout = waiting.then(|| Duration::from_millis(1));
            let mut batch = SendBatch::new();
            let first = match rx.recv(timeout) {
                Ok(rec) => self.take(rec, &mut chans, off, &mut batch),
                Err(ShmError::Timeout) => Ok(()),
                Err(ShmError::PeerGone) => break None,
                Err(e) => break Some(Refused::Shm(e)),
            };
            if let Err(why) = first {
                break Some(why);
            }
            let mut refused = None;
            for _ in 1..BATCH {
                match rx.try_recv() {
                    Ok(Some(rec)) => {
                        if let Err(why) = self.take(rec, &mut chans, off, &mut batch) {
                            refused = Some(why);
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(ShmError::PeerGone) => break,
                    Err(e) => {
                        refused = Some(Refused::Shm(e));
                        break;
                    }
                }
            }
            // The batch's corked sends go now, together.
            drop(batch);
            if refused.is_some() {
                break refused;
            }
            self.publish(&mut self.lock());
        };
        if let Some(why) = end {
            tracing::warn!("offload host {}: refused: {why}", self.id);
            let why = why.for_host();
            let c = Completion::error(Op::Refused, ErrorCode::BadRecord, 0, 0, &why);
            let mut tx = self.lock();
            tx.overflow.clear();
            let len = c.encoded_len();
            let _ = self.try_put(&mut tx, len, &|out: &mut [u8]| c.encode(out));
            self.publish(&mut tx);
        } else {
            tracing::info!("offload host {} went away", self.id);
        }
        off.router.cancel(self.id, None, false);
        drop(chans);
    }

    /// Acts on one submission record; `Err` refuses the host.
    fn take(
        self: &Arc<Self>,
        rec: offhost_shm::Record<'_>,
        chans: &mut HashMap<u32, Chan>,
        off: &Offload,
        batch: &mut SendBatch,
    ) -> Result<(), Refused> {
        let is_buf = rec.is_buf();
        let bytes = rec.bytes();
        let h = header_of(bytes).and_then(|h| SubmissionHeader::decode(&h))?;
        let body_len = bytes.len() - HEADER;
        if body_len != h.len as usize {
            return Err(RecordError::Length {
                op: h.op.name(),
                said: h.len,
                found: body_len,
            }
            .into());
        }
        if is_buf && h.op != Op::Send {
            return Err(Refused::BufferNotSend(h.op.name()));
        }
        // Ordering: AcqRel: counts the submission (see above); stronger than needed.
        self.outstanding.fetch_add(1, Ordering::AcqRel);
        if h.op == Op::Send {
            let data = if is_buf {
                let mut b = rec.take_buf().expect("a buffer record");
                let at = b.offset() + HEADER;
                b.set_range(at, body_len)?;
                Payload::Shm(b)
            } else {
                Payload::Bytes(bytes[HEADER..].to_vec())
            };
            self.on_send(h.handle, h.id, data, chans, off, batch);
            return Ok(());
        }
        // Small records: copied out once (the host may still write the ring), then checked
        // and used; those of a few hundred bytes (all but an open's long address) on the stack.
        let mut small = [0u8; SMALL_RECORD];
        let heap;
        let owned: &[u8] = if bytes.len() <= SMALL_RECORD {
            small[..bytes.len()].copy_from_slice(bytes);
            &small[..bytes.len()]
        } else {
            heap = bytes.to_vec();
            &heap
        };
        drop(rec);
        if matches!(h.op, Op::Open | Op::Close) {
            // Opening may wait for a link: nothing corked waits behind it.
            batch.release();
        }
        match Submission::parse(&h, &owned[HEADER..])? {
            Submission::Hello { .. } => Err(Refused::SecondHello),
            Submission::Open {
                handle,
                id,
                urgent,
                rate,
                burst,
                address,
            } => {
                let r = self.on_open(handle, urgent, rate, burst, address, chans, off);
                self.finish(Op::Open, handle, id, r);
                Ok(())
            }
            Submission::Recv { handle, id, .. }
                // Ordering: Acquire load of a count kept with AcqRel RMWs; stronger than needed.
                if self.outstanding.load(Ordering::Acquire)
                    > self.limits.max_outstanding as usize =>
            {
                self.finish(Op::Recv, handle, id, Err(over_outstanding(&self.limits)));
                Ok(())
            }
            Submission::Recv { handle, id, max } => {
                // No larger than a completion to this host can carry: a larger message fails
                // the receive with TooLarge and stays for another, instead of being lost.
                let max = if max == 0 {
                    self.recv_max
                } else {
                    max.min(self.recv_max)
                };
                match chans.get(&handle) {
                    None => self.finish(Op::Recv, handle, id, Err(bad_handle(handle))),
                    Some(c) => off.router.post(
                        &c.channel,
                        Posted {
                            sink: self.clone(),
                            owner: self.id,
                            handle,
                            id,
                            max,
                        },
                    ),
                }
                Ok(())
            }
            Submission::Close { handle, id } => {
                let r = match chans.remove(&handle) {
                    None => Err(bad_handle(handle)),
                    Some(_) => {
                        off.router.cancel(self.id, Some(handle), true);
                        Ok(())
                    }
                };
                self.finish(Op::Close, handle, id, r);
                Ok(())
            }
            Submission::Send { .. } => Err(Refused::SendDecodedTwice),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_open(
        &self,
        handle: u32,
        urgent: bool,
        rate: u64,
        burst: u64,
        address: &str,
        chans: &mut HashMap<u32, Chan>,
        off: &Offload,
    ) -> Result<(), Failure> {
        if chans.contains_key(&handle) {
            return Err(Failure {
                code: ErrorCode::BadHandle,
                reason: format!("handle {handle} is open already"),
            });
        }
        if chans.len() >= self.limits.max_channels as usize {
            return Err(Failure::over(
                format!("the host has {} channels open", chans.len()),
                OverLimit::new(Limit::HostChannels, self.limits.max_channels),
            ));
        }
        let a = Address::parse(address).map_err(|e| Failure {
            code: ErrorCode::BadAddress,
            reason: e.to_string(),
        })?;
        let stream = match &a.peer {
            None => None,
            Some(p) => {
                let lane = if urgent { Lane::Urgent } else { Lane::Bulk };
                let rate = (rate > 0).then_some(Rate {
                    bytes_per_sec: rate,
                    burst,
                });
                Some(off.peers.stream(p, &a.channel, lane, rate)?)
            }
        };
        chans.insert(
            handle,
            Chan {
                channel: a.channel,
                stream,
            },
        );
        Ok(())
    }

    fn on_send(
        self: &Arc<Self>,
        handle: u32,
        id: u64,
        data: Payload,
        chans: &HashMap<u32, Chan>,
        off: &Offload,
        batch: &mut SendBatch,
    ) {
        let len = data.len() as u64;
        let fail = |f: Failure| self.finish(Op::Send, handle, id, Err(f));
        // Ordering: Acquire load of a count kept with AcqRel RMWs; stronger than needed.
        if self.outstanding.load(Ordering::Acquire) > self.limits.max_outstanding as usize {
            return fail(over_outstanding(&self.limits));
        }
        let Some(c) = chans.get(&handle) else {
            return fail(bad_handle(handle));
        };
        // The hello told the host the largest message; its pool's buffers may be larger, and
        // a local channel copies the message into the engine's memory.
        if c.stream.is_none() && len > u64::from(self.limits.max_message) {
            return fail(Failure {
                code: ErrorCode::TooLarge,
                reason: format!(
                    "message of {len} bytes, {} at most",
                    self.limits.max_message
                ),
            });
        }
        // Ordering: AcqRel on the reserved bytes (and the decrements below): a count bounded by
        // `max_bytes`; only atomicity matters, stronger than needed. The bytes are reserved last,
        // once nothing else can turn the send away.
        let before = self.bytes.fetch_add(len, Ordering::AcqRel);
        if before > 0 && before + len > self.limits.max_bytes {
            self.bytes.fetch_sub(len, Ordering::AcqRel);
            return fail(Failure::over(
                format!("{} bytes of sends would be in flight", before + len),
                OverLimit::new(Limit::HostBytes, self.limits.max_bytes).asked(before + len),
            ));
        }
        match &c.stream {
            Some(s) => {
                batch.before_send(s, data.len());
                s.send(Outgoing {
                    data,
                    notify: self.clone(),
                    handle,
                    token: id,
                })
            }
            None => off.router.deliver_local(
                &c.channel,
                data.to_vec(),
                self.id,
                self.clone(),
                handle,
                id,
            ),
        }
    }
}

/// A send or receive past the host's budget of outstanding submissions.
fn over_outstanding(limits: &QueueLimits) -> Failure {
    Failure::over(
        format!("{} outstanding submissions at most", limits.max_outstanding),
        OverLimit::new(Limit::HostOutstanding, limits.max_outstanding),
    )
}

fn bad_handle(handle: u32) -> Failure {
    Failure {
        code: ErrorCode::BadHandle,
        reason: format!("handle {handle} is not open"),
    }
}

impl Notify for HostConn {
    fn done(&self, handle: u32, token: u64, len: u64, result: Result<u64, Failure>) {
        let mut tx = self.lock();
        match result {
            Ok(n) => self.put(&mut tx, Op::Send, Status::Ok, handle, token, n, &[]),
            Err(f) => {
                let c = Completion::error(Op::Send, f.code, handle, token, &f.reason);
                self.put(&mut tx, Op::Send, c.status, handle, token, 0, c.body);
            }
        }
        drop(tx);
        // Ordering: AcqRel: gives back the bytes and the count; stronger than needed.
        self.bytes.fetch_sub(len, Ordering::AcqRel);
        self.outstanding.fetch_sub(1, Ordering::AcqRel);
    }

    fn flush(&self) {
        self.publish(&mut self.lock());
    }
}

impl HostSink for HostConn {
    fn received(&self, handle: u32, id: u64, result: Result<Option<&[u8]>, Failure>) -> bool {
        let mut tx = self.lock();
        if result.as_ref().is_ok_and(|m| m.is_some()) && tx.tx.check_peer().is_err() {
            // The host is gone (its thread may not have noticed yet): leave the message to
            // the next receive rather than to a ring nobody reads.
            return false;
        }
        match result {
            Ok(Some(m)) => self.put(&mut tx, Op::Recv, Status::Ok, handle, id, m.len() as u64, m),
            Ok(None) => self.put(&mut tx, Op::Recv, Status::End, handle, id, 0, &[]),
            Err(f) => {
                let c = Completion::error(Op::Recv, f.code, handle, id, &f.reason);
                self.put(&mut tx, Op::Recv, c.status, handle, id, 0, c.body);
            }
        }
        drop(tx);
        // Ordering: AcqRel: gives back the count; stronger than needed.
        self.outstanding.fetch_sub(1, Ordering::AcqRel);
        true
    }
}
