//! The channels of `offhost-link` (`tcp`, `unix`, `mem`, and `shm-link`: channels over the
//! shared-memory rings, named apart from the raw rings `shm`) as suite targets: a [`Server`] and an
//! engine thread serving one channel, the host on a [`Session`] channel with a chosen packet
//! size.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;

use offhost_bench::cpu;
use offhost_bench::run::{serve, Endpoint, Role};
use offhost_link::{Channel, ChannelOptions, LinkError, Server, Session};

/// Link transports the suite measures.
pub const TRANSPORTS: [&str; 4] = ["tcp", "unix", "mem", "shm-link"];

/// One side of a channel as a suite endpoint.
pub struct LinkEndpoint {
    ch: Channel,
}

fn io_err(e: LinkError) -> io::Error {
    io::Error::other(e)
}

impl Endpoint for LinkEndpoint {
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

/// Channel options for `size`-byte messages in `packet`-byte packets, with room for two
/// messages in each receive buffer (one in flight each way during `exchange`).
pub fn options(size: usize, packet: usize) -> ChannelOptions {
    let max = size.max(8) as u64;
    ChannelOptions {
        packet_size: packet,
        max_message: max,
        recv_buffer: u32::try_from((2 * max).max(64 << 10)).unwrap_or(u32::MAX),
        ..ChannelOptions::default()
    }
}

fn listen_url(transport: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let tag = format!("offhost-bench-{}-{n}", std::process::id());
    match transport {
        "tcp" => "tcp:127.0.0.1:0".into(),
        "unix" => format!("unix:{}", std::env::temp_dir().join(tag).display()),
        "shm-link" => format!("shm:@{tag}"),
        _ => format!("mem:{tag}"),
    }
}

/// A running link target.
pub struct LinkRun {
    host: Option<LinkEndpoint>,
    session: Option<Session>,
    thread: Option<JoinHandle<()>>,
}

impl LinkRun {
    /// Starts a server and an engine thread on `transport` serving `role` for `size`-byte
    /// messages sent in `packet`-byte packets.
    pub fn start(transport: &str, packet: usize, role: Role, size: usize) -> anyhow::Result<Self> {
        let server = Server::bind(&listen_url(transport))?;
        let url = server.url().to_string();
        let (_, engine_core) = cpu::host_engine_cores();
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(format!("link-engine-{transport}"))
            .spawn(move || {
                let _ = cpu::pin_current_thread(engine_core);
                let run = || -> Result<(), LinkError> {
                    let session = server.accept()?;
                    let ch = session.accept()?;
                    let _ = tx.send(Ok(()));
                    serve(&mut LinkEndpoint { ch }, role, size);
                    Ok(())
                };
                if let Err(e) = run() {
                    let _ = tx.send(Err(e));
                }
            })?;
        let session = Session::connect(&url)?;
        let ch = session.open("bench", options(size, packet))?;
        rx.recv()
            .map_err(|_| anyhow::anyhow!("{transport} engine thread died"))??;
        Ok(LinkRun {
            host: Some(LinkEndpoint { ch }),
            session: Some(session),
            thread: Some(thread),
        })
    }

    /// The host's endpoint.
    pub fn endpoint(&mut self) -> &mut dyn Endpoint {
        self.host.as_mut().expect("present until drop")
    }
}

impl Drop for LinkRun {
    fn drop(&mut self) {
        if let Some(h) = self.host.take() {
            let _ = h.ch.close();
        }
        if let Some(s) = self.session.take() {
            s.close();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
