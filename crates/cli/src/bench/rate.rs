//! `offhost bench rate`: messages per second of a one-way stream through a channel, sent in
//! batches, by copy or (on shm) by loan, to a sink engine on a thread.

use std::time::Instant;

use anyhow::{ensure, Context, Result};
use offhost_link::{ChannelOptions, Message, SendMode, Server, Session};
use offhost_shm::Mode;
use serde::Serialize;

/// How messages travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum RatePath {
    /// Copied through the link (`send_batch`).
    Copy,
    /// Zero-copy loans of the shared pool (shm only; the sender does not touch the bytes).
    Loan,
}

/// Arguments of `offhost bench rate`.
#[derive(clap::Args, Debug)]
pub struct RateArgs {
    /// Transport: shm, tcp, unix or mem.
    #[arg(long, default_value = "shm")]
    transport: String,
    /// Message sizes in bytes (a K, M or G suffix multiplies by 1024, 1024^2, 1024^3).
    #[arg(long, value_delimiter = ',', default_value = "64", value_parser = offhost_bench::sizes::parse_size)]
    sizes: Vec<usize>,
    /// Paths, comma-separated: copy, loan.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "copy")]
    path: Vec<RatePath>,
    /// Messages per run (default: 2 million, at most 4 GiB, at least 200).
    #[arg(long)]
    count: Option<usize>,
    /// Messages per send_batch call (copy path).
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Runs per size and path; the report gives the median and the slowest.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Doorbell mode on shm: poll, block or adaptive.
    #[arg(long, default_value = "adaptive")]
    mode: Mode,
    /// Print a JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct Row {
    bench: &'static str,
    transport: String,
    mode: &'static str,
    size: usize,
    path: &'static str,
    iters: usize,
    /// Amortised time per message (1 / rate), median over runs.
    one_way_ns_median: f64,
    /// Amortised time per message of the slowest run.
    one_way_ns_p99: f64,
    mb_per_s: f64,
    msgs_per_s: f64,
}

fn url_for(transport: &str, dir: &std::path::Path) -> Result<String> {
    Ok(match transport {
        "shm" => format!("shm:@offhost-rate-{}", std::process::id()),
        "tcp" => "tcp:127.0.0.1:0".to_owned(),
        "unix" => format!("unix:{}", dir.join("rate.sock").display()),
        "mem" => format!("mem:offhost-rate-{}", std::process::id()),
        other => anyhow::bail!("--transport {other:?}: expected shm, tcp, unix or mem"),
    })
}

/// Runs `offhost bench rate`.
pub fn run(args: RateArgs) -> Result<()> {
    ensure!(
        args.runs > 0 && args.batch > 0,
        "--runs and --batch must be at least 1"
    );
    let dir = tempfile::tempdir()?;
    let server = Server::bind(&url_for(&args.transport, dir.path())?)?;
    let url = server.url().to_owned();
    let loans = args.path.contains(&RatePath::Loan);
    ensure!(
        !loans || args.transport == "shm",
        "--path loan needs --transport shm"
    );
    let sink = std::thread::spawn(move || sink(server, loans));
    let session = if args.transport == "shm" {
        let addr = url.strip_prefix("shm:").expect("shm url");
        let config = offhost_shm::Config {
            mode: args.mode,
            ..offhost_link::default_shm_config()
        };
        Session::connect_shm(addr, &config)?
    } else {
        Session::connect(&url)?
    };
    let mut rows = Vec::new();
    for &size in &args.sizes {
        for &path in &args.path {
            let count = args
                .count
                .unwrap_or((4usize << 30) / size)
                .clamp(200, 2_000_000);
            let mut ns = Vec::new();
            for run in 0..args.runs {
                eprint!("\rrate {size} B {path:?}: run {}/{}   ", run + 1, args.runs);
                ns.push(one_run(&session, size, path, count, args.batch)?);
            }
            eprint!("\r{:40}\r", "");
            ns.sort_by(f64::total_cmp);
            let median = ns[ns.len() / 2];
            let slowest = ns[ns.len() - 1];
            rows.push(Row {
                bench: "rate",
                transport: args.transport.clone(),
                mode: if args.transport == "shm" {
                    args.mode.name()
                } else {
                    "block"
                },
                size,
                path: match path {
                    RatePath::Copy => "copy",
                    RatePath::Loan => "loan",
                },
                iters: count,
                one_way_ns_median: median,
                one_way_ns_p99: slowest,
                mb_per_s: size as f64 / median * 1e3,
                msgs_per_s: 1e9 / median,
            });
        }
    }
    session.close();
    drop(session);
    sink.join()
        .map_err(|_| anyhow::anyhow!("sink thread panicked"))??;
    print(&rows, args.json)
}

/// Streams `count` messages on a fresh channel; returns ns per message, from the first send
/// (once the sink said it is ready) until the sink has taken the last one.
fn one_run(
    session: &Session,
    size: usize,
    path: RatePath,
    count: usize,
    batch: usize,
) -> Result<f64> {
    let opts = ChannelOptions {
        packet_size: size.clamp(8, 64 * 1024).next_power_of_two(),
        recv_buffer: (4 * size).max(4 << 20) as u32,
        max_message: size as u64,
        send_mode: SendMode::Async,
    };
    let ch = session.open(
        if path == RatePath::Loan {
            "rate-loan"
        } else {
            "rate-copy"
        },
        opts,
    )?;
    let data = vec![0x5au8; size];
    let refs: Vec<&[u8]> = vec![&data; batch.min(count)];
    // The clock starts once the sink has the channel: the rate is the stream's, not the time
    // it takes the engine to accept a channel.
    ch.recv()?.context("sink ended before it was ready")?;
    let t0 = Instant::now();
    match path {
        RatePath::Copy => {
            let mut left = count;
            while left > 0 {
                let n = left.min(batch);
                ch.send_batch(&refs[..n])?;
                left -= n;
            }
        }
        RatePath::Loan => {
            for _ in 0..count {
                let mut loan = ch.loan(None)?;
                loan.set_len(size)?;
                ch.send_loan(loan)?;
            }
        }
    }
    ch.close()?;
    // The sink answers with the number it took once it saw the end of the stream.
    let got = ch.recv()?.context("sink ended without a count")?;
    let elapsed = t0.elapsed();
    let got = u64::from_le_bytes(got.as_slice().try_into().context("sink count")?);
    ensure!(got == count as u64, "sink took {got} messages of {count}");
    Ok(elapsed.as_nanos() as f64 / count as f64)
}

/// The sink engine: counts the messages of each channel and answers with the count.
fn sink(server: Server, loans: bool) -> Result<()> {
    let session = server.accept()?;
    while let Ok(ch) = session.accept() {
        ch.send(b"ready")?;
        let mut n = 0u64;
        if loans && ch.name() == "rate-loan" {
            while let Some(m) = ch.recv_message()? {
                ensure!(matches!(m, Message::Loan(_)), "expected loans");
                n += 1;
            }
        } else {
            // Every message is looked at in place (its first byte), none is copied.
            let mut check = 0u8;
            loop {
                let k = ch.recv_each(1024, |m| check ^= m.first().copied().unwrap_or(0))?;
                if k == 0 {
                    break;
                }
                n += k as u64;
            }
            std::hint::black_box(check);
        }
        ch.send(&n.to_le_bytes())?;
        ch.close()?;
    }
    Ok(())
}

fn print(rows: &[Row], json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(rows)?);
        return Ok(());
    }
    println!(
        "{:<9} {:<9} {:>8} {:<5} {:>10} {:>14} {:>12} {:>12}",
        "transport", "mode", "size", "path", "messages", "msgs/s", "ns/msg", "MB/s"
    );
    for r in rows {
        println!(
            "{:<9} {:<9} {:>8} {:<5} {:>10} {:>14.0} {:>12.1} {:>12.1}",
            r.transport,
            r.mode,
            r.size,
            r.path,
            r.iters,
            r.msgs_per_s,
            r.one_way_ns_median,
            r.mb_per_s
        );
    }
    Ok(())
}
