//! `sino-sum`: merges the sinograms of histograms that each saw a share of one scan.
//!
//! Each input carries the snapshots of one `sinogram` task (cumulative: each holds every
//! event its task has seen so far) and, last, its final sinogram. The merged sinogram is the
//! sum of the newest snapshot of every input; it goes out at most once per `period` while the
//! scan goes on, and once more, final, when every input has ended. Counts are integers, so the
//! final sum equals the histogram of all the events, bin for bin. An input that ends without
//! its final sinogram (its histogram was cut short) fails the task: events would be missing.

use std::time::{Duration, Instant};

use offhost_engine::{
    ArgError, Args, Buffer, Build, Context, Get, Registry, Status, Task, TaskError, TaskInfo,
};

use super::histogram::{emit, flush_pending};
use super::outfile::OutFile;
use crate::sinofile::{self, flags_of, SinoFlags, FLAGS_AT, HEADER_LEN};

struct SinoSum {
    /// The newest encoded snapshot of each input.
    latest: Vec<Option<Buffer>>,
    /// Whether each input's newest is its final sinogram.
    finals: Vec<bool>,
    closed: Vec<bool>,
    /// Which inputs sent a snapshot since the last merged one went out.
    fresh: Vec<bool>,
    period: Duration,
    sent_at: Option<Instant>,
    pending: Option<Vec<u8>>,
    finished: bool,
    out: Option<OutFile>,
    received: u64,
    merged: u64,
    /// The final merged sinogram's net counts.
    total: Option<i64>,
}

/// The sum of encoded sinograms of one geometry, encoded with `flags`: the first checked
/// whole, the others against its header and length, added in place (one pass each).
fn sum(parts: &[&[u8]], flags: SinoFlags) -> Result<Vec<u8>, TaskError> {
    let bad = |i: usize, e: String| TaskError::BadInput(format!("input {i}: {e}"));
    let Some((first, rest)) = parts.split_first() else {
        return Err(TaskError::BadInput("no sinogram arrived".into()));
    };
    sinofile::check(first).map_err(|e| bad(0, e.to_string()))?;
    let mut total = first.to_vec();
    for (i, p) in rest.iter().enumerate() {
        // Same geometry, same length: the header up to the flags must be equal.
        if p.len() != first.len() || p[..FLAGS_AT] != first[..FLAGS_AT] {
            return Err(bad(
                i + 1,
                "a sinogram of another geometry or size than input 0's".into(),
            ));
        }
        let mut over = false;
        for (t, c) in (total[HEADER_LEN..].chunks_exact_mut(4)).zip(p[HEADER_LEN..].chunks_exact(4))
        {
            let a = i32::from_le_bytes((&*t).try_into().expect("4 bytes"));
            let b = i32::from_le_bytes(c.try_into().expect("4 bytes"));
            let (v, o) = a.overflowing_add(b);
            over |= o;
            t.copy_from_slice(&v.to_le_bytes());
        }
        if over {
            return Err(TaskError::Failed(
                "a merged bin passes the 32-bit counts of a sinogram".into(),
            ));
        }
    }
    sinofile::set_flags(&mut total, flags);
    Ok(total)
}

impl SinoSum {
    /// The sum of the newest snapshots, encoded.
    fn merged(&self, last: bool) -> Result<Vec<u8>, TaskError> {
        let parts: Vec<&[u8]> = self.latest.iter().flatten().map(|b| &b[..]).collect();
        let pairs = parts
            .iter()
            .any(|p| flags_of(p).is_some_and(|f| f.detector_pairs));
        let flags = SinoFlags {
            last,
            detector_pairs: pairs,
        };
        sum(&parts, flags)
    }
}

impl Task for SinoSum {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        if let Some(status) = flush_pending(cx, &mut self.pending, self.finished) {
            return Ok(status);
        }
        for i in 0..self.closed.len() {
            while !self.closed[i] {
                match cx.get(i) {
                    Get::Buf(b) => {
                        let Some(f) = flags_of(&b) else {
                            return Err(TaskError::BadInput(format!(
                                "input {i}: {} bytes, not an encoded sinogram",
                                b.len()
                            )));
                        };
                        if self.finals[i] {
                            return Err(TaskError::BadInput(format!(
                                "input {i}: a sinogram after its final one"
                            )));
                        }
                        self.received += 1;
                        self.finals[i] = f.last;
                        self.latest[i] = Some(b);
                        self.fresh[i] = true;
                    }
                    Get::Empty => break,
                    Get::Closed => self.closed[i] = true,
                }
            }
        }
        if self.closed.iter().all(|c| *c) {
            if let Some(i) = self.finals.iter().position(|f| !f) {
                return Err(TaskError::BadInput(format!(
                    "input {i} ended without its final sinogram: that histogram was cut short, so the merged one would miss events"
                )));
            }
            let bytes = self.merged(true)?;
            let (sino, flags) = sinofile::decode(&bytes)
                .map_err(|e| TaskError::Failed(format!("the merged sinogram: {e}")))?;
            self.total = Some(sino.total());
            if let Some(out) = self.out.take() {
                out.write(&sino, flags)?;
            }
            self.merged += 1;
            if cx.outputs() > 0 {
                if let Err((bytes, wait)) = emit(cx, bytes) {
                    self.pending = Some(bytes);
                    self.finished = true;
                    return Ok(wait);
                }
            }
            return Ok(Status::Done);
        }
        // Due once every input has sent a fresh snapshot, or the period is up: no timer
        // wakes a task, so a snapshot that comes before the period waits for the next.
        let any = self.fresh.iter().any(|f| *f);
        let round = self.fresh.iter().all(|f| *f);
        let due = round || self.sent_at.is_none_or(|t| t.elapsed() >= self.period);
        if any && due && cx.outputs() > 0 {
            let bytes = self.merged(false)?;
            self.fresh.iter_mut().for_each(|f| *f = false);
            self.sent_at = Some(Instant::now());
            self.merged += 1;
            if let Err((bytes, wait)) = emit(cx, bytes) {
                self.pending = Some(bytes);
                return Ok(wait);
            }
        }
        Ok(Status::Blocked)
    }

    fn report(&self) -> Option<String> {
        Some(match self.total {
            Some(t) => format!(
                "{} sinograms from {} inputs; {} merged; final: {t} net counts",
                self.received,
                self.latest.len(),
                self.merged
            ),
            None => format!(
                "{} sinograms from {} inputs; {} merged",
                self.received,
                self.latest.len(),
                self.merged
            ),
        })
    }
}

fn sino_sum(a: &Args, b: &mut Build<'_>) -> Result<Box<dyn Task>, ArgError> {
    let n = b.inputs();
    let period = a
        .seconds_in_opt("period", 0.01..=3600.0)?
        .unwrap_or(Duration::from_secs(1));
    Ok(Box::new(SinoSum {
        latest: vec![None; n],
        finals: vec![false; n],
        closed: vec![false; n],
        fresh: vec![false; n],
        period,
        sent_at: None,
        pending: None,
        finished: false,
        out: OutFile::from_arg(a, b)?,
        received: 0,
        merged: 0,
        total: None,
    }))
}

pub(super) fn register(r: &mut Registry) {
    r.register(
        TaskInfo::new(
            "sino-sum",
            "merges the sinograms of histograms that each saw a share of one scan: the sum of each input's newest snapshot, once every input has sent a fresh one or the period is up, and the exact final sum once every input has sent its final sinogram",
        )
        .arg("period", "1", "least seconds between two merged snapshots (0.01 to 3600)")
        .optional("out", "write the final merged sinogram to this file: FILE.hs is STIR's Interfile projection data (with FILE.s beside it), any other name an OHSINO01 file")
        .inputs(1, 64)
        .outputs(0, 1)
        .allocates(2, 4096),
        sino_sum,
    );
}
