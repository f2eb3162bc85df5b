//! Network Block Device front end of offhost: ordinary programs reach an engine as a disk.
//!
//! - [`proto`]: sans-IO encoding and decoding of NBD messages;
//! - [`handshake`], [`conn`], [`server`]: the server (fixed newstyle, structured replies,
//!   many requests in flight, several connections and exports, TCP and Unix sockets);
//! - [`mem`], [`drive`]: the sparse memory pseudo-disk and its optional drive model;
//! - [`export`]: export specifications (`NAME=KIND:ARG,OPTION...`);
//! - [`actions`]: a pipeline as a disk (`actions:FILE.ion`), block addresses that start, stop,
//!   query and move data on the pipeline's host channels;
//! - [`tls`]: TLS as the protocol specifies it (`NBD_OPT_STARTTLS`, nbdkit's `--tls` modes);
//! - [`trace`], [`report`]: device-side tracing and the transfer-rate / overhead report;
//! - [`limits`]: connections, bytes in flight and deadlines ([`Limits`]); [`hostile`]: clients
//!   that ask for more than they give back, for tests and measurements.
#![forbid(unsafe_code)]

pub mod actions;
pub mod backend;
pub mod conn;
pub mod drive;
pub mod export;
pub mod handshake;
pub mod hostile;
pub mod limits;
pub mod mem;
pub mod proto;
pub mod report;
mod request;
pub mod server;
pub mod tls;
pub mod trace;

pub use backend::Backend;
pub use export::{Export, SpecError};
pub use limits::Limits;
pub use server::{ListenAddr, Server, ServerError};
pub use tls::{NbdTls, TlsMode};
