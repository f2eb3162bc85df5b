//! Messages between engines on a peer link (the engine-to-engine links the off-host queues
//! ride on; `offhost-link`'s `peer` module drives them).
//!
//! A peer link is one session per *lane* (bulk or urgent). The connecting side opens the
//! session's **control channel** ([`CONTROL_CHANNEL`]) first and sends a hello on it; the
//! accepting side answers with its own. After that each side opens one **data channel** per
//! stream it sends, named `d/STREAM/FIRST/CHANNEL` ([`DataName`]): STREAM is the sender's
//! number for the stream (one per sending handle, kept across reconnects), FIRST the sequence
//! number of the stream's first message on this session (so a resend after a reconnect can be
//! recognised), CHANNEL the destination's channel name. The receiving side acknowledges on the
//! control channel how many messages of each data channel it has taken, or refuses a data
//! channel it cannot deliver.
//!
//! Control messages (little-endian):
//!
//! | kind | layout |
//! |------|--------|
//! | 1 hello | `kind: u8`, `lane: u8` (0 bulk, 1 urgent), `reserved: u16`, `version: u32`, `instance: u64`, name (UTF-8, 1 to [`MAX_PEER_NAME`] bytes of `A-Za-z0-9._-`) |
//! | 2 acks  | `kind: u8`, `reserved: [u8; 3]`, `count: u32` (1 to [`MAX_ACKS`]), then `count` times `channel: u32`, `reserved: u32`, `taken: u64` (messages of that data channel taken so far, cumulative) |
//! | 3 ping  | `kind: u8`, `reserved: [u8; 7]`: liveness when nothing else was sent for a while |
//! | 4 refused | `kind: u8`, `reserved: [u8; 3]`, `channel: u32`, reason (UTF-8, at most [`MAX_PEER_REASON`] bytes): the data channel's messages from the first not acknowledged on will not be delivered |

/// Name of the control channel every peer session opens first.
pub const CONTROL_CHANNEL: &str = "offhost-peer/1";
/// Version of the peer protocol.
pub const PEER_VERSION: u32 = 1;
/// Longest engine name in bytes.
pub const MAX_PEER_NAME: usize = 64;
/// Most acknowledgements in one acks message.
pub const MAX_ACKS: usize = 4096;
/// Longest destination channel name in a data channel's name.
pub const MAX_DATA_CHANNEL: usize = 200;
/// Longest reason of a refusal, in bytes.
pub const MAX_PEER_REASON: usize = 512;

const KIND_HELLO: u8 = 1;
const KIND_ACKS: u8 = 2;
const KIND_PING: u8 = 3;
const KIND_REFUSED: u8 = 4;
const HELLO_FIXED: usize = 16;
const ACK_LEN: usize = 16;

/// Which session of a peer link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lane {
    /// Channels whose messages may wait behind others.
    Bulk,
    /// Channels whose messages never wait behind a bulk channel's.
    Urgent,
}

impl Lane {
    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Lane::Bulk => "bulk",
            Lane::Urgent => "urgent",
        }
    }
}

/// A control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerMessage<'a> {
    /// Who is at this end of the session.
    Hello {
        /// The session's lane.
        lane: Lane,
        /// The sender's protocol version.
        version: u32,
        /// A number the sending engine drew at start: a restarted engine has a new one.
        instance: u64,
        /// The sending engine's name.
        name: &'a str,
    },
    /// Messages taken, per data channel: `(channel id, cumulative count)`.
    Acks(Vec<(u32, u64)>),
    /// Liveness.
    Ping,
    /// A data channel the receiver will not deliver.
    Refused {
        /// The data channel's id.
        channel: u32,
        /// Why.
        reason: &'a str,
    },
}

/// A control message did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PeerError {
    /// Empty, or an unknown kind byte.
    #[error("peer control message of unknown kind {0:#04x}")]
    UnknownKind(u8),
    /// The length does not match the kind.
    #[error("peer {kind} message of {len} bytes has the wrong length")]
    Length {
        /// The kind's name.
        kind: &'static str,
        /// Bytes found.
        len: usize,
    },
    /// A field is out of range.
    #[error("peer {kind} message field {field}: {why}")]
    Field {
        /// The kind's name.
        kind: &'static str,
        /// The field.
        field: &'static str,
        /// What is wrong.
        why: &'static str,
    },
}

/// True for a usable engine name: 1 to [`MAX_PEER_NAME`] bytes of `A-Za-z0-9._-`, not `.`.
pub fn valid_peer_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name.len() <= MAX_PEER_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl<'a> PeerMessage<'a> {
    /// Decodes one control message, checking every field.
    pub fn decode(b: &'a [u8]) -> Result<PeerMessage<'a>, PeerError> {
        let kind = *b.first().ok_or(PeerError::UnknownKind(0))?;
        match kind {
            KIND_HELLO => {
                let field = |field, why| PeerError::Field {
                    kind: "hello",
                    field,
                    why,
                };
                if b.len() <= HELLO_FIXED || b.len() > HELLO_FIXED + MAX_PEER_NAME {
                    return Err(PeerError::Length {
                        kind: "hello",
                        len: b.len(),
                    });
                }
                let lane = match b[1] {
                    0 => Lane::Bulk,
                    1 => Lane::Urgent,
                    _ => return Err(field("lane", "neither bulk nor urgent")),
                };
                if b[2] != 0 || b[3] != 0 {
                    return Err(field("reserved", "must be zero"));
                }
                let name = std::str::from_utf8(&b[HELLO_FIXED..])
                    .ok()
                    .filter(|n| valid_peer_name(n))
                    .ok_or_else(|| field("name", "not 1 to 64 bytes of A-Za-z0-9._-"))?;
                Ok(PeerMessage::Hello {
                    lane,
                    version: u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
                    instance: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
                    name,
                })
            }
            KIND_ACKS => {
                if b.len() < 8 {
                    return Err(PeerError::Length {
                        kind: "acks",
                        len: b.len(),
                    });
                }
                let count = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")) as usize;
                if b[1..4] != [0, 0, 0] {
                    return Err(PeerError::Field {
                        kind: "acks",
                        field: "reserved",
                        why: "must be zero",
                    });
                }
                if count == 0 || count > MAX_ACKS || b.len() != 8 + count * ACK_LEN {
                    return Err(PeerError::Length {
                        kind: "acks",
                        len: b.len(),
                    });
                }
                let mut acks = Vec::with_capacity(count);
                for e in b[8..].chunks_exact(ACK_LEN) {
                    if e[4..8] != [0, 0, 0, 0] {
                        return Err(PeerError::Field {
                            kind: "acks",
                            field: "reserved",
                            why: "must be zero",
                        });
                    }
                    acks.push((
                        u32::from_le_bytes(e[0..4].try_into().expect("4 bytes")),
                        u64::from_le_bytes(e[8..16].try_into().expect("8 bytes")),
                    ));
                }
                Ok(PeerMessage::Acks(acks))
            }
            KIND_PING => {
                if b.len() != 8 || b[1..] != [0; 7] {
                    return Err(PeerError::Length {
                        kind: "ping",
                        len: b.len(),
                    });
                }
                Ok(PeerMessage::Ping)
            }
            KIND_REFUSED => {
                if b.len() < 8 || b.len() > 8 + MAX_PEER_REASON {
                    return Err(PeerError::Length {
                        kind: "refused",
                        len: b.len(),
                    });
                }
                if b[1..4] != [0, 0, 0] {
                    return Err(PeerError::Field {
                        kind: "refused",
                        field: "reserved",
                        why: "must be zero",
                    });
                }
                let reason = std::str::from_utf8(&b[8..]).map_err(|_| PeerError::Field {
                    kind: "refused",
                    field: "reason",
                    why: "not UTF-8",
                })?;
                Ok(PeerMessage::Refused {
                    channel: u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
                    reason,
                })
            }
            k => Err(PeerError::UnknownKind(k)),
        }
    }

    /// Appends the encoded message to `out`.
    ///
    /// # Panics
    ///
    /// If a hello's name is not valid ([`valid_peer_name`]) or acks are empty or more than
    /// [`MAX_ACKS`].
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            PeerMessage::Hello {
                lane,
                version,
                instance,
                name,
            } => {
                assert!(valid_peer_name(name), "peer name {name:?}");
                out.push(KIND_HELLO);
                out.push(match lane {
                    Lane::Bulk => 0,
                    Lane::Urgent => 1,
                });
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&version.to_le_bytes());
                out.extend_from_slice(&instance.to_le_bytes());
                out.extend_from_slice(name.as_bytes());
            }
            PeerMessage::Acks(acks) => {
                assert!(!acks.is_empty() && acks.len() <= MAX_ACKS, "ack count");
                out.push(KIND_ACKS);
                out.extend_from_slice(&[0, 0, 0]);
                out.extend_from_slice(&(acks.len() as u32).to_le_bytes());
                for (ch, n) in acks {
                    out.extend_from_slice(&ch.to_le_bytes());
                    out.extend_from_slice(&[0; 4]);
                    out.extend_from_slice(&n.to_le_bytes());
                }
            }
            PeerMessage::Ping => {
                out.push(KIND_PING);
                out.extend_from_slice(&[0; 7]);
            }
            PeerMessage::Refused { channel, reason } => {
                let mut end = reason.len().min(MAX_PEER_REASON);
                while !reason.is_char_boundary(end) {
                    end -= 1;
                }
                out.push(KIND_REFUSED);
                out.extend_from_slice(&[0, 0, 0]);
                out.extend_from_slice(&channel.to_le_bytes());
                out.extend_from_slice(&reason.as_bytes()[..end]);
            }
        }
    }
}

/// The name of a data channel: `d/STREAM/FIRST/CHANNEL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataName<'a> {
    /// The sender's number of the stream.
    pub stream: u64,
    /// Sequence number of the stream's first message on this session.
    pub first: u64,
    /// The destination channel.
    pub channel: &'a str,
}

impl<'a> DataName<'a> {
    /// Parses `d/STREAM/FIRST/CHANNEL`; `None` for anything else (STREAM and FIRST decimal
    /// without sign or leading zeros, CHANNEL 1 to [`MAX_DATA_CHANNEL`] bytes).
    pub fn parse(name: &'a str) -> Option<DataName<'a>> {
        fn number(s: &str) -> Option<u64> {
            if s.is_empty()
                || s.len() > 20
                || !s.bytes().all(|b| b.is_ascii_digit())
                || (s.len() > 1 && s.starts_with('0'))
            {
                return None;
            }
            s.parse().ok()
        }
        let rest = name.strip_prefix("d/")?;
        let (stream, rest) = rest.split_once('/')?;
        let (first, channel) = rest.split_once('/')?;
        if channel.is_empty() || channel.len() > MAX_DATA_CHANNEL {
            return None;
        }
        Some(DataName {
            stream: number(stream)?,
            first: number(first)?,
            channel,
        })
    }

    /// The channel name on the wire.
    pub fn to_name(&self) -> String {
        format!("d/{}/{}/{}", self.stream, self.first, self.channel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for m in [
            PeerMessage::Hello {
                lane: Lane::Urgent,
                version: PEER_VERSION,
                instance: 77,
                name: "recon-1.lab",
            },
            PeerMessage::Acks(vec![(3, 9), (5, u64::MAX)]),
            PeerMessage::Ping,
            PeerMessage::Refused {
                channel: 9,
                reason: "no such pipeline",
            },
        ] {
            let mut b = Vec::new();
            m.encode(&mut b);
            assert_eq!(PeerMessage::decode(&b).unwrap(), m);
        }
    }

    #[test]
    fn rejects_bad_messages() {
        let mut hello = Vec::new();
        PeerMessage::Hello {
            lane: Lane::Bulk,
            version: 1,
            instance: 1,
            name: "a",
        }
        .encode(&mut hello);
        let mut bad_lane = hello.clone();
        bad_lane[1] = 2;
        let mut bad_name = hello.clone();
        bad_name.push(b'/');
        let mut acks = Vec::new();
        PeerMessage::Acks(vec![(1, 1)]).encode(&mut acks);
        let mut bad_count = acks.clone();
        bad_count[4] = 2;
        let mut bad_res = acks.clone();
        bad_res[12] = 1;
        for b in [
            &[][..],
            &[9][..],
            &hello[..16],
            &bad_lane,
            &bad_name,
            &acks[..8],
            &bad_count,
            &bad_res,
            &[3, 0, 0][..],
            &[3, 0, 0, 0, 0, 0, 0, 1][..],
        ] {
            assert!(PeerMessage::decode(b).is_err(), "{b:?}");
        }
    }

    #[test]
    fn data_names() {
        let d = DataName::parse("d/4/12/in/3/x").unwrap();
        assert_eq!((d.stream, d.first, d.channel), (4, 12, "in/3/x"));
        assert_eq!(d.to_name(), "d/4/12/in/3/x");
        for n in [
            "d/", "d/1", "d/1/2", "d/1/01/x", "d/1/x/y", "e/1/1/x", "d/1/1/", "d/1/-1/x",
            "d/01/1/x",
        ] {
            assert!(DataName::parse(n).is_none(), "{n}");
        }
    }

    #[test]
    fn peer_names() {
        assert!(valid_peer_name("recon"));
        assert!(!valid_peer_name("."));
        assert!(!valid_peer_name("a/b"));
        assert!(!valid_peer_name(""));
        assert!(!valid_peer_name(&"x".repeat(65)));
    }
}
