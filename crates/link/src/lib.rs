//! Transports (tls, tcp, unix, mem, shm) and the Session/Channel host API of offhost.
//!
//! A [`Session`] is one link to a peer ([`Session::connect`] on the host, [`Server::accept`]
//! on the engine); it carries many [`Channel`]s, each a two-way stream of messages with its own
//! packet size, receive buffer, maximum message size and send mode
//! ([`ChannelOptions`]). The wire protocol is the sans-IO `offhost-proto` crate; this crate
//! drives it from the calling threads (see `driver.rs`: no I/O thread on the fast path).
//!
//! | seed (000, 002)               | here                                                  |
//! |-------------------------------|-------------------------------------------------------|
//! | OpenLink                      | [`Session::connect`], [`Session::open`]                |
//! | WriteLink(chan, buf, timeout) | [`Channel::send`], [`Channel::send_wait`] with a [`Wait`] |
//! | ReadLink(chan, buf, timeout)  | [`Channel::recv`], [`Channel::recv_wait`] with a [`Wait`]; without allocating: [`Channel::recv_into`], [`Channel::recv_each`] |
//! | synchronous / asynchronous    | [`SendMode::Sync`] (rendezvous) / [`SendMode::Async`] (buffered) |
//! | active channel selection (ALT)| [`select`]                                            |
//! | /dev/tlw0, /dev/tlr0          | [`Channel::writer`], [`Channel::reader`]              |
//! | DMA-able message memory       | [`Channel::loan`], [`Channel::send_loan`], [`Channel::recv_message`] (shm) |
//!
//! Security: [`Session::connect_with`] and [`Server::bind_with`] take [`LinkOptions`]:
//! `tls:HOST:PORT` is TCP with mutual TLS (certificates in nbdkit's directory layout), plain
//! `tcp:` needs [`LinkOptions::insecure`] on a server, and `unix:` / `shm:` servers admit
//! only peers running as their own uid or an allowed one.
//!
//! A message over the channel's maximum is [`LinkError::TooLarge`] at the call. When the peer
//! goes away every blocked call returns [`LinkError::PeerGone`] within a fraction of a second.
#![forbid(unsafe_code)]

mod acceptor;
mod activation;
mod channel;
mod cork;
mod driver;
mod error;
mod io;
mod limits;
mod linger;
mod loan;
mod mem;
pub mod offload;
mod options;
pub mod peer;
mod select;
mod server;
mod session;
mod shm;
mod tcp;
mod tls;
mod url;
mod wait;
mod wire;

pub use activation::read_passed_sockets;
pub use channel::Channel;
pub use cork::Cork;
pub use error::LinkError;
pub use io::{ChannelReader, ChannelWriter};
pub use limits::{
    peer_deadline_flag, Limits, Threads, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_MAX_HANDSHAKES,
    DEFAULT_MAX_HANDSHAKES_PER_SOURCE, DEFAULT_MAX_SESSIONS, DEFAULT_MAX_THREADS,
    DEFAULT_MAX_UNSENT, DEFAULT_PEER_DEADLINE, DEFAULT_WRITE_STALL,
};
pub use loan::{Arrived, Loan, Message};
pub use offhost_proto::{ChannelOptions, SendMode};
pub use options::LinkOptions;
pub use select::{select, MAX_SELECT_SESSIONS};
pub use server::{echo_channel, serve_echo, serve_echo_once, Server};
pub use session::Session;
pub use shm::default_config as default_shm_config;
pub use url::Url;
pub use wait::Wait;
