//! The `offhost` command line.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};

mod bench;
mod channel_cmds;
mod echo;

/// offhost: attach processing engines to applications.
#[derive(Parser, Debug)]
#[command(name = "offhost", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the version and the layers this build contains.
    Version,
    /// Echo engine: reflect every record back (the seed's nrate).
    Echo(echo::EchoArgs),
    /// Benchmarks: floors, pingpong.
    Bench(bench::BenchArgs),
    /// Send stdin to an engine's channel (like writing /dev/tlw0).
    Send(channel_cmds::SendArgs),
    /// Write an engine's channel to stdout (like reading /dev/tlr0).
    Recv(channel_cmds::RecvArgs),
    /// Stdin through an engine's channel to stdout, both ways at once.
    Cat(channel_cmds::CatArgs),
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            println!("offhost {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        Command::Echo(args) => echo::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Send(args) => channel_cmds::send(args),
        Command::Recv(args) => channel_cmds::recv(args),
        Command::Cat(args) => channel_cmds::cat(args),
    }
}
