//! An engine's listeners (`offhost engine --listen ...`): `shm:` ones for hosts (link sessions
//! and off-host queues), network ones for hosts and peer engines. Every listener is bound
//! before any is served, so a bad address fails the start.

use std::sync::Arc;

use offhost_link::{Limits, LinkOptions, Server, Session, Threads};
use offhost_shm::Listener;

use super::Offload;
use crate::daemon::Daemon;

/// A listener could not be set up: the address, and why not.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ListenError {
    /// An `shm:` listener.
    #[error("listen on {url}: {source}")]
    Shm {
        /// The address.
        url: String,
        /// Why not.
        source: offhost_shm::ShmError,
    },
    /// A network or `unix:` listener (plain tcp without `insecure` is refused here).
    #[error("listen on {url}: {source}")]
    Link {
        /// The address.
        url: String,
        /// Why not.
        source: offhost_link::LinkError,
    },
}

enum Bound {
    Shm(Listener),
    Net(Server),
}

impl Offload {
    /// Binds every URL of `listen` (`options`: certificates, `--insecure`, allowed uids;
    /// `limits`: the link servers' budgets), tells `announce` each address it listens on, then
    /// serves `daemon`'s pipelines and the off-host queues on all of them until they end.
    pub fn serve_all(
        self: &Arc<Self>,
        listen: &[String],
        options: &LinkOptions,
        limits: Limits,
        daemon: &Arc<Daemon>,
        announce: impl Fn(&str),
    ) -> Result<(), ListenError> {
        let mut bound = Vec::new();
        for url in listen {
            if let Some(addr) = url.strip_prefix("shm:") {
                let mut l = Listener::bind(addr).map_err(|source| ListenError::Shm {
                    url: url.clone(),
                    source,
                })?;
                l.set_allowed_uids(options.allow_uids.clone());
                announce(url);
                bound.push(Bound::Shm(l));
            } else {
                let mut server =
                    Server::bind_with(url, options).map_err(|source| ListenError::Link {
                        url: url.clone(),
                        source,
                    })?;
                server.set_limits(limits);
                announce(server.url());
                bound.push(Bound::Net(server));
            }
        }
        let threads: Vec<_> = bound
            .into_iter()
            .map(|b| {
                let (o, d) = (Arc::clone(self), Arc::clone(daemon));
                match b {
                    // Link sessions of shm: hosts share one thread budget, as a server's do.
                    Bound::Shm(l) => {
                        let budget = Threads::new(limits.max_threads);
                        std::thread::spawn(move || {
                            o.serve_shm(
                                l,
                                Arc::new(move |s: Session| {
                                    let (d, t) = (d.clone(), budget.clone());
                                    let session = s.clone();
                                    let spawned = budget
                                        .spawn("offhost-daemon-session", move || {
                                            d.serve_session(s, None, &t)
                                        });
                                    if let Err(e) = spawned {
                                        session.refuse(&e.for_peer());
                                    }
                                }),
                            )
                        })
                    }
                    Bound::Net(server) => {
                        std::thread::spawn(move || o.serve_links(&server, Some(d)))
                    }
                }
            })
            .collect();
        for t in threads {
            let _ = t.join();
        }
        Ok(())
    }
}
