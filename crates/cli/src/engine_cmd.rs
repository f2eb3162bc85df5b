//! `offhost engine --listen URL` (the engine daemon) and `offhost submit` (a host using it).

use std::fs::File;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::thread::JoinHandle;

use anyhow::{anyhow, Context as _};
use std::sync::Arc;

use offhost_engine::daemon::{Client, Daemon};
use offhost_engine::offload::{HostLimits, Offload, OffloadConfig};
use offhost_engine::{EngineConfig, Registry, Stats};
use offhost_link::peer::PeerConfig;

use crate::engine_table::render;
use crate::run_cmd::parse_bindings;

/// Arguments of `offhost engine`.
#[derive(clap::Args, Debug)]
pub struct EngineArgs {
    /// Where to listen (repeatable): unix:PATH (the default: a socket only this user may use),
    /// shm:ADDR (hosts: link sessions and off-host queues), tls:HOST:PORT (with
    /// --tls-certificates; clients and peer engines need a certificate of the same CA), or
    /// plain tcp:HOST:PORT (only with --insecure).
    #[arg(long)]
    listen: Vec<String>,
    /// Let submitted pipelines open files beneath DIR (paths resolve beneath it: `..`,
    /// absolute paths and symlinks out of it are refused). Without it they open no files.
    #[arg(long, value_name = "DIR")]
    files: Option<PathBuf>,
    #[command(flatten)]
    access: crate::access_args::ServeAccess,
    /// Worker threads per pipeline.
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
    #[arg(long, value_name = "SECS", default_value_t = 0.0)]
    retry_for: f64,
    /// Close a peer link from which nothing came for this long.
    #[arg(long, value_name = "MS", default_value_t = 750)]
    link_timeout: u64,
    /// Hosts served at once.
    #[arg(long, default_value_t = 64)]
    max_hosts: usize,
    /// Sessions to other engines at most.
    #[arg(long, default_value_t = 64)]
    max_links: usize,
    /// Per host: submissions outstanding at most.
    #[arg(long, default_value_t = 4096)]
    host_outstanding: u32,
    /// Per host: bytes of sends in flight at most.
    #[arg(long, default_value_t = 64 << 20)]
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
}

impl OffloadArgs {
    fn config(&self, options: offhost_link::LinkOptions) -> anyhow::Result<OffloadConfig> {
        let mut pc = PeerConfig::new(&self.name)
            .options(options)
            .retry_for(std::time::Duration::from_secs_f64(self.retry_for.max(0.0)))
            .link_timeout(std::time::Duration::from_millis(self.link_timeout.max(1)))
            .max_links(self.max_links);
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
        Ok(c)
    }
}

/// Runs the daemon until killed: pipelines for hosts on every listener, off-host queues on
/// shm: listeners, peer engines' links on network listeners.
pub fn engine(args: EngineArgs, mut registry: Registry) -> anyhow::Result<()> {
    let files = match &args.files {
        Some(d) => {
            offhost_engine::Files::beneath(d).with_context(|| format!("--files {}", d.display()))?
        }
        None => offhost_engine::Files::Denied,
    };
    let options = args.access.link_options();
    // Submitted pipelines reach other engines over tls: with this engine's certificates.
    offhost_engine::remote::register(
        &mut registry,
        offhost_engine::remote::Links::outside(options.clone()),
    );
    let link_limits = args.link_limits.limits()?;
    let mut config = EngineConfig {
        pin: args.pin,
        ..EngineConfig::default()
    };
    if let Some(w) = args.workers {
        config.workers = w.max(1);
    }
    let daemon =
        Daemon::with_files_and_limits(registry, config, files, args.daemon_limits.limits());
    let mut offload_config = args.offload.config(options.clone())?;
    offload_config.link = link_limits;
    let offload =
        Offload::new(offload_config, Some(daemon.clone())).context("peer configuration")?;
    let listen = if args.listen.is_empty() {
        vec![crate::access_args::default_engine_url()]
    } else {
        args.listen.clone()
    };
    let mut threads = Vec::new();
    for url in &listen {
        if let Some(addr) = url.strip_prefix("shm:") {
            let mut l =
                offhost_shm::Listener::bind(addr).with_context(|| format!("listen on {url}"))?;
            l.set_allowed_uids(options.allow_uids.clone());
            eprintln!("engine: listening on {url}");
            let (o, d) = (offload.clone(), daemon.clone());
            // Link sessions of shm: hosts share one thread budget, as a server's do.
            let budget = offhost_link::Threads::new(link_limits.max_threads);
            threads.push(std::thread::spawn(move || {
                o.serve_shm(
                    l,
                    Arc::new(move |s: offhost_link::Session| {
                        let (d, t) = (d.clone(), budget.clone());
                        let session = s.clone();
                        let spawned = budget.spawn("offhost-daemon-session", move || {
                            d.serve_session(s, None, &t)
                        });
                        if let Err(e) = spawned {
                            session.refuse(&e.to_string());
                        }
                    }),
                )
            }));
        } else {
            let mut server = offhost_link::Server::bind_with(url, &options)
                .with_context(|| format!("listen on {url}"))?;
            server.set_limits(link_limits);
            eprintln!("engine: listening on {}", server.url());
            let (o, d) = (offload.clone(), daemon.clone());
            threads.push(std::thread::spawn(move || o.serve_links(&server, Some(d))));
        }
    }
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

/// Arguments of `offhost submit`.
#[derive(clap::Args, Debug)]
pub struct SubmitArgs {
    /// The engine daemon's URL; or, repeated, NAME=URL for each engine a placed pipeline
    /// (`@NAME` on its task lines) runs on: its tasks go to their engines, unplaced ones to
    /// the first, and queues between engines become engine-to-engine channels.
    #[arg(long, value_name = "URL|NAME=URL", default_values_t = [crate::access_args::default_engine_url()])]
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
    /// Print the pipeline's id and return at once, leaving it running.
    #[arg(long)]
    detach: bool,
    /// Show pipeline ID's state and statistics.
    #[arg(long, value_name = "ID")]
    status: Option<u64>,
    /// Stop pipeline ID's sources.
    #[arg(long, value_name = "ID")]
    stop: Option<u64>,
    /// List the engine's pipelines.
    #[arg(long)]
    list: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn print_state(v: &serde_json::Value, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(v)?);
        return Ok(());
    }
    println!(
        "pipeline {} {}",
        v["id"],
        v["state"].as_str().unwrap_or("?")
    );
    if let Ok(stats) = serde_json::from_value::<Stats>(v["stats"].clone()) {
        print!("{}", render(&stats));
    }
    Ok(())
}

/// Where the user's host channels go: `(NAME, PATH)` for each `host-out` and `host-in`.
pub struct Bindings {
    /// `host-out` channels and their files (`-` for standard output).
    pub outputs: Vec<(String, String)>,
    /// `host-in` channels and their files (`-` for standard input).
    pub inputs: Vec<(String, String)>,
}

/// The files of the pipeline's host channels: `--out`/`--in` as given, `NAME.out` for the
/// other outputs, standard input for a single input.
pub fn bindings(
    outs: &[String],
    ins: &[String],
    host_out: &[String],
    host_in: &[String],
) -> anyhow::Result<Bindings> {
    let mut o = parse_bindings(outs, "out", host_out)?;
    let mut i = parse_bindings(ins, "in", host_in)?;
    for n in host_out {
        o.entry(n.clone()).or_insert_with(|| format!("{n}.out"));
    }
    if host_in.len() == 1 {
        i.entry(host_in[0].clone()).or_insert_with(|| "-".into());
    }
    Ok(Bindings {
        outputs: o.into_iter().collect(),
        inputs: i.into_iter().collect(),
    })
}

/// Writes what arrives on `ch` to `path` (`-`: standard output) on a thread of its own.
pub fn bridge_output(
    ch: offhost_link::Channel,
    path: &str,
) -> anyhow::Result<JoinHandle<anyhow::Result<()>>> {
    let mut w: Box<dyn Write + Send> = if path == "-" {
        Box::new(std::io::stdout())
    } else {
        Box::new(File::create(path).with_context(|| format!("create {path}"))?)
    };
    Ok(std::thread::spawn(move || {
        while let Some(m) = ch.recv()? {
            w.write_all(&m)?;
        }
        w.flush()?;
        Ok(())
    }))
}

/// Sends `path` (`-`: standard input) on `ch` from a thread of its own, then closes it.
pub fn bridge_input(ch: offhost_link::Channel, path: &str) -> anyhow::Result<()> {
    let mut r: Box<dyn Read + Send> = if path == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(File::open(path).with_context(|| format!("open {path}"))?)
    };
    std::thread::spawn(move || -> anyhow::Result<()> {
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let k = r.read(&mut buf)?;
            if k == 0 {
                ch.close()?;
                return Ok(());
            }
            ch.send(&buf[..k])?;
        }
    });
    Ok(())
}

/// Talks to a daemon: submit a pipeline and bridge its host channels to files, or query it.
/// With several engines (`--engine NAME=URL` ...), the pipeline's placed parts go to each.
pub fn submit(args: SubmitArgs, registry: &Registry) -> anyhow::Result<()> {
    if let Some(engines) = crate::submit_many::named(&args.engine)? {
        if args.list || args.status.is_some() || args.stop.is_some() {
            anyhow::bail!("--list, --status and --stop talk to one engine: give one --engine URL");
        }
        let path = args.file.expect("clap requires a file here");
        let text =
            std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
        return crate::submit_many::submit(
            &path.display().to_string(),
            &text,
            &engines,
            &args.access.link_options(),
            registry,
            &args.outs,
            &args.ins,
            args.detach,
            args.json,
        );
    }
    let engine = &args.engine[0];
    let client = Client::connect_with(engine, &args.access.link_options())
        .with_context(|| format!("connect to {engine}"))?;
    if args.list {
        println!("{}", serde_json::to_string_pretty(&client.list()?)?);
        return Ok(());
    }
    if let Some(id) = args.status {
        return print_state(&client.status(id)?, args.json);
    }
    if let Some(id) = args.stop {
        client.stop(id)?;
        eprintln!("pipeline {id}: stopping");
        return Ok(());
    }
    let path = args.file.expect("clap requires a file here");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    let sub = client
        .submit(&text)
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
    eprintln!("pipeline {} started on {engine}", sub.id);
    if args.detach {
        println!("{}", sub.id);
        return Ok(());
    }
    let b = bindings(&args.outs, &args.ins, &sub.host_out, &sub.host_in)?;
    let mut bridges: Vec<JoinHandle<anyhow::Result<()>>> = Vec::new();
    for (n, p) in b.outputs {
        bridges.push(bridge_output(client.open_output(sub.id, &n)?, &p)?);
    }
    for (n, p) in b.inputs {
        bridge_input(client.open_input(sub.id, &n)?, &p)?;
    }
    for b in bridges {
        b.join()
            .map_err(|_| anyhow!("a channel thread panicked"))??;
    }
    let v = client.wait(sub.id)?;
    print_state(&v, args.json)?;
    match v["error"].as_str() {
        Some(e) => Err(anyhow!("{}: {e}", path.display())),
        None => Ok(()),
    }
}
