//! Sending a message with its frames written in place: straight into a transport's buffer (a
//! shared-memory record, say) instead of queued for [`Connection::poll_transmit`].

use crate::channel::{cost, Chan};
use crate::connection::{Connection, LinkCredit, State};

/// The data frames of one message, to be written where they go.
#[derive(Debug, Clone, Copy)]
pub struct DataFrames<'a> {
    channel: u32,
    msg: &'a [u8],
    packet_size: usize,
}

impl DataFrames<'_> {
    /// Their length in bytes.
    #[allow(clippy::len_without_is_empty)] // a message always has at least one frame
    #[inline]
    pub fn len(&self) -> usize {
        crate::frame::data_len(self.msg.len(), self.packet_size)
    }

    /// Writes them into `out`, which must hold exactly [`len`](Self::len) bytes: the bytes
    /// that [`Connection::send`] would queue for the same message.
    #[inline]
    pub fn write_to(&self, out: &mut [u8]) {
        crate::frame::write_data(out, self.channel, self.msg, self.packet_size);
    }
}

/// Leave to send one message in place, from [`Connection::send_in_place`]: write its
/// [`frames`](Self::frames) where they go, then [`commit`](Self::commit). Dropped without a
/// commit, nothing was sent and nothing is charged.
#[derive(Debug)]
#[must_use = "the message is sent only when the permit is committed"]
pub struct SendPermit<'a> {
    chan: &'a mut Chan,
    link: &'a mut LinkCredit,
    frames: DataFrames<'a>,
    cost: u64,
}

impl<'a> SendPermit<'a> {
    /// The frames to write.
    #[inline]
    pub fn frames(&self) -> &DataFrames<'a> {
        &self.frames
    }

    /// The frames were written where they go: charges the credit and returns the message's
    /// sequence number (1 for the first of the channel).
    #[inline]
    pub fn commit(self) -> u64 {
        self.chan.sent += self.cost;
        self.chan.sent_msgs += 1;
        self.link.sent += self.cost;
        self.chan.sent_msgs
    }
}

impl Connection {
    /// The fast form of [`send`](Self::send): when the link and the channel are open, the
    /// message is within the channel's maximum size and the credit allows it now, a permit to
    /// write its frames in place and commit them.
    ///
    /// `None` in every other case, with nothing charged, queued or reported: send the message
    /// with [`send`](Self::send), which says why it cannot go (or tells the peer that credit is
    /// short). Use it only while nothing waits for transmission (the frames would pass it).
    #[inline]
    pub fn send_in_place<'a>(&'a mut self, channel: u32, msg: &'a [u8]) -> Option<SendPermit<'a>> {
        debug_assert!(self.out.is_empty(), "frames wait for transmission");
        let open = self.state == State::Open;
        let link = &mut self.link;
        let chan = self.channels.get_mut(&channel)?;
        let cost = cost(msg.len());
        let go = open
            && chan.reset.is_none()
            && !chan.send_closed
            && msg.len() as u64 <= chan.opts.max_message
            && chan.sent + cost <= chan.send_limit
            && link.sent + cost <= link.send_limit;
        let packet_size = chan.opts.packet_size;
        go.then_some(SendPermit {
            chan,
            link,
            frames: DataFrames {
                channel,
                msg,
                packet_size,
            },
            cost,
        })
    }
}
