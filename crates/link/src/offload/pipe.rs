//! Byte streams over a queue: what `offhost send --via` and `offhost recv --via` do.
//!
//! A stream is a sequence of messages ended by an empty one (the end mark): [`send_all`] cuts
//! its input into messages written straight into loans (pool buffers off-host), keeps many
//! in flight, and waits for every one to be delivered; [`recv_all`] keeps receives posted and
//! writes the messages out in order until the end mark.

use std::io::{Read, Write};
use std::time::Duration;

use super::{ChannelId, HostQueue, Outcome, QueueError, RecvSize};

/// Receives posted at once by [`recv_all`].
const POSTED: usize = 16;

fn failed(c: super::Completion) -> Result<(), QueueError> {
    match c.outcome {
        Outcome::Failed(f) => Err(QueueError::Failed(f)),
        _ => Ok(()),
    }
}

/// Sends everything `input` gives on `ch` in messages of at most `chunk` bytes (and at most
/// the engine's largest message), then the end mark; returns once every message is delivered,
/// with the bytes sent. The first failed message is the error.
pub fn send_all(
    q: &mut HostQueue,
    ch: ChannelId,
    input: &mut dyn Read,
    chunk: usize,
) -> Result<u64, QueueError> {
    let chunk = chunk.clamp(1, q.limits().max_message as usize);
    let mut total = 0u64;
    let mut tag = 0u64;
    let limits = q.limits();
    loop {
        // Room first (so the push below cannot be refused for the budgets).
        while q.outstanding() + 1 >= limits.max_outstanding as usize
            || (q.bytes_in_flight() > 0 && q.bytes_in_flight() + chunk as u64 > limits.max_bytes)
        {
            q.submit()?;
            q.wait_batch(None)?;
            while let Some(c) = q.pop() {
                failed(c)?;
            }
        }
        let mut loan = q.loan(chunk)?;
        let mut n = 0;
        while n < chunk {
            match input.read(&mut loan[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(QueueError::Failed(crate::peer::Failure::new(
                        super::ErrorCode::Closed,
                        format!("read input: {e}"),
                    )))
                }
            }
        }
        loan.set_len(n)?;
        q.push_send_loan(ch, loan, tag)?;
        tag += 1;
        total += n as u64;
        q.submit()?;
        while let Some(c) = q.pop() {
            failed(c)?;
        }
        if n == 0 {
            break;
        }
    }
    while q.outstanding() > 0 {
        q.wait_batch(None)?;
        while let Some(c) = q.pop() {
            failed(c)?;
        }
    }
    Ok(total)
}

/// Writes the messages of `ch` to `out` until the end mark (an empty message); returns the
/// bytes written. `idle` bounds the wait for each message.
pub fn recv_all(
    q: &mut HostQueue,
    ch: ChannelId,
    out: &mut dyn Write,
    idle: Option<Duration>,
) -> Result<u64, QueueError> {
    let mut total = 0u64;
    let mut next_tag = 0u64;
    let mut want = 0u64;
    let mut early: std::collections::BTreeMap<u64, super::Data> = Default::default();
    for _ in 0..POSTED {
        q.push_recv(ch, RecvSize::Any, next_tag)?;
        next_tag += 1;
    }
    q.submit()?;
    loop {
        if q.wait(1, idle)? == 0 {
            return Err(QueueError::Timeout);
        }
        while let Some(c) = q.pop() {
            match c.outcome {
                Outcome::Ok(_) => {
                    early.insert(c.tag, c.data);
                }
                Outcome::End => return Ok(total),
                Outcome::Failed(f) => return Err(QueueError::Failed(f)),
            }
        }
        // Receives complete in the order they were posted; write in tag order anyway.
        while let Some(d) = early.remove(&want) {
            want += 1;
            if d.is_empty() {
                let _ = out.flush();
                return Ok(total);
            }
            out.write_all(&d).map_err(|e| {
                QueueError::Failed(crate::peer::Failure::new(
                    super::ErrorCode::Closed,
                    format!("write output: {e}"),
                ))
            })?;
            total += d.len() as u64;
            q.push_recv(ch, RecvSize::Any, next_tag)?;
            next_tag += 1;
        }
        q.submit()?;
    }
}
