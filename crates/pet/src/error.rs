//! Error types of the PET crate, one enum per concern.

use std::io;

/// Errors while reading or writing list-mode data (our format or PETLINK).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// An I/O error from the underlying file or stream.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    /// The file does not start with the expected magic bytes.
    #[error("bad magic at byte offset 0: expected {expected:?}, found {found:?}")]
    BadMagic {
        /// The magic we expected.
        expected: String,
        /// The bytes we found (lossy).
        found: String,
    },
    /// The header is malformed.
    #[error("bad header at byte offset {offset}: {what}")]
    BadHeader {
        /// Byte offset of the offending field.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// The data ends in the middle of a record or word.
    #[error("truncated {what} at byte offset {offset}: {have} of {need} bytes")]
    Truncated {
        /// "word" or "record".
        what: &'static str,
        /// Byte offset where the incomplete unit starts.
        offset: u64,
        /// Bytes present.
        have: usize,
        /// Bytes needed.
        need: usize,
    },
    /// A record or word disagrees with the header (geometry or counts).
    #[error("data does not match header at byte offset {offset}: {what}")]
    Mismatch {
        /// Byte offset of the offending record or word.
        offset: u64,
        /// What disagrees.
        what: String,
    },
    /// An Interfile header line could not be understood.
    #[error("interfile header line {line}: {what}")]
    Interfile {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        what: String,
    },
}

/// Errors in scanner geometry or sinogram layout parameters.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum GeometryError {
    /// A parameter is out of its valid range.
    #[error("invalid geometry: {0}")]
    Invalid(String),
    /// The preset name is unknown.
    #[error("unknown scanner preset {0:?} (known: mmr, demo)")]
    UnknownPreset(String),
}

/// Errors while writing images.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// An I/O error.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    /// The PNG encoder failed.
    #[error("png encoding failed: {0}")]
    Png(#[from] png::EncodingError),
    /// The volume has no voxels.
    #[error("empty volume")]
    Empty,
}
