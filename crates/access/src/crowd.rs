//! A crowd of connections that never prove who they are, for tests and benchmarks of the
//! [`unproven`](crate::unproven) budget: [`Crowd::start`] holds `count` connections open to a
//! server (TCP from a list of source addresses, such as `127.0.0.2` and up, all loopback; or a
//! Unix socket), silent or sending one byte now and then, and opens a new one whenever the
//! server closes one, so that the server always faces `count` of them.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::net::{AddressFamily, SocketType};

/// Where the crowd connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A TCP server; each connection binds the next of `sources` (port 0) first.
    Tcp {
        /// The server.
        addr: SocketAddr,
        /// Source addresses, taken in turn (empty: the kernel's choice).
        sources: Vec<IpAddr>,
    },
    /// A Unix socket path.
    Unix(PathBuf),
}

/// What a crowd does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrowdOptions {
    /// Where it connects.
    pub target: Target,
    /// Connections held open at once.
    pub count: usize,
    /// Send one byte on every connection this often (`None`: silent). The byte is `0x16`, a
    /// TLS handshake record's first.
    pub trickle: Option<Duration>,
    /// The crowd stops by itself after this long, whatever its owner does.
    pub at_most: Duration,
}

/// What a crowd did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CrowdStats {
    /// Connections opened, first ones and replacements.
    pub opened: u64,
    /// Connections the server closed.
    pub closed_by_server: u64,
    /// Connections that could not be opened.
    pub failed: u64,
}

/// A running crowd; [`stop`](Self::stop) (or drop) closes its connections.
#[derive(Debug)]
pub struct Crowd {
    stop: Arc<AtomicBool>,
    opened: Arc<AtomicU64>,
    thread: Option<JoinHandle<CrowdStats>>,
}

impl Crowd {
    /// Opens the first connections (all of them before returning) and starts the thread that
    /// keeps them open.
    pub fn start(options: CrowdOptions) -> io::Result<Crowd> {
        let mut state = State {
            options,
            next_source: 0,
            conns: Vec::new(),
            stats: CrowdStats::default(),
        };
        for _ in 0..state.options.count {
            state.open_one();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let opened = Arc::new(AtomicU64::new(state.stats.opened));
        let (s, o) = (Arc::clone(&stop), Arc::clone(&opened));
        let thread = std::thread::Builder::new()
            .name("crowd".into())
            .spawn(move || state.run(&s, &o))?;
        Ok(Crowd {
            stop,
            opened,
            thread: Some(thread),
        })
    }

    /// Connections opened so far (first ones and replacements).
    pub fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    /// Closes every connection and says what the crowd did.
    pub fn stop(mut self) -> CrowdStats {
        // Ordering: Release pairs with the Acquire loads of the crowd's thread; only the flag
        // itself is published (the thread's results come back through its join).
        self.stop.store(true, Ordering::Release);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Crowd {
    fn drop(&mut self) {
        // Ordering: Release pairs with the Acquire loads of the crowd's thread (a flag only).
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct State {
    options: CrowdOptions,
    next_source: usize,
    conns: Vec<OwnedFd>,
    stats: CrowdStats,
}

impl State {
    fn open_one(&mut self) {
        match self.connect() {
            Ok(fd) => {
                self.conns.push(fd);
                self.stats.opened += 1;
            }
            Err(_) => self.stats.failed += 1,
        }
    }

    /// A non-blocking connection to the target (its connect may still be in progress).
    fn connect(&mut self) -> io::Result<OwnedFd> {
        match &self.options.target {
            Target::Tcp { addr, sources } => {
                let family = if addr.is_ipv4() {
                    AddressFamily::INET
                } else {
                    AddressFamily::INET6
                };
                let fd = rustix::net::socket(family, SocketType::STREAM, None)?;
                if !sources.is_empty() {
                    let src = sources[self.next_source % sources.len()];
                    self.next_source += 1;
                    rustix::net::bind(&fd, &SocketAddr::new(src, 0))?;
                }
                rustix::io::ioctl_fionbio(&fd, true)?;
                match rustix::net::connect(&fd, addr) {
                    Ok(()) | Err(rustix::io::Errno::INPROGRESS) => Ok(fd),
                    Err(e) => Err(e.into()),
                }
            }
            Target::Unix(path) => {
                let s = std::os::unix::net::UnixStream::connect(path)?;
                s.set_nonblocking(true)?;
                Ok(s.into())
            }
        }
    }

    fn run(mut self, stop: &AtomicBool, opened: &AtomicU64) -> CrowdStats {
        let end = Instant::now() + self.options.at_most;
        let mut next_trickle = self.options.trickle.map(|t| Instant::now() + t);
        let mut buf = [0u8; 4096];
        // Bounded: by the stop flag, and by `at_most`.
        // Ordering: Acquire pairs with the Release store in `Crowd::stop`/`drop`.
        while !stop.load(Ordering::Acquire) && Instant::now() < end {
            let mut closed = Vec::new();
            {
                let mut fds: Vec<PollFd<'_>> = self
                    .conns
                    .iter()
                    .map(|c| PollFd::new(c, PollFlags::IN))
                    .collect();
                let ts = rustix::time::Timespec {
                    tv_sec: 0,
                    tv_nsec: 20_000_000,
                };
                if rustix::event::poll(&mut fds, Some(&ts)).unwrap_or(0) > 0 {
                    for (i, p) in fds.iter().enumerate() {
                        if !p.revents().is_empty() {
                            closed.push(i);
                        }
                    }
                }
            }
            // Readable: data (a server's greeting, taken and ignored) or the end.
            let mut gone = Vec::new();
            for i in closed {
                match rustix::net::recv(&self.conns[i], &mut buf, rustix::net::RecvFlags::DONTWAIT)
                {
                    Ok((_, 0)) => gone.push(i),
                    Ok(_) | Err(rustix::io::Errno::AGAIN) => {}
                    Err(_) => gone.push(i),
                }
            }
            for i in gone.into_iter().rev() {
                self.conns.swap_remove(i);
                self.stats.closed_by_server += 1;
            }
            // Ordering: Acquire pairs with the Release store in `Crowd::stop`/`drop`.
            while self.conns.len() < self.options.count && !stop.load(Ordering::Acquire) {
                let before = self.stats.failed;
                self.open_one();
                if self.stats.failed > before {
                    break;
                }
            }
            opened.store(self.stats.opened, Ordering::Relaxed);
            if let (Some(at), Some(every)) = (next_trickle, self.options.trickle) {
                if Instant::now() >= at {
                    for c in &self.conns {
                        let _ = rustix::net::send(
                            c.as_fd(),
                            &[0x16],
                            rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL,
                        );
                    }
                    next_trickle = Some(Instant::now() + every);
                }
            }
        }
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crowd_replaces_the_connections_the_server_closes() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let crowd = Crowd::start(CrowdOptions {
            target: Target::Tcp {
                addr: l.local_addr().unwrap(),
                sources: vec!["127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap()],
            },
            count: 4,
            trickle: None,
            at_most: Duration::from_secs(60),
        })
        .unwrap();
        let mut seen = Vec::new();
        for _ in 0..6 {
            let (s, peer) = l.accept().unwrap();
            seen.push(peer.ip());
            drop(s);
        }
        assert!(seen.contains(&"127.0.0.2".parse::<IpAddr>().unwrap()));
        assert!(seen.contains(&"127.0.0.3".parse::<IpAddr>().unwrap()));
        let stats = crowd.stop();
        assert!(stats.opened >= 6, "{stats:?}");
    }
}
