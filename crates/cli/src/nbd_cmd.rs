//! `offhost nbd`: serve exports over NBD and report on device-side traces.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use offhost_engine::Files;
use offhost_nbd::Tracer;
use offhost_nbd::DEFAULT_LISTEN;
use offhost_nbd::{report, Export, ListenAddr, NbdTls, Server, TlsMode};

/// Arguments of `offhost nbd`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct NbdArgs {
    #[command(subcommand)]
    sub: Option<NbdSub>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand, Debug)]
enum NbdSub {
    /// Turn a device-side trace into transfer rate and command overhead against request size.
    Report(ReportArgs),
}

/// Serving options.
#[derive(Args, Debug)]
struct ServeArgs {
    /// Where to listen: tcp:HOST:PORT, HOST:PORT or unix:PATH (port 0 picks a free port; the
    /// address is printed on stdout as `listening on ADDR`). A TCP listener needs
    /// --tls=require (clients connect with nbds://) or --insecure.
    #[arg(long, default_value = DEFAULT_LISTEN)]
    listen: String,
    /// TLS, as nbdkit's --tls: off, on (offered: clients may upgrade with NBD_OPT_STARTTLS) or
    /// require (every option before STARTTLS is refused with NBD_REP_ERR_TLS_REQD).
    #[arg(long, default_value = "off", value_name = "off|on|require")]
    tls: TlsMode,
    /// Require a client certificate signed by the directory's ca-cert.pem (without it, one
    /// is verified when a client presents it).
    #[arg(long)]
    tls_verify_peer: bool,
    /// Accept new pipelines written to an action export's control range (refused with EPERM
    /// otherwise).
    #[arg(long)]
    allow_control: bool,
    /// Let pipelines written to the control range open files beneath DIR (paths resolve
    /// beneath it; `..`, absolute paths and symlinks out are refused). Without it they open no
    /// files. The pipelines of the export files themselves see files as this process does.
    #[arg(long, value_name = "DIR")]
    files: Option<PathBuf>,
    /// Let those pipelines read devices, fifos and sockets beneath --files DIR too (without
    /// it they read regular files only).
    #[arg(long, requires = "files")]
    files_allow_devices: bool,
    #[command(flatten)]
    access: crate::access_args::ServeAccess,
    /// An export, NAME=KIND:ARG[,OPTION...], e.g. `disk=mem:1G,readonly` (repeatable; the first
    /// is also the default export). Options: readonly, block=N, max=SIZE, desc=TEXT, and for the
    /// drive model rpm=N, seek=DURATION, rate=SIZE, spt=N, tpc=N,
    /// cache=none|read-ahead|write-behind.
    #[arg(long = "export", value_name = "NAME=SPEC")]
    exports: Vec<String>,
    /// Record every request to this file (see `offhost nbd report`).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Microseconds a connection polls its socket before sleeping (0: always sleep).
    #[arg(long, default_value_t = 0)]
    spin_us: u64,
    /// Worker threads per connection, taking turns at the socket.
    #[arg(long, default_value_t = offhost_nbd::DEFAULT_CONN_THREADS)]
    conn_threads: usize,
    #[command(flatten)]
    limits: crate::limit_args::NbdLimitArgs,
}

#[derive(Args, Debug)]
struct ReportArgs {
    /// Trace file written by `offhost nbd --trace`.
    file: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Also draw the transfer-rate and overhead plot to this SVG file.
    #[arg(long)]
    plot: Option<PathBuf>,
}

/// Runs `offhost nbd ...`.
pub fn run(args: NbdArgs) -> anyhow::Result<()> {
    match args.sub {
        Some(NbdSub::Report(r)) => run_report(r),
        None => serve(args.serve),
    }
}

fn serve(a: ServeArgs) -> anyhow::Result<()> {
    let addr: ListenAddr = a
        .listen
        .parse()
        .map_err(|e| anyhow::anyhow!("--listen: {e}"))?;
    let control = match (a.allow_control, &a.files) {
        (false, Some(_)) => anyhow::bail!(
            "--files applies to pipelines written to the control range: give --allow-control too"
        ),
        (false, None) => None,
        (true, None) => Some(Files::Denied),
        (true, Some(d)) => Some(
            Files::beneath(d)
                .with_context(|| format!("--files {}", d.display()))?
                .allow_devices(a.files_allow_devices),
        ),
    };
    let exports = a
        .exports
        .iter()
        .map(|s| Export::from_spec_with(s, control.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    let tls = NbdTls::new(
        a.tls,
        a.access.tls_certificates.as_deref(),
        a.tls_verify_peer,
    )?;
    let tracer = match &a.trace {
        Some(p) => Some(
            Tracer::create(p).with_context(|| format!("cannot create trace {}", p.display()))?,
        ),
        None => None,
    };
    let mut server = Server::bind(&addr, exports, tracer)?;
    server.set_tls(tls);
    server.set_allowed_uids(a.access.allow_uids.clone());
    server.check_insecure(a.access.insecure)?;
    server.set_spin(std::time::Duration::from_micros(a.spin_us));
    anyhow::ensure!(
        (1..=256).contains(&a.conn_threads),
        "--conn-threads must be 1 to 256"
    );
    server.set_conn_threads(a.conn_threads);
    server.set_limits(a.limits.limits());
    for e in server.exports() {
        let (kind, size, ro) = (e.backend.kind(), e.backend.size(), e.readonly);
        let ro = if ro { ", read-only" } else { "" };
        eprintln!("export `{}`: {size} bytes, {kind}{ro}", e.name);
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening on {}", server.local_addr())?;
    out.flush()?;
    drop(out);
    server.serve()?;
    Ok(())
}

fn run_report(a: ReportArgs) -> anyhow::Result<()> {
    let recs = report::load(&a.file)?;
    anyhow::ensure!(
        !recs.is_empty(),
        "{}: no requests in trace",
        a.file.display()
    );
    let r = report::analyse(&recs);
    if let Some(p) = &a.plot {
        report::plot(&r, p)?;
        eprintln!("plot written to {}", p.display());
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", report::table(&r));
    }
    Ok(())
}
