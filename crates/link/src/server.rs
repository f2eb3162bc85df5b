//! The engine side: a listener accepting many sessions, and the echo service.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use offhost_proto::Side;

use crate::channel::Channel;
use crate::error::LinkError;
use crate::mem::MemListener;
use crate::options::LinkOptions;
use crate::session::Session;
use crate::url::Endpoint;

enum Listener {
    Tcp(std::net::TcpListener),
    Tls(std::net::TcpListener, offhost_access::TlsServer),
    Unix(std::os::unix::net::UnixListener, PathBuf),
    Mem(MemListener),
    Shm(offhost_shm::Listener),
}

/// Accepts host sessions at one URL; each session carries many channels.
pub struct Server {
    listener: Listener,
    url: String,
    allow: offhost_access::AllowUids,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("url", &self.url).finish()
    }
}

fn bind_tcp(addr: &str, scheme: &str) -> Result<(std::net::TcpListener, String), LinkError> {
    let l = std::net::TcpListener::bind(addr)
        .map_err(|e| LinkError::io(format!("bind {scheme}:{addr}"), e))?;
    let local = l
        .local_addr()
        .map_err(|e| LinkError::io("local address", e))?;
    Ok((l, format!("{scheme}:{local}")))
}

impl Server {
    /// Listens at `url`: `unix:`, `shm:` and `mem:` as with [`bind_with`](Self::bind_with)
    /// and default options (peers of our own uid only), and `tcp:HOST:PORT` as written: plain
    /// TCP, with neither authentication nor encryption, because the caller spelled it out (a
    /// server reachable from other users or machines should use `tls:` through
    /// [`bind_with`](Self::bind_with)). TCP hosts are taken literally (use `127.0.0.1` for
    /// loopback; port 0 picks a free port, see [`url`](Self::url)).
    pub fn bind(url: &str) -> Result<Server, LinkError> {
        Self::bind_with(url, &LinkOptions::new().insecure(true))
    }

    /// Listens at `url` with `options`:
    /// - `tls:HOST:PORT`: every session starts with a TLS handshake in which the client must
    ///   present a certificate signed by the CA of the certificate directory;
    /// - `tcp:HOST:PORT`: refused ([`LinkError::Insecure`]) unless `options.insecure`;
    /// - `unix:PATH`: the socket file is made owner-only; a stale socket file left by a dead
    ///   server is replaced, a live one is an error; `shm:ADDR` likewise;
    /// - on `unix:` and `shm:`, a peer whose uid (`SO_PEERCRED`) is neither ours nor in
    ///   `options.allow_uids` is turned away at accept.
    pub fn bind_with(url: &str, options: &LinkOptions) -> Result<Server, LinkError> {
        let allow = offhost_access::AllowUids::with(options.allow_uids.iter().copied());
        let (listener, url) = match Endpoint::parse(url)? {
            Endpoint::Tcp(addr) => {
                if !options.insecure {
                    return Err(LinkError::Insecure(format!("tcp:{addr}")));
                }
                let (l, url) = bind_tcp(&addr, "tcp")?;
                (Listener::Tcp(l), url)
            }
            Endpoint::Tls(addr) => {
                let config = crate::tls::server_config(&options.cert_dir(url)?)?;
                let (l, url) = bind_tcp(&addr, "tls")?;
                (Listener::Tls(l, config), url)
            }
            Endpoint::Unix(path) => {
                let ctx = || format!("bind unix:{}", path.display());
                if path.exists() && std::os::unix::net::UnixStream::connect(&path).is_err() {
                    std::fs::remove_file(&path).map_err(|e| LinkError::io(ctx(), e))?;
                }
                let l = std::os::unix::net::UnixListener::bind(&path)
                    .map_err(|e| LinkError::io(ctx(), e))?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                    .map_err(|e| LinkError::io(ctx(), e))?;
                (
                    Listener::Unix(l, path.clone()),
                    format!("unix:{}", path.display()),
                )
            }
            Endpoint::Shm(addr) => {
                let mut l = offhost_shm::Listener::bind(&addr)?;
                l.set_allowed_uids(options.allow_uids.clone());
                (Listener::Shm(l), format!("shm:{addr}"))
            }
            Endpoint::Mem(name) => (
                Listener::Mem(MemListener::bind(&name)?),
                format!("mem:{name}"),
            ),
        };
        Ok(Server {
            listener,
            url,
            allow,
        })
    }

    /// The URL hosts connect to (with the real port for `tcp:...:0` and `tls:...:0`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Waits for the next host session. A peer that is refused (another uid on `unix:` or
    /// `shm:`, no or a wrong certificate on `tls:`) is logged and turned away, and the wait
    /// goes on; errors are those of the listening socket.
    pub fn accept(&self) -> Result<Session, LinkError> {
        loop {
            match self.accept_one() {
                Ok(Some(s)) => return Ok(s),
                Ok(None) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// One connection: `None` when its peer was turned away.
    fn accept_one(&self) -> Result<Option<Session>, LinkError> {
        let turned_away = |what: &str, e: &dyn std::fmt::Display| {
            tracing::warn!("{}: turned away {what}: {e}", self.url);
        };
        match &self.listener {
            Listener::Tcp(l) => {
                let (s, _) = l.accept().map_err(|e| LinkError::io("accept tcp", e))?;
                s.set_nodelay(true)
                    .map_err(|e| LinkError::io("set TCP_NODELAY", e))?;
                Session::over_socket(s.into(), Side::Server, "tcp").map(Some)
            }
            Listener::Tls(l, config) => {
                let (s, peer) = l.accept().map_err(|e| LinkError::io("accept tls", e))?;
                match crate::tls::accept(s, config) {
                    Ok((r, w)) => Ok(Some(Session::over(
                        Box::new(r),
                        Box::new(w),
                        Side::Server,
                        "tls",
                    ))),
                    Err(e) => {
                        turned_away(&peer.to_string(), &e);
                        Ok(None)
                    }
                }
            }
            Listener::Unix(l, _) => {
                let (s, _) = l.accept().map_err(|e| LinkError::io("accept unix", e))?;
                if let Err(e) = self.allow.check(&s) {
                    turned_away("a unix peer", &e);
                    return Ok(None);
                }
                Session::over_socket(s.into(), Side::Server, "unix").map(Some)
            }
            Listener::Shm(l) => match l.accept() {
                Ok(ep) => {
                    let (r, w) = crate::shm::halves(ep);
                    Ok(Some(Session::over(
                        Box::new(r),
                        Box::new(w),
                        Side::Server,
                        "shm",
                    )))
                }
                Err(e @ offhost_shm::ShmError::PeerUid { .. }) => {
                    turned_away("an shm peer", &e);
                    Ok(None)
                }
                Err(e) => Err(e.into()),
            },
            Listener::Mem(l) => {
                let c = l.accept()?;
                Ok(Some(Session::over(
                    Box::new(c.read),
                    Box::new(c.write),
                    Side::Server,
                    "mem",
                )))
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Listener::Unix(_, path) = &self.listener {
            // Best effort: the file may already be gone.
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Echoes every message of `ch` back on it until the peer ends the stream, then ends it too.
/// Returns the number of messages echoed.
pub fn echo_channel(ch: &Channel) -> Result<u64, LinkError> {
    let mut n = 0;
    let mut buf = Vec::new();
    while let Some(m) = ch.recv_message_into(&mut buf)? {
        match m {
            // Forward a loan as it came: zero copies both ways.
            crate::Arrived::Loan(l) => ch.send_loan(l)?,
            crate::Arrived::Copied => ch.send(&buf)?,
        }
        n += 1;
    }
    ch.close()?;
    Ok(n)
}

/// Serves echo on every channel of every session accepted by `server`, a thread per session
/// and per channel, for ever. A failing session or channel is logged and the server goes on.
pub fn serve_echo(server: &Server) -> Result<(), LinkError> {
    loop {
        let session = match server.accept() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accept on {}: {e}", server.url());
                continue;
            }
        };
        std::thread::spawn(move || loop {
            match session.accept() {
                Ok(ch) => {
                    std::thread::spawn(move || {
                        if let Err(e) = echo_channel(&ch) {
                            tracing::info!("echo on channel {:?}: {e}", ch.name());
                        }
                    });
                }
                Err(e) => {
                    tracing::info!("session ended: {e}");
                    return;
                }
            }
        });
    }
}
