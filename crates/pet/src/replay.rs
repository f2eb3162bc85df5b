//! A recorded PETLINK scan replayed as a live one: the file's words held in memory, split
//! into shares for several engines, paced to an event rate, and looped with time tags that
//! go on rising.
//!
//! - **Chunks.** The words are cut into chunks of [`CHUNK_WORDS`] (64 KiB, one message of a
//!   host channel); chunk `g` of the whole replay (loop `g / chunks`, chunk `g % chunks` of
//!   the file) goes to share `g % shares`. Every word goes to exactly one share, so the
//!   shares' histograms add up to the histogram of the replayed words, bin for bin.
//! - **Pace.** With a rate, chunk `g` is due when the events before it, at that rate, have
//!   taken their time since the replay started (the first read of any share), or up to a
//!   millisecond sooner (a sleep per chunk would cost more than its copy). A share that
//!   is not let through on time (the engine is behind: its channel's credit holds the send)
//!   falls behind; [`Replay::report`] gives the rate sustained and says whether the asked
//!   rate was kept. Without a rate the shares go as fast as the engines take them.
//! - **Loops.** Loop `k` adds `k x (last - first + 1)` ms to every elapsed-time tag, so the
//!   tags rise across loops; a replay whose tags would pass the tag's 29 bits is refused.

use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::FormatError;
use crate::geometry::Scanner;
use crate::interfile::PetlinkHeader;
use crate::petlink::{PetlinkReader, PetlinkStats, Word};

/// Words per chunk: 64 KiB.
pub const CHUNK_WORDS: usize = 16 * 1024;

/// The largest file a replay holds in memory.
pub const MAX_RECORDING_BYTES: u64 = 4 << 30;

/// The largest time tag (29 bits of milliseconds).
const MAX_TAG_MS: u64 = 0x1FFF_FFFF;

/// How early a chunk may go: one due sooner than this goes at once.
const EARLY: Duration = Duration::from_millis(1);

/// How far behind its schedule a replay may end and still have kept its rate: this much, or
/// 2 % of the planned time, whichever is more.
const SLACK: Duration = Duration::from_millis(50);

/// Why a replay cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The file is unreadable or not what its header says.
    #[error("{path}: {source}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong, with its byte offset.
        source: FormatError,
    },
    /// The plan does not fit the file.
    #[error("{0}")]
    Plan(String),
}

/// Counts of words handed out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// 32-bit words.
    pub words: u64,
    /// Prompt coincidences.
    pub prompts: u64,
    /// Delayed coincidences.
    pub delayeds: u64,
}

impl Counts {
    /// Prompts and delayeds.
    pub fn events(&self) -> u64 {
        self.prompts + self.delayeds
    }

    fn add(&mut self, o: &Counts) {
        self.words += o.words;
        self.prompts += o.prompts;
        self.delayeds += o.delayeds;
    }
}

/// A PETLINK file's words in memory, with what each chunk holds.
#[derive(Debug)]
pub struct Recording {
    words: Vec<u32>,
    chunks: Vec<Counts>,
    /// Events before each chunk.
    before: Vec<u64>,
    stats: PetlinkStats,
    scanner: Scanner,
}

impl Recording {
    /// Reads `path` (checked against `header` word by word, as `offhost pet stat` does).
    pub fn petlink(path: &Path, header: &PetlinkHeader) -> Result<Recording, ReplayError> {
        let err = |source| ReplayError::Format {
            path: path.display().to_string(),
            source,
        };
        let len = std::fs::metadata(path).map_err(|e| err(e.into()))?.len();
        if len > MAX_RECORDING_BYTES {
            return Err(ReplayError::Plan(format!(
                "{}: {len} bytes, more than the {MAX_RECORDING_BYTES} a replay holds in memory",
                path.display()
            )));
        }
        let mut r = PetlinkReader::open(path, header).map_err(err)?;
        let mut words = Vec::with_capacity((len / 4) as usize);
        let mut buf = Vec::new();
        while r.read_words(&mut buf, 1 << 16).map_err(err)? > 0 {
            words.extend_from_slice(&buf);
        }
        Ok(Recording::from_words(words, header.scanner.clone()))
    }

    /// Words already read, of `scanner`.
    pub fn from_words(words: Vec<u32>, scanner: Scanner) -> Recording {
        let mut stats = PetlinkStats::default();
        let mut chunks = Vec::with_capacity(words.len().div_ceil(CHUNK_WORDS));
        let mut before = Vec::with_capacity(chunks.capacity());
        let mut events = 0;
        for c in words.chunks(CHUNK_WORDS) {
            let mut n = Counts {
                words: c.len() as u64,
                ..Counts::default()
            };
            for &w in c {
                let word = Word::decode(w);
                stats.add(word);
                if let Word::Event { prompt, .. } = word {
                    match prompt {
                        true => n.prompts += 1,
                        false => n.delayeds += 1,
                    }
                }
            }
            before.push(events);
            events += n.events();
            chunks.push(n);
        }
        Recording {
            words,
            chunks,
            before,
            stats,
            scanner,
        }
    }

    /// The file's word counts.
    pub fn stats(&self) -> &PetlinkStats {
        &self.stats
    }

    /// The words, as in the file.
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// The scanner of its header.
    pub fn scanner(&self) -> &Scanner {
        &self.scanner
    }

    /// Milliseconds one loop adds to the time tags.
    fn loop_ms(&self) -> u64 {
        match (self.stats.first_time_ms, self.stats.last_time_ms) {
            (Some(a), Some(b)) => u64::from(b.saturating_sub(a)) + 1,
            _ => 0,
        }
    }
}

/// How to replay a recording.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    /// How many engines share the words.
    pub shares: usize,
    /// How many times the file goes through.
    pub loops: u32,
    /// Events per second, or as fast as the engines take them.
    pub rate: Option<f64>,
}

/// One share's progress.
#[derive(Debug, Default)]
struct ShareState {
    sent: Mutex<Counts>,
    /// When it read its end (every chunk before handed to its channel), ns since the start.
    ended_ns: AtomicU64,
    /// The most it fell behind its schedule, ns.
    behind_ns: AtomicU64,
}

/// A replay under way: what each share has handed out, and when.
#[derive(Debug)]
pub struct Replay {
    rec: Arc<Recording>,
    plan: Plan,
    start: OnceLock<Instant>,
    shares: Vec<ShareState>,
    /// When each chunk was handed out (ns since the start) and its prompts less delayeds.
    timeline: Mutex<Vec<(u64, i64)>>,
}

/// How a replay went.
#[derive(Clone, Debug, Serialize)]
pub struct ReplayReport {
    /// The rate asked for, events/s (none: as fast as the engines took them).
    pub rate: Option<f64>,
    /// Events over the time from the first read to the last share's end.
    pub sustained_events_per_s: f64,
    /// That time, s.
    pub seconds: f64,
    /// Whether it kept the rate asked for (within 2 % or 50 ms of its plan).
    pub kept_rate: bool,
    /// The most any share fell behind its schedule, s.
    pub most_behind_s: f64,
    /// All the shares' counts.
    pub sent: Counts,
    /// Each share's counts.
    pub shares: Vec<Counts>,
    /// Loops over the file.
    pub loops: u32,
}

impl Replay {
    /// Plans `plan` over `rec`: the replay and its shares, each a reader of its words.
    pub fn new(rec: Arc<Recording>, plan: Plan) -> Result<(Arc<Replay>, Vec<Share>), ReplayError> {
        if plan.shares == 0 || plan.shares > 64 {
            return Err(ReplayError::Plan(format!(
                "{} shares: between 1 and 64",
                plan.shares
            )));
        }
        if plan.loops == 0 {
            return Err(ReplayError::Plan("loops: at least 1".into()));
        }
        if plan.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            return Err(ReplayError::Plan(format!(
                "rate {:?}: a positive number of events per second",
                plan.rate
            )));
        }
        let last = rec.stats.last_time_ms.map_or(0, u64::from);
        let top = u64::from(plan.loops - 1)
            .checked_mul(rec.loop_ms())
            .and_then(|x| x.checked_add(last));
        if top.is_none_or(|t| t > MAX_TAG_MS) {
            return Err(ReplayError::Plan(format!(
                "{} loops of {} ms: the time tags would pass their 29 bits ({MAX_TAG_MS} ms)",
                plan.loops,
                rec.loop_ms()
            )));
        }
        let replay = Arc::new(Replay {
            rec,
            plan,
            start: OnceLock::new(),
            shares: (0..plan.shares).map(|_| ShareState::default()).collect(),
            timeline: Mutex::new(Vec::new()),
        });
        let shares = (0..plan.shares)
            .map(|k| Share {
                replay: Arc::clone(&replay),
                index: k,
                next: k as u64,
                out: Vec::new(),
                at: 0,
            })
            .collect();
        Ok((replay, shares))
    }

    /// The recording.
    pub fn recording(&self) -> &Recording {
        &self.rec
    }

    fn chunks(&self) -> u64 {
        self.rec.chunks.len() as u64 * u64::from(self.plan.loops)
    }

    /// The counts every share will have handed out at the end.
    pub fn planned(&self) -> Counts {
        let mut c = Counts::default();
        for n in &self.rec.chunks {
            c.add(n);
        }
        Counts {
            words: c.words * u64::from(self.plan.loops),
            prompts: c.prompts * u64::from(self.plan.loops),
            delayeds: c.delayeds * u64::from(self.plan.loops),
        }
    }

    /// What share `k` has handed out so far.
    pub fn sent(&self, k: usize) -> Counts {
        *self.shares[k]
            .sent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Events handed out so far, all shares.
    pub fn events_sent(&self) -> u64 {
        (0..self.shares.len()).map(|k| self.sent(k).events()).sum()
    }

    /// When the first share read its first chunk.
    pub fn started(&self) -> Option<Instant> {
        self.start.get().copied()
    }

    /// When the shares had handed out, all together, chunks of `net` prompts less delayeds
    /// (the net counts of a sinogram of them when every event is in the field of view; fewer
    /// when some are not, so the time found is then earlier). `None` before then.
    pub fn handed_by(&self, net: i64) -> Option<Instant> {
        let start = self.started()?;
        let mut t = self
            .timeline
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        t.sort_unstable_by_key(|x| x.0);
        let mut sum = 0;
        t.into_iter().find_map(|(ns, n)| {
            sum += n;
            (sum >= net).then(|| start + Duration::from_nanos(ns))
        })
    }

    /// Seconds since the first read.
    pub fn elapsed(&self) -> Duration {
        self.start.get().map_or(Duration::ZERO, |s| s.elapsed())
    }

    /// How it went (at the end: once every share has read its end).
    pub fn report(&self) -> ReplayReport {
        let shares: Vec<Counts> = (0..self.shares.len()).map(|k| self.sent(k)).collect();
        let mut sent = Counts::default();
        shares.iter().for_each(|c| sent.add(c));
        let end_ns = (self.shares.iter())
            .map(|s| s.ended_ns.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        let seconds = match end_ns {
            0 => self.elapsed().as_secs_f64(),
            n => n as f64 / 1e9,
        };
        let behind = (self.shares.iter())
            .map(|s| s.behind_ns.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0) as f64
            / 1e9;
        let kept_rate = self.plan.rate.is_none_or(|r| {
            let planned = sent.events() as f64 / r;
            seconds <= planned + SLACK.as_secs_f64().max(0.02 * planned)
        });
        ReplayReport {
            rate: self.plan.rate,
            sustained_events_per_s: sent.events() as f64 / seconds.max(1e-9),
            seconds,
            kept_rate,
            most_behind_s: behind,
            sent,
            shares,
            loops: self.plan.loops,
        }
    }
}

/// One share of a replay: a reader of its chunks, paced.
#[derive(Debug)]
pub struct Share {
    replay: Arc<Replay>,
    index: usize,
    /// The next chunk of the whole replay this share hands out.
    next: u64,
    out: Vec<u8>,
    at: usize,
}

impl Share {
    /// Which share it is.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Takes the next chunk, once it is due: its index in the file and the ms its time tags
    /// move on by; `None` past the last.
    fn next_chunk(&mut self) -> Option<(usize, u32)> {
        let r = &*self.replay;
        let g = self.next;
        let start = *r.start.get_or_init(Instant::now);
        let state = &r.shares[self.index];
        if g >= r.chunks() {
            let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            state.ended_ns.store(ns.max(1), Ordering::Relaxed);
            return None;
        }
        let per = r.rec.chunks.len() as u64;
        let (lp, c) = (g / per, (g % per) as usize);
        if let Some(rate) = r.plan.rate {
            let events = lp * r.rec.stats.events + r.rec.before[c];
            let due = start + Duration::from_secs_f64(events as f64 / rate);
            let now = Instant::now();
            match due.checked_duration_since(now) {
                // Up to a millisecond early is on time: a sleep per chunk would cost the
                // host more than the copy (5,000 chunks a second at 80 M events/s).
                Some(wait) if wait < EARLY => {}
                Some(wait) => std::thread::sleep(wait),
                None => {
                    let late = u64::try_from((now - due).as_nanos()).unwrap_or(u64::MAX);
                    state.behind_ns.fetch_max(late, Ordering::Relaxed);
                }
            }
        }
        self.next += r.shares.len() as u64;
        let n = &r.rec.chunks[c];
        state.sent.lock().unwrap_or_else(|e| e.into_inner()).add(n);
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let net = n.prompts as i64 - n.delayeds as i64;
        (r.timeline.lock().unwrap_or_else(|e| e.into_inner())).push((ns, net));
        Some((c, (lp * r.rec.loop_ms()) as u32))
    }
}

impl Recording {
    fn chunk(&self, c: usize) -> &[u32] {
        &self.words[c * CHUNK_WORDS..((c + 1) * CHUNK_WORDS).min(self.words.len())]
    }
}

/// Writes `words` as little-endian bytes into `out` (as long), elapsed-time tags (top bits
/// 100) moved on by `shift` ms (checked against the tags' bits in [`Replay::new`]).
fn put_words(words: &[u32], shift: u32, out: &mut [u8]) {
    // Sized slices and no branch in the loop: it vectorises.
    for (o, &w) in out.chunks_exact_mut(4).zip(words) {
        let tag = u32::from(w >> 29 == 0b100);
        o.copy_from_slice(&(w + tag * shift).to_le_bytes());
    }
}

impl Read for Share {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at == self.out.len() {
            let Some((c, shift)) = self.next_chunk() else {
                return Ok(0);
            };
            let replay = Arc::clone(&self.replay);
            let words = replay.rec.chunk(c);
            let len = words.len() * 4;
            // Straight into the caller's buffer when the chunk fits: one copy.
            if buf.len() >= len {
                put_words(words, shift, &mut buf[..len]);
                return Ok(len);
            }
            let mut out = std::mem::take(&mut self.out);
            out.resize(len, 0);
            put_words(words, shift, &mut out);
            self.out = out;
            self.at = 0;
        }
        let n = buf.len().min(self.out.len() - self.at);
        buf[..n].copy_from_slice(&self.out[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words() -> Vec<u32> {
        // Three chunks and a bit: events (prompts and delayeds), and a time tag per 1000.
        (0..3 * CHUNK_WORDS as u32 + 100)
            .map(|i| match i % 1000 {
                0 => 0x8000_0000 | (i / 1000),
                k if k % 3 == 0 => k,
                k => 0x4000_0000 | k,
            })
            .collect()
    }

    /// Everything `s` gives, read in pieces of `piece` bytes (smaller than a chunk: through
    /// its own buffer; as large: straight into the caller's).
    fn read_in(mut s: Share, piece: usize) -> Vec<u32> {
        let (mut b, mut buf) = (Vec::new(), vec![0u8; piece]);
        loop {
            match s.read(&mut buf).unwrap() {
                0 => break,
                n => b.extend_from_slice(&buf[..n]),
            }
        }
        b.chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn shares_hand_out_every_word_once_and_tags_rise_across_loops() {
        let rec = Arc::new(Recording::from_words(words(), Scanner::demo()));
        let plan = Plan {
            shares: 3,
            loops: 2,
            rate: None,
        };
        let (replay, shares) = Replay::new(Arc::clone(&rec), plan).unwrap();
        let got: Vec<Vec<u32>> = (shares.into_iter().enumerate())
            .map(|(k, s)| read_in(s, [1000, CHUNK_WORDS * 4, 1 << 20][k]))
            .collect();
        // Chunks 0..8 of two loops of four: share k has chunks k, k+3, k+6.
        let src = words();
        let chunk = |g: usize| {
            let c = g % 4;
            let lp = (g / 4) as u32;
            src[c * CHUNK_WORDS..((c + 1) * CHUNK_WORDS).min(src.len())]
                .iter()
                .map(move |&w| if w >> 29 == 0b100 { w + lp * 50 } else { w })
        };
        for (k, g) in got.iter().enumerate() {
            let want: Vec<u32> = (k..8).step_by(3).flat_map(chunk).collect();
            assert_eq!(g, &want, "share {k}");
        }
        // The last tag of the file is 49 ms: a loop is 50 ms.
        assert_eq!(rec.loop_ms(), 50);
        let report = replay.report();
        assert_eq!(report.sent, replay.planned());
        assert_eq!(report.sent.words, 2 * src.len() as u64);
        let events = src.iter().filter(|w| *w >> 31 == 0).count() as u64;
        assert_eq!(report.sent.events(), 2 * events);
        assert!(report.kept_rate);
        // Every chunk is on the timeline: the whole net is reached, and no more.
        let net = report.sent.prompts as i64 - report.sent.delayeds as i64;
        assert!(replay.handed_by(net).is_some());
        assert!(replay.handed_by(net + 1).is_none());
    }

    #[test]
    fn a_paced_replay_takes_its_time_and_a_bad_plan_is_refused() {
        let rec = Arc::new(Recording::from_words(words(), Scanner::demo()));
        let events = rec.stats().events as f64;
        let plan = Plan {
            shares: 1,
            loops: 1,
            rate: Some(events / 0.2),
        };
        let (replay, mut shares) = Replay::new(Arc::clone(&rec), plan).unwrap();
        read_in(shares.remove(0), 4096);
        // The last chunk is due at the events before it over the rate: most of 0.2 s.
        let before_last = rec.before[3] as f64 / events * 0.2;
        assert!(
            replay.report().seconds >= before_last,
            "{:?}",
            replay.report()
        );
        for bad in [
            Plan { shares: 0, ..plan },
            Plan { loops: 0, ..plan },
            Plan {
                rate: Some(-1.0),
                ..plan
            },
            Plan {
                loops: 20_000_000,
                ..plan
            },
        ] {
            assert!(Replay::new(Arc::clone(&rec), bad).is_err(), "{bad:?}");
        }
    }
}
