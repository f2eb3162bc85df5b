//! What the suite can measure: each transport (and mode) that this build has, started fresh
//! for each message size with the peer role the pattern needs.

use anyhow::{bail, Context};
use offhost_bench::peers::{self, PeerKind, PeerRun};
use offhost_bench::run::{Endpoint, Role};
use offhost_shm::Mode;

use super::link_target::{self, LinkRun};
use super::shm_target::ShmRun;

/// One transport and mode to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A raw peer (pipes, sockets, crossbeam) in a thread of this process.
    Peer(PeerKind),
    /// The shared-memory rings, engine in a thread, both sides waiting in `Mode`.
    Shm(Mode),
    /// A channel of `offhost-link` over `tcp`, `unix` or `mem`, with this packet size.
    Link(&'static str, usize),
}

/// Packet size of link channels unless told otherwise (the protocol's default).
pub const DEFAULT_PACKET: usize = 16 * 1024;

/// Doorbell modes, in report order.
pub const MODES: [Mode; 3] = [Mode::Poll, Mode::Block, Mode::Adaptive];

impl Target {
    /// Transport name in rows.
    pub fn transport(&self) -> &'static str {
        match self {
            Target::Peer(k) => k.name(),
            Target::Shm(_) => "shm",
            Target::Link(t, _) => t,
        }
    }

    /// Mode name in rows (`-` where the transport has none).
    pub fn mode(&self) -> &'static str {
        match self {
            Target::Peer(_) | Target::Link(..) => "-",
            Target::Shm(m) => m.name(),
        }
    }

    /// Starts a peer serving `role` for `size`-byte messages.
    pub fn start(&self, role: Role, size: usize) -> anyhow::Result<Running> {
        match self {
            Target::Peer(k) => Ok(Running::Peer(
                peers::start(*k, role, size).with_context(|| format!("starting {}", k.name()))?,
            )),
            Target::Shm(m) => Ok(Running::Shm(ShmRun::start(*m, role, size)?)),
            Target::Link(t, p) => Ok(Running::Link(
                LinkRun::start(t, *p, role, size).with_context(|| format!("starting {t}"))?,
            )),
        }
    }
}

/// A started target.
pub enum Running {
    /// A raw peer.
    Peer(PeerRun),
    /// Shared-memory rings.
    Shm(ShmRun),
    /// A link channel.
    Link(LinkRun),
}

impl Running {
    /// The host's endpoint.
    pub fn endpoint(&mut self) -> &mut dyn Endpoint {
        match self {
            Running::Peer(p) => p.endpoint(),
            Running::Shm(s) => s.endpoint(),
            Running::Link(l) => l.endpoint(),
        }
    }

    /// The engine's process id when it runs in another process.
    pub fn engine_pid(&self) -> Option<u32> {
        match self {
            Running::Peer(_) | Running::Shm(_) | Running::Link(_) => None,
        }
    }
}

/// Every transport name this build knows.
pub fn known() -> Vec<&'static str> {
    let mut v = vec!["shm"];
    v.extend(link_target::TRANSPORTS);
    v.extend(PeerKind::ALL.iter().map(|k| k.name()));
    v
}

fn parse_modes(modes: &[String]) -> anyhow::Result<Vec<Mode>> {
    if modes.is_empty() {
        return Ok(MODES.to_vec());
    }
    modes
        .iter()
        .map(|m| {
            m.parse::<Mode>()
                .map_err(|e| anyhow::anyhow!("--mode: {e}"))
        })
        .collect()
}

/// The targets named by `--transport` and `--mode` (empty: all transports, all modes).
pub fn select(transports: &[String], modes: &[String]) -> anyhow::Result<Vec<Target>> {
    let modes = parse_modes(modes)?;
    let names: Vec<String> = if transports.is_empty() {
        known().into_iter().map(String::from).collect()
    } else {
        transports.to_vec()
    };
    let mut out = Vec::new();
    for n in &names {
        if n == "shm" {
            out.extend(modes.iter().map(|&m| Target::Shm(m)));
        } else if let Some(t) = link_target::TRANSPORTS.iter().find(|t| *t == n) {
            out.push(Target::Link(t, DEFAULT_PACKET));
        } else if let Some(k) = PeerKind::from_name(n) {
            out.push(Target::Peer(k));
        } else {
            bail!(
                "--transport {n:?}: unknown; this build has {}",
                known().join(", ")
            );
        }
    }
    Ok(out)
}
