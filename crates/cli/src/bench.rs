//! `offhost bench ...`: flags in, figures out. The experiments live in `offhost-bench-suite`
//! (and the measurement kit in `offhost-bench`); this module fills their options from the
//! flags and prints what they return, as a table or, with `--json`, as JSON.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};
use indicatif::ProgressBar;
use offhost_bench::report::{self, Output, Row};
use offhost_bench::transport::Transport;
use offhost_bench::{floors, plot, sizes};
use offhost_bench_suite::{audio_peers, engine, engines, hostile, mux, nbd, offload, overhead};
use offhost_bench_suite::{
    overlap, pet, pet_live, pingpong, rate, reproduce, rpc, suite, view, wasm,
};
use offhost_shm::Mode;

/// Arguments of `offhost bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    cmd: BenchCmd,
}

#[derive(Subcommand, Debug)]
enum BenchCmd {
    /// The machine's floors: cache-line and futex ping-pong one way, memcpy bandwidth.
    Floors(FloorsArgs),
    /// One-way latency and throughput against an echo, per transport and message size.
    Pingpong(PingpongArgs),
    /// The CPU a channel round trip costs against the raw ring, one thread, no cross-core
    /// traffic (shared memory, in this process).
    Overhead(Json<overhead::Options>),
    /// Comms2 over every transport: both sides send at once; recorded time = a quarter of a
    /// two-step exchange.
    Exchange(SuiteArgs),
    /// A window of messages in flight, then an acknowledgement (like osu_bw).
    Stream(SuiteArgs),
    /// Rerun the seed papers' experiments; write a report with their figures beside today's.
    Reproduce(reproduce::Options),
    /// Message rate of a one-way stream through a channel (batched), copies or loans.
    Rate(RateArgs),
    /// The engine: hop cost, 4-stage chain vs memcpy, the audio example (--wasm: modules).
    Engine(EngineArgs),
    /// Engines joined: a queue between two engines against a raw TLS socket, a null call on
    /// a TLS channel against a TCP round trip.
    Engines(Json<engines::Options>),
    /// The NBD server against nbdkit's memory plugin, same fio jobs (with --tls, over TLS too).
    Nbd(NbdArgs),
    /// `[DS-link]` Figures 1 and 5: N channels on one link against a link per channel; short
    /// messages per second over many channels.
    Mux(MuxArgs),
    /// PET: histogramming on one core and the end-to-end demo pipeline.
    Pet(Json<pet::Options>),
    /// PET live: a recorded scan replayed over 1 and 2 engines at the highest rate they
    /// sustain, against the offline rate; host CPU, image period and age.
    PetLive(Json<pet_live::Options>),
    /// A certified client's connect time on the link and NBD while a crowd of silent or
    /// trickling connections is held open; an established session's throughput beside it.
    Hostile(Json<hostile::Options>),
    /// `[Off-host]`: a host's CPU and wake-ups per message, throughput and latency, in-host (the
    /// host runs the TLS link) against off-host (its local engine does); or a rate-limited
    /// channel; or an urgent channel under bulk load.
    Offload(OffloadArgs),
    /// (Internal) the measuring host of `bench offload`, in its own process.
    #[command(hide = true)]
    OffloadHost(SpecArgs),
    /// (Internal) the echoing and sinking peer host of `bench offload`.
    #[command(hide = true)]
    OffloadPeer(SpecArgs),
}

#[derive(Args, Debug)]
struct OffloadArgs {
    #[command(flatten)]
    o: offload::Options,
    /// table (the default), rate or priority.
    #[arg(long, default_value = "table")]
    experiment: String,
    /// rate: bytes per second of the limited channel.
    #[arg(long, default_value = "20000000", value_parser = offhost_units::parse_size)]
    rate: u64,
    /// rate: burst in bytes.
    #[arg(long, default_value = "64K", value_parser = offhost_units::parse_size)]
    burst: u64,
    /// rate: seconds streamed.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Print JSON (table: an array of rows, one per mode and size).
    #[arg(long)]
    json: bool,
    /// Write SVG plots (throughput, latency, host CPU, wake-ups) into this folder.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct SpecArgs {
    /// The spec, as JSON.
    #[arg(long)]
    spec: String,
}

/// How rows are printed.
#[derive(Args, Debug)]
struct PrintArgs {
    /// Fit t(n) = t0 + n / r_inf per transport and mode (t0, r_inf, n_1/2).
    #[arg(long)]
    fit: bool,
    /// Print JSON (an array of rows; with --fit, an object with `rows` and `fit`).
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV instead of the aligned table.
    #[arg(long)]
    csv: bool,
    /// Write throughput and latency plots (SVG) into this folder.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct FloorsArgs {
    /// Timed cache-line round trips (the futex ping-pong does a tenth as many).
    #[arg(long, default_value_t = 100_000)]
    samples: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct PingpongArgs {
    #[command(flatten)]
    o: pingpong::Options,
    #[command(flatten)]
    print: PrintArgs,
}

#[derive(Args, Debug)]
struct SuiteArgs {
    /// Transports, comma-separated (default: all): shm, shm-chan, tcp, tls, unix, mem,
    /// tcp-raw, tls-raw, unix-raw, pipe-raw, crossbeam. Old name: shm-link for shm-chan.
    #[arg(long, value_delimiter = ',')]
    transport: Vec<Transport>,
    /// Doorbell modes of the raw ring (poll, block, adaptive; default: all three).
    #[arg(long, value_delimiter = ',')]
    mode: Vec<Mode>,
    /// Message sizes: a list `8,64,4096` and/or ranges of powers of two `4..1M`.
    #[arg(long, default_value = "4..1M")]
    sizes: String,
    /// Repetition preset: small, quick, normal or long.
    #[arg(long, default_value = "normal")]
    reps: String,
    /// Messages in flight per acknowledgement (`stream`: 64; 256 with sizes 8,64 measures the
    /// short-message rate).
    #[arg(long)]
    window: Option<usize>,
    /// Also measure CPU load with counting tasks on the host and engine cores.
    #[arg(long)]
    cpu: bool,
    #[command(flatten)]
    print: PrintArgs,
}

#[derive(Args, Debug)]
struct EngineArgs {
    #[command(flatten)]
    o: engine::Options,
    /// `[ION]`'s Table 1 instead: task switch, event synchronisation, null calls.
    #[arg(long)]
    rpc: bool,
    #[command(flatten)]
    r: rpc::Options,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// A measurement's options and `--json`.
#[derive(Args, Debug)]
struct Json<O: Args + clap::FromArgMatches> {
    #[command(flatten)]
    o: O,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct MuxArgs {
    #[command(flatten)]
    o: mux::Options,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Write the two figures (SVG) into this folder.
    #[arg(long)]
    plot: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct NbdArgs {
    #[command(flatten)]
    o: nbd::Options,
    /// Print one JSON object per server and workload (a JSON array).
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct RateArgs {
    #[command(flatten)]
    o: rate::Options,
    /// Print a JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

/// What a bench prints: the text for stdout, and notes for stderr.
type Printed = (String, Vec<String>);

/// `v` as pretty JSON with `json`, else as `text` draws it.
fn show<T: serde::Serialize>(json: bool, v: &T, text: impl FnOnce(&T) -> String) -> Result<String> {
    Ok(match json {
        true => serde_json::to_string_pretty(v)? + "\n",
        false => text(v),
    })
}

/// `rows` as `p` asks (drawn by `table` as text), with the plots it asks for.
fn rows(rows: &[Row], p: &PrintArgs, table: fn(&[Row]) -> String) -> Result<Printed> {
    let out = Output {
        json: p.json,
        csv: p.csv,
        fit: p.fit,
    };
    let mut notes = Vec::new();
    if let Some(dir) = &p.plot {
        let files =
            plot::plot_rows(dir, rows).with_context(|| format!("--plot {}", dir.display()))?;
        notes.extend(files.iter().map(|f| format!("wrote {}", f.display())));
    }
    Ok((report::render(rows, out, table), notes))
}

/// Runs `offhost bench`: measures with a progress bar, then prints.
pub fn run(args: BenchArgs) -> Result<()> {
    let bar = offhost_bench_suite::progress_bar();
    let done = measure(args, &bar);
    bar.finish_and_clear();
    let (text, notes) = done?;
    for n in notes {
        eprintln!("{n}");
    }
    print!("{text}");
    Ok(())
}

fn measure(args: BenchArgs, bar: &ProgressBar) -> Result<Printed> {
    let exe = std::env::current_exe;
    Ok(match args.cmd {
        BenchCmd::Floors(a) => {
            let n = a.samples.max(10);
            let plan = floors::Plan {
                warmup: n / 10,
                samples: n,
            };
            let f = floors::measure(plan, &mut |p| bar.set_message(format!("floors: {p}")));
            (show(a.json, &f, floors::Floors::table)?, vec![])
        }
        BenchCmd::Pingpong(a) => {
            let o = pingpong::Options { exe: exe()?, ..a.o };
            let out = pingpong::run(&o, bar)?;
            let (text, mut notes) = rows(&out.rows, &a.print, report::latency_table)?;
            notes.extend(out.notes);
            (text, notes)
        }
        BenchCmd::Overhead(a) => {
            let r = overhead::run(&a.o, bar)?;
            (show(a.json, &r, |r| overhead::table(r))?, vec![])
        }
        BenchCmd::Exchange(a) => suite_cmd("exchange", a, bar)?,
        BenchCmd::Stream(a) => suite_cmd("stream", a, bar)?,
        BenchCmd::Reproduce(a) => {
            let o = reproduce::Options {
                exe: Some(exe()?),
                ..a
            };
            let r = reproduce::run(&o, bar)?;
            let (path, secs) = (r.path.display(), r.elapsed.as_secs_f64());
            let mut said = vec![format!("wrote {path} ({secs:.0} s)")];
            said.extend(r.not_run.iter().map(|s| format!("not run here: {s}")));
            (String::new(), said)
        }
        BenchCmd::Rate(mut a) => {
            let note = a.o.shm_as_channels();
            let r = rate::run(&a.o, bar)?;
            let out = Output {
                json: a.json,
                ..Output::default()
            };
            let text = report::render(&r, out, report::rate_table);
            (text, note.into_iter().collect())
        }
        BenchCmd::Engine(a) if a.rpc => {
            let o = rpc::Options {
                exe: Some(exe()?),
                ..a.r
            };
            (
                show(a.json, &rpc::run(&o, bar)?, rpc::Report::text)?,
                vec![],
            )
        }
        BenchCmd::Engine(a) if a.o.view => {
            let r = view::run(&a.o, bar)?;
            (show(a.json, &r, view::Report::table)?, vec![])
        }
        BenchCmd::Engine(a) if a.o.peers => {
            let r = audio_peers::run(&a.o.peers_plan(exe()?), bar)?;
            (show(a.json, &r, audio_peers::Report::table)?, vec![])
        }
        BenchCmd::Engine(a) if a.o.overlap => {
            let r = overlap::run(&a.o.overlap_plan(), bar)?;
            (show(a.json, &r, overlap::Report::table)?, vec![])
        }
        BenchCmd::Engine(a) if a.o.wasm => {
            (show(a.json, &wasm::run(&a.o, bar)?, wasm::table)?, vec![])
        }
        BenchCmd::Engine(a) => {
            let r = engine::run(&a.o, bar)?;
            (show(a.json, &r, engine::Report::table)?, vec![])
        }
        BenchCmd::Engines(a) => {
            let r = engines::run(&engines::Options { exe: exe()?, ..a.o }, bar)?;
            (show(a.json, &r, engines::Report::text)?, vec![])
        }
        BenchCmd::Nbd(a) => {
            let o = nbd::Options { exe: exe()?, ..a.o };
            let r = nbd::run(&o, bar)?;
            (show(a.json, &r, |r| nbd::table(r))?, vec![])
        }
        BenchCmd::Mux(a) => {
            let r = mux::run(&a.o, bar)?;
            let files = match &a.plot {
                Some(d) => mux::plot(&r, d).with_context(|| format!("--plot {}", d.display()))?,
                None => vec![],
            };
            let notes = files.iter().map(|f| format!("wrote {}", f.display()));
            (show(a.json, &r, mux::Report::text)?, notes.collect())
        }
        BenchCmd::Pet(a) => {
            let r = pet::run(&a.o, bar)?;
            (show(a.json, &r, pet::Report::text)?, r.notes.clone())
        }
        BenchCmd::PetLive(a) => {
            let r = pet_live::run(&pet_live::Options { exe: exe()?, ..a.o }, bar)?;
            (show(a.json, &r, pet_live::Report::table)?, vec![])
        }
        BenchCmd::Hostile(a) => {
            let r = hostile::run(&a.o, bar)?;
            (show(a.json, &r, hostile::Report::table)?, vec![])
        }
        BenchCmd::Offload(a) => offload_cmd(a, bar, exe()?)?,
        BenchCmd::OffloadHost(a) => {
            let spec: offload::host::HostSpec = serde_json::from_str(&a.spec).context("--spec")?;
            let r = offload::host::host_main(&spec)?;
            (serde_json::to_string(&r)? + "\n", vec![])
        }
        BenchCmd::OffloadPeer(a) => {
            let spec: offload::host::PeerSpec = serde_json::from_str(&a.spec).context("--spec")?;
            offload::host::peer_main(&spec)?;
            (String::new(), vec![])
        }
    })
}

fn offload_cmd(a: OffloadArgs, bar: &ProgressBar, exe: PathBuf) -> Result<Printed> {
    let experiment = offload::Experiment::from_flags(
        &a.experiment,
        a.rate,
        a.burst,
        a.seconds,
        a.o.round_trips,
    )?;
    let o = offload::Options {
        exe,
        experiment,
        ..a.o
    };
    Ok(offload::report(&o, a.json, a.plot.as_deref(), bar)?)
}

fn suite_cmd(bench: &str, a: SuiteArgs, bar: &ProgressBar) -> Result<Printed> {
    let sizes = sizes::parse_sizes(&a.sizes).with_context(|| format!("--sizes {:?}", a.sizes))?;
    let o = suite::Options {
        bench: bench.into(),
        transports: a.transport,
        modes: a.mode,
        sizes,
        plan: suite::plan(&a.reps, a.cpu)?,
        window: a.window,
    };
    rows(&suite::run(&o, bar)?, &a.print, report::to_table)
}
