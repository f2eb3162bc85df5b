//! Graph checks that need the whole graph: cycles, free-list sizes, and calls of the
//! pipeline's own services.

use std::collections::{BTreeMap, HashMap};

use crate::error::PipelineError;
use crate::lang::{QueueRef, Spec};
use crate::pool::PoolConfig;
use crate::ports::HostPorts;
use crate::registry::TaskInfo;

/// Who writes a queue and who reads it: the tasks (by index) and where each names it.
pub(crate) struct QueueUse<'a> {
    pub(crate) writers: Vec<(usize, &'a QueueRef)>,
    pub(crate) reader: Option<(usize, &'a QueueRef)>,
}

pub(crate) fn check_cycles(
    spec: &Spec,
    uses: &BTreeMap<&str, QueueUse>,
    _qindex: &HashMap<&str, usize>,
) -> Result<(), PipelineError> {
    // Edges task -> task through queues, with the queue name.
    let n = spec.tasks.len();
    let mut edges: Vec<Vec<(usize, &str)>> = vec![Vec::new(); n];
    for (name, u) in uses {
        if let Some((r, _)) = u.reader {
            for (w, _) in &u.writers {
                edges[*w].push((r, name));
            }
        }
    }
    // Iterative DFS with colours; on a back edge, report the cycle.
    let mut colour = vec![0u8; n];
    for start in 0..n {
        if colour[start] != 0 {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        let mut path: Vec<(usize, &str)> = vec![(start, "")];
        colour[start] = 1;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if *next < edges[node].len() {
                let (to, q) = edges[node][*next];
                *next += 1;
                if colour[to] == 1 {
                    let pos = path
                        .iter()
                        .position(|(t, _)| *t == to)
                        .expect("grey node is on the path");
                    let mut s = String::new();
                    let cyc: Vec<(usize, &str)> =
                        path[pos..].iter().copied().chain([(to, q)]).collect();
                    for (k, (t, via)) in cyc.iter().enumerate() {
                        if k > 0 {
                            s.push_str(&format!(" -{via}-> "));
                        }
                        let tl = &spec.tasks[*t];
                        s.push_str(&format!("{}(line {})", tl.command, tl.line));
                    }
                    let tl = &spec.tasks[to];
                    return Err(PipelineError::Cycle {
                        line: tl.line,
                        col: tl.col,
                        path: s,
                    });
                }
                if colour[to] == 0 {
                    colour[to] = 1;
                    stack.push((to, 0));
                    path.push((to, q));
                }
            } else {
                colour[node] = 2;
                stack.pop();
                path.pop();
            }
        }
    }
    Ok(())
}

/// Each free list needs buffers large enough for the tasks that fill them, and enough of
/// them that a task holding one of its buffers while it waits for another cannot starve the
/// loop: one for each such task plus one in flight.
pub(crate) fn check_pool_sizes(
    spec: &Spec,
    infos: &[&TaskInfo],
    task_pools: &[Vec<Option<usize>>],
    pools: &[(PoolConfig, usize, usize)],
    uses: &BTreeMap<&str, QueueUse>,
) -> Result<(), PipelineError> {
    let n = spec.tasks.len();
    // Origins of the buffers on each task's inputs: the pools they were allocated from.
    // Tasks are visited in topological order (the graph has no cycles).
    let mut reader_of: HashMap<&str, usize> = HashMap::new();
    for (name, u) in uses {
        if let Some((r, _)) = u.reader {
            reader_of.insert(name, r);
        }
    }
    let mut indeg = vec![0usize; n];
    for t in spec.tasks.iter() {
        for q in &t.outputs {
            indeg[reader_of[q.name.as_str()]] += 1;
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
    let mut input_origins: Vec<Vec<usize>> = vec![Vec::new(); n];
    while let Some(i) = ready.pop() {
        let t = &spec.tasks[i];
        for (o, q) in t.outputs.iter().enumerate() {
            let origin = match task_pools[i][o] {
                Some(p) => vec![p],
                None => input_origins[i].clone(),
            };
            let r = reader_of[q.name.as_str()];
            input_origins[r].extend(origin);
            indeg[r] -= 1;
            if indeg[r] == 0 {
                ready.push(r);
            }
        }
    }
    for (p, (cfg, line, col)) in pools.iter().enumerate() {
        let mut holders = Vec::new();
        for (i, t) in spec.tasks.iter().enumerate() {
            if !task_pools[i].contains(&Some(p)) {
                continue;
            }
            let info = infos[i];
            if cfg.size < info.min_buffer {
                return Err(PipelineError::PoolTooSmall {
                    line: *line,
                    col: *col,
                    pool: cfg.name.clone(),
                    message: format!(
                        "its buffers are {} bytes but task '{}' (line {}) needs at least {}",
                        cfg.size, t.command, t.line, info.min_buffer
                    ),
                });
            }
            if input_origins[i].contains(&p) {
                holders.push(format!("'{}' (line {})", t.command, t.line));
            }
        }
        let need = holders.len() + 1;
        if cfg.count < need {
            return Err(PipelineError::PoolTooSmall {
                line: *line,
                col: *col,
                pool: cfg.name.clone(),
                message: format!(
                    "it has {} buffer(s) but needs at least {need}: {} hold(s) one of its buffers while waiting for another, and one more must be in flight",
                    cfg.count,
                    if holders.is_empty() { "no task".to_string() } else { holders.join(", ") }
                ),
            });
        }
    }
    Ok(())
}

/// Checks each `call name=NAME` of the pipeline's own service: the pipeline has `host-in`
/// and `host-out NAME`, both `whole=true`; the call's answers do not flow back into the
/// service (it would wait for ever for its own answer); and the call is no part of the
/// service it calls (its call would wait for the one it serves).
pub(crate) fn check_own_calls(
    spec: &Spec,
    uses: &BTreeMap<&str, QueueUse>,
    host: &HostPorts,
) -> Result<(), PipelineError> {
    for (name, task, _) in &host.calls {
        let t = &spec.tasks[*task];
        let bad = |message: String| PipelineError::BadArgument {
            line: t.line,
            col: t.col,
            task: t.command.clone(),
            message: format!("name={name}: {message}"),
        };
        let host_in = host.inputs.get(name).filter(|p| p.whole).map(|p| p.task);
        let host_out = host.outputs.get(name).filter(|o| o.whole).map(|o| o.task);
        let (Some(i), Some(o)) = (host_in, host_out) else {
            return Err(bad(format!(
                "no host-in and host-out {name}, both whole=true, in this pipeline (a call without url= and pipeline= calls its own pipeline's service)"
            )));
        };
        if downstream(spec, uses, i)[*task] {
            return Err(bad(format!(
                "the call is part of the service it calls (after its host-in, line {}): it would wait for the call it serves",
                spec.tasks[i].line
            )));
        }
        if downstream(spec, uses, *task)[o] {
            return Err(bad(format!(
                "its answers flow into the service's own host-out (line {}): the call would wait for ever for its answer",
                spec.tasks[o].line
            )));
        }
    }
    Ok(())
}

/// Which tasks the buffers of task `from` reach, through the queues (not `from` itself
/// unless a cycle leads back to it).
fn downstream(spec: &Spec, uses: &BTreeMap<&str, QueueUse>, from: usize) -> Vec<bool> {
    let mut seen = vec![false; spec.tasks.len()];
    let mut todo = vec![from];
    while let Some(t) = todo.pop() {
        for q in &spec.tasks[t].outputs {
            if let Some((r, _)) = uses.get(q.name.as_str()).and_then(|u| u.reader) {
                if !seen[r] {
                    seen[r] = true;
                    todo.push(r);
                }
            }
        }
    }
    seen
}
