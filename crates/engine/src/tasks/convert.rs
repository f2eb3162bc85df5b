//! A driver for tasks that turn each input stream into a differently sized output stream
//! (mixing, rate conversion, compression), plus a helper for streams of fixed-size frames.

use crate::buffer::BufMut;
use crate::queue::Get;
use crate::task::{Context, Status, Task, TaskError};

/// A stream conversion: bytes in, bytes out. Used through [`converter`].
pub trait Convert: Send + 'static {
    /// Converts `input` (any length; keep partial frames for the next call), appending the
    /// result to `out`.
    fn convert(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), TaskError>;
    /// Appends whatever is left at end of stream.
    fn flush(&mut self, _out: &mut Vec<u8>) -> Result<(), TaskError> {
        Ok(())
    }
}

/// Splits a byte stream into whole frames of `frame` bytes, keeping a partial frame between
/// calls.
#[derive(Debug, Clone)]
pub struct FrameCarry {
    frame: usize,
    carry: Vec<u8>,
}

impl FrameCarry {
    /// Frames of `frame` bytes (at least 1).
    pub fn new(frame: usize) -> FrameCarry {
        FrameCarry {
            frame: frame.max(1),
            carry: Vec::with_capacity(frame),
        }
    }

    /// Calls `f` with runs of whole frames from `carry + data`; keeps the remainder.
    pub fn feed(&mut self, mut data: &[u8], mut f: impl FnMut(&[u8])) {
        if !self.carry.is_empty() {
            let need = self.frame - self.carry.len();
            let take = need.min(data.len());
            self.carry.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.carry.len() < self.frame {
                return;
            }
            f(&self.carry);
            self.carry.clear();
        }
        let whole = data.len() / self.frame * self.frame;
        if whole > 0 {
            f(&data[..whole]);
        }
        self.carry.extend_from_slice(&data[whole..]);
    }

    /// Bytes of a partial frame held back.
    pub fn pending(&self) -> usize {
        self.carry.len()
    }

    /// At the end of the stream: an error if a partial frame is held back, which `task` would
    /// otherwise drop without a word.
    pub fn finish(&self, task: &str) -> Result<(), TaskError> {
        match self.carry.len() {
            0 => Ok(()),
            n => Err(TaskError::BadInput(format!(
                "{task}: the stream ended with {n} bytes that are not a whole frame of {} bytes",
                self.frame
            ))),
        }
    }
}

struct Converting<C> {
    conv: C,
    staged: Vec<u8>,
    staged_off: usize,
    out: Option<BufMut>,
    ended: bool,
}

/// A task (one input, one allocating output) that runs `conv` over the stream. Output is
/// packed into whole buffers of the output pool; a partly filled buffer is sent when the
/// input runs dry, so latency stays low.
pub fn converter<C: Convert>(conv: C) -> Box<dyn Task> {
    Box::new(Converting {
        conv,
        staged: Vec::new(),
        staged_off: 0,
        out: None,
        ended: false,
    })
}

impl<C: Convert> Converting<C> {
    fn flush_out(&mut self, cx: &mut Context<'_>) {
        if let Some(b) = self.out.take() {
            if !b.is_empty() {
                cx.put(0, b.freeze());
            }
        }
    }
}

impl<C: Convert> Task for Converting<C> {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        loop {
            // Move staged output into pool buffers.
            while self.staged_off < self.staged.len() {
                if self.out.is_none() {
                    match cx.alloc(0) {
                        Some(b) => self.out = Some(b),
                        None => return Ok(Status::Blocked),
                    }
                }
                let b = self.out.as_mut().expect("allocated above");
                let n = b.remaining().min(self.staged.len() - self.staged_off);
                b.unfilled()[..n]
                    .copy_from_slice(&self.staged[self.staged_off..self.staged_off + n]);
                b.commit(n);
                self.staged_off += n;
                if b.remaining() == 0 {
                    self.flush_out(cx);
                }
            }
            self.staged.clear();
            self.staged_off = 0;
            if self.ended {
                self.flush_out(cx);
                return Ok(Status::Done);
            }
            match cx.get(0) {
                Get::Buf(b) => self.conv.convert(&b, &mut self.staged)?,
                Get::Empty => {
                    if !cx.batch_used() {
                        self.flush_out(cx);
                    }
                    return Ok(Status::Blocked);
                }
                Get::Closed => {
                    self.conv.flush(&mut self.staged)?;
                    self.ended = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_whole_across_calls() {
        let mut fc = FrameCarry::new(4);
        let mut seen = Vec::new();
        for chunk in [&[1u8, 2, 3][..], &[4, 5, 6, 7, 8, 9], &[10, 11, 12]] {
            fc.feed(chunk, |f| {
                assert_eq!(f.len() % 4, 0);
                seen.extend_from_slice(f);
            });
        }
        assert_eq!(seen, (1..=12).collect::<Vec<u8>>());
        assert_eq!(fc.pending(), 0);
        assert!(fc.finish("t").is_ok());
    }

    #[test]
    fn a_partial_frame_at_the_end_is_an_error_not_dropped() {
        let mut fc = FrameCarry::new(4);
        fc.feed(&[1, 2, 3, 4, 5], |_| {});
        let e = fc.finish("mix").unwrap_err().to_string();
        assert!(
            e.contains("1 bytes that are not a whole frame of 4 bytes"),
            "{e}"
        );
    }
}
