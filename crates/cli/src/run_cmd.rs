//! `offhost run FILE.ion`: runs a pipeline on the embedded engine.
//!
//! Host channels are bridged to files: `host-out name=N` is written to the path given with
//! `--out N=PATH` (`-` for standard output), or by default to the file `N.out` in the current
//! directory; `host-in name=N` reads `--in N=PATH` (`-` for standard input, the default when
//! the pipeline has exactly one host-in).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use indicatif::{ProgressBar, ProgressStyle};
use offhost_engine::watch::One;
use offhost_engine::{EngineConfig, Registry};
use offhost_node::jobs::local::{self, LocalJob};
use offhost_node::jobs::table::progress_line;

/// Arguments of `offhost run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Pipeline description (.ion file).
    pub file: PathBuf,
    /// Worker threads (default: the number of cores, at most 4; never more than the
    /// pipeline's tasks of normal or background class).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Pin worker threads to cores.
    #[arg(long)]
    pub pin: bool,
    /// Most buffers a task handles per turn.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Print the final statistics as JSON on standard output.
    #[arg(long)]
    pub json: bool,
    /// Destination of a host-out channel, NAME=PATH ('-' for standard output).
    #[arg(long = "out", value_name = "NAME=PATH")]
    pub outs: Vec<String>,
    /// Source of a host-in channel, NAME=PATH ('-' for standard input).
    #[arg(long = "in", value_name = "NAME=PATH")]
    pub ins: Vec<String>,
    /// Stop the sources after this long: seconds (`10`, `0.5`) or with a unit (`500ms`).
    #[arg(long, value_parser = offhost_units::parse_seconds)]
    pub duration: Option<Duration>,
    /// No progress display.
    #[arg(long, short)]
    pub quiet: bool,
    /// A live view, the graph as dot.
    #[command(flatten)]
    pub view: offhost_view::RunViewArgs,
    /// The pipeline's budget.
    #[command(flatten)]
    pub budget: crate::limit_args::BudgetArgs,
}

/// Runs `args.file` with the tasks of `registry`.
pub fn run(args: RunArgs, registry: &Registry) -> anyhow::Result<()> {
    let path = args.file.display().to_string();
    let text = std::fs::read_to_string(&args.file).with_context(|| format!("read {path}"))?;
    let one = Arc::new(One::default());
    let view = offhost_view::View::start_said(args.view.config(), one.clone())?;
    let workers = args.workers.unwrap_or(EngineConfig::default().workers);
    let job = LocalJob {
        path: &path,
        text: &text,
        config: EngineConfig {
            workers: workers.max(1),
            pin: args.pin,
            batch: args.batch.max(1),
        },
        budget: args.budget.budget(),
        outs: &args.outs,
        ins: &args.ins,
        duration: args.duration,
        json: args.json,
        watch: view.as_ref().map(|_| one.clone()),
        streams: None,
    };
    let bar = match args.quiet || !std::io::stderr().is_terminal() {
        true => ProgressBar::hidden(),
        false => ProgressBar::new_spinner(),
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}").expect("valid template"),
    );
    bar.enable_steady_tick(Duration::from_millis(100));
    let done = local::run(
        &job,
        registry,
        // Ctrl-C stops the sources; once the pipeline has ended (its view lingering), it exits.
        |s| {
            drop(ctrlc::set_handler(move || match s.is_finished() {
                true => std::process::exit(130),
                false => s.stop(),
            }))
        },
        |stats| bar.set_message(progress_line(stats)),
    );
    bar.finish_and_clear();
    let done = done?;
    (args.view.write_dot(&done.shape, &done.stats)).context("--dot")?;
    // Write errors (a closed pipe, say) end the command with an error, not a panic.
    let (out, err) = done.printed(args.json);
    write!(std::io::stderr(), "{err}")?;
    write!(std::io::stdout(), "{out}")?;
    args.view.access.linger.wait(view.as_ref());
    done.failure.map_or(Ok(()), |f| Err(anyhow!(f)))
}
