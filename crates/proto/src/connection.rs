//! The connection state machine: one per link end, fed bytes, producing bytes and events.

use std::collections::{BTreeMap, VecDeque};

use crate::channel::{cost, Chan, Msg};
use crate::error::{CallError, ProtoError};
use crate::frame::Frame;
use crate::options::{ChannelOptions, Config, SendMode, Side};

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

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Open,
    /// We said goodbye; nothing more may be sent.
    Closed,
    /// The peer said goodbye.
    PeerClosed,
    /// The link failed.
    Failed(ProtoError),
}

#[derive(Debug, Default)]
struct LinkCredit {
    send_limit: u64,
    sent: u64,
    blocked_at: Option<u64>,
    granted: u64,
    received: u64,
    consumed: u64,
}

/// Counts `charge` bytes received on `channel` against the channel's and the link's credit;
/// a peer that sends past either limit has overrun it (nothing is counted then).
fn receive_within_credit(
    ch: &mut Chan,
    link: &mut LinkCredit,
    channel: u32,
    charge: u64,
) -> Result<(), ProtoError> {
    if ch.received + charge > ch.granted {
        return Err(ProtoError::CreditOverrun {
            channel,
            offset: ch.received + charge,
            limit: ch.granted,
        });
    }
    if link.received + charge > link.granted {
        return Err(ProtoError::CreditOverrun {
            channel: 0,
            offset: link.received + charge,
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
    config: Config,
    state: State,
    next_id: u32,
    last_peer_id: u32,
    channels: BTreeMap<u32, Chan>,
    link: LinkCredit,
    inbuf: Vec<u8>,
    in_offset: u64,
    out: Vec<u8>,
    events: VecDeque<Event>,
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
            link: LinkCredit {
                send_limit: INITIAL_LINK_CREDIT,
                granted: INITIAL_LINK_CREDIT,
                ..LinkCredit::default()
            },
            inbuf: Vec::new(),
            in_offset: 0,
            out: Vec::new(),
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
        true
    }

    /// Whether bytes are waiting for transmission.
    pub fn has_transmit(&self) -> bool {
        !self.out.is_empty()
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
        self.channels
            .insert(id, Chan::new(name.to_owned(), options));
        self.grant_link(true);
        Ok(id)
    }

    /// Name and options of an open channel.
    pub fn channel_info(&self, channel: u32) -> Option<(&str, ChannelOptions)> {
        self.channels
            .get(&channel)
            .map(|c| (c.name.as_str(), c.opts))
    }

    /// Refuses or resets a channel the peer opened (or any open channel).
    pub fn reset(&mut self, channel: u32, code: u32, reason: &str) -> Result<(), CallError> {
        let ch = self
            .channels
            .get_mut(&channel)
            .ok_or(CallError::NoChannel(channel))?;
        if ch.reset.is_none() {
            ch.reset = Some((code, reason.to_owned()));
            ch.queue.clear();
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

    fn chan(&mut self, channel: u32) -> Result<&mut Chan, CallError> {
        let ch = self
            .channels
            .get_mut(&channel)
            .ok_or(CallError::NoChannel(channel))?;
        if let Some((code, reason)) = &ch.reset {
            return Err(CallError::Reset {
                code: *code,
                reason: reason.clone(),
            });
        }
        Ok(ch)
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
        let (seq, packet_size) = self.charge(channel, msg.len())?;
        if msg.is_empty() {
            Frame::Data {
                channel,
                last: true,
                payload: &[],
            }
            .encode(&mut self.out);
        } else {
            let mut packets = msg.chunks(packet_size).peekable();
            while let Some(payload) = packets.next() {
                let last = packets.peek().is_none();
                Frame::Data {
                    channel,
                    last,
                    payload,
                }
                .encode(&mut self.out);
            }
        }
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

    /// Checks a message of `len` bytes against state, size and credit, and takes the credit.
    fn charge(&mut self, channel: u32, len: usize) -> Result<(u64, usize), CallError> {
        self.check_open()?;
        let link_room = self.link.send_limit - self.link.sent;
        if self.retired(channel) {
            return Err(CallError::Closed);
        }
        let ch = self
            .channels
            .get_mut(&channel)
            .ok_or(CallError::NoChannel(channel))?;
        if let Some((code, reason)) = &ch.reset {
            return Err(CallError::Reset {
                code: *code,
                reason: reason.clone(),
            });
        }
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
            if ch.blocked_at != Some(ch.send_limit) {
                ch.blocked_at = Some(ch.send_limit);
                Frame::Blocked {
                    channel,
                    limit: ch.send_limit,
                }
                .encode(&mut self.out);
            }
            return Err(CallError::Blocked);
        }
        if c > link_room {
            if self.link.blocked_at != Some(self.link.send_limit) {
                self.link.blocked_at = Some(self.link.send_limit);
                Frame::Blocked {
                    channel: 0,
                    limit: self.link.send_limit,
                }
                .encode(&mut self.out);
            }
            return Err(CallError::Blocked);
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
            Some(ch) => !ch.queue.is_empty() || ch.recv_closed || ch.reset.is_some(),
            None => self.retired(channel),
        }
    }

    /// Takes the next message of `channel`, granting credit back to the peer as needed.
    pub fn recv(&mut self, channel: u32) -> Result<Received, CallError> {
        if !self.channels.contains_key(&channel) && self.retired(channel) {
            return Ok(Received::End);
        }
        let ch = self.chan(channel)?;
        let Some(msg) = ch.queue.pop_front() else {
            return Ok(if ch.recv_closed {
                Received::End
            } else {
                Received::Empty
            });
        };
        let c = cost(msg.len());
        let msg = match msg {
            Msg::Bytes(b) => Received::Message(b),
            Msg::Loan { len, token } => Received::Loan { len, token },
        };
        ch.consumed += c;
        ch.delivered += 1;
        let grant = (!ch.recv_closed && ch.wants_grant()).then(|| {
            ch.granted = ch.grantable();
            (ch.granted, ch.delivered)
        });
        self.link.consumed += c;
        if self.state == State::Open {
            if let Some((limit, delivered)) = grant {
                Frame::Credit {
                    channel,
                    limit,
                    delivered,
                }
                .encode(&mut self.out);
            }
            self.grant_link(false);
        }
        self.maybe_retire(channel);
        Ok(msg)
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
            if ch.reset.is_some() {
                ch.recv_closed = true;
                ch.queue.clear();
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

    fn retired(&self, id: u32) -> bool {
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

    fn maybe_retire(&mut self, channel: u32) {
        if self.channels.get(&channel).is_some_and(|c| c.finished()) {
            self.channels.remove(&channel);
        }
    }

    fn link_grantable(&self) -> u64 {
        let bufs: u64 = self
            .channels
            .values()
            .map(|c| u64::from(c.opts.recv_buffer))
            .sum();
        self.link.consumed + self.config.link_window + bufs
    }

    fn grant_link(&mut self, force: bool) {
        let limit = self.link_grantable();
        if limit > self.link.granted
            && (force || limit - self.link.granted >= self.config.link_window / 2)
        {
            self.link.granted = limit;
            Frame::Credit {
                channel: 0,
                limit,
                delivered: 0,
            }
            .encode(&mut self.out);
        }
    }

    /// Feeds bytes received from the peer.
    ///
    /// On a protocol violation the link fails: an `error` frame for the peer is queued for
    /// transmission and every later call reports the link closed.
    pub fn handle_input(&mut self, data: &[u8]) -> Result<(), ProtoError> {
        if data.is_empty() {
            return Ok(());
        }
        if let State::Failed(_) | State::PeerClosed = self.state {
            return Err(ProtoError::LinkClosed);
        }
        let mut buf = std::mem::take(&mut self.inbuf);
        let result = if buf.is_empty() {
            self.parse(data)
                .map(|used| buf.extend_from_slice(&data[used..]))
        } else {
            buf.extend_from_slice(data);
            self.parse(&buf).map(|used| {
                buf.drain(..used);
            })
        };
        self.inbuf = buf;
        if let Err(e) = &result {
            self.fail(e.clone());
        }
        result
    }

    fn fail(&mut self, e: ProtoError) {
        if self.state == State::Open {
            Frame::Error {
                channel: 0,
                code: CODE_PROTOCOL,
                reason: &e.to_string(),
            }
            .encode(&mut self.out);
        }
        self.inbuf.clear();
        self.state = State::Failed(e);
    }

    /// Parses whole frames from `buf`; returns the bytes used.
    fn parse(&mut self, buf: &[u8]) -> Result<usize, ProtoError> {
        let mut at = 0;
        while let State::Open | State::Closed = self.state {
            let decoded = Frame::decode(&buf[at..]).map_err(|source| ProtoError::Frame {
                offset: self.in_offset,
                source,
            })?;
            let Some((frame, used)) = decoded else { break };
            self.on_frame(frame)?;
            at += used;
            self.in_offset += used as u64;
        }
        Ok(at)
    }

    fn on_frame(&mut self, frame: Frame<'_>) -> Result<(), ProtoError> {
        match frame {
            Frame::Open {
                channel,
                packet_shift,
                sync,
                recv_buffer,
                max_message,
                name,
            } => {
                let theirs = (channel % 2 == 1) == (self.config.side == Side::Server);
                if !theirs || channel <= self.last_peer_id {
                    return Err(ProtoError::BadChannelId(channel));
                }
                self.last_peer_id = channel;
                let options = ChannelOptions {
                    packet_size: 1 << packet_shift,
                    recv_buffer,
                    max_message,
                    send_mode: if sync {
                        SendMode::Sync
                    } else {
                        SendMode::Async
                    },
                };
                let mut ch = Chan::new(name.to_owned(), options);
                if let Err(e) = options.validate() {
                    let reason = e.to_string();
                    Frame::Error {
                        channel,
                        code: CODE_REFUSED,
                        reason: &reason,
                    }
                    .encode(&mut self.out);
                    ch.reset = Some((CODE_REFUSED, reason));
                    self.channels.insert(channel, ch);
                } else {
                    self.channels.insert(channel, ch);
                    self.grant_link(true);
                    self.events.push_back(Event::Opened {
                        channel,
                        name: name.to_owned(),
                        options,
                    });
                }
            }
            Frame::Data {
                channel,
                last,
                payload,
            } => self.on_data(channel, last, payload)?,
            Frame::Loan {
                channel,
                len,
                token,
            } => self.on_loan(channel, len, token)?,
            Frame::Credit {
                channel: 0, limit, ..
            } => {
                self.link.send_limit = self.link.send_limit.max(limit);
            }
            Frame::Credit {
                channel,
                limit,
                delivered,
            } => match self.channels.get_mut(&channel) {
                Some(ch) => {
                    ch.send_limit = ch.send_limit.max(limit);
                    ch.peer_delivered = ch.peer_delivered.max(delivered);
                }
                None => self.known(channel)?,
            },
            Frame::Blocked { channel: 0, .. } => {
                let limit = self.link.granted;
                Frame::Credit {
                    channel: 0,
                    limit,
                    delivered: 0,
                }
                .encode(&mut self.out);
            }
            Frame::Blocked { channel, .. } => match self.channels.get_mut(&channel) {
                Some(ch) => {
                    ch.granted = ch.grantable();
                    Frame::Credit {
                        channel,
                        limit: ch.granted,
                        delivered: ch.delivered,
                    }
                    .encode(&mut self.out);
                }
                None => self.known(channel)?,
            },
            Frame::Close { channel: 0 } => {
                for ch in self.channels.values_mut() {
                    ch.recv_closed = true;
                    ch.partial.clear();
                }
                self.state = State::PeerClosed;
            }
            Frame::Close { channel } => match self.channels.get_mut(&channel) {
                Some(ch) => {
                    if !ch.partial.is_empty() {
                        return Err(ProtoError::DataAfterClose(channel));
                    }
                    ch.recv_closed = true;
                    self.maybe_retire(channel);
                }
                None => self.known(channel)?,
            },
            Frame::Ping {
                token,
                reply: false,
            } => {
                if self.state == State::Open {
                    Frame::Ping { token, reply: true }.encode(&mut self.out);
                }
            }
            Frame::Ping { token, reply: true } => self.events.push_back(Event::Pong { token }),
            Frame::Error {
                channel: 0,
                code,
                reason,
            } => {
                return Err(ProtoError::Peer {
                    code,
                    reason: reason.to_owned(),
                });
            }
            Frame::Error {
                channel,
                code,
                reason,
            } => match self.channels.get_mut(&channel) {
                Some(ch) => {
                    if ch.reset.is_none() {
                        ch.reset = Some((code, reason.to_owned()));
                        ch.queue.clear();
                        self.events.push_back(Event::Reset { channel });
                    }
                }
                None => self.known(channel)?,
            },
        }
        Ok(())
    }

    /// A frame for a channel not in the table is harmless if the channel was retired.
    fn known(&self, channel: u32) -> Result<(), ProtoError> {
        if self.retired(channel) {
            Ok(())
        } else {
            Err(ProtoError::UnknownChannel(channel))
        }
    }

    fn on_data(&mut self, channel: u32, last: bool, payload: &[u8]) -> Result<(), ProtoError> {
        let Some(ch) = self.channels.get_mut(&channel) else {
            return Err(if self.retired(channel) {
                ProtoError::DataAfterClose(channel)
            } else {
                ProtoError::UnknownChannel(channel)
            });
        };
        if ch.recv_closed {
            return Err(ProtoError::DataAfterClose(channel));
        }
        let ps = ch.opts.packet_size;
        let bad_size = if last {
            payload.len() > ps || (payload.is_empty() && !ch.partial.is_empty())
        } else {
            payload.len() != ps
        };
        if bad_size {
            return Err(ProtoError::BadPacket {
                channel,
                len: payload.len(),
                packet_size: ps,
            });
        }
        let charge = if last && payload.is_empty() {
            1
        } else {
            payload.len() as u64
        };
        receive_within_credit(ch, &mut self.link, channel, charge)?;
        if (ch.partial.len() + payload.len()) as u64 > ch.opts.max_message {
            return Err(ProtoError::MessageTooLong {
                channel,
                max: ch.opts.max_message,
            });
        }
        if ch.reset.is_some() {
            // Refused or reset: drop the data but keep the credit flowing.
            ch.consumed += charge;
            self.link.consumed += charge;
            return Ok(());
        }
        if last {
            let msg = if ch.partial.is_empty() {
                payload.to_vec()
            } else {
                let mut m = std::mem::take(&mut ch.partial);
                m.extend_from_slice(payload);
                m
            };
            ch.queue.push_back(Msg::Bytes(msg));
        } else {
            ch.partial.extend_from_slice(payload);
        }
        Ok(())
    }

    fn on_loan(&mut self, channel: u32, len: u64, token: u64) -> Result<(), ProtoError> {
        let Some(ch) = self.channels.get_mut(&channel) else {
            return Err(if self.retired(channel) {
                ProtoError::DataAfterClose(channel)
            } else {
                ProtoError::UnknownChannel(channel)
            });
        };
        if ch.recv_closed || !ch.partial.is_empty() {
            return Err(ProtoError::DataAfterClose(channel));
        }
        if len > ch.opts.max_message {
            return Err(ProtoError::MessageTooLong {
                channel,
                max: ch.opts.max_message,
            });
        }
        let charge = cost(len as usize);
        receive_within_credit(ch, &mut self.link, channel, charge)?;
        if ch.reset.is_some() {
            ch.consumed += charge;
            self.link.consumed += charge;
        } else {
            ch.queue.push_back(Msg::Loan { len, token });
        }
        Ok(())
    }
}
