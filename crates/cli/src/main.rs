//! The `offhost` command line.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};

mod bench;

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
    /// Measure transports, modes and peers; rerun the seed papers' experiments.
    #[command(subcommand)]
    Bench(bench::BenchCmd),
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
        Command::Bench(cmd) => bench::run(cmd),
    }
}
