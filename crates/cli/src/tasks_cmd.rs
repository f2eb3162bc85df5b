//! `offhost tasks`: the tasks a pipeline may use, with their arguments.

use std::fmt::Write as _;

use offhost_engine::{Registry, TaskInfo};
use serde::Serialize;

/// Arguments of `offhost tasks`.
#[derive(clap::Args, Debug)]
pub struct TasksArgs {
    /// Show only this task.
    name: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct ArgJson<'a> {
    name: &'a str,
    default: Option<&'a str>,
    required: bool,
    doc: &'a str,
}

#[derive(Serialize)]
struct TaskJson<'a> {
    name: &'a str,
    summary: &'a str,
    inputs: [usize; 2],
    outputs: [usize; 2],
    allocates: bool,
    default_pool: Option<[usize; 2]>,
    priority: String,
    args: Vec<ArgJson<'a>>,
}

fn ports((lo, hi): (usize, usize)) -> String {
    match (lo, hi) {
        (a, b) if a == b => a.to_string(),
        (a, b) => format!("{a}-{b}"),
    }
}

fn describe(i: &TaskInfo) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{:<10} {}", i.name, i.summary);
    let mut line = format!(
        "           inputs {}, outputs {}, class {}",
        ports(i.inputs),
        ports(i.outputs),
        i.priority
    );
    if i.allocates {
        let _ = write!(
            line,
            ", default free list ({},{})",
            i.default_pool.0, i.default_pool.1
        );
    }
    let _ = writeln!(s, "{line}");
    for a in &i.args {
        let val = match (&a.default, a.required) {
            (_, true) => "(required)".to_string(),
            (Some(d), _) => format!("={d}"),
            (None, _) => "(optional)".to_string(),
        };
        let _ = writeln!(
            s,
            "             {:<20} {}",
            format!("{}{val}", a.name),
            a.doc
        );
    }
    s
}

/// Lists the tasks of `registry`.
pub fn run(args: TasksArgs, registry: &Registry) -> anyhow::Result<()> {
    let infos: Vec<&TaskInfo> = registry
        .infos()
        .filter(|i| args.name.as_deref().map_or(true, |n| n == i.name))
        .collect();
    if infos.is_empty() {
        anyhow::bail!(
            "no task named '{}'; known tasks: {}",
            args.name.unwrap_or_default(),
            registry.names().join(", ")
        );
    }
    if args.json {
        let v: Vec<TaskJson> = infos
            .iter()
            .map(|i| TaskJson {
                name: &i.name,
                summary: &i.summary,
                inputs: [i.inputs.0, i.inputs.1],
                outputs: [i.outputs.0, i.outputs.1],
                allocates: i.allocates,
                default_pool: i.allocates.then_some([i.default_pool.0, i.default_pool.1]),
                priority: i.priority.to_string(),
                args: i
                    .args
                    .iter()
                    .map(|a| ArgJson {
                        name: &a.name,
                        default: a.default.as_deref(),
                        required: a.required,
                        doc: &a.doc,
                    })
                    .collect(),
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("Pipeline lines: command args <inputs >outputs; a queue may be name:free_list(count,size).");
        println!("Any task also takes priority=interrupt|normal|background.\n");
        for i in infos {
            println!("{}", describe(i));
        }
    }
    Ok(())
}
