//! Errors of the protocol: frame decoding, peer violations, and local misuse.

/// A frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The kind byte names no known frame.
    #[error("unknown frame kind {0:#04x}")]
    UnknownKind(u8),
    /// Reserved header bytes were not zero.
    #[error("reserved header bytes at offset {at} are {value:#x}, expected zero")]
    Reserved {
        /// Offset of the reserved field in the header (2 or 12).
        at: u8,
        /// What they held.
        value: u32,
    },
    /// The body length in the header is larger than any frame may be.
    #[error("frame body of {len} bytes exceeds the limit of {max}")]
    TooLong {
        /// Body length from the header.
        len: u32,
        /// Largest body allowed.
        max: u32,
    },
    /// The body is shorter or longer than its kind requires.
    #[error("{kind} frame body has {len} bytes, expected {expected}")]
    BadLength {
        /// Name of the frame kind.
        kind: &'static str,
        /// Body length found.
        len: usize,
        /// What the kind requires, in words.
        expected: &'static str,
    },
    /// A flag bit is set that the frame kind does not define.
    #[error("{kind} frame has undefined flags {flags:#04x}")]
    BadFlags {
        /// Name of the frame kind.
        kind: &'static str,
        /// The flags byte.
        flags: u8,
    },
    /// A field holds a value outside its range.
    #[error("{kind} frame field {field} is invalid: {why}")]
    BadField {
        /// Name of the frame kind.
        kind: &'static str,
        /// Name of the field.
        field: &'static str,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// The peer broke the protocol, or the link failed; the connection is closed after this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtoError {
    /// A frame was malformed.
    #[error("malformed frame at link byte {offset}: {source}")]
    Frame {
        /// Offset of the frame's first byte in the incoming byte stream.
        offset: u64,
        /// What was wrong.
        source: FrameError,
    },
    /// A frame named a channel that was never opened.
    #[error("frame for unknown channel {0}")]
    UnknownChannel(u32),
    /// The peer opened a channel with an id that is in use, out of order, or of the wrong parity.
    #[error("peer opened channel {0} with an invalid or reused id")]
    BadChannelId(u32),
    /// The peer sent more bytes than it was granted.
    #[error("peer overran its credit on channel {channel}: offset {offset} beyond limit {limit}")]
    CreditOverrun {
        /// Channel (0 for the link as a whole).
        channel: u32,
        /// Byte offset the peer reached.
        offset: u64,
        /// Limit we had granted.
        limit: u64,
    },
    /// A data packet was not the channel's packet size and not the last of its message.
    #[error("channel {channel}: packet of {len} bytes, packet size is {packet_size}")]
    BadPacket {
        /// Channel.
        channel: u32,
        /// Payload length received.
        len: usize,
        /// The channel's packet size.
        packet_size: usize,
    },
    /// A reassembled message grew beyond the channel's maximum message size.
    #[error("channel {channel}: message exceeds maximum of {max} bytes")]
    MessageTooLong {
        /// Channel.
        channel: u32,
        /// Maximum message size of the channel.
        max: u64,
    },
    /// Data arrived on a channel after the peer closed its sending side.
    #[error("data on channel {0} after end of stream")]
    DataAfterClose(u32),
    /// The peer reported a fatal error and closed the link.
    #[error("peer error {code}: {reason}")]
    Peer {
        /// Error code sent by the peer.
        code: u32,
        /// Reason sent by the peer.
        reason: String,
    },
    /// The peer went past one of this side's [`Limits`](crate::Limits) in a way that a
    /// refused channel cannot answer.
    #[error("the peer kept more {what}, {over}")]
    OverLimit {
        /// What was counted.
        what: &'static str,
        /// The limit and its value.
        #[source]
        over: offhost_units::OverLimit,
    },
    /// The link was already closed or failed.
    #[error("link is closed")]
    LinkClosed,
}

/// A local call could not be carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// Not enough credit right now; try again after the peer grants more.
    #[error("would block: no credit")]
    Blocked,
    /// The message is larger than the channel's maximum message size.
    #[error("message of {len} bytes exceeds the channel maximum of {max}")]
    TooLarge {
        /// Length of the message.
        len: usize,
        /// Channel maximum.
        max: u64,
    },
    /// This side already closed its sending direction of the channel.
    #[error("channel is closed for sending")]
    Closed,
    /// The channel id is not open on this connection.
    #[error("no such channel {0}")]
    NoChannel(u32),
    /// The peer refused or reset the channel.
    #[error("channel reset by peer (code {code}): {reason}")]
    Reset {
        /// Error code sent by the peer.
        code: u32,
        /// Reason sent by the peer.
        reason: String,
    },
    /// Channel options are out of range.
    #[error("invalid channel options: {0}")]
    BadOptions(&'static str),
    /// The link is closed or failed.
    #[error("link is closed")]
    LinkClosed,
}
