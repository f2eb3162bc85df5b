//! Sans-IO wire protocol of offhost: frames, virtual channels, packets and credits.
//!
//! No sockets, no clock, no threads: a [`Connection`] is a deterministic state machine fed the
//! bytes that arrived from the peer ([`Connection::handle_input`]) and the application's calls
//! ([`Connection::open`], [`Connection::send`], [`Connection::recv`], [`Connection::close`]);
//! it produces the bytes to transmit ([`Connection::poll_transmit`]) and [`Event`]s. The I/O
//! crate (`offhost-link`) drives it over real transports.
//!
//! * Channels are virtual links multiplexed on one link; each side allocates ids of its own
//!   parity (the client odd, the server even), so opening never needs a round trip.
//! * A message is split into packets of the channel's power-of-two packet size (8 B to 64 KiB):
//!   full packets and one last packet, flagged, which completes the message.
//! * Credits are absolute byte offsets, per channel and per link, as in QUIC: a repeated grant
//!   is harmless and a lost one is covered by the next. A sender never exceeds them; a receiver
//!   grants as its application drains messages, and answers a `blocked` frame with a fresh
//!   grant. The link window always covers every open channel's receive buffer, so a channel
//!   whose application does not read never stalls the others.
//! * End of stream is explicit (`close` per channel and direction, `close` on channel 0 for
//!   the whole link). Malformed frames, frames for unknown channels and credit overruns fail
//!   the link with a typed [`ProtoError`] and an `error` frame for the peer.
//!
//! The byte layout of the frames is documented in [`frame`].
#![forbid(unsafe_code)]

mod channel;
mod connection;
mod error;
pub mod frame;
mod limits;
pub mod offload;
mod options;
pub mod peer;
mod store;

pub use connection::BatchEnd;
pub use connection::{
    Connection, Event, Incoming, Landed, Received, CODE_PROTOCOL, CODE_REFUSED, INITIAL_LINK_CREDIT,
};
pub use connection::{DataFrames, SendPermit};
pub use error::{CallError, FrameError, ProtoError};
pub use frame::Frame;
pub use limits::{
    Limits, OverLimit, DEFAULT_MAX_CHANNELS, DEFAULT_MAX_CHANNEL_WINDOW, DEFAULT_MAX_SESSION_WINDOW,
};
pub use options::{ChannelOptions, Config, SendMode, Side, MAX_PACKET, MIN_PACKET};
pub use store::put_at;
