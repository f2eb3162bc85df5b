//! Channels of `offhost-link` with their peer on a thread of this process: a [`Server`] on a
//! fresh address of the transport, an engine thread pinned on the engine core that accepts
//! one session (and channel) and serves it, and the host's session (and channel). The
//! pingpong, the suite (exchange, stream), rate, overhead and the `[DS-link]` reproduction all
//! start their channels here. A `tls` channel's server and session use a throw-away
//! certificate directory ([`Pki`]): the run's, or one made for the channel.

use std::io;
use std::thread::JoinHandle;

use offhost_bench::affinity;
use offhost_bench::run::{serve, Conn, Role};
use offhost_bench::transport::Transport;
use offhost_link::{Channel, ChannelOptions, LinkError, LinkOptions, Server, Session};

use crate::error::{Error, Result};
use crate::process::unique_name;
use crate::tls::Pki;

/// A fresh address to listen on for `t` (a channel transport), and the folder a Unix socket
/// lives in while it is used.
pub fn listen_url(t: Transport) -> Result<(String, Option<tempfile::TempDir>)> {
    Ok(match t {
        Transport::Tcp => ("tcp:127.0.0.1:0".into(), None),
        Transport::Tls => ("tls:127.0.0.1:0".into(), None),
        Transport::Unix => {
            let dir = tempfile::tempdir()?;
            let url = format!("unix:{}", dir.path().join("bench.sock").display());
            (url, Some(dir))
        }
        Transport::ShmChan => (format!("shm:{}", unique_name("chan")), None),
        Transport::Mem => (format!("mem:{}", &unique_name("mem")[1..]), None),
        other => {
            return Err(Error::Invalid(format!(
                "{other} is not a channel transport"
            )))
        }
    })
}

/// The host's session to the server at `url`: shared memory made with `shm` when given (ring
/// and pool sizes, doorbell mode), else the transport's defaults.
pub fn connect(url: &str, shm: Option<&offhost_shm::Config>) -> Result<Session> {
    Ok(match (url.strip_prefix("shm:"), shm) {
        (Some(addr), Some(config)) => Session::connect_shm(addr, config)?,
        _ => Session::connect(url)?,
    })
}

/// A session whose other end is served by `engine` on a thread pinned on the engine core.
pub struct Served {
    session: Option<Session>,
    thread: Option<JoinHandle<Result<()>>>,
    _dir: Option<tempfile::TempDir>,
    _pki: Option<Pki>,
}

impl Served {
    /// Binds a server on a fresh address of `t`, hands the session it accepts to `engine` on
    /// a thread pinned on the engine core, and connects the host (see [`connect`]); a `tls`
    /// channel gets a certificate directory of its own.
    pub fn start(
        t: Transport,
        shm: Option<&offhost_shm::Config>,
        engine: impl FnOnce(Session) -> Result<()> + Send + 'static,
    ) -> Result<Served> {
        Served::start_with(t, shm, None, engine)
    }

    /// [`start`](Self::start) with the run's certificate directory for `tls` (`None`: one
    /// made for this channel, removed with it).
    pub fn start_with(
        t: Transport,
        shm: Option<&offhost_shm::Config>,
        pki: Option<&Pki>,
        engine: impl FnOnce(Session) -> Result<()> + Send + 'static,
    ) -> Result<Served> {
        let (url, dir) = listen_url(t)?;
        let own = match (t.is_tls(), pki) {
            (true, None) => Some(Pki::generate()?),
            _ => None,
        };
        let link = match own.as_ref().or(pki) {
            Some(p) if t.is_tls() => p.link_options(),
            _ => LinkOptions::new().insecure(true),
        };
        let mut server = Server::bind_with(&url, &link)?;
        if let Some(l) = shm.and_then(|c| c.event_limit) {
            server.set_limits(offhost_link::Limits {
                event_limit: Some(l),
                ..*server.limits()
            });
        }
        let url = server.url().to_owned();
        let (_, engine_core) = affinity::host_engine_cores();
        let thread = std::thread::Builder::new()
            .name(format!("engine-{t}"))
            .spawn(move || {
                let _ = affinity::pin_current_thread(engine_core);
                engine(server.accept()?)
            })?;
        let session = match t.is_tls() {
            true => Session::connect_with(&url, &link)?,
            false => connect(&url, shm)?,
        };
        Ok(Served {
            session: Some(session),
            thread: Some(thread),
            _dir: dir,
            _pki: own,
        })
    }

    /// The host's session.
    pub fn session(&self) -> &Session {
        self.session.as_ref().expect("present until finished")
    }

    /// Closes the host's session and waits for the engine thread; its error, if any.
    pub fn finish(mut self) -> Result<()> {
        self.join()
    }

    /// Closes and drops the host's session (the engine sees it gone), then joins the engine.
    fn join(&mut self) -> Result<()> {
        if let Some(s) = self.session.take() {
            s.close();
        }
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(Error::Check("engine thread panicked".into())),
            None => Ok(()),
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.join();
    }
}

/// One side of a channel as a suite endpoint: whole messages of a size both sides know.
pub struct LinkConn {
    /// The channel.
    pub ch: Channel,
}

fn io_err(e: LinkError) -> io::Error {
    io::Error::other(e)
}

impl Conn for LinkConn {
    fn send(&mut self, msg: &[u8]) -> io::Result<()> {
        self.ch.send(msg).map_err(io_err)
    }

    fn send_many(&mut self, msg: &[u8], count: usize) -> io::Result<()> {
        // One lock and one write per credit window (the channel's batched send).
        let batch = vec![msg; count];
        self.ch.send_batch(&batch).map_err(io_err)
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<()> {
        match self.ch.recv().map_err(io_err)? {
            Some(m) if m.len() == buf.len() => {
                buf.copy_from_slice(&m);
                Ok(())
            }
            Some(m) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("expected a {}-byte message, got {}", buf.len(), m.len()),
            )),
            None => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "peer ended the channel",
            )),
        }
    }
}

/// A channel whose other end runs `role` for `size`-byte messages on a thread: the suite's
/// and the `[DS-link]` reproduction's channel target.
pub struct ChannelRun {
    host: Option<LinkConn>,
    served: Option<Served>,
}

/// Channel options for `size`-byte messages in `packet`-byte packets, with room for two
/// messages in each receive buffer (one in flight each way during `exchange`).
pub fn suite_options(size: usize, packet: usize) -> ChannelOptions {
    let max = size.max(8) as u64;
    ChannelOptions {
        packet_size: packet,
        max_message: max,
        recv_buffer: u32::try_from((2 * max).max(64 << 10)).unwrap_or(u32::MAX),
        ..ChannelOptions::default()
    }
}

impl ChannelRun {
    /// Starts channel transport `t` with `size`-byte messages sent in `packet`-byte packets;
    /// the engine thread serves `role`.
    pub fn start(t: Transport, packet: usize, role: Role, size: usize) -> Result<ChannelRun> {
        let served = Served::start(t, None, move |session| {
            let ch = session.accept()?;
            serve(&mut LinkConn { ch }, role, size);
            Ok(())
        })?;
        let ch = served
            .session()
            .open("bench", suite_options(size, packet))?;
        Ok(ChannelRun {
            host: Some(LinkConn { ch }),
            served: Some(served),
        })
    }

    /// The host's endpoint.
    pub fn conn(&mut self) -> &mut dyn Conn {
        self.host.as_mut().expect("present until drop")
    }
}

impl Drop for ChannelRun {
    fn drop(&mut self) {
        if let Some(h) = self.host.take() {
            let _ = h.ch.close();
        }
        drop(self.served.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every channel transport carries the suite's echo, and a plain one is refused.
    #[test]
    fn every_channel_transport_echoes() {
        for t in [
            Transport::Tcp,
            Transport::Tls,
            Transport::Unix,
            Transport::Mem,
            Transport::ShmChan,
        ] {
            let mut run = ChannelRun::start(t, 1024, Role::Echo, 3000).unwrap();
            let msg: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
            let mut back = vec![0u8; 3000];
            run.conn().send(&msg).unwrap();
            run.conn().recv(&mut back).unwrap();
            assert_eq!(msg, back, "{t}");
        }
        assert!(ChannelRun::start(Transport::TcpRaw, 1024, Role::Echo, 8).is_err());
    }

    /// The engine's failure comes back from `finish`.
    #[test]
    fn an_engine_error_is_reported() {
        let s = Served::start(Transport::Mem, None, |_| Err(Error::Check("no".into()))).unwrap();
        assert_eq!(s.finish().unwrap_err().to_string(), "no");
    }
}
