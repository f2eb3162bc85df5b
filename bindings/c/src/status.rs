//! Status codes and the per-thread message of the last failure.
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::ffi::{c_char, CString};

use offhost_bindings::{Error, ErrorKind};

/// What a call did: `OK`, `END` (end of stream) or a negative error code; the message of an
/// error is `offhost_last_error()`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum offhost_status {
    /// Done.
    Ok = 0,
    /// The stream ended (the peer closed the channel; a pipeline's output ended).
    End = 1,
    /// The deadline passed.
    Timeout = -1,
    /// A call that must not wait could not complete now.
    WouldBlock = -2,
    /// The peer went away.
    PeerGone = -3,
    /// The session, channel or host channel was closed.
    Closed = -4,
    /// A message exceeds the channel's maximum, or does not fit the buffer (then the length
    /// it needs is stored and the message stays queued).
    TooLarge = -5,
    /// A URL could not be parsed.
    BadUrl = -6,
    /// Loans need the shm transport.
    NoLoans = -7,
    /// The peer broke the protocol (or corrupted the shared memory).
    Protocol = -8,
    /// A system call failed.
    Io = -9,
    /// An argument is invalid (a null pointer, text that is not UTF-8, options out of range).
    InvalidArgument = -10,
    /// Pipeline text does not parse or check.
    Pipeline = -11,
    /// A task of the pipeline failed.
    TaskFailed = -12,
    /// The engine daemon refused a request.
    Engine = -13,
    /// The pipeline has no host channel of that name.
    NoChannel = -14,
    /// A file or encoding is malformed.
    Format = -15,
    /// A scanner geometry is invalid.
    Geometry = -16,
    /// offhost panicked (a bug); the message says where.
    Panic = -99,
}

impl offhost_status {
    /// The status of an error kind.
    pub fn of(kind: ErrorKind) -> offhost_status {
        match kind {
            ErrorKind::Timeout => offhost_status::Timeout,
            ErrorKind::WouldBlock => offhost_status::WouldBlock,
            ErrorKind::PeerGone => offhost_status::PeerGone,
            ErrorKind::Closed => offhost_status::Closed,
            ErrorKind::TooLarge => offhost_status::TooLarge,
            ErrorKind::BadUrl => offhost_status::BadUrl,
            ErrorKind::NoLoans => offhost_status::NoLoans,
            ErrorKind::Protocol => offhost_status::Protocol,
            ErrorKind::Io => offhost_status::Io,
            ErrorKind::InvalidArgument => offhost_status::InvalidArgument,
            ErrorKind::Pipeline => offhost_status::Pipeline,
            ErrorKind::TaskFailed => offhost_status::TaskFailed,
            ErrorKind::Engine => offhost_status::Engine,
            ErrorKind::NoChannel => offhost_status::NoChannel,
            ErrorKind::Format => offhost_status::Format,
            ErrorKind::Geometry => offhost_status::Geometry,
            ErrorKind::Panicked => offhost_status::Panic,
        }
    }

    /// The code's name, as a C string constant.
    pub fn name(self) -> &'static std::ffi::CStr {
        match self {
            offhost_status::Ok => c"ok",
            offhost_status::End => c"end of stream",
            offhost_status::Timeout => c"timeout",
            offhost_status::WouldBlock => c"would block",
            offhost_status::PeerGone => c"peer gone",
            offhost_status::Closed => c"closed",
            offhost_status::TooLarge => c"too large",
            offhost_status::BadUrl => c"bad url",
            offhost_status::NoLoans => c"no loans",
            offhost_status::Protocol => c"protocol error",
            offhost_status::Io => c"i/o error",
            offhost_status::InvalidArgument => c"invalid argument",
            offhost_status::Pipeline => c"pipeline error",
            offhost_status::TaskFailed => c"task failed",
            offhost_status::Engine => c"engine error",
            offhost_status::NoChannel => c"no such channel",
            offhost_status::Format => c"format error",
            offhost_status::Geometry => c"geometry error",
            offhost_status::Panic => c"panic",
        }
    }
}

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
    static LAST_LIMIT: RefCell<CString> = RefCell::new(CString::default());
    static LAST_SETTING: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `msg` as this thread's last error message (of a failure over no limit).
pub fn set_message(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = c);
    LAST_LIMIT.with(|l| *l.borrow_mut() = CString::default());
    LAST_SETTING.with(|l| *l.borrow_mut() = CString::default());
}

/// Records an error (its message, the id of the limit it went over or none, and the id of the
/// setting that would have allowed it or none) and returns its status.
pub fn fail(e: &Error) -> offhost_status {
    set_message(&e.to_string());
    let id = e.over_limit().map_or("", |o| o.limit.id());
    LAST_LIMIT.with(|l| *l.borrow_mut() = CString::new(id).unwrap_or_default());
    let id = e.needs().map_or("", |s| s.id());
    LAST_SETTING.with(|l| *l.borrow_mut() = CString::new(id).unwrap_or_default());
    offhost_status::of(e.kind())
}

/// The id of the setting that would have allowed this thread's last failure, empty if none.
pub fn last_setting() -> *const c_char {
    LAST_SETTING.with(|l| l.borrow().as_ptr())
}

/// The id of the limit this thread's last failure went over, empty if none.
pub fn last_limit() -> *const c_char {
    LAST_LIMIT.with(|l| l.borrow().as_ptr())
}

/// This thread's last error message; valid until the next failing call on this thread.
pub fn last_message() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}

/// An invalid-argument error.
pub fn invalid(msg: impl Into<String>) -> Error {
    Error::Invalid(msg.into())
}
