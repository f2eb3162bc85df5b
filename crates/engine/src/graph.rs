//! Checking a parsed description against the registry and building the task graph.

use std::collections::{BTreeMap, HashMap};

use offhost_units::{Limit, OverLimit};

use crate::budget::Budget;
use crate::error::PipelineError;
use crate::graph_checks::{check_cycles, check_pool_sizes, QueueUse};
use crate::hooks::{HookSite, StatusSource};
use crate::lang::{HookKind, HookRef, Room, Spec, TaskLine};
use crate::pool::PoolConfig;
use crate::ports::HostPorts;
use crate::queue::{GetHook, PutHook};
use crate::registry::{Args, Build, Registry, TaskInfo};
use crate::task::{Priority, Task};

/// One task of a checked graph.
pub(crate) struct NodeTask {
    pub(crate) name: String,
    pub(crate) line: usize,
    /// The engine it is placed on (`@NAME`), if written.
    pub(crate) engine: Option<String>,
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
    /// The hooks its text names (`[put=NAME,get=NAME]`), made from the registry.
    pub(crate) put_hook: Option<PutHook>,
    pub(crate) get_hook: Option<GetHook>,
}

/// A checked graph, ready to start.
pub(crate) struct Graph {
    pub(crate) tasks: Vec<NodeTask>,
    pub(crate) queues: Vec<NodeQueue>,
    pub(crate) pools: Vec<PoolConfig>,
    pub(crate) host: HostPorts,
    /// Bytes of memory its tasks reserved beyond the free lists (`Build::reserve_memory`).
    pub(crate) task_memory: u64,
    /// The statistics its hooks read, connected when it starts.
    pub(crate) status: StatusSource,
}

struct PoolDecl {
    shape: Option<(usize, usize)>,
    room: Room,
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

/// Checks `spec` (within `budget`) and builds the graph, its tasks seeing files through
/// `files`; nothing runs yet.
pub(crate) fn build(
    spec: &Spec,
    registry: &Registry,
    files: &crate::sandbox::Files,
    budget: &Budget,
    blobs: &crate::blobs::Blobs,
) -> Result<Graph, PipelineError> {
    if let Some(t) = spec.tasks.get(budget.tasks) {
        return Err(PipelineError::OverBudget {
            line: t.line,
            col: t.col,
            message: format!("the pipeline has {} tasks", spec.tasks.len()),
            over: OverLimit::new(Limit::MaxTasks, budget.tasks).asked(spec.tasks.len()),
        });
    }
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
        // A queue with a get hook needs no writer: what the hook returns is its stream.
        let fed = u
            .reader
            .is_some_and(|r| r.1.hooks.iter().any(|h| h.kind == HookKind::Get))
            || u.writers
                .iter()
                .any(|w| w.1.hooks.iter().any(|h| h.kind == HookKind::Get));
        if u.writers.is_empty() && !fed {
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
                room: Room::default(),
                line: p.line,
                col: p.col,
            });
            if let Some(s) = p.shape {
                match d.shape {
                    Some(_) if d.room != p.room => {
                        return Err(PipelineError::PoolDeclaration {
                            line: p.line,
                            col: p.col,
                            pool: p.name.clone(),
                            message: format!(
                                "declared with headroom and tailroom {} on line {} and {} here",
                                room_text(d.room),
                                d.line,
                                room_text(p.room)
                            ),
                        })
                    }
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
                        d.room = p.room;
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
            let mut cfg = PoolConfig::new(n.clone(), c, s);
            cfg.headroom = d.room.headroom.unwrap_or(cfg.headroom);
            cfg.tailroom = d.room.tailroom.unwrap_or(cfg.tailroom);
            (cfg, d.line, d.col)
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
    budget
        .check_pools(pools.iter().map(|p| &p.0))
        .map_err(|(cfg, message, over)| {
            let (_, line, col) = pools
                .iter()
                .find(|p| p.0.name == cfg.name)
                .expect("a pool of the list");
            PipelineError::OverBudget {
                line: *line,
                col: *col,
                message: format!("free list '{}': {message}", cfg.name),
                over,
            }
        })?;
    check_pool_sizes(spec, &infos, &task_pools, &pools, &uses)?;

    // Build the tasks; the memory they reserve counts with the free lists' bytes.
    let mut memory = pools
        .iter()
        .map(|p| crate::pool::pool_bytes(&p.0).unwrap_or(u64::MAX))
        .fold(0u64, u64::saturating_add);
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
            files,
            blobs,
            memory: &mut memory,
            memory_limit: budget.pool_bytes,
        };
        let task = factory(&args, &mut b).map_err(|e| {
            let col = (e.arg.as_ref())
                .and_then(|a| cols.get(a).copied())
                .unwrap_or(t.col);
            match e.over {
                Some(over) => PipelineError::OverBudget {
                    line: t.line,
                    col,
                    message: format!("task '{}': {}", t.command, e.message),
                    over,
                },
                None => PipelineError::BadArgument {
                    line: t.line,
                    col,
                    task: t.command.clone(),
                    message: e.message,
                },
            }
        })?;
        // Each task that opens a link to another engine has a thread that wakes it, and
        // registers its waker (`remote::Shared::register`).
        if host.wakers.len() > budget.links {
            return Err(PipelineError::OverBudget {
                line: t.line,
                col: t.col,
                message: format!(
                    "the pipeline's engine-out and call tasks open more than {} links to other engines",
                    budget.links
                ),
                over: OverLimit::new(Limit::MaxTaskLinks, budget.links)
                    .asked(host.wakers.len()),
            });
        }
        tasks.push(NodeTask {
            name: t.command.clone(),
            line: t.line,
            engine: t.engine.as_ref().map(|e| e.name.clone()),
            prio: prio.unwrap_or(info.priority),
            task,
            inputs: t.inputs.iter().map(|q| qindex[q.name.as_str()]).collect(),
            outputs: t.outputs.iter().map(|q| qindex[q.name.as_str()]).collect(),
            pools: task_pools[i].clone(),
        });
    }
    crate::graph_checks::check_own_calls(spec, &uses, &host)?;
    let status = StatusSource::default();
    let mut queues = Vec::with_capacity(qnames.len());
    for n in &qnames {
        let u = &uses[n];
        let (put_hook, get_hook) = hooks_of(n, u, registry, &status)?;
        queues.push(NodeQueue {
            name: n.to_string(),
            reader: u.reader.expect("checked").0,
            writers: u.writers.iter().map(|w| w.0).collect(),
            put_hook,
            get_hook,
        });
    }
    let pool_total = pools
        .iter()
        .map(|p| crate::pool::pool_bytes(&p.0).unwrap_or(u64::MAX))
        .fold(0u64, u64::saturating_add);
    Ok(Graph {
        tasks,
        queues,
        pools: pools.into_iter().map(|p| p.0).collect(),
        host,
        task_memory: memory.saturating_sub(pool_total),
        status,
    })
}

fn room_text(r: Room) -> String {
    let show = |v: Option<usize>| v.map_or("default".to_owned(), |v| v.to_string());
    format!("({}, {})", show(r.headroom), show(r.tailroom))
}

/// The hooks written on queue `name`'s mentions, made from the registry: one of each kind,
/// named the same wherever it is written.
fn hooks_of(
    name: &str,
    u: &QueueUse,
    registry: &Registry,
    status: &StatusSource,
) -> Result<(Option<PutHook>, Option<GetHook>), PipelineError> {
    let mentions = u.writers.iter().chain(u.reader.iter()).map(|m| m.1);
    let mut first: [Option<&HookRef>; 2] = [None, None];
    let mut mentions: Vec<_> = mentions.flat_map(|q| q.hooks.iter()).collect();
    mentions.sort_by_key(|h| (h.line, h.col));
    let bad = |h: &HookRef, message: String| PipelineError::Hook {
        line: h.line,
        col: h.col,
        queue: name.to_owned(),
        message,
    };
    for h in mentions {
        let slot = &mut first[usize::from(h.kind == HookKind::Get)];
        match slot {
            Some(f) if f.name != h.name => {
                return Err(bad(
                    h,
                    format!(
                        "has the {} hook '{}' (line {}); a queue runs one of each kind",
                        h.kind, f.name, f.line
                    ),
                ))
            }
            Some(_) => {}
            None => *slot = Some(h),
        }
    }
    let site = HookSite {
        queue: name.to_owned(),
        status: status.clone(),
    };
    let unknown = |h: &HookRef| {
        let known: Vec<&str> = registry
            .hook_infos()
            .filter(|i| i.kind == h.kind)
            .map(|i| i.name.as_str())
            .collect();
        let known = if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        };
        let what = format!("unknown {} hook '{}'; known: {known}", h.kind, h.name);
        bad(h, what)
    };
    let put = match first[0] {
        Some(h) => Some(registry.put_hook(&h.name).ok_or_else(|| unknown(h))?(&site)),
        None => None,
    };
    let get = match first[1] {
        Some(h) => Some(registry.get_hook(&h.name).ok_or_else(|| unknown(h))?(&site)),
        None => None,
    };
    Ok((put, get))
}
