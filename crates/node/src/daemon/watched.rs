//! A daemon as a live view sees it ([`Watched`]): every pipeline it runs or remembers, with
//! the shape and board each had (the boards of the newest [`KEEP_BOARDS`] ended ones only).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use offhost_engine::watch::{Look, Phase, Watched};
use offhost_engine::{Board, Running, Shape, Stats};

use super::{Daemon, PipelineState};

/// Ended pipelines whose pictures a daemon keeps for a view.
pub const KEEP_BOARDS: usize = 8;

/// A pipeline's shape and board.
type ShapeAndBoard = (Arc<Shape>, Arc<Board>);

/// Each pipeline's shape and board, by id, beside the daemon's table.
#[derive(Default)]
pub(super) struct Seen(Mutex<BTreeMap<u64, ShapeAndBoard>>);

impl Seen {
    /// Remembers what pipeline `id` looks like.
    pub(super) fn add(&self, id: u64, run: &Running) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.insert(id, (Arc::clone(run.shape()), Arc::clone(run.board())));
    }

    /// Forgets pipelines not `kept`, and the boards of ended ones but the newest
    /// [`KEEP_BOARDS`].
    pub(super) fn retain(&self, kept: impl Fn(u64) -> bool, ended: &[u64]) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|id, _| kept(*id));
        for id in ended.iter().rev().skip(KEEP_BOARDS) {
            if let Some(e) = m.get_mut(id) {
                e.1 = Arc::default();
            }
        }
    }

    /// Pipeline `id`'s shape.
    pub(super) fn shape(&self, id: u64) -> Option<Arc<Shape>> {
        self.get(id).map(|s| s.0)
    }

    fn get(&self, id: u64) -> Option<ShapeAndBoard> {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&id).cloned()
    }
}

impl Watched for Daemon {
    fn ids(&self) -> Vec<u64> {
        let t = self.pipelines.lock().unwrap_or_else(|e| e.into_inner());
        t.keys().copied().collect()
    }

    fn look(&self, id: u64) -> Option<Look> {
        let (shape, board) = self.seen.get(id)?;
        // A running pipeline by its counters alone (nothing its workers take is touched);
        // an ended one as `status` says it.
        if let Ok(e) = self.entry(id) {
            if let super::State::Running(run) = &*e.lock().unwrap_or_else(|e| e.into_inner()) {
                if !run.is_finished() {
                    return Some(Look {
                        shape,
                        board,
                        ..Look::at(id, self.names.name_of(id), run)
                    });
                }
            }
        }
        let status = self.state_of(id, None).ok()?;
        Some(Look {
            id,
            name: status.name,
            phase: match status.state {
                PipelineState::Running => Phase::Running,
                PipelineState::Finished => Phase::Finished,
                _ => Phase::Failed,
            },
            error: status.error,
            stats: status.stats.unwrap_or_else(|| Stats {
                elapsed_s: 0.0,
                finished: true,
                tasks: Vec::new(),
                queues: Vec::new(),
                pools: Vec::new(),
            }),
            shape,
            board,
        })
    }
}
