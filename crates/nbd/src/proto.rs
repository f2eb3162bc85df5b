//! Sans-IO encoding and decoding of NBD wire messages (NetworkBlockDevice/nbd `doc/proto.md`).
//!
//! Nothing here touches a socket: functions turn bytes into typed messages and back, so the
//! parsers can be tested and fuzzed on their own. All integers are big-endian on the wire.

/// `NBDMAGIC`, the first eight bytes the server sends.
pub const NBD_MAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`, sent by the server after `NBDMAGIC` and by the client before each option.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Magic of every option reply.
pub const OPT_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic of a transmission request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic of a simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// Magic of a structured reply chunk.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// Handshake flag: the server speaks fixed newstyle.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag: the server can omit the 124 zero bytes after `NBD_OPT_EXPORT_NAME`.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flag: fixed newstyle.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag: no zeroes.
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Transmission flag: always set.
pub const TFLAG_HAS_FLAGS: u16 = 1 << 0;
/// Transmission flag: the export is read-only.
pub const TFLAG_READ_ONLY: u16 = 1 << 1;
/// Transmission flag: `NBD_CMD_FLUSH` is supported.
pub const TFLAG_SEND_FLUSH: u16 = 1 << 2;
/// Transmission flag: `NBD_CMD_FLAG_FUA` is supported.
pub const TFLAG_SEND_FUA: u16 = 1 << 3;
/// Transmission flag: the export behaves like a rotational medium.
pub const TFLAG_ROTATIONAL: u16 = 1 << 4;
/// Transmission flag: `NBD_CMD_TRIM` is supported.
pub const TFLAG_SEND_TRIM: u16 = 1 << 5;
/// Transmission flag: `NBD_CMD_WRITE_ZEROES` is supported.
pub const TFLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
/// Transmission flag: `NBD_CMD_FLAG_DF` is honoured (replies are never fragmented).
pub const TFLAG_SEND_DF: u16 = 1 << 7;
/// Transmission flag: caches are shared across connections, so several may be used at once.
pub const TFLAG_CAN_MULTI_CONN: u16 = 1 << 8;

/// Option: choose an export and enter transmission without a reply to errors.
pub const OPT_EXPORT_NAME: u32 = 1;
/// Option: abort the negotiation.
pub const OPT_ABORT: u32 = 2;
/// Option: list the exports.
pub const OPT_LIST: u32 = 3;
/// Option: start TLS (`NBD_REP_ACK` when the server offers TLS, then the TLS handshake).
pub const OPT_STARTTLS: u32 = 5;
/// Option: ask for export information.
pub const OPT_INFO: u32 = 6;
/// Option: ask for export information and enter transmission.
pub const OPT_GO: u32 = 7;
/// Option: use structured replies.
pub const OPT_STRUCTURED_REPLY: u32 = 8;

/// Option reply: success / end of list.
pub const REP_ACK: u32 = 1;
/// Option reply: one export of a list.
pub const REP_SERVER: u32 = 2;
/// Option reply: one piece of export information.
pub const REP_INFO: u32 = 3;
/// Option reply error: unknown option.
pub const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
/// Option reply error: forbidden by policy.
pub const REP_ERR_POLICY: u32 = (1 << 31) + 2;
/// Option reply error: syntactically invalid option.
pub const REP_ERR_INVALID: u32 = (1 << 31) + 3;
/// Option reply error: TLS must be negotiated first.
pub const REP_ERR_TLS_REQD: u32 = (1 << 31) + 5;
/// Option reply error: unknown export.
pub const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;

/// Information type: export size and transmission flags.
pub const INFO_EXPORT: u16 = 0;
/// Information type: canonical export name.
pub const INFO_NAME: u16 = 1;
/// Information type: human-readable description.
pub const INFO_DESCRIPTION: u16 = 2;
/// Information type: block size constraints.
pub const INFO_BLOCK_SIZE: u16 = 3;

/// Command flag: force unit access.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
/// Command flag: `WRITE_ZEROES` must not punch a hole.
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
/// Command flag: don't fragment a structured read reply.
pub const CMD_FLAG_DF: u16 = 1 << 2;

/// Structured reply flag: last chunk of this reply.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
/// Structured reply type: no payload, final chunk.
pub const REPLY_TYPE_NONE: u16 = 0;
/// Structured reply type: data at an offset.
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
/// Structured reply type: an error with a message.
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) + 1;

/// Length of a request header on the wire.
pub const REQUEST_LEN: usize = 28;
/// Length of an option header on the wire (magic, option, length).
pub const OPTION_HEADER_LEN: usize = 16;

/// Errors the protocol reports in replies (values fixed by the specification).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Errno {
    /// Operation not permitted (write to a read-only export).
    Perm = 1,
    /// Input/output error.
    Io = 5,
    /// Cannot allocate memory.
    NoMem = 12,
    /// Invalid argument.
    Inval = 22,
    /// No space left on device (write beyond the end).
    NoSpc = 28,
    /// Value too large.
    Overflow = 75,
    /// The server is shutting down.
    Shutdown = 108,
}

/// A transmission command type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Command {
    /// `NBD_CMD_READ`.
    Read,
    /// `NBD_CMD_WRITE`.
    Write,
    /// `NBD_CMD_DISC`.
    Disc,
    /// `NBD_CMD_FLUSH`.
    Flush,
    /// `NBD_CMD_TRIM`.
    Trim,
    /// `NBD_CMD_CACHE`.
    Cache,
    /// `NBD_CMD_WRITE_ZEROES`.
    WriteZeroes,
    /// `NBD_CMD_BLOCK_STATUS`.
    BlockStatus,
    /// Anything else, kept so the server can answer `EINVAL`.
    Other(u16),
}

impl Command {
    /// Decodes a command type.
    pub fn from_wire(v: u16) -> Self {
        match v {
            0 => Self::Read,
            1 => Self::Write,
            2 => Self::Disc,
            3 => Self::Flush,
            4 => Self::Trim,
            5 => Self::Cache,
            6 => Self::WriteZeroes,
            7 => Self::BlockStatus,
            o => Self::Other(o),
        }
    }

    /// The short lowercase name used in traces and reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Disc => "disc",
            Self::Flush => "flush",
            Self::Trim => "trim",
            Self::Cache => "cache",
            Self::WriteZeroes => "write_zeroes",
            Self::BlockStatus => "block_status",
            Self::Other(_) => "other",
        }
    }
}

/// A decoded transmission request header (the write payload, if any, follows on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Command flags (`CMD_FLAG_*`).
    pub flags: u16,
    /// Command type.
    pub command: Command,
    /// Client cookie echoed in the reply.
    pub handle: u64,
    /// Byte offset in the export.
    pub offset: u64,
    /// Byte length.
    pub length: u32,
}

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The buffer holds fewer bytes than the message needs.
    #[error("short message: need {need} bytes, have {have}")]
    Short {
        /// Bytes required.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A magic number did not match.
    #[error("bad magic {found:#x}, expected {expected:#x}")]
    BadMagic {
        /// The value read.
        found: u64,
        /// The value the protocol requires here.
        expected: u64,
    },
    /// A length field inside an option disagrees with the option length.
    #[error("option data malformed: {0}")]
    Malformed(&'static str),
}

fn be_u16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// Decodes a 28-byte request header.
pub fn parse_request(b: &[u8]) -> Result<Request, DecodeError> {
    if b.len() < REQUEST_LEN {
        return Err(DecodeError::Short {
            need: REQUEST_LEN,
            have: b.len(),
        });
    }
    let magic = be_u32(b);
    if magic != REQUEST_MAGIC {
        return Err(DecodeError::BadMagic {
            found: magic.into(),
            expected: REQUEST_MAGIC.into(),
        });
    }
    Ok(Request {
        flags: be_u16(&b[4..]),
        command: Command::from_wire(be_u16(&b[6..])),
        handle: be_u64(&b[8..]),
        offset: be_u64(&b[16..]),
        length: be_u32(&b[24..]),
    })
}

/// Encodes a request header (used by tests and the fuzz corpus).
pub fn encode_request(out: &mut Vec<u8>, flags: u16, cmd: u16, handle: u64, off: u64, len: u32) {
    out.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&cmd.to_be_bytes());
    out.extend_from_slice(&handle.to_be_bytes());
    out.extend_from_slice(&off.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
}

/// A decoded option header: the option code and the length of the data that follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionHeader {
    /// Option code (`OPT_*`).
    pub option: u32,
    /// Length of the option data.
    pub length: u32,
}

/// Decodes a 16-byte option header.
pub fn parse_option_header(b: &[u8]) -> Result<OptionHeader, DecodeError> {
    if b.len() < OPTION_HEADER_LEN {
        return Err(DecodeError::Short {
            need: OPTION_HEADER_LEN,
            have: b.len(),
        });
    }
    let magic = be_u64(b);
    if magic != IHAVEOPT {
        return Err(DecodeError::BadMagic {
            found: magic,
            expected: IHAVEOPT,
        });
    }
    Ok(OptionHeader {
        option: be_u32(&b[8..]),
        length: be_u32(&b[12..]),
    })
}

/// The data of `NBD_OPT_INFO` / `NBD_OPT_GO`: an export name and the information requested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoRequest {
    /// Export name (may be empty: the default export).
    pub name: String,
    /// Information types the client asked for.
    pub requests: Vec<u16>,
}

/// Decodes the data of `NBD_OPT_INFO` / `NBD_OPT_GO`.
pub fn parse_info_request(d: &[u8]) -> Result<InfoRequest, DecodeError> {
    if d.len() < 4 {
        return Err(DecodeError::Malformed("shorter than the name length field"));
    }
    let nlen = be_u32(d) as usize;
    let rest = &d[4..];
    if nlen > rest.len() || rest.len() - nlen < 2 {
        return Err(DecodeError::Malformed("name length exceeds option length"));
    }
    let name = std::str::from_utf8(&rest[..nlen])
        .map_err(|_| DecodeError::Malformed("export name is not utf-8"))?
        .to_owned();
    let rest = &rest[nlen..];
    let n = be_u16(rest) as usize;
    let rest = &rest[2..];
    if rest.len() != 2 * n {
        return Err(DecodeError::Malformed(
            "information request count disagrees with option length",
        ));
    }
    let requests = rest.chunks_exact(2).map(be_u16).collect();
    Ok(InfoRequest { name, requests })
}

/// Appends an option reply header and its data.
pub fn encode_option_reply(out: &mut Vec<u8>, option: u32, reply: u32, data: &[u8]) {
    out.extend_from_slice(&OPT_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&reply.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
}

/// Data of an `NBD_INFO_EXPORT` reply.
pub fn info_export(size: u64, tflags: u16) -> Vec<u8> {
    let mut v = Vec::with_capacity(12);
    v.extend_from_slice(&INFO_EXPORT.to_be_bytes());
    v.extend_from_slice(&size.to_be_bytes());
    v.extend_from_slice(&tflags.to_be_bytes());
    v
}

/// Data of an `NBD_INFO_BLOCK_SIZE` reply.
pub fn info_block_size(min: u32, preferred: u32, max: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(14);
    v.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    v.extend_from_slice(&min.to_be_bytes());
    v.extend_from_slice(&preferred.to_be_bytes());
    v.extend_from_slice(&max.to_be_bytes());
    v
}

/// Data of an `NBD_INFO_NAME` or `NBD_INFO_DESCRIPTION` reply.
pub fn info_string(kind: u16, s: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(2 + s.len());
    v.extend_from_slice(&kind.to_be_bytes());
    v.extend_from_slice(s.as_bytes());
    v
}

/// Data of an `NBD_REP_SERVER` reply.
pub fn rep_server(name: &str, description: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + name.len() + description.len());
    v.extend_from_slice(&(name.len() as u32).to_be_bytes());
    v.extend_from_slice(name.as_bytes());
    v.extend_from_slice(description.as_bytes());
    v
}

/// Appends a simple reply header (the read data, if any, follows).
pub fn encode_simple_reply(out: &mut Vec<u8>, error: u32, handle: u64) {
    out.extend_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&error.to_be_bytes());
    out.extend_from_slice(&handle.to_be_bytes());
}

/// Appends a structured reply chunk header with a payload of `length` bytes (which follows).
pub fn encode_chunk_header(out: &mut Vec<u8>, flags: u16, kind: u16, handle: u64, length: u32) {
    out.extend_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&handle.to_be_bytes());
    out.extend_from_slice(&length.to_be_bytes());
}

/// Appends a complete final `NBD_REPLY_TYPE_ERROR` chunk with a message.
pub fn encode_error_chunk(out: &mut Vec<u8>, handle: u64, err: Errno, msg: &str) {
    let msg = &msg.as_bytes()[..msg.len().min(4096)];
    encode_chunk_header(
        out,
        REPLY_FLAG_DONE,
        REPLY_TYPE_ERROR,
        handle,
        6 + msg.len() as u32,
    );
    out.extend_from_slice(&(err as u32).to_be_bytes());
    out.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    out.extend_from_slice(msg);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn request_round_trip() {
        let mut b = Vec::new();
        encode_request(&mut b, CMD_FLAG_FUA, 1, 0xdead_beef, 4096, 512);
        let r = parse_request(&b).unwrap();
        assert_eq!(r.command, Command::Write);
        assert_eq!(r.flags, CMD_FLAG_FUA);
        assert_eq!((r.handle, r.offset, r.length), (0xdead_beef, 4096, 512));
    }

    #[test]
    fn bad_request_magic_is_reported() {
        let b = [0u8; REQUEST_LEN];
        assert!(matches!(
            parse_request(&b),
            Err(DecodeError::BadMagic { found: 0, .. })
        ));
    }

    #[test]
    fn info_request_lengths_are_checked() {
        let mut d = Vec::new();
        d.extend_from_slice(&3u32.to_be_bytes());
        d.extend_from_slice(b"abc");
        d.extend_from_slice(&1u16.to_be_bytes());
        d.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
        let r = parse_info_request(&d).unwrap();
        assert_eq!(r.name, "abc");
        assert_eq!(r.requests, vec![INFO_BLOCK_SIZE]);
        // Name length larger than the data.
        d[3] = 200;
        assert!(parse_info_request(&d).is_err());
        // One request announced, none present.
        let mut e = Vec::new();
        e.extend_from_slice(&0u32.to_be_bytes());
        e.extend_from_slice(&1u16.to_be_bytes());
        assert!(parse_info_request(&e).is_err());
    }

    proptest! {
        // The request and option parsers never panic on arbitrary bytes.
        #[test]
        fn parsers_total(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse_request(&bytes);
            let _ = parse_option_header(&bytes);
            let _ = parse_info_request(&bytes);
        }

        #[test]
        fn request_fields_survive(flags: u16, cmd: u16, h: u64, off: u64, len: u32) {
            let mut b = Vec::new();
            encode_request(&mut b, flags, cmd, h, off, len);
            let r = parse_request(&b).unwrap();
            prop_assert_eq!(r.command, Command::from_wire(cmd));
            prop_assert_eq!((r.flags, r.handle, r.offset, r.length), (flags, h, off, len));
        }
    }
}
