//! `offhost tasks`: the tasks a pipeline may use, with their arguments.

use offhost_engine::{Registry, TaskInfo};

/// Arguments of `offhost tasks`.
#[derive(clap::Args, Debug)]
pub struct TasksArgs {
    /// Show only this task.
    name: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Lists the tasks of `registry`.
pub fn run(args: TasksArgs, registry: &Registry) -> anyhow::Result<()> {
    let infos: Vec<&TaskInfo> = registry
        .infos()
        .filter(|i| args.name.as_deref().is_none_or(|n| n == i.name))
        .collect();
    if infos.is_empty() {
        anyhow::bail!(
            "no task named '{}'; known tasks: {}",
            args.name.unwrap_or_default(),
            registry.names().join(", ")
        );
    }
    if args.json {
        let v: Vec<serde_json::Value> = infos.iter().map(|i| i.json()).collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("{}", offhost_engine::SYNTAX);
        for i in infos {
            println!("{}", i.describe());
        }
        print!("{}", registry.hooks_text());
    }
    Ok(())
}
