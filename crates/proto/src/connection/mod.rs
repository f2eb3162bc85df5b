//! The connection state machine: one per link end, fed bytes, producing bytes and events.
//!
//! [`Connection`] is one type whose methods are grouped by what they do, a file each:
//!
//! | file | owns |
//! |---|---|
//! | `mod.rs` | the state, opening and closing channels, sending, receiving, credit, [`Event`]s |
//! | `input.rs` | feeding arrived bytes: frame parsing, dispatch, credit and error handling |
//! | `in_place.rs` | sending with frames written in place into a transport's buffer ([`SendPermit`], [`DataFrames`]) |
//! | `batch.rs` | receiving many messages of one channel in one call ([`BatchEnd`]) |
//!
//! Per-channel state lives in `crate::channel`, buffered messages in `crate::store`.

mod batch;
mod in_place;
mod input;

pub use batch::BatchEnd;
pub use in_place::{DataFrames, SendPermit};

use std::collections::{BTreeMap, VecDeque};

use crate::channel::{cost, Chan, Opener};
use crate::error::{CallError, ProtoError};
use crate::frame::Frame;
use crate::options::{ChannelOptions, Config, SendMode, Side};
use crate::store::{Entry, Store};

/// Error code sent in a link `error` frame when the peer broke the protocol.
pub const CODE_PROTOCOL: u32 = 1;
/// Error code sent in a channel `error` frame when the channel is refused.
pub const CODE_REFUSED: u32 = 2;
/// Link credit each side holds before the peer's first grant arrives, so the first messages
/// need no round trip.
pub const INITIAL_LINK_CREDIT: u64 = 64 * 1024;

/// Something the application should know about.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The peer opened a channel.
    Opened {
        /// Its id.
        channel: u32,
        /// Its name.
        name: String,
        /// Its options.
        options: ChannelOptions,
    },
    /// The peer refused or reset a channel.
    Reset {
        /// Its id.
        channel: u32,
    },
    /// A reply to one of our pings.
    Pong {
        /// The token of the ping.
        token: u64,
    },
}

/// What [`Connection::recv`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// A complete message.
    Message(Vec<u8>),
    /// A message carried outside the byte stream: `len` bytes in the buffer the transport
    /// knows by `token`.
    Loan {
        /// Message length.
        len: u64,
        /// The token the sender gave [`Connection::send_loan`].
        token: u64,
    },
    /// Nothing yet.
    Empty,
    /// The peer closed its sending direction and every message has been taken.
    End,
}

/// What [`Connection::recv_into`] found; a message's bytes are in the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Landed {
    /// A complete message, now in the buffer.
    Message,
    /// A message carried outside the byte stream (the buffer is untouched): `len` bytes in
    /// the buffer the transport knows by `token`.
    Loan {
        /// Message length.
        len: u64,
        /// The token the sender gave [`Connection::send_loan`].
        token: u64,
    },
    /// Nothing yet.
    Empty,
    /// The peer closed its sending direction and every message has been taken.
    End,
}

/// What [`Connection::take_next`] found.
enum Next<T> {
    /// A message: its entry, what else the store's pop gave, and whether its channel is
    /// finished with it.
    Took(Entry, T, bool),
    /// Nothing yet.
    Empty,
    /// The peer closed its sending direction and every message has been taken.
    End,
}

/// What [`Connection::recv_ref`] found: [`Received`] with the message's bytes borrowed from
/// the connection (no copy, no allocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incoming<'a> {
    /// A complete message, valid until the next call on the connection.
    Message(&'a [u8]),
    /// A message carried outside the byte stream: `len` bytes in the buffer the transport
    /// knows by `token`.
    Loan {
        /// Message length.
        len: u64,
        /// The token the sender gave [`Connection::send_loan`].
        token: u64,
    },
    /// Nothing yet.
    Empty,
    /// The peer closed its sending direction and every message has been taken.
    End,
}

impl Incoming<'_> {
    /// The owned form (copies a message's bytes).
    pub fn to_owned(self) -> Received {
        match self {
            Incoming::Message(m) => Received::Message(m.to_vec()),
            Incoming::Loan { len, token } => Received::Loan { len, token },
            Incoming::Empty => Received::Empty,
            Incoming::End => Received::End,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum State {
    Open,
    /// We said goodbye; nothing more may be sent.
    Closed,
    /// The peer said goodbye.
    PeerClosed,
    /// The link failed.
    Failed(ProtoError),
}

#[derive(Debug, Default)]
pub(crate) struct LinkCredit {
    pub(crate) send_limit: u64,
    pub(crate) sent: u64,
    pub(crate) blocked_at: Option<u64>,
    pub(crate) granted: u64,
    /// The peer said it is blocked at our last grant (see [`Chan`]'s field of that name).
    pub(crate) peer_blocked: bool,
    pub(crate) received: u64,
    pub(crate) consumed: u64,
}

/// A send on `channel` (0: the link) waits for credit past `limit`: tells the peer once per
/// limit (a `blocked` frame) and returns the error for the call.
#[cold]
fn blocked(at: &mut Option<u64>, channel: u32, limit: u64, out: &mut Vec<u8>) -> CallError {
    if *at != Some(limit) {
        *at = Some(limit);
        Frame::Blocked { channel, limit }.encode(out);
    }
    CallError::Blocked
}

/// Counts `charge` bytes received on `channel` against the channel's and the link's credit;
/// a peer that sends past either limit has overrun it (nothing is counted then).
pub(crate) fn receive_within_credit(
    ch: &mut Chan,
    link: &mut LinkCredit,
    channel: u32,
    charge: u64,
) -> Result<(), ProtoError> {
    // Saturating: a charge from the peer (a loan's length) may be anything up to 2^64 - 1.
    let offset = ch.received.saturating_add(charge);
    if offset > ch.granted {
        return Err(ProtoError::CreditOverrun {
            channel,
            offset,
            limit: ch.granted,
        });
    }
    let offset = link.received.saturating_add(charge);
    if offset > link.granted {
        return Err(ProtoError::CreditOverrun {
            channel: 0,
            offset,
            limit: link.granted,
        });
    }
    ch.received += charge;
    link.received += charge;
    Ok(())
}

/// One end of a link: channels, credits and the byte streams in both directions.
///
/// Feed received bytes to [`handle_input`](Self::handle_input); collect bytes to transmit with
/// [`poll_transmit`](Self::poll_transmit) after every call; collect [`Event`]s with
/// [`poll_event`](Self::poll_event).
#[derive(Debug)]
pub struct Connection {
    pub(crate) config: Config,
    pub(crate) state: State,
    next_id: u32,
    pub(crate) last_peer_id: u32,
    pub(crate) channels: BTreeMap<u32, Chan>,
    /// Sum of the receive buffers of the channels in the table (part of the link window).
    recv_bufs: u64,
    /// Channels the peer opened that were admitted and are in the table, and their receive
    /// buffers (counted against the limits).
    pub(crate) peer_open: u32,
    pub(crate) peer_windows: u64,
    /// Channels the peer opened that were refused and are still in the table.
    pub(crate) refused_open: u32,
    /// The store of the channel retired by the last `recv_ref`, whose bytes it lent out.
    retired_store: Store,
    pub(crate) link: LinkCredit,
    pub(crate) inbuf: Vec<u8>,
    /// A data frame whose header was parsed and whose payload is still arriving.
    pub(crate) data_rest: Option<input::DataRest>,
    pub(crate) in_offset: u64,
    pub(crate) out: Vec<u8>,
    /// Length of `out` while it holds only credit grants that may wait (see
    /// [`Connection::has_urgent_transmit`]); less than `out.len()` once anything else is in
    /// it, 0 when it is drained.
    pub(crate) deferrable: usize,
    pub(crate) events: VecDeque<Event>,
}

/// Notes a credit frame just appended to `out` (which held `before` bytes): while `out` holds
/// only grants that may wait, `deferrable` follows its length.
#[inline(always)]
pub(crate) fn note_grant(out_len: usize, deferrable: &mut usize, before: usize, may_wait: bool) {
    if may_wait && before == *deferrable {
        *deferrable = out_len;
    }
}

impl Connection {
    /// A new connection; its first transmission grants the peer the link window.
    pub fn new(config: Config) -> Self {
        let mut c = Connection {
            config,
            state: State::Open,
            next_id: if config.side == Side::Client { 1 } else { 2 },
            last_peer_id: 0,
            channels: BTreeMap::new(),
            recv_bufs: 0,
            peer_open: 0,
            peer_windows: 0,
            refused_open: 0,
            retired_store: Default::default(),
            link: LinkCredit {
                send_limit: INITIAL_LINK_CREDIT,
                granted: INITIAL_LINK_CREDIT,
                ..LinkCredit::default()
            },
            inbuf: Vec::new(),
            data_rest: None,
            in_offset: 0,
            out: Vec::new(),
            deferrable: 0,
            events: VecDeque::new(),
        };
        c.grant_link(true);
        c
    }

    /// Moves the bytes waiting for transmission into `out` (appending); false if there were none.
    pub fn poll_transmit(&mut self, out: &mut Vec<u8>) -> bool {
        if self.out.is_empty() {
            return false;
        }
        if out.is_empty() {
            std::mem::swap(out, &mut self.out);
        } else {
            out.append(&mut self.out);
        }
        self.deferrable = 0;
        true
    }

    /// Bytes waiting for transmission.
    pub fn transmit_len(&self) -> usize {
        self.out.len()
    }

    /// Whether bytes are waiting for transmission.
    pub fn has_transmit(&self) -> bool {
        !self.out.is_empty()
    }

    /// Whether the bytes waiting for transmission must go now: false when they are only
    /// credit grants that may wait, those that leave the peer at least a quarter of the
    /// window they refill still to send on (never on a synchronous channel, nor to a peer
    /// that said it is blocked). A driver may hold such grants back until it next sends
    /// (they go in front of its frames, in one write), waits for input, or a short time has
    /// passed: in a request and its answer, the grant for the request then travels with the
    /// answer instead of in a write and a wake-up of the peer of its own.
    pub fn has_urgent_transmit(&self) -> bool {
        debug_assert!(self.deferrable <= self.out.len());
        self.out.len() > self.deferrable
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The error the link failed with, if it failed.
    pub fn error(&self) -> Option<&ProtoError> {
        match &self.state {
            State::Failed(e) => Some(e),
            _ => None,
        }
    }

    /// Whether the link can still carry frames in both directions.
    pub fn is_open(&self) -> bool {
        self.state == State::Open
    }

    /// Whether the peer said goodbye.
    pub fn peer_closed(&self) -> bool {
        self.state == State::PeerClosed
    }

    fn check_open(&self) -> Result<(), CallError> {
        match self.state {
            State::Open => Ok(()),
            _ => Err(CallError::LinkClosed),
        }
    }

    /// Opens a channel; data may be sent on it at once (the peer adopts `options`).
    pub fn open(&mut self, name: &str, options: ChannelOptions) -> Result<u32, CallError> {
        self.check_open()?;
        options.validate()?;
        if name.is_empty() || name.len() > crate::frame::MAX_NAME {
            return Err(CallError::BadOptions("channel name must be 1 to 255 bytes"));
        }
        let id = self.next_id;
        self.next_id = id
            .checked_add(2)
            .ok_or(CallError::BadOptions("channel ids exhausted"))?;
        Frame::Open {
            channel: id,
            packet_shift: options.packet_shift(),
            sync: options.send_mode == SendMode::Sync,
            recv_buffer: options.recv_buffer,
            max_message: options.max_message,
            name,
        }
        .encode(&mut self.out);
        self.insert_chan(id, Chan::new(name.to_owned(), options));
        self.grant_link(true);
        Ok(id)
    }

    /// Name and options of an open channel.
    pub fn channel_info(&self, channel: u32) -> Option<(&str, ChannelOptions)> {
        self.channels
            .get(&channel)
            .map(|c| (c.name.as_str(), c.opts))
    }

    /// Refuses or resets a channel the peer opened (or any open channel). What the peer sent
    /// before it learns of this is dropped; the channel retires once both sides closed it.
    pub fn reset(&mut self, channel: u32, code: u32, reason: &str) -> Result<(), CallError> {
        let ch = self
            .channels
            .get_mut(&channel)
            .ok_or(CallError::NoChannel(channel))?;
        if ch.reset.is_none() {
            ch.reset = Some((code, reason.to_owned()));
            ch.reset_here = true;
            ch.store.clear();
            if self.state == State::Open {
                Frame::Error {
                    channel,
                    code,
                    reason,
                }
                .encode(&mut self.out);
            }
        }
        Ok(())
    }

    /// Whether a message of `len` bytes could be sent now without exceeding any credit.
    pub fn can_send(&self, channel: u32, len: usize) -> bool {
        let Some(ch) = self.channels.get(&channel) else {
            return false;
        };
        let c = cost(len);
        self.state == State::Open
            && ch.sent + c <= ch.send_limit
            && self.link.sent + c <= self.link.send_limit
    }

    /// Sends a message, split into packets; returns its sequence number (1 for the first).
    ///
    /// Fails with [`CallError::Blocked`] when the channel's or the link's credit is too small
    /// right now (the peer is told, with a `blocked` frame, once per limit).
    pub fn send(&mut self, channel: u32, msg: &[u8]) -> Result<u64, CallError> {
        self.send_parts(channel, &[msg])
    }

    /// Sends one message made of `parts` joined (a header and a body, say) without joining
    /// them first: the same frames and credit as [`send`](Self::send) of the joined bytes.
    pub fn send_parts(&mut self, channel: u32, parts: &[&[u8]]) -> Result<u64, CallError> {
        let len = parts.iter().map(|p| p.len()).sum();
        let (seq, packet_size) = self.charge(channel, len)?;
        crate::frame::extend_data_parts(&mut self.out, channel, parts, len, packet_size);
        Ok(seq)
    }

    /// Sends a message of `len` bytes that the transport carries outside the byte stream (a
    /// shared-memory buffer named by `token`), with the same credit rules as [`send`](Self::send).
    pub fn send_loan(&mut self, channel: u32, len: usize, token: u64) -> Result<u64, CallError> {
        let (seq, _) = self.charge(channel, len)?;
        Frame::Loan {
            channel,
            len: len as u64,
            token,
        }
        .encode(&mut self.out);
        Ok(seq)
    }

    /// Checks a message of `len` bytes against state, size and credit (telling the peer, once
    /// per limit, when credit is short), then takes the credit; returns the message's sequence
    /// number and the channel's packet size.
    fn charge(&mut self, channel: u32, len: usize) -> Result<(u64, usize), CallError> {
        self.check_open()?;
        let link_room = self.link.send_limit - self.link.sent;
        let Some(ch) = self.channels.get_mut(&channel) else {
            return Err(if self.retired(channel) {
                CallError::Closed
            } else {
                CallError::NoChannel(channel)
            });
        };
        ch.check_reset()?;
        if ch.send_closed {
            return Err(CallError::Closed);
        }
        if len as u64 > ch.opts.max_message {
            return Err(CallError::TooLarge {
                len,
                max: ch.opts.max_message,
            });
        }
        let c = cost(len);
        if ch.sent + c > ch.send_limit {
            return Err(blocked(
                &mut ch.blocked_at,
                channel,
                ch.send_limit,
                &mut self.out,
            ));
        }
        if c > link_room {
            let link = &mut self.link;
            return Err(blocked(
                &mut link.blocked_at,
                0,
                link.send_limit,
                &mut self.out,
            ));
        }
        ch.sent += c;
        ch.sent_msgs += 1;
        self.link.sent += c;
        Ok((ch.sent_msgs, ch.opts.packet_size))
    }

    /// Messages the peer's application has taken from `channel` (for rendezvous sends).
    pub fn delivered(&self, channel: u32) -> Result<u64, CallError> {
        self.channels
            .get(&channel)
            .map(|c| c.peer_delivered)
            .ok_or(CallError::NoChannel(channel))
    }

    /// Whether a message (or the end of stream) is waiting on `channel`.
    pub fn readable(&self, channel: u32) -> bool {
        match self.channels.get(&channel) {
            Some(ch) => !ch.store.is_empty() || ch.recv_closed || ch.reset.is_some(),
            None => self.retired(channel),
        }
    }

    /// Takes the next message of `channel`, granting credit back to the peer as needed.
    pub fn recv(&mut self, channel: u32) -> Result<Received, CallError> {
        let mut buf = Vec::new();
        Ok(match self.recv_into(channel, &mut buf)? {
            Landed::Message => Received::Message(buf),
            Landed::Loan { len, token } => Received::Loan { len, token },
            Landed::Empty => Received::Empty,
            Landed::End => Received::End,
        })
    }

    /// Like [`recv`](Self::recv), into `buf` (replacing its contents). A message that arrived
    /// in several packets was reassembled in a buffer of its own, and `buf` is exchanged for
    /// that buffer instead of copied into; `buf`'s old allocation is kept for a later message
    /// (see `store.rs`). So a receiver that gives back buffers of the size it receives copies
    /// nothing here and allocates nothing.
    pub fn recv_into(&mut self, channel: u32, buf: &mut Vec<u8>) -> Result<Landed, CallError> {
        self.recv_into_at(channel, buf, 0)
    }

    /// Like [`recv_into`](Self::recv_into), with the message at `buf[front..]` and `front`
    /// zero bytes before it: room for a header the receiver adds (an engine's pool buffers
    /// keep such headroom, and take a message received this way without copying it). The
    /// channel reassembles its next messages at this offset, so that those too are exchanged,
    /// not copied; one reassembled before at another offset is copied once.
    pub fn recv_into_at(
        &mut self,
        channel: u32,
        buf: &mut Vec<u8>,
        front: usize,
    ) -> Result<Landed, CallError> {
        let (entry, finished) =
            match self.take_next(channel, |s| s.pop_into(buf, front).map(|e| (e, ())))? {
                Next::Took(entry, (), finished) => (entry, finished),
                Next::Empty => return Ok(Landed::Empty),
                Next::End => return Ok(Landed::End),
            };
        if finished {
            self.remove_chan(channel);
        }
        Ok(match entry {
            Entry::Bytes(_) | Entry::Own(_) => Landed::Message,
            Entry::Loan { len, token } => Landed::Loan { len, token },
        })
    }

    /// Like [`recv`](Self::recv), lending the message's bytes instead of copying them: they
    /// stay valid until the next call on the connection.
    pub fn recv_ref(&mut self, channel: u32) -> Result<Incoming<'_>, CallError> {
        let (entry, at, finished) = match self.take_next(channel, |s| s.pop_at())? {
            Next::Took(entry, at, finished) => (entry, at, finished),
            Next::Empty => return Ok(Incoming::Empty),
            Next::End => return Ok(Incoming::End),
        };
        let store = if finished {
            let ch = self.remove_chan(channel).expect("channel in the table");
            self.retired_store = ch.store;
            &self.retired_store
        } else {
            &self
                .channels
                .get(&channel)
                .expect("channel in the table")
                .store
        };
        Ok(match entry {
            Entry::Bytes(_) | Entry::Own(_) => Incoming::Message(store.bytes_of(entry, at)),
            Entry::Loan { len, token } => Incoming::Loan { len, token },
        })
    }

    /// The one step of every receive: takes the next message of `channel` from its store with
    /// `pop`, and counts it as taken (credit is granted as it drains). Says whether the
    /// channel is finished with it (the caller retires it once done with the store).
    #[inline(always)]
    fn take_next<T>(
        &mut self,
        channel: u32,
        pop: impl FnOnce(&mut Store) -> Option<(Entry, T)>,
    ) -> Result<Next<T>, CallError> {
        let open = self.state == State::Open;
        let Some(ch) = self.channels.get_mut(&channel) else {
            return if self.retired(channel) {
                Ok(Next::End)
            } else {
                Err(CallError::NoChannel(channel))
            };
        };
        ch.check_reset()?;
        let Some((entry, got)) = pop(&mut ch.store) else {
            return Ok(if ch.recv_closed {
                Next::End
            } else {
                Next::Empty
            });
        };
        let c = entry.cost();
        ch.took(channel, 1, c, open, &mut self.out, &mut self.deferrable);
        let finished = ch.finished();
        self.link.consumed += c;
        if open {
            self.grant_link(false);
        }
        Ok(Next::Took(entry, got, finished))
    }

    /// Ends this side's sending direction of `channel` (end of stream for the peer).
    pub fn close(&mut self, channel: u32) -> Result<(), CallError> {
        if self.retired(channel) {
            return Ok(());
        }
        let ch = self
            .channels
            .get_mut(&channel)
            .ok_or(CallError::NoChannel(channel))?;
        if !ch.send_closed {
            ch.send_closed = true;
            // Reset by the peer: nothing more comes (its data before the reset came before
            // it). Reset here: see `Chan::reset_here`.
            if ch.reset.is_some() && !ch.reset_here {
                ch.recv_closed = true;
                ch.store.clear();
            }
            if self.state == State::Open {
                Frame::Close { channel }.encode(&mut self.out);
            }
        }
        self.maybe_retire(channel);
        Ok(())
    }

    /// Says goodbye: ends every channel and the link.
    pub fn close_link(&mut self) {
        if self.state == State::Open {
            Frame::Close { channel: 0 }.encode(&mut self.out);
            self.state = State::Closed;
        }
    }

    /// Sends a ping; the reply arrives as [`Event::Pong`].
    pub fn ping(&mut self, token: u64) -> Result<(), CallError> {
        self.check_open()?;
        Frame::Ping {
            token,
            reply: false,
        }
        .encode(&mut self.out);
        Ok(())
    }

    /// Ids of channels currently known (open in at least one direction, or reset but not closed).
    pub fn channel_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.channels.keys().copied()
    }

    pub(crate) fn retired(&self, id: u32) -> bool {
        if id == 0 || self.channels.contains_key(&id) {
            return false;
        }
        let ours = (id % 2 == 1) == (self.config.side == Side::Client);
        if ours {
            id < self.next_id
        } else {
            id <= self.last_peer_id
        }
    }

    pub(crate) fn maybe_retire(&mut self, channel: u32) {
        if self.channels.get(&channel).is_some_and(|c| c.finished()) {
            self.remove_chan(channel);
        }
    }

    pub(crate) fn insert_chan(&mut self, id: u32, ch: Chan) {
        self.count(&ch, true);
        if let Some(old) = self.channels.insert(id, ch) {
            self.count(&old, false);
        }
    }

    pub(crate) fn remove_chan(&mut self, id: u32) -> Option<Chan> {
        let ch = self.channels.remove(&id)?;
        self.count(&ch, false);
        Some(ch)
    }

    /// Counts a channel entering (`add`) or leaving the table: its window in the link window,
    /// and a peer's channel against the limits.
    fn count(&mut self, ch: &Chan, add: bool) {
        let w = ch.window();
        let (open, refused) = match ch.opener {
            Opener::Us => (0, 0),
            Opener::Peer => (1, 0),
            Opener::Refused => (0, 1),
        };
        let peer_w = if ch.opener == Opener::Peer { w } else { 0 };
        if add {
            self.recv_bufs += w;
            self.peer_open += open;
            self.peer_windows += peer_w;
            self.refused_open += refused;
        } else {
            self.recv_bufs -= w;
            self.peer_open -= open;
            self.peer_windows -= peer_w;
            self.refused_open -= refused;
        }
    }

    /// Refuses the whole link (a server over its session limit, say): an `error` frame with
    /// code [`CODE_REFUSED`] and `reason` for the peer, then nothing more is sent.
    pub fn refuse_link(&mut self, reason: &str) {
        if self.state == State::Open {
            Frame::Error {
                channel: 0,
                code: CODE_REFUSED,
                reason,
            }
            .encode(&mut self.out);
            self.state = State::Closed;
        }
    }

    pub(crate) fn link_grantable(&self) -> u64 {
        self.link.consumed + self.config.link_window + self.recv_bufs
    }

    /// Grants the peer the link credit that drained, when `force`d or when it is worth a frame:
    /// half the link's whole window (the link window and the channels' receive buffers)
    /// drained. Half the link window alone sent a frame every 512 KiB, eight times as often
    /// as a 4 MiB channel's own grants, and each is a record, a send and a wake-up of the peer.
    #[inline(always)]
    pub(crate) fn grant_link(&mut self, force: bool) {
        let limit = self.link_grantable();
        if limit > self.link.granted
            && (force
                || self.link.peer_blocked
                || limit - self.link.granted >= (self.config.link_window + self.recv_bufs) / 2)
        {
            let may_wait = !force
                && !self.link.peer_blocked
                && self.link.granted.saturating_sub(self.link.received)
                    >= (self.config.link_window + self.recv_bufs) / 4;
            let before = self.out.len();
            self.send_link_grant(limit);
            note_grant(self.out.len(), &mut self.deferrable, before, may_wait);
        }
    }

    /// Grants the link credit up to `limit`: a `credit` frame for channel 0.
    #[cold]
    pub(crate) fn send_link_grant(&mut self, limit: u64) {
        self.link.granted = limit;
        self.link.peer_blocked = false;
        Frame::Credit {
            channel: 0,
            limit,
            delivered: 0,
        }
        .encode(&mut self.out);
    }
}
