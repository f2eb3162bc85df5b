//! Sending a message with its frames written in place: straight into a transport's buffer (a
//! shared-memory record, say) instead of queued for [`Connection::poll_transmit`].

use crate::channel::{cost, Chan};
use crate::connection::{Connection, LinkCredit, State};

/// The data frames of one message, to be written where they go.
#[derive(Debug, Clone, Copy)]
pub struct DataFrames<'a> {
    channel: u32,
    body: Body<'a>,
    packet_size: usize,
}

/// A message's bytes: one slice, or several joined.
#[derive(Debug, Clone, Copy)]
enum Body<'a> {
    One(&'a [u8]),
    Parts(&'a [&'a [u8]], usize),
}

impl Body<'_> {
    fn len(&self) -> usize {
        match self {
            Body::One(m) => m.len(),
            Body::Parts(_, len) => *len,
        }
    }
}

impl<'a> DataFrames<'a> {
    /// Their length in bytes.
    #[allow(clippy::len_without_is_empty)] // a message always has at least one frame
    #[inline]
    pub fn len(&self) -> usize {
        crate::frame::data_len(self.body.len(), self.packet_size)
    }

    /// Writes them into `out`, which must hold exactly [`len`](Self::len) bytes: the bytes
    /// that [`Connection::send`] would queue for the same message.
    #[inline]
    pub fn write_to(&self, out: &mut [u8]) {
        match self.body {
            Body::One(msg) => crate::frame::write_data(out, self.channel, msg, self.packet_size),
            Body::Parts(..) => {
                let mut headers = Vec::new();
                let mut pieces = Vec::new();
                self.pieces(&mut headers, &mut pieces);
                let mut at = 0;
                for p in pieces {
                    out[at..at + p.len()].copy_from_slice(p);
                    at += p.len();
                }
                debug_assert_eq!(at, out.len());
            }
        }
    }

    /// The same bytes as [`write_to`](Self::write_to), as pieces to write one after another
    /// without joining them: each packet's header (kept in `headers`), the message's slices
    /// for its payload and its padding, appended to `out`.
    pub fn pieces<'b>(
        &'b self,
        headers: &'b mut Vec<[u8; crate::frame::HEADER_LEN]>,
        out: &mut Vec<&'b [u8]>,
    ) where
        'a: 'b,
    {
        let parts: &[&[u8]] = match &self.body {
            Body::One(m) => std::slice::from_ref(m),
            Body::Parts(p, _) => p,
        };
        let len = self.body.len();
        let sizes = crate::frame::packet_sizes(len, self.packet_size);
        headers.clear();
        headers.extend(
            sizes
                .clone()
                .map(|(n, last)| crate::frame::data_header_bytes(self.channel, n, last)),
        );
        let headers: &'b Vec<_> = headers;
        let mut rest = parts.iter().copied();
        let mut cur: &[u8] = &[];
        for ((n, _), h) in sizes.zip(headers.iter()) {
            out.push(&h[..]);
            let mut need = n;
            while need > 0 {
                if cur.is_empty() {
                    cur = rest.next().expect("the parts hold len bytes");
                    continue;
                }
                let k = need.min(cur.len());
                out.push(&cur[..k]);
                cur = &cur[k..];
                need -= k;
            }
            let p = crate::frame::pad_len(n);
            if p > 0 {
                out.push(&crate::frame::PADDING[..p]);
            }
        }
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
        self.permit(channel, Body::One(msg))
    }

    /// [`send_in_place`](Self::send_in_place) for one message made of `parts` joined (a
    /// header and a body, say), without joining them.
    pub fn send_parts_in_place<'a>(
        &'a mut self,
        channel: u32,
        parts: &'a [&'a [u8]],
    ) -> Option<SendPermit<'a>> {
        let len = parts.iter().map(|p| p.len()).sum();
        self.permit(channel, Body::Parts(parts, len))
    }

    /// A permit for `body` on `channel` when state, size and credit allow it now.
    #[inline]
    fn permit<'a>(&'a mut self, channel: u32, body: Body<'a>) -> Option<SendPermit<'a>> {
        debug_assert!(self.out.is_empty(), "frames wait for transmission");
        let open = self.state == State::Open;
        let link = &mut self.link;
        let chan = self.channels.get_mut(&channel)?;
        let len = body.len();
        let cost = cost(len);
        let go = open
            && chan.reset.is_none()
            && !chan.send_closed
            && len as u64 <= chan.opts.max_message
            && chan.sent + cost <= chan.send_limit
            && link.sent + cost <= link.send_limit;
        let packet_size = chan.opts.packet_size;
        go.then_some(SendPermit {
            chan,
            link,
            frames: DataFrames {
                channel,
                body,
                packet_size,
            },
            cost,
        })
    }
}
