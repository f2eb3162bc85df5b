//! The receive side of one channel: complete messages waiting for the application, and the
//! message being reassembled.
//!
//! A message of one packet is appended to one contiguous byte buffer shared by such messages,
//! and read in place ([`Store::pop_at`]): nothing is allocated per message. The buffer is reset
//! when it runs empty and compacted when its consumed prefix is large, so in steady state it
//! neither grows nor copies more than once per message.
//!
//! A message of several packets is reassembled in a buffer of its own, so that a receiver
//! with a buffer to give in exchange takes it whole ([`Store::pop_into`] swaps the two
//! buffers) instead of copying it out: large messages are copied once on their way in and
//! never on their way out. The buffers given in exchange are kept for the next messages (up to
//! a limit of spare capacity, one receive window), and each is reserved at the length of the
//! last such message (up to 1 MiB), so a stream of large messages neither allocates nor grows
//! buffers.
//!
//! A receiver may ask for its messages at an offset in the buffer it gets
//! ([`Store::pop_into`]'s `front`): the bytes before it are zero, room for a header of its own
//! (the engine's pool buffers keep headroom in front of their data, and so take a message
//! received this way without copying it). The store reassembles the next messages at the
//! offset the receiver asked for last; one reassembled at another offset is copied once.
//!
//! The bytes of all complete and partial messages are bounded by the channel's credit (the
//! peer can never have more unconsumed bytes in flight), the spares by the limit.

use std::collections::VecDeque;

/// A complete message in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    /// `len` bytes in the shared buffer, right after the previous such message's.
    Bytes(usize),
    /// `len` bytes in a buffer of its own (a message of several packets).
    Own(usize),
    /// A message carried outside the byte stream.
    Loan { len: u64, token: u64 },
}

impl Entry {
    /// The credit the message was charged.
    pub(crate) fn cost(&self) -> u64 {
        match *self {
            Entry::Bytes(len) | Entry::Own(len) => crate::channel::cost(len),
            Entry::Loan { len, .. } => len.max(1),
        }
    }
}

/// Messages of one channel in arrival order.
#[derive(Debug, Default)]
pub(crate) struct Store {
    /// Bytes of the waiting one-packet messages, from `head`.
    buf: Vec<u8>,
    /// Start of the first waiting message's bytes in `buf`.
    head: usize,
    /// Bytes of the message being reassembled (in `assembling`).
    partial: usize,
    /// The message being reassembled.
    assembling: Vec<u8>,
    entries: VecDeque<Entry>,
    /// The buffers of the waiting messages of several packets, in order.
    own: VecDeque<Vec<u8>>,
    /// The buffer of the message [`pop_at`](Self::pop_at) took last, if it had one of its own.
    lent: Vec<u8>,
    /// Empty buffers for the next messages of several packets.
    spare: Vec<Vec<u8>>,
    /// Capacity of `spare`, and the most it may hold.
    spare_bytes: usize,
    spare_limit: usize,
    /// Length of the last message of several packets: what the next one's buffer reserves.
    last_own: usize,
    /// Zero bytes in front of each message reassembled from now on: the offset the receiver
    /// asked for last.
    front: usize,
    /// Capacity of the buffer the receiver offered last in exchange ([`Store::pop_into`]):
    /// what a buffer for the next message of several packets holds at least, so that the
    /// buffers handed out are alike (an engine's `host-in` takes into its pool, without
    /// copying, only buffers with room for a whole pool buffer).
    given: usize,
}

/// The most a buffer for a message of several packets reserves ahead (see `Store::fresh`).
const RESERVE_MAX: usize = 1 << 20;

/// Compaction moves the live bytes to the front once the consumed prefix is at least this big
/// and at least half the buffer.
const COMPACT_AT: usize = 64 * 1024;

impl Store {
    /// An empty store that keeps at most `spare_limit` bytes of spare buffers.
    pub(crate) fn new(spare_limit: usize) -> Store {
        Store {
            spare_limit,
            ..Store::default()
        }
    }

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
        self.clear_partial();
        self.entries.clear();
        while let Some(v) = self.own.pop_front() {
            self.recycle(v);
        }
    }

    /// Drops only the message being reassembled.
    pub(crate) fn clear_partial(&mut self) {
        let v = std::mem::take(&mut self.assembling);
        self.recycle(v);
        self.partial = 0;
    }

    /// Keeps an emptied buffer for a later message, if the spare limit allows.
    fn recycle(&mut self, mut v: Vec<u8>) {
        let cap = v.capacity();
        if cap > 0 && self.spare_bytes + cap <= self.spare_limit {
            v.clear();
            self.spare_bytes += cap;
            self.spare.push(v);
        }
    }

    /// A buffer for a new message of several packets, holding the zero bytes in front of it,
    /// with room for one as long as the last (up to [`RESERVE_MAX`]: past it the buffer grows
    /// as the message does, which for large allocations moves pages instead of copying bytes,
    /// and a long message once does not make every later one reserve as much).
    fn fresh(&mut self) -> Vec<u8> {
        let mut v = match self.spare.pop() {
            Some(v) => {
                self.spare_bytes -= v.capacity();
                v
            }
            None => Vec::new(),
        };
        let want = self.front + self.last_own.min(RESERVE_MAX);
        v.reserve(want.max(self.given.min(self.front + RESERVE_MAX)));
        v.resize(self.front, 0);
        v
    }

    #[inline(always)]
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
    #[inline(always)]
    pub(crate) fn push_packet(&mut self, payload: &[u8], last: bool) {
        if self.partial == 0 && last {
            self.make_room();
            self.buf.extend_from_slice(payload);
            self.entries.push_back(Entry::Bytes(payload.len()));
            return;
        }
        self.push_part(payload, last);
    }

    /// Appends a packet of a message of several packets (or a piece of a packet).
    #[inline(never)]
    fn push_part(&mut self, payload: &[u8], last: bool) {
        if self.partial == 0 {
            self.assembling = self.fresh();
        }
        self.assembling.extend_from_slice(payload);
        self.partial += payload.len();
        if last {
            self.entries.push_back(Entry::Own(self.partial));
            self.own.push_back(std::mem::take(&mut self.assembling));
            self.last_own = self.partial;
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
    /// [`bytes_of`](Self::bytes_of); they stay in place until the next change to the store).
    pub(crate) fn pop_at(&mut self) -> Option<(Entry, usize)> {
        let e = self.entries.pop_front()?;
        let at = self.head;
        match e {
            Entry::Bytes(len) => self.head += len,
            Entry::Own(_) => {
                let v = self.own.pop_front().expect("an own entry has its buffer");
                let old = std::mem::replace(&mut self.lent, v);
                self.recycle(old);
            }
            Entry::Loan { .. } => {}
        }
        Some((e, at))
    }

    /// The bytes of a message taken by [`pop_at`](Self::pop_at) (none for a loan).
    pub(crate) fn bytes_of(&self, e: Entry, at: usize) -> &[u8] {
        match e {
            Entry::Bytes(len) => &self.buf[at..at + len],
            Entry::Own(len) => &self.lent[self.lent.len() - len..],
            Entry::Loan { .. } => &[],
        }
    }

    /// Takes the next message into `buf`, replacing its contents, at `buf[front..]` with
    /// `front` zero bytes before it: a message of several packets by exchanging buffers
    /// (`buf`'s old one is kept for a later message) when it was reassembled at this `front`,
    /// one of one packet (or reassembled at another `front`) by copying. Messages reassembled
    /// from now on are put at this `front`. A loan's entry is returned with `buf` untouched.
    pub(crate) fn pop_into(&mut self, buf: &mut Vec<u8>, front: usize) -> Option<Entry> {
        self.front = front;
        self.given = buf.capacity();
        let e = self.entries.front().copied()?;
        match e {
            Entry::Own(len) => {
                self.entries.pop_front();
                let v = self.own.pop_front().expect("an own entry has its buffer");
                if v.len() - len == front {
                    let old = std::mem::replace(buf, v);
                    self.recycle(old);
                } else {
                    put_at(buf, front, &v[v.len() - len..]);
                    self.recycle(v);
                }
            }
            _ => {
                let (e, at) = self.pop_at().expect("the front entry is there");
                if let Entry::Bytes(len) = e {
                    put_at(buf, front, &self.buf[at..at + len]);
                }
            }
        }
        Some(e)
    }

    #[cfg(test)]
    fn pop(&mut self) -> Option<(Entry, &[u8])> {
        let (e, at) = self.pop_at()?;
        Some((e, self.bytes_of(e, at)))
    }
}

/// Replaces `buf`'s contents with `front` zero bytes and then `msg`.
pub fn put_at(buf: &mut Vec<u8>, front: usize, msg: &[u8]) {
    buf.clear();
    buf.resize(front, 0);
    buf.extend_from_slice(msg);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pushes `msg` as packets of `packet` bytes, the last one completing it (an empty message
    /// as one empty packet).
    fn push_in_packets(s: &mut Store, msg: &[u8], packet: usize) {
        if msg.is_empty() {
            return s.push_packet(&[], true);
        }
        let mut parts = msg.chunks(packet).peekable();
        while let Some(p) = parts.next() {
            s.push_packet(p, parts.peek().is_none());
        }
    }

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
            } else {
                push_in_packets(&mut s, &msg, 512);
            }
            next_in += 1;
            let lag = round % 5;
            while next_out + lag < next_in {
                let (e, bytes) = s.pop().expect("a message");
                let n = next_out;
                let len = (n * 7919 % 3000) as usize;
                if n.is_multiple_of(13) {
                    assert_eq!(
                        e,
                        Entry::Loan {
                            len: len as u64,
                            token: u64::from(n)
                        }
                    );
                } else {
                    let want: Vec<u8> = (0..len).map(|i| (i as u32 ^ n) as u8).collect();
                    // Up to one packet: in the shared buffer; more: in a buffer of its own.
                    match len {
                        0..=512 => assert_eq!(e, Entry::Bytes(len)),
                        _ => assert_eq!(e, Entry::Own(len)),
                    }
                    assert_eq!(bytes, &want[..]);
                }
                next_out += 1;
            }
        }
        assert!(s.buf.capacity() <= 2 * COMPACT_AT, "{}", s.buf.capacity());
        assert_eq!(s.spare_bytes, 0, "no spares without a limit for them");
    }

    #[test]
    fn a_message_of_several_packets_is_swapped_out_and_its_exchange_buffer_reused() {
        let mut s = Store::new(1 << 20);
        let msg: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        push_in_packets(&mut s, &msg, 1024);
        let given = Vec::with_capacity(4096);
        let given_at = given.as_ptr();
        let mut buf = given;
        assert_eq!(s.pop_into(&mut buf, 0), Some(Entry::Own(3000)));
        assert_eq!(buf, msg);
        // The buffer given in exchange holds the next message of several packets.
        assert_eq!(s.spare_bytes, 4096);
        s.push_packet(&msg[..1024], false);
        s.push_packet(&msg[1024..2000], true);
        let mut next = Vec::new();
        assert_eq!(s.pop_into(&mut next, 0), Some(Entry::Own(2000)));
        assert_eq!(next.as_ptr(), given_at);
        assert_eq!(next, msg[..2000]);
        // One packet: copied into the caller's buffer, which stays its own.
        s.push_packet(b"one", true);
        let at = next.as_ptr();
        assert_eq!(s.pop_into(&mut next, 0), Some(Entry::Bytes(3)));
        assert_eq!((next.as_slice(), next.as_ptr()), (&b"one"[..], at));
        // A loan leaves the buffer alone.
        s.push_loan(9, 7);
        assert_eq!(
            s.pop_into(&mut next, 0),
            Some(Entry::Loan { len: 9, token: 7 })
        );
        assert_eq!(next, b"one");
    }

    #[test]
    fn messages_come_at_the_front_asked_for_and_are_exchanged_once_reassembled_there() {
        let mut s = Store::new(1 << 20);
        let msg: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8 + 1).collect();
        // Reassembled before any front was asked for: copied to the one asked for now.
        push_in_packets(&mut s, &msg, 1024);
        let given = Vec::with_capacity(4096);
        let given_at = given.as_ptr();
        let mut buf = given;
        assert_eq!(s.pop_into(&mut buf, 10), Some(Entry::Own(3000)));
        assert_eq!((buf.as_ptr(), buf.len()), (given_at, 3010));
        assert!(buf[..10].iter().all(|&b| b == 0) && buf[10..] == msg[..]);
        // The next is reassembled at that front, so it is exchanged for the caller's buffer,
        // which the one after then comes in.
        push_in_packets(&mut s, &msg[..2000], 1024);
        let second = Vec::with_capacity(4096);
        let second_at = second.as_ptr();
        let mut next = second;
        assert_eq!(s.pop_into(&mut next, 10), Some(Entry::Own(2000)));
        assert_ne!(next.as_ptr(), second_at);
        assert!(next[..10].iter().all(|&b| b == 0) && next[10..] == msg[..2000]);
        push_in_packets(&mut s, &msg[..2500], 1024);
        let mut third = Vec::new();
        assert_eq!(s.pop_into(&mut third, 10), Some(Entry::Own(2500)));
        assert_eq!(third.as_ptr(), second_at);
        assert!(third[..10].iter().all(|&b| b == 0) && third[10..] == msg[..2500]);
        // Lent in place, a message skips its front.
        push_in_packets(&mut s, &msg[..1500], 1024);
        let (e, at) = s.pop_at().unwrap();
        assert_eq!(s.bytes_of(e, at), &msg[..1500]);
        // One packet: copied behind the front.
        s.push_packet(b"one", true);
        assert_eq!(s.pop_into(&mut third, 10), Some(Entry::Bytes(3)));
        assert_eq!(&third[..], b"\0\0\0\0\0\0\0\0\0\0one");
        // Asked at another front again: reassembled at 10, copied to 0.
        push_in_packets(&mut s, &msg, 1024);
        assert_eq!(s.pop_into(&mut third, 0), Some(Entry::Own(3000)));
        assert_eq!(third, msg);
    }

    /// Buffers for messages of several packets have at least the room of those the receiver
    /// gives in exchange, so every buffer it gets back is alike (none with only the last
    /// message's length).
    #[test]
    fn buffers_handed_out_have_the_room_of_those_given_in_exchange() {
        let mut s = Store::new(0); // no spares: every message gets a new buffer
        let msg = vec![7u8; 3000];
        for round in 0..3 {
            push_in_packets(&mut s, &msg, 512);
            let mut buf = Vec::with_capacity(10_000);
            assert!(s.pop_into(&mut buf, 16).is_some());
            assert_eq!(&buf[16..], &msg[..]);
            if round > 0 {
                assert!(
                    buf.capacity() >= 10_000,
                    "round {round}: {}",
                    buf.capacity()
                );
            }
        }
    }

    #[test]
    fn spare_buffers_stay_within_their_limit() {
        let mut s = Store::new(10_000);
        for _ in 0..10 {
            s.push_packet(&[1; 600], false);
            s.push_packet(&[2; 600], true);
        }
        for _ in 0..10 {
            let mut buf = Vec::with_capacity(4000);
            assert_eq!(s.pop_into(&mut buf, 0), Some(Entry::Own(1200)));
        }
        assert!(s.spare_bytes <= 10_000, "{}", s.spare_bytes);
        assert_eq!(s.spare.len(), 2);
        s.push_packet(&[3; 600], false);
        s.clear();
        assert_eq!(s.partial_len(), 0);
        assert!(s.spare_bytes <= 10_000);
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
