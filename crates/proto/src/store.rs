//! The receive side of one channel: complete messages waiting for the application, and the
//! message being reassembled, in one contiguous byte buffer.
//!
//! Packets are appended to the buffer as they arrive; a message's bytes are contiguous, so the
//! application reads it in place ([`Store::pop`]) and nothing is allocated per message. The
//! buffer is reset when it runs empty and compacted when its consumed prefix is large, so in
//! steady state it neither grows nor copies more than once per message; its size is bounded by
//! the channel's credit (the peer can never have more unconsumed bytes in flight).

use std::collections::VecDeque;

/// A complete message in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    /// `len` bytes in the buffer, right after the previous message's.
    Bytes(usize),
    /// A message carried outside the byte stream.
    Loan { len: u64, token: u64 },
}

impl Entry {
    /// The credit the message was charged.
    pub(crate) fn cost(&self) -> u64 {
        match *self {
            Entry::Bytes(len) => crate::channel::cost(len),
            Entry::Loan { len, .. } => len.max(1),
        }
    }
}

/// Messages of one channel in arrival order.
#[derive(Debug, Default)]
pub(crate) struct Store {
    /// Bytes of the waiting messages, then of the partial one, from `head`.
    buf: Vec<u8>,
    /// Start of the first waiting message's bytes.
    head: usize,
    /// Bytes of the message being reassembled (the tail of `buf`).
    partial: usize,
    entries: VecDeque<Entry>,
}

/// Compaction moves the live bytes to the front once the consumed prefix is at least this big
/// and at least half the buffer.
const COMPACT_AT: usize = 64 * 1024;

impl Store {
    /// True when no complete message waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes of the message being reassembled.
    pub(crate) fn partial_len(&self) -> usize {
        self.partial
    }

    /// Drops every waiting message and the partial one.
    pub(crate) fn clear(&mut self) {
        self.buf.clear();
        self.head = 0;
        self.partial = 0;
        self.entries.clear();
    }

    /// Drops only the message being reassembled.
    pub(crate) fn clear_partial(&mut self) {
        let keep = self.buf.len() - self.partial;
        self.buf.truncate(keep);
        self.partial = 0;
    }

    fn make_room(&mut self) {
        if self.head == 0 {
            return;
        }
        if self.head == self.buf.len() {
            self.buf.clear();
            self.head = 0;
        } else if self.head >= COMPACT_AT && 2 * self.head >= self.buf.len() {
            self.buf.drain(..self.head);
            self.head = 0;
        }
    }

    /// Appends a packet; `last` completes the message.
    pub(crate) fn push_packet(&mut self, payload: &[u8], last: bool) {
        self.make_room();
        self.buf.extend_from_slice(payload);
        self.partial += payload.len();
        if last {
            self.entries.push_back(Entry::Bytes(self.partial));
            self.partial = 0;
        }
    }

    /// Appends a message carried outside the byte stream.
    pub(crate) fn push_loan(&mut self, len: u64, token: u64) {
        self.entries.push_back(Entry::Loan { len, token });
    }

    /// The next message's entry, without taking it.
    pub(crate) fn front(&self) -> Option<Entry> {
        self.entries.front().copied()
    }

    /// Takes the next message: its entry and, for bytes, where they start (see
    /// [`bytes_at`](Self::bytes_at); they stay in place until the next change to the store).
    pub(crate) fn pop_at(&mut self) -> Option<(Entry, usize)> {
        let e = self.entries.pop_front()?;
        let at = self.head;
        if let Entry::Bytes(len) = e {
            self.head += len;
        }
        Some((e, at))
    }

    /// The bytes of a message taken by [`pop_at`](Self::pop_at).
    pub(crate) fn bytes_at(&self, at: usize, len: usize) -> &[u8] {
        &self.buf[at..at + len]
    }

    #[cfg(test)]
    fn pop(&mut self) -> Option<(Entry, &[u8])> {
        let (e, at) = self.pop_at()?;
        let len = if let Entry::Bytes(len) = e { len } else { 0 };
        Some((e, self.bytes_at(at, len)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_come_out_whole_and_in_order_across_resets_and_compaction() {
        let mut s = Store::default();
        let mut next_in = 0u32;
        let mut next_out = 0u32;
        // Mixed sizes, multi-packet messages, loans, and reads that lag behind the writes by a
        // varying amount, so the buffer is reset, compacted and grown.
        for round in 0..2000u32 {
            let len = (round * 7919 % 3000) as usize;
            let msg: Vec<u8> = (0..len).map(|i| (i as u32 ^ next_in) as u8).collect();
            if round % 13 == 0 {
                s.push_loan(len as u64, u64::from(next_in));
            } else if msg.is_empty() {
                s.push_packet(&[], true);
            } else {
                let mut parts = msg.chunks(512).peekable();
                while let Some(p) = parts.next() {
                    s.push_packet(p, parts.peek().is_none());
                }
            }
            next_in += 1;
            let lag = round % 5;
            while next_out + lag < next_in {
                let (e, bytes) = s.pop().expect("a message");
                let n = next_out;
                let len = (n * 7919 % 3000) as usize;
                if n % 13 == 0 {
                    assert_eq!(
                        e,
                        Entry::Loan {
                            len: len as u64,
                            token: u64::from(n)
                        }
                    );
                } else {
                    let want: Vec<u8> = (0..len).map(|i| (i as u32 ^ n) as u8).collect();
                    assert_eq!(e, Entry::Bytes(len));
                    assert_eq!(bytes, &want[..]);
                }
                next_out += 1;
            }
        }
        assert!(s.buf.capacity() <= 2 * COMPACT_AT, "{}", s.buf.capacity());
    }

    #[test]
    fn a_partial_message_survives_reads_of_complete_ones_and_can_be_dropped() {
        let mut s = Store::default();
        s.push_packet(b"one", true);
        s.push_packet(b"tw", false);
        assert_eq!(s.pop().unwrap().1, b"one");
        assert!(s.pop().is_none());
        assert_eq!(s.partial_len(), 2);
        s.push_packet(b"o", true);
        assert_eq!(s.pop().unwrap().1, b"two");
        s.push_packet(b"xx", false);
        s.clear_partial();
        s.push_packet(b"three", true);
        assert_eq!(s.pop().unwrap().1, b"three");
    }
}
