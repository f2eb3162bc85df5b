//! `offhost bench overhead`: the CPU a channel adds to the raw ring, without cross-core
//! traffic. One thread drives both ends of a channel session over an in-process shared-memory
//! pair (poll mode) and, in turn, both ends of a bare ring pair: send, receive, send back,
//! receive, each message copied out as an application would. What is left between the two is
//! the channel layer's own work (session lock, frames, credit), which the machine's state
//! (where the hypervisor puts the two vCPUs today) does not blur as it blurs a ping-pong
//! between two cores.

use std::time::Instant;

use anyhow::{ensure, Context, Result};
use offhost_link::{ChannelOptions, SendMode, Server, Session};
use serde::Serialize;

/// Arguments of `offhost bench overhead`.
#[derive(clap::Args, Debug)]
pub struct OverheadArgs {
    /// Message sizes in bytes (a K, M or G suffix multiplies by 1024, 1024^2, 1024^3).
    #[arg(long, value_delimiter = ',', default_value = "64,4096", value_parser = offhost_bench::sizes::parse_size)]
    sizes: Vec<usize>,
    /// Round trips per trial.
    #[arg(long, default_value_t = 100_000)]
    iters: usize,
    /// Trials per size, channels and ring in turn; the fastest of each counts.
    #[arg(long, default_value_t = 15)]
    trials: usize,
    /// Print JSON (an array of rows).
    #[arg(long)]
    json: bool,
}

/// One line of the report.
#[derive(Debug, Serialize)]
struct Row {
    bench: &'static str,
    size: usize,
    iters: usize,
    trials: usize,
    /// CPU time of one channel round trip (2 sends, 2 receives), fastest trial.
    channel_round_trip_ns: f64,
    /// The same over the bare ring.
    raw_round_trip_ns: f64,
    /// channel / raw.
    ratio: f64,
    /// What a channel adds to one hop: (channel - raw) / 2.
    extra_ns_per_hop: f64,
}

/// Runs `offhost bench overhead`.
pub fn run(args: OverheadArgs) -> Result<()> {
    ensure!(args.iters > 0, "--iters must be at least 1");
    ensure!(args.trials > 0, "--trials must be at least 1");
    let pb = indicatif::ProgressBar::with_draw_target(
        Some((args.sizes.len() * args.trials) as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    let mut rows = Vec::new();
    for &size in &args.sizes {
        pb.set_message(format!("overhead {size} B"));
        rows.push(measure(size, &args, &pb).with_context(|| format!("{size}-byte messages"))?);
    }
    pb.finish_and_clear();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "{:>8} {:>16} {:>14} {:>7} {:>14}",
        "size", "channel ns/rt", "raw ns/rt", "ratio", "extra ns/hop"
    );
    for r in &rows {
        println!(
            "{:>8} {:>16.0} {:>14.0} {:>7.2} {:>14.0}",
            r.size, r.channel_round_trip_ns, r.raw_round_trip_ns, r.ratio, r.extra_ns_per_hop
        );
    }
    Ok(())
}

fn measure(size: usize, args: &OverheadArgs, pb: &indicatif::ProgressBar) -> Result<Row> {
    let config = offhost_shm::Config {
        mode: offhost_shm::Mode::Poll,
        ring_bytes: ((size + 4096).next_power_of_two() as u64 * 4).max(1 << 20),
        ..offhost_link::default_shm_config()
    };
    let addr = format!("@offhost-bench-overhead-{}-{size}", std::process::id());
    let server = Server::bind(&format!("shm:{addr}"))?;
    let engine = std::thread::spawn(move || server.accept());
    let host = Session::connect_shm(&addr, &config)?;
    let engine = engine
        .join()
        .map_err(|_| anyhow::anyhow!("accepting thread panicked"))??;
    let options = ChannelOptions {
        packet_size: size.clamp(8, 64 * 1024).next_power_of_two(),
        recv_buffer: (2 * size as u64).max(1 << 20) as u32,
        max_message: size as u64,
        send_mode: SendMode::Async,
    };
    let a = host.open("overhead", options)?;
    let b = engine.accept()?;
    let (ring_a, ring_b) = offhost_shm::pair(&config)?;
    let (mut a_tx, mut a_rx) = ring_a.split();
    let (mut b_tx, mut b_rx) = ring_b.split();

    let msg: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
    let mut buf = Vec::with_capacity(size);
    let (mut chan, mut raw) = (f64::MAX, f64::MAX);
    for _ in 0..args.trials {
        let t0 = Instant::now();
        for _ in 0..args.iters {
            a.send(&msg)?;
            ensure!(b.recv_into(&mut buf)?, "the channel ended");
            b.send(&buf)?;
            ensure!(a.recv_into(&mut buf)?, "the channel ended");
        }
        chan = chan.min(t0.elapsed().as_nanos() as f64 / args.iters as f64);
        ensure!(buf == msg, "the channel's round trip changed the bytes");
        let t0 = Instant::now();
        for _ in 0..args.iters {
            a_tx.send(&msg, None)?;
            copy_out(&mut b_rx, &mut buf)?;
            b_tx.send(&buf, None)?;
            copy_out(&mut a_rx, &mut buf)?;
        }
        raw = raw.min(t0.elapsed().as_nanos() as f64 / args.iters as f64);
        ensure!(buf == msg, "the ring's round trip changed the bytes");
        pb.inc(1);
    }
    Ok(Row {
        bench: "overhead",
        size,
        iters: args.iters,
        trials: args.trials,
        channel_round_trip_ns: chan,
        raw_round_trip_ns: raw,
        ratio: chan / raw,
        extra_ns_per_hop: (chan - raw) / 2.0,
    })
}

/// Receives the next record and copies its bytes into `buf`, as a channel receive does.
fn copy_out(rx: &mut offhost_shm::Receiver, buf: &mut Vec<u8>) -> Result<()> {
    let r = rx.recv(None)?;
    buf.clear();
    buf.extend_from_slice(r.bytes());
    Ok(())
}
