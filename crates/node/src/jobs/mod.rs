//! Jobs as the commands run them: a pipeline file run here with its host channels bridged to
//! files ([`local`]), submitted to one daemon ([`daemon`]) or placed over several
//! ([`placed`]), and the statistics tables they print ([`table`]). The binary parses flags
//! and prints what these return.
//!
//! Host channels meet files by name: `--out NAME=PATH` / `--in NAME=PATH` ([`bindings`]);
//! `-` is standard output or input; an unbound `host-out` goes to `NAME.out` in the working
//! directory (a name that is no file name, such as `../x`, must be bound: the names may come
//! from a daemon's reply), the only `host-in` reads standard input, and several unbound
//! `host-in`s are an error.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};

pub mod daemon;
pub mod local;
pub mod parts_view;
pub mod placed;
pub mod streams;
pub mod table;

pub use streams::Streams;

/// A job submitted detached: it outlives its submitter (see [`crate::daemon::keep`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Detach {
    /// How long it may run; `None`: as long as the engine lets a pipeline run.
    pub lifetime: Option<std::time::Duration>,
}

/// What went wrong with a job; each names the file, channel or engine concerned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// A `--out`/`--in` binding is wrong.
    #[error("{0}")]
    Binding(String),
    /// A file could not be opened, read or written.
    #[error("{what} {path}: {source}")]
    File {
        /// What was done (`create`, `open`, `read`, `write`).
        what: &'static str,
        /// The file.
        path: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The pipeline text is wrong.
    #[error("{path}: {source}")]
    Pipeline {
        /// The file.
        path: String,
        /// What is wrong.
        source: offhost_engine::PipelineError,
    },
    /// The placements cannot work.
    #[error("{path}: {source}")]
    Placement {
        /// The file.
        path: String,
        /// What is wrong.
        source: crate::placement::PlacementError,
    },
    /// An engine could not be reached.
    #[error("connect to {url}: {source}")]
    Connect {
        /// Its URL.
        url: String,
        /// Why not.
        source: crate::daemon::DaemonError,
    },
    /// An engine answered wrongly or went away.
    #[error("engine {engine}: {source}")]
    Engine {
        /// The engine (its name and URL).
        engine: String,
        /// What failed.
        source: crate::daemon::DaemonError,
    },
    /// The job ran and failed: a task, or an engine that went away.
    #[error("{0}")]
    Failed(String),
    /// A bridging thread panicked.
    #[error("a host channel thread panicked")]
    Panicked,
}

/// Where the user's host channels go: `(NAME, PATH)` each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bindings {
    /// `host-out` channels and their files (`-`: standard output).
    pub outputs: Vec<(String, String)>,
    /// `host-in` channels and their files (`-`: standard input).
    pub inputs: Vec<(String, String)>,
}

impl Bindings {
    /// How many outputs go to standard output.
    pub fn stdout_outputs(&self) -> usize {
        self.outputs.iter().filter(|(_, p)| p == "-").count()
    }
}

fn parse(
    list: &[String],
    what: &str,
    names: &[String],
) -> Result<BTreeMap<String, String>, JobError> {
    let mut m = BTreeMap::new();
    for b in list {
        let (n, p) = b
            .split_once('=')
            .ok_or_else(|| JobError::Binding(format!("--{what} {b}: expected NAME=PATH")))?;
        if !names.iter().any(|x| x == n) {
            let have = if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            };
            return Err(JobError::Binding(format!(
                "--{what} {b}: the pipeline has no host-{what} channel '{n}' (it has: {have})"
            )));
        }
        m.insert(n.to_string(), p.to_string());
    }
    Ok(m)
}

/// The files of the host channels `host_out` and `host_in` from `--out` (`outs`) and `--in`
/// (`ins`) bindings `NAME=PATH`, with the defaults of the module's doc.
pub fn bindings(
    outs: &[String],
    ins: &[String],
    host_out: &[String],
    host_in: &[String],
) -> Result<Bindings, JobError> {
    let mut o = parse(outs, "out", host_out)?;
    let mut i = parse(ins, "in", host_in)?;
    for n in host_out {
        if o.contains_key(n) {
            continue;
        }
        // The names come from the pipeline, or from a daemon's reply: NAME.out only where it
        // names a file here, never one elsewhere.
        if n.is_empty() || n == "." || n == ".." || n.contains(['/', '\0']) {
            return Err(JobError::Binding(format!(
                "host-out channel {n:?} is no file name, so it has no default file (NAME.out): pass --out NAME=PATH"
            )));
        }
        o.insert(n.clone(), format!("{n}.out"));
    }
    for n in host_in {
        if !i.contains_key(n) {
            if host_in.len() == 1 {
                i.insert(n.clone(), "-".into());
            } else {
                return Err(JobError::Binding(format!(
                    "host-in channel '{n}' has no source: pass --in {n}=PATH ('-' for standard input)"
                )));
            }
        }
    }
    Ok(Bindings {
        outputs: o.into_iter().collect(),
        inputs: i.into_iter().collect(),
    })
}

/// Opens `path` for a host-out channel's bytes (`-`: standard output).
pub fn create(path: &str) -> Result<Box<dyn Write + Send>, JobError> {
    Ok(if path == "-" {
        Box::new(std::io::stdout())
    } else {
        Box::new(File::create(path).map_err(|source| JobError::File {
            what: "create",
            path: path.into(),
            source,
        })?)
    })
}

/// Opens `path` for a host-in channel's bytes (`-`: standard input).
/// The largest module file `--module` reads (a daemon takes at most its
/// `DaemonLimits::module_bytes`, 64 MiB by default).
pub const MAX_MODULE_FILE: u64 = 1 << 30;

/// The modules of `--module NAME=FILE` flags, read: (NAME, bytes).
pub fn modules(list: &[String]) -> Result<Vec<(String, Vec<u8>)>, JobError> {
    list.iter()
        .map(|m| {
            let (name, path) = m.split_once('=').ok_or_else(|| {
                JobError::Binding(format!(
                    "--module {m}: NAME=FILE (a module's name and its .wasm file)"
                ))
            })?;
            let file = |source| JobError::File {
                what: "read",
                path: path.into(),
                source,
            };
            let len = std::fs::metadata(path).map_err(file)?.len();
            if len > MAX_MODULE_FILE {
                return Err(JobError::Binding(format!(
                    "--module {m}: {len} bytes, more than the {MAX_MODULE_FILE} a module may have"
                )));
            }
            Ok((name.to_string(), std::fs::read(path).map_err(file)?))
        })
        .collect()
}

/// Opens `path` for reading (`-`: standard input).
pub fn open(path: &str) -> Result<Box<dyn Read + Send>, JobError> {
    Ok(if path == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(File::open(path).map_err(|source| JobError::File {
            what: "open",
            path: path.into(),
            source,
        })?)
    })
}

fn io(what: &'static str, path: &str) -> impl FnOnce(std::io::Error) -> JobError {
    let path = path.to_owned();
    move |source| JobError::File { what, path, source }
}

/// A thread writing a host-out channel's bytes; its result once the channel ended.
pub type Bridge = std::thread::JoinHandle<Result<(), JobError>>;

/// Joins `bridges`, returning the first error.
pub fn join(bridges: Vec<Bridge>) -> Result<(), JobError> {
    let mut first = None;
    for b in bridges {
        if let Err(e) = b.join().map_err(|_| JobError::Panicked).and_then(|r| r) {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Reads `path` in 64 KiB pieces into `send` until end of file or until `send` refuses; not
/// joined (a read from a terminal may never return once the pipeline has ended).
pub fn pump_in(
    path: String,
    mut r: Box<dyn Read + Send>,
    send: impl Fn(&[u8]) -> bool + Send + 'static,
    close: impl FnOnce() + Send + 'static,
) {
    std::thread::spawn(move || -> Result<(), JobError> {
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let k = r.read(&mut buf).map_err(io("read", &path))?;
            if k == 0 {
                close();
                return Ok(());
            }
            if !send(&buf[..k]) {
                return Ok(());
            }
        }
    });
}

/// Writes what `next` yields to `w` (the file `path`) on a thread of its own.
pub fn pump_out<B: AsRef<[u8]>>(
    path: String,
    mut w: Box<dyn Write + Send>,
    mut next: impl FnMut() -> Result<Option<B>, JobError> + Send + 'static,
) -> Bridge {
    std::thread::spawn(move || {
        while let Some(b) = next()? {
            w.write_all(b.as_ref()).map_err(io("write", &path))?;
        }
        w.flush().map_err(io("write", &path))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_defaults_to_a_file_here_only() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let b = bindings(&[], &[], &names(&["res", "a.b"]), &[]).unwrap();
        assert_eq!(
            b.outputs,
            [
                ("a.b".to_string(), "a.b.out".to_string()),
                ("res".to_string(), "res.out".to_string())
            ]
        );
        for bad in ["../x", "/etc/x", "..", "a/b", "x\0"] {
            let e = bindings(&[], &[], &names(&[bad]), &[])
                .map(drop)
                .unwrap_err();
            assert!(e.to_string().contains("--out NAME=PATH"), "{bad:?}: {e}");
            // Bound by the user, it goes where they say.
            let b = bindings(&[format!("{bad}=y.bin")], &[], &names(&[bad]), &[]).unwrap();
            assert_eq!(b.outputs, [(bad.to_string(), "y.bin".to_string())]);
        }
    }
}
