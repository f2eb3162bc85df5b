//! The `offhost` command line.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};

mod bench;
mod bench_engine;
mod bench_pet;
mod echo;
mod engine_cmd;
mod engine_table;
mod pet_cmd;
mod run_cmd;
mod tasks_cmd;

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
    /// Benchmarks: floors, pingpong, engine.
    Bench(bench::BenchArgs),
    /// The engine daemon: hosts submit pipelines and connect to their channels.
    Engine(engine_cmd::EngineArgs),
    /// Submit a pipeline to an engine daemon (or query or stop one).
    Submit(engine_cmd::SubmitArgs),
    /// Run a pipeline (.ion file) on the embedded engine.
    Run(run_cmd::RunArgs),
    /// List the tasks a pipeline may use, with their arguments.
    Tasks(tasks_cmd::TasksArgs),
    /// PET acquisition: simulate, inspect, histogram, reconstruct, run, bench.
    Pet(pet_cmd::PetArgs),
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
        Command::Engine(a) => engine_cmd::engine(a, offhost_pet::tasks::registry()),
        Command::Submit(a) => engine_cmd::submit(a),
        Command::Run(a) => run_cmd::run(a, &offhost_pet::tasks::registry()),
        Command::Tasks(a) => tasks_cmd::run(a, &offhost_pet::tasks::registry()),
        Command::Pet(a) => pet_cmd::run(a),
    }
}
