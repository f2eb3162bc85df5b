//! The `offhost` command line.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use offhost_units::explain;

/// The allocator of every offhost process: mimalloc, whose per-thread free lists take a
/// buffer freed by another thread (a message allocated by a link's receiving thread and freed
/// by the thread that hands it to a host) without the lock and heap trimming of the system
/// allocator's arenas.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod access_args;
mod bench;
mod certs_cmd;
mod channel_cmds;
mod echo;
mod engine_cmd;
mod limit_args;
mod nbd_cmd;
mod offload_cmds;
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
    /// Echo engine: reflect every record back (the paper's nrate).
    Echo(echo::EchoArgs),
    /// Benchmarks: floors, pingpong, overhead, exchange, stream, rate, reproduce, engine,
    /// engines, nbd, mux, pet, hostile, offload.
    Bench(bench::BenchArgs),
    /// The engine daemon: hosts submit pipelines and connect to their channels.
    Engine(Box<engine_cmd::EngineArgs>),
    /// Submit a pipeline to an engine daemon (or query or stop one).
    Submit(engine_cmd::SubmitArgs),
    /// Serve exports over NBD (the engine as a disk); `nbd report` for traces.
    Nbd(nbd_cmd::NbdArgs),
    /// Run a pipeline (.ion file) on the embedded engine.
    Run(run_cmd::RunArgs),
    /// List the tasks a pipeline may use, with their arguments.
    Tasks(tasks_cmd::TasksArgs),
    /// Send stdin to an engine's channel (like writing /dev/tlw0).
    Send(channel_cmds::SendArgs),
    /// Write an engine's channel to stdout (like reading /dev/tlr0).
    Recv(channel_cmds::RecvArgs),
    /// Stdin through an engine's channel to stdout, both ways at once.
    Cat(channel_cmds::CatArgs),
    /// PET acquisition: simulate, inspect, histogram, reconstruct.
    Pet(pet_cmd::PetArgs),
    /// Create a CA and server and client certificates for TLS (nbdkit's directory layout).
    Certs(certs_cmd::CertsArgs),
}

/// The tasks every pipeline may use: the engine's built-ins and the PET tasks; `engine-out`
/// reaches any engine (the user's own pipelines; `offhost engine` narrows it).
fn registry() -> offhost_engine::Registry {
    let mut r = offhost_pet::tasks::registry();
    #[cfg(feature = "wasm")]
    offhost_wasm::register(&mut r);
    offhost_node::remote::register(
        &mut r,
        offhost_node::remote::Links::own(offhost_link::LinkOptions::default()),
    );
    r
}

/// Runs the command; an error is printed as one line, with its causes after it (each said once;
/// past a limit this command has a flag for, the flag), and exits with status 1. Not as
/// `main`'s `Result`, which prints a stack backtrace with every error once `RUST_BACKTRACE` is
/// set, as it often is on a Rust developer's machine.
fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    // Commands whose output goes to pipes (`offhost tasks | head`) end quietly when the reader
    // leaves, as Unix tools do; servers, benches and pipelines keep EPIPE as an error.
    use Command::{Cat, Pet, Recv, Submit, Tasks, Version};
    if matches!(
        &cli.command,
        Version | Tasks(_) | Pet(_) | Submit(_) | Recv(_) | Cat(_)
    ) {
        sigpipe::reset();
    }
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // A limit gone over is raised, and a refusal allowed, with the command's flag,
            // where the command has one.
            let cmd = std::env::args().nth(1).unwrap_or_default();
            eprintln!("Error: {}", explain(e.as_ref(), |r| r.command_line(&cmd)));
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Version => {
            println!("offhost {}", env!("CARGO_PKG_VERSION"));
            let wasm = if cfg!(feature = "wasm") { " wasm" } else { "" };
            println!("layers: units shm proto access link engine node nbd pet view bench{wasm}");
            Ok(())
        }
        Command::Echo(args) => echo::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Engine(a) => engine_cmd::engine(*a, registry()),
        Command::Submit(a) => engine_cmd::submit(a, &registry()),
        Command::Nbd(a) => nbd_cmd::run(a),
        Command::Run(a) => run_cmd::run(a, &registry()),
        Command::Tasks(a) => tasks_cmd::run(a, &registry()),
        Command::Send(args) => channel_cmds::send(args),
        Command::Recv(args) => channel_cmds::recv(args),
        Command::Cat(args) => channel_cmds::cat(args),
        Command::Pet(a) => pet_cmd::run(a, &registry()),
        Command::Certs(a) => certs_cmd::run(a),
    }
}

#[cfg(test)]
mod tests {
    /// Clap's own checks of every command's arguments (unique names, valid defaults), which
    /// otherwise run only when that command is parsed: a flag added to a shared group once
    /// clashed with one of `offhost engine`'s, and every engine panicked at start.
    #[test]
    fn every_command_line_is_well_formed() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
