//! The engine side: a listener accepting many sessions, and the echo service.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use offhost_proto::Side;

use crate::channel::Channel;
use crate::error::LinkError;
use crate::mem::MemListener;
use crate::session::Session;
use crate::url::Endpoint;

enum Listener {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener, PathBuf),
    Mem(MemListener),
    Shm(offhost_shm::Listener),
}

/// Accepts host sessions at one URL; each session carries many channels.
pub struct Server {
    listener: Listener,
    url: String,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("url", &self.url).finish()
    }
}

impl Server {
    /// Listens at `url`. TCP hosts are taken literally (use `127.0.0.1` for loopback; port 0
    /// picks a free port, see [`url`](Self::url)). A Unix socket is made owner-only; a stale
    /// socket file left by a dead server is replaced, a live one is an error.
    pub fn bind(url: &str) -> Result<Server, LinkError> {
        match Endpoint::parse(url)? {
            Endpoint::Tcp(addr) => {
                let l = std::net::TcpListener::bind(&addr)
                    .map_err(|e| LinkError::io(format!("bind tcp:{addr}"), e))?;
                let local = l
                    .local_addr()
                    .map_err(|e| LinkError::io("local address", e))?;
                Ok(Server {
                    listener: Listener::Tcp(l),
                    url: format!("tcp:{local}"),
                })
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
                Ok(Server {
                    url: format!("unix:{}", path.display()),
                    listener: Listener::Unix(l, path),
                })
            }
            Endpoint::Shm(addr) => Ok(Server {
                listener: Listener::Shm(offhost_shm::Listener::bind(&addr)?),
                url: format!("shm:{addr}"),
            }),
            Endpoint::Mem(name) => Ok(Server {
                listener: Listener::Mem(MemListener::bind(&name)?),
                url: format!("mem:{name}"),
            }),
        }
    }

    /// The URL hosts connect to (with the real port for `tcp:...:0`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Waits for the next host session.
    pub fn accept(&self) -> Result<Session, LinkError> {
        match &self.listener {
            Listener::Tcp(l) => {
                let (s, _) = l.accept().map_err(|e| LinkError::io("accept tcp", e))?;
                s.set_nodelay(true)
                    .map_err(|e| LinkError::io("set TCP_NODELAY", e))?;
                Session::over_socket(s.into(), Side::Server, "tcp")
            }
            Listener::Unix(l, _) => {
                let (s, _) = l.accept().map_err(|e| LinkError::io("accept unix", e))?;
                Session::over_socket(s.into(), Side::Server, "unix")
            }
            Listener::Shm(l) => {
                let (r, w) = crate::shm::halves(l.accept()?);
                Ok(Session::over(Box::new(r), Box::new(w), Side::Server, "shm"))
            }
            Listener::Mem(l) => {
                let c = l.accept()?;
                Ok(Session::over(
                    Box::new(c.read),
                    Box::new(c.write),
                    Side::Server,
                    "mem",
                ))
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
