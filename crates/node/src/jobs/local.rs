//! A pipeline file run in this process (`offhost run`), its host channels bridged to files.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::streams::{create_out, open_in, take_routed};
use super::{bindings, join, pump_in, pump_out, Bindings, JobError};
use offhost_engine::watch::{Look, One, Phase};
use offhost_engine::{
    Budget, EngineConfig, Files, Pipeline, Registry, RunError, Shape, Stats, Stopper,
};

/// What to run, and how.
#[derive(Debug, Clone)]
pub struct LocalJob<'a> {
    /// The file's name, for messages.
    pub path: &'a str,
    /// Its text.
    pub text: &'a str,
    /// Workers, pinning, batch.
    pub config: EngineConfig,
    /// The pipeline's budget.
    pub budget: Budget,
    /// `--out NAME=PATH` bindings.
    pub outs: &'a [String],
    /// `--in NAME=PATH` bindings.
    pub ins: &'a [String],
    /// Stop the sources after this long.
    pub duration: Option<Duration>,
    /// Standard output carries JSON statistics (so no host-out channel may go there).
    pub json: bool,
    /// Where to put looks at the pipeline for a live view, if one watches.
    pub watch: Option<Arc<One>>,
    /// Host channels served by the caller's own readers and writers.
    pub streams: Option<&'a super::Streams>,
}

/// How it went.
#[derive(Debug)]
pub struct LocalOutcome {
    /// Final statistics.
    pub stats: Stats,
    /// Where the host channels went.
    pub bindings: Bindings,
    /// The failure of a task (`path: task 'T' (line L) failed: ...`), if one failed.
    pub failure: Option<String>,
    /// The pipeline's tasks, queues and free lists.
    pub shape: Arc<Shape>,
}

impl LocalOutcome {
    /// What `offhost run` prints, (standard output, standard error): the statistics as JSON
    /// with `json`; else their table and where each host-out went, on standard error when a
    /// host-out channel has standard output.
    pub fn printed(&self, json: bool) -> (String, String) {
        if json {
            let stats = serde_json::to_string_pretty(&self.stats).unwrap_or_default();
            return (format!("{stats}\n"), String::new());
        }
        let table = super::table::render(&self.stats);
        if self.bindings.stdout_outputs() == 1 {
            return (String::new(), table);
        }
        let outs: String = (self.bindings.outputs.iter())
            .map(|(n, p)| format!("host-out '{n}' -> {p}\n"))
            .collect();
        (table + &outs, String::new())
    }
}

/// Runs `job` with the tasks of `registry` and the user's own file access; `on_start` gets a
/// handle that stops the sources (for Ctrl-C), `progress` is called about ten times a second.
pub fn run(
    job: &LocalJob<'_>,
    registry: &Registry,
    on_start: impl FnOnce(Stopper),
    mut progress: impl FnMut(&Stats),
) -> Result<LocalOutcome, JobError> {
    let path = job.path.to_owned();
    let bad = |source| JobError::Pipeline {
        path: path.clone(),
        source,
    };
    let built = Pipeline::parse(job.text)
        .map_err(bad)?
        .build_within(registry, &Files::Ambient, &job.budget)
        .map_err(bad)?;
    let b = bindings(
        job.outs,
        job.ins,
        &built.host_outputs(),
        &built.host_inputs(),
    )?;
    let stdout = b.stdout_outputs();
    if stdout > 1 || (stdout == 1 && job.json) {
        return Err(JobError::Binding("standard output can carry one host-out channel and no JSON; give the others a file with --out NAME=PATH".into()));
    }
    if let Some((n, _)) = (b.inputs.iter()).find(|(n, _)| take_routed(job.streams, n).is_some()) {
        return Err(JobError::Binding(format!(
            "host-in {n} is to be fed some other way, which only a placed job's parts can be"
        )));
    }
    // Open the files before starting so a bad path fails early.
    let writers: Vec<_> = b
        .outputs
        .iter()
        .map(|(n, p)| Ok((n.clone(), p.clone(), create_out(job.streams, n, p)?)))
        .collect::<Result<_, JobError>>()?;
    let readers: Vec<_> = b
        .inputs
        .iter()
        .map(|(n, p)| Ok((n.clone(), p.clone(), open_in(job.streams, n, p)?)))
        .collect::<Result<_, JobError>>()?;
    let mut running = built.try_start(&job.config).map_err(bad)?;
    on_start(running.stopper());
    let mut bridges = Vec::new();
    for (n, p, w) in writers {
        let out = running
            .host_output(&n)
            .expect("channel listed by the pipeline");
        bridges.push(pump_out(p, w, move || Ok(out.recv())));
    }
    for (n, p, r) in readers {
        let input = running
            .host_input(&n)
            .expect("channel listed by the pipeline");
        pump_in(p, r, move |b| input.send(b).is_ok(), || {});
    }
    let start = Instant::now();
    let mut stopped = false;
    let (shape, board) = (Arc::clone(running.shape()), Arc::clone(running.board()));
    let name = Some(path.clone());
    if let Some(w) = &job.watch {
        w.set(Look::at(1, name.clone(), &running));
    }
    while !running.wait_timeout(Duration::from_millis(100)) {
        // The counters alone: no lock a worker takes is touched ten times a second.
        let stats = running.counters();
        if let Some(w) = &job.watch {
            w.set(Look::with(1, name.clone(), &running, stats.clone()));
        }
        progress(&stats);
        if let Some(d) = job.duration {
            if !stopped && start.elapsed() >= d {
                running.stop();
                stopped = true;
            }
        }
    }
    // The host-out channels end with their tasks; once written, their buffers are back.
    let bridged = join(bridges);
    let result = running.wait();
    bridged?;
    let (stats, failure, error) = match result {
        Ok(s) => (s, None, None),
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
            Some(format!("task '{task}' (line {line}) failed: {message}")),
        ),
        Err(e) => return Err(JobError::Failed(format!("{path}: {e}"))),
    };
    if let Some(w) = &job.watch {
        w.set(Look {
            id: 1,
            name,
            phase: match error {
                Some(_) => Phase::Failed,
                None => Phase::Finished,
            },
            error,
            shape: Arc::clone(&shape),
            stats: stats.clone(),
            board,
        });
    }
    Ok(LocalOutcome {
        stats,
        bindings: b,
        failure,
        shape,
    })
}
