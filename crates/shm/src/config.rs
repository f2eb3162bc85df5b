//! Link configuration: ring and pool sizes, and how a side waits (its doorbell mode).

use std::time::Duration;

/// How a side waits for its peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// Spin on the shared indices; never sleep. Lowest latency, one busy core per waiting side.
    Poll,
    /// Sleep on a futex at once; the peer makes a wake-up system call only while this side sleeps.
    Block,
    /// Spin for [`Config::spin`], then sleep as in [`Mode::Block`]; while spins keep ending
    /// in sleep with other threads wanting the CPU, sleep at once for a growing number of
    /// waits (up to 63) between spins.
    Adaptive,
}

impl Mode {
    /// The name used on command lines and in reports: `poll`, `block` or `adaptive`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Poll => "poll",
            Mode::Block => "block",
            Mode::Adaptive => "adaptive",
        }
    }

    pub(crate) fn to_wire(self) -> u32 {
        match self {
            Mode::Poll => 0,
            Mode::Block => 1,
            Mode::Adaptive => 2,
        }
    }

    pub(crate) fn from_wire(v: u32) -> Option<Mode> {
        match v {
            0 => Some(Mode::Poll),
            1 => Some(Mode::Block),
            2 => Some(Mode::Adaptive),
            _ => None,
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "poll" => Ok(Mode::Poll),
            "block" => Ok(Mode::Block),
            "adaptive" => Ok(Mode::Adaptive),
            other => Err(format!(
                "unknown doorbell mode {other:?} (expected poll, block or adaptive)"
            )),
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Parameters of a segment and of the creating side's waits.
///
/// The connecting side (the host) chooses the sizes; the accepting side (the engine) attaches
/// to whatever it is handed, after validating it. `mode` and `spin` are per side: the creator's
/// values travel in the segment header as a hint that [`Listener::accept`](crate::Listener::accept)
/// follows unless told otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Bytes of each of the two rings (power of two, 256 B to 1 GiB). The largest inline
    /// record is `ring_bytes / 2 - 16` bytes.
    pub ring_bytes: u64,
    /// Pool buffers owned by each side (0 for no pool). The segment holds twice this many.
    pub pool_buffers: u32,
    /// Bytes of each pool buffer (a multiple of 64).
    pub buffer_size: u32,
    /// How this side waits.
    pub mode: Mode,
    /// How long [`Mode::Adaptive`] spins before it sleeps.
    pub spin: Duration,
    /// This side's interrupt coalescing ([`Receiver::set_event_limit`](crate::Receiver::set_event_limit));
    /// `None`: a wake-up per publication. Not sent to the peer, which sets its own.
    pub event_limit: Option<crate::EventLimit>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            ring_bytes: 1 << 20,
            pool_buffers: 32,
            buffer_size: 64 << 10,
            mode: Mode::Adaptive,
            spin: Duration::from_micros(50),
            event_limit: None,
        }
    }
}

impl Config {
    /// The largest payload of an inline record in a ring of this configuration.
    pub fn max_record(&self) -> usize {
        (self.ring_bytes / 2).saturating_sub(crate::ring::HEADER as u64) as usize
    }
}
