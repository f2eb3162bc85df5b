//! Action exports: a pipeline as a disk (`[ION]`, sections 2 and 5). Reading or writing
//! given block addresses starts, stops, queries and moves data on the pipeline's host
//! channels, so any program that can `pread`/`pwrite` a disk can drive an engine.
//!
//! # Layout (blocks of [`BLOCK`] = 4096 bytes)
//!
//! | blocks | action |
//! |---|---|
//! | 0 | descriptor (read): text, NUL-padded, saying where everything is (below) |
//! | 1 | pipeline status (read): one line of text, then the engine's statistics as JSON |
//! | 2 | pipeline stop (read or write): stops the sources; data already produced can be read |
//! | 16..32 | control (write): a pipeline description (text, NUL-padded, from block 16) replaces the pipeline and starts it (only when the export accepts control: [`ActionDisk::set_control`], `--allow-control`; `EPERM` otherwise); read returns the current description |
//! | 64 + i*4096 | channel `i` region: |
//! | +0 | start (read or write): starts the pipeline if needed and opens the channel; returns the status line |
//! | +1 | stop (read or write): `host-in`: ends the stream; `host-out`: stops the pipeline's sources (the engine has no per-channel stop); returns the status line |
//! | +2 | status (read): the status line |
//! | +16..+1024 | data, underrun behaviour of the export (`underrun=wait` or `poll`) |
//! | +1024..+2048 | data, always waits |
//! | +2048..+3072 | data, always "poll again" |
//!
//! A request acts on the address it starts at; it may run on inside the same region (a long
//! data read) but not into the next one. Reading a `host-out` channel's data returns a record:
//! a 16-byte header — magic `OHDA`, then little-endian u32 status (0 data, 1 poll again, 2 end
//! of stream, 3 channel not started, 4 no pipeline), u32 count of data bytes `n`, u32 reserved
//! — then `n` bytes, then zeroes up to the length read. A waiting read waits at most the
//! export's `wait=DURATION` (default 30s), then answers "poll again". Writing a `host-in`
//! channel's data sends the written bytes as one message.
//!
//! The descriptor is text, one `key value...` per line:
//! ```text
//! offhost-actions 1
//! block 4096
//! status 1
//! stop 2
//! control 16 16
//! underrun wait
//! channel 0 out speech 64
//! ```
//! where a channel line is `channel INDEX in|out NAME FIRST_BLOCK`.
//!
//! A pipeline written to the control range comes from whoever can write the disk: it is built
//! with the file access the export was given for control ([`Files::Denied`] unless the
//! server was started with `--files DIR`), and a refused one is answered `EINVAL` and its
//! reason (task, line, path) is shown in the status block, as `rejected: ...`. The pipeline
//! of the export's own file is the operator's and sees files as the server does.

use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use offhost_engine::{
    Buffer, EngineConfig, Files, HostError, HostInput, HostOutput, Pipeline, PipelineError,
    Registry, Running,
};

use crate::backend::Backend;
use crate::proto::Errno;

/// Bytes per action block.
pub const BLOCK: u64 = 4096;
/// Block of the pipeline status.
pub const STATUS_BLOCK: u64 = 1;
/// Block of the pipeline stop action.
pub const STOP_BLOCK: u64 = 2;
/// First block of the control range.
pub const CONTROL_BLOCK: u64 = 16;
/// Blocks in the control range (a description is at most 64 KiB).
pub const CONTROL_BLOCKS: u64 = 16;
/// First block of channel 0.
pub const CHANNEL_BASE: u64 = 64;
/// Blocks per channel region.
pub const CHANNEL_STRIDE: u64 = 4096;
/// Offsets of the per-channel actions inside a region.
pub const START: u64 = 0;
/// Channel stop.
pub const STOP: u64 = 1;
/// Channel status.
pub const STATUS: u64 = 2;
/// Data with the export's underrun behaviour.
pub const DATA: u64 = 16;
/// Data that always waits.
pub const DATA_WAIT: u64 = 1024;
/// Data that always answers "poll again".
pub const DATA_POLL: u64 = 2048;
/// End of the last data range in a region.
pub const DATA_END: u64 = 3072;

/// Data record status: data follows.
pub const REC_DATA: u32 = 0;
/// Data record status: nothing ready, poll again.
pub const REC_AGAIN: u32 = 1;
/// Data record status: end of stream.
pub const REC_END: u32 = 2;
/// Data record status: the channel has not been started.
pub const REC_NOT_STARTED: u32 = 3;
/// Data record status: no pipeline.
pub const REC_NO_PIPELINE: u32 = 4;
/// Data record header length.
pub const REC_HEADER: usize = 16;

/// Errors creating an action export.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ActionsError {
    /// The pipeline file could not be read.
    #[error("cannot read pipeline {path}: {source}")]
    Read {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The pipeline does not parse, check or fit its budget.
    #[error("pipeline rejected: {0}")]
    Pipeline(#[from] PipelineError),
    /// The pipeline has more host channels than the export has regions.
    #[error("pipeline has {have} host channels, the export holds {max} (option channels=N)")]
    TooManyChannels {
        /// Channels in the pipeline.
        have: usize,
        /// Regions in the export.
        max: usize,
    },
}

/// How a data read behaves when nothing is ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Underrun {
    /// Delay the reply until data arrives (at most the export's wait limit).
    Wait,
    /// Answer at once with "poll again".
    Poll,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    In,
    Out,
}

const CH_IDLE: u8 = 0;
const CH_STARTED: u8 = 1;
const CH_STOPPED: u8 = 2;
const CH_ENDED: u8 = 3;

struct Channel {
    name: String,
    dir: Dir,
    state: AtomicU8,
    bytes: AtomicU64,
    out: Mutex<(Option<HostOutput>, Option<Buffer>)>,
    input: Mutex<Option<HostInput>>,
}

struct Loaded {
    text: String,
    channels: Vec<Arc<Channel>>,
    running: Option<Running>,
    /// Set once the pipeline has been started and has finished or been stopped.
    stopped: bool,
    /// The file access of this pipeline's tasks.
    files: Files,
}

/// A pipeline exposed as a disk.
pub struct ActionDisk {
    registry: Arc<Registry>,
    config: EngineConfig,
    max_channels: usize,
    underrun: Underrun,
    wait_limit: Duration,
    state: Mutex<Loaded>,
    /// Whether pipelines written to the control range are accepted, and their file access.
    control: Option<Files>,
    /// Why the last pipeline written to the control range was refused.
    rejected: Mutex<Option<String>>,
}

fn host_channels(
    text: &str,
    registry: &Registry,
    files: &Files,
) -> Result<Vec<(String, Dir)>, PipelineError> {
    let built = Pipeline::parse(text)?.build_with(registry, files)?;
    let mut v: Vec<(String, Dir)> = built
        .host_outputs()
        .into_iter()
        .map(|n| (n, Dir::Out))
        .collect();
    v.extend(built.host_inputs().into_iter().map(|n| (n, Dir::In)));
    Ok(v)
}

impl ActionDisk {
    /// An action disk for the pipeline in `text`, not yet started.
    pub fn new(
        text: &str,
        registry: Arc<Registry>,
        max_channels: usize,
        underrun: Underrun,
        wait_limit: Duration,
    ) -> Result<Self, ActionsError> {
        let d = Self {
            registry,
            config: EngineConfig::default(),
            max_channels,
            underrun,
            wait_limit,
            state: Mutex::new(Loaded {
                text: String::new(),
                channels: Vec::new(),
                running: None,
                stopped: false,
                files: Files::Ambient,
            }),
            control: None,
            rejected: Mutex::new(None),
        };
        let loaded = d.load(text, Files::Ambient)?;
        *d.state.lock().unwrap_or_else(|e| e.into_inner()) = loaded;
        Ok(d)
    }

    /// Accepts pipelines written to the control range, built with `files` (`None`: refuses
    /// them with `EPERM`, the default).
    pub fn set_control(&mut self, files: Option<Files>) {
        self.control = files;
    }

    fn load(&self, text: &str, files: Files) -> Result<Loaded, ActionsError> {
        let chans = host_channels(text, &self.registry, &files)?;
        if chans.len() > self.max_channels {
            return Err(ActionsError::TooManyChannels {
                have: chans.len(),
                max: self.max_channels,
            });
        }
        Ok(Loaded {
            text: text.to_owned(),
            channels: chans
                .into_iter()
                .map(|(name, dir)| {
                    Arc::new(Channel {
                        name,
                        dir,
                        state: AtomicU8::new(CH_IDLE),
                        bytes: AtomicU64::new(0),
                        out: Mutex::new((None, None)),
                        input: Mutex::new(None),
                    })
                })
                .collect(),
            running: None,
            stopped: false,
            files,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Loaded> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The descriptor text of block 0.
    pub fn descriptor(&self) -> String {
        let st = self.lock();
        let mut s = format!(
            "offhost-actions 1\nblock {BLOCK}\nstatus {STATUS_BLOCK}\nstop {STOP_BLOCK}\n\
             control {CONTROL_BLOCK} {CONTROL_BLOCKS}\nunderrun {}\n",
            match self.underrun {
                Underrun::Wait => "wait",
                Underrun::Poll => "poll",
            }
        );
        for (i, c) in st.channels.iter().enumerate() {
            s.push_str(&format!(
                "channel {i} {} {} {}\n",
                if c.dir == Dir::Out { "out" } else { "in" },
                c.name,
                CHANNEL_BASE + i as u64 * CHANNEL_STRIDE
            ));
        }
        s
    }

    /// Starts the pipeline if it is not running; hands the host ports to the channels.
    fn ensure_running(&self, st: &mut Loaded) -> Result<(), PipelineError> {
        if st.running.is_some() || st.stopped {
            return Ok(());
        }
        let mut run = Pipeline::parse(&st.text)
            .and_then(|p| p.build_with(&self.registry, &st.files))?
            .start(&self.config);
        for c in &st.channels {
            match c.dir {
                Dir::Out => {
                    c.out.lock().unwrap_or_else(|e| e.into_inner()).0 = run.host_output(&c.name)
                }
                Dir::In => {
                    *c.input.lock().unwrap_or_else(|e| e.into_inner()) = run.host_input(&c.name)
                }
            }
        }
        st.running = Some(run);
        Ok(())
    }

    fn pipeline_state(st: &Loaded) -> &'static str {
        match &st.running {
            None if st.stopped => "stopped",
            None => "not-started",
            Some(r) if r.is_finished() => "finished",
            Some(_) if st.stopped => "stopping",
            Some(_) => "running",
        }
    }

    fn status_line(&self, st: &Loaded, c: &Channel) -> String {
        // Ordering: Acquire pairs with the Release/AcqRel stores of the channel state in
        // `start_channel`, `read_data` and `stop_channel`.
        let state = match c.state.load(Ordering::Acquire) {
            CH_IDLE => "idle",
            CH_STARTED => "started",
            CH_STOPPED => "stopped",
            _ => "ended",
        };
        format!(
            "channel {} dir {} state {} bytes {} pipeline {}\n",
            c.name,
            if c.dir == Dir::Out { "out" } else { "in" },
            state,
            c.bytes.load(Ordering::Relaxed),
            Self::pipeline_state(st)
        )
    }

    fn channel_at(&self, block: u64) -> Option<(Arc<Channel>, u64)> {
        let rel = block.checked_sub(CHANNEL_BASE)?;
        let idx = (rel / CHANNEL_STRIDE) as usize;
        let st = self.lock();
        st.channels
            .get(idx)
            .map(|c| (c.clone(), rel % CHANNEL_STRIDE))
    }

    /// Fills `buf` with a data record from an output channel.
    fn read_data(&self, c: &Channel, buf: &mut [u8], underrun: Underrun) {
        buf.fill(0);
        let cap = buf.len().saturating_sub(REC_HEADER);
        let mut n = 0usize;
        // Ordering: Acquire pairs with the AcqRel CAS in `start_channel`.
        let status = if c.state.load(Ordering::Acquire) == CH_IDLE {
            REC_NOT_STARTED
        } else {
            let mut g = c.out.lock().unwrap_or_else(|e| e.into_inner());
            let (out, pending) = &mut *g;
            let deadline = Instant::now() + self.wait_limit;
            let mut ended = out.is_none() && pending.is_none();
            while n < cap && !ended {
                let b = match pending.take() {
                    Some(b) => b,
                    None => {
                        let Some(o) = out.as_ref() else {
                            ended = true;
                            break;
                        };
                        // Wait only while nothing has been gathered yet.
                        let wait = if n == 0 && underrun == Underrun::Wait {
                            deadline.saturating_duration_since(Instant::now())
                        } else {
                            Duration::ZERO
                        };
                        match o.recv_timeout(wait) {
                            Ok(Some(b)) => b,
                            Ok(None) => {
                                *out = None;
                                ended = true;
                                break;
                            }
                            Err(HostError::Timeout) => break,
                            Err(_) => {
                                *out = None;
                                ended = true;
                                break;
                            }
                        }
                    }
                };
                let take = b.len().min(cap - n);
                buf[REC_HEADER + n..REC_HEADER + n + take].copy_from_slice(&b[..take]);
                n += take;
                if take < b.len() {
                    *pending = Some(b.slice(take..b.len()));
                }
            }
            if n > 0 {
                REC_DATA
            } else if ended {
                // Ordering: Release pairs with the Acquire loads of the state in `status_line` and
                // `stop_channel`.
                c.state.store(CH_ENDED, Ordering::Release);
                REC_END
            } else {
                REC_AGAIN
            }
        };
        // Relaxed: a statistic.
        c.bytes.fetch_add(n as u64, Ordering::Relaxed);
        if buf.len() >= REC_HEADER {
            buf[..4].copy_from_slice(b"OHDA");
            buf[4..8].copy_from_slice(&status.to_le_bytes());
            buf[8..12].copy_from_slice(&(n as u32).to_le_bytes());
        }
    }

    fn start_channel(&self, c: &Channel) -> Result<(), PipelineError> {
        let mut st = self.lock();
        self.ensure_running(&mut st)?;
        // Ordering: AcqRel/Acquire CAS: its Release half pairs with the Acquire loads in
        // read_data/status_line.
        let _ = c
            .state
            .compare_exchange(CH_IDLE, CH_STARTED, Ordering::AcqRel, Ordering::Acquire);
        Ok(())
    }

    fn stop_channel(&self, c: &Channel) {
        match c.dir {
            Dir::In => {
                if let Some(mut i) = c.input.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    i.close();
                }
            }
            Dir::Out => {
                let mut st = self.lock();
                if let Some(r) = &st.running {
                    r.stop();
                    st.stopped = true;
                }
            }
        }
        // Ordering: Acquire/Release: the load pairs with the Release store of CH_ENDED in
        // `read_data`; the store with the Acquire loads in `read_data` and `status_line`. Not one
        // RMW: a CH_ENDED stored in between is overwritten with CH_STOPPED (harmless for a status,
        // but a CAS would be exact).
        if c.state.load(Ordering::Acquire) != CH_ENDED {
            c.state.store(CH_STOPPED, Ordering::Release);
        }
    }

    fn text_into(buf: &mut [u8], s: &str) {
        buf.fill(0);
        let n = s.len().min(buf.len());
        buf[..n].copy_from_slice(&s.as_bytes()[..n]);
    }

    fn pipeline_status(&self) -> String {
        let st = self.lock();
        let mut s = format!("pipeline {}\n", Self::pipeline_state(&st));
        if let Some(why) = &*self.rejected.lock().unwrap_or_else(|e| e.into_inner()) {
            s.push_str(&format!("rejected: {why}\n"));
        }
        if let Some(r) = &st.running {
            s.push_str(&serde_json::to_string(&r.stats()).unwrap_or_default());
            s.push('\n');
        }
        s
    }

    fn stop_pipeline(&self) {
        let mut st = self.lock();
        if let Some(r) = &st.running {
            r.stop();
        }
        st.stopped = true;
    }

    /// Replaces the pipeline with `text` and starts it.
    fn replace(&self, text: &str, files: Files) -> Result<(), ActionsError> {
        let mut new = self.load(text, files)?;
        self.ensure_running(&mut new)?;
        let old = std::mem::replace(&mut *self.lock(), new);
        if let Some(r) = old.running {
            r.stop();
            // Dropping the old channels' ports lets the old pipeline drain and finish.
            drop(old.channels);
            // A few old pipelines finish on threads of their own; past that (a client
            // replacing pipelines in a loop), the request that replaced it waits for it.
            static DRAINING: AtomicUsize = AtomicUsize::new(0);
            let wait = move |r: Running| {
                let _ = r.wait_timeout(Duration::from_secs(30));
            };
            let room = DRAINING
                // Ordering: AcqRel/Acquire on a static count of draining threads: only the RMW's
                // atomicity bounds it at 4, the orderings are stronger than needed; likewise the
                // decrements below.
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n < 4).then_some(n + 1)
                })
                .is_ok();
            let mut r = Some(r);
            if room {
                let taken = r.take();
                let spawned = std::thread::Builder::new()
                    .name("nbd-actions-drain".into())
                    .spawn(move || {
                        if let Some(r) = taken {
                            wait(r);
                        }
                        // Ordering: AcqRel: the draining thread ends; a count, stronger than
                        // needed.
                        DRAINING.fetch_sub(1, Ordering::AcqRel);
                    });
                if spawned.is_err() {
                    // Ordering: AcqRel: no thread started; a count, stronger than needed.
                    DRAINING.fetch_sub(1, Ordering::AcqRel);
                }
            }
            if let Some(r) = r {
                wait(r);
            }
        }
        Ok(())
    }
}

fn region_end(block: u64) -> u64 {
    if block < CONTROL_BLOCK {
        block + 1
    } else if block < CHANNEL_BASE {
        if block < CONTROL_BLOCK + CONTROL_BLOCKS {
            CONTROL_BLOCK + CONTROL_BLOCKS
        } else {
            CHANNEL_BASE
        }
    } else {
        let rel = (block - CHANNEL_BASE) % CHANNEL_STRIDE;
        let base = block - rel;
        base + match rel {
            r if r < DATA => r + 1,
            r if r < DATA_WAIT => DATA_WAIT,
            r if r < DATA_POLL => DATA_POLL,
            r if r < DATA_END => DATA_END,
            _ => CHANNEL_STRIDE,
        }
    }
}

/// Checks that `[off, off+len)` stays inside one action region; returns the region's first
/// block offset-relative data.
fn one_region(off: u64, len: u64) -> Result<u64, Errno> {
    let block = off / BLOCK;
    if off + len > region_end(block) * BLOCK {
        return Err(Errno::Inval);
    }
    Ok(block)
}

impl Backend for ActionDisk {
    fn size(&self) -> u64 {
        (CHANNEL_BASE + self.max_channels as u64 * CHANNEL_STRIDE) * BLOCK
    }

    fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), Errno> {
        let block = one_region(off, buf.len() as u64)?;
        match block {
            0 => {
                let d = self.descriptor();
                let start = (off as usize).min(d.len());
                Self::text_into(buf, &d[start..]);
            }
            STATUS_BLOCK => Self::text_into(buf, &self.pipeline_status()),
            STOP_BLOCK => {
                self.stop_pipeline();
                Self::text_into(buf, &self.pipeline_status());
            }
            b if (CONTROL_BLOCK..CONTROL_BLOCK + CONTROL_BLOCKS).contains(&b) => {
                let text = self.lock().text.clone();
                let start = ((off - CONTROL_BLOCK * BLOCK) as usize).min(text.len());
                Self::text_into(buf, &text[start..]);
            }
            b => {
                let Some((c, rel)) = self.channel_at(b) else {
                    buf.fill(0);
                    return Ok(());
                };
                match rel {
                    START => self.start_channel(&c).map_err(|e| {
                        tracing::warn!("channel {}: cannot start: {e}", c.name);
                        Errno::Io
                    })?,
                    STOP => self.stop_channel(&c),
                    r if (DATA..DATA_END).contains(&r) && c.dir == Dir::Out => {
                        let mode = match r {
                            r if r < DATA_WAIT => self.underrun,
                            r if r < DATA_POLL => Underrun::Wait,
                            _ => Underrun::Poll,
                        };
                        self.read_data(&c, buf, mode);
                        return Ok(());
                    }
                    _ => {}
                }
                let st = self.lock();
                Self::text_into(buf, &self.status_line(&st, &c));
            }
        }
        Ok(())
    }

    fn write(&self, off: u64, data: &[u8], _fua: bool) -> Result<(), Errno> {
        let block = one_region(off, data.len() as u64)?;
        match block {
            STOP_BLOCK => self.stop_pipeline(),
            CONTROL_BLOCK => {
                let Some(files) = self.control.clone() else {
                    tracing::warn!("a pipeline written to the control range was refused: the export does not accept control (--allow-control)");
                    return Err(Errno::Perm);
                };
                let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
                let text = std::str::from_utf8(&data[..end]).map_err(|_| Errno::Inval)?;
                let r = self.replace(text, files);
                *self.rejected.lock().unwrap_or_else(|e| e.into_inner()) =
                    r.as_ref().err().map(ToString::to_string);
                r.map_err(|e| {
                    tracing::warn!("new pipeline rejected: {e}");
                    Errno::Inval
                })?;
            }
            b => {
                let Some((c, rel)) = self.channel_at(b) else {
                    return Err(Errno::Inval);
                };
                match rel {
                    START => self.start_channel(&c).map_err(|_| Errno::Io)?,
                    STOP => self.stop_channel(&c),
                    r if (DATA..DATA_END).contains(&r) && c.dir == Dir::In => {
                        // Ordering: Acquire pairs with the AcqRel CAS in `start_channel`.
                        if c.state.load(Ordering::Acquire) == CH_IDLE {
                            return Err(Errno::Inval);
                        }
                        let g = c.input.lock().unwrap_or_else(|e| e.into_inner());
                        let i = g.as_ref().ok_or(Errno::Io)?;
                        i.send(data.to_vec()).map_err(|_| Errno::Io)?;
                        // Relaxed: a statistic.
                        c.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
                    }
                    _ => return Err(Errno::Inval),
                }
            }
        }
        Ok(())
    }

    fn trim(&self, _off: u64, _len: u64, _fua: bool) -> Result<(), Errno> {
        Err(Errno::Inval)
    }
    fn write_zeroes(&self, _off: u64, _len: u64, _fua: bool) -> Result<(), Errno> {
        Err(Errno::Inval)
    }
    fn flush(&self) -> Result<(), Errno> {
        Ok(())
    }
    fn may_block(&self) -> bool {
        true
    }
    fn kind(&self) -> &'static str {
        "actions (each range runs a pipeline)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(text: &str, underrun: Underrun) -> ActionDisk {
        let mut d = ActionDisk::new(
            text,
            Arc::new(Registry::with_builtins()),
            4,
            underrun,
            Duration::from_secs(10),
        )
        .unwrap();
        d.set_control(Some(Files::Denied));
        d
    }

    fn header(b: &[u8]) -> (u32, usize) {
        assert_eq!(&b[..4], b"OHDA");
        (
            u32::from_le_bytes(b[4..8].try_into().unwrap()),
            u32::from_le_bytes(b[8..12].try_into().unwrap()) as usize,
        )
    }

    #[test]
    fn descriptor_lists_channels_and_data_flows_to_the_end() {
        let d = disk(
            "random bytes=100000 seed=1 >r:p(4,8192)\nhost-out name=rnd <r\n",
            Underrun::Wait,
        );
        let mut b = vec![0u8; 4096];
        d.read(0, &mut b).unwrap();
        let text = String::from_utf8_lossy(&b);
        assert!(text.contains("channel 0 out rnd 64"), "{text}");
        let ch = CHANNEL_BASE * BLOCK;
        let mut data = vec![0u8; 65536];
        d.read(ch + DATA * BLOCK, &mut data).unwrap();
        assert_eq!(header(&data).0, REC_NOT_STARTED);
        d.read(ch + START * BLOCK, &mut b).unwrap();
        assert!(String::from_utf8_lossy(&b).contains("state started"));
        let mut total = 0;
        for _ in 0..1000 {
            d.read(ch + DATA * BLOCK, &mut data).unwrap();
            match header(&data) {
                (REC_DATA, n) => total += n,
                (REC_END, 0) => break,
                other => panic!("unexpected record {other:?}"),
            }
        }
        assert_eq!(total, 100_000);
        d.read(ch + STATUS * BLOCK, &mut b).unwrap();
        assert!(String::from_utf8_lossy(&b).contains("state ended bytes 100000"));
    }

    #[test]
    fn requests_may_not_cross_regions_and_bad_pipelines_are_refused() {
        let d = disk(
            "fill bytes=1k >f:p(2,4096)\nhost-out name=f <f\n",
            Underrun::Poll,
        );
        let mut b = vec![0u8; 8192];
        assert_eq!(d.read(CHANNEL_BASE * BLOCK, &mut b), Err(Errno::Inval));
        assert_eq!(
            d.write(CONTROL_BLOCK * BLOCK, b"nosuchtask >x\n", false),
            Err(Errno::Inval)
        );
        assert!(ActionDisk::new(
            "nosuchtask\n",
            Arc::new(Registry::with_builtins()),
            4,
            Underrun::Wait,
            Duration::from_secs(1)
        )
        .is_err());
    }

    #[test]
    fn control_is_refused_unless_allowed_and_its_pipelines_have_no_files() {
        let text = "tone seconds=0.1 >a\nnull <a\n";
        let mut d = disk(text, Underrun::Wait);
        d.set_control(None);
        let w = |d: &ActionDisk, t: &str| d.write(CONTROL_BLOCK * BLOCK, t.as_bytes(), false);
        assert_eq!(w(&d, text), Err(Errno::Perm));
        d.set_control(Some(Files::Denied));
        assert_eq!(
            w(&d, "file path=/etc/passwd >a\nhost-out name=x <a\n"),
            Err(Errno::Inval)
        );
        let mut b = vec![0u8; 4096];
        d.read(STATUS_BLOCK * BLOCK, &mut b).unwrap();
        let status = String::from_utf8_lossy(&b);
        assert!(status.contains("rejected: line 1"), "{status}");
        assert!(status.contains("task 'file'"), "{status}");
        assert!(status.contains("\"/etc/passwd\""), "{status}");
        // The old pipeline is still the one served.
        d.read(CONTROL_BLOCK * BLOCK, &mut b).unwrap();
        assert!(String::from_utf8_lossy(&b).starts_with(text));
        w(&d, text).unwrap();
        d.read(STATUS_BLOCK * BLOCK, &mut b).unwrap();
        assert!(!String::from_utf8_lossy(&b).contains("rejected"));
    }
}
