//! Host channels that the caller's own code serves instead of files: a reader for a
//! `host-in`, a writer for a `host-out`, by channel name (`offhost pet replay` paces its
//! shares of a list-mode file this way, and times the images that come back).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::Mutex;

use super::JobError;

type Readers = HashMap<String, Box<dyn Read + Send>>;
type Writers = HashMap<String, Box<dyn Write + Send>>;
type Routed = HashMap<String, Box<dyn FnOnce(u64) + Send>>;

/// Readers and writers for host channels, each taken once by the job that bridges it. A
/// channel bound here still needs a binding (`NAME=WHAT`, where WHAT only names it in
/// messages).
#[derive(Default)]
pub struct Streams {
    inputs: Mutex<Readers>,
    outputs: Mutex<Writers>,
    routed: Mutex<Routed>,
}

impl std::fmt::Debug for Streams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys = |m: Vec<&String>| m.into_iter().cloned().collect::<Vec<_>>();
        let i = self.inputs.lock().unwrap_or_else(|e| e.into_inner());
        let o = self.outputs.lock().unwrap_or_else(|e| e.into_inner());
        f.debug_struct("Streams")
            .field("inputs", &keys(i.keys().collect()))
            .field("outputs", &keys(o.keys().collect()))
            .finish()
    }
}

impl Streams {
    /// `r` is what host-in channel `name` reads.
    pub fn input(self, name: &str, r: impl Read + Send + 'static) -> Streams {
        let mut m = self.inputs.lock().unwrap_or_else(|e| e.into_inner());
        m.insert(name.to_owned(), Box::new(r));
        drop(m);
        self
    }

    /// Host-in channel `name` of a placed job is fed some other way (through an off-host
    /// engine, say): instead of bridging it, the job calls `fed` with the id of the
    /// pipeline that has it, once that part is submitted (before the job waits for it).
    pub fn routed(self, name: &str, fed: impl FnOnce(u64) + Send + 'static) -> Streams {
        let mut m = self.routed.lock().unwrap_or_else(|e| e.into_inner());
        m.insert(name.to_owned(), Box::new(fed));
        drop(m);
        self
    }

    /// `w` is where host-out channel `name`'s buffers go, one `write_all` per message.
    pub fn output(self, name: &str, w: impl Write + Send + 'static) -> Streams {
        let mut m = self.outputs.lock().unwrap_or_else(|e| e.into_inner());
        m.insert(name.to_owned(), Box::new(w));
        drop(m);
        self
    }
}

/// The caller's own feeder of host-in `name`, if it routes that input itself.
pub(crate) fn take_routed(
    streams: Option<&Streams>,
    name: &str,
) -> Option<Box<dyn FnOnce(u64) + Send>> {
    let mut m = streams?.routed.lock().unwrap_or_else(|e| e.into_inner());
    m.remove(name)
}

/// The reader of host-in `name`: the caller's, else the file `path`.
pub(crate) fn open_in(
    streams: Option<&Streams>,
    name: &str,
    path: &str,
) -> Result<Box<dyn Read + Send>, JobError> {
    let own = streams.and_then(|s| {
        let mut m = s.inputs.lock().unwrap_or_else(|e| e.into_inner());
        m.remove(name)
    });
    own.map_or_else(|| super::open(path), Ok)
}

/// The writer of host-out `name`: the caller's, else the file `path`.
pub(crate) fn create_out(
    streams: Option<&Streams>,
    name: &str,
    path: &str,
) -> Result<Box<dyn Write + Send>, JobError> {
    let own = streams.and_then(|s| {
        let mut m = s.outputs.lock().unwrap_or_else(|e| e.into_inner());
        m.remove(name)
    });
    own.map_or_else(|| super::create(path), Ok)
}
