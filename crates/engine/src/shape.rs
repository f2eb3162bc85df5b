//! A running pipeline's shape, for those who watch it: its tasks, queues and free lists and
//! how they join ([`Shape`]), as JSON (serde) and as Graphviz dot ([`Shape::to_dot`]).
//!
//! The shape never changes while the pipeline runs; the numbers that do are its [`Stats`],
//! whose `tasks`, `queues` and `pools` are in the shape's order.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::engine::Stats;
use crate::task::Priority;

/// The tasks, queues and free lists of a pipeline and how they join.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    /// Tasks in pipeline order (the order of [`Stats::tasks`]).
    pub tasks: Vec<ShapeTask>,
    /// Queues (the order of [`Stats::queues`]).
    pub queues: Vec<ShapeQueue>,
    /// Free lists (the order of [`Stats::pools`]).
    pub pools: Vec<ShapePool>,
}

/// One task of a [`Shape`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShapeTask {
    /// Command name.
    pub name: String,
    /// Line of the pipeline text that created it.
    pub line: usize,
    /// The engine it is placed on (`@NAME`), if the text says.
    pub engine: Option<String>,
    /// Scheduling class.
    pub priority: Priority,
    /// Its input queues (indices into [`Shape::queues`]).
    pub inputs: Vec<usize>,
    /// Its output queues (indices into [`Shape::queues`]).
    pub outputs: Vec<usize>,
    /// Per output, the free list it allocates from (index into [`Shape::pools`]).
    pub pools: Vec<Option<usize>>,
}

/// One queue of a [`Shape`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShapeQueue {
    /// Queue name.
    pub name: String,
    /// The task that reads it.
    pub reader: usize,
    /// The tasks that write it.
    pub writers: Vec<usize>,
    /// The most buffers it can hold: those of the free lists its writers allocate from for it
    /// (a queue's buffers all come from them), if they all have one.
    pub capacity: Option<usize>,
}

/// One free list of a [`Shape`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShapePool {
    /// Name.
    pub name: String,
    /// Buffers.
    pub count: usize,
    /// Bytes of each buffer's data area.
    pub size: usize,
}

impl Shape {
    /// Fills each queue's capacity from its writers' free lists; a writer that allocates
    /// nothing for it (it passes its input buffers on) counts its inputs' capacities.
    pub(crate) fn with_capacities(mut self) -> Shape {
        // Passes until nothing changes: a chain of pass-through tasks takes one pass each.
        for _ in 0..=self.queues.len() {
            let mut changed = false;
            for qi in 0..self.queues.len() {
                let q = &self.queues[qi];
                let mut total = Some(0usize);
                for &w in &q.writers {
                    let t = &self.tasks[w];
                    let pool = t
                        .outputs
                        .iter()
                        .position(|&o| o == qi)
                        .and_then(|k| t.pools.get(k).copied().flatten());
                    let own = match pool {
                        Some(p) => Some(self.pools[p].count),
                        None if t.inputs.is_empty() => None,
                        None => t
                            .inputs
                            .iter()
                            .try_fold(0usize, |n, &i| n.checked_add(self.queues[i].capacity?)),
                    };
                    total = total.zip(own).and_then(|(a, b)| a.checked_add(b));
                }
                let total = total.filter(|_| !q.writers.is_empty());
                if total != q.capacity {
                    self.queues[qi].capacity = total;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        self
    }

    /// The shape as a Graphviz digraph: a box per task (with its counters when `stats` is
    /// given), an edge per queue and writer (labelled with its depth and buffers put), the
    /// tasks of each engine (`@NAME`) in a cluster of their own.
    pub fn to_dot(&self, stats: Option<&Stats>) -> String {
        let mut o = String::from(
            "digraph pipeline {\n  rankdir=LR;\n  node [shape=box, fontname=\"sans-serif\"];\n",
        );
        let mut engines: Vec<&str> = self
            .tasks
            .iter()
            .filter_map(|t| t.engine.as_deref())
            .collect();
        engines.sort_unstable();
        engines.dedup();
        let node = |o: &mut String, i: usize, t: &ShapeTask, indent: &str| {
            let mut label = format!("{} (line {})", t.name, t.line);
            if let Some(s) = stats.and_then(|s| s.tasks.get(i)) {
                let _ = write!(
                    label,
                    "\\n{} in, {} out\\n{} B out",
                    s.buffers_in, s.buffers_out, s.bytes_out
                );
                if let Some(e) = &s.error {
                    let _ = write!(label, "\\nfailed: {}", escape(e));
                }
            }
            let _ = writeln!(
                o,
                "{indent}t{i} [label=\"{}\"];",
                escape_keep_breaks(&label)
            );
        };
        for (k, e) in engines.iter().enumerate() {
            let _ = writeln!(
                o,
                "  subgraph cluster_{k} {{\n    label=\"@{}\";",
                escape(e)
            );
            for (i, t) in self.tasks.iter().enumerate() {
                if t.engine.as_deref() == Some(e) {
                    node(&mut o, i, t, "    ");
                }
            }
            o.push_str("  }\n");
        }
        for (i, t) in self.tasks.iter().enumerate() {
            if t.engine.is_none() {
                node(&mut o, i, t, "  ");
            }
        }
        for (qi, q) in self.queues.iter().enumerate() {
            let mut label = escape(&q.name);
            if let Some(s) = stats.and_then(|s| s.queues.get(qi)) {
                let _ = write!(label, "\\ndepth {}", s.depth);
                if let Some(c) = q.capacity {
                    let _ = write!(label, "/{c}");
                }
                let _ = write!(label, ", {} put", s.puts);
            }
            for &w in &q.writers {
                let _ = writeln!(o, "  t{w} -> t{} [label=\"{label}\"];", q.reader);
            }
        }
        o.push_str("}\n");
        o
    }
}

/// `s` as the inside of a dot string.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', " ")
}

/// A label already escaped but for quotes (its `\n` are line breaks).
fn escape_keep_breaks(s: &str) -> String {
    s.replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use crate::{EngineConfig, Pipeline, Registry};

    #[test]
    fn shape_names_every_task_queue_and_list_and_dot_draws_them() {
        let text = "fill bytes=256 @a >x:p(4,64)\nnull @b <x\n";
        let mut run = Pipeline::parse(text)
            .unwrap()
            .start(&Registry::with_builtins(), &EngineConfig::default())
            .unwrap();
        let shape = run.shape().clone();
        assert_eq!(shape.tasks.len(), 2);
        assert_eq!(shape.tasks[0].engine.as_deref(), Some("a"));
        assert_eq!(shape.tasks[0].outputs, vec![0]);
        assert_eq!(shape.tasks[1].inputs, vec![0]);
        assert_eq!(shape.queues[0].capacity, Some(4));
        assert_eq!(shape.pools[0].count, 4);
        let _ = run.host_output("none");
        let stats = run.wait().unwrap();
        let dot = shape.to_dot(Some(&stats));
        assert!(dot.contains("subgraph cluster_0"), "{dot}");
        assert!(dot.contains("label=\"@b\""), "{dot}");
        assert!(
            dot.contains("t0 -> t1 [label=\"x\\ndepth 0/4, 4 put\"]"),
            "{dot}"
        );
        assert!(dot.contains("fill (line 1)\\n0 in, 4 out"), "{dot}");
    }
}
