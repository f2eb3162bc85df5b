//! Submission and completion records of the off-host queues (`[Off-host]`'s control blocks on the
//! to-network queue and acknowledgement blocks on the from-network queue).
//!
//! A host that offloads its transport talks only to its local engine, over the two rings of a
//! shared-memory segment: **submission records** host -> engine, **completion records**
//! engine -> host. Every submission ends in exactly one completion carrying the submission's
//! `id`. A record is a 32-byte header and a body; all integers are little-endian. Either a
//! ring record holds it inline, or (for large messages) it fills the data range of a pool
//! buffer that the ring record names by descriptor; the bytes are the same either way.
//!
//! # Submission header
//!
//! | offset | size | field    | meaning                                                           |
//! |-------:|-----:|----------|-------------------------------------------------------------------|
//! | 0      | 1    | op       | 1 hello, 2 open, 3 send, 4 recv, 5 close                          |
//! | 1      | 1    | flags    | open: bit 0 urgent; every other op: 0                             |
//! | 2      | 2    | reserved | zero                                                              |
//! | 4      | 4    | handle   | the host's channel handle (chosen by the host at open; 0 for hello) |
//! | 8      | 8    | id       | the host's id for this submission, returned in its completion     |
//! | 16     | 4    | len      | body bytes after the header (exactly)                             |
//! | 20     | 4    | arg      | recv: largest message the host takes (0: any); else 0             |
//! | 24     | 8    | value    | open: rate in bytes/s (0: unlimited); else 0                      |
//!
//! Bodies: hello `magic: [u8; 8]` ([`MAGIC`]), `version: u32`, `reserved: u32` (16 bytes);
//! open `burst: u64` (bytes; 0 when the rate is 0, else at least 1) then the address (UTF-8,
//! 1 to [`MAX_ADDRESS`] bytes); send: the message; recv and close: empty.
//!
//! # Completion header
//!
//! | offset | size | field    | meaning                                                             |
//! |-------:|-----:|----------|---------------------------------------------------------------------|
//! | 0      | 1    | op       | the op of the submission completed, or 6 refused (the engine closes the queue) |
//! | 1      | 1    | status   | 0 ok, 1 error, 2 end (recv: the channel has ended)                 |
//! | 2      | 2    | code     | error: an [`ErrorCode`]; else 0                                     |
//! | 4      | 4    | handle   | the submission's handle                                             |
//! | 8      | 8    | id       | the submission's id                                                 |
//! | 16     | 4    | len      | body bytes after the header (exactly)                               |
//! | 20     | 4    | reserved | zero                                                                |
//! | 24     | 8    | value    | send ok: bytes delivered; recv ok: the message's length; else 0    |
//!
//! Bodies: hello ok: the engine's [`QueueLimits`] (24 bytes); recv ok: the message; error and
//! refused: the reason (UTF-8, at most [`MAX_REASON`] bytes); otherwise empty.
//!
//! Decoding checks every field: known op, defined flags, zero reserved bytes, the body length
//! against the record, UTF-8 and lengths of text, the burst against the rate. The header is
//! decoded from a copy ([`SubmissionHeader::decode`] takes an array), so a peer rewriting
//! shared memory while it is read cannot change what was checked.

mod completion;
mod submission;

pub use completion::{Completion, CompletionHeader, QueueLimits, Status};
pub use submission::{Submission, SubmissionHeader};

/// Bytes of a submission or completion header.
pub const HEADER: usize = 32;
/// The first bytes of a hello body: `OFFHQ`, two zero bytes, and the major version.
pub const MAGIC: [u8; 8] = *b"OFFHQ\0\0\x01";
/// Version of the record format.
pub const VERSION: u32 = 1;
/// Longest address (`[PEER/]CHANNEL`) of an open, in bytes.
pub const MAX_ADDRESS: usize = 255;
/// Longest reason of an error completion, in bytes.
pub const MAX_REASON: usize = 1024;
/// Bytes of a hello submission's body.
pub const HELLO_BODY: usize = 16;
/// Bytes of [`QueueLimits`] in a hello completion.
pub const LIMITS_BODY: usize = 24;

/// What a submission asks for (and which submission a completion completes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// The first record of a queue: magic and version.
    Hello,
    /// Open a channel handle to an address.
    Open,
    /// Send a message on a channel.
    Send,
    /// Receive a message on a channel.
    Recv,
    /// Close a channel handle.
    Close,
    /// Completion only: the engine refuses this host and closes its queue.
    Refused,
}

impl Op {
    /// The byte on the wire.
    pub fn to_wire(self) -> u8 {
        match self {
            Op::Hello => 1,
            Op::Open => 2,
            Op::Send => 3,
            Op::Recv => 4,
            Op::Close => 5,
            Op::Refused => 6,
        }
    }

    /// The op of a wire byte.
    pub fn from_wire(b: u8) -> Option<Op> {
        Some(match b {
            1 => Op::Hello,
            2 => Op::Open,
            3 => Op::Send,
            4 => Op::Recv,
            5 => Op::Close,
            6 => Op::Refused,
            _ => return None,
        })
    }

    /// Lowercase name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Op::Hello => "hello",
            Op::Open => "open",
            Op::Send => "send",
            Op::Recv => "recv",
            Op::Close => "close",
            Op::Refused => "refused",
        }
    }
}

/// Why a submission failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The host sent a record that does not decode; its queue is closed.
    BadRecord,
    /// The address names no peer the engine knows.
    UnknownPeer,
    /// The engine could not reach the peer.
    Unreachable,
    /// The link to the peer failed before the peer acknowledged the message.
    LinkFailed,
    /// The message is larger than the engine's or the receive's limit.
    TooLarge,
    /// A budget of the host or the engine is spent (outstanding, bytes, channels, hosts, links).
    Budget,
    /// The handle is not open (or already open, at open).
    BadHandle,
    /// The channel was closed.
    Closed,
    /// The address is not `[PEER/]CHANNEL`.
    BadAddress,
    /// The engine is shutting down.
    Shutdown,
    /// The local engine went away (made by the host's side of the queue, never sent).
    EngineGone,
    /// The remote engine refused the channel (no such pipeline input, over its budget).
    Refused,
    /// A code this version does not know.
    Other(u16),
}

impl ErrorCode {
    /// The code on the wire.
    pub fn to_wire(self) -> u16 {
        match self {
            ErrorCode::BadRecord => 1,
            ErrorCode::UnknownPeer => 2,
            ErrorCode::Unreachable => 3,
            ErrorCode::LinkFailed => 4,
            ErrorCode::TooLarge => 5,
            ErrorCode::Budget => 6,
            ErrorCode::BadHandle => 7,
            ErrorCode::Closed => 8,
            ErrorCode::BadAddress => 9,
            ErrorCode::Shutdown => 10,
            ErrorCode::EngineGone => 11,
            ErrorCode::Refused => 12,
            ErrorCode::Other(c) => c,
        }
    }

    /// The code of a wire value.
    pub fn from_wire(c: u16) -> ErrorCode {
        match c {
            1 => ErrorCode::BadRecord,
            2 => ErrorCode::UnknownPeer,
            3 => ErrorCode::Unreachable,
            4 => ErrorCode::LinkFailed,
            5 => ErrorCode::TooLarge,
            6 => ErrorCode::Budget,
            7 => ErrorCode::BadHandle,
            8 => ErrorCode::Closed,
            9 => ErrorCode::BadAddress,
            10 => ErrorCode::Shutdown,
            11 => ErrorCode::EngineGone,
            12 => ErrorCode::Refused,
            c => ErrorCode::Other(c),
        }
    }

    /// Lowercase name for messages.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::BadRecord => "bad record",
            ErrorCode::UnknownPeer => "unknown peer",
            ErrorCode::Unreachable => "peer unreachable",
            ErrorCode::LinkFailed => "link failed",
            ErrorCode::TooLarge => "too large",
            ErrorCode::Budget => "over budget",
            ErrorCode::BadHandle => "bad handle",
            ErrorCode::Closed => "closed",
            ErrorCode::BadAddress => "bad address",
            ErrorCode::Shutdown => "shutting down",
            ErrorCode::EngineGone => "engine gone",
            ErrorCode::Refused => "refused by the remote engine",
            ErrorCode::Other(_) => "error",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ErrorCode::Other(c) => write!(f, "error {c}"),
            e => f.write_str(e.name()),
        }
    }
}

/// A record did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// Shorter than a header.
    #[error("record of {0} bytes is shorter than the 32-byte header")]
    Short(usize),
    /// The op byte names no op.
    #[error("unknown op {0:#04x}")]
    UnknownOp(u8),
    /// The header's length does not match the record.
    #[error("{op} record says {said} body bytes, carries {found}")]
    Length {
        /// The op.
        op: &'static str,
        /// The header's `len`.
        said: u32,
        /// The bytes after the header.
        found: usize,
    },
    /// A field holds a value its op does not allow.
    #[error("{op} record field {field}: {why}")]
    Field {
        /// The op.
        op: &'static str,
        /// The field.
        field: &'static str,
        /// What is wrong.
        why: &'static str,
    },
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Copies the first [`HEADER`] bytes of `record` out (one read of each byte), or says it is
/// too short.
pub fn header_of(record: &[u8]) -> Result<[u8; HEADER], RecordError> {
    let mut h = [0u8; HEADER];
    let src = record
        .get(..HEADER)
        .ok_or(RecordError::Short(record.len()))?;
    h.copy_from_slice(src);
    Ok(h)
}

#[cfg(test)]
mod tests;
