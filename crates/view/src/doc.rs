//! What the view says of a pipeline, as JSON ([`pipeline_doc`], [`list_doc`]), and the
//! changes between two sayings ([`Flat`], [`Flat::changes`]) that the push channel carries.

use std::collections::BTreeMap;

use offhost_engine::watch::{Look, Phase};
use offhost_engine::{Item, Shown};
use serde_json::{json, Map, Value};

/// One pipeline of the list: id, name, phase and error.
pub fn list_entry(l: &Look) -> Value {
    json!({
        "id": l.id,
        "name": l.name,
        "state": phase(l.phase),
        "error": l.error,
        "elapsed_s": l.stats.elapsed_s,
    })
}

/// The list of pipelines, by id.
pub fn list_doc(looks: &[Look]) -> Value {
    Value::Array(looks.iter().map(list_entry).collect())
}

/// The name of a phase on the wire: `running`, `finished`, `failed`.
pub fn phase(p: Phase) -> &'static str {
    match p {
        Phase::Running => "running",
        Phase::Finished => "finished",
        Phase::Failed => "failed",
    }
}

/// Everything about one pipeline: its shape, its statistics (the typed statistics a
/// daemon's `status` answers with), state, error and what its tasks show (pictures by their
/// change count: their PNG is fetched by URL).
pub fn pipeline_doc(l: &Look, items: &[Item]) -> Value {
    let shown: Vec<Value> = items
        .iter()
        .map(|i| match &i.shown {
            Shown::Picture(p) => json!({
                "task": i.task, "name": i.name, "seq": i.seq, "kind": "picture",
                "width": p.width, "height": p.height,
            }),
            Shown::Meters(m) => json!({
                "task": i.task, "name": i.name, "seq": i.seq, "kind": "meters", "meters": m,
            }),
        })
        .collect();
    json!({
        "id": l.id,
        "name": l.name,
        "state": phase(l.phase),
        "error": l.error,
        "shape": &*l.shape,
        "stats": l.stats,
        "shown": shown,
    })
}

/// A JSON value as a map from paths (`stats/tasks/3/bytes_out`) to its scalars, arrays and
/// objects flattened: what a client keeps, and what changes are said against.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Flat(pub BTreeMap<String, Value>);

impl Flat {
    /// `v` flattened under `prefix`.
    pub fn of(prefix: &str, v: &Value) -> Flat {
        let mut f = Flat::default();
        f.add(prefix.to_string(), v);
        f
    }

    fn add(&mut self, path: String, v: &Value) {
        let join = |k: &str| {
            if path.is_empty() {
                k.to_string()
            } else {
                format!("{path}/{k}")
            }
        };
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, v) in m {
                    self.add(join(k), v);
                }
            }
            Value::Array(a) if !a.is_empty() => {
                for (i, v) in a.iter().enumerate() {
                    self.add(join(&i.to_string()), v);
                }
            }
            _ => {
                self.0.insert(path, v.clone());
            }
        }
    }

    /// Adds the paths of `other`.
    pub fn extend(&mut self, other: Flat) {
        self.0.extend(other.0);
    }

    /// What turns `before` into `self`: `{"set": {path: value}, "del": [path]}`, or `None`
    /// when nothing changed.
    pub fn changes(&self, before: &Flat) -> Option<Value> {
        let mut set = Map::new();
        for (k, v) in &self.0 {
            if before.0.get(k) != Some(v) {
                set.insert(k.clone(), v.clone());
            }
        }
        let del: Vec<Value> = before
            .0
            .keys()
            .filter(|k| !self.0.contains_key(*k))
            .map(|k| Value::String(k.clone()))
            .collect();
        if set.is_empty() && del.is_empty() {
            return None;
        }
        Some(json!({ "set": set, "del": del }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_carry_only_what_changed() {
        let a = Flat::of("p", &json!({"x": 1, "t": [{"n": 1}, {"n": 2}], "e": {}}));
        assert_eq!(a.0.get("p/t/1/n"), Some(&json!(2)));
        assert_eq!(a.0.get("p/e"), Some(&json!({})));
        let b = Flat::of("p", &json!({"x": 1, "t": [{"n": 1}, {"n": 3}]}));
        assert_eq!(
            b.changes(&a),
            Some(json!({"set": {"p/t/1/n": 3}, "del": ["p/e"]}))
        );
        assert_eq!(b.changes(&b), None);
        assert_eq!(
            b.changes(&Flat::default()).unwrap()["set"]
                .as_object()
                .unwrap()
                .len(),
            3
        );
    }
}
