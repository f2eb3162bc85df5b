//! `offhost bench`: measurements of this machine and of offhost against its peers.

mod args;
mod link_target;
mod reproduce;
mod shm_target;
mod suite;
mod targets;

use clap::Subcommand;

pub use args::SuiteArgs;

/// The bench subcommands.
#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// Comms1 over the peers: one message bounces; one-way time = half the round trip.
    Pingpong(SuiteArgs),
    /// Comms2: both sides send at once; recorded time = a quarter of a two-step exchange.
    Exchange(SuiteArgs),
    /// A window of messages in flight, then an acknowledgement (like osu_bw).
    Stream(SuiteArgs),
    /// Short-message rate: a stream of small messages, in messages per second.
    Rate(SuiteArgs),
    /// Rerun the seed papers' experiments; write a report with their figures beside today's.
    Reproduce(reproduce::ReproduceArgs),
}

/// Runs a bench subcommand.
pub fn run(cmd: BenchCmd) -> anyhow::Result<()> {
    match cmd {
        BenchCmd::Pingpong(a) => suite::run("pingpong", &a),
        BenchCmd::Exchange(a) => suite::run("exchange", &a),
        BenchCmd::Stream(a) => suite::run("stream", &a),
        BenchCmd::Rate(a) => suite::run("rate", &a),
        BenchCmd::Reproduce(a) => reproduce::run(&a),
    }
}
