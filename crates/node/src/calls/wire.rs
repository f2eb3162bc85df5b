//! How a call's request and answer cross a link (both sides use it): each buffer whole, as
//! parts after a `MORE` or `LAST` byte, joined again by a [`Joiner`]; and how long a thread
//! that waits for a buffer due at once spins before it sleeps (`spin_for`).

use std::time::Duration;

/// Joins the messages of one buffer that crosses a link whole (each a
/// [`MORE`](offhost_engine::MORE) or [`LAST`](offhost_engine::LAST) byte and a part, as `host-out
/// whole=true` and `engine-out` send them), up to a limit checked before anything grows.
/// Sans-IO: the caller receives the messages.
#[derive(Debug)]
pub struct Joiner {
    buf: Vec<u8>,
    /// Bytes in front of the joined data in `buf` (the `LAST` byte of a request).
    lead: usize,
    limit: usize,
    started: bool,
    what: &'static str,
    whose: &'static str,
}

impl Joiner {
    /// A joiner for an answer of at most `limit` bytes, a buffer of the caller's output
    /// free list.
    pub fn answer(limit: usize) -> Joiner {
        Joiner::new(limit, "an answer", "the output's free list")
    }

    /// A joiner for a request of at most `limit` bytes, a buffer of the serving `host-in`'s
    /// free list. The request comes out after a `LAST` byte, as `host-in whole=true` takes a
    /// buffer in one message, so that it is handed on without another copy.
    pub fn request(limit: usize) -> Joiner {
        let mut j = Joiner::new(limit, "a request", "the serving host-in's free list");
        j.buf.push(offhost_engine::LAST);
        j.lead = 1;
        j
    }

    /// A joiner for `what` (named in errors) of at most `limit` bytes, the size of a
    /// buffer of `whose` free list (or whatever else bounds it, named so in errors).
    pub fn new(limit: usize, what: &'static str, whose: &'static str) -> Joiner {
        Joiner {
            buf: Vec::new(),
            lead: 0,
            limit,
            started: false,
            what,
            whose,
        }
    }

    /// Whether a part of the buffer came.
    pub fn started(&self) -> bool {
        self.started
    }

    /// Adds one message: the whole buffer after its last part, `None` while more follow; an
    /// error that says what is wrong with a message that is not a part, or a buffer past
    /// the limit. After an error or a whole buffer, start a new joiner.
    pub fn push(&mut self, msg: &[u8]) -> Result<Option<Vec<u8>>, WireError> {
        let Some((&flag, data)) = msg.split_first() else {
            return Err(WireError::Empty);
        };
        if flag != offhost_engine::MORE && flag != offhost_engine::LAST {
            return Err(WireError::NotAPart {
                what: self.what,
                flag,
            });
        }
        let len = self
            .buf
            .len()
            .saturating_sub(self.lead)
            .saturating_add(data.len());
        if len > self.limit {
            return Err(WireError::TooLarge {
                what: self.what,
                len,
                whose: self.whose,
                limit: self.limit,
            });
        }
        self.started = true;
        self.buf.extend_from_slice(data);
        Ok((flag == offhost_engine::LAST).then(|| std::mem::take(&mut self.buf)))
    }
}

/// What is wrong with a message that should be part of a buffer crossing whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// An empty message.
    #[error("an empty message (every part starts with a MORE or LAST byte)")]
    Empty,
    /// A message whose first byte is neither `MORE` nor `LAST`.
    #[error("a part of {what} starts with {flag}, not MORE (1) or LAST (0): is it sent whole (host-out whole=true)?")]
    NotAPart {
        /// What was being joined: `an answer`, `a request`.
        what: &'static str,
        /// The first byte.
        flag: u8,
    },
    /// The parts so far are more than a buffer holds.
    #[error("{what} of more than {len} bytes does not fit a buffer of {whose} ({limit} bytes)")]
    TooLarge {
        /// What was being joined.
        what: &'static str,
        /// Bytes joined with this part (at least).
        len: usize,
        /// Whose buffers it must fit.
        whose: &'static str,
        /// Bytes of one such buffer.
        limit: usize,
    },
}

/// How long a thread waiting for a buffer that is due at once (a call's answer, its next
/// request) spins before it sleeps: waking a sleeping thread costs tens of microseconds on
/// a virtual machine, which a null call would otherwise pay at each hand-over.
pub(crate) const SPIN_WAIT: Duration = Duration::from_micros(50);

/// What `try_` gives within [`SPIN_WAIT`], looking again and again; `None` if nothing came.
/// Where the workers do not spin (one CPU, see `sched::spin_rounds`) it looks once: spinning
/// there only keeps the thread that would answer from running.
pub(crate) fn spin_for<T>(mut try_: impl FnMut() -> Option<T>) -> Option<T> {
    if !offhost_engine::workers_spin() {
        return try_();
    }
    let t0 = std::time::Instant::now();
    loop {
        if let Some(x) = try_() {
            return Some(x);
        }
        if t0.elapsed() >= SPIN_WAIT {
            return None;
        }
        for _ in 0..32 {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use offhost_engine::{LAST, MORE};

    #[test]
    fn parts_join_into_one_buffer_up_to_the_limit() {
        let mut j = Joiner::answer(5);
        assert!(!j.started());
        assert_eq!(j.push(&[MORE, 1, 2]), Ok(None));
        assert!(j.started());
        assert_eq!(j.push(&[MORE]), Ok(None));
        assert_eq!(j.push(&[LAST, 3, 4, 5]), Ok(Some(vec![1, 2, 3, 4, 5])));
        // An empty buffer is one LAST byte.
        assert_eq!(Joiner::answer(0).push(&[LAST]), Ok(Some(Vec::new())));
        let mut j = Joiner::answer(5);
        j.push(&[MORE, 1, 2, 3]).unwrap();
        let e = j.push(&[LAST, 4, 5, 6]).unwrap_err();
        assert!(
            matches!(
                e,
                WireError::TooLarge {
                    len: 6,
                    limit: 5,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "an answer of more than 6 bytes does not fit a buffer of the output's free list (5 bytes)"
        );
        let e = Joiner::request(5).push(&[]).unwrap_err();
        assert_eq!(e, WireError::Empty);
        let e = Joiner::request(5).push(&[2, 0]).unwrap_err();
        assert!(matches!(e, WireError::NotAPart { flag: 2, .. }), "{e}");
    }
}
