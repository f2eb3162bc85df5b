//! `offhost send --via` and `offhost recv --via`: byte streams through the off-host queues.

use std::time::Duration;

use anyhow::{Context, Result};
use offhost_link::offload::{self, HostQueue, OpenOptions};

/// Flags of an off-host send.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SendFlags {
    /// With --via: an urgent channel (never queued behind bulk ones).
    #[arg(long, requires = "via")]
    urgent: bool,
    /// With --via: the engine holds the channel to this many bytes per second.
    #[arg(long, value_name = "BYTES_PER_SEC", requires = "via")]
    rate: Option<u64>,
    /// With --via and --rate: bytes the channel may send at once (default: 64 KiB).
    #[arg(long, value_name = "BYTES", requires = "rate")]
    burst: Option<u64>,
}

fn connect(engine: &str) -> Result<HostQueue> {
    HostQueue::connect(engine).with_context(|| format!("connect to the local engine at {engine}"))
}

/// Sends stdin to `address` through the engine at `engine`, then the end mark; returns when
/// everything is delivered.
pub fn send(engine: &str, address: &str, chunk: u64, flags: &SendFlags) -> Result<()> {
    let mut q = connect(engine)?;
    let mut opts = if flags.urgent {
        OpenOptions::urgent()
    } else {
        OpenOptions::bulk()
    };
    if let Some(r) = flags.rate {
        opts = opts.rate(r, flags.burst.unwrap_or(64 << 10));
    }
    let ch = q
        .open(address, opts)
        .with_context(|| format!("open {address} via {engine}"))?;
    let n = offload::send_all(&mut q, ch, &mut std::io::stdin().lock(), chunk as usize)
        .with_context(|| format!("send to {address} via {engine}"))?;
    eprintln!("send: {n} bytes delivered to {address}");
    Ok(())
}

/// Writes the messages of `channel` at the engine `engine` to stdout until the end mark.
pub fn recv(engine: &str, channel: &str, idle: Option<Duration>) -> Result<()> {
    let mut q = connect(engine)?;
    let ch = q
        .open(channel, OpenOptions::bulk())
        .with_context(|| format!("open {channel} via {engine}"))?;
    let mut out = std::io::stdout().lock();
    offload::recv_all(&mut q, ch, &mut out, idle)
        .with_context(|| format!("receive {channel} via {engine}"))?;
    Ok(())
}
