//! `sinogram`: histograms list-mode records or PETLINK words, with periodic snapshots.

use std::time::Instant;

use std::time::Duration;

use offhost_engine::{
    ArgError, Args, Buffer, Build, Context, Get, Registry, Status, Task, TaskError, TaskInfo,
};

use super::outfile::OutFile;
use super::records::Carry;
use crate::listmode::RECORD_LEN;
use crate::petlink_hist::PetlinkHistogrammer;
use crate::sinofile::{self, SinoFlags};
use crate::Scanner;

use crate::sinogram::{EnergyWindow, HistStats, Histogrammer, Sinogram};

enum Hist {
    Records {
        h: Box<Histogrammer>,
        carry: Carry<RECORD_LEN>,
    },
    Words {
        h: Box<PetlinkHistogrammer>,
        carry: Carry<4>,
    },
}

struct SinogramTask {
    hist: Hist,
    every: u64,
    next: u64,
    /// Send a snapshot when this long has passed since the last one (or the first event).
    period: Option<Duration>,
    /// When the last snapshot went (or the first event came).
    snapped: Option<Instant>,
    closed: Vec<bool>,
    snapshots: u64,
    started: Option<Instant>,
    last: Option<Instant>,
    /// An encoded sinogram waiting for a buffer of the output's free list.
    pending: Option<Vec<u8>>,
    /// The final sinogram is encoded: once `pending` is out, the task is done.
    finished: bool,
    /// Where the final sinogram is written, when asked.
    out: Option<OutFile>,
}

/// Puts an encoded sinogram out: in a buffer of the output's free list when its buffers are
/// large enough, so that the free list bounds the sinograms in flight (the task waits for a
/// buffer to come back), else in a buffer of its own. `Err` gives the bytes back with the
/// status the task returns while they wait.
pub(super) fn emit(cx: &mut Context<'_>, bytes: Vec<u8>) -> Result<(), (Vec<u8>, Status)> {
    if cx.pool(0).is_none_or(|p| p.buffer_size() < bytes.len()) {
        cx.put(0, Buffer::from_vec(bytes));
        return Ok(());
    }
    let Some(mut b) = cx.alloc(0) else {
        // Woken when a buffer comes back; run again soon if only this turn's batch ran out.
        let wait = if cx.batch_used() {
            Status::Progress
        } else {
            Status::Blocked
        };
        return Err((bytes, wait));
    };
    if b.remaining() < bytes.len() {
        cx.put(0, Buffer::from_vec(bytes));
        return Ok(());
    }
    b.unfilled()[..bytes.len()].copy_from_slice(&bytes);
    b.commit(bytes.len());
    cx.put(0, b.freeze());
    Ok(())
}

impl SinogramTask {
    fn stats(&self) -> HistStats {
        match &self.hist {
            Hist::Records { h, .. } => h.stats(),
            Hist::Words { h, .. } => h.stats(),
        }
    }

    fn add(&mut self, b: &[u8]) {
        match &mut self.hist {
            // Straight from the buffer's bytes: no decoded copy of the events.
            Hist::Records { h, carry } => carry.feed(b, |whole| h.add_records(whole.as_chunks().0)),
            // Straight from the buffer's bytes: no copy of the words.
            Hist::Words { h, carry } => carry.feed(b, |whole| h.add_le_bytes(whole)),
        }
    }

    fn snapshot(&mut self, last: bool) -> (Sinogram, SinoFlags) {
        // Flushed first, so pending bucket increments are applied once, not to every copy.
        let sino = match &mut self.hist {
            Hist::Records { h, .. } => {
                h.flush();
                h.snapshot()
            }
            Hist::Words { h, .. } => {
                h.flush();
                h.snapshot()
            }
        };
        (sino, self.flags(last))
    }

    /// The flags of a sinogram put out now: records give detector-pair sinograms.
    fn flags(&self, last: bool) -> SinoFlags {
        SinoFlags {
            last,
            detector_pairs: matches!(self.hist, Hist::Records { .. }),
        }
    }

    /// The sinogram so far, encoded for the next task; shown summed over its planes to a
    /// live view if one watches.
    fn encode(&mut self, cx: &Context<'_>, last: bool) -> Vec<u8> {
        let (sino, flags) = self.snapshot(last);
        if cx.watched() {
            let width = sino.scanner.radial_bins as usize;
            let picture = offhost_engine::Picture::scaled(width, &sino.summed());
            // A summed plane is far below the board's bounds; one refused is only not shown.
            let _ = cx.show_picture("sinogram", picture);
        }
        sinofile::encode(&sino, flags)
    }

    /// Puts the sinogram so far out (as [`emit`] does): encoded straight into a buffer of the
    /// output's free list when one is free and large enough, so that no 16 MiB copy of it is
    /// made (a fresh one costs its pages' first touch as well); else as `encode` and `emit`.
    /// A live view, when one watches, gets its picture from a copy.
    fn put(&mut self, cx: &mut Context<'_>, last: bool) -> Result<(), (Vec<u8>, Status)> {
        if !cx.watched() {
            let flags = self.flags(last);
            let (scanner, data) = counts(&mut self.hist);
            let len = sinofile::HEADER_LEN + 4 * data.len();
            if cx.pool(0).is_some_and(|p| p.buffer_size() >= len) {
                if let Some(mut b) = cx.alloc(0) {
                    sinofile::encode_into(scanner, data, flags, &mut b.unfilled()[..len]);
                    b.commit(len);
                    cx.put(0, b.freeze());
                    return Ok(());
                }
            }
        }
        let bytes = self.encode(cx, last);
        emit(cx, bytes)
    }
}

/// The histogrammer's scanner and counts, every pending increment applied.
fn counts(hist: &mut Hist) -> (&Scanner, &[i32]) {
    match hist {
        Hist::Records { h, .. } => h.counts(),
        Hist::Words { h, .. } => h.counts(),
    }
}

/// Puts out an encoded sinogram left waiting for a buffer (`pending`): `Some` status to
/// return now (still waiting, or done once the `finished` task's final one is out), `None`
/// to go on.
pub(super) fn flush_pending(
    cx: &mut Context<'_>,
    pending: &mut Option<Vec<u8>>,
    finished: bool,
) -> Option<Status> {
    let bytes = pending.take()?;
    if let Err((bytes, wait)) = emit(cx, bytes) {
        *pending = Some(bytes);
        return Some(wait);
    }
    finished.then_some(Status::Done)
}

/// The counts a `sinogram` task's report begins with: `(events, prompts, delayeds)`.
pub fn report_counts(report: &str) -> Option<(u64, u64, u64)> {
    let (events, rest) = report.split_once(" events (")?;
    let (prompts, rest) = rest.split_once(" prompts, ")?;
    let (delayeds, _) = rest.split_once(" delayeds)")?;
    Some((
        events.parse().ok()?,
        prompts.parse().ok()?,
        delayeds.parse().ok()?,
    ))
}

impl Task for SinogramTask {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        if let Some(status) = flush_pending(cx, &mut self.pending, self.finished) {
            return Ok(status);
        }
        for i in 0..self.closed.len() {
            while !self.closed[i] {
                match cx.get(i) {
                    Get::Buf(b) => {
                        self.started.get_or_insert_with(Instant::now);
                        self.add(&b);
                        let now = Instant::now();
                        self.last = Some(now);
                        let snapped = *self.snapped.get_or_insert(now);
                        let seen = self.stats().events;
                        let by_count = self.every > 0 && seen >= self.next;
                        let by_time = self.period.is_some_and(|p| now - snapped >= p);
                        if (by_count || by_time) && cx.outputs() > 0 {
                            if by_count {
                                self.next = seen + self.every;
                            }
                            self.snapped = Some(now);
                            self.snapshots += 1;
                            if let Err((bytes, wait)) = self.put(cx, false) {
                                self.pending = Some(bytes);
                                return Ok(wait);
                            }
                        }
                    }
                    Get::Empty => break,
                    Get::Closed => self.closed[i] = true,
                }
            }
        }
        if !self.closed.iter().all(|c| *c) {
            return Ok(Status::Blocked);
        }
        let left = match &self.hist {
            Hist::Records { carry, .. } => carry.leftover(),
            Hist::Words { carry, .. } => carry.leftover(),
        };
        if left != 0 {
            return Err(TaskError::BadInput(format!(
                "stream ends with {left} bytes of an unfinished record"
            )));
        }
        if let Some(out) = self.out.take() {
            let (sino, flags) = self.snapshot(true);
            out.write(&sino, flags)?;
        }
        if cx.outputs() > 0 {
            if let Err((bytes, wait)) = self.put(cx, true) {
                self.pending = Some(bytes);
                self.finished = true;
                return Ok(wait);
            }
        }
        Ok(Status::Done)
    }

    fn report(&self) -> Option<String> {
        let st = self.stats();
        let wall = match (self.started, self.last) {
            (Some(a), Some(b)) => (b - a).as_secs_f64(),
            _ => 0.0,
        };
        Some(format!(
            "{} events ({} prompts, {} delayeds): {} energy-rejected, {} outside the field of view, {} accepted; {} snapshots; {:.2} M events/s",
            st.events,
            st.prompts,
            st.delayeds,
            st.energy_rejected,
            st.geometry_rejected,
            st.accepted(),
            self.snapshots,
            st.events as f64 / wall.max(1e-9) / 1e6,
        ))
    }
}

fn sinogram(a: &Args, b: &mut Build<'_>) -> Result<Box<dyn Task>, ArgError> {
    let scanner = super::scanner_arg(a)?;
    let span = super::span_arg(a, &scanner)?;
    let hist = match a.get("format").unwrap_or("offhost") {
        "offhost" => {
            let window = match super::window_args(a)? {
                (None, None) => EnergyWindow::open(),
                (lo, hi) => EnergyWindow::kev(lo.unwrap_or(0.0), hi.unwrap_or(super::MAX_KEV)),
            };
            let h = Histogrammer::new(&scanner.with_span(span), window)
                .map_err(|e| ArgError::task(e.to_string()))?;
            Hist::Records {
                h: Box::new(h),
                carry: Carry::default(),
            }
        }
        "petlink" => {
            let h = PetlinkHistogrammer::new(&scanner, span)
                .map_err(|e| ArgError::task(e.to_string()))?;
            Hist::Words {
                h: Box::new(h),
                carry: Carry::default(),
            }
        }
        other => {
            return Err(ArgError::new(
                "format",
                format!("format={other}: expected offhost or petlink"),
            ))
        }
    };
    let every: u64 = a.parse("snapshot")?;
    let out = OutFile::from_arg(a, b)?;
    let period = a.seconds_in_opt("period", 0.01..=3600.0)?;
    Ok(Box::new(SinogramTask {
        hist,
        every,
        next: every,
        period,
        snapped: None,
        closed: vec![false; b.inputs()],
        snapshots: 0,
        started: None,
        last: None,
        pending: None,
        finished: false,
        out,
    }))
}

pub(super) fn register(r: &mut Registry) {
    r.register(
        TaskInfo::new(
            "sinogram",
            "histograms list-mode records (or PETLINK words) into sinograms, prompts minus delayeds; sends snapshots while acquiring and the final sinogram at the end",
        )
        .arg("scanner", "demo", "scanner preset: demo or mmr")
        .arg("format", "offhost", "input: offhost records or petlink words")
        .arg("span", "1", "axial compression: 1, an odd span, or ssrb")
        .optional("lower", "energy window lower level, keV (records only)")
        .optional("upper", "energy window upper level, keV (records only)")
        .arg("snapshot", "0", "send a snapshot every this many events (0 = only at the end)")
        .optional("period", "also send a snapshot when this many seconds have passed since the last (0.01 to 3600)")
        .optional("out", "write the final sinogram to this file: FILE.hs is STIR's Interfile projection data (with FILE.s beside it), any other name an OHSINO01 file")
        .inputs(1, 2)
        .outputs(0, 1)
        // A sinogram goes out in a buffer of the output's free list when one is named large
        // enough (`>sinograms:sino(2,17M)`), which then bounds the sinograms in flight; the
        // default list's small buffers never fit one, so without it each is a buffer of its own.
        .allocates(2, 4096),
        sinogram,
    );
}
