//! `offhost echo`: the echo engine (the paper's `nrate`): channel sessions over any transport,
//! or (`--raw`) bare records on the shared-memory rings.

use anyhow::{bail, Context, Result};
use offhost_shm::{Listener, Mode};
use std::time::Duration;

pub use offhost_bench_suite::pingpong::shm_addr;

/// Arguments of `offhost echo`.
#[derive(clap::Args, Debug)]
pub struct EchoArgs {
    /// Where to listen: tls:HOST:PORT (with --tls-certificates), unix:PATH, shm:PATH (a Unix
    /// socket path, removed on exit), shm:@name (abstract socket, leaves no file), or plain
    /// tcp:HOST:PORT (only with --insecure). With --raw, shm: only.
    #[arg(long)]
    listen: String,
    /// Echo bare ring records (no channel protocol); shm: only.
    #[arg(long)]
    raw: bool,
    /// How this side waits: poll, block or adaptive. Default: what each host asks for.
    #[arg(long)]
    mode: Option<Mode>,
    /// Spin budget of adaptive mode, in microseconds.
    #[arg(long, default_value_t = 50)]
    spin_us: u64,
    /// Pin the echo thread to this CPU.
    #[arg(long)]
    pin: Option<usize>,
    /// Serve one host, then exit.
    #[arg(long)]
    once: bool,
    /// Read every byte of every buffer record before reflecting it (default: reflect the
    /// descriptor only, zero-copy).
    #[arg(long)]
    touch: bool,
    #[command(flatten)]
    access: crate::access_args::ServeAccess,
    #[command(flatten)]
    limits: crate::limit_args::LinkLimitArgs,
}

/// Runs `offhost echo`: reflects every record of each host, one host after another.
pub fn run(args: EchoArgs) -> Result<()> {
    // Threads started later (sessions, channels) inherit the pinning.
    if let Some(cpu) = args.pin {
        if let Err(e) = offhost_bench::affinity::pin_current_thread(cpu) {
            eprintln!("echo: {e}; running unpinned");
        }
    }
    if !args.raw {
        if args.listen == "mem:" || args.listen.starts_with("mem:") {
            bail!("mem: is in-process only; it has no listener (try tcp:, unix: or shm:)");
        }
        return crate::channel_cmds::serve_echo(
            &args.listen,
            args.once,
            &args.access,
            args.limits.limits()?,
        );
    }
    let addr = shm_addr(&args.listen)?;
    let mut listener = Listener::bind(&addr).with_context(|| format!("listen on shm:{addr}"))?;
    listener.set_allowed_uids(args.access.allow_uids.clone());
    listener.set_event_limit(args.limits.limits()?.event_limit);
    eprintln!("echo: listening on shm:{addr}");
    let mode = args.mode.map(|m| (m, Duration::from_micros(args.spin_us)));
    offhost_shm::serve_echo(&listener, mode, args.touch, args.once, |e| {
        eprintln!("echo: {e}")
    });
    Ok(())
}
