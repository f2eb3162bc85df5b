//! What the suite can measure: each transport (and mode) that this build has, started fresh
//! for each message size with the peer role the pattern needs.

use anyhow::{bail, Context};
use offhost_bench::peers::{self, PeerKind, PeerRun};
use offhost_bench::run::{Endpoint, Role};

/// One transport and mode to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A raw peer (pipes, sockets, crossbeam) in a thread of this process.
    Peer(PeerKind),
}

impl Target {
    /// Transport name in rows.
    pub fn transport(&self) -> &'static str {
        match self {
            Target::Peer(k) => k.name(),
        }
    }

    /// Mode name in rows (`-` where the transport has none).
    pub fn mode(&self) -> &'static str {
        match self {
            Target::Peer(_) => "-",
        }
    }

    /// Starts a peer serving `role` for `size`-byte messages.
    pub fn start(&self, role: Role, size: usize) -> anyhow::Result<Running> {
        match self {
            Target::Peer(k) => Ok(Running::Peer(
                peers::start(*k, role, size).with_context(|| format!("starting {}", k.name()))?,
            )),
        }
    }
}

/// A started target.
pub enum Running {
    /// A raw peer.
    Peer(PeerRun),
}

impl Running {
    /// The host's endpoint.
    pub fn endpoint(&mut self) -> &mut dyn Endpoint {
        match self {
            Running::Peer(p) => p.endpoint(),
        }
    }

    /// The engine's process id when it runs in another process.
    pub fn engine_pid(&self) -> Option<u32> {
        match self {
            Running::Peer(_) => None,
        }
    }
}

/// Every transport name this build knows.
pub fn known() -> Vec<&'static str> {
    PeerKind::ALL.iter().map(|k| k.name()).collect()
}

/// The targets named by `--transport` and `--mode` (empty: all).
pub fn select(transports: &[String], modes: &[String]) -> anyhow::Result<Vec<Target>> {
    if !modes.is_empty() {
        bail!(
            "--mode {}: none of the transports in this build has modes",
            modes.join(",")
        );
    }
    let names: Vec<String> = if transports.is_empty() {
        known().into_iter().map(String::from).collect()
    } else {
        transports.to_vec()
    };
    names
        .iter()
        .map(|n| {
            PeerKind::from_name(n).map(Target::Peer).with_context(|| {
                format!(
                    "--transport {n:?}: unknown; this build has {}",
                    known().join(", ")
                )
            })
        })
        .collect()
}
