//! `offhost bench ...`: measurements, each printed as a table or, with `--json`, as JSON.

mod args;
mod channels;
mod floors;
mod interleave;
mod link_target;
mod overhead;
mod pingpong;
mod rate;
mod report;
mod reproduce;
mod shm_target;
mod suite;
mod targets;

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
    /// The CPU a channel round trip costs against the raw ring, one thread, no cross-core
    /// traffic (shared memory, in this process).
    Overhead(overhead::OverheadArgs),
    /// Comms2 over every transport and peer: both sides send at once; recorded time = a
    /// quarter of a two-step exchange.
    Exchange(args::SuiteArgs),
    /// A window of messages in flight, then an acknowledgement (like osu_bw).
    Stream(args::SuiteArgs),
    /// Rerun the seed papers' experiments; write a report with their figures beside today's.
    Reproduce(reproduce::ReproduceArgs),
    /// Message rate of a one-way stream through a channel (batched), copies or loans.
    Rate(rate::RateArgs),
    /// The engine: hop cost, 4-stage chain vs memcpy, the audio example.
    Engine(crate::bench_engine::BenchEngineArgs),
    /// The NBD server against nbdkit's memory plugin, same fio jobs.
    Nbd(crate::bench_nbd::BenchArgs),
    /// PET: histogramming on one core and the end-to-end demo pipeline.
    Pet(crate::bench_pet::BenchArgs),
}

/// Runs `offhost bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    match args.cmd {
        BenchCmd::Floors(a) => floors::run(a),
        BenchCmd::Pingpong(a) => pingpong::run(a),
        BenchCmd::Overhead(a) => overhead::run(a),
        BenchCmd::Exchange(a) => suite::run("exchange", &a),
        BenchCmd::Stream(a) => suite::run("stream", &a),
        BenchCmd::Reproduce(a) => reproduce::run(&a),
        BenchCmd::Rate(a) => rate::run(a),
        BenchCmd::Engine(a) => crate::bench_engine::run(a),
        BenchCmd::Nbd(a) => crate::bench_nbd::run(a),
        BenchCmd::Pet(a) => crate::bench_pet::run(a),
    }
}

/// A spinner on stderr that shows which phase runs.
pub(crate) fn spinner() -> indicatif::ProgressBar {
    let pb =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    pb.enable_steady_tick(std::time::Duration::from_millis(200));
    pb
}
