//! Frames and their byte layout.
//!
//! Every frame is a 16-byte header, a body, and zero padding up to a multiple of 16 bytes
//! ([`ALIGN`]; the padding is not counted in the length, and its bytes are not read). All
//! integers are little-endian.
//!
//! | offset | size | field    | meaning                                                      |
//! |-------:|-----:|----------|--------------------------------------------------------------|
//! | 0      | 1    | kind     | 1 open, 2 data, 3 credit, 4 blocked, 5 close, 6 ping, 7 error, 8 loan |
//! | 1      | 1    | flags    | per kind (data: bit 0 = last packet of the message; ping: bit 0 = reply) |
//! | 2      | 2    | reserved | zero                                                         |
//! | 4      | 4    | channel  | channel id; 0 is the link itself                             |
//! | 8      | 4    | length   | body length in bytes, at most [`MAX_BODY`]                   |
//! | 12     | 4    | reserved | zero                                                         |
//!
//! # Why frames are 16-byte aligned
//!
//! So that a payload starts at a multiple of 16 bytes wherever its frame starts at one: in a
//! shared-memory record, in the kernel's socket buffers (every write is whole frames, so the
//! kernel's page fragments stay aligned), in the receive buffer. Copies of 2 KiB to 1 MiB are
//! `rep movsb`, in glibc's `memcpy` and in the kernel's socket copies alike, and some CPUs
//! run that about 16 times slower when the destination is not 16-byte aligned: on the AMD
//! EPYC of the development machine, 3.5 against 57 GB/s for 64 KiB (`docs/notes/link.md`,
//! "Aligned frames"). With a 12-byte header every large payload was written to such an
//! address.
//!
//! Bodies:
//!
//! | kind    | channel | body                                                                  |
//! |---------|---------|-----------------------------------------------------------------------|
//! | open    | new id  | `packet_shift: u8` (3..=16), `mode: u8` (0 async, 1 sync), `name_len: u16`, `recv_buffer: u32`, `max_message: u64`, name (UTF-8, 1..=255 bytes) |
//! | data    | id      | payload, exactly the packet size unless flag bit 0 (last) is set       |
//! | credit  | id or 0 | `limit: u64` (absolute byte offset the peer may send up to), `delivered: u64` (messages the application has taken; 0 for the link) |
//! | blocked | id or 0 | `limit: u64`: the sender is waiting for credit beyond this offset      |
//! | close   | id or 0 | empty: end of stream in the sender's direction (0: the whole link)     |
//! | ping    | 0       | `token: u64`; flag bit 0 marks the reply                               |
//! | error   | id or 0 | `code: u32`, reason (UTF-8): channel refused/reset, or fatal link error |
//! | loan    | id      | `len: u64`, `token: u64`: a whole message of `len` bytes carried outside the byte stream (a shared-memory buffer named by `token`) |

use crate::error::FrameError;

/// Size of the frame header in bytes.
pub const HEADER_LEN: usize = 16;
/// Every frame starts and ends at a multiple of this many bytes from the start of the stream.
pub const ALIGN: usize = 16;

/// Bytes of padding after a body of `len` bytes.
#[inline(always)]
pub const fn pad_len(len: usize) -> usize {
    len.wrapping_neg() & (ALIGN - 1)
}

/// The whole length of a frame whose body is `len` bytes: header, body and padding.
#[inline(always)]
pub const fn frame_len(len: usize) -> usize {
    // The header is a multiple of ALIGN: header, body and padding round up together.
    (HEADER_LEN + len + ALIGN - 1) & !(ALIGN - 1)
}

// `frame_len` rounds the header and the body up together.
const _: () = assert!(HEADER_LEN.is_multiple_of(ALIGN) && ALIGN.is_power_of_two());

/// Zero bytes to pad bodies with.
pub(crate) static PADDING: [u8; ALIGN] = [0; ALIGN];
/// Largest body any frame may carry (one 64 KiB packet).
pub const MAX_BODY: u32 = 64 * 1024;
/// Longest channel name in bytes.
pub const MAX_NAME: usize = 255;

const KIND_OPEN: u8 = 1;
const KIND_DATA: u8 = 2;
const KIND_CREDIT: u8 = 3;
const KIND_BLOCKED: u8 = 4;
const KIND_CLOSE: u8 = 5;
const KIND_PING: u8 = 6;
const KIND_ERROR: u8 = 7;
const KIND_LOAN: u8 = 8;
const FLAG_LAST: u8 = 1;
const FLAG_REPLY: u8 = 1;
const OPEN_FIXED: usize = 16;

/// One decoded frame; data payloads borrow the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Open a channel.
    Open {
        /// Id chosen by the opener.
        channel: u32,
        /// log2 of the packet size.
        packet_shift: u8,
        /// True for synchronous (rendezvous) sends.
        sync: bool,
        /// Receive buffer per direction, in bytes.
        recv_buffer: u32,
        /// Largest message in bytes.
        max_message: u64,
        /// Channel name.
        name: &'a str,
    },
    /// One packet of a message.
    Data {
        /// Channel.
        channel: u32,
        /// True on the last packet of a message.
        last: bool,
        /// Packet payload.
        payload: &'a [u8],
    },
    /// A credit grant.
    Credit {
        /// Channel, 0 for the link.
        channel: u32,
        /// Absolute byte offset the peer may send up to.
        limit: u64,
        /// Messages the application has taken so far.
        delivered: u64,
    },
    /// The sender waits for credit.
    Blocked {
        /// Channel, 0 for the link.
        channel: u32,
        /// The limit it is blocked at.
        limit: u64,
    },
    /// End of stream (channel) or goodbye (0).
    Close {
        /// Channel, 0 for the link.
        channel: u32,
    },
    /// Liveness probe or its reply.
    Ping {
        /// Opaque token echoed by the reply.
        token: u64,
        /// True for the reply.
        reply: bool,
    },
    /// A whole message carried outside the byte stream (zero-copy).
    Loan {
        /// Channel.
        channel: u32,
        /// Message length.
        len: u64,
        /// Names the out-of-band buffer for the transport.
        token: u64,
    },
    /// Channel refused/reset, or fatal link error (channel 0).
    Error {
        /// Channel, 0 for the link.
        channel: u32,
        /// Error code.
        code: u32,
        /// Human-readable reason.
        reason: &'a str,
    },
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn want(
    kind: &'static str,
    body: &[u8],
    n: usize,
    expected: &'static str,
) -> Result<(), FrameError> {
    if body.len() == n {
        Ok(())
    } else {
        Err(FrameError::BadLength {
            kind,
            len: body.len(),
            expected,
        })
    }
}

fn no_flags(kind: &'static str, flags: u8) -> Result<(), FrameError> {
    if flags == 0 {
        Ok(())
    } else {
        Err(FrameError::BadFlags { kind, flags })
    }
}

impl<'a> Frame<'a> {
    /// Decodes one frame from the front of `buf`.
    ///
    /// Returns `Ok(None)` when `buf` holds only part of a frame, and otherwise the frame with
    /// the number of bytes it used.
    pub fn decode(buf: &'a [u8]) -> Result<Option<(Frame<'a>, usize)>, FrameError> {
        if buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let kind = buf[0];
        let flags = buf[1];
        let channel = u32_at(buf, 4);
        let len = u32_at(buf, 8);
        if !(KIND_OPEN..=KIND_LOAN).contains(&kind) {
            return Err(FrameError::UnknownKind(kind));
        }
        check_reserved(buf)?;
        if len > MAX_BODY {
            return Err(FrameError::TooLong { len, max: MAX_BODY });
        }
        let end = HEADER_LEN + len as usize;
        let total = frame_len(len as usize);
        if buf.len() < total {
            return Ok(None);
        }
        let body = &buf[HEADER_LEN..end];
        let frame = match kind {
            KIND_OPEN => Self::decode_open(flags, channel, body)?,
            KIND_DATA => Frame::Data {
                channel,
                last: data_fields(flags, channel)?,
                payload: body,
            },
            KIND_CREDIT => {
                no_flags("credit", flags)?;
                want("credit", body, 16, "16")?;
                Frame::Credit {
                    channel,
                    limit: u64_at(body, 0),
                    delivered: u64_at(body, 8),
                }
            }
            KIND_BLOCKED => {
                no_flags("blocked", flags)?;
                want("blocked", body, 8, "8")?;
                Frame::Blocked {
                    channel,
                    limit: u64_at(body, 0),
                }
            }
            KIND_CLOSE => {
                no_flags("close", flags)?;
                want("close", body, 0, "0")?;
                Frame::Close { channel }
            }
            KIND_PING => {
                if flags & !FLAG_REPLY != 0 {
                    return Err(FrameError::BadFlags {
                        kind: "ping",
                        flags,
                    });
                }
                want("ping", body, 8, "8")?;
                if channel != 0 {
                    return Err(FrameError::BadField {
                        kind: "ping",
                        field: "channel",
                        why: "must be 0",
                    });
                }
                Frame::Ping {
                    token: u64_at(body, 0),
                    reply: flags & FLAG_REPLY != 0,
                }
            }
            KIND_LOAN => {
                no_flags("loan", flags)?;
                want("loan", body, 16, "16")?;
                if channel == 0 {
                    return Err(FrameError::BadField {
                        kind: "loan",
                        field: "channel",
                        why: "loan on channel 0",
                    });
                }
                Frame::Loan {
                    channel,
                    len: u64_at(body, 0),
                    token: u64_at(body, 8),
                }
            }
            _ => {
                no_flags("error", flags)?;
                if body.len() < 4 {
                    return Err(FrameError::BadLength {
                        kind: "error",
                        len: body.len(),
                        expected: "at least 4",
                    });
                }
                let reason = std::str::from_utf8(&body[4..]).map_err(|_| FrameError::BadField {
                    kind: "error",
                    field: "reason",
                    why: "not UTF-8",
                })?;
                Frame::Error {
                    channel,
                    code: u32_at(body, 0),
                    reason,
                }
            }
        };
        Ok(Some((frame, total)))
    }

    fn decode_open(flags: u8, channel: u32, body: &'a [u8]) -> Result<Frame<'a>, FrameError> {
        const K: &str = "open";
        no_flags(K, flags)?;
        if body.len() < OPEN_FIXED {
            return Err(FrameError::BadLength {
                kind: K,
                len: body.len(),
                expected: "at least 16",
            });
        }
        let packet_shift = body[0];
        let mode = body[1];
        let name_len = u16::from_le_bytes([body[2], body[3]]) as usize;
        let recv_buffer = u32_at(body, 4);
        let max_message = u64_at(body, 8);
        if channel == 0 {
            return Err(FrameError::BadField {
                kind: K,
                field: "channel",
                why: "must not be 0",
            });
        }
        if !(3..=16).contains(&packet_shift) {
            return Err(FrameError::BadField {
                kind: K,
                field: "packet_shift",
                why: "outside 3..=16",
            });
        }
        if mode > 1 {
            return Err(FrameError::BadField {
                kind: K,
                field: "mode",
                why: "not 0 or 1",
            });
        }
        if name_len == 0 || name_len > MAX_NAME || body.len() != OPEN_FIXED + name_len {
            return Err(FrameError::BadField {
                kind: K,
                field: "name_len",
                why: "zero, over 255, or not the rest of the body",
            });
        }
        let name = std::str::from_utf8(&body[OPEN_FIXED..]).map_err(|_| FrameError::BadField {
            kind: K,
            field: "name",
            why: "not UTF-8",
        })?;
        Ok(Frame::Open {
            channel,
            packet_shift,
            sync: mode == 1,
            recv_buffer,
            max_message,
            name,
        })
    }

    /// Appends the encoded frame to `out`.
    ///
    /// # Panics
    /// If a body would exceed [`MAX_BODY`] or a name [`MAX_NAME`]; the connection never builds such frames.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Frame::Open {
                channel,
                packet_shift,
                sync,
                recv_buffer,
                max_message,
                name,
            } => {
                assert!(
                    !name.is_empty() && name.len() <= MAX_NAME,
                    "channel name length"
                );
                header(out, KIND_OPEN, 0, channel, OPEN_FIXED + name.len());
                out.push(packet_shift);
                out.push(u8::from(sync));
                out.extend_from_slice(&(name.len() as u16).to_le_bytes());
                out.extend_from_slice(&recv_buffer.to_le_bytes());
                out.extend_from_slice(&max_message.to_le_bytes());
                out.extend_from_slice(name.as_bytes());
                pad(out, OPEN_FIXED + name.len());
            }
            Frame::Data {
                channel,
                last,
                payload,
            } => {
                header(
                    out,
                    KIND_DATA,
                    if last { FLAG_LAST } else { 0 },
                    channel,
                    payload.len(),
                );
                out.extend_from_slice(payload);
                pad(out, payload.len());
            }
            Frame::Credit {
                channel,
                limit,
                delivered,
            } => {
                header(out, KIND_CREDIT, 0, channel, 16);
                out.extend_from_slice(&limit.to_le_bytes());
                out.extend_from_slice(&delivered.to_le_bytes());
            }
            Frame::Blocked { channel, limit } => {
                header(out, KIND_BLOCKED, 0, channel, 8);
                out.extend_from_slice(&limit.to_le_bytes());
                pad(out, 8);
            }
            Frame::Close { channel } => header(out, KIND_CLOSE, 0, channel, 0),
            Frame::Ping { token, reply } => {
                header(out, KIND_PING, if reply { FLAG_REPLY } else { 0 }, 0, 8);
                out.extend_from_slice(&token.to_le_bytes());
                pad(out, 8);
            }
            Frame::Loan {
                channel,
                len,
                token,
            } => {
                header(out, KIND_LOAN, 0, channel, 16);
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(&token.to_le_bytes());
            }
            Frame::Error {
                channel,
                code,
                reason,
            } => {
                let reason = truncate_utf8(reason, MAX_BODY as usize - 4);
                header(out, KIND_ERROR, 0, channel, 4 + reason.len());
                out.extend_from_slice(&code.to_le_bytes());
                out.extend_from_slice(reason.as_bytes());
                pad(out, 4 + reason.len());
            }
        }
    }
}

fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Appends a frame header, reserving room for the body and its padding too (one capacity
/// check per frame).
fn header(out: &mut Vec<u8>, kind: u8, flags: u8, channel: u32, len: usize) {
    assert!(len <= MAX_BODY as usize, "frame body too long");
    out.reserve(frame_len(len));
    out.extend_from_slice(&header_bytes(kind, flags, channel, len));
}

/// Appends the padding after a body of `len` bytes.
#[inline(always)]
fn pad(out: &mut Vec<u8>, len: usize) {
    let p = pad_len(len);
    if p > 0 {
        out.extend_from_slice(&PADDING[..p]);
    }
}

/// Checks the reserved bytes of the header at the front of `buf`.
#[inline(always)]
fn check_reserved(buf: &[u8]) -> Result<(), FrameError> {
    // One test on the way every well-formed frame takes.
    if (u32_at(buf, 0) >> 16) | u32_at(buf, 12) == 0 {
        return Ok(());
    }
    let reserved = u16::from_le_bytes([buf[2], buf[3]]);
    if reserved != 0 {
        return Err(FrameError::Reserved {
            at: 2,
            value: reserved as u32,
        });
    }
    let reserved = u32_at(buf, 12);
    if reserved != 0 {
        return Err(FrameError::Reserved {
            at: 12,
            value: reserved,
        });
    }
    Ok(())
}

/// Checks a data frame's flags and channel; returns its `last` flag.
#[inline(always)]
fn data_fields(flags: u8, channel: u32) -> Result<bool, FrameError> {
    if flags & !FLAG_LAST != 0 {
        return Err(FrameError::BadFlags {
            kind: "data",
            flags,
        });
    }
    if channel == 0 {
        return Err(FrameError::BadField {
            kind: "data",
            field: "channel",
            why: "data on channel 0",
        });
    }
    Ok(flags & FLAG_LAST != 0)
}

/// The header of a data frame at the front of `buf` (at least [`HEADER_LEN`] bytes), checked
/// as [`Frame::decode`] checks it, so that its body can be taken as it arrives: its channel,
/// `last` flag and body length. `None` when the header is not a data frame's; the same error
/// as `decode` would report for a bad one.
pub(crate) fn data_header(buf: &[u8]) -> Result<Option<(u32, bool, usize)>, FrameError> {
    if buf[0] != KIND_DATA {
        return Ok(None);
    }
    check_reserved(buf)?;
    let len = u32_at(buf, 8);
    if len > MAX_BODY {
        return Err(FrameError::TooLong { len, max: MAX_BODY });
    }
    let channel = u32_at(buf, 4);
    let last = data_fields(buf[1], channel)?;
    Ok(Some((channel, last, len as usize)))
}

fn header_bytes(kind: u8, flags: u8, channel: u32, len: usize) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0] = kind;
    h[1] = flags;
    h[4..8].copy_from_slice(&channel.to_le_bytes());
    h[8..12].copy_from_slice(&(len as u32).to_le_bytes());
    h
}

/// Appends the data frames of the message made of `parts` joined (`len` bytes in all), in
/// packets of `packet_size`: the same bytes [`Frame::encode`] appends for each packet of the
/// joined message, without joining it first.
#[inline]
pub(crate) fn extend_data_parts(
    out: &mut Vec<u8>,
    channel: u32,
    parts: &[&[u8]],
    len: usize,
    packet_size: usize,
) {
    debug_assert_eq!(parts.iter().map(|p| p.len()).sum::<usize>(), len);
    out.reserve(data_len(len, packet_size));
    if let [msg] = parts {
        if msg.len() <= packet_size {
            // One packet of one part (the common case of small messages).
            out.extend_from_slice(&header_bytes(KIND_DATA, FLAG_LAST, channel, msg.len()));
            out.extend_from_slice(msg);
            pad(out, msg.len());
            return;
        }
    }
    if len == 0 {
        out.extend_from_slice(&header_bytes(KIND_DATA, FLAG_LAST, channel, 0));
        return;
    }
    let mut rest = parts.iter().copied();
    let mut cur: &[u8] = &[];
    let mut left = len;
    while left > 0 {
        let n = left.min(packet_size);
        left -= n;
        let flags = if left == 0 { FLAG_LAST } else { 0 };
        out.extend_from_slice(&header_bytes(KIND_DATA, flags, channel, n));
        let mut need = n;
        while need > 0 {
            while cur.is_empty() {
                cur = rest.next().expect("the parts hold len bytes");
            }
            let k = need.min(cur.len());
            out.extend_from_slice(&cur[..k]);
            cur = &cur[k..];
            need -= k;
        }
        pad(out, n);
    }
}

/// The channel and payload of `buf` when it is exactly one well-formed data frame that ends
/// its message (the whole of a small message); `None` for anything else, which
/// [`Frame::decode`] then judges.
pub(crate) fn whole_data(buf: &[u8]) -> Option<(u32, &[u8])> {
    let (head, body) = buf.split_first_chunk::<HEADER_LEN>()?;
    let channel = u32_at(head, 4);
    let len = u32_at(head, 8);
    let well_formed = head[0] == KIND_DATA
        && head[1] == FLAG_LAST
        && head[2] == 0
        && head[3] == 0
        && u32_at(head, 12) == 0
        && channel != 0
        && len <= MAX_BODY
        && frame_len(len as usize) == buf.len();
    well_formed.then(|| (channel, &body[..len as usize]))
}

/// The payload sizes of the packets of a message of `len` bytes (one empty packet for an
/// empty message), each with whether it is the last.
pub(crate) fn packet_sizes(
    len: usize,
    packet_size: usize,
) -> impl Iterator<Item = (usize, bool)> + Clone {
    let packets = len.div_ceil(packet_size).max(1);
    (0..packets).map(move |i| {
        let n = (len - i * packet_size).min(packet_size);
        (n, i + 1 == packets)
    })
}

/// The header of a data packet of `len` payload bytes on `channel`.
pub(crate) fn data_header_bytes(channel: u32, len: usize, last: bool) -> [u8; HEADER_LEN] {
    header_bytes(KIND_DATA, if last { FLAG_LAST } else { 0 }, channel, len)
}

/// Bytes of the data frames that carry a message of `len` bytes in packets of `packet_size`
/// (a power of two).
#[inline(always)]
pub(crate) fn data_len(len: usize, packet_size: usize) -> usize {
    debug_assert!(packet_size.is_power_of_two());
    if len <= packet_size {
        // One packet (the common case of small messages).
        return frame_len(len);
    }
    let packets = (len + packet_size - 1) >> packet_size.trailing_zeros();
    // Every packet but the last is a whole packet, a multiple of 8 bytes; only a packet of 8
    // bytes, and the last, are padded.
    let full = packets - 1;
    let last = len - full * packet_size;
    full * frame_len(packet_size) + frame_len(last)
}

/// Writes the data frames of `msg` (packets of `packet_size`) into `out`, which holds exactly
/// [`data_len`] bytes: the same bytes [`Frame::encode`] appends for each packet.
pub(crate) fn write_data(out: &mut [u8], channel: u32, msg: &[u8], packet_size: usize) {
    debug_assert_eq!(out.len(), data_len(msg.len(), packet_size));
    if msg.len() <= packet_size {
        // One packet (the common case of small messages): its header, then the message.
        let (head, body) = out.split_at_mut(HEADER_LEN);
        head.copy_from_slice(&header_bytes(KIND_DATA, FLAG_LAST, channel, msg.len()));
        let (body, padding) = body.split_at_mut(msg.len());
        body.copy_from_slice(msg);
        // A call to memset even for no bytes: most messages need no padding.
        if !padding.is_empty() {
            padding.fill(0);
        }
        return;
    }
    let mut at = 0;
    let mut packets = msg.chunks(packet_size).peekable();
    while let Some(payload) = packets.next() {
        let flags = if packets.peek().is_none() {
            FLAG_LAST
        } else {
            0
        };
        out[at..at + HEADER_LEN].copy_from_slice(&header_bytes(
            KIND_DATA,
            flags,
            channel,
            payload.len(),
        ));
        at += HEADER_LEN;
        out[at..at + payload.len()].copy_from_slice(payload);
        at += payload.len();
        let p = pad_len(payload.len());
        if p > 0 {
            out[at..at + p].fill(0);
        }
        at += p;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(f: Frame<'_>) {
        let mut out = Vec::new();
        f.encode(&mut out);
        let (g, used) = Frame::decode(&out).unwrap().unwrap();
        assert_eq!(used, out.len());
        assert_eq!(f, g);
        for cut in 0..out.len() {
            assert_eq!(
                Frame::decode(&out[..cut]).unwrap(),
                None,
                "prefix of {cut} bytes"
            );
        }
    }

    #[test]
    fn every_kind_roundtrips() {
        roundtrip(Frame::Open {
            channel: 3,
            packet_shift: 12,
            sync: true,
            recv_buffer: 1 << 20,
            max_message: 99,
            name: "pet",
        });
        roundtrip(Frame::Data {
            channel: 1,
            last: true,
            payload: b"hello",
        });
        roundtrip(Frame::Data {
            channel: 1,
            last: false,
            payload: &[7; 64],
        });
        roundtrip(Frame::Credit {
            channel: 0,
            limit: u64::MAX,
            delivered: 5,
        });
        roundtrip(Frame::Blocked {
            channel: 9,
            limit: 1234,
        });
        roundtrip(Frame::Close { channel: 0 });
        roundtrip(Frame::Ping {
            token: 42,
            reply: true,
        });
        roundtrip(Frame::Error {
            channel: 2,
            code: 7,
            reason: "no such service",
        });
        roundtrip(Frame::Loan {
            channel: 2,
            len: 1 << 20,
            token: 3,
        });
    }

    #[test]
    fn unknown_kind_is_an_error() {
        let mut b = [0u8; HEADER_LEN];
        b[0] = 9;
        assert_eq!(Frame::decode(&b), Err(FrameError::UnknownKind(9)));
        b[0] = 0x42;
        assert_eq!(Frame::decode(&b), Err(FrameError::UnknownKind(0x42)));
        b[0] = 0;
        assert_eq!(Frame::decode(&b), Err(FrameError::UnknownKind(0)));
    }

    #[test]
    fn oversized_length_is_rejected_before_the_body_arrives() {
        let mut b = Vec::new();
        header(&mut b, KIND_DATA, 0, 1, 0);
        b[8..12].copy_from_slice(&(MAX_BODY + 1).to_le_bytes());
        assert!(matches!(Frame::decode(&b), Err(FrameError::TooLong { .. })));
    }

    #[test]
    fn wrong_body_lengths_and_flags_are_errors() {
        let mut b = Vec::new();
        header(&mut b, KIND_CREDIT, 0, 1, 3);
        b.extend_from_slice(&[0; 3]);
        pad(&mut b, 3);
        assert!(matches!(
            Frame::decode(&b),
            Err(FrameError::BadLength { kind: "credit", .. })
        ));
        let mut b = Vec::new();
        header(&mut b, KIND_CLOSE, 0x80, 1, 0);
        assert!(matches!(
            Frame::decode(&b),
            Err(FrameError::BadFlags { kind: "close", .. })
        ));
        let mut b = Vec::new();
        Frame::Close { channel: 1 }.encode(&mut b);
        b[2] = 1;
        assert_eq!(
            Frame::decode(&b),
            Err(FrameError::Reserved { at: 2, value: 1 })
        );
        b[2] = 0;
        b[13] = 1;
        assert_eq!(
            Frame::decode(&b),
            Err(FrameError::Reserved {
                at: 12,
                value: 0x100
            })
        );
    }

    #[test]
    fn frames_are_padded_to_sixteen_bytes() {
        for len in [0usize, 1, 8, 15, 16, 17, 4095, 65536] {
            let payload = vec![7u8; len];
            let mut b = Vec::new();
            Frame::Data {
                channel: 3,
                last: true,
                payload: &payload,
            }
            .encode(&mut b);
            assert_eq!(b.len() % ALIGN, 0, "body {len}");
            assert_eq!(b.len(), frame_len(len));
            assert!(b[HEADER_LEN + len..].iter().all(|&x| x == 0));
            let (f, used) = Frame::decode(&b).unwrap().unwrap();
            assert_eq!(used, b.len());
            assert!(matches!(f, Frame::Data { payload: p, .. } if p.len() == len));
            // A frame is whole only with its padding.
            if pad_len(len) > 0 {
                assert_eq!(Frame::decode(&b[..b.len() - 1]).unwrap(), None);
            }
        }
        for msg in [0usize, 5, 8, 100, 4096, 70_000] {
            for packet in [8usize, 16, 4096, 65536] {
                let m = vec![1u8; msg];
                let mut out = vec![0xaa; data_len(msg, packet)];
                write_data(&mut out, 5, &m, packet);
                let mut joined = Vec::new();
                extend_data_parts(&mut joined, 5, &[&m[..msg / 2], &m[msg / 2..]], msg, packet);
                assert_eq!(out, joined, "message {msg}, packets of {packet}");
                assert_eq!(out.len() % ALIGN, 0);
            }
        }
    }

    #[test]
    fn open_with_bad_fields_is_an_error() {
        let mut b = Vec::new();
        Frame::Open {
            channel: 1,
            packet_shift: 3,
            sync: false,
            recv_buffer: 8,
            max_message: 8,
            name: "x",
        }
        .encode(&mut b);
        let mut bad = b.clone();
        bad[HEADER_LEN] = 17;
        assert!(matches!(
            Frame::decode(&bad),
            Err(FrameError::BadField {
                field: "packet_shift",
                ..
            })
        ));
        let mut bad = b.clone();
        bad[HEADER_LEN + OPEN_FIXED] = 0xff;
        assert!(matches!(
            Frame::decode(&bad),
            Err(FrameError::BadField { field: "name", .. })
        ));
        let mut bad = b;
        bad[HEADER_LEN + 2] = 2;
        assert!(matches!(
            Frame::decode(&bad),
            Err(FrameError::BadField {
                field: "name_len",
                ..
            })
        ));
    }
}
