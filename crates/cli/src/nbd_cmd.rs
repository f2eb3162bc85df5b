//! `offhost nbd`: serve exports over NBD and report on device-side traces.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use offhost_nbd::server::DEFAULT_LISTEN;
use offhost_nbd::trace::Tracer;
use offhost_nbd::{report, Export, ListenAddr, Server};

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
    /// address is printed on stdout as `listening on ADDR`).
    #[arg(long, default_value = DEFAULT_LISTEN)]
    listen: String,
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
    #[arg(long, default_value_t = offhost_nbd::server::DEFAULT_CONN_THREADS)]
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
        .map_err(|e: String| anyhow::anyhow!("--listen: {e}"))?;
    let exports = a
        .exports
        .iter()
        .map(|s| Export::from_spec(s))
        .collect::<Result<Vec<_>, _>>()?;
    let tracer = match &a.trace {
        Some(p) => Some(
            Tracer::create(p).with_context(|| format!("cannot create trace {}", p.display()))?,
        ),
        None => None,
    };
    let mut server = Server::bind(&addr, exports, tracer)?;
    server.set_spin(std::time::Duration::from_micros(a.spin_us));
    anyhow::ensure!(
        (1..=256).contains(&a.conn_threads),
        "--conn-threads must be 1 to 256"
    );
    server.set_conn_threads(a.conn_threads);
    server.set_limits(a.limits.limits());
    for e in server.exports() {
        eprintln!(
            "export `{}`: {} bytes{}{}",
            e.name,
            e.backend.size(),
            if e.readonly { ", read-only" } else { "" },
            if e.backend.may_block() {
                ", drive model"
            } else {
                ""
            }
        );
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
