//! The one naming of what `offhost bench` measures: the same words in every command's
//! `--transport`, every JSON row's `transport` and every doc.
//!
//! A transport says what carries the bytes:
//!
//! | name | kind | what |
//! |---|---|---|
//! | `shm` | raw ring | records on the shared-memory rings of `offhost-shm`, no channel protocol |
//! | `shm-chan` | channel | `offhost-link` channels over those rings (old name `shm-link`) |
//! | `tcp` | channel | channels over TCP on loopback |
//! | `tls` | channel | channels over mutual TLS (rustls) on TCP loopback (`tls:`) |
//! | `unix` | channel | channels over a Unix socket |
//! | `mem` | channel | channels over the in-process `mem:` transport |
//! | `tcp-raw` | plain | TCP on loopback used directly (`TCP_NODELAY`) |
//! | `tls-raw` | plain | one rustls connection on TCP loopback used directly, the way rustls's own examples use it (no channel protocol, no split halves) |
//! | `unix-raw` | plain | a Unix stream socket pair used directly |
//! | `pipe-raw` | plain | two pipes used directly |
//! | `crossbeam` | plain | two crossbeam channels of owned buffers, in this process |
//! | `iceoryx2` | plain | iceoryx2's publish-subscribe services of byte slices (busy-waiting in `poll`, its event service in `block`), in this process; `offhost-bench-suite` starts it (its `iceoryx2` feature) |
//!
//! `tls` and `tls-raw` need a certificate directory and rustls, which this crate does not know:
//! `offhost-bench-suite` starts them (with a throw-away directory per run), and
//! [`crate::plain::start`] refuses `tls-raw`. `tls-raw` is `tls`'s raw peer as `tcp-raw` is
//! `tcp`'s: the same bytes, encrypted the same way, without the channel protocol, so `vs_raw`
//! says what the channel costs over TLS and [`Transport::unencrypted`] (`tls` against `tcp`,
//! `tls-raw` against `tcp-raw`) what TLS costs.
//!
//! Where the other side (the echo or sink peer) runs is a [`Placement`], reported in the
//! rows' `peer` field: a thread of the bench process, another process, or a remote engine the
//! bench connected to.

use std::fmt;
use std::str::FromStr;

/// What carries the bytes of a measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Records on the raw shared-memory rings.
    Shm,
    /// Channels over the shared-memory rings.
    ShmChan,
    /// Channels over TCP loopback.
    Tcp,
    /// Channels over mutual TLS on TCP loopback.
    Tls,
    /// Channels over a Unix socket.
    Unix,
    /// Channels over the in-process `mem:` transport.
    Mem,
    /// Plain TCP loopback.
    TcpRaw,
    /// One plain rustls connection on TCP loopback.
    TlsRaw,
    /// A plain Unix stream socket pair.
    UnixRaw,
    /// Two plain pipes.
    PipeRaw,
    /// Two crossbeam channels in this process.
    Crossbeam,
    /// iceoryx2's publish-subscribe services, in this process.
    Iceoryx2,
}

/// The three kinds of transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The raw shared-memory ring (`shm`).
    RawRing,
    /// An `offhost-link` channel (`shm-chan`, `tcp`, `tls`, `unix`, `mem`).
    Channel,
    /// Something offhost is compared with (`tcp-raw`, `tls-raw`, `unix-raw`, `pipe-raw`,
    /// `crossbeam`, `iceoryx2`).
    Plain,
}

/// Names accepted for a while besides the canonical ones, and what they mean now.
pub const ALIASES: [(&str, Transport); 1] = [("shm-link", Transport::ShmChan)];

/// A transport name that names nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown transport {name:?} (known: {})", known_names())]
pub struct UnknownTransport {
    /// The name given.
    pub name: String,
}

fn known_names() -> String {
    Transport::ALL.map(Transport::name).join(", ")
}

impl Transport {
    /// Every transport, in report order.
    pub const ALL: [Transport; 12] = [
        Transport::Shm,
        Transport::ShmChan,
        Transport::Tcp,
        Transport::Tls,
        Transport::Unix,
        Transport::Mem,
        Transport::TcpRaw,
        Transport::TlsRaw,
        Transport::UnixRaw,
        Transport::PipeRaw,
        Transport::Crossbeam,
        Transport::Iceoryx2,
    ];

    /// The canonical name, as commands take it and rows report it.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Shm => "shm",
            Transport::ShmChan => "shm-chan",
            Transport::Tcp => "tcp",
            Transport::Tls => "tls",
            Transport::Unix => "unix",
            Transport::Mem => "mem",
            Transport::TcpRaw => "tcp-raw",
            Transport::TlsRaw => "tls-raw",
            Transport::UnixRaw => "unix-raw",
            Transport::PipeRaw => "pipe-raw",
            Transport::Crossbeam => "crossbeam",
            Transport::Iceoryx2 => "iceoryx2",
        }
    }

    /// Raw ring, channel or plain.
    pub fn kind(self) -> Kind {
        match self {
            Transport::Shm => Kind::RawRing,
            Transport::ShmChan
            | Transport::Tcp
            | Transport::Tls
            | Transport::Unix
            | Transport::Mem => Kind::Channel,
            Transport::TcpRaw
            | Transport::TlsRaw
            | Transport::UnixRaw
            | Transport::PipeRaw
            | Transport::Crossbeam
            | Transport::Iceoryx2 => Kind::Plain,
        }
    }

    /// The transport a channel is compared with: the same bytes carried without the channel
    /// protocol (`shm-chan`: `shm`, `tcp`: `tcp-raw`, `tls`: `tls-raw`, `unix`: `unix-raw`,
    /// `mem`: `crossbeam`).
    pub fn raw_peer(self) -> Option<Transport> {
        match self {
            Transport::ShmChan => Some(Transport::Shm),
            Transport::Tcp => Some(Transport::TcpRaw),
            Transport::Tls => Some(Transport::TlsRaw),
            Transport::Unix => Some(Transport::UnixRaw),
            Transport::Mem => Some(Transport::Crossbeam),
            _ => None,
        }
    }

    /// The same transport without encryption, for TLS ones (`tls`: `tcp`, `tls-raw`:
    /// `tcp-raw`): a TLS row's `throughput_vs_tcp` is measured against it.
    pub fn unencrypted(self) -> Option<Transport> {
        match self {
            Transport::Tls => Some(Transport::Tcp),
            Transport::TlsRaw => Some(Transport::TcpRaw),
            _ => None,
        }
    }

    /// Whether it needs a certificate directory (`tls`, `tls-raw`).
    pub fn is_tls(self) -> bool {
        self.unencrypted().is_some()
    }

    /// Whether the bytes cross shared memory, where doorbell modes (`poll`, `block`,
    /// `adaptive`) apply (offhost's rings and channels on them, and iceoryx2); every other
    /// transport blocks in the kernel or in crossbeam.
    pub fn has_modes(self) -> bool {
        self.is_offhost_shm() || self == Transport::Iceoryx2
    }

    /// Whether it is offhost's shared memory (`shm`, `shm-chan`): what can run its echo in
    /// another process (`offhost echo`), coalesces wake-ups (`--event-limit`) and is compared
    /// with iceoryx2.
    pub fn is_offhost_shm(self) -> bool {
        matches!(self, Transport::Shm | Transport::ShmChan)
    }
}

impl FromStr for Transport {
    type Err = UnknownTransport;

    /// A canonical name or an alias ([`ALIASES`]).
    fn from_str(name: &str) -> Result<Transport, UnknownTransport> {
        let name = name.trim();
        Transport::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .or_else(|| ALIASES.iter().find(|(a, _)| *a == name).map(|(_, t)| *t))
            .ok_or_else(|| UnknownTransport { name: name.into() })
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where the echo or sink peer of a measurement runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// A thread of the bench process, pinned to the engine core.
    Thread,
    /// Another process (`offhost echo`), started and reaped by the bench.
    Process,
    /// An engine the bench connected to (`--connect`); not started here.
    Remote,
}

/// A placement name that names nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown peer placement {0:?} (expected thread or process)")]
pub struct UnknownPlacement(pub String);

impl Placement {
    /// The name in commands and rows.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Thread => "thread",
            Placement::Process => "process",
            Placement::Remote => "remote",
        }
    }
}

impl FromStr for Placement {
    type Err = UnknownPlacement;

    /// `thread` or `process` (`remote` is what `--connect` gives, not a choice).
    fn from_str(s: &str) -> Result<Placement, UnknownPlacement> {
        match s.trim() {
            "thread" => Ok(Placement::Thread),
            "process" => Ok(Placement::Process),
            other => Err(UnknownPlacement(other.into())),
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_and_names_are_distinct() {
        for t in Transport::ALL {
            assert_eq!(t.name().parse::<Transport>(), Ok(t));
            assert_eq!(t.to_string(), t.name());
        }
        let mut names: Vec<&str> = Transport::ALL.map(Transport::name).to_vec();
        names.extend(ALIASES.map(|(a, _)| a));
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a name or alias stands twice");
    }

    #[test]
    fn the_old_name_of_shm_channels_is_accepted() {
        assert_eq!("shm-link".parse(), Ok(Transport::ShmChan));
        let e = "carrier-pigeon".parse::<Transport>().unwrap_err();
        assert!(e.to_string().contains("unknown transport"), "{e}");
        assert!(e.to_string().contains("shm-chan"), "{e}");
    }

    #[test]
    fn every_channel_has_a_raw_peer_of_another_kind() {
        for t in Transport::ALL {
            match t.kind() {
                Kind::Channel => {
                    let raw = t.raw_peer().expect("channel without raw peer");
                    assert_ne!(raw.kind(), Kind::Channel, "{t}");
                }
                _ => assert_eq!(t.raw_peer(), None, "{t}"),
            }
        }
        assert!(Transport::Shm.has_modes() && !Transport::Tcp.has_modes());
    }

    #[test]
    fn tls_transports_pair_with_their_plain_tcp_of_the_same_kind() {
        for t in Transport::ALL {
            match t.unencrypted() {
                Some(plain) => {
                    assert!(t.is_tls() && !plain.is_tls(), "{t}");
                    assert_eq!(plain.kind(), t.kind(), "{t}");
                }
                None => assert!(!t.is_tls(), "{t}"),
            }
        }
        assert_eq!("tls".parse(), Ok(Transport::Tls));
        assert_eq!(Transport::Tls.raw_peer(), Some(Transport::TlsRaw));
        assert_eq!(Transport::TlsRaw.unencrypted(), Some(Transport::TcpRaw));
    }

    #[test]
    fn placements_parse() {
        assert_eq!("thread".parse(), Ok(Placement::Thread));
        assert_eq!("process".parse(), Ok(Placement::Process));
        assert!("remote".parse::<Placement>().is_err());
        assert_eq!(Placement::Remote.to_string(), "remote");
    }
}
