//! Sessions: one link to a peer, carrying many channels.

use std::sync::Arc;
use std::time::Duration;

use offhost_proto::{ChannelOptions, Config, Connection, Side};

use crate::channel::Channel;
use crate::driver::{Deadline, Driver};
use crate::error::LinkError;
use crate::options::LinkOptions;
use crate::url::Url;
use crate::wire::{WireRead, WireWrite};

/// Owns the driver; dropping the last handle (session or channel) says goodbye to the peer.
pub(crate) struct Handle {
    pub(crate) driver: Arc<Driver>,
    pub(crate) transport: &'static str,
    /// The server's session slot this session holds (given back with the last handle).
    pub(crate) _slot: Option<crate::limits::Held>,
    /// The certificate the other side of a `tls:` session presented (DER, verified).
    pub(crate) peer_certificate: std::sync::OnceLock<Vec<u8>>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.driver.close();
    }
}

/// A link to one peer, carrying many channels (the paper's OpenLink).
///
/// Cheap to clone; every clone and every [`Channel`] keeps the link up, and the link closes
/// (goodbye to the peer) when the last of them is dropped or [`close`](Self::close) is called.
#[derive(Clone)]
pub struct Session {
    pub(crate) handle: Arc<Handle>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("transport", &self.handle.transport)
            .finish()
    }
}

impl Session {
    /// Connects to an engine at `url`: `tcp:HOST:PORT`, `unix:PATH`, `mem:NAME` or `shm:ADDR`
    /// (shared memory with [`default_shm_config`](crate::default_shm_config)). A `tls:` URL
    /// needs a certificate directory: use [`connect_with`](Self::connect_with).
    pub fn connect(url: &str) -> Result<Session, LinkError> {
        Self::connect_with(url, &LinkOptions::default())
    }

    /// Connects to an engine at `url` with `options`: for `tls:HOST:PORT` the certificate
    /// directory (the server must present a certificate of its CA naming HOST, and this side
    /// presents its client certificate). Returns once the server has admitted this client.
    pub fn connect_with(url: &str, options: &LinkOptions) -> Result<Session, LinkError> {
        let live = options.peer_deadline;
        match Url::parse(url)? {
            Url::Tls(addr) | Url::Tcp(addr) if addr == crate::activation::SYSTEMD => {
                Err(LinkError::BadUrl {
                    url: url.to_owned(),
                    why: "`systemd` names a listening socket passed to a server; connect to HOST:PORT",
                })
            }
            Url::Tls(addr) => {
                let client = offhost_access::TlsClient::load(&options.cert_dir(url)?)?;
                let (r, w, cert) = crate::tls::connect(&addr, &client)?;
                let s = Self::over(Box::new(r), Box::new(w), Side::Client, "tls", live)?;
                if let Some(cert) = cert {
                    let _ = s.handle.peer_certificate.set(cert);
                }
                Ok(s)
            }
            Url::Tcp(addr) => {
                let s = crate::tls::tcp_connect(&addr, "tcp")?;
                Self::over_socket(s.into(), Side::Client, "tcp", live)
            }
            Url::Unix(path) => {
                let s = std::os::unix::net::UnixStream::connect(&path)
                    .map_err(|e| LinkError::io(format!("connect unix:{}", path.display()), e))?;
                Self::over_socket(s.into(), Side::Client, "unix", live)
            }
            Url::Mem(name) => {
                let c = crate::mem::connect(&name)?;
                Self::over(Box::new(c.read), Box::new(c.write), Side::Client, "mem", live)
            }
            Url::Shm(addr) => {
                let config = offhost_shm::Config {
                    event_limit: options.event_limit,
                    ..crate::shm::default_config()
                };
                Self::shm_client(&addr, &config, live)
            }
        }
    }

    /// Connects over shared memory to the engine listening at `addr` (a socket path or
    /// `@name`), creating the segment with `config` (ring and pool sizes, doorbell mode).
    /// The session's peer deadline is the default ([`crate::DEFAULT_PEER_DEADLINE`]).
    pub fn connect_shm(addr: &str, config: &offhost_shm::Config) -> Result<Session, LinkError> {
        Self::shm_client(addr, config, Some(crate::DEFAULT_PEER_DEADLINE))
    }

    fn shm_client(
        addr: &str,
        config: &offhost_shm::Config,
        peer_deadline: Option<Duration>,
    ) -> Result<Session, LinkError> {
        let ep = offhost_shm::connect(addr, config)?;
        let (r, w) = crate::shm::halves(ep);
        Self::over(Box::new(r), Box::new(w), Side::Client, "shm", peer_deadline)
    }

    /// The engine's end of a session over a shared-memory endpoint it accepted itself (a
    /// listener that looked at the first record before deciding what the host speaks), its
    /// peer held to `limits` as a [`Server`](crate::Server)'s are.
    pub fn serve_shm(
        ep: offhost_shm::Endpoint,
        limits: &crate::Limits,
    ) -> Result<Session, LinkError> {
        let mut ep = ep;
        ep.receiver().set_event_limit(limits.event_limit);
        let (r, w) = crate::shm::halves(ep);
        let accepted = crate::server::Accepted {
            side: Side::Server,
            limits: *limits,
            write: crate::limits::DriverLimits::from(limits),
            slot: None,
        };
        Self::over_limited(Box::new(r), Box::new(w), "shm", accepted)
    }

    pub(crate) fn over_socket(
        fd: std::os::fd::OwnedFd,
        side: Side,
        transport: &'static str,
        peer_deadline: Option<Duration>,
    ) -> Result<Session, LinkError> {
        let (r, w) =
            crate::wire::sock_pair(fd).map_err(|e| LinkError::io("duplicate socket", e))?;
        Self::over(Box::new(r), Box::new(w), side, transport, peer_deadline)
    }

    pub(crate) fn over(
        read: Box<dyn WireRead>,
        write: Box<dyn WireWrite>,
        side: Side,
        transport: &'static str,
        peer_deadline: Option<Duration>,
    ) -> Result<Session, LinkError> {
        let accepted = crate::server::Accepted::host(side, peer_deadline);
        Self::over_limited(read, write, transport, accepted)
    }

    /// A session whose peer is held to `accepted`'s limits (a server's session).
    pub(crate) fn over_limited(
        read: Box<dyn WireRead>,
        write: Box<dyn WireWrite>,
        transport: &'static str,
        accepted: crate::server::Accepted,
    ) -> Result<Session, LinkError> {
        let mut config = Config::new(accepted.side);
        config.limits = accepted.limits.proto;
        let driver = Driver::start(Connection::new(config), read, write, accepted.write)?;
        Ok(Session {
            handle: Arc::new(Handle {
                driver,
                transport,
                _slot: accepted.slot,
                peer_certificate: std::sync::OnceLock::new(),
            }),
        })
    }

    /// Refuses this session: the peer's calls fail with `reason` (name the limit and the
    /// flag that raises it), and the link closes.
    pub fn refuse(&self, reason: &str) {
        self.handle.driver.refuse(reason);
    }

    /// On a `tls:` session, the certificate the other side presented (DER, verified against
    /// the CA): the client's on a session a listener accepted, the server's on one this side
    /// connected; `None` on other transports. What it names
    /// (`offhost_access::identity::names_engine`) is what the other side proved, where what
    /// it says on its channels is only what it says.
    pub fn peer_certificate(&self) -> Option<&[u8]> {
        self.handle.peer_certificate.get().map(Vec::as_slice)
    }

    /// The transport's name: `tls`, `tcp`, `unix`, `mem` or `shm`.
    pub fn transport(&self) -> &'static str {
        self.handle.transport
    }

    /// Opens a channel named `name`; the peer sees it through [`accept`](Self::accept).
    /// Messages may be sent on it at once.
    pub fn open(&self, name: &str, options: ChannelOptions) -> Result<Channel, LinkError> {
        let d = &self.handle.driver;
        let mut st = d.lock();
        let id = st.conn.open(name, options).map_err(|e| st.call_error(e))?;
        drop(d.flush(st));
        Ok(Channel::new(
            self.handle.clone(),
            id,
            name.to_owned(),
            options,
        ))
    }

    /// Waits for the next channel the peer opens (engine side), for at most `timeout`.
    pub fn accept_timeout(&self, timeout: Option<Duration>) -> Result<Channel, LinkError> {
        self.accept_until(Deadline::after(timeout))
    }

    /// Waits for the next channel the peer opens (engine side).
    pub fn accept(&self) -> Result<Channel, LinkError> {
        self.accept_until(Deadline::Never)
    }

    fn accept_until(&self, deadline: Deadline) -> Result<Channel, LinkError> {
        let (id, name, opts) = self.handle.driver.wait_passive(deadline, |st| {
            while let Some(id) = st.incoming.pop_front() {
                if let Some((name, opts)) = st.conn.channel_info(id) {
                    return Some(Ok((id, name.to_owned(), opts)));
                }
            }
            // After the peer's goodbye no channel can come (its link may stay up while it
            // holds handles: shared memory has no socket to close).
            st.conn.peer_closed().then_some(Err(LinkError::PeerGone))
        })?;
        Ok(Channel::new(self.handle.clone(), id, name, opts))
    }

    /// Says goodbye: the peer sees end of stream on every channel. Later calls fail.
    pub fn close(&self) {
        self.handle.driver.close();
    }
}
