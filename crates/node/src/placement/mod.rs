//! One pipeline over several engines: the tasks of a file placed with `@NAME` become one part
//! per engine, and every queue whose writer and reader sit on different engines becomes an
//! engine-to-engine queue ([`crate::remote`]).
//!
//! [`plan`] splits a parsed file; [`Plan::text`] writes one engine's part once the ids of the
//! parts it sends to are known ([`Plan::order`] submits those first). On the writer's engine
//! the queue ends in `engine-out url=URL pipeline=ID name=Q@FROM engine=TO <Q`; on the
//! reader's it starts at `host-in name=Q@FROM whole=true >Q:POOL`, so a buffer crosses as one
//! message and arrives as one buffer.
//!
//! The receiving `host-in` allocates from the free list written on the queue (on any mention:
//! `<sinograms:sino(2,4M)`), else from one shaped like the free list the writer's buffers
//! come from (the declared or default free list of the first allocating task upstream). A
//! message larger than its buffers fails the pipeline with an error that says so. Every part
//! declares the shapes of the free lists it uses, so each engine has its own.
//!
//! When queues run between engines both ways (`source @a`, `histogram @b`, `recon @a`), one
//! part per engine cannot be started in any order: each would name the other's pipeline id.
//! Then each engine's tasks split by *stage* (the most engine boundaries a path from a source
//! crosses): `a` runs the source, `b` the histogram, `a+2` the reconstruction, submitted
//! `a+2`, `b`, `a`. A queue between two stages of one engine crosses over that engine's link
//! to itself. Only a cycle of the tasks' queues themselves cannot be placed.
//!
//! A `call name=NAME` of the file's own service (`host-in` and `host-out NAME`, both
//! `whole=true`) on another part than the service becomes a call of that part's pipeline, and
//! the serving part is stopped once its callers have finished (`calls.rs`).
//!
//! Unplaced tasks run on the first engine named. A file run whole (`offhost run`, one daemon)
//! ignores placements, so every placement of a file computes the same result.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

mod calls;
mod error;

use calls::ServiceCalls;
pub use error::PlacementError;
use offhost_engine::lang::{QueueRef, Room, Spec, TaskLine};
use offhost_engine::Registry;

/// A queue between two parts (two engines, or two stages of one engine).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrossQueue {
    /// The queue's name in the file.
    pub queue: String,
    /// The part its writer runs in (see [`Plan::order`]).
    pub from: String,
    /// The part its reader runs in.
    pub to: String,
    /// The `host-in` channel on `to` that receives it (`QUEUE@FROM`).
    pub channel: String,
}

/// The parts of a placed pipeline: one per engine that runs a task, or, when queues run
/// between engines both ways, one per engine and stage (`ENGINE`, `ENGINE+2`, ...).
#[derive(Debug, Clone)]
pub struct Plan {
    order: Vec<String>,
    parts: BTreeMap<String, Vec<usize>>,
    engine_of: HashMap<String, String>,
    cross: Vec<CrossQueue>,
    receive_pools: HashMap<String, (String, (usize, usize))>,
    shapes: HashMap<String, (usize, usize)>,
    /// Headroom and tailroom written with each free list's shape.
    rooms: HashMap<String, Room>,
    /// Calls of the file's own service in another part: call task, the service's part.
    calls: HashMap<usize, String>,
    /// The parts that serve calls from other parts, with their services' names.
    serving: BTreeMap<String, Vec<String>>,
    spec: Spec,
}

/// Splits `spec` over `engines` (the first takes unplaced tasks); `registry` tells which
/// tasks allocate and their default free lists.
pub fn plan(spec: &Spec, engines: &[String], registry: &Registry) -> Result<Plan, PlacementError> {
    let first = engines.first().ok_or(PlacementError::NoEngines)?;
    let mut on = Vec::with_capacity(spec.tasks.len());
    for t in &spec.tasks {
        match &t.engine {
            None => on.push(first.clone()),
            Some(p) if engines.contains(&p.name) => on.push(p.name.clone()),
            Some(p) => {
                return Err(PlacementError::UnknownEngine {
                    line: p.line,
                    col: p.col,
                    name: p.name.clone(),
                    known: engines.join(", "),
                })
            }
        }
    }
    // Writers and readers of each queue; the pool written on any mention, and every shape.
    let mut writers: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut reader: HashMap<&str, usize> = HashMap::new();
    let mut queue_pool: HashMap<&str, &str> = HashMap::new();
    let mut shapes: HashMap<String, (usize, usize)> = HashMap::new();
    let mut rooms: HashMap<String, Room> = HashMap::new();
    for (i, t) in spec.tasks.iter().enumerate() {
        for q in &t.outputs {
            writers.entry(&q.name).or_default().push(i);
        }
        for q in &t.inputs {
            reader.insert(&q.name, i);
        }
        for q in t.inputs.iter().chain(&t.outputs) {
            if let Some(p) = &q.pool {
                queue_pool.insert(&q.name, &p.name);
                if let Some(s) = p.shape {
                    shapes.entry(p.name.clone()).or_insert(s);
                    rooms.entry(p.name.clone()).or_insert(p.room);
                }
            }
        }
    }
    let queues = Queues {
        writers,
        reader,
        queue_pool,
        shapes,
    };
    // One part per engine; if queues between engines then run both ways, each engine's
    // tasks split by stage, which orders the parts again (see `stages`).
    let services = ServiceCalls::find(spec, registry);
    let (split, order) = match Split::new(spec, &on, &on, registry, &queues, &services) {
        Ok(done) => done,
        Err(e @ PlacementError::Cycle { .. }) => {
            let part_of = stages(spec, &on, &queues.writers).ok_or(e)?;
            Split::new(spec, &on, &part_of, registry, &queues, &services)?
        }
        Err(e) => return Err(e),
    };
    Ok(Plan {
        order,
        parts: split.parts,
        engine_of: split.engine_of,
        cross: split.cross,
        receive_pools: split.receive_pools,
        shapes: queues.shapes,
        rooms,
        calls: split.calls,
        serving: split.serving,
        spec: spec.clone(),
    })
}

/// The queues of a file: who writes and reads each, and the free lists written on them.
struct Queues<'a> {
    writers: BTreeMap<&'a str, Vec<usize>>,
    reader: HashMap<&'a str, usize>,
    queue_pool: HashMap<&'a str, &'a str>,
    shapes: HashMap<String, (usize, usize)>,
}

/// The tasks cut into parts, and the queues between parts.
struct Split {
    parts: BTreeMap<String, Vec<usize>>,
    engine_of: HashMap<String, String>,
    cross: Vec<CrossQueue>,
    receive_pools: HashMap<String, (String, (usize, usize))>,
    calls: HashMap<usize, String>,
    serving: BTreeMap<String, Vec<String>>,
}

impl Split {
    /// Cuts the tasks into the parts `part_of` names (task `i` runs on engine `on[i]`) and
    /// orders the parts sinks first.
    fn new(
        spec: &Spec,
        on: &[String],
        part_of: &[String],
        registry: &Registry,
        qs: &Queues<'_>,
        services: &ServiceCalls,
    ) -> Result<(Split, Vec<String>), PlacementError> {
        let mut parts: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        let mut engine_of = HashMap::new();
        for (i, p) in part_of.iter().enumerate() {
            parts.entry(p.clone()).or_default().push(i);
            engine_of.insert(p.clone(), on[i].clone());
        }
        let mut cross = Vec::new();
        let mut edges: BTreeSet<(String, String)> = BTreeSet::new();
        let mut receive_pools = HashMap::new();
        for (q, ws) in &qs.writers {
            let Some(&r) = qs.reader.get(q) else { continue };
            let mut froms: Vec<&String> = ws
                .iter()
                .map(|&w| &part_of[w])
                .filter(|p| **p != part_of[r])
                .collect();
            froms.sort();
            froms.dedup();
            for from in froms {
                let channel = format!("{q}@{from}");
                let pool = match qs.queue_pool.get(q) {
                    Some(p) if qs.shapes.contains_key(*p) => (p.to_string(), qs.shapes[*p]),
                    _ => {
                        let w = ws
                            .iter()
                            .copied()
                            .find(|&w| part_of[w] == *from)
                            .expect("a writer there");
                        // A part name's '+' is no name character: `z.from.a.2` for `a+2`,
                        // made unique among the file's free lists.
                        let base = format!("{q}.from.{}", from.replace('+', "."));
                        let taken = |n: &String| {
                            qs.shapes.contains_key(n) || receive_pools.values().any(|(p, _)| p == n)
                        };
                        let mut name = base.clone();
                        let mut k = 2;
                        while taken(&name) {
                            name = format!("{base}.{k}");
                            k += 1;
                        }
                        (name, upstream_shape(spec, w, registry, &qs.writers, 0))
                    }
                };
                receive_pools.insert(channel.clone(), pool);
                edges.insert((from.clone(), part_of[r].clone()));
                cross.push(CrossQueue {
                    queue: q.to_string(),
                    from: from.clone(),
                    to: part_of[r].clone(),
                    channel,
                });
            }
        }
        // A call names the pipeline id of its service's part, which goes first.
        let mut calls = HashMap::new();
        let mut serving: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (call, part, name) in services.across(spec, part_of)? {
            edges.insert((part_of[call].clone(), part.clone()));
            let names = serving.entry(part.clone()).or_default();
            if !names.contains(&name) {
                names.push(name);
            }
            calls.insert(call, part);
        }
        let parts_serving: Vec<String> = serving.keys().cloned().collect();
        services.check_serving(spec, part_of, &parts_serving)?;
        let order = sinks_first(parts.keys().cloned().collect(), &edges, &engine_of)?;
        Ok((
            Split {
                parts,
                engine_of,
                cross,
                receive_pools,
                calls,
                serving,
            },
            order,
        ))
    }
}

/// Parts by stage, for queues that run between engines both ways: a task's stage is the
/// most engine boundaries a path from a source to it crosses, and the tasks of one engine
/// and stage make a part (`ENGINE`, then `ENGINE+2`, `ENGINE+3`, ... for the engine's later
/// stages). A queue between parts then always goes to a later stage, so the parts can be
/// submitted sinks first; a queue between two stages of one engine crosses over a link of
/// that engine to itself. `None` when the tasks' queues form a cycle.
fn stages(spec: &Spec, on: &[String], writers: &BTreeMap<&str, Vec<usize>>) -> Option<Vec<String>> {
    let n = spec.tasks.len();
    let mut stage = vec![0usize; n];
    let mut settled = false;
    // Longest paths: at most n rounds on an acyclic graph.
    for _ in 0..=n {
        let mut changed = false;
        for (i, t) in spec.tasks.iter().enumerate() {
            for q in &t.inputs {
                for &w in writers.get(q.name.as_str()).map_or(&[][..], |v| &v[..]) {
                    let s = stage[w] + usize::from(on[w] != on[i]);
                    if s > stage[i] {
                        stage[i] = s;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            settled = true;
            break;
        }
    }
    if !settled {
        return None;
    }
    // Each engine's stages, numbered from 1 in order.
    let mut seen: BTreeMap<(&str, usize), ()> = BTreeMap::new();
    for (i, e) in on.iter().enumerate() {
        seen.insert((e.as_str(), stage[i]), ());
    }
    let mut number: HashMap<(&str, usize), usize> = HashMap::new();
    let mut last: Option<&str> = None;
    let mut k = 0;
    for &(e, s) in seen.keys() {
        k = if last == Some(e) { k + 1 } else { 1 };
        last = Some(e);
        number.insert((e, s), k);
    }
    Some(
        on.iter()
            .enumerate()
            .map(|(i, e)| match number[&(e.as_str(), stage[i])] {
                1 => e.clone(),
                k => format!("{e}+{k}"),
            })
            .collect(),
    )
}

/// The free-list shape of the buffers task `t` writes: its own if it allocates, else that of
/// its first input's writer.
fn upstream_shape(
    spec: &Spec,
    t: usize,
    registry: &Registry,
    writers: &BTreeMap<&str, Vec<usize>>,
    depth: usize,
) -> (usize, usize) {
    let task = &spec.tasks[t];
    let info = registry.get(&task.command).map(|(i, _)| i);
    if let Some(info) = info {
        if info.allocates {
            let declared = task
                .outputs
                .first()
                .and_then(|q| q.pool.as_ref())
                .and_then(|p| p.shape);
            return declared.unwrap_or(info.default_pool);
        }
    }
    if depth < spec.tasks.len() {
        if let Some(w) = task
            .inputs
            .first()
            .and_then(|q| writers.get(q.name.as_str()))
            .and_then(|ws| ws.first())
        {
            return upstream_shape(spec, *w, registry, writers, depth + 1);
        }
    }
    (16, 65536)
}

/// Parts ordered so that every part comes after those it sends to.
fn sinks_first(
    parts: Vec<String>,
    edges: &BTreeSet<(String, String)>,
    engine_of: &HashMap<String, String>,
) -> Result<Vec<String>, PlacementError> {
    let mut order: Vec<String> = Vec::new();
    let mut left = parts;
    while !left.is_empty() {
        let ready: Vec<String> = left
            .iter()
            .filter(|e| {
                edges
                    .iter()
                    .all(|(from, to)| from != *e || order.contains(to))
            })
            .cloned()
            .collect();
        if ready.is_empty() {
            let (a, b) = edges
                .iter()
                .find(|(f, t)| left.contains(f) && left.contains(t))
                .cloned()
                .unwrap_or_default();
            let engine = |p: &String| engine_of.get(p).cloned().unwrap_or_default();
            return Err(PlacementError::Cycle {
                a: engine(&a),
                b: engine(&b),
            });
        }
        left.retain(|e| !ready.contains(e));
        order.extend(ready);
    }
    Ok(order)
}

impl Plan {
    /// The parts, in the order to submit them: every part after the parts it sends to
    /// (whose pipeline ids it names). A part is named for its engine, or `ENGINE+2`,
    /// `ENGINE+3`, ... for the later stages of an engine that runs several
    /// ([`Plan::engine_of`] gives the engine).
    pub fn order(&self) -> &[String] {
        &self.order
    }

    /// The engine that runs `part`.
    pub fn engine_of<'a>(&'a self, part: &'a str) -> &'a str {
        self.engine_of.get(part).map_or(part, |e| e.as_str())
    }

    /// The tasks of `part`, for messages: `count (line 2), crc32c (line 3)`.
    pub fn tasks_on(&self, part: &str) -> String {
        let v: Vec<String> = self
            .parts
            .get(part)
            .map_or(&[][..], |v| &v[..])
            .iter()
            .map(|&t| {
                format!(
                    "{} (line {})",
                    self.spec.tasks[t].command, self.spec.tasks[t].line
                )
            })
            .collect();
        v.join(", ")
    }

    /// The last line of the file's tasks: the lines after it in a part are the ones the split
    /// added (`engine-out` and `host-in` of the queues between engines).
    pub fn file_lines(&self) -> usize {
        self.spec.tasks.iter().map(|t| t.line).max().unwrap_or(0)
    }

    /// The queues that cross between engines.
    pub fn cross_queues(&self) -> &[CrossQueue] {
        &self.cross
    }

    /// The parts that serve calls of the file's own services from other parts, each with the
    /// names of those services (whose host ports are the callers', not the user's): such a
    /// part runs until it is stopped, which is due once every other part has finished.
    pub fn serving(&self) -> &BTreeMap<String, Vec<String>> {
        &self.serving
    }

    /// The pipeline text of `engine`'s part (a part name of [`Plan::order`]); `targets` gives
    /// the URL and pipeline id of each part it sends to or calls. Each task keeps its line number from the file (the lines of other
    /// engines' tasks are left empty), so errors and statistics name lines of the file; the
    /// `engine-out` and `host-in` lines of the queues between engines come after the last.
    pub fn text(
        &self,
        engine: &str,
        targets: &HashMap<String, (String, u64)>,
    ) -> Result<String, PlacementError> {
        let mut out = String::new();
        let mut declared: BTreeSet<String> = BTreeSet::new();
        let mut at = 1;
        for &t in self.parts.get(engine).map_or(&[][..], |v| &v[..]) {
            let task = &self.spec.tasks[t];
            while at < task.line {
                out.push('\n');
                at += 1;
            }
            // A call of the file's own service in another part calls that part's pipeline.
            let extra = match self.calls.get(&t) {
                Some(part) => {
                    let (url, id) = targets.get(part).cloned().unwrap_or_default();
                    format!(
                        " url={} pipeline={id} engine={}",
                        quote(&url, task.line)?,
                        self.engine_of(part)
                    )
                }
                None => String::new(),
            };
            let line = self.line(task, &extra, &mut declared)?;
            let _ = writeln!(out, "{line}");
            at += 1;
        }
        while at <= self.file_lines() {
            out.push('\n');
            at += 1;
        }
        for c in &self.cross {
            if c.from == engine {
                let (url, id) = targets.get(&c.to).cloned().unwrap_or_default();
                let _ = writeln!(
                    out,
                    "engine-out url={} pipeline={id} name={} engine={} <{}",
                    quote(&url, 0)?,
                    quote(&c.channel, 0)?,
                    self.engine_of(&c.to),
                    c.queue
                );
            }
            if c.to == engine {
                let (pool, (count, size)) = &self.receive_pools[&c.channel];
                let shape = if declared.insert(pool.clone()) {
                    format!("({count},{size})")
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "host-in name={} whole=true >{}:{pool}{shape}",
                    quote(&c.channel, 0)?,
                    c.queue
                );
            }
        }
        Ok(out)
    }

    /// One task line as text, without its placement and with `extra` after its arguments;
    /// the first mention of a free list in a part carries its shape.
    fn line(
        &self,
        t: &TaskLine,
        extra: &str,
        declared: &mut BTreeSet<String>,
    ) -> Result<String, PlacementError> {
        let mut s = t.command.clone();
        for a in &t.args {
            s.push(' ');
            if let Some(k) = &a.key {
                s.push_str(k);
                s.push('=');
            }
            s.push_str(&quote(&a.value, t.line)?);
        }
        s.push_str(extra);
        let mut queue = |dir: char, q: &QueueRef, s: &mut String| {
            s.push(' ');
            s.push(dir);
            s.push_str(&q.name);
            if let Some(p) = &q.pool {
                s.push(':');
                s.push_str(&p.name);
                if declared.insert(p.name.clone()) {
                    if let Some((c, z)) = self.shapes.get(&p.name) {
                        let _ = write!(s, "({c},{z}");
                        let room = self.rooms.get(&p.name).copied().unwrap_or_default();
                        if let Some(h) = room.headroom {
                            let _ = write!(s, ",headroom={h}");
                        }
                        if let Some(t) = room.tailroom {
                            let _ = write!(s, ",tailroom={t}");
                        }
                        s.push(')');
                    }
                }
            }
            for (k, h) in q.hooks.iter().enumerate() {
                s.push(if k == 0 { '[' } else { ',' });
                let _ = write!(s, "{}={}", h.kind, h.name);
            }
            if !q.hooks.is_empty() {
                s.push(']');
            }
        };
        for q in &t.inputs {
            queue('<', q, &mut s);
        }
        for q in &t.outputs {
            queue('>', q, &mut s);
        }
        Ok(s)
    }
}

/// A value as the language reads it back: quoted when it holds spaces or the language's
/// marks; a `"` cannot be written.
fn quote(v: &str, line: usize) -> Result<String, PlacementError> {
    if v.contains('"') {
        return Err(PlacementError::Unquotable {
            line,
            value: v.to_owned(),
        });
    }
    let plain = !v.is_empty()
        && !v
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '<' | '>' | '#' | '='));
    Ok(if plain && !v.starts_with('@') {
        v.to_owned()
    } else {
        format!("\"{v}\"")
    })
}
