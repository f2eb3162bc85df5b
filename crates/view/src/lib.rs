//! The live view of offhost pipelines: a web page that draws each pipeline as a graph (tasks,
//! queues, free lists) with its numbers as they change, the pictures and meters its tasks
//! show, and the same as JSON and Graphviz dot for scripts.
//!
//! ```text
//!   offhost run --view [ADDR] FILE.ion        the one pipeline, while it runs
//!   offhost engine --view ADDR ...            every pipeline a daemon runs or remembers
//! ```
//!
//! [`View::start`] serves any [`Watched`] (a daemon's table, or the
//! [`One`](offhost_engine::watch::One) pipeline `offhost run` runs) on its own thread: a
//! one-thread tokio runtime with hyper. It is safe to leave on:
//! - loopback unless told otherwise; any other address only over TLS with client
//!   certificates ([`ViewConfig::tls_certificates`]) or when plain HTTP is asked for
//!   ([`ViewConfig::insecure`]);
//! - read-only: it answers `GET` and controls nothing;
//! - bounded: [`ViewConfig::clients`] connections, one message at most waiting per push
//!   channel, a push channel unread for [`ViewConfig::stall`] closed;
//! - free for the engine: one sampler thread looks at the pipelines once a period, only
//!   while somebody is connected, reading counters the tasks keep anyway; pictures are drawn
//!   by tasks only while watched and encoded as PNG here.
//!
//! The routes are in the `server` module's table.
#![forbid(unsafe_code)]

mod config;
mod doc;
mod page;
mod png;
mod sample;
mod server;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

pub use config::{parse_addr, ViewConfig, ViewError, DEFAULT_ADDR, DEFAULT_CLIENTS};
pub use doc::{list_doc, pipeline_doc, Flat};
use offhost_engine::watch::Watched;

/// Threads answering requests at once (a look can wait on a peer); more requests wait.
const BLOCKING_THREADS: usize = 4;

/// The flags of a command that serves a view.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ViewArgs {
    /// Serve a live view of the pipelines on ADDR (HOST:PORT, :PORT or PORT; 127.0.0.1:7480
    /// when none is given): a page that draws them as they run, and their graph and numbers
    /// as JSON (/api/pipelines) and Graphviz dot. Loopback unless --tls-certificates (HTTPS,
    /// client certificates required) or --insecure.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = DEFAULT_ADDR, value_parser = parse_addr)]
    pub view: Option<std::net::SocketAddr>,
    /// The most browsers (connections) the view serves at once.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_CLIENTS)]
    pub view_clients: usize,
}

/// The view flags of `offhost run`: where, who may see it, how long it stays, and the graph
/// as a dot file.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RunViewArgs {
    /// Where.
    #[command(flatten)]
    pub view: ViewArgs,
    /// Who may see it, how long.
    #[command(flatten)]
    pub access: ViewAccess,
    /// Write the pipeline's graph as Graphviz dot to FILE, with its final numbers.
    #[arg(long, value_name = "FILE")]
    pub dot: Option<std::path::PathBuf>,
}

impl RunViewArgs {
    /// The view's configuration, if one was asked for ([`ViewArgs::config_with`]).
    pub fn config(&self) -> Option<ViewConfig> {
        self.view.config_with(&self.access)
    }

    /// Writes the dot file asked for, if one was.
    pub fn write_dot(
        &self,
        shape: &offhost_engine::Shape,
        stats: &offhost_engine::Stats,
    ) -> std::io::Result<()> {
        match &self.dot {
            Some(f) => std::fs::write(f, shape.to_dot(Some(stats))),
            None => Ok(()),
        }
    }
}

/// Who may see the view of a command that has no other listener (`offhost run`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ViewAccess {
    /// Serve the view over HTTPS with this certificate directory (nbdkit's layout, `offhost
    /// certs DIR`); browsers need a client certificate signed by its ca-cert.pem.
    #[arg(long, value_name = "DIR")]
    pub tls_certificates: Option<std::path::PathBuf>,
    /// Allow the view on an address other than loopback over plain HTTP (anyone who reaches
    /// it sees the pipeline; it controls nothing).
    #[arg(long)]
    pub insecure: bool,
    /// How long the view stays.
    #[command(flatten)]
    pub linger: ViewLinger,
}

/// How long the view of a command that ends (`run`, `submit`) stays after its job.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ViewLinger {
    /// Keep serving the view this long after the job has ended (its final numbers): seconds
    /// or with a unit (`30s`, `5m`).
    #[arg(long, value_name = "DURATION", value_parser = offhost_units::parse_seconds)]
    pub view_linger: Option<std::time::Duration>,
}

impl ViewLinger {
    /// Waits the time asked for if `view` serves, saying so on standard error.
    pub fn wait(&self, view: Option<&View>) {
        if let (Some(v), Some(d)) = (view, self.view_linger) {
            eprintln!("view: {} stays up for {:.0} s", v.url(), d.as_secs_f64());
            std::thread::sleep(d);
        }
    }
}

impl ViewArgs {
    /// The view's configuration, if one was asked for: HTTPS with `tls_certificates` (a
    /// command's own directory: the engine's, or a client's) on an address other than
    /// loopback, plain HTTP on loopback; off loopback without them only if `insecure`.
    pub fn config(
        &self,
        tls_certificates: Option<&std::path::Path>,
        insecure: bool,
    ) -> Option<ViewConfig> {
        self.view.map(|addr| ViewConfig {
            tls_certificates: tls_certificates
                .filter(|_| !addr.ip().is_loopback())
                .map(Into::into),
            insecure,
            clients: self.view_clients.max(1),
            ..ViewConfig::new(addr)
        })
    }

    /// As [`config`](Self::config), with `access` given for the view alone (`offhost run`):
    /// its certificate directory serves HTTPS on any address, loopback too.
    pub fn config_with(&self, access: &ViewAccess) -> Option<ViewConfig> {
        self.config(None, access.insecure).map(|c| ViewConfig {
            tls_certificates: access.tls_certificates.clone(),
            ..c
        })
    }
}

/// A running view. Dropping it stops it.
pub struct View {
    addr: std::net::SocketAddr,
    https: bool,
    sampler: Arc<sample::Sampler>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    threads: Vec<JoinHandle<()>>,
}

impl View {
    /// Serves `source` as `config` says, on threads of its own (the server's and the
    /// sampler's); returns once it listens.
    pub fn start(config: &ViewConfig, source: Arc<dyn Watched>) -> Result<View, ViewError> {
        let tls = config.tls()?;
        let std_listener = std::net::TcpListener::bind(config.addr)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| ViewError::Bind(config.addr, e))?;
        let addr = std_listener
            .local_addr()
            .map_err(|e| ViewError::Bind(config.addr, e))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .thread_name("offhost-view")
            // Requests are answered on these (a look can wait on a peer); at most this many.
            .max_blocking_threads(BLOCKING_THREADS)
            .build()
            .map_err(ViewError::Thread)?;
        let listener = {
            let _in = runtime.enter();
            tokio::net::TcpListener::from_std(std_listener)
                .map_err(|e| ViewError::Bind(config.addr, e))?
        };
        let sampler = Arc::new(sample::Sampler {
            source,
            clients: Default::default(),
            stop: Default::default(),
            period: config.period,
        });
        let (tx, rx) = tokio::sync::watch::channel(Arc::new(sample::Snapshot::default()));
        let s = Arc::clone(&sampler);
        let thread = std::thread::Builder::new()
            .name("offhost-view-sampler".into())
            .spawn(move || s.run(tx))
            .map_err(ViewError::Thread)?;
        let shared = Arc::new(server::Shared {
            sampler: Arc::clone(&sampler),
            snapshots: rx,
            clients: config.clients,
            stall: config.stall,
            started: Instant::now(),
        });
        let acceptor = tls.map(|t| tokio_rustls::TlsAcceptor::from(t.config()));
        let https = acceptor.is_some();
        // The runtime runs on a thread of its own, serving until the view is dropped.
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = std::thread::Builder::new()
            .name("offhost-view".into())
            .spawn(move || {
                runtime.block_on(async move {
                    tokio::select! {
                        () = server::serve(listener, acceptor, shared) => {}
                        _ = stopped => {}
                    }
                })
            });
        let serving = match serving {
            Ok(t) => t,
            Err(e) => {
                sampler.stop.store(true, Ordering::Relaxed);
                return Err(ViewError::Thread(e));
            }
        };
        Ok(View {
            addr,
            https,
            sampler,
            stop: Some(stop),
            threads: vec![serving, thread],
        })
    }

    /// Starts a view as [`start`](Self::start) if `config` asks for one, and says its URL
    /// on standard error (`view: http://127.0.0.1:7480/`).
    pub fn start_said(
        config: Option<ViewConfig>,
        source: Arc<dyn Watched>,
    ) -> Result<Option<View>, ViewError> {
        let Some(c) = config else { return Ok(None) };
        let v = View::start(&c, source)?;
        eprintln!("view: {}", v.url());
        Ok(Some(v))
    }

    /// The address it listens on.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// The page's URL.
    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}/", self.addr)
    }
}

impl Drop for View {
    fn drop(&mut self) {
        self.sampler.stop.store(true, Ordering::Relaxed);
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
