//! Named byte strings that come with a pipeline (a WebAssembly module a client sent beside
//! its text, `offhost submit --module NAME=FILE`), which its tasks ask for by name while they
//! are built ([`Build::blob`](crate::Build::blob)), before the files the sandbox grants.

use std::collections::BTreeMap;
use std::sync::Arc;

/// Named byte strings, shared by reference.
#[derive(Debug, Clone, Default)]
pub struct Blobs(BTreeMap<String, Arc<[u8]>>);

impl Blobs {
    /// No blobs.
    pub fn new() -> Blobs {
        Blobs::default()
    }

    /// Adds (or replaces) `name`.
    pub fn insert(&mut self, name: &str, bytes: Arc<[u8]>) {
        self.0.insert(name.to_string(), bytes);
    }

    /// The blob called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<[u8]>> {
        self.0.get(name)
    }

    /// Bytes of all blobs together.
    pub fn bytes(&self) -> u64 {
        self.0.values().map(|b| b.len() as u64).sum()
    }

    /// The blobs' names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}
