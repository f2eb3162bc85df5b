//! `energy-window`: drops records with a photon outside the window and counts them.

use offhost_engine::{
    ArgError, Args, Buffer, Build, Context, Get, Registry, Status, Task, TaskError, TaskInfo,
};

use super::records::Carry;
use crate::listmode::RECORD_LEN;

struct Window {
    lower: u16,
    upper: u16,
    carry: Carry<RECORD_LEN>,
    seen: u64,
    rejected: u64,
}

impl Window {
    fn keep(&self, rec: &[u8]) -> bool {
        let ea = u16::from_le_bytes([rec[6], rec[7]]);
        let eb = u16::from_le_bytes([rec[8], rec[9]]);
        (self.lower..=self.upper).contains(&ea) && (self.lower..=self.upper).contains(&eb)
    }

    /// Filters one buffer, in place when the engine hands us the only reference.
    fn filter(&mut self, mut b: Buffer) -> Buffer {
        if self.carry.leftover() == 0 && b.len().is_multiple_of(RECORD_LEN) {
            match b.try_into_mut() {
                Err(shared) => b = shared,
                Ok(mut m) => {
                    let data = m.as_mut_slice();
                    let mut w = 0;
                    for r in 0..data.len() / RECORD_LEN {
                        let at = r * RECORD_LEN;
                        let keep = self.keep(&data[at..at + RECORD_LEN]);
                        if keep {
                            data.copy_within(at..at + RECORD_LEN, w);
                            w += RECORD_LEN;
                        }
                    }
                    let n = data.len() / RECORD_LEN;
                    self.seen += n as u64;
                    self.rejected += (n - w / RECORD_LEN) as u64;
                    m.truncate(w);
                    return m.freeze();
                }
            }
        }
        // Shared or misaligned: copy the kept records out.
        let mut out = Vec::with_capacity(b.len());
        let mut carry = std::mem::take(&mut self.carry);
        carry.feed(&b, |whole| {
            for rec in whole.chunks_exact(RECORD_LEN) {
                self.seen += 1;
                if self.keep(rec) {
                    out.extend_from_slice(rec);
                } else {
                    self.rejected += 1;
                }
            }
        });
        self.carry = carry;
        Buffer::from_vec(out)
    }
}

impl Task for Window {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        loop {
            match cx.get(0) {
                Get::Buf(b) => {
                    let out = self.filter(b);
                    if !out.is_empty() {
                        cx.put(0, out);
                    }
                }
                Get::Empty => return Ok(Status::Blocked),
                Get::Closed => {
                    if self.carry.leftover() != 0 {
                        return Err(TaskError::BadInput(format!(
                            "stream ends inside a record at byte offset {}",
                            self.seen * RECORD_LEN as u64
                        )));
                    }
                    return Ok(Status::Done);
                }
            }
        }
    }

    fn report(&self) -> Option<String> {
        Some(format!(
            "{} events, {} rejected by the {:.1}-{:.1} keV window",
            self.seen,
            self.rejected,
            self.lower as f64 / 10.0,
            self.upper as f64 / 10.0
        ))
    }
}

pub(super) fn register(r: &mut Registry) {
    r.register(
        TaskInfo::new(
            "energy-window",
            "drops list-mode records with a photon outside the energy window, counting them",
        )
        .arg("lower", "435", "lower level, keV")
        .arg("upper", "650", "upper level, keV"),
        |a: &Args, _: &mut Build<'_>| {
            let (Some(lower), Some(upper)) = super::window_args(a)? else {
                return Err(ArgError::task("give lower= and upper="));
            };
            let w = crate::sinogram::EnergyWindow::kev(lower, upper);
            Ok(Box::new(Window {
                lower: w.lower,
                upper: w.upper,
                carry: Carry::default(),
                seen: 0,
                rejected: 0,
            }))
        },
    );
}
