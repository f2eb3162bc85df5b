//! The input side of a [`Connection`]: parsing the peer's frames and acting on them.

use crate::channel::{cost, Chan, Opener};
use crate::connection::{
    receive_within_credit, Connection, Event, LinkCredit, State, CODE_PROTOCOL, CODE_REFUSED,
};
use crate::error::ProtoError;
use crate::frame::{Frame, HEADER_LEN, MAX_BODY};
use crate::options::{ChannelOptions, SendMode, Side};

/// Data frames whose payload arrives in pieces are taken piece by piece from this payload
/// length on; shorter ones are joined first (a small copy, and a receiver waiting for the
/// message then takes it whole as it is parsed).
const STREAM_FROM: usize = 4096;

/// A data frame whose payload is still arriving (see `Connection::start_data`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DataRest {
    channel: u32,
    /// Payload bytes still to come.
    left: usize,
    /// Padding bytes after the payload still to come (skipped).
    pad: usize,
    /// The frame ends its message.
    last: bool,
    /// The payload is kept (false: its channel was refused or reset, it is dropped).
    keep: bool,
}

/// The receiver that [`Connection::handle_input_taking`] hands a message to as it is parsed:
/// the channel, and the callback until it has been called.
type Taker<'a> = Option<(u32, &'a mut dyn FnMut(&[u8]))>;

impl Connection {
    /// Feeds bytes received from the peer.
    ///
    /// On a protocol violation the link fails: an `error` frame for the peer is queued for
    /// transmission and every later call reports the link closed.
    pub fn handle_input(&mut self, data: &[u8]) -> Result<(), ProtoError> {
        self.input(data, &mut None)
    }

    /// Like [`handle_input`](Self::handle_input), handing the next message of `channel` to
    /// `take` in place, as it is parsed, if it is a message the application would take next
    /// (nothing of `channel` waits before it) and comes in one packet: it is then received and
    /// taken at once, with the credit accounting of [`recv`](Self::recv), and never stored. Returns whether `take` was called (at most
    /// once). The messages after it, and all of other channels, are stored as usual.
    pub fn handle_input_taking(
        &mut self,
        data: &[u8],
        channel: u32,
        take: &mut dyn FnMut(&[u8]),
    ) -> Result<bool, ProtoError> {
        let mut taker: Taker<'_> = Some((channel, take));
        self.input(data, &mut taker)?;
        Ok(taker.is_none())
    }

    /// The fast case of [`handle_input_taking`](Self::handle_input_taking), for input that
    /// arrives frame by frame (a shared-memory record): when `data` is exactly one data frame
    /// holding a whole message of `channel` that the application would take next, and that
    /// frame is valid and within credit, it is received and taken with the same accounting,
    /// and its payload returned. Otherwise (any other frame, a message in several packets,
    /// something of `channel` already waiting, a partial frame from earlier input, a closed or
    /// failed link, or anything [`handle_input`](Self::handle_input) would reject) nothing
    /// changes and `None` is returned: feed `data` the usual way.
    pub fn take_whole_message<'a>(&mut self, data: &'a [u8], channel: u32) -> Option<&'a [u8]> {
        let (id, payload) = crate::frame::whole_data(data)?;
        if id != channel
            || self.state != State::Open
            || !self.inbuf.is_empty()
            || self.data_rest.is_some()
        {
            return None;
        }
        let ch = self.channels.get_mut(&channel)?;
        let charge = cost(payload.len());
        let takeable = !ch.recv_closed
            && ch.reset.is_none()
            && ch.store.is_empty()
            && ch.store.partial_len() == 0
            && payload.len() <= ch.opts.packet_size
            && payload.len() as u64 <= ch.opts.max_message;
        if !takeable {
            return None;
        }
        // Past either credit limit nothing is counted, and the usual path reports the overrun.
        receive_within_credit(ch, &mut self.link, channel, charge).ok()?;
        ch.took(
            channel,
            1,
            charge,
            true,
            &mut self.out,
            &mut self.deferrable,
        );
        self.link.consumed += charge;
        self.grant_link(false);
        self.in_offset += data.len() as u64;
        Some(payload)
    }

    fn input(&mut self, data: &[u8], taker: &mut Taker<'_>) -> Result<(), ProtoError> {
        if data.is_empty() {
            return Ok(());
        }
        if let State::Failed(_) | State::PeerClosed = self.state {
            return Err(ProtoError::LinkClosed);
        }
        let mut buf = std::mem::take(&mut self.inbuf);
        let result = self.parse_after(&mut buf, data, taker);
        self.inbuf = buf;
        if let Err(e) = &result {
            self.fail(e.clone());
        }
        result
    }

    pub(crate) fn fail(&mut self, e: ProtoError) {
        if self.state == State::Open {
            // A limit's words for the peer name the flag that raises it here.
            let reason = match &e {
                ProtoError::OverLimit { over, .. } => format!("{e} {}", over.for_peer()),
                _ => e.to_string(),
            };
            Frame::Error {
                channel: 0,
                code: CODE_PROTOCOL,
                reason: &reason,
            }
            .encode(&mut self.out);
        }
        self.inbuf.clear();
        self.data_rest = None;
        self.state = State::Failed(e);
    }

    /// Parses `data` after what earlier input left: first the rest of a data frame's payload
    /// that is still arriving, or the partial frame in `partial`, completed from the front of
    /// `data`; then parses the rest where it lies, and keeps what is left (a frame cut off by
    /// the end of `data`) in `partial`. A data frame of [`STREAM_FROM`] bytes or more cut off
    /// after its header is not kept: its payload goes to its channel's store as it arrives (see
    /// [`start_data`](Self::start_data)). So only a header or a short frame that straddles two
    /// inputs is ever copied here.
    fn parse_after(
        &mut self,
        partial: &mut Vec<u8>,
        mut data: &[u8],
        taker: &mut Taker<'_>,
    ) -> Result<(), ProtoError> {
        if self.data_rest.is_some() {
            data = self.data_pieces(data);
            if data.is_empty() {
                return Ok(());
            }
        }
        if !partial.is_empty() {
            let want = if partial.len() < HEADER_LEN {
                HEADER_LEN
            } else {
                frame_len(partial)
            };
            let take = want.saturating_sub(partial.len()).min(data.len());
            partial.extend_from_slice(&data[..take]);
            data = &data[take..];
            if partial.len() < HEADER_LEN {
                return Ok(());
            }
            if partial.len() == HEADER_LEN && frame_len(partial) > HEADER_LEN {
                // Only the header is here: a large data frame's payload streams from `data`;
                // any other frame is completed from it.
                if self.data_frame_begins(partial)? {
                    partial.clear();
                    return self.parse_after(partial, data, taker);
                }
                if !data.is_empty() {
                    return self.parse_after(partial, data, taker);
                }
            }
            // A whole frame, a frame still cut off, or a bad header: parse says which.
            let used = self.parse(partial, taker)?;
            if used < partial.len() {
                debug_assert!(data.is_empty(), "a cut-off frame took all the input");
                return Ok(());
            }
            partial.clear();
        }
        loop {
            let used = self.parse(data, taker)?;
            data = &data[used..];
            // Cut off, or the link closed: a large data frame's payload is taken as it comes.
            if data.len() >= HEADER_LEN && self.data_frame_begins(&data[..HEADER_LEN])? {
                data = self.data_pieces(&data[HEADER_LEN..]);
                if data.is_empty() {
                    return Ok(());
                }
                continue;
            }
            partial.extend_from_slice(data);
            return Ok(());
        }
    }

    /// Takes the front of `data` as the payload still to come of the data frame that
    /// [`start_data`](Self::start_data) began; returns the rest.
    #[inline(never)]
    fn data_pieces<'d>(&mut self, mut data: &'d [u8]) -> &'d [u8] {
        let Some(rest) = &self.data_rest else {
            return data;
        };
        if rest.left > 0 {
            let n = rest.left.min(data.len());
            self.data_piece(&data[..n]);
            self.in_offset += n as u64;
            data = &data[n..];
        }
        if let Some(rest) = &mut self.data_rest {
            if rest.left == 0 {
                let n = rest.pad.min(data.len());
                rest.pad -= n;
                self.in_offset += n as u64;
                data = &data[n..];
                if rest.pad == 0 {
                    self.data_rest = None;
                }
            }
        }
        data
    }

    /// If `header` (exactly a header) begins a data frame, a valid one, with a payload of at
    /// least [`STREAM_FROM`] bytes, on a link that takes input, starts taking its payload as
    /// it arrives and says so.
    #[inline(never)]
    fn data_frame_begins(&mut self, header: &[u8]) -> Result<bool, ProtoError> {
        if !matches!(self.state, State::Open | State::Closed) {
            return Ok(false);
        }
        let offset = self.in_offset;
        let Some((channel, last, len)) = crate::frame::data_header(header)
            .map_err(|source| ProtoError::Frame { offset, source })?
        else {
            return Ok(false);
        };
        if len < STREAM_FROM {
            return Ok(false);
        }
        self.start_data(channel, last, len)?;
        self.in_offset += HEADER_LEN as u64;
        Ok(true)
    }

    /// Parses whole frames from `buf`; returns the bytes used.
    fn parse(&mut self, buf: &[u8], taker: &mut Taker<'_>) -> Result<usize, ProtoError> {
        let mut at = 0;
        while let State::Open | State::Closed = self.state {
            let decoded = Frame::decode(&buf[at..]).map_err(|source| ProtoError::Frame {
                offset: self.in_offset,
                source,
            })?;
            let Some((frame, used)) = decoded else { break };
            self.on_frame(frame, taker)?;
            at += used;
            self.in_offset += used as u64;
        }
        Ok(at)
    }

    fn on_frame(&mut self, frame: Frame<'_>, taker: &mut Taker<'_>) -> Result<(), ProtoError> {
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
                let limits = self.config.limits;
                let verdict = options
                    .validate()
                    .map_err(|e| e.to_string())
                    .and_then(|()| {
                        limits
                            .admit(self.peer_open, self.peer_windows, &options)
                            .map_err(|e| format!("{e} {}", e.over().for_peer()))
                    });
                if let Err(reason) = verdict {
                    if self.refused_open >= limits.max_channels {
                        return Err(ProtoError::OverLimit {
                            what: "refused channels open",
                            over: offhost_units::OverLimit::new(
                                offhost_units::Limit::MaxChannels,
                                limits.max_channels,
                            ),
                        });
                    }
                    Frame::Error {
                        channel,
                        code: CODE_REFUSED,
                        reason: &reason,
                    }
                    .encode(&mut self.out);
                    // Nothing will be sent on it: it retires once the peer closes it.
                    ch.reset = Some((CODE_REFUSED, reason));
                    ch.send_closed = true;
                    ch.opener = Opener::Refused;
                    self.insert_chan(channel, ch);
                } else {
                    ch.opener = Opener::Peer;
                    self.insert_chan(channel, ch);
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
            } => self.on_data(channel, last, payload, taker)?,
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
            Frame::Blocked { channel: 0, limit } => {
                if limit >= self.link.granted {
                    self.link.peer_blocked = true;
                }
                let grantable = self.link_grantable();
                if grantable > self.link.granted {
                    self.send_link_grant(grantable);
                } else {
                    // Nothing drained yet: repeat the grant (it may have been lost), and
                    // grant the next drained credit at once.
                    Frame::Credit {
                        channel: 0,
                        limit: self.link.granted,
                        delivered: 0,
                    }
                    .encode(&mut self.out);
                }
            }
            Frame::Blocked { channel, limit } => match self.channels.get_mut(&channel) {
                Some(ch) => ch.peer_blocked_at(channel, limit, &mut self.out),
                None => self.known(channel)?,
            },
            Frame::Close { channel: 0 } => {
                for ch in self.channels.values_mut() {
                    ch.recv_closed = true;
                    ch.store.clear_partial();
                }
                self.state = State::PeerClosed;
            }
            Frame::Close { channel } => match self.channels.get_mut(&channel) {
                Some(ch) => {
                    if ch.store.partial_len() != 0 {
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
                        ch.store.clear();
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

    /// The error for a data frame of `channel`, which is not in the table.
    #[cold]
    fn data_for_unknown(&self, channel: u32) -> ProtoError {
        if self.retired(channel) {
            ProtoError::DataAfterClose(channel)
        } else {
            ProtoError::UnknownChannel(channel)
        }
    }

    #[inline(always)]
    fn on_data(
        &mut self,
        channel: u32,
        last: bool,
        payload: &[u8],
        taker: &mut Taker<'_>,
    ) -> Result<(), ProtoError> {
        let Some(ch) = self.channels.get_mut(&channel) else {
            return Err(self.data_for_unknown(channel));
        };
        if !admit_data(ch, &mut self.link, channel, last, payload.len())? {
            return Ok(());
        }
        if last
            && ch.store.partial_len() == 0
            && ch.store.is_empty()
            && taker.as_ref().is_some_and(|t| t.0 == channel)
        {
            // The application waits for exactly this message: received and taken at once.
            let charge = crate::channel::cost(payload.len());
            let open = self.state == State::Open;
            ch.took(
                channel,
                1,
                charge,
                open,
                &mut self.out,
                &mut self.deferrable,
            );
            self.link.consumed += charge;
            if open {
                self.grant_link(false);
            }
            let (_, take) = taker.take().expect("the taker is there");
            take(payload);
            return Ok(());
        }
        ch.store.push_packet(payload, last);
        Ok(())
    }

    /// A data frame whose header arrived without all of its payload: checked and charged
    /// now, its payload taken as it arrives ([`data_piece`](Self::data_piece)).
    fn start_data(&mut self, channel: u32, last: bool, len: usize) -> Result<(), ProtoError> {
        let Some(ch) = self.channels.get_mut(&channel) else {
            return Err(self.data_for_unknown(channel));
        };
        let keep = admit_data(ch, &mut self.link, channel, last, len)?;
        self.data_rest = Some(DataRest {
            channel,
            left: len,
            pad: crate::frame::pad_len(len),
            last,
            keep,
        });
        Ok(())
    }

    /// The next bytes of the payload whose frame [`start_data`](Self::start_data) began (at
    /// most what is left of it): into the channel's store as part of its message.
    fn data_piece(&mut self, piece: &[u8]) {
        let Some(rest) = &mut self.data_rest else {
            return;
        };
        rest.left -= piece.len();
        let (channel, ends, keep) = (rest.channel, rest.left == 0, rest.keep);
        let last = ends && rest.last;
        if ends && rest.pad == 0 {
            self.data_rest = None;
        }
        // A channel reset by this side since the header came drops the rest.
        if let Some(ch) = self.channels.get_mut(&channel) {
            if keep && ch.reset.is_none() {
                ch.store.push_packet(piece, last);
            }
        }
    }

    fn on_loan(&mut self, channel: u32, len: u64, token: u64) -> Result<(), ProtoError> {
        let Some(ch) = self.channels.get_mut(&channel) else {
            return Err(if self.retired(channel) {
                ProtoError::DataAfterClose(channel)
            } else {
                ProtoError::UnknownChannel(channel)
            });
        };
        if ch.recv_closed || ch.store.partial_len() != 0 {
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
            ch.store.push_loan(len, token);
        }
        Ok(())
    }
}

/// Checks a data frame of `len` payload bytes (`last`: it ends its message) for channel
/// `channel` (`ch`) and charges its credit. True if its payload is to be kept; false if the
/// channel was refused or reset (the payload is dropped, and its credit counted as taken so
/// that credit keeps flowing).
#[inline(always)]
fn admit_data(
    ch: &mut Chan,
    link: &mut LinkCredit,
    channel: u32,
    last: bool,
    len: usize,
) -> Result<bool, ProtoError> {
    if ch.recv_closed {
        return Err(ProtoError::DataAfterClose(channel));
    }
    let ps = ch.opts.packet_size;
    let partial = ch.store.partial_len();
    let bad_size = if last {
        len > ps || (len == 0 && partial != 0)
    } else {
        len != ps
    };
    if bad_size {
        return Err(ProtoError::BadPacket {
            channel,
            len,
            packet_size: ps,
        });
    }
    let charge = if last && len == 0 { 1 } else { len as u64 };
    receive_within_credit(ch, link, channel, charge)?;
    if (partial + len) as u64 > ch.opts.max_message {
        return Err(ProtoError::MessageTooLong {
            channel,
            max: ch.opts.max_message,
        });
    }
    if ch.reset.is_some() {
        // Refused or reset: drop the data but keep the credit flowing.
        ch.consumed += charge;
        link.consumed += charge;
        return Ok(false);
    }
    Ok(true)
}

/// The whole length of the frame whose header starts `buf` (at least [`HEADER_LEN`] bytes); a
/// body length past the limit counts as a bare header, so that parsing it reports the error.
fn frame_len(buf: &[u8]) -> usize {
    let body = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]);
    if body > MAX_BODY {
        HEADER_LEN
    } else {
        crate::frame::frame_len(body as usize)
    }
}
