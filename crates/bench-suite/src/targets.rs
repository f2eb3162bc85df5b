//! What the suite (`exchange`, `stream`) measures: every transport (and doorbell mode) this
//! build has, started fresh for each message size with the peer role the pattern needs, the
//! peer on a thread pinned on the engine core.

use offhost_bench::plain::PeerRun;
use offhost_bench::run::{Conn, Role};
use offhost_bench::transport::{Kind, Placement, Transport};
use offhost_shm::Mode;

use crate::channel::ChannelRun;
use crate::error::{Context as _, Result};
use crate::ring::RingRun;
use crate::tls;

/// One transport (with its mode) to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A plain transport (pipes, sockets, crossbeam).
    Plain(Transport),
    /// The raw shared-memory rings, both sides waiting in this mode.
    Ring(Mode),
    /// A channel transport with this packet size.
    Channel(Transport, usize),
    /// iceoryx2, both sides waiting in this mode.
    Iceoryx2(Mode),
}

/// Packet size of channels unless told otherwise (the protocol's default).
pub const DEFAULT_PACKET: usize = 16 * 1024;

/// The spin budget of iceoryx2's `adaptive` mode in the suite (as the rings' default).
pub const ICEORYX2_SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// Doorbell modes, in report order.
pub const MODES: [Mode; 3] = [Mode::Poll, Mode::Block, Mode::Adaptive];

impl Target {
    /// The transport.
    pub fn transport(&self) -> Transport {
        match *self {
            Target::Plain(t) | Target::Channel(t, _) => t,
            Target::Ring(_) => Transport::Shm,
            Target::Iceoryx2(_) => Transport::Iceoryx2,
        }
    }

    /// Mode name in rows (`-` where the transport has none).
    pub fn mode(&self) -> &'static str {
        match self {
            Target::Plain(_) | Target::Channel(..) => "-",
            Target::Ring(m) | Target::Iceoryx2(m) => m.name(),
        }
    }

    /// Where the peer runs: always a thread of this process.
    pub fn placement(&self) -> Placement {
        Placement::Thread
    }

    /// Starts a peer serving `role` for `size`-byte messages.
    pub fn start(&self, role: Role, size: usize) -> Result<Running> {
        let what = || format!("starting {}", self.transport());
        Ok(match *self {
            Target::Plain(t) => {
                Running::Plain(tls::start_plain(t, None, role, size).with_context(what)?)
            }
            Target::Ring(m) => Running::Ring(RingRun::start(m, role, size).with_context(what)?),
            Target::Iceoryx2(m) => Running::Plain(
                crate::iceoryx2::start(m, ICEORYX2_SPIN, role, size).with_context(what)?,
            ),
            Target::Channel(t, p) => {
                Running::Channel(ChannelRun::start(t, p, role, size).with_context(what)?)
            }
        })
    }
}

/// A started target.
pub enum Running {
    /// A plain transport.
    Plain(PeerRun),
    /// The raw rings.
    Ring(RingRun),
    /// A channel.
    Channel(ChannelRun),
}

impl Running {
    /// The host's endpoint.
    pub fn conn(&mut self) -> &mut dyn Conn {
        match self {
            Running::Plain(p) => p.conn(),
            Running::Ring(s) => s.conn(),
            Running::Channel(l) => l.conn(),
        }
    }
}

/// The targets of `transports` (empty: all of them, iceoryx2 only when this build has it) in
/// every mode of `modes` (empty: all three) where the transport has modes.
pub fn select(transports: &[Transport], modes: &[Mode]) -> Vec<Target> {
    let modes = if modes.is_empty() { &MODES[..] } else { modes };
    let all = if transports.is_empty() {
        &Transport::ALL[..]
    } else {
        transports
    };
    let mut out = Vec::new();
    for &t in all {
        match t.kind() {
            Kind::RawRing => out.extend(modes.iter().map(|&m| Target::Ring(m))),
            Kind::Channel => out.push(Target::Channel(t, DEFAULT_PACKET)),
            Kind::Plain if t == Transport::Iceoryx2 => {
                if !transports.is_empty() || crate::iceoryx2::AVAILABLE {
                    out.extend(modes.iter().map(|&m| Target::Iceoryx2(m)));
                }
            }
            Kind::Plain => out.push(Target::Plain(t)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_transport_is_a_target_and_only_shared_memory_has_modes() {
        let all = select(&[], &[]);
        let ice = crate::iceoryx2::AVAILABLE;
        // The ring in three modes; iceoryx2 in three when built, none otherwise.
        let n = Transport::ALL.len();
        assert_eq!(all.len(), if ice { n + 4 } else { n + 1 });
        assert_eq!(
            all.iter().filter(|t| t.mode() != "-").count(),
            if ice { 6 } else { 3 }
        );
        let one = select(&[Transport::Shm, Transport::Tcp], &[Mode::Block]);
        assert_eq!(
            one,
            [
                Target::Ring(Mode::Block),
                Target::Channel(Transport::Tcp, DEFAULT_PACKET)
            ]
        );
        assert_eq!(one[0].transport().name(), "shm");
    }
}
