//! Channel options and connection configuration.

use crate::error::CallError;

/// Smallest packet size (bytes).
pub const MIN_PACKET: usize = 8;
/// Largest packet size (bytes).
pub const MAX_PACKET: usize = 64 * 1024;

/// How `send` completes on a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SendMode {
    /// Buffered: a send completes once the message is within the receiver's credit.
    #[default]
    Async,
    /// Rendezvous: a send completes once the receiving application has taken the message.
    Sync,
}

/// Per-channel settings, chosen by the side that opens the channel and adopted by the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelOptions {
    /// Packet size in bytes: a power of two from 8 B to 64 KiB.
    pub packet_size: usize,
    /// Receive buffer of each direction in bytes; at least `max_message`.
    pub recv_buffer: u32,
    /// Largest message in bytes.
    pub max_message: u64,
    /// Completion of sends.
    pub send_mode: SendMode,
}

impl Default for ChannelOptions {
    fn default() -> Self {
        ChannelOptions {
            packet_size: 16 * 1024,
            recv_buffer: 1 << 20,
            max_message: 1 << 20,
            send_mode: SendMode::Async,
        }
    }
}

impl ChannelOptions {
    /// Checks the ranges; the error says which one is wrong.
    pub fn validate(&self) -> Result<(), CallError> {
        if !self.packet_size.is_power_of_two()
            || !(MIN_PACKET..=MAX_PACKET).contains(&self.packet_size)
        {
            return Err(CallError::BadOptions(
                "packet size must be a power of two from 8 B to 64 KiB",
            ));
        }
        if self.max_message == 0 {
            return Err(CallError::BadOptions("max message must be at least 1 byte"));
        }
        if u64::from(self.recv_buffer) < self.max_message {
            return Err(CallError::BadOptions(
                "receive buffer must hold at least one max-size message",
            ));
        }
        Ok(())
    }

    pub(crate) fn packet_shift(&self) -> u8 {
        self.packet_size.trailing_zeros() as u8
    }
}

/// Which end of the link this is; it picks the parity of the channel ids it allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The connecting host: odd channel ids.
    Client,
    /// The accepting engine: even channel ids.
    Server,
}

/// Connection-wide settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// This end of the link.
    pub side: Side,
    /// Link-level receive window on top of the sum of the open channels' receive buffers.
    pub link_window: u64,
    /// What the peer may make this side hold (the channels it opens and their windows).
    pub limits: crate::limits::Limits,
}

impl Config {
    /// Default configuration for `side`, with the default [`Limits`](crate::Limits).
    pub fn new(side: Side) -> Self {
        Config {
            side,
            link_window: 1 << 20,
            limits: crate::limits::Limits::default(),
        }
    }
}
