//! Error types of the shared-memory layer: one enum for configuration, one for attaching to a
//! segment, one for everything that happens on a live link.

use std::io;

/// A [`Config`](crate::Config) that cannot be laid out as a segment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The ring size is not a power of two within the supported range.
    #[error("ring_bytes {found} must be a power of two between {min} and {max}")]
    RingBytes {
        /// The size that was asked for.
        found: u64,
        /// Smallest supported ring.
        min: u64,
        /// Largest supported ring.
        max: u64,
    },
    /// The buffer size is not a multiple of 64 within the supported range.
    #[error("buffer_size {found} must be a multiple of 64 between 64 and {max}")]
    BufferSize {
        /// The size that was asked for.
        found: u64,
        /// Largest supported buffer.
        max: u64,
    },
    /// Too many pool buffers.
    #[error("pool_buffers {found} exceeds the maximum of {max} per side")]
    PoolBuffers {
        /// The count that was asked for.
        found: u64,
        /// Largest supported count.
        max: u64,
    },
    /// The whole segment would be larger than supported.
    #[error("segment of {found} bytes exceeds the maximum of {max} bytes")]
    TooLarge {
        /// The computed size.
        found: u64,
        /// Largest supported segment.
        max: u64,
    },
}

/// Attaching to a segment failed: it is not an offhost segment of this version and layout.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttachError {
    /// The segment is smaller than the header.
    #[error("segment too small: {found} bytes, the header alone needs {needed}")]
    TooSmall {
        /// Size of the file that was handed over.
        found: u64,
        /// Size of the header.
        needed: u64,
    },
    /// The magic number is wrong: this is not an offhost segment.
    #[error("segment magic mismatch: expected {expected:#018x}, found {found:#018x}")]
    Magic {
        /// The offhost magic.
        expected: u64,
        /// What the segment holds.
        found: u64,
    },
    /// The segment was made by another version of the layout.
    #[error("segment version mismatch: expected {expected}, found {found}")]
    Version {
        /// The version this build speaks.
        expected: u32,
        /// The version in the segment.
        found: u32,
    },
    /// A layout field disagrees with what this build computes from the segment's parameters.
    #[error("segment layout mismatch in {field}: expected {expected}, found {found}")]
    Layout {
        /// Name of the mismatching field.
        field: &'static str,
        /// Value this build computes.
        expected: u64,
        /// Value in the segment.
        found: u64,
    },
    /// The segment's parameters are not a valid configuration.
    #[error("segment parameters invalid: {0}")]
    Config(#[from] ConfigError),
    /// The segment can still be shrunk by the peer (which would crash us with SIGBUS).
    #[error("segment is not sealed against shrinking")]
    NotSealed,
    /// An operating-system call failed while inspecting or mapping the segment.
    #[error("{op}: {source}")]
    Io {
        /// The call that failed.
        op: &'static str,
        /// The error it returned.
        source: io::Error,
    },
}

/// Errors of a live shared-memory link.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShmError {
    /// The peer wrote something impossible into the segment; this side stopped using it.
    #[error("corrupt peer: {0}")]
    CorruptPeer(String),
    /// The peer closed the control connection or died.
    #[error("peer is gone")]
    PeerGone,
    /// The wait ran past its timeout.
    #[error("timed out")]
    Timeout,
    /// The record can never fit in the ring.
    #[error("record of {len} bytes exceeds the ring's maximum record of {max} bytes")]
    RecordTooLarge {
        /// Length asked for.
        len: usize,
        /// Largest payload the ring can hold.
        max: usize,
    },
    /// A buffer range does not fit in a pool buffer.
    #[error("buffer range {offset}+{len} exceeds the buffer size {size}")]
    BufferRange {
        /// Start of the range.
        offset: usize,
        /// Length of the range.
        len: usize,
        /// Size of a pool buffer.
        size: usize,
    },
    /// The segment has no buffer pool (`pool_buffers` is 0).
    #[error("the segment has no buffer pool")]
    NoPool,
    /// The configuration cannot be laid out.
    #[error("invalid config: {0}")]
    Config(#[from] ConfigError),
    /// The peer's segment was rejected.
    #[error("attach failed: {0}")]
    Attach(#[from] AttachError),
    /// The connection handshake failed.
    #[error("handshake failed: {0}")]
    Handshake(String),
    /// The peer runs as another user.
    #[error("peer runs as uid {theirs}, this process as uid {ours}")]
    PeerUid {
        /// Our uid.
        ours: u32,
        /// The peer's uid.
        theirs: u32,
    },
    /// An operating-system call failed.
    #[error("{op}: {source}")]
    Io {
        /// The call that failed.
        op: &'static str,
        /// The error it returned.
        source: io::Error,
    },
}

impl ShmError {
    pub(crate) fn io(op: &'static str) -> impl FnOnce(rustix::io::Errno) -> ShmError {
        move |e| ShmError::Io {
            op,
            source: e.into(),
        }
    }

    pub(crate) fn std_io(op: &'static str) -> impl FnOnce(io::Error) -> ShmError {
        move |source| ShmError::Io { op, source }
    }
}

/// Result of the shared-memory layer.
pub type Result<T, E = ShmError> = std::result::Result<T, E>;
