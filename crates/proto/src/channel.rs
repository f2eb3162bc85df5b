//! State of one channel: the send direction's credit and the receive direction's reassembly.

use crate::error::CallError;
use crate::options::ChannelOptions;
use crate::store::Store;

/// Credit charged for a message of `len` bytes: its length, and 1 for an empty message so
/// that empty messages are bounded by credit too.
pub(crate) fn cost(len: usize) -> u64 {
    (len as u64).max(1)
}

/// Who opened a channel, as the peer's limits count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Opener {
    /// This side: not counted against the limits.
    Us,
    /// The peer, admitted: counted against the limits.
    Peer,
    /// The peer, refused: only its table entry is counted.
    Refused,
}

#[derive(Debug)]
pub(crate) struct Chan {
    pub(crate) name: String,
    pub(crate) opts: ChannelOptions,
    pub(crate) opener: Opener,
    // Send direction.
    /// Absolute byte offset the peer allows us to reach.
    pub(crate) send_limit: u64,
    /// Bytes (credit units) sent so far.
    pub(crate) sent: u64,
    /// Messages sent so far.
    pub(crate) sent_msgs: u64,
    /// Messages the peer application has taken.
    pub(crate) peer_delivered: u64,
    /// Limit at which we last reported being blocked.
    pub(crate) blocked_at: Option<u64>,
    /// We sent end of stream.
    pub(crate) send_closed: bool,
    // Receive direction.
    /// Limit we last granted.
    pub(crate) granted: u64,
    /// The peer said it is blocked at our last grant: once every message that reached us is
    /// taken, what drained is granted however little (a sender blocked behind a message
    /// larger than a small one frees would otherwise wait for a half-window grant that never
    /// comes).
    pub(crate) peer_blocked: bool,
    /// Credit units received.
    pub(crate) received: u64,
    /// Credit units the application has taken.
    pub(crate) consumed: u64,
    /// Messages the application has taken.
    pub(crate) delivered: u64,
    /// Complete messages waiting for the application, and the one being reassembled.
    pub(crate) store: Store,
    /// The peer sent end of stream.
    pub(crate) recv_closed: bool,
    /// The channel was refused or reset: code and reason.
    pub(crate) reset: Option<(u32, String)>,
    /// This side reset it ([`Connection::reset`](crate::Connection::reset)): the peer may
    /// still have data on the way, sent before our reset reached it, so closing our side does
    /// not end the receiving one; the channel stays (its data dropped, its credit flowing)
    /// until the peer closes it too, as a channel refused at its opening does.
    pub(crate) reset_here: bool,
}

impl Chan {
    pub(crate) fn new(name: String, opts: ChannelOptions) -> Self {
        let window = u64::from(opts.recv_buffer);
        Chan {
            name,
            opts,
            opener: Opener::Us,
            send_limit: window,
            sent: 0,
            sent_msgs: 0,
            peer_delivered: 0,
            blocked_at: None,
            send_closed: false,
            granted: window,
            peer_blocked: false,
            received: 0,
            consumed: 0,
            delivered: 0,
            store: Store::new(opts.recv_buffer as usize),
            recv_closed: false,
            reset: None,
            reset_here: false,
        }
    }

    /// Receive buffer counted in the link window: none for a refused channel.
    pub(crate) fn window(&self) -> u64 {
        match self.opener {
            Opener::Refused => 0,
            _ => u64::from(self.opts.recv_buffer),
        }
    }

    /// `Err(Reset)` once the channel was refused or reset.
    pub(crate) fn check_reset(&self) -> Result<(), CallError> {
        match &self.reset {
            Some((code, reason)) => Err(CallError::Reset {
                code: *code,
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// The limit the receive side could grant now.
    pub(crate) fn grantable(&self) -> u64 {
        self.consumed + u64::from(self.opts.recv_buffer)
    }

    /// Grants all the credit the drained buffer allows: a `credit` frame for `channel` (which
    /// also says how many messages the application took) appended to `out`.
    #[inline(never)]
    pub(crate) fn grant(&mut self, channel: u32, out: &mut Vec<u8>) {
        let limit = self.grantable();
        if limit > self.granted {
            self.peer_blocked = false;
        }
        self.granted = limit;
        crate::frame::Frame::Credit {
            channel,
            limit: self.granted,
            delivered: self.delivered,
        }
        .encode(out);
    }

    /// The application took `n` messages worth `cost` credit: counts them and, on an open
    /// link when it is worth a frame, grants the drained credit (see [`Chan::grant`]), noting
    /// in `deferrable` whether the grant may wait (see `connection::note_grant`).
    #[inline(always)]
    pub(crate) fn took(
        &mut self,
        channel: u32,
        n: u64,
        cost: u64,
        open: bool,
        out: &mut Vec<u8>,
        deferrable: &mut usize,
    ) {
        self.consumed += cost;
        self.delivered += n;
        if open && !self.recv_closed && self.wants_grant() {
            let may_wait = self.grant_may_wait();
            let before = out.len();
            self.grant(channel, out);
            crate::connection::note_grant(out.len(), deferrable, before, may_wait);
        }
    }

    /// Whether a grant made now may wait to be sent (see
    /// [`Connection::has_urgent_transmit`](crate::Connection::has_urgent_transmit)): the peer
    /// is not blocked, waits for no delivery report (an asynchronous channel), and still holds
    /// at least a quarter of the window.
    #[inline(always)]
    fn grant_may_wait(&self) -> bool {
        self.opts.send_mode != crate::SendMode::Sync
            && !self.peer_blocked
            && self.granted.saturating_sub(self.received) >= u64::from(self.opts.recv_buffer) / 4
    }

    /// Whether a fresh grant is worth a frame after the application drained a message: half
    /// a window of it; any on a synchronous channel; any once the peer is blocked and every
    /// message that reached us is taken (nothing else can drain until it gets credit).
    #[inline(always)]
    pub(crate) fn wants_grant(&self) -> bool {
        let gain = self.grantable() - self.granted;
        self.opts.send_mode == crate::SendMode::Sync
            || gain >= u64::from(self.opts.recv_buffer) / 2
            || (self.peer_blocked && gain > 0 && self.store.is_empty())
    }

    /// The peer says it is blocked at `limit`: grants what drained, and remembers the block
    /// when nothing did (see `peer_blocked`). A block at an older limit is stale: a later
    /// grant is on its way.
    pub(crate) fn peer_blocked_at(&mut self, channel: u32, limit: u64, out: &mut Vec<u8>) {
        if limit >= self.granted {
            self.peer_blocked = true;
        }
        self.grant(channel, out);
    }

    /// Both directions are finished and nothing is left for the application.
    pub(crate) fn finished(&self) -> bool {
        self.send_closed && self.recv_closed && self.store.is_empty()
    }
}
