//! `offhost send`, `offhost recv`, `offhost cat` (the paper's /dev/tlw0 and /dev/tlr0 in shell
//! pipelines) and the channel echo engine behind `offhost echo`.

use std::io::Write;

use anyhow::{Context, Result};
use offhost_link::{ChannelOptions, SendMode, Server, Session};

use crate::access_args::{ConnectAccess, ServeAccess};

/// Channel options shared by the three commands.
#[derive(clap::Args, Debug, Clone)]
pub struct ChannelFlags {
    /// Channel name (1 to 255 bytes); with --via, an address [PEER/]CHANNEL.
    #[arg(long)]
    channel: String,
    /// Packet size in bytes: a power of two from 8 to 64K.
    #[arg(long, default_value = "16K", value_parser = offhost_units::parse_size_as::<usize>)]
    packet_size: usize,
    /// Receive buffer per direction, in bytes (64K, 4M...).
    #[arg(long, default_value = "1M", value_parser = offhost_units::parse_size_as::<u32>)]
    buffer: u32,
    /// Largest message in bytes (at most the receive buffer); input is cut into messages of
    /// this size.
    #[arg(long, default_value = "1M", value_parser = offhost_units::parse_size)]
    max_message: u64,
    /// Synchronous sends: each message waits until the engine has taken it.
    #[arg(long)]
    sync: bool,
    /// Give up when one message waits longer than this many seconds to go or to come (with
    /// recv --via also --idle-timeout: no message came for this long).
    #[arg(long, visible_alias = "idle-timeout", value_name = "SECS", value_parser = offhost_units::parse_seconds)]
    timeout: Option<std::time::Duration>,
}

impl ChannelFlags {
    fn options(&self) -> ChannelOptions {
        ChannelOptions {
            packet_size: self.packet_size,
            recv_buffer: self.buffer,
            max_message: self.max_message,
            send_mode: if self.sync {
                SendMode::Sync
            } else {
                SendMode::Async
            },
        }
    }
}

/// Arguments of `offhost send`.
#[derive(clap::Args, Debug)]
pub struct SendArgs {
    /// Engine URL: tls:HOST:PORT, tcp:HOST:PORT, unix:PATH or shm:PATH.
    #[arg(long, required_unless_present = "via")]
    to: Option<String>,
    /// Off-host: hand the messages to the local engine at shm:PATH, which carries them to
    /// --channel [PEER/]CHANNEL (see `offhost engine --peer`) and says when each is delivered.
    #[arg(long, conflicts_with = "to")]
    via: Option<String>,
    #[command(flatten)]
    flags: ChannelFlags,
    #[command(flatten)]
    offload: crate::offload_cmds::SendFlags,
    #[command(flatten)]
    access: ConnectAccess,
}

/// Arguments of `offhost recv`.
#[derive(clap::Args, Debug)]
pub struct RecvArgs {
    /// Engine URL: tls:HOST:PORT, tcp:HOST:PORT, unix:PATH or shm:PATH. Repeat it to take
    /// the channel from several engines at once, each message as it comes (a select).
    #[arg(long, required_unless_present = "via")]
    from: Vec<String>,
    /// Off-host: receive --channel CHANNEL's messages from the local engine at shm:PATH,
    /// until the sender's end mark (an empty message).
    #[arg(long, conflicts_with = "from")]
    via: Option<String>,
    #[command(flatten)]
    flags: ChannelFlags,
    #[command(flatten)]
    access: ConnectAccess,
}

/// Arguments of `offhost cat`.
#[derive(clap::Args, Debug)]
pub struct CatArgs {
    /// Engine URL: tls:HOST:PORT, tcp:HOST:PORT, unix:PATH or shm:PATH.
    #[arg(long)]
    via: String,
    #[command(flatten)]
    flags: ChannelFlags,
    #[command(flatten)]
    access: ConnectAccess,
}

fn open(
    url: &str,
    flags: &ChannelFlags,
    access: &ConnectAccess,
) -> Result<(Session, offhost_link::Channel)> {
    let session = Session::connect_with(url, &access.link_options()?)
        .with_context(|| format!("connect to {url}"))?;
    let ch = session
        .open(&flags.channel, flags.options())
        .with_context(|| format!("open channel {:?} on {url}", flags.channel))?;
    Ok((session, ch))
}

/// Copies stdin into the channel, each read as a message waiting at most `wait`, then ends
/// the stream.
fn pump_in(ch: &offhost_link::Channel, wait: Option<std::time::Duration>) -> Result<u64> {
    let w = ch.writer().waiting(wait);
    w.send_all_from(&mut std::io::stdin().lock())
        .context("send stdin to the channel")
}

/// `offhost send`: stdin to the channel; whatever the engine sends back is discarded.
pub fn send(args: SendArgs) -> Result<()> {
    if let Some(engine) = &args.via {
        let (channel, max) = (&args.flags.channel, args.flags.max_message);
        return crate::offload_cmds::send(engine, channel, max, &args.offload);
    }
    let to = args.to.as_deref().expect("clap requires --to or --via");
    let (session, ch) = open(to, &args.flags, &args.access)?;
    std::thread::scope(|s| {
        // Drain the other direction so the engine never waits on us.
        let drain = s.spawn(|| while let Ok(Some(_)) = ch.recv() {});
        let r = pump_in(&ch, args.flags.timeout);
        session.close();
        let _ = drain.join();
        r
    })?;
    Ok(())
}

/// `offhost recv`: the channel's messages to stdout until the engine ends the stream.
pub fn recv(args: RecvArgs) -> Result<()> {
    if let Some(engine) = &args.via {
        return crate::offload_cmds::recv(engine, &args.flags.channel, args.flags.timeout);
    }
    let opened: Vec<_> = (args.from.iter())
        .map(|url| open(url, &args.flags, &args.access))
        .collect::<Result<_>>()?;
    let mut live: Vec<&offhost_link::Channel> = opened.iter().map(|(_, ch)| ch).collect();
    for ch in &live {
        ch.close().context("end our direction of the channel")?;
    }
    let mut out = std::io::stdout().lock();
    while !live.is_empty() {
        let i = offhost_link::select(&live, args.flags.timeout).context("wait for a message")?;
        match live[i].recv_wait(args.flags.timeout).context("receive")? {
            Some(m) => out.write_all(&m).context("write stdout")?,
            None => drop(live.swap_remove(i)),
        }
    }
    out.flush().context("write stdout")?;
    opened.iter().for_each(|(s, _)| s.close());
    Ok(())
}

/// `offhost cat`: stdin to the channel and the channel to stdout, at the same time.
pub fn cat(args: CatArgs) -> Result<()> {
    let (session, ch) = open(&args.via, &args.flags, &args.access)?;
    let (ch, wait) = (std::sync::Arc::new(ch), args.flags.timeout);
    let c = std::sync::Arc::clone(&ch);
    // Joined only when the output ended well: a read of stdin cannot be interrupted, and a
    // failed copy ends the process at once instead of waiting for the terminal.
    let input = std::thread::spawn(move || pump_in(&c, wait));
    let mut out = std::io::stdout().lock();
    let copied = std::io::copy(&mut ch.reader().waiting(wait), &mut out);
    out.flush().context("write stdout")?;
    copied.context("copy the channel to stdout")?;
    input
        .join()
        .map_err(|_| anyhow::anyhow!("stdin thread panicked"))??;
    session.close();
    Ok(())
}

/// Serves the channel echo at `url` with `access` and within `limits`: every message of every
/// channel of every host comes back on the same channel; with `once`, after the first host
/// leaves, exit.
pub fn serve_echo(
    url: &str,
    once: bool,
    access: &ServeAccess,
    limits: offhost_link::Limits,
) -> Result<()> {
    let mut server = Server::bind_with(url, &access.link_options())
        .with_context(|| format!("listen on {url}"))?;
    server.set_limits(limits);
    eprintln!("echo: serving channels on {}", server.url());
    if !once {
        offhost_link::serve_echo(&server)?;
        return Ok(());
    }
    let n = offhost_link::serve_echo_once(&server).context("accept a host")?;
    eprintln!("echo: host left after {n} channels");
    Ok(())
}
