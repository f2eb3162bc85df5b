//! `wav`: reads a WAV file as a source, or writes one as a sink (16-bit PCM).

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom};

use crate::queue::Get;
use crate::registry::{ArgError, Args, Build, Registry, TaskInfo};
use crate::sandbox::{ReadFile, WriteFile};
use crate::task::{Context, Status, Task, TaskError};
use crate::tasks::convert::FrameCarry;

struct WavIn {
    path: String,
    src: Option<ReadFile>,
    data: Option<WavData>,
}

/// An open WAV file positioned in its data chunk: the samples are read as they lie in the
/// file (16-bit little-endian, interleaved), which is already the stream's format.
struct WavData {
    file: File,
    /// Bytes of the data chunk not yet read.
    left: u64,
    /// Bytes per frame (2 x channels).
    frame: usize,
    channels: u16,
}

impl WavData {
    /// Reads the header of `f` (through hound) and checks that the data chunk holds 16-bit
    /// integer samples in 2-byte containers.
    fn open(path: &str, f: File) -> Result<WavData, TaskError> {
        let r = hound::WavReader::new(BufReader::new(f)).map_err(|e| wav_err(path, e))?;
        let spec = r.spec();
        if spec.bits_per_sample != 16 || spec.sample_format != hound::SampleFormat::Int {
            return Err(TaskError::BadInput(format!(
                "{path}: {}-bit {:?} samples; only 16-bit integer PCM is supported",
                spec.bits_per_sample, spec.sample_format
            )));
        }
        let samples = u64::from(r.len());
        let mut inner = r.into_inner();
        let io = |e| TaskError::io(format!("read {path}"), e);
        // hound stops at the first byte of the data chunk; its header (`data`, then the
        // chunk's length) lies just before. The length tells the container's size: 16 valid
        // bits may sit in wider containers, which the bytes below are not.
        // The buffered reader has read ahead: its position, then the file itself.
        let at = inner.stream_position().map_err(io)?;
        let mut file = inner.into_inner();
        let mut head = [0u8; 8];
        file.seek(SeekFrom::Start(at.saturating_sub(8)))
            .and_then(|_| file.read_exact(&mut head))
            .map_err(io)?;
        let len = u64::from(u32::from_le_bytes([head[4], head[5], head[6], head[7]]));
        if &head[..4] != b"data" || len != 2 * samples {
            return Err(TaskError::BadInput(format!(
                "{path}: {samples} samples in a data chunk of {len} bytes; only 16-bit samples in 2-byte containers are supported"
            )));
        }
        Ok(WavData {
            file,
            left: len,
            frame: 2 * usize::from(spec.channels),
            channels: spec.channels,
        })
    }
}

impl Task for WavIn {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        if let Some(src) = self.src.take() {
            let f = src
                .open()
                .map_err(|e| TaskError::io(format!("read {}", self.path), e))?;
            self.data = Some(WavData::open(&self.path, f)?);
        }
        let d = self.data.as_mut().expect("opened above");
        loop {
            if d.left == 0 {
                return Ok(Status::Done);
            }
            let Some(mut b) = cx.alloc(0) else {
                return Ok(Status::Blocked);
            };
            let room = b.remaining() / d.frame * d.frame;
            if room == 0 {
                // Reading nothing would end the stream here, the file's samples dropped.
                return Err(TaskError::Failed(format!(
                    "{}: a frame of {} channels ({} bytes) does not fit the output's buffers of {} bytes",
                    self.path,
                    d.channels,
                    d.frame,
                    b.remaining()
                )));
            }
            let n = room.min(usize::try_from(d.left).unwrap_or(usize::MAX));
            if let Err(e) = d.file.read_exact(&mut b.unfilled()[..n]) {
                return Err(match e.kind() {
                    std::io::ErrorKind::UnexpectedEof => TaskError::BadInput(format!(
                        "{}: the file ends before its data chunk does ({} bytes missing at most)",
                        self.path, d.left
                    )),
                    _ => TaskError::io(format!("read {}", self.path), e),
                });
            }
            d.left -= n as u64;
            b.commit(n);
            cx.put(0, b.freeze());
        }
    }
}

fn wav_err(path: &str, e: hound::Error) -> TaskError {
    match e {
        hound::Error::IoError(io) => TaskError::io(format!("read {path}"), io),
        other => TaskError::BadInput(format!("{path}: {other}")),
    }
}

struct WavOut {
    path: String,
    dst: WriteFile,
    spec: hound::WavSpec,
    writer: Option<hound::WavWriter<BufWriter<File>>>,
    frames: FrameCarry,
}

impl Task for WavOut {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        if self.writer.is_none() {
            let f = self
                .dst
                .create()
                .map_err(|e| TaskError::io(format!("create {}", self.path), e))?;
            let w = hound::WavWriter::new(BufWriter::new(f), self.spec).map_err(|e| match e {
                hound::Error::IoError(io) => TaskError::io(format!("create {}", self.path), io),
                other => TaskError::Failed(format!("{}: {other}", self.path)),
            })?;
            self.writer = Some(w);
        }
        let path = &self.path;
        loop {
            match cx.get(0) {
                Get::Buf(b) => {
                    let w = self.writer.as_mut().expect("created above");
                    let mut err = None;
                    self.frames.feed(&b, |data| {
                        let mut sw = w.get_i16_writer(data.len() as u32 / 2);
                        for s in data.chunks_exact(2) {
                            sw.write_sample(i16::from_le_bytes([s[0], s[1]]));
                        }
                        if let Err(e) = sw.flush() {
                            err = Some(e);
                        }
                    });
                    if let Some(e) = err {
                        return Err(TaskError::Failed(format!("write {path}: {e}")));
                    }
                }
                Get::Empty => return Ok(Status::Blocked),
                Get::Closed => {
                    self.frames.finish(&format!("wav {path}"))?;
                    return Ok(Status::Done);
                }
            }
        }
    }

    fn finish(&mut self) -> Result<(), TaskError> {
        if let Some(w) = self.writer.take() {
            w.finalize()
                .map_err(|e| TaskError::Failed(format!("finish {}: {e}", self.path)))?;
        }
        Ok(())
    }
}

/// Most channels `wav` writes: a frame of 2 KiB, as `mix` takes.
const MAX_WAV_CHANNELS: u16 = 1024;

fn wav(args: &Args, b: &mut Build<'_>) -> Result<Box<dyn Task>, ArgError> {
    let path = args.required("path")?.to_string();
    match (b.inputs(), b.outputs()) {
        (0, 1) => Ok(Box::new(WavIn {
            src: Some(b.files().open(&path).map_err(|e| e.arg("path"))?),
            path,
            data: None,
        })),
        (1, 0) => {
            let channels = args.parse_in::<u16>("channels", 1..=MAX_WAV_CHANNELS)?;
            // The header's byte rate (rate x channels x 2) is a u32.
            let rate = args.parse_in::<u32>("rate", 1..=u32::MAX / (2 * u32::from(channels)))?;
            Ok(Box::new(WavOut {
                dst: b.files().create(&path).map_err(|e| e.arg("path"))?,
                path,
                spec: hound::WavSpec {
                    channels,
                    sample_rate: rate,
                    bits_per_sample: 16,
                    sample_format: hound::SampleFormat::Int,
                },
                writer: None,
                frames: FrameCarry::new(2 * channels as usize),
            }))
        }
        _ => Err(ArgError::task(
            "wav reads a file (no input, one output) or writes one (one input, no output)",
        )),
    }
}

pub(crate) fn register(r: &mut Registry) {
    r.register(
        TaskInfo::new(
            "wav",
            "reads a 16-bit PCM WAV file (as a source) or writes one (as a sink; the loudspeaker)",
        )
        .required("path", "file to read or write")
        .arg("rate", "44100", "sample rate written (sink)")
        .arg("channels", "1", "channels written (sink)")
        .inputs(0, 1)
        .outputs(0, 1)
        .allocates(16, 4096)
        .min_buffer(16),
        wav,
    );
}
