//! The sampler: one thread that looks at every pipeline once a period while anybody watches,
//! and hands the look to the push channels (a [`Snapshot`] on a `watch` channel, so a slow
//! client only ever misses looks, never queues them). It holds each pipeline's board
//! watched meanwhile, so that tasks draw their pictures only then.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use offhost_engine::watch::{Look, Watched};
use offhost_engine::{Item, Picture, Shown, Watching};
use serde_json::Value;

use crate::doc::{list_doc, pipeline_doc, Flat};

/// Every pipeline at one moment, with what its tasks show.
#[derive(Default)]
pub(crate) struct Snapshot {
    pub(crate) looks: Vec<Look>,
    pub(crate) items: HashMap<u64, Vec<Item>>,
}

impl Snapshot {
    /// A fresh look at everything `source` runs.
    pub(crate) fn take(source: &dyn Watched) -> Snapshot {
        Snapshot::of(source.ids().into_iter().filter_map(|id| source.look(id)))
    }

    /// A fresh look at pipeline `id` alone (a request for one pipeline asks no other).
    pub(crate) fn one(source: &dyn Watched, id: u64) -> Snapshot {
        Snapshot::of(source.look(id))
    }

    fn of(looks: impl IntoIterator<Item = Look>) -> Snapshot {
        let looks: Vec<Look> = looks.into_iter().collect();
        let items = looks.iter().map(|l| (l.id, l.board.items())).collect();
        Snapshot { looks, items }
    }

    /// The list of pipelines.
    pub(crate) fn list(&self) -> Value {
        list_doc(&self.looks)
    }

    /// Pipeline `id`'s document.
    pub(crate) fn doc(&self, id: u64) -> Option<Value> {
        let l = self.looks.iter().find(|l| l.id == id)?;
        Some(pipeline_doc(
            l,
            self.items.get(&id).map_or(&[], Vec::as_slice),
        ))
    }

    /// Pipeline `id`'s shape as dot, with its statistics.
    pub(crate) fn dot(&self, id: u64) -> Option<String> {
        let l = self.looks.iter().find(|l| l.id == id)?;
        Some(l.shape.to_dot(Some(&l.stats)))
    }

    /// The picture task `task` of pipeline `id` shows as `name`.
    pub(crate) fn picture(&self, id: u64, task: usize, name: &str) -> Option<Arc<Picture>> {
        self.items
            .get(&id)?
            .iter()
            .find(|i| i.task == task && i.name == name)
            .and_then(|i| match &i.shown {
                Shown::Picture(p) => Some(Arc::clone(p)),
                Shown::Meters(_) => None,
            })
    }

    /// What a client watching pipeline `selected` (or only the list) holds, flattened.
    pub(crate) fn flat(&self, selected: Option<u64>) -> Flat {
        let mut f = Flat::of("pipelines", &self.list());
        if let Some(d) = selected.and_then(|id| self.doc(id)) {
            f.extend(Flat::of("pipeline", &d));
        }
        f
    }
}

/// The sampler's shared state.
pub(crate) struct Sampler {
    pub(crate) source: Arc<dyn Watched>,
    /// Clients connected now (the sampler looks only while there are some).
    pub(crate) clients: AtomicUsize,
    pub(crate) stop: AtomicBool,
    pub(crate) period: Duration,
}

impl Sampler {
    /// Looks every period while clients are connected, until stopped; each look goes to
    /// `tx`.
    pub(crate) fn run(&self, tx: tokio::sync::watch::Sender<Arc<Snapshot>>) {
        let mut watching: HashMap<u64, Watching> = HashMap::new();
        while !self.stop.load(Ordering::Relaxed) {
            if self.clients.load(Ordering::Relaxed) == 0 {
                watching.clear();
            } else {
                let snap = Snapshot::take(&*self.source);
                watching.retain(|id, _| snap.looks.iter().any(|l| l.id == *id));
                for l in &snap.looks {
                    watching.entry(l.id).or_insert_with(|| l.board.watch());
                }
                tx.send_replace(Arc::new(snap));
            }
            std::thread::sleep(self.period);
        }
    }
}
