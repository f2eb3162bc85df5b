//! `offhost echo`: the echo engine (the seed's `nrate`): channel sessions over any transport,
//! or (`--raw`) bare records on the shared-memory rings.

use anyhow::{bail, Context, Result};
use offhost_shm::{Listener, Mode};
use std::time::Duration;

/// Where a link endpoint lives: `shm:PATH` (or `shm:@name`), or `mem:` (in-process).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Url {
    /// Shared memory, set up over the Unix socket at this address.
    Shm(String),
    /// The same rings between two threads of this process.
    Mem,
}

impl std::str::FromStr for Url {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(addr) = s.strip_prefix("shm:") {
            if addr.is_empty() || addr == "@" {
                return Err(format!("{s:?}: shm: needs a socket path or @name"));
            }
            return Ok(Url::Shm(addr.to_owned()));
        }
        if s == "mem:" || s == "mem" {
            return Ok(Url::Mem);
        }
        Err(format!(
            "{s:?}: unknown address (expected shm:PATH, shm:@name or mem:)"
        ))
    }
}

/// Arguments of `offhost echo`.
#[derive(clap::Args, Debug)]
pub struct EchoArgs {
    /// Where to listen: tcp:HOST:PORT, unix:PATH, shm:PATH (a Unix socket path, removed on
    /// exit) or shm:@name (abstract socket, leaves no file). With --raw, shm: only.
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
    limits: crate::limit_args::LinkLimitArgs,
}

/// Runs `offhost echo`: reflects every record of each host, one host after another.
pub fn run(args: EchoArgs) -> Result<()> {
    if !args.raw {
        if args.listen == "mem:" || args.listen.starts_with("mem:") {
            bail!("mem: is in-process only; it has no listener (try tcp:, unix: or shm:)");
        }
        // Threads started later (sessions, channels) inherit the pinning.
        if let Some(cpu) = args.pin {
            if !offhost_bench::affinity::pin_current_thread(cpu) {
                eprintln!("echo: could not pin to CPU {cpu}; running unpinned");
            }
        }
        return crate::channel_cmds::serve_echo(&args.listen, args.once, args.limits.limits()?);
    }
    let listen: Url = args.listen.parse().map_err(anyhow::Error::msg)?;
    let addr = match &listen {
        Url::Shm(addr) => addr.clone(),
        Url::Mem => bail!(
            "mem: is in-process only; it has no listener (try `offhost bench pingpong --transport mem`)"
        ),
    };
    if let Some(cpu) = args.pin {
        if !offhost_bench::affinity::pin_current_thread(cpu) {
            eprintln!("echo: could not pin to CPU {cpu}; running unpinned");
        }
    }
    let listener = Listener::bind(&addr).with_context(|| format!("listen on shm:{addr}"))?;
    eprintln!("echo: listening on shm:{addr}");
    let mode = args.mode.map(|m| (m, Duration::from_micros(args.spin_us)));
    loop {
        match listener.accept_with(mode) {
            Ok(ep) => {
                let (m, _) = ep.mode();
                eprintln!("echo: host connected ({m})");
                match offhost_shm::echo_with(ep, args.touch) {
                    Ok(s) => eprintln!(
                        "echo: host left after {} records, {} bytes",
                        s.records, s.bytes
                    ),
                    Err(e) => eprintln!("echo: link failed: {e}"),
                }
            }
            Err(e) => eprintln!("echo: rejected a host: {e}"),
        }
        if args.once {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_or_say_what_is_wrong() {
        assert_eq!("shm:/tmp/x".parse(), Ok(Url::Shm("/tmp/x".into())));
        assert_eq!("shm:@e".parse(), Ok(Url::Shm("@e".into())));
        assert_eq!("mem:".parse(), Ok(Url::Mem));
        assert!("shm:"
            .parse::<Url>()
            .unwrap_err()
            .contains("needs a socket"));
        assert!("tcp:1"
            .parse::<Url>()
            .unwrap_err()
            .contains("unknown address"));
    }
}
