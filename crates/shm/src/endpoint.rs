//! An endpoint: one side of a link, made of a [`Sender`] that produces into this side's
//! outgoing ring and allocates from this side's pool, and a [`Receiver`] that consumes the
//! incoming ring.

use rustix::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::Duration;

use crate::config::Mode;
use crate::layout::Layout;
use crate::receiver::Receiver;
use crate::ring::{Consumer, Producer};
use crate::sender::Sender;
use crate::shared::Shared;

/// Bytes of a buffer descriptor record: index, offset, length, reserved (`u32` each, LE).
pub(crate) const DESC: usize = 16;

/// Which end of a segment an endpoint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The creator of the segment (the connecting side).
    Host,
    /// The side that attached to it (the accepting side).
    Engine,
}

impl Side {
    /// The index of this side in the segment's per-side arrays: 0 for the host, 1 for the
    /// engine (rings, free rings, doorbells and pool halves are laid out in that order).
    pub const fn index(self) -> usize {
        match self {
            Side::Host => 0,
            Side::Engine => 1,
        }
    }

    /// The other end.
    pub const fn peer(self) -> Side {
        match self {
            Side::Host => Side::Engine,
            Side::Engine => Side::Host,
        }
    }
}

/// A connected end of a shared-memory link: a sender half and a receiver half.
pub struct Endpoint {
    sender: Sender,
    receiver: Receiver,
}

impl Endpoint {
    pub(crate) fn new(shared: Shared) -> Endpoint {
        let shared = Arc::new(shared);
        let side = shared.side;
        let map = &shared.seg.map;
        let l = &shared.seg.layout;
        let ctl = map.control();
        let (tx, rx) = (side.index(), side.peer().index());
        // SAFETY: the ring pointers lie in the mapping (the layout was validated against its
        // size), which the `Arc<Shared>` held by each half keeps alive; this side is the only
        // producer of ring `tx` and the only consumer of ring `rx`.
        let (producer, consumer) = unsafe {
            (
                Producer::new(
                    &ctl.rings[tx],
                    map.range(l.ring_off[tx], l.ring_bytes),
                    l.ring_bytes,
                ),
                Consumer::new(
                    &ctl.rings[rx],
                    map.range(l.ring_off[rx], l.ring_bytes),
                    l.ring_bytes,
                ),
            )
        };
        Endpoint {
            sender: Sender::new(shared.clone(), producer),
            receiver: Receiver::new(shared, consumer),
        }
    }

    /// Splits the endpoint into halves that can live on different threads.
    pub fn split(self) -> (Sender, Receiver) {
        (self.sender, self.receiver)
    }

    /// The sender half.
    pub fn sender(&mut self) -> &mut Sender {
        &mut self.sender
    }

    /// The receiver half.
    pub fn receiver(&mut self) -> &mut Receiver {
        &mut self.receiver
    }

    /// Which end this is.
    pub fn side(&self) -> Side {
        self.sender.side()
    }

    /// The segment's layout (offsets of rings, indices and pool).
    pub fn layout(&self) -> &Layout {
        &self.sender.shared().seg.layout
    }

    /// The memfd behind the segment, for diagnostics and fault-injection tests.
    pub fn segment_fd(&self) -> BorrowedFd<'_> {
        self.sender.shared().seg.fd.as_fd()
    }

    /// Changes how this side waits (both halves).
    pub fn set_mode(&self, mode: Mode, spin: Duration) {
        self.sender.shared().set_mode(mode, spin);
    }

    /// `Err(PeerGone)` once the peer has closed the link or died; `Err(CorruptPeer)` once this
    /// side stopped using the segment. A non-blocking probe of the control connection.
    pub fn check_peer(&self) -> Result<(), crate::ShmError> {
        self.sender.check_peer()
    }

    /// How this side waits: mode and adaptive spin budget.
    pub fn mode(&self) -> (Mode, Duration) {
        self.sender.shared().mode()
    }
}
