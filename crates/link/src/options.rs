//! How a session authenticates and whom a server admits.

use std::path::PathBuf;
use std::time::Duration;

/// Security options of [`Session::connect_with`](crate::Session::connect_with) and
/// [`Server::bind_with`](crate::Server::bind_with).
///
/// | scheme | what the options do |
/// |---|---|
/// | `tls:HOST:PORT` | mutual TLS with the certificates in [`tls_certificates`](Self::tls_certificates) (nbdkit's layout: `ca-cert.pem`, `server-cert.pem`, `server-key.pem`, `client-cert.pem`, `client-key.pem`); a server requires a client certificate signed by the same CA |
/// | `tcp:HOST:PORT` | plain, unauthenticated TCP: a server binds only with [`insecure`](Self::insecure) |
/// | `unix:PATH`, `shm:ADDR` | the socket file is owner-only (0600) and a server admits peers running as its own uid and [`allow_uids`](Self::allow_uids) (`SO_PEERCRED`) |
/// | `mem:NAME` | nothing: in this process |
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkOptions {
    /// The certificate directory for `tls:` URLs.
    pub tls_certificates: Option<PathBuf>,
    /// Let a server listen on plain `tcp:` (no authentication, no encryption).
    pub insecure: bool,
    /// Uids a `unix:` or `shm:` server admits besides its own.
    pub allow_uids: Vec<u32>,
    /// How long the peer may send nothing (no data, no heartbeat) before the session is
    /// declared dead and every wait on it fails with [`LinkError::PeerSilent`](crate::LinkError::PeerSilent);
    /// `None`: never. Default [`DEFAULT_PEER_DEADLINE`](crate::DEFAULT_PEER_DEADLINE).
    pub peer_deadline: Option<Duration>,
    /// Interrupt coalescing of this side of `shm:` sessions ([`offhost_shm::EventLimit`]; a
    /// server's comes from its [`Limits`](crate::Limits)); `None`: a wake-up per publication.
    /// Other transports have no doorbell and ignore it.
    pub event_limit: Option<offhost_shm::EventLimit>,
}

impl Default for LinkOptions {
    fn default() -> Self {
        LinkOptions {
            tls_certificates: None,
            insecure: false,
            allow_uids: Vec::new(),
            peer_deadline: Some(crate::DEFAULT_PEER_DEADLINE),
            event_limit: None,
        }
    }
}

impl LinkOptions {
    /// No certificates, no plain TCP, our own uid only.
    pub fn new() -> LinkOptions {
        LinkOptions::default()
    }

    /// Uses the certificate directory `dir` for `tls:` URLs.
    pub fn tls_certificates(mut self, dir: impl Into<PathBuf>) -> LinkOptions {
        self.tls_certificates = Some(dir.into());
        self
    }

    /// Lets a server listen on plain `tcp:` when `yes`.
    pub fn insecure(mut self, yes: bool) -> LinkOptions {
        self.insecure = yes;
        self
    }

    /// Admits peers running as `uids` on `unix:` and `shm:` servers, besides our own uid.
    pub fn allow_uids(mut self, uids: impl IntoIterator<Item = u32>) -> LinkOptions {
        self.allow_uids.extend(uids);
        self
    }

    /// Declares the peer dead after `deadline` without a word from it (`None`: never).
    pub fn peer_deadline(mut self, deadline: Option<Duration>) -> LinkOptions {
        self.peer_deadline = deadline;
        self
    }

    /// Coalesces this side's wake-ups on `shm:` sessions (see [`LinkOptions::event_limit`]).
    pub fn event_limit(mut self, limit: Option<offhost_shm::EventLimit>) -> LinkOptions {
        self.event_limit = limit;
        self
    }

    pub(crate) fn cert_dir(&self, url: &str) -> Result<offhost_access::CertDir, crate::LinkError> {
        self.tls_certificates
            .as_ref()
            .map(offhost_access::CertDir::new)
            .ok_or_else(|| {
                crate::LinkError::NoCertificates(
                    url.to_owned(),
                    offhost_units::Needs::new(offhost_units::Setting::TlsCertificates),
                )
            })
    }
}
