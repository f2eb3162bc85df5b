//! The `offhost` command line.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};

mod bench_engine;
mod bench_nbd;
mod engine_table;
mod nbd_cmd;
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
    /// Serve exports over NBD (the engine as a disk); `nbd report`, `nbd bench`.
    Nbd(nbd_cmd::NbdArgs),
    /// Run a pipeline (.ion file) on the embedded engine.
    Run(run_cmd::RunArgs),
    /// List the tasks a pipeline may use, with their arguments.
    Tasks(tasks_cmd::TasksArgs),
    /// Measure the engine: hop cost, 4-stage chain vs memcpy, the audio example.
    BenchEngine(bench_engine::BenchEngineArgs),
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
        Command::Nbd(a) => nbd_cmd::run(a),
        Command::Run(a) => run_cmd::run(a, &offhost_engine::Registry::with_builtins()),
        Command::Tasks(a) => tasks_cmd::run(a, &offhost_engine::Registry::with_builtins()),
        Command::BenchEngine(a) => bench_engine::run(a),
    }
}
