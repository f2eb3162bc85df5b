//! `offhost bench ...`: measurements, each printed as a table or, with `--json`, as JSON.

mod floors;
mod pingpong;
mod report;

use anyhow::Result;
use clap::Subcommand;

/// Arguments of `offhost bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    cmd: BenchCmd,
}

#[derive(Subcommand, Debug)]
enum BenchCmd {
    /// The machine's floors: cache-line and futex ping-pong one way, memcpy bandwidth.
    Floors(floors::FloorsArgs),
    /// One-way latency and throughput against the echo engine, per record size.
    Pingpong(pingpong::PingpongArgs),
    /// The engine: hop cost, 4-stage chain vs memcpy, the audio example.
    Engine(crate::bench_engine::BenchEngineArgs),
    /// The NBD server against nbdkit's memory plugin, same fio jobs (also `offhost nbd bench`).
    Nbd(crate::bench_nbd::BenchArgs),
}

/// Runs `offhost bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    match args.cmd {
        BenchCmd::Floors(a) => floors::run(a),
        BenchCmd::Pingpong(a) => pingpong::run(a),
        BenchCmd::Engine(a) => crate::bench_engine::run(a),
        BenchCmd::Nbd(a) => crate::bench_nbd::run(a),
    }
}

/// A spinner on stderr that shows which phase runs.
pub(crate) fn spinner() -> indicatif::ProgressBar {
    let pb =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    pb.enable_steady_tick(std::time::Duration::from_millis(200));
    pb
}
