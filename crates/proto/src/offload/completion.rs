//! Completion records: engine -> host.

use super::{
    header_of, u16_at, u32_at, u64_at, ErrorCode, Op, RecordError, HEADER, LIMITS_BODY, MAX_REASON,
};

/// How a submission ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Done: a send delivered, a receive with its message, an open or close done.
    Ok,
    /// Failed, with the reason in the body.
    Error(ErrorCode),
    /// A receive found its channel ended: no more messages will come.
    End,
}

/// What an engine grants a host: its budgets, sent in the hello's completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    /// Submissions the host may have outstanding (not yet completed).
    pub max_outstanding: u32,
    /// Channel handles the host may hold open.
    pub max_channels: u32,
    /// Bytes of sends the host may have outstanding.
    pub max_bytes: u64,
    /// Largest message.
    pub max_message: u32,
    /// Largest receive the engine completes inline in the ring; larger ones come in a pool
    /// buffer.
    pub inline_max: u32,
}

impl QueueLimits {
    /// The 24-byte body of a hello completion.
    pub fn encode(&self) -> [u8; LIMITS_BODY] {
        let mut b = [0u8; LIMITS_BODY];
        b[0..4].copy_from_slice(&self.max_outstanding.to_le_bytes());
        b[4..8].copy_from_slice(&self.max_channels.to_le_bytes());
        b[8..16].copy_from_slice(&self.max_bytes.to_le_bytes());
        b[16..20].copy_from_slice(&self.max_message.to_le_bytes());
        b[20..24].copy_from_slice(&self.inline_max.to_le_bytes());
        b
    }

    /// Decodes a hello completion's body; every limit must be at least 1.
    pub fn decode(b: &[u8]) -> Result<QueueLimits, RecordError> {
        if b.len() != LIMITS_BODY {
            return Err(RecordError::Length {
                op: "hello",
                said: LIMITS_BODY as u32,
                found: b.len(),
            });
        }
        let l = QueueLimits {
            max_outstanding: u32_at(b, 0),
            max_channels: u32_at(b, 4),
            max_bytes: u64_at(b, 8),
            max_message: u32_at(b, 16),
            inline_max: u32_at(b, 20),
        };
        if l.max_outstanding == 0 || l.max_channels == 0 || l.max_bytes == 0 || l.max_message == 0 {
            return Err(RecordError::Field {
                op: "hello",
                field: "limits",
                why: "a limit of zero",
            });
        }
        Ok(l)
    }
}

/// A completion header, decoded from a copy of the record's first [`HEADER`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletionHeader {
    /// The op of the submission completed ([`Op::Refused`]: the queue is closed).
    pub op: Op,
    /// How it ended.
    pub status: Status,
    /// The submission's handle.
    pub handle: u32,
    /// The submission's id.
    pub id: u64,
    /// Body bytes after the header.
    pub len: u32,
    /// Send: bytes delivered; recv: the message's length.
    pub value: u64,
}

impl CompletionHeader {
    /// Decodes and checks a header on its own.
    pub fn decode(h: &[u8; HEADER]) -> Result<CompletionHeader, RecordError> {
        let op = Op::from_wire(h[0]).ok_or(RecordError::UnknownOp(h[0]))?;
        let field = |field, why| RecordError::Field {
            op: op.name(),
            field,
            why,
        };
        let code = u16_at(h, 2);
        let status = match (h[1], code) {
            (0, 0) => Status::Ok,
            (1, c) if c != 0 => Status::Error(ErrorCode::from_wire(c)),
            (2, 0) => Status::End,
            (0 | 2, _) => return Err(field("code", "set without an error")),
            (1, _) => return Err(field("code", "an error needs a code")),
            _ => return Err(field("status", "unknown status")),
        };
        let hdr = CompletionHeader {
            op,
            status,
            handle: u32_at(h, 4),
            id: u64_at(h, 8),
            len: u32_at(h, 16),
            value: u64_at(h, 24),
        };
        if u32_at(h, 20) != 0 {
            return Err(field("reserved", "must be zero"));
        }
        if status == Status::End && op != Op::Recv {
            return Err(field("status", "only a receive ends"));
        }
        if op == Op::Refused && !matches!(status, Status::Error(_)) {
            return Err(field("status", "a refusal is an error"));
        }
        let len = hdr.len as usize;
        let len_ok = match (op, status) {
            (_, Status::Error(_)) => len <= MAX_REASON,
            (Op::Hello, Status::Ok) => len == LIMITS_BODY,
            (Op::Recv, Status::Ok) => true,
            _ => len == 0,
        };
        if !len_ok {
            return Err(field("len", "body length not allowed here"));
        }
        let value_ok = match (op, status) {
            (Op::Recv, Status::Ok) => hdr.value == u64::from(hdr.len),
            (Op::Send, Status::Ok) => true,
            _ => hdr.value == 0,
        };
        if !value_ok {
            return Err(field("value", "does not fit the op and status"));
        }
        Ok(hdr)
    }
}

/// One completion; a received message or a reason borrows the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion<'a> {
    /// The op of the submission completed.
    pub op: Op,
    /// How it ended.
    pub status: Status,
    /// The submission's handle.
    pub handle: u32,
    /// The submission's id.
    pub id: u64,
    /// Send: bytes delivered; recv: the message's length.
    pub value: u64,
    /// Recv: the message; error: the reason (UTF-8); hello: the [`QueueLimits`].
    pub body: &'a [u8],
}

impl<'a> Completion<'a> {
    /// Decodes a whole record (header and body).
    pub fn decode(record: &'a [u8]) -> Result<Completion<'a>, RecordError> {
        let h = CompletionHeader::decode(&header_of(record)?)?;
        Self::parse(&h, &record[HEADER..])
    }

    /// Checks `body` (the bytes after the header) against the decoded header `h`.
    pub fn parse(h: &CompletionHeader, body: &'a [u8]) -> Result<Completion<'a>, RecordError> {
        if body.len() != h.len as usize {
            return Err(RecordError::Length {
                op: h.op.name(),
                said: h.len,
                found: body.len(),
            });
        }
        match (h.op, h.status) {
            (_, Status::Error(_)) => {
                std::str::from_utf8(body).map_err(|_| RecordError::Field {
                    op: h.op.name(),
                    field: "reason",
                    why: "not UTF-8",
                })?;
            }
            (Op::Hello, Status::Ok) => {
                QueueLimits::decode(body)?;
            }
            _ => {}
        }
        Ok(Completion {
            op: h.op,
            status: h.status,
            handle: h.handle,
            id: h.id,
            value: h.value,
            body,
        })
    }

    /// The reason of an error completion ("" otherwise).
    pub fn reason(&self) -> &'a str {
        match self.status {
            Status::Error(_) => std::str::from_utf8(self.body).unwrap_or(""),
            _ => "",
        }
    }

    /// Bytes of the encoded record.
    pub fn encoded_len(&self) -> usize {
        HEADER + self.body.len()
    }

    /// Writes the record into `out`, exactly [`encoded_len`](Self::encoded_len) bytes.
    ///
    /// # Panics
    ///
    /// If `out` has another length or the completion could not decode (callers build them
    /// from checked values; [`Completion::error`] cuts reasons to [`MAX_REASON`]).
    pub fn encode(&self, out: &mut [u8]) {
        assert_eq!(out.len(), self.encoded_len(), "record buffer length");
        let len = u32::try_from(self.body.len()).expect("body under 4 GiB");
        Self::encode_header(
            self.op,
            self.status,
            self.handle,
            self.id,
            len,
            self.value,
            &mut out[..HEADER],
        );
        out[HEADER..].copy_from_slice(self.body);
    }

    /// Writes a header alone (the body of `len` bytes is written after it by the caller).
    pub fn encode_header(
        op: Op,
        status: Status,
        handle: u32,
        id: u64,
        len: u32,
        value: u64,
        out: &mut [u8],
    ) {
        let (st, code) = match status {
            Status::Ok => (0u8, 0u16),
            Status::Error(c) => (1, c.to_wire()),
            Status::End => (2, 0),
        };
        out[0] = op.to_wire();
        out[1] = st;
        out[2..4].copy_from_slice(&code.to_le_bytes());
        out[4..8].copy_from_slice(&handle.to_le_bytes());
        out[8..16].copy_from_slice(&id.to_le_bytes());
        out[16..20].copy_from_slice(&len.to_le_bytes());
        out[20..24].fill(0);
        out[24..32].copy_from_slice(&value.to_le_bytes());
    }

    /// An error completion whose reason is `reason` cut to [`MAX_REASON`] bytes (at a
    /// character boundary).
    pub fn error(op: Op, code: ErrorCode, handle: u32, id: u64, reason: &'a str) -> Completion<'a> {
        let mut end = reason.len().min(MAX_REASON);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        Completion {
            op,
            status: Status::Error(code),
            handle,
            id,
            value: 0,
            body: &reason.as_bytes()[..end],
        }
    }
}
