//! What tasks show to those who watch a pipeline: pictures (a sinogram, the latest image)
//! and meters (audio levels), by name, on the pipeline's [`Board`].
//!
//! A task shows something through its [`Context`](crate::Context)
//! ([`show_picture`](crate::Context::show_picture), [`show_meters`](crate::Context::show_meters)),
//! and asks first whether anybody looks ([`watched`](crate::Context::watched)), so that a
//! pipeline nobody watches spends nothing on pictures. The board takes its lock only when a
//! task shows something or a watcher reads, never per buffer. What a task may show is
//! bounded ([`MAX_PICTURE_PIXELS`], [`MAX_SHOWN_PER_TASK`], [`MAX_METERS`]); past a bound the
//! call is refused with a [`ShowError`] and the task goes on.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// The most pixels of one picture (2048 x 2048).
pub const MAX_PICTURE_PIXELS: usize = 2048 * 2048;
/// The most things (pictures and meter sets) one task shows at once, by name.
pub const MAX_SHOWN_PER_TASK: usize = 8;
/// The most meters in one set.
pub const MAX_METERS: usize = 64;

/// A grey picture: 8-bit samples, row after row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Picture {
    /// Pixels per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
    /// `width * height` grey levels, 0 black, 255 white.
    pub pixels: Vec<u8>,
}

impl Picture {
    /// A picture of `values` (row after row, `width` a row), scaled so that the largest is
    /// white and zero (or the smallest, if negative) black.
    pub fn scaled(width: usize, values: &[f32]) -> Picture {
        let height = values.len().checked_div(width).unwrap_or(0);
        let (lo, hi) = values.iter().fold((0f32, 0f32), |(lo, hi), &v| {
            if v.is_finite() {
                (lo.min(v), hi.max(v))
            } else {
                (lo, hi)
            }
        });
        let span = if hi > lo { hi - lo } else { 1.0 };
        let pixels = values[..width * height]
            .iter()
            .map(|&v| {
                let v = if v.is_finite() { v } else { lo };
                (((v - lo) / span) * 255.0).round().clamp(0.0, 255.0) as u8
            })
            .collect();
        Picture {
            width,
            height,
            pixels,
        }
    }
}

/// One meter of a set: a value between a least and a most, in a unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meter {
    /// What it measures (`left`, `right`).
    pub label: String,
    /// Its value now.
    pub value: f64,
    /// The least value the meter shows.
    pub min: f64,
    /// The most value the meter shows.
    pub max: f64,
    /// Unit (`dBFS`).
    pub unit: String,
}

/// What a task shows under one name.
#[derive(Debug, Clone)]
pub enum Shown {
    /// A picture.
    Picture(Arc<Picture>),
    /// A set of meters.
    Meters(Vec<Meter>),
}

/// One thing on a board: who shows it, its name, and the how-manieth change of the board it
/// came with.
#[derive(Debug, Clone)]
pub struct Item {
    /// The task (index into the pipeline's tasks).
    pub task: usize,
    /// Its name, given by the task.
    pub name: String,
    /// The board's change count when it was shown: a watcher that saw an older one fetches
    /// it again.
    pub seq: u64,
    /// What is shown.
    pub shown: Shown,
}

/// Why a task could not show something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShowError {
    /// The picture has more pixels than [`MAX_PICTURE_PIXELS`], or its pixels are not width
    /// times height.
    #[error("a picture of {width} x {height} with {pixels} samples (at most {MAX_PICTURE_PIXELS} pixels, one sample each)")]
    BadPicture {
        /// Width.
        width: usize,
        /// Height.
        height: usize,
        /// Samples given.
        pixels: usize,
    },
    /// The task shows [`MAX_SHOWN_PER_TASK`] things already, under other names.
    #[error("a task shows at most {MAX_SHOWN_PER_TASK} things")]
    TooMany,
    /// More meters than [`MAX_METERS`] in one set.
    #[error("{0} meters in one set (at most {MAX_METERS})")]
    TooManyMeters(usize),
}

/// What a pipeline's tasks show, and whether anybody watches.
#[derive(Debug, Default)]
pub struct Board {
    watchers: AtomicUsize,
    changes: AtomicU64,
    items: Mutex<Vec<Item>>,
}

impl Board {
    /// Whether anybody watches now.
    pub fn watched(&self) -> bool {
        self.watchers.load(Ordering::Relaxed) > 0
    }

    /// Counts a watcher until the returned guard drops.
    pub fn watch(self: &Arc<Self>) -> Watching {
        self.watchers.fetch_add(1, Ordering::Relaxed);
        Watching(Arc::clone(self))
    }

    /// The board's change count: grows each time something is shown.
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Relaxed)
    }

    /// Everything shown now (pictures by reference).
    pub fn items(&self) -> Vec<Item> {
        self.items.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Shows `shown` as task `task`'s `name`, in place of what it showed under that name.
    pub fn show(&self, task: usize, name: &str, shown: Shown) -> Result<(), ShowError> {
        match &shown {
            Shown::Picture(p) => {
                let n = p.width.checked_mul(p.height);
                if n.is_none_or(|n| n > MAX_PICTURE_PIXELS || n != p.pixels.len()) {
                    return Err(ShowError::BadPicture {
                        width: p.width,
                        height: p.height,
                        pixels: p.pixels.len(),
                    });
                }
            }
            Shown::Meters(m) if m.len() > MAX_METERS => {
                return Err(ShowError::TooManyMeters(m.len()))
            }
            Shown::Meters(_) => {}
        }
        let mut items = self.items.lock().unwrap_or_else(|e| e.into_inner());
        let seq = self.changes.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(it) = items.iter_mut().find(|i| i.task == task && i.name == name) {
            it.shown = shown;
            it.seq = seq;
            return Ok(());
        }
        if items.iter().filter(|i| i.task == task).count() >= MAX_SHOWN_PER_TASK {
            return Err(ShowError::TooMany);
        }
        items.push(Item {
            task,
            name: name.to_string(),
            seq,
            shown,
        });
        Ok(())
    }
}

/// A watcher of a [`Board`], counted until dropped.
#[derive(Debug)]
pub struct Watching(Arc<Board>);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.watchers.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_board_keeps_one_item_per_task_and_name_within_its_bounds() {
        let b = Arc::new(Board::default());
        assert!(!b.watched());
        let w = b.watch();
        assert!(b.watched());
        let p = Arc::new(Picture::scaled(2, &[0.0, 1.0, 2.0, 4.0]));
        assert_eq!(p.pixels, vec![0, 64, 128, 255]);
        b.show(0, "image", Shown::Picture(Arc::clone(&p))).unwrap();
        b.show(0, "image", Shown::Picture(p)).unwrap();
        assert_eq!(b.items().len(), 1);
        assert_eq!(b.items()[0].seq, 2);
        for i in 0..MAX_SHOWN_PER_TASK - 1 {
            b.show(0, &format!("m{i}"), Shown::Meters(vec![])).unwrap();
        }
        assert_eq!(
            b.show(0, "one more", Shown::Meters(vec![])),
            Err(ShowError::TooMany)
        );
        b.show(1, "other task", Shown::Meters(vec![])).unwrap();
        let big = Picture {
            width: 4096,
            height: 4096,
            pixels: vec![],
        };
        assert!(matches!(
            b.show(1, "big", Shown::Picture(Arc::new(big))),
            Err(ShowError::BadPicture { .. })
        ));
        drop(w);
        assert!(!b.watched());
    }
}
