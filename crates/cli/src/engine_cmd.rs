//! `offhost engine --listen URL` (the engine daemon) and `offhost submit` (a host using it).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{anyhow, Context as _};
use offhost_engine::{EngineConfig, Registry};
use offhost_link::peer::PeerConfig;
use offhost_node::daemon::Daemon;
use offhost_node::jobs::daemon::{DaemonJob, Query};
use offhost_node::jobs::parts_view::PartsView;
use offhost_node::jobs::placed::{self, PlacedJob};
use offhost_node::names::PipelineRef;
use offhost_node::offload::{HostLimits, Offload, OffloadConfig};

/// Arguments of `offhost engine`.
#[derive(clap::Args, Debug)]
pub struct EngineArgs {
    /// Where to listen (repeatable): unix:PATH (the default: a socket only this user may use),
    /// shm:ADDR (hosts: link sessions and off-host queues), tls:HOST:PORT (with
    /// --tls-certificates; clients and peer engines need a certificate of the same CA), or
    /// plain tcp:HOST:PORT (only with --insecure); tls:systemd and tcp:systemd take the next
    /// listening socket systemd passed (socket activation, LISTEN_FDS) instead of binding one.
    #[arg(long)]
    listen: Vec<String>,
    /// Let submitted pipelines open files beneath DIR (paths resolve beneath it: `..`,
    /// absolute paths and symlinks out of it are refused). Without it they open no files.
    #[arg(long, value_name = "DIR")]
    files: Option<PathBuf>,
    /// Let submitted pipelines read devices, fifos and sockets beneath --files DIR too
    /// (without it they read regular files only: a device such as /dev/zero never ends).
    #[arg(long, requires = "files")]
    files_allow_devices: bool,
    #[command(flatten)]
    access: crate::access_args::ServeAccess,
    /// A live view of the engine's pipelines.
    #[command(flatten)]
    view: offhost_view::ViewArgs,
    /// Worker threads per pipeline (default: the number of cores, at most 4; never more than
    /// the pipeline's tasks of normal or background class).
    #[arg(long)]
    workers: Option<usize>,
    /// Pin worker threads to cores.
    #[arg(long)]
    pin: bool,
    #[command(flatten)]
    offload: OffloadArgs,
    #[command(flatten)]
    daemon_limits: crate::limit_args::DaemonLimitArgs,
    #[command(flatten)]
    link_limits: crate::limit_args::LinkLimitArgs,
}

/// The engine as protocol processor for off-host hosts.
#[derive(clap::Args, Debug)]
pub struct OffloadArgs {
    /// This engine's name, told to the engines it links to (A-Z a-z 0-9 . _ -).
    #[arg(long, default_value = "engine")]
    name: String,
    /// A peer engine: NAME=tls:HOST:PORT (or tcp:HOST:PORT with --insecure). Hosts reach its
    /// channels as NAME/CHANNEL. Repeatable. The link uses --tls-certificates's client
    /// certificate.
    #[arg(long = "peer", value_name = "NAME=URL")]
    peers: Vec<String>,
    /// Retry a failed peer link for this long, sending unacknowledged messages again, before
    /// they fail (default 0: they fail at once).
    #[arg(long, value_name = "SECS", default_value = "0", value_parser = offhost_units::parse_seconds)]
    retry_for: std::time::Duration,
    /// Close a peer link from which nothing came for this long.
    #[arg(long, value_name = "MS", default_value_t = 750)]
    link_timeout: u64,
    /// Hosts served at once.
    #[arg(long, default_value_t = 64)]
    max_hosts: usize,
    /// Sessions to other engines at most.
    #[arg(long, default_value_t = 64)]
    max_links: usize,
    /// Take only engine names a certificate proves: an engine that links here must present
    /// a client certificate naming the engine its hello says it is, and a --peer this engine
    /// links to a server certificate naming it (`offhost certs DIR --engine NAME` makes them
    /// in DIR/engines/NAME, which that engine then uses as its --tls-certificates). Without
    /// it a hello's name is taken at its word.
    #[arg(long)]
    certified_peers: bool,
    /// Data channels a peer engine may have open on one session, and streams this engine
    /// sends to one peer on one lane.
    #[arg(long, default_value_t = 256)]
    max_streams: usize,
    /// The largest message this engine's hosts may send, and peers may deliver here (a
    /// larger one is refused, naming both sizes). A peer's channel window is twice this, at
    /// least 2 MiB: peers' --max-channel-window must allow that.
    #[arg(long, default_value = "1M", value_parser = offhost_units::parse_size)]
    max_message: u64,
    /// Per host: submissions outstanding at most.
    #[arg(long, default_value_t = 4096)]
    host_outstanding: u32,
    /// Per host: bytes of sends in flight at most.
    #[arg(long, default_value = "64M", value_parser = offhost_units::parse_size)]
    host_bytes: u64,
    /// Per host: open channels at most.
    #[arg(long, default_value_t = 256)]
    host_channels: u32,
    /// How the engine waits for a host's submissions: poll, block or adaptive (spin
    /// --spin-us, then sleep).
    #[arg(long, default_value = "adaptive")]
    host_wait: offhost_shm::Mode,
    /// Spin budget of --host-wait adaptive, in microseconds.
    #[arg(long, default_value_t = 50)]
    spin_us: u64,
    /// Mailboxes (channel names with messages or receives waiting) at most.
    #[arg(long, default_value_t = 1024)]
    max_mailboxes: usize,
    /// Bytes one mailbox queues before its senders wait (one message always goes in).
    #[arg(long, default_value = "8M", value_parser = offhost_units::parse_size)]
    mailbox_bytes: u64,
    /// Bytes all mailboxes together queue before senders wait.
    #[arg(long, default_value = "256M", value_parser = offhost_units::parse_size)]
    mailbox_total_bytes: u64,
}

impl OffloadArgs {
    fn config(&self, options: offhost_link::LinkOptions) -> anyhow::Result<OffloadConfig> {
        let mut pc =
            PeerConfig::new(&self.name)
                .options(options)
                .retry_for(self.retry_for)
                .link_timeout(std::time::Duration::from_millis(self.link_timeout.max(1)))
                .max_links(self.max_links)
                .certified_names(self.certified_peers)
                .max_streams(self.max_streams.max(1))
                .max_message(u32::try_from(self.max_message.max(1)).map_err(|_| {
                    anyhow!("--max-message {}: at most 4 GiB - 1", self.max_message)
                })?);
        for p in &self.peers {
            let (n, u) = p
                .split_once('=')
                .ok_or_else(|| anyhow!("--peer {p}: expected NAME=URL"))?;
            pc = pc.peer(n, u);
        }
        let mut c = OffloadConfig::new(pc);
        c.max_hosts = self.max_hosts;
        c.wait = (
            self.host_wait,
            std::time::Duration::from_micros(self.spin_us),
        );
        c.host = HostLimits {
            max_outstanding: self.host_outstanding,
            max_channels: self.host_channels,
            max_bytes: self.host_bytes,
        };
        c.router = offhost_link::offload::RouterLimits {
            mailboxes: self.max_mailboxes.max(1),
            mailbox_bytes: usize::try_from(self.mailbox_bytes.max(1)).unwrap_or(usize::MAX),
            total_bytes: usize::try_from(self.mailbox_total_bytes.max(1)).unwrap_or(usize::MAX),
        };
        Ok(c)
    }
}

/// Runs the daemon until killed: pipelines for hosts on every listener, off-host queues on
/// shm: listeners, peer engines' links on network listeners.
pub fn engine(args: EngineArgs, mut registry: Registry) -> anyhow::Result<()> {
    // Sockets passed by systemd (for --listen tls:systemd), read before any thread starts.
    offhost_link::read_passed_sockets();
    let files = match &args.files {
        Some(d) => offhost_engine::Files::beneath(d)
            .with_context(|| format!("--files {}", d.display()))?
            .allow_devices(args.files_allow_devices),
        None => offhost_engine::Files::Denied,
    };
    let link_limits = args.link_limits.limits()?;
    let options = (args.access.link_options()).peer_deadline(link_limits.peer_deadline);
    // Submitted pipelines reach other engines over tls: with this engine's certificates.
    offhost_node::remote::register(
        &mut registry,
        offhost_node::remote::Links::outside(options.clone()),
    );
    let mut config = EngineConfig {
        pin: args.pin,
        ..EngineConfig::default()
    };
    if let Some(w) = args.workers {
        config.workers = w.max(1);
    }
    let daemon =
        Daemon::with_files_and_limits(registry, config, files, args.daemon_limits.limits());
    let (certs, insecure) = (
        args.access.tls_certificates.as_deref(),
        args.access.insecure,
    );
    let _view = offhost_view::View::start_said(args.view.config(certs, insecure), daemon.clone())?;
    let mut offload_config = args.offload.config(options.clone())?;
    offload_config.link = link_limits;
    let offload =
        Offload::new(offload_config, Some(daemon.clone())).context("peer configuration")?;
    let listen = if args.listen.is_empty() {
        vec![offhost_node::daemon::default_url()]
    } else {
        args.listen.clone()
    };
    offload.serve_all(&listen, &options, link_limits, &daemon, |url| {
        eprintln!("engine: listening on {url}")
    })?;
    Ok(())
}

/// Arguments of `offhost submit`.
#[derive(clap::Args, Debug)]
pub struct SubmitArgs {
    /// The engine daemon's URL; or, repeated, NAME=URL for each engine a placed pipeline
    /// (`@NAME` on its task lines) runs on: its tasks go to their engines, unplaced ones to
    /// the first, and queues between engines become engine-to-engine channels.
    #[arg(long, value_name = "URL|NAME=URL", default_values_t = [offhost_node::daemon::default_url()])]
    engine: Vec<String>,
    #[command(flatten)]
    access: crate::access_args::ConnectAccess,
    /// Pipeline description (.ion file) to run on the engine.
    #[arg(required_unless_present_any = ["status", "stop", "list"])]
    file: Option<PathBuf>,
    /// Destination of a host-out channel, NAME=PATH ('-' for standard output; default NAME.out).
    #[arg(long = "out", value_name = "NAME=PATH")]
    outs: Vec<String>,
    /// Source of a host-in channel, NAME=PATH ('-' for standard input; the default for one).
    #[arg(long = "in", value_name = "NAME=PATH")]
    ins: Vec<String>,
    /// A WebAssembly module sent with the pipeline, which its `wasm module=NAME` tasks run.
    #[arg(long = "module", value_name = "NAME=FILE")]
    modules: Vec<String>,
    /// Print the pipeline's id and return at once, leaving it running after this command
    /// (without it, the engine stops a pipeline once its submitter has gone).
    #[arg(long)]
    detach: bool,
    /// With --detach: seconds it may run (default: as long as the engine lets a pipeline run).
    #[arg(long, requires = "detach", value_parser = offhost_units::parse_seconds)]
    lifetime: Option<std::time::Duration>,
    /// Submit the pipeline under NAME too: --status, --stop, and the `pipeline=` of a `call`
    /// or `engine-out` on another engine, find it by that name (one running pipeline holds
    /// a name at a time).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Show pipeline ID's state and statistics (ID: its id, or the name it was submitted with).
    #[arg(long, value_name = "ID", value_parser = PipelineRef::parse)]
    status: Option<PipelineRef>,
    /// Stop pipeline ID's sources (ID: its id, or the name it was submitted with).
    #[arg(long, value_name = "ID", value_parser = PipelineRef::parse)]
    stop: Option<PipelineRef>,
    /// With --stop: end every task of the pipeline now, for one that a stop does not end (a
    /// task waiting for an answer that never comes); the pipeline fails "ended by force".
    #[arg(long, requires = "stop")]
    force: bool,
    /// A live view of the job: every engine's part and the links between them.
    #[command(flatten)]
    view: offhost_view::ViewArgs,
    #[command(flatten)]
    linger: offhost_view::ViewLinger,
    /// List the engine's pipelines.
    #[arg(long)]
    list: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Talks to a daemon: submit a pipeline and bridge its host channels to files, or query it.
/// With several engines (`--engine NAME=URL` ...), the pipeline's placed parts go to each.
pub fn submit(args: SubmitArgs, registry: &Registry) -> anyhow::Result<()> {
    let options = args.access.link_options()?;
    let detach = args.detach.then_some(offhost_node::jobs::Detach {
        lifetime: args.lifetime,
    });
    let read =
        |p: &PathBuf| std::fs::read_to_string(p).with_context(|| format!("read {}", p.display()));
    let modules = offhost_node::jobs::modules(&args.modules)?;
    let name = args.file.as_ref().map(|f| f.display().to_string());
    let parts = Arc::new(PartsView::new(&name.unwrap_or_default(), &options));
    let certs = args.access.tls_certificates.as_deref();
    let view = offhost_view::View::start_said(args.view.config(certs, false), parts.clone())?;
    if let Some(engines) = placed::named(&args.engine)? {
        if args.list || args.status.is_some() || args.stop.is_some() || args.name.is_some() {
            anyhow::bail!(
                "--list, --status, --stop and --name talk to one engine: give one --engine URL"
            );
        }
        let file = args.file.expect("clap requires a file here");
        let (path, text) = (file.display().to_string(), read(&file)?);
        let job = PlacedJob {
            engines: &engines,
            options: &options,
            path: &path,
            text: &text,
            outs: &args.outs,
            ins: &args.ins,
            modules: &modules,
            streams: None,
        };
        let done = placed::run(&job, registry, detach, |e, url, id| {
            parts.add(e, url, id);
            eprintln!("pipeline {id} started on engine {e} ({url})");
            if args.detach {
                println!("{e} {id}");
            }
        })?;
        if !args.detach {
            let (out, err) = done.printed(args.json);
            eprint!("{err}");
            print!("{out}");
        }
        args.linger.wait(view.as_ref());
        return done.failure.map_or(Ok(()), |f| Err(anyhow!(f)));
    }
    let url = &args.engine[0];
    let query = match (args.status, args.stop) {
        (Some(id), _) => Some(Query::Status(id)),
        (_, Some(id)) => Some(Query::Stop {
            id,
            force: args.force,
        }),
        _ => args.list.then_some(Query::List),
    };
    if let Some(q) = query {
        let (out, err) = offhost_node::jobs::daemon::query(url, &options, &q, args.json)?;
        eprint!("{err}");
        print!("{out}");
        return Ok(());
    }
    let file = args.file.expect("clap requires a file here");
    let (path, text) = (file.display().to_string(), read(&file)?);
    let job = DaemonJob {
        url,
        options: &options,
        path: &path,
        text: &text,
        outs: &args.outs,
        ins: &args.ins,
        name: args.name.as_deref(),
        modules: &modules,
    };
    let state = offhost_node::jobs::daemon::run(&job, detach, |id| {
        parts.add(url, url, id);
        eprintln!("pipeline {id} started on {url}");
        if args.detach {
            println!("{id}");
        }
    })?;
    let Some(v) = state else { return Ok(()) };
    print!("{}", offhost_node::jobs::daemon::status_text(&v, args.json));
    args.linger.wait(view.as_ref());
    v.error.map_or(Ok(()), |e| Err(anyhow!("{path}: {e}")))
}
