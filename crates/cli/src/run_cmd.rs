//! `offhost run FILE.ion`: runs a pipeline on the embedded engine.
//!
//! Host channels are bridged to files: `host-out name=N` is written to the path given with
//! `--out N=PATH` (`-` for standard output), or by default to the file `N.out` in the current
//! directory; `host-in name=N` reads `--in N=PATH` (`-` for standard input, the default when
//! the pipeline has exactly one host-in).

use std::collections::HashMap;
use std::fs::File;
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use indicatif::{ProgressBar, ProgressStyle};
use offhost_engine::{EngineConfig, Pipeline, Registry, RunError, Stats};

use crate::engine_table::{human_bytes, render};

/// Arguments of `offhost run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Pipeline description (.ion file).
    pub file: PathBuf,
    /// Worker threads (default: the number of cores, at most 4).
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
    /// Stop the sources after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// No progress display.
    #[arg(long, short)]
    pub quiet: bool,
    /// The pipeline's budget.
    #[command(flatten)]
    pub budget: crate::limit_args::BudgetArgs,
}

/// The `--out`/`--in` bindings NAME=PATH of `list`, each naming one of the pipeline's host
/// channels `names`.
pub fn parse_bindings(
    list: &[String],
    what: &str,
    names: &[String],
) -> anyhow::Result<HashMap<String, String>> {
    let mut m = HashMap::new();
    for b in list {
        let (n, p) = b
            .split_once('=')
            .ok_or_else(|| anyhow!("--{what} {b}: expected NAME=PATH"))?;
        if !names.iter().any(|x| x == n) {
            bail!(
                "--{what} {b}: the pipeline has no host-{what} channel '{n}' (it has: {})",
                if names.is_empty() {
                    "none".into()
                } else {
                    names.join(", ")
                }
            );
        }
        m.insert(n.to_string(), p.to_string());
    }
    Ok(m)
}

fn progress(stats: &Stats) -> String {
    let src: u64 = stats
        .tasks
        .iter()
        .filter(|t| t.buffers_in == 0)
        .map(|t| t.bytes_out)
        .sum();
    let busy: u64 = stats.tasks.iter().map(|t| t.busy_ns).sum();
    let done = stats.tasks.iter().filter(|t| t.done).count();
    format!(
        "sources {} | tasks done {}/{} | busy {:.2} s",
        human_bytes(src),
        done,
        stats.tasks.len(),
        busy as f64 / 1e9
    )
}

/// Runs `args.file` with the tasks of `registry`.
pub fn run(args: RunArgs, registry: &Registry) -> anyhow::Result<()> {
    let path = args.file.display().to_string();
    let text = std::fs::read_to_string(&args.file).with_context(|| format!("read {path}"))?;
    let pipeline = Pipeline::parse(&text).map_err(|e| anyhow!("{path}: {e}"))?;
    let built = pipeline
        .build_within(
            registry,
            &offhost_engine::Files::Ambient,
            &args.budget.budget(),
        )
        .map_err(|e| anyhow!("{path}: {e}"))?;

    let out_names = built.host_outputs();
    let in_names = built.host_inputs();
    let mut outs = parse_bindings(&args.outs, "out", &out_names)?;
    let mut ins = parse_bindings(&args.ins, "in", &in_names)?;
    for n in &out_names {
        outs.entry(n.clone()).or_insert_with(|| format!("{n}.out"));
    }
    for n in &in_names {
        if !ins.contains_key(n) {
            if in_names.len() == 1 {
                ins.insert(n.clone(), "-".into());
            } else {
                bail!("host-in channel '{n}' has no source: pass --in {n}=PATH ('-' for standard input)");
            }
        }
    }
    let stdout_data = outs.values().filter(|p| *p == "-").count();
    if stdout_data > 1 || (stdout_data == 1 && args.json) {
        bail!("standard output can carry one host-out channel and no JSON; give the others a file with --out NAME=PATH");
    }

    let config = EngineConfig {
        workers: args
            .workers
            .unwrap_or(EngineConfig::default().workers)
            .max(1),
        pin: args.pin,
        batch: args.batch.max(1),
    };
    // Open the files before starting so a bad path fails early.
    let mut writers: Vec<(String, String, Box<dyn Write + Send>)> = Vec::new();
    for (n, p) in &outs {
        let w: Box<dyn Write + Send> = if p == "-" {
            Box::new(std::io::stdout())
        } else {
            Box::new(File::create(p).with_context(|| format!("create {p} for host-out '{n}'"))?)
        };
        writers.push((n.clone(), p.clone(), w));
    }
    let mut readers: Vec<(String, String, Box<dyn Read + Send>)> = Vec::new();
    for (n, p) in &ins {
        let r: Box<dyn Read + Send> = if p == "-" {
            Box::new(std::io::stdin())
        } else {
            Box::new(File::open(p).with_context(|| format!("open {p} for host-in '{n}'"))?)
        };
        readers.push((n.clone(), p.clone(), r));
    }

    let mut running = built
        .try_start(&config)
        .map_err(|e| anyhow!("{path}: {e}"))?;
    let stopper = running.stopper();
    let _ = ctrlc::set_handler(move || stopper.stop());

    let mut bridges: Vec<JoinHandle<anyhow::Result<()>>> = Vec::new();
    for (n, p, mut w) in writers {
        let out = running
            .host_output(&n)
            .expect("channel listed by the pipeline");
        bridges.push(std::thread::spawn(move || {
            while let Some(b) = out.recv() {
                w.write_all(&b).with_context(|| format!("write {p}"))?;
            }
            w.flush().with_context(|| format!("write {p}"))?;
            Ok(())
        }));
    }
    for (n, p, mut r) in readers {
        let input = running
            .host_input(&n)
            .expect("channel listed by the pipeline");
        // Not joined: a read from a terminal may never return once the pipeline has ended.
        std::thread::spawn(move || -> anyhow::Result<()> {
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let k = r.read(&mut buf).with_context(|| format!("read {p}"))?;
                if k == 0 || input.send(&buf[..k]).is_err() {
                    return Ok(());
                }
            }
        });
    }

    let bar = if args.quiet || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        ProgressBar::new_spinner()
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}").expect("valid template"),
    );
    let start = Instant::now();
    let mut stopped = false;
    while !running.wait_timeout(Duration::from_millis(100)) {
        bar.set_message(progress(&running.stats()));
        bar.tick();
        if let Some(d) = args.duration {
            if !stopped && start.elapsed().as_secs_f64() >= d {
                running.stop();
                stopped = true;
            }
        }
    }
    bar.finish_and_clear();
    // The host-out channels end with their tasks; once written, their buffers are back.
    let mut bridge_err = None;
    for b in bridges {
        if let Err(e) = b
            .join()
            .map_err(|_| anyhow!("a host channel thread panicked"))
            .and_then(|r| r)
        {
            bridge_err.get_or_insert(e);
        }
    }
    let result = running.wait();
    if let Some(e) = bridge_err {
        return Err(e);
    }
    let (stats, failure) = match result {
        Ok(s) => (s, None),
        Err(RunError::TaskFailed {
            task,
            line,
            message,
            stats,
        }) => (
            *stats,
            Some(format!(
                "{path}: task '{task}' (line {line}) failed: {message}"
            )),
        ),
        Err(e) => return Err(e.into()),
    };
    // Write errors (a closed pipe, say) end the command with an error, not a panic.
    if args.json {
        writeln!(
            std::io::stdout(),
            "{}",
            serde_json::to_string_pretty(&stats)?
        )?;
    } else if stdout_data == 1 {
        write!(std::io::stderr(), "{}", render(&stats))?;
    } else {
        let mut o = std::io::stdout().lock();
        write!(o, "{}", render(&stats))?;
        for (n, p) in &outs {
            writeln!(o, "host-out '{n}' -> {p}")?;
        }
    }
    match failure {
        Some(f) => Err(anyhow!(f)),
        None => Ok(()),
    }
}
