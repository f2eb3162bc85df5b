//! A submitted job as a live view sees it (`offhost submit --view`): the parts its engines
//! run joined into one pipeline, each part's tasks in its engine's box, and each queue
//! between engines (`engine-out <Q` on one part, `host-in ... >Q` on another) drawn as a
//! link from the one to the other.
//!
//! Each look asks every part's daemon for its state and statistics (`status`) on a session
//! of the view's own; the shapes are asked for once (`shape`).

use std::sync::{Arc, Mutex};

use offhost_engine::watch::{Look, Phase, Watched};
use offhost_engine::{Board, QueueStats, Shape, Stats};
use offhost_link::LinkOptions;

use crate::daemon::{Client, PipelineState, Status};

/// One part of the job.
struct Part {
    engine: String,
    url: String,
    id: u64,
    /// The view's own session with the part's daemon, once made, and the part's shape.
    client: Option<Client>,
    shape: Option<Shape>,
}

/// The parts of a submitted job, as one pipeline (id 1) for a live view.
pub struct PartsView {
    name: String,
    options: LinkOptions,
    parts: Mutex<Vec<Part>>,
    board: Arc<Board>,
}

impl std::fmt::Debug for PartsView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts = self.parts.lock().unwrap_or_else(|e| e.into_inner()).len();
        f.debug_struct("PartsView")
            .field("name", &self.name)
            .field("parts", &parts)
            .finish_non_exhaustive()
    }
}

impl PartsView {
    /// A view of the job from file `name`, reaching its engines with `options`.
    pub fn new(name: &str, options: &LinkOptions) -> PartsView {
        PartsView {
            name: name.to_string(),
            options: options.clone(),
            parts: Mutex::new(Vec::new()),
            board: Arc::default(),
        }
    }

    /// Adds the part pipeline `id` on engine `engine` (at `url`) runs.
    pub fn add(&self, engine: &str, url: &str, id: u64) {
        self.parts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Part {
                engine: engine.to_string(),
                url: url.to_string(),
                id,
                client: None,
                shape: None,
            });
    }
}

impl Part {
    /// The part's shape and status now, or why not.
    fn look(&mut self, options: &LinkOptions) -> Result<(Shape, Status), String> {
        let url = self.url.clone();
        let client = match &mut self.client {
            Some(c) => c,
            None => self.client.insert(
                Client::connect_with(&url, options)
                    .map_err(|e| format!("engine {} ({url}): {e}", self.engine))?,
            ),
        };
        let shape = match &self.shape {
            Some(s) => s.clone(),
            None => {
                let s = client.shape(self.id).map_err(|e| e.to_string())?;
                self.shape.insert(s).clone()
            }
        };
        match client.status(self.id) {
            Ok(s) => Ok((shape, s)),
            Err(e) => {
                self.client = None;
                Err(format!("engine {} ({url}): {e}", self.engine))
            }
        }
    }
}

/// Joins the parts' shapes and statistics into one; the queues between engines become links.
fn join(parts: Vec<(String, Shape, Stats)>) -> (Shape, Stats) {
    let mut shape = Shape {
        tasks: Vec::new(),
        queues: Vec::new(),
        pools: Vec::new(),
    };
    let mut stats = Stats {
        elapsed_s: 0.0,
        finished: true,
        tasks: Vec::new(),
        queues: Vec::new(),
        pools: Vec::new(),
    };
    for (engine, sh, st) in parts {
        let (t0, q0, p0) = (shape.tasks.len(), shape.queues.len(), shape.pools.len());
        for mut t in sh.tasks {
            t.engine = Some(engine.clone());
            t.inputs.iter_mut().for_each(|q| *q += q0);
            t.outputs.iter_mut().for_each(|q| *q += q0);
            t.pools.iter_mut().flatten().for_each(|p| *p += p0);
            shape.tasks.push(t);
        }
        for mut q in sh.queues {
            q.reader += t0;
            q.writers.iter_mut().for_each(|w| *w += t0);
            shape.queues.push(q);
        }
        shape.pools.extend(sh.pools);
        stats.elapsed_s = stats.elapsed_s.max(st.elapsed_s);
        stats.finished &= st.finished;
        stats.tasks.extend(st.tasks);
        stats.queues.extend(st.queues);
        stats.pools.extend(st.pools);
    }
    // The links: an engine-out reading Q, and the host-in writing Q on another part.
    let mut links = Vec::new();
    for (i, t) in shape.tasks.iter().enumerate() {
        if t.name != "engine-out" {
            continue;
        }
        let Some(q) = t.inputs.first().map(|&q| shape.queues[q].name.clone()) else {
            continue;
        };
        let reader = shape.tasks.iter().position(|r| {
            r.name == "host-in"
                && r.engine != t.engine
                && r.outputs.iter().any(|&o| shape.queues[o].name == q)
        });
        if let Some(r) = reader {
            links.push((q, i, r));
        }
    }
    for (q, from, to) in links {
        let s = stats.tasks.get(from);
        stats.queues.push(QueueStats {
            name: format!("{q} (link)"),
            depth: 0,
            max_depth: 0,
            puts: s.map_or(0, |s| s.buffers_in),
            bytes: s.map_or(0, |s| s.bytes_in),
            closed: s.is_some_and(|s| s.done),
        });
        shape.queues.push(offhost_engine::ShapeQueue {
            name: format!("{q} (link)"),
            reader: to,
            writers: vec![from],
            capacity: None,
        });
    }
    (shape, stats)
}

impl Watched for PartsView {
    fn ids(&self) -> Vec<u64> {
        vec![1]
    }

    fn look(&self, id: u64) -> Option<Look> {
        if id != 1 {
            return None;
        }
        let mut parts = self.parts.lock().unwrap_or_else(|e| e.into_inner());
        // Until its first part is submitted the job is starting: running, with no tasks.
        let first = match parts.is_empty() {
            true => Phase::Running,
            false => Phase::Finished,
        };
        let (mut joined, mut errors, mut phase) = (Vec::new(), Vec::new(), first);
        for p in parts.iter_mut() {
            match p.look(&self.options) {
                Ok((shape, status)) => {
                    match status.state {
                        PipelineState::Running => phase = Phase::Running,
                        PipelineState::Finished => {}
                        _ => {
                            if let Some(e) = &status.error {
                                errors.push(format!("engine {}: {e}", p.engine));
                            }
                        }
                    }
                    // Statistics that do not match the shape (a part that ended without any)
                    // leave the part out of the graph.
                    match status.stats {
                        Some(st)
                            if st.tasks.len() == shape.tasks.len()
                                && st.queues.len() == shape.queues.len()
                                && st.pools.len() == shape.pools.len() =>
                        {
                            joined.push((p.engine.clone(), shape, st))
                        }
                        _ => errors.push(format!("engine {}: no statistics", p.engine)),
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() && phase != Phase::Running {
            phase = Phase::Failed;
        }
        let (shape, stats) = join(joined);
        Some(Look {
            id: 1,
            name: Some(self.name.clone()),
            phase,
            error: (!errors.is_empty()).then(|| errors.join("; ")),
            shape: Arc::new(shape),
            stats,
            board: Arc::clone(&self.board),
        })
    }
}
