//! `level`: passes 16-bit PCM through untouched and, while a live view watches, shows each
//! channel's level (RMS and peak, dBFS) as meters about ten times a second.

use std::time::{Duration, Instant};

use crate::board::Meter;
use crate::context::Context;
use crate::queue::Get;
use crate::registry::{Args, Build, Registry, TaskInfo};
use crate::task::{Status, Task, TaskError};

/// How often the meters move.
const PERIOD: Duration = Duration::from_millis(100);
/// The quietest level a meter shows, dBFS.
const FLOOR_DB: f64 = -90.0;

struct Level {
    channels: usize,
    /// Per channel: sum of squares, peak, samples, since the meters last moved.
    acc: Vec<(f64, i32, u64)>,
    shown_at: Instant,
}

fn dbfs(x: f64) -> f64 {
    if x <= 0.0 {
        FLOOR_DB
    } else {
        (20.0 * (x / 32768.0).log10()).max(FLOOR_DB)
    }
}

impl Level {
    fn measure(&mut self, data: &[u8]) {
        // Whole samples only; a frame cut between buffers is measured per sample all the
        // same (levels, not audio, come out of here).
        for (k, s) in data.chunks_exact(2).enumerate() {
            let v = i16::from_le_bytes([s[0], s[1]]) as i32;
            let a = &mut self.acc[k % self.channels];
            a.0 += f64::from(v * v);
            a.1 = a.1.max(v.abs());
            a.2 += 1;
        }
    }

    fn show(&mut self, cx: &Context<'_>) {
        let mut meters = Vec::with_capacity(2 * self.channels);
        for (c, a) in self.acc.iter_mut().enumerate() {
            let rms = if a.2 == 0 {
                0.0
            } else {
                (a.0 / a.2 as f64).sqrt()
            };
            for (what, v) in [("rms", rms), ("peak", f64::from(a.1))] {
                meters.push(Meter {
                    label: format!("ch{} {what}", c + 1),
                    value: dbfs(v),
                    min: FLOOR_DB,
                    max: 0.0,
                    unit: "dBFS".into(),
                });
            }
            *a = (0.0, 0, 0);
        }
        // At most 2 x 32 meters, within the board's bounds.
        let _ = cx.show_meters("levels", meters);
        self.shown_at = Instant::now();
    }
}

impl Task for Level {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        let watched = cx.watched();
        loop {
            match cx.get(0) {
                Get::Buf(b) => {
                    if watched {
                        self.measure(&b);
                        if self.shown_at.elapsed() >= PERIOD {
                            self.show(cx);
                        }
                    }
                    if cx.outputs() > 0 {
                        cx.put(0, b);
                    }
                }
                Get::Empty => return Ok(Status::Blocked),
                Get::Closed => {
                    if watched {
                        self.show(cx);
                    }
                    return Ok(Status::Done);
                }
            }
        }
    }
}

pub(super) fn register(r: &mut Registry) {
    r.register(
        TaskInfo::new(
            "level",
            "passes 16-bit PCM through untouched; a live view (offhost run --view) shows each channel's RMS and peak level in dBFS",
        )
        .arg("channels", "1", "interleaved channels, 1 to 32")
        .outputs(0, 1),
        |a: &Args, _: &mut Build<'_>| {
            let channels: usize = a.parse("channels")?;
            if !(1..=32).contains(&channels) {
                return Err(crate::registry::ArgError::new("channels", "must be 1 to 32"));
            }
            Ok(Box::new(Level {
                channels,
                acc: vec![(0.0, 0, 0); channels],
                shown_at: Instant::now(),
            }))
        },
    );
}
