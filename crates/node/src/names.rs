//! Pipeline names: a pipeline submitted to a daemon with a name (`offhost submit --name
//! NAME`) is reached by that name wherever its id would do: in `status`, `wait` and `stop`,
//! in its channels (`in/NAME/PORT`, `out/NAME/PORT`, `call/NAME/PORT`), and in the
//! `pipeline=` of a `call` or `engine-out` task on another engine. So a caller's file names a
//! service once, and goes on working when the service is started again under a new id.
//!
//! A name is held by one running pipeline at a time; once that pipeline has finished, the
//! name still finds it (for its status) until another pipeline is submitted with it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// The longest pipeline name, in bytes.
pub const MAX_NAME_BYTES: usize = 64;

/// Checks a pipeline name: 1 to [`MAX_NAME_BYTES`] ASCII letters, digits, `-`, `_` and `.`,
/// starting with a letter (so that it is never read as an id, and never holds the `/` that
/// separates a channel name's parts). The error says what is wrong.
pub fn check_name(name: &str) -> Result<(), NameError> {
    let shown = || {
        let mut s: String = name.chars().take(MAX_NAME_BYTES).collect();
        if s.len() < name.len() {
            s.push_str("...");
        }
        format!("{s:?}")
    };
    if name.len() > MAX_NAME_BYTES {
        return Err(NameError::TooLong {
            shown: shown(),
            bytes: name.len(),
        });
    }
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(NameError::NoLetterFirst { shown: shown() });
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(NameError::BadChar { shown: shown(), c });
    }
    Ok(())
}

/// Why a pipeline name or id was refused. `shown` is the name as given, quoted, cut to
/// [`MAX_NAME_BYTES`] characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// Longer than [`MAX_NAME_BYTES`].
    #[error("pipeline name {shown} of {bytes} bytes, over the limit of {MAX_NAME_BYTES}")]
    TooLong {
        /// The name, shown.
        shown: String,
        /// Its length in bytes.
        bytes: usize,
    },
    /// Does not start with a letter.
    #[error("pipeline name {shown} must start with a letter (an id is a number)")]
    NoLetterFirst {
        /// The name, shown.
        shown: String,
    },
    /// Holds a character other than ASCII letters, digits, `-`, `_` and `.`.
    #[error("pipeline name {shown} holds {c:?}: only ASCII letters, digits, '-', '_' and '.'")]
    BadChar {
        /// The name, shown.
        shown: String,
        /// The first character refused.
        c: char,
    },
    /// Digits, but past `u64`.
    #[error("pipeline id {0} is out of range")]
    IdOutOfRange(String),
}

/// A daemon's pipeline, by its id or by its name. In JSON an id is a number and a name a
/// string; in a channel name or a task's `pipeline=`, a name is anything that is not a
/// number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PipelineRef {
    /// The id the daemon gave the pipeline.
    Id(u64),
    /// The name it was submitted with.
    Name(String),
}

impl PipelineRef {
    /// Reads an id (digits) or a name (checked by [`check_name`]).
    pub fn parse(s: &str) -> Result<PipelineRef, NameError> {
        if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
            return s
                .parse()
                .map(PipelineRef::Id)
                .map_err(|_| NameError::IdOutOfRange(s.to_string()));
        }
        check_name(s)?;
        Ok(PipelineRef::Name(s.to_string()))
    }
}

impl std::str::FromStr for PipelineRef {
    type Err = NameError;

    fn from_str(s: &str) -> Result<Self, NameError> {
        PipelineRef::parse(s)
    }
}

impl fmt::Display for PipelineRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PipelineRef::Id(id) => write!(f, "{id}"),
            PipelineRef::Name(n) => f.write_str(n),
        }
    }
}

impl From<u64> for PipelineRef {
    fn from(id: u64) -> Self {
        PipelineRef::Id(id)
    }
}

/// As [`PipelineRef::parse`] reads it, and what that refuses as a name, unchecked (the
/// daemon checks it): so `"7".into()` is pipeline 7, never a name "7" that no pipeline can
/// hold (clap prefers `From<&str>` to `FromStr`).
impl From<&str> for PipelineRef {
    fn from(s: &str) -> Self {
        PipelineRef::parse(s).unwrap_or_else(|_| PipelineRef::Name(s.to_string()))
    }
}

/// The names of a daemon's pipelines, both ways. It holds no more names than the daemon
/// keeps pipelines (the daemon drops the names of those it forgets).
#[derive(Debug, Default)]
pub(crate) struct Names {
    map: Mutex<NameMaps>,
}

/// Name to id, and id to name (`status` and `list` ask the way round).
#[derive(Debug, Default)]
struct NameMaps {
    ids: HashMap<String, u64>,
    names: HashMap<u64, String>,
}

impl Names {
    fn lock(&self) -> std::sync::MutexGuard<'_, NameMaps> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The id of the pipeline last submitted as `name`.
    pub(crate) fn get(&self, name: &str) -> Option<u64> {
        self.lock().ids.get(name).copied()
    }

    /// The name pipeline `id` was submitted with, while it holds it.
    pub(crate) fn name_of(&self, id: u64) -> Option<String> {
        self.lock().names.get(&id).cloned()
    }

    /// Gives `name` to pipeline `id` (from the one that held it, which has finished).
    pub(crate) fn set(&self, name: &str, id: u64) {
        let mut m = self.lock();
        if let Some(old) = m.ids.insert(name.to_string(), id) {
            m.names.remove(&old);
        }
        m.names.insert(id, name.to_string());
    }

    /// Keeps the names of the pipelines `kept` says are kept.
    pub(crate) fn retain(&self, kept: impl Fn(u64) -> bool) {
        let mut m = self.lock();
        m.ids.retain(|_, id| kept(*id));
        m.names.retain(|id, _| kept(*id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_ids_are_told_from_names() {
        assert_eq!(PipelineRef::parse("42"), Ok(PipelineRef::Id(42)));
        assert_eq!(
            PipelineRef::parse("recon-2.b_x"),
            Ok(PipelineRef::Name("recon-2.b_x".into()))
        );
        let long = "a".repeat(MAX_NAME_BYTES + 1);
        let first = |e: &NameError| matches!(e, NameError::NoLetterFirst { .. });
        let holds =
            |c: char| move |e: &NameError| matches!(e, NameError::BadChar { c: x, .. } if *x == c);
        type Is<'a> = &'a dyn Fn(&NameError) -> bool;
        let cases: [(&str, Is); 9] = [
            ("", &first),
            ("9x", &first),
            ("-x", &first),
            ("a/b", &holds('/')),
            ("a b", &holds(' ')),
            ("é", &first),
            ("aé", &holds('é')),
            (&long, &|e| {
                matches!(e, NameError::TooLong { bytes: 65, .. })
            }),
            ("99999999999999999999999", &|e| {
                matches!(e, NameError::IdOutOfRange(_))
            }),
        ];
        for (bad, is) in cases {
            let e = PipelineRef::parse(bad).unwrap_err();
            assert!(is(&e), "{bad:?}: {e}");
        }
        // The text says what is wrong.
        let e = PipelineRef::parse("a/b").unwrap_err().to_string();
        assert_eq!(
            e,
            "pipeline name \"a/b\" holds '/': only ASCII letters, digits, '-', '_' and '.'"
        );
        assert!(PipelineRef::parse(&"a".repeat(MAX_NAME_BYTES)).is_ok());
        // JSON: numbers are ids, strings names.
        let r: PipelineRef = serde_json::from_str("7").unwrap();
        assert_eq!(r, PipelineRef::Id(7));
        let r: PipelineRef = serde_json::from_str("\"svc\"").unwrap();
        assert_eq!(r.to_string(), "svc");
        // From a &str as parse reads it: digits are an id.
        assert_eq!(PipelineRef::from("7"), PipelineRef::Id(7));
        assert_eq!(PipelineRef::from("svc"), PipelineRef::Name("svc".into()));
    }

    #[test]
    fn a_name_finds_the_pipeline_last_given_it() {
        let names = Names::default();
        names.set("svc", 1);
        names.set("other", 2);
        assert_eq!(names.get("svc"), Some(1));
        names.set("svc", 3);
        assert_eq!((names.get("svc"), names.name_of(1)), (Some(3), None));
        assert_eq!(names.name_of(3).as_deref(), Some("svc"));
        names.retain(|id| id != 2);
        assert_eq!(names.get("other"), None);
    }
}
