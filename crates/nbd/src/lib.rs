//! Network Block Device front end of offhost: ordinary programs reach an engine as a disk.
//!
//! The surface is deliberate: the items below at the root, and four modules that are
//! namespaces of their own. Everything else is private.
//!
//! | item | what it is |
//! |---|---|
//! | [`Server`], [`ListenAddr`], [`Limits`], [`ServerError`], [`AddrError`], [`Refused`] | the server (fixed newstyle, structured replies, many requests in flight, several connections and exports, TCP and Unix sockets) and its budgets (a connection refused past one) |
//! | [`Export`], [`SpecError`], [`Backend`], [`MemDisk`] | export specifications (`NAME=KIND:ARG,OPTION...`), what serves one, and the sparse memory pseudo-disk |
//! | [`ActionDisk`], [`ActionsError`] | a pipeline as a disk (`actions:FILE.ion`): block addresses that start, stop, query and move data on the pipeline's host channels ([`actions`] has the address map) |
//! | [`NbdTls`], [`TlsMode`], [`TlsModeError`], [`TlsSetupError`] | TLS as the protocol specifies it (`NBD_OPT_STARTTLS`, nbdkit's `--tls` modes) |
//! | [`Tracer`], [`TraceRecord`], [`TraceError`] | device-side tracing |
//! | [`serve_handshake`], [`serve_transmission_threads`] | one connection's two phases over any stream, for tests and fuzzing |
//! | [`proto`] | sans-IO encoding and decoding of NBD messages |
//! | [`actions`] | the block address map of an action export |
//! | [`report`] | the transfer-rate / overhead report of a trace |
//! | [`hostile`] | clients that ask for more than they give back, for tests and measurements |
#![forbid(unsafe_code)]

pub mod actions;
mod backend;
mod conn;
mod drive;
mod export;
mod handshake;
mod helpers;
pub mod hostile;
mod limits;
mod mem;
pub mod proto;
pub mod report;
mod request;
mod server;
mod tls;
mod trace;

pub use actions::{ActionDisk, ActionsError};
pub use backend::Backend;
pub use conn::{serve_transmission_threads, End};
pub use drive::{Cache, DriveParams};
pub use export::{Export, SpecError, DEFAULT_MAX_PAYLOAD};
pub use handshake::{serve_handshake, HandshakeError, Negotiated};
pub use limits::{
    Limits, Refused, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_IO_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_UNPROVEN,
    DEFAULT_MAX_UNPROVEN_PER_SOURCE,
};
pub use mem::{MemDisk, MAX_SIZE as MEM_MAX_SIZE};
pub use server::{
    AddrError, ListenAddr, Server, ServerError, Stream, DEFAULT_CONN_THREADS, DEFAULT_LISTEN,
};
pub use tls::{NbdTls, TlsMode, TlsModeError, TlsSetupError};
pub use trace::{Record as TraceRecord, TraceError, Tracer};
