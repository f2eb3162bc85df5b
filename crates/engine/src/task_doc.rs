//! How `offhost tasks` shows a task: a few lines of text, or JSON.

use std::fmt::Write as _;

use serde::Serialize;

use crate::registry::TaskInfo;

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

impl TaskInfo {
    /// The task, its ports, class, default free list and arguments, as text.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{:<10} {}", self.name, self.summary);
        let mut line = format!(
            "           inputs {}, outputs {}, class {}",
            ports(self.inputs),
            ports(self.outputs),
            self.priority
        );
        if self.allocates {
            let (c, z) = self.default_pool;
            let _ = write!(line, ", default free list ({c},{z})");
        }
        let _ = writeln!(s, "{line}");
        for a in &self.args {
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

    /// The same as JSON: `name`, `summary`, `inputs` and `outputs` ([min, max]), `allocates`,
    /// `default_pool`, `priority`, `args` (`name`, `default`, `required`, `doc`).
    pub fn json(&self) -> serde_json::Value {
        let t = TaskJson {
            name: &self.name,
            summary: &self.summary,
            inputs: [self.inputs.0, self.inputs.1],
            outputs: [self.outputs.0, self.outputs.1],
            allocates: self.allocates,
            default_pool: self
                .allocates
                .then_some([self.default_pool.0, self.default_pool.1]),
            priority: self.priority.to_string(),
            args: self
                .args
                .iter()
                .map(|a| ArgJson {
                    name: &a.name,
                    default: a.default.as_deref(),
                    required: a.required,
                    doc: &a.doc,
                })
                .collect(),
        };
        serde_json::to_value(t).expect("serialisable")
    }
}

/// The language's lines in brief, as `offhost tasks` prints them above the tasks.
pub const SYNTAX: &str = "\
Pipeline lines: command args <inputs >outputs; a queue may be name:free_list(count,size),
with headroom=N,tailroom=N after the size, and name[put=HOOK,get=HOOK] names its hooks.
Any task also takes priority=interrupt|normal|background, and @NAME places it on an engine.
";

impl crate::HookInfo {
    /// The hook as a line of text: `put log   what it does`.
    pub fn describe(&self) -> String {
        format!("{} {:<10} {}", self.kind, self.name, self.doc)
    }
}

impl crate::Registry {
    /// The hooks a queue may name, a line each under a heading (empty without any).
    pub fn hooks_text(&self) -> String {
        let mut s = String::new();
        for h in self.hook_infos() {
            if s.is_empty() {
                s.push_str("Queue hooks:\n");
            }
            let _ = writeln!(s, "  {}", h.describe());
        }
        s
    }
}
