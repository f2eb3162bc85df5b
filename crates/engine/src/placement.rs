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
//! Unplaced tasks run on the first engine named. A file run whole (`offhost run`, one daemon)
//! ignores placements, so every placement of a file computes the same result.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

use crate::lang::{QueueRef, Spec, TaskLine};
use crate::registry::Registry;

/// A file's tasks cannot be placed as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlacementError {
    /// No engine was named.
    #[error("no engine to place the pipeline on")]
    NoEngines,
    /// A task names an engine that was not given.
    #[error("line {line}, column {col}: @{name} is not one of the engines given ({known})")]
    UnknownEngine {
        /// Line of the placement.
        line: usize,
        /// Column of its `@`.
        col: usize,
        /// The name written.
        name: String,
        /// The names given, comma-separated.
        known: String,
    },
    /// Queues cross between two engines both ways.
    #[error("engines {a} and {b} send each other queues (a cycle between engines); place the tasks so that data flows one way")]
    Cycle {
        /// One engine.
        a: String,
        /// The other.
        b: String,
    },
    /// A value cannot be written back into pipeline text.
    #[error(
        "line {line}: the value {value:?} holds a '\"' and cannot be passed on to another engine"
    )]
    Unquotable {
        /// Line of the task.
        line: usize,
        /// The value.
        value: String,
    },
}

/// A queue between two engines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrossQueue {
    /// The queue's name in the file.
    pub queue: String,
    /// The engine its writer runs on.
    pub from: String,
    /// The engine its reader runs on.
    pub to: String,
    /// The `host-in` channel on `to` that receives it (`QUEUE@FROM`).
    pub channel: String,
}

/// The parts of a placed pipeline, one per engine that runs a task.
#[derive(Debug, Clone)]
pub struct Plan {
    order: Vec<String>,
    parts: BTreeMap<String, Vec<usize>>,
    cross: Vec<CrossQueue>,
    receive_pools: HashMap<String, (String, (usize, usize))>,
    shapes: HashMap<String, (usize, usize)>,
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
    let mut parts: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, e) in on.iter().enumerate() {
        parts.entry(e.clone()).or_default().push(i);
    }
    // Writers and readers of each queue; the pool written on any mention, and every shape.
    let mut writers: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut reader: HashMap<&str, usize> = HashMap::new();
    let mut queue_pool: HashMap<&str, &str> = HashMap::new();
    let mut shapes: HashMap<String, (usize, usize)> = HashMap::new();
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
                }
            }
        }
    }
    let mut cross = Vec::new();
    let mut edges: BTreeSet<(String, String)> = BTreeSet::new();
    let mut receive_pools = HashMap::new();
    for (q, ws) in &writers {
        let Some(&r) = reader.get(q) else { continue };
        let mut froms: Vec<&String> = ws
            .iter()
            .map(|&w| &on[w])
            .filter(|e| **e != on[r])
            .collect();
        froms.sort();
        froms.dedup();
        for from in froms {
            let channel = format!("{q}@{from}");
            let pool = match queue_pool.get(q) {
                Some(p) if shapes.contains_key(*p) => (p.to_string(), shapes[*p]),
                _ => {
                    let w = ws
                        .iter()
                        .copied()
                        .find(|&w| on[w] == *from)
                        .expect("a writer there");
                    (
                        format!("{q}.from.{from}"),
                        upstream_shape(spec, w, registry, &writers, 0),
                    )
                }
            };
            receive_pools.insert(channel.clone(), pool);
            edges.insert((from.clone(), on[r].clone()));
            cross.push(CrossQueue {
                queue: q.to_string(),
                from: from.clone(),
                to: on[r].clone(),
                channel,
            });
        }
    }
    let order = sinks_first(parts.keys().cloned().collect(), &edges)?;
    Ok(Plan {
        order,
        parts,
        cross,
        receive_pools,
        shapes,
        spec: spec.clone(),
    })
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

/// Engines ordered so that every engine comes after those it sends to.
fn sinks_first(
    engines: Vec<String>,
    edges: &BTreeSet<(String, String)>,
) -> Result<Vec<String>, PlacementError> {
    let mut order: Vec<String> = Vec::new();
    let mut left = engines;
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
            return Err(PlacementError::Cycle { a, b });
        }
        left.retain(|e| !ready.contains(e));
        order.extend(ready);
    }
    Ok(order)
}

impl Plan {
    /// The engines that run a part, in the order to submit them: every engine after the
    /// engines it sends to (whose pipeline ids its part names).
    pub fn order(&self) -> &[String] {
        &self.order
    }

    /// The tasks `engine` runs, for messages: `count (line 2), crc32c (line 3)`.
    pub fn tasks_on(&self, engine: &str) -> String {
        let v: Vec<String> = self
            .parts
            .get(engine)
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

    /// The pipeline text of `engine`'s part; `targets` gives the URL and pipeline id of each
    /// engine it sends to. Each task keeps its line number from the file (the lines of other
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
            let line = self.line(task, &mut declared)?;
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
                    c.to,
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

    /// One task line as text, without its placement; the first mention of a free list in a
    /// part carries its shape.
    fn line(
        &self,
        t: &TaskLine,
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
        let mut queue = |dir: char, q: &QueueRef, s: &mut String| {
            s.push(' ');
            s.push(dir);
            s.push_str(&q.name);
            if let Some(p) = &q.pool {
                s.push(':');
                s.push_str(&p.name);
                if declared.insert(p.name.clone()) {
                    if let Some((c, z)) = self.shapes.get(&p.name) {
                        let _ = write!(s, "({c},{z})");
                    }
                }
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
