//! What a peer may make this end of a link hold: the receiving side decides.
//!
//! The side that opens a channel proposes its options, receive buffer included; the other
//! side adopts them only within its [`Limits`] (as a QUIC endpoint advertises the largest
//! stream window it grants, and an iceoryx2 service fixes its subscribers' buffers). A channel
//! over a limit is refused with an `error` frame whose reason names the limit (an
//! [`OverLimit`], whose [`over`](OverLimit::over) is an [`offhost_units::OverLimit`]) and, for
//! the peer, the `offhost` flag that raises it on this side; the peer's other channels, and
//! the link, go on. Refused channels stay in the table until the peer closes them: a peer that
//! keeps more refused channels open than it may have channels fails the link
//! ([`ProtoError::OverLimit`]).
//!
//! The limits bound, per link, the bytes the peer can make this side buffer (the sum of the
//! receive buffers it granted, plus the link window) and the number of channels the
//! application must serve.
//!
//! [`ProtoError::OverLimit`]: crate::ProtoError::OverLimit

use offhost_units::{Limit, OverLimit as Over};

use crate::options::ChannelOptions;

/// Default [`Limits::max_channels`].
pub const DEFAULT_MAX_CHANNELS: u32 = 256;
/// Default [`Limits::max_channel_window`]: 16 MiB.
pub const DEFAULT_MAX_CHANNEL_WINDOW: u32 = 16 << 20;
/// Default [`Limits::max_session_window`]: 32 MiB.
pub const DEFAULT_MAX_SESSION_WINDOW: u64 = 32 << 20;

/// The budget of one link end for the channels its peer opens. Channels this side opens are
/// not counted: their options are this side's own choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Channels the peer may have open at once (`offhost ... --max-channels`).
    pub max_channels: u32,
    /// Largest receive buffer (window) granted to one channel the peer opens, in bytes
    /// (`--max-channel-window`). It also bounds the channel's largest message.
    pub max_channel_window: u32,
    /// Largest sum of the receive buffers of the channels the peer has open, in bytes
    /// (`--max-session-window`).
    pub max_session_window: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_channels: DEFAULT_MAX_CHANNELS,
            max_channel_window: DEFAULT_MAX_CHANNEL_WINDOW,
            max_session_window: DEFAULT_MAX_SESSION_WINDOW,
        }
    }
}

impl Limits {
    /// No limits: every channel the peer opens is adopted (for tests and trusted peers).
    pub fn unlimited() -> Self {
        Limits {
            max_channels: u32::MAX,
            max_channel_window: u32::MAX,
            max_session_window: u64::MAX,
        }
    }

    /// Whether a peer's channel with `options` may open when the peer already has `open`
    /// channels with receive buffers summing to `windows`; the error is the limit it would go
    /// over, sent as the reason of the refusal.
    pub fn admit(
        &self,
        open: u32,
        windows: u64,
        options: &ChannelOptions,
    ) -> Result<(), OverLimit> {
        if open >= self.max_channels {
            return Err(OverLimit::Channels {
                open,
                over: Over::new(Limit::MaxChannels, self.max_channels).asked(open + 1),
            });
        }
        if options.recv_buffer > self.max_channel_window {
            return Err(OverLimit::ChannelWindow {
                asked: options.recv_buffer,
                over: Over::new(Limit::MaxChannelWindow, self.max_channel_window)
                    .asked(options.recv_buffer),
            });
        }
        let total = windows.saturating_add(u64::from(options.recv_buffer));
        if total > self.max_session_window {
            return Err(OverLimit::SessionWindow {
                total,
                over: Over::new(Limit::MaxSessionWindow, self.max_session_window).asked(total),
            });
        }
        Ok(())
    }
}

/// A channel a peer may not open: what asked for more, and the limit it would go over with
/// its value ([`Limits::admit`]; [`OverLimit::over`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OverLimit {
    /// The link has as many channels open as it may ([`Limits::max_channels`]).
    #[error("this link has {open} channels open, {over}")]
    Channels {
        /// Channels open.
        open: u32,
        /// `max_channels` and its value.
        #[source]
        over: Over,
    },
    /// The channel's receive buffer is over [`Limits::max_channel_window`].
    #[error("receive buffer of {asked} bytes is {over}")]
    ChannelWindow {
        /// Bytes asked for.
        asked: u32,
        /// `max_channel_window`, its value and the bytes asked for.
        #[source]
        over: Over,
    },
    /// The link's channels' receive buffers would be over [`Limits::max_session_window`].
    #[error("receive buffers of this link's channels would reach {total} bytes, {over}")]
    SessionWindow {
        /// Bytes with this channel.
        total: u64,
        /// `max_session_window`, its value and the bytes with this channel.
        #[source]
        over: Over,
    },
}

impl OverLimit {
    /// The limit gone over, its value and what asked for more.
    pub fn over(&self) -> &Over {
        match self {
            OverLimit::Channels { over, .. }
            | OverLimit::ChannelWindow { over, .. }
            | OverLimit::SessionWindow { over, .. } => over,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(recv_buffer: u32) -> ChannelOptions {
        ChannelOptions {
            recv_buffer,
            max_message: u64::from(recv_buffer),
            ..ChannelOptions::default()
        }
    }

    #[test]
    fn each_refusal_names_its_limit() {
        let l = Limits {
            max_channels: 2,
            max_channel_window: 1000,
            max_session_window: 1500,
        };
        assert_eq!(l.admit(0, 0, &opts(1000)), Ok(()));
        let e = l.admit(2, 0, &opts(8)).unwrap_err();
        assert!(matches!(e, OverLimit::Channels { open: 2, .. }), "{e}");
        assert_eq!(*e.over(), Over::new(Limit::MaxChannels, 2u32).asked(3u32),);
        let e = l.admit(0, 0, &opts(1001)).unwrap_err();
        assert!(
            matches!(e, OverLimit::ChannelWindow { asked: 1001, .. }),
            "{e}"
        );
        assert_eq!(
            *e.over(),
            Over::new(Limit::MaxChannelWindow, 1000u32).asked(1001u32)
        );
        let e = l.admit(1, 1000, &opts(501)).unwrap_err();
        assert!(
            matches!(e, OverLimit::SessionWindow { total: 1501, .. }),
            "{e}"
        );
        assert_eq!(e.over().limit, Limit::MaxSessionWindow);
        assert_eq!(
            e.to_string(),
            "receive buffers of this link's channels would reach 1501 bytes, over the limit max_session_window of 1500 bytes"
        );
        assert_eq!(l.admit(1, 1000, &opts(500)), Ok(()));
        assert_eq!(
            Limits::unlimited().admit(u32::MAX - 1, u64::MAX, &opts(8)),
            Ok(())
        );
    }
}
