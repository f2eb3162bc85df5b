//! Submission records: host -> engine.

use super::{
    header_of, u16_at, u32_at, u64_at, Op, RecordError, HEADER, HELLO_BODY, MAGIC, MAX_ADDRESS,
};

const FLAG_URGENT: u8 = 1;
/// The open body's fixed part: `burst: u64`.
const OPEN_FIXED: usize = 8;

/// A submission header, decoded from a copy of the record's first [`HEADER`] bytes and checked
/// on its own (the body is checked by [`Submission::parse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmissionHeader {
    /// What is asked.
    pub op: Op,
    /// Open: bit 0 urgent.
    pub flags: u8,
    /// The host's channel handle.
    pub handle: u32,
    /// The host's id of this submission.
    pub id: u64,
    /// Body bytes after the header.
    pub len: u32,
    /// Recv: the largest message the host takes (0: any).
    pub arg: u32,
    /// Open: the rate in bytes per second (0: unlimited).
    pub value: u64,
}

impl SubmissionHeader {
    /// Decodes and checks a header: known op, defined flags, zero reserved bytes, and the
    /// fields each op leaves zero, and a body length the op allows.
    pub fn decode(h: &[u8; HEADER]) -> Result<SubmissionHeader, RecordError> {
        let op = match Op::from_wire(h[0]) {
            Some(Op::Refused) | None => return Err(RecordError::UnknownOp(h[0])),
            Some(op) => op,
        };
        let field = |field, why| RecordError::Field {
            op: op.name(),
            field,
            why,
        };
        let hdr = SubmissionHeader {
            op,
            flags: h[1],
            handle: u32_at(h, 4),
            id: u64_at(h, 8),
            len: u32_at(h, 16),
            arg: u32_at(h, 20),
            value: u64_at(h, 24),
        };
        if u16_at(h, 2) != 0 {
            return Err(field("reserved", "must be zero"));
        }
        let flags_ok = match op {
            Op::Open => hdr.flags & !FLAG_URGENT == 0,
            _ => hdr.flags == 0,
        };
        if !flags_ok {
            return Err(field("flags", "undefined bits set"));
        }
        if op != Op::Recv && hdr.arg != 0 {
            return Err(field("arg", "must be zero"));
        }
        if op != Op::Open && hdr.value != 0 {
            return Err(field("value", "must be zero"));
        }
        if op == Op::Hello && (hdr.handle != 0 || hdr.id != 0) {
            return Err(field("handle", "hello carries neither handle nor id"));
        }
        let len = hdr.len as usize;
        let len_ok = match op {
            Op::Hello => len == HELLO_BODY,
            Op::Open => (OPEN_FIXED + 1..=OPEN_FIXED + MAX_ADDRESS).contains(&len),
            Op::Recv | Op::Close => len == 0,
            Op::Send => true,
            Op::Refused => false,
        };
        if !len_ok {
            return Err(field("len", "body length not allowed for this op"));
        }
        Ok(hdr)
    }
}

/// One submission; a send's message and an open's address borrow the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submission<'a> {
    /// The first record of a queue.
    Hello {
        /// The host's version of the record format.
        version: u32,
    },
    /// Open `handle` to `address` (`[PEER/]CHANNEL`).
    Open {
        /// The host's new handle.
        handle: u32,
        /// Submission id.
        id: u64,
        /// Urgent channels are never queued behind bulk ones.
        urgent: bool,
        /// Bytes per second the engine lets this channel send (0: unlimited).
        rate: u64,
        /// Bytes the channel may send at once after idling (0 when `rate` is 0).
        burst: u64,
        /// Where the channel leads.
        address: &'a str,
    },
    /// Send `data` on `handle`.
    Send {
        /// Channel handle.
        handle: u32,
        /// Submission id.
        id: u64,
        /// The message.
        data: &'a [u8],
    },
    /// Receive the next message of `handle`.
    Recv {
        /// Channel handle.
        handle: u32,
        /// Submission id.
        id: u64,
        /// The largest message the host takes (0: any).
        max: u32,
    },
    /// Close `handle`: its posted receives end, later submissions on it fail.
    Close {
        /// Channel handle.
        handle: u32,
        /// Submission id.
        id: u64,
    },
}

impl<'a> Submission<'a> {
    /// Decodes a whole record (header and body).
    pub fn decode(record: &'a [u8]) -> Result<Submission<'a>, RecordError> {
        let h = SubmissionHeader::decode(&header_of(record)?)?;
        Self::parse(&h, &record[HEADER..])
    }

    /// Checks `body` (the bytes after the header) against the decoded header `h`.
    pub fn parse(h: &SubmissionHeader, body: &'a [u8]) -> Result<Submission<'a>, RecordError> {
        if body.len() != h.len as usize {
            return Err(RecordError::Length {
                op: h.op.name(),
                said: h.len,
                found: body.len(),
            });
        }
        let field = |field, why| RecordError::Field {
            op: h.op.name(),
            field,
            why,
        };
        Ok(match h.op {
            Op::Hello => {
                if body[..8] != MAGIC {
                    return Err(field("magic", "not an offload queue"));
                }
                if u32_at(body, 12) != 0 {
                    return Err(field("reserved", "must be zero"));
                }
                Submission::Hello {
                    version: u32_at(body, 8),
                }
            }
            Op::Open => {
                let burst = u64_at(body, 0);
                if (h.value == 0) != (burst == 0) {
                    return Err(field("burst", "zero exactly when the rate is zero"));
                }
                let address = std::str::from_utf8(&body[OPEN_FIXED..])
                    .map_err(|_| field("address", "not UTF-8"))?;
                Submission::Open {
                    handle: h.handle,
                    id: h.id,
                    urgent: h.flags & FLAG_URGENT != 0,
                    rate: h.value,
                    burst,
                    address,
                }
            }
            Op::Send => Submission::Send {
                handle: h.handle,
                id: h.id,
                data: body,
            },
            Op::Recv => Submission::Recv {
                handle: h.handle,
                id: h.id,
                max: h.arg,
            },
            Op::Close => Submission::Close {
                handle: h.handle,
                id: h.id,
            },
            Op::Refused => return Err(RecordError::UnknownOp(Op::Refused.to_wire())),
        })
    }

    /// The op.
    pub fn op(&self) -> Op {
        match self {
            Submission::Hello { .. } => Op::Hello,
            Submission::Open { .. } => Op::Open,
            Submission::Send { .. } => Op::Send,
            Submission::Recv { .. } => Op::Recv,
            Submission::Close { .. } => Op::Close,
        }
    }

    /// The submission's id (0 for hello).
    pub fn id(&self) -> u64 {
        match *self {
            Submission::Hello { .. } => 0,
            Submission::Open { id, .. }
            | Submission::Send { id, .. }
            | Submission::Recv { id, .. }
            | Submission::Close { id, .. } => id,
        }
    }

    /// The channel handle (0 for hello).
    pub fn handle(&self) -> u32 {
        match *self {
            Submission::Hello { .. } => 0,
            Submission::Open { handle, .. }
            | Submission::Send { handle, .. }
            | Submission::Recv { handle, .. }
            | Submission::Close { handle, .. } => handle,
        }
    }

    fn body_len(&self) -> usize {
        match self {
            Submission::Hello { .. } => HELLO_BODY,
            Submission::Open { address, .. } => OPEN_FIXED + address.len(),
            Submission::Send { data, .. } => data.len(),
            Submission::Recv { .. } | Submission::Close { .. } => 0,
        }
    }

    /// Bytes of the encoded record.
    pub fn encoded_len(&self) -> usize {
        HEADER + self.body_len()
    }

    /// Writes the record into `out`, which must be exactly [`encoded_len`](Self::encoded_len)
    /// bytes.
    ///
    /// # Panics
    ///
    /// If `out` has another length, or the submission could not decode (an address that is
    /// empty or longer than [`MAX_ADDRESS`], a burst that does not match the rate, a body over
    /// 4 GiB): callers build them from checked values.
    pub fn encode(&self, out: &mut [u8]) {
        assert_eq!(out.len(), self.encoded_len(), "record buffer length");
        let body_len = u32::try_from(self.body_len()).expect("body under 4 GiB");
        let (flags, arg, value) = match *self {
            Submission::Open {
                urgent,
                rate,
                burst,
                address,
                ..
            } => {
                assert!(
                    !address.is_empty() && address.len() <= MAX_ADDRESS,
                    "address length"
                );
                assert_eq!(rate == 0, burst == 0, "burst exactly when a rate");
                (u8::from(urgent), 0, rate)
            }
            Submission::Recv { max, .. } => (0, max, 0),
            _ => (0, 0, 0),
        };
        let (h, body) = out.split_at_mut(HEADER);
        write_header(
            h,
            self.op().to_wire(),
            flags,
            self.handle(),
            self.id(),
            body_len,
            arg,
            value,
        );
        match *self {
            Submission::Hello { version } => {
                body[..8].copy_from_slice(&MAGIC);
                body[8..12].copy_from_slice(&version.to_le_bytes());
                body[12..16].fill(0);
            }
            Submission::Open { burst, address, .. } => {
                body[..8].copy_from_slice(&burst.to_le_bytes());
                body[8..].copy_from_slice(address.as_bytes());
            }
            Submission::Send { data, .. } => body.copy_from_slice(data),
            Submission::Recv { .. } | Submission::Close { .. } => {}
        }
    }

    /// Writes the header of a send of `len` bytes into `out` (the message then follows it), so
    /// a message can be written in place after its header.
    pub fn encode_send_header(handle: u32, id: u64, len: u32, out: &mut [u8]) {
        write_header(
            &mut out[..HEADER],
            Op::Send.to_wire(),
            0,
            handle,
            id,
            len,
            0,
            0,
        );
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn write_header(
    h: &mut [u8],
    op: u8,
    flags: u8,
    handle: u32,
    id: u64,
    len: u32,
    arg: u32,
    value: u64,
) {
    h[0] = op;
    h[1] = flags;
    h[2..4].fill(0);
    h[4..8].copy_from_slice(&handle.to_le_bytes());
    h[8..16].copy_from_slice(&id.to_le_bytes());
    h[16..20].copy_from_slice(&len.to_le_bytes());
    h[20..24].copy_from_slice(&arg.to_le_bytes());
    h[24..32].copy_from_slice(&value.to_le_bytes());
}
