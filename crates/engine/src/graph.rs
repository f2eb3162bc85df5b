//! Checking a parsed description against the registry and building the task graph.

use std::collections::{BTreeMap, HashMap};

use crate::error::PipelineError;
use crate::host::HostPorts;
use crate::lang::{QueueRef, Spec, TaskLine};
use crate::pool::PoolConfig;
use crate::registry::{Args, Build, Registry, TaskInfo};
use crate::task::{Priority, Task};

/// One task of a checked graph.
pub(crate) struct NodeTask {
    pub(crate) name: String,
    pub(crate) line: usize,
    pub(crate) prio: Priority,
    pub(crate) task: Box<dyn Task>,
    pub(crate) inputs: Vec<usize>,
    pub(crate) outputs: Vec<usize>,
    pub(crate) pools: Vec<Option<usize>>,
}

/// One queue of a checked graph.
pub(crate) struct NodeQueue {
    pub(crate) name: String,
    pub(crate) reader: usize,
    pub(crate) writers: Vec<usize>,
}

/// A checked graph, ready to start.
pub(crate) struct Graph {
    pub(crate) tasks: Vec<NodeTask>,
    pub(crate) queues: Vec<NodeQueue>,
    pub(crate) pools: Vec<PoolConfig>,
    pub(crate) host: HostPorts,
}

struct QueueUse<'a> {
    writers: Vec<(usize, &'a QueueRef)>,
    reader: Option<(usize, &'a QueueRef)>,
}

struct PoolDecl {
    shape: Option<(usize, usize)>,
    line: usize,
    col: usize,
}

fn check_ports(t: &TaskLine, info: &TaskInfo) -> Result<(), PipelineError> {
    let check = |n: usize, (lo, hi): (usize, usize), what: &str| {
        if n < lo || n > hi {
            let want = if lo == hi {
                format!("{lo}")
            } else if hi == usize::MAX {
                format!("at least {lo}")
            } else {
                format!("{lo} to {hi}")
            };
            Err(PipelineError::Ports {
                line: t.line,
                col: t.col,
                task: t.command.clone(),
                message: format!("takes {want} {what}, got {n}"),
            })
        } else {
            Ok(())
        }
    };
    check(t.inputs.len(), info.inputs, "input queue(s) ('<name')")?;
    check(t.outputs.len(), info.outputs, "output queue(s) ('>name')")
}

/// Bound arguments, the line's priority override and each argument's column.
type Bound = (Args, Option<Priority>, HashMap<String, usize>);

fn bind_args(t: &TaskLine, info: &TaskInfo) -> Result<Bound, PipelineError> {
    let mut args = Args::default();
    let mut cols = HashMap::new();
    let mut prio = None;
    let mut positional = info.args.iter();
    let bad = |col: usize, message: String| PipelineError::BadArgument {
        line: t.line,
        col,
        task: t.command.clone(),
        message,
    };
    for a in &t.args {
        let name = match &a.key {
            Some(k) if k == "priority" => {
                prio = Some(
                    a.value
                        .parse::<Priority>()
                        .map_err(|e| bad(a.col, format!("priority={}: {e}", a.value)))?,
                );
                continue;
            }
            Some(k) => {
                if !info.args.iter().any(|d| &d.name == k) {
                    let known: Vec<_> = info.args.iter().map(|d| d.name.as_str()).collect();
                    return Err(bad(
                        a.col,
                        format!(
                            "unknown argument '{k}'; it takes: {}",
                            if known.is_empty() {
                                "no arguments".to_string()
                            } else {
                                known.join(", ")
                            }
                        ),
                    ));
                }
                k.clone()
            }
            None => match positional.next() {
                Some(d) => d.name.clone(),
                None => {
                    return Err(bad(
                        a.col,
                        format!(
                            "too many positional arguments ('{}'); it takes {}",
                            a.value,
                            info.args.len()
                        ),
                    ))
                }
            },
        };
        if cols.insert(name.clone(), a.col).is_some() {
            return Err(bad(a.col, format!("argument '{name}' given twice")));
        }
        args.insert(name, a.value.clone());
    }
    for d in &info.args {
        if args.get(&d.name).is_none() {
            if let Some(def) = &d.default {
                args.insert(d.name.clone(), def.clone());
            } else if d.required {
                return Err(bad(
                    t.col,
                    format!("missing argument {}=... ({})", d.name, d.doc),
                ));
            }
        }
    }
    Ok((args, prio, cols))
}

/// Checks `spec` and builds the graph; nothing runs yet.
pub(crate) fn build(spec: &Spec, registry: &Registry) -> Result<Graph, PipelineError> {
    let mut infos = Vec::new();
    for t in &spec.tasks {
        let Some((info, _)) = registry.get(&t.command) else {
            return Err(PipelineError::UnknownTask {
                line: t.line,
                col: t.col,
                name: t.command.clone(),
                known: registry.names(),
            });
        };
        check_ports(t, info)?;
        infos.push(info);
    }

    // Queues: one reader, at least one writer.
    let mut uses: BTreeMap<&str, QueueUse> = BTreeMap::new();
    for (i, t) in spec.tasks.iter().enumerate() {
        for q in &t.outputs {
            let u = uses.entry(&q.name).or_insert(QueueUse {
                writers: vec![],
                reader: None,
            });
            u.writers.push((i, q));
        }
        for q in &t.inputs {
            let u = uses.entry(&q.name).or_insert(QueueUse {
                writers: vec![],
                reader: None,
            });
            if let Some((r, _)) = u.reader {
                return Err(PipelineError::TwoReaders {
                    line: q.line,
                    col: q.col,
                    queue: q.name.clone(),
                    first: spec.tasks[r].line,
                });
            }
            u.reader = Some((i, q));
        }
    }
    // Report problems in text order.
    let mut problems: Vec<PipelineError> = Vec::new();
    for (name, u) in &uses {
        if u.reader.is_none() {
            let q = u.writers[0].1;
            problems.push(PipelineError::NoReader {
                line: q.line,
                col: q.col,
                queue: name.to_string(),
            });
        }
        if u.writers.is_empty() {
            let q = u.reader.expect("a queue is mentioned").1;
            problems.push(PipelineError::NoWriter {
                line: q.line,
                col: q.col,
                queue: name.to_string(),
            });
        }
    }
    if let Some(p) = problems.into_iter().min_by_key(|p| p.position()) {
        return Err(p);
    }
    let qnames: Vec<&str> = uses.keys().copied().collect();
    let qindex: HashMap<&str, usize> = qnames.iter().enumerate().map(|(i, n)| (*n, i)).collect();

    check_cycles(spec, &uses, &qindex)?;

    // Free lists: declared once with a shape, possibly referenced elsewhere.
    let mut decls: BTreeMap<String, PoolDecl> = BTreeMap::new();
    let mut queue_pool: HashMap<&str, (String, usize, usize)> = HashMap::new();
    for t in &spec.tasks {
        for q in t.inputs.iter().chain(&t.outputs) {
            let Some(p) = &q.pool else { continue };
            if let Some((other, l, _)) = queue_pool.get(q.name.as_str()) {
                if other != &p.name {
                    return Err(PipelineError::PoolDeclaration {
                        line: p.line,
                        col: p.col,
                        pool: p.name.clone(),
                        message: format!(
                            "queue '{}' already uses free list '{other}' (line {l})",
                            q.name
                        ),
                    });
                }
            }
            queue_pool.insert(&q.name, (p.name.clone(), p.line, p.col));
            let d = decls.entry(p.name.clone()).or_insert(PoolDecl {
                shape: None,
                line: p.line,
                col: p.col,
            });
            if let Some(s) = p.shape {
                match d.shape {
                    Some(old) if old != s => {
                        return Err(PipelineError::PoolDeclaration {
                            line: p.line,
                            col: p.col,
                            pool: p.name.clone(),
                            message: format!(
                                "declared as ({},{}) on line {} and as ({},{}) here",
                                old.0, old.1, d.line, s.0, s.1
                            ),
                        })
                    }
                    Some(_) => {}
                    None => {
                        d.shape = Some(s);
                        d.line = p.line;
                        d.col = p.col;
                    }
                }
            }
        }
    }
    for (name, d) in &decls {
        if d.shape.is_none() {
            return Err(PipelineError::PoolDeclaration {
                line: d.line,
                col: d.col,
                pool: name.clone(),
                message: format!("never given a size; write {name}(count,size) once"),
            });
        }
    }
    let mut pools: Vec<(PoolConfig, usize, usize)> = decls
        .iter()
        .map(|(n, d)| {
            let (c, s) = d.shape.expect("checked above");
            (PoolConfig::new(n.clone(), c, s), d.line, d.col)
        })
        .collect();
    let mut pool_index: HashMap<String, usize> = pools
        .iter()
        .enumerate()
        .map(|(i, p)| (p.0.name.clone(), i))
        .collect();

    // Pools of each task's outputs: allocating tasks get the declared one or a default.
    let mut task_pools: Vec<Vec<Option<usize>>> = Vec::new();
    for (i, t) in spec.tasks.iter().enumerate() {
        let info = infos[i];
        let mut v = Vec::new();
        for q in &t.outputs {
            let p = match queue_pool.get(q.name.as_str()) {
                Some((pn, _, _)) => Some(pool_index[pn]),
                None if info.allocates => {
                    let name = format!("{}.pool", q.name);
                    let idx = *pool_index.entry(name.clone()).or_insert_with(|| {
                        pools.push((
                            PoolConfig::new(name, info.default_pool.0, info.default_pool.1),
                            q.line,
                            q.col,
                        ));
                        pools.len() - 1
                    });
                    Some(idx)
                }
                None => None,
            };
            v.push(if info.allocates { p } else { None });
        }
        task_pools.push(v);
    }
    check_pool_sizes(spec, &infos, &task_pools, &pools, &uses)?;

    // Build the tasks.
    let mut host = HostPorts::default();
    let mut tasks = Vec::new();
    for (i, t) in spec.tasks.iter().enumerate() {
        let info = infos[i];
        let (args, prio, cols) = bind_args(t, info)?;
        let (_, factory) = registry.get(&t.command).expect("looked up above");
        let mut b = Build {
            inputs: t.inputs.len(),
            outputs: t.outputs.len(),
            task_id: i,
            host: &mut host,
        };
        let task = factory(&args, &mut b).map_err(|e| PipelineError::BadArgument {
            line: t.line,
            col: e
                .arg
                .as_ref()
                .and_then(|a| cols.get(a).copied())
                .unwrap_or(t.col),
            task: t.command.clone(),
            message: e.message,
        })?;
        tasks.push(NodeTask {
            name: t.command.clone(),
            line: t.line,
            prio: prio.unwrap_or(info.priority),
            task,
            inputs: t.inputs.iter().map(|q| qindex[q.name.as_str()]).collect(),
            outputs: t.outputs.iter().map(|q| qindex[q.name.as_str()]).collect(),
            pools: task_pools[i].clone(),
        });
    }
    let queues = qnames
        .iter()
        .map(|n| {
            let u = &uses[n];
            NodeQueue {
                name: n.to_string(),
                reader: u.reader.expect("checked").0,
                writers: u.writers.iter().map(|w| w.0).collect(),
            }
        })
        .collect();
    Ok(Graph {
        tasks,
        queues,
        pools: pools.into_iter().map(|p| p.0).collect(),
        host,
    })
}

fn check_cycles(
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
fn check_pool_sizes(
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
