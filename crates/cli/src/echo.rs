//! `offhost echo`: the echo engine (the seed's `nrate`) serving hosts over shared memory.

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
    /// Where to listen: shm:PATH (a Unix socket path, removed on exit) or shm:@name (abstract
    /// socket, leaves no file).
    #[arg(long)]
    listen: Url,
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
}

/// Runs `offhost echo`: reflects every record of each host, one host after another.
pub fn run(args: EchoArgs) -> Result<()> {
    let addr = match &args.listen {
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
                match offhost_shm::echo(ep) {
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
