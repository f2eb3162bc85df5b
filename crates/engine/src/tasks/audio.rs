//! Audio tasks on 16-bit signed little-endian PCM: `tone`, `mix`, `mulaw`, `alaw`.

use crate::registry::{ArgError, Args, Build, Registry, TaskInfo, MAX_SECONDS};
use crate::task::{Context, Priority, Status, Task, TaskError};
use crate::tasks::convert::{converter, Convert, FrameCarry};
use crate::tasks::g711;

/// A sine generator per channel. Within a buffer each channel follows the recurrence
/// `y[n] = 2 cos(Lw) y[n-L] - y[n-2L]` on L interleaved lanes (one multiply-add per sample);
/// at the start of every buffer the state is recomputed exactly from the sample index, so no
/// error accumulates however long the stream runs.
struct Tone {
    /// Angular step per sample, per channel.
    w: Vec<f64>,
    amp: f64,
    /// Index of the next frame.
    n: u64,
    frames_left: Option<u64>,
}

impl Tone {
    fn new(rate: u32, freqs: &[f64], amp: f64, seconds: Option<f64>) -> Tone {
        Tone {
            w: freqs
                .iter()
                .map(|f| 2.0 * std::f64::consts::PI * f / rate as f64)
                .collect(),
            amp,
            n: 0,
            frames_left: seconds.map(|s| (s * rate as f64).round() as u64),
        }
    }
}

/// Independent recurrences per channel in [`Tone`].
const LANES: usize = 8;

/// Rounds to the nearest integer sample (halves away from zero), without a libm call.
fn to_sample(x: f64) -> i16 {
    (x + 0.5f64.copysign(x)) as i16
}

impl Task for Tone {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        let ch = self.w.len();
        let frame = 2 * ch;
        loop {
            if self.frames_left == Some(0) {
                return Ok(Status::Done);
            }
            let Some(mut b) = cx.alloc(0) else {
                return Ok(Status::Blocked);
            };
            let mut frames = b.remaining() / frame;
            if let Some(left) = self.frames_left {
                frames = frames.min(left as usize);
                self.frames_left = Some(left - frames as u64);
            }
            let amp = self.amp * 32767.0;
            let out = &mut b.unfilled()[..frames * frame];
            for (c, &w) in self.w.iter().enumerate() {
                // Phase reduced modulo 2 pi keeps precision for long streams.
                let sin_at =
                    |k: i64| amp * (((self.n as i64 + k) as f64 * w) % std::f64::consts::TAU).sin();
                // LANES interleaved recurrences, each stepping LANES samples, so the chains
                // are independent and the loop is not bound by one multiply-add's latency.
                let mut y1: [f64; LANES] = std::array::from_fn(|j| sin_at(j as i64 - LANES as i64));
                let mut y2: [f64; LANES] =
                    std::array::from_fn(|j| sin_at(j as i64 - 2 * LANES as i64));
                let k = 2.0 * (LANES as f64 * w).cos();
                let mut groups = out.chunks_exact_mut(frame * LANES);
                for g in &mut groups {
                    let mut y = [0f64; LANES];
                    for j in 0..LANES {
                        y[j] = k * y1[j] - y2[j];
                    }
                    for (j, f) in g.chunks_exact_mut(frame).enumerate() {
                        f[2 * c..2 * c + 2].copy_from_slice(&to_sample(y[j]).to_le_bytes());
                    }
                    y2 = y1;
                    y1 = y;
                }
                let done = (frames / LANES) * LANES;
                for (i, f) in groups.into_remainder().chunks_exact_mut(frame).enumerate() {
                    let y = sin_at((done + i) as i64);
                    f[2 * c..2 * c + 2].copy_from_slice(&to_sample(y).to_le_bytes());
                }
            }
            self.n += frames as u64;
            b.commit(frames * frame);
            cx.put(0, b.freeze());
        }
    }
}

/// Averages interleaved channels to mono.
struct Mix {
    channels: usize,
    frames: FrameCarry,
}

impl Convert for Mix {
    fn convert(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), TaskError> {
        let ch = self.channels;
        self.frames.feed(input, |data| {
            let frames = data.len() / (2 * ch);
            let start = out.len();
            out.resize(start + 2 * frames, 0);
            let dst = &mut out[start..];
            if ch == 2 {
                // The common case, written so the compiler can vectorise it.
                for (o, f) in dst.chunks_exact_mut(2).zip(data.chunks_exact(4)) {
                    let l = i16::from_le_bytes([f[0], f[1]]) as i32;
                    let r = i16::from_le_bytes([f[2], f[3]]) as i32;
                    o.copy_from_slice(&(((l + r) >> 1) as i16).to_le_bytes());
                }
            } else {
                for (o, f) in dst.chunks_exact_mut(2).zip(data.chunks_exact(2 * ch)) {
                    let sum: i32 = f
                        .chunks_exact(2)
                        .map(|s| i16::from_le_bytes([s[0], s[1]]) as i32)
                        .sum();
                    o.copy_from_slice(&(sum.div_euclid(ch as i32) as i16).to_le_bytes());
                }
            }
        });
        Ok(())
    }

    fn flush(&mut self, _out: &mut Vec<u8>) -> Result<(), TaskError> {
        self.frames.finish("mix")
    }
}

/// Encodes 16-bit samples with a 64 Ki-entry table.
struct Companding {
    table: &'static [u8; 65536],
    frames: FrameCarry,
}

impl Convert for Companding {
    fn convert(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), TaskError> {
        let t = self.table;
        self.frames.feed(input, |data| {
            let start = out.len();
            out.resize(start + data.len() / 2, 0);
            for (o, s) in out[start..].iter_mut().zip(data.chunks_exact(2)) {
                *o = t[u16::from_le_bytes([s[0], s[1]]) as usize];
            }
        });
        Ok(())
    }

    fn flush(&mut self, _out: &mut Vec<u8>) -> Result<(), TaskError> {
        self.frames.finish("G.711 encoding")
    }
}

/// Most channels `mix` takes: a frame of 2 KiB, so that the partial frame it keeps and the
/// buffers it works on stay small.
pub const MAX_MIX_CHANNELS: usize = 1024;

/// Most channels `tone` generates.
const MAX_TONE_CHANNELS: usize = 8;

fn tone(args: &Args, _b: &mut Build<'_>) -> Result<Box<dyn Task>, ArgError> {
    let rate = args.parse_in::<u32>("rate", 1..=u32::MAX)?;
    let channels = args.parse_in::<usize>("channels", 1..=MAX_TONE_CHANNELS)?;
    let amp = args.parse_in::<f64>("amp", 0.0..=1.0)?;
    let freq = |n: &str| {
        let f = args.parse_in::<f64>(n, 0.0..=rate as f64 / 2.0)?;
        if f < rate as f64 / 2.0 {
            Ok(f)
        } else {
            Err(ArgError::range(
                n,
                f,
                format_args!("at least 0 and below half the rate ({rate} Hz)"),
            ))
        }
    };
    let (f1, f2) = (freq("freq")?, freq("freq2")?);
    let seconds = args.parse_in_opt::<f64>("seconds", 0.0..=MAX_SECONDS)?;
    if seconds == Some(0.0) {
        return Err(ArgError::range(
            "seconds",
            0,
            format_args!("above 0 and at most {MAX_SECONDS}"),
        ));
    }
    let freqs: Vec<f64> = (0..channels)
        .map(|c| if c % 2 == 0 { f1 } else { f2 })
        .collect();
    Ok(Box::new(Tone::new(rate, &freqs, amp, seconds)))
}

fn mix(args: &Args, _b: &mut Build<'_>) -> Result<Box<dyn Task>, ArgError> {
    let channels = args.parse_in::<usize>("channels", 1..=MAX_MIX_CHANNELS)?;
    Ok(converter(Mix {
        channels,
        frames: FrameCarry::new(2 * channels),
    }))
}

pub(crate) fn register(r: &mut Registry) {
    r.register(
        TaskInfo::new(
            "tone",
            "sine generator (s16le, interleaved); stands in for an A/D converter",
        )
        .arg("rate", "44100", "sample rate in Hz")
        .arg(
            "channels",
            "2",
            "channels (even channels get freq, odd ones freq2)",
        )
        .arg("freq", "440", "frequency of the left (even) channels in Hz")
        .arg(
            "freq2",
            "660",
            "frequency of the right (odd) channels in Hz",
        )
        .arg("amp", "0.5", "amplitude, 0 to 1 of full scale")
        .optional(
            "seconds",
            "length of the stream; endless (until stopped) if absent",
        )
        .inputs(0, 0)
        .outputs(1, 1)
        .allocates(16, 4096)
        .min_buffer(16)
        .priority(Priority::Interrupt),
        tone,
    );
    r.register(
        TaskInfo::new(
            "mix",
            "mixes interleaved s16le channels down to mono (average)",
        )
        .arg("channels", "2", "channels in the input")
        .allocates(16, 4096)
        .min_buffer(2),
        mix,
    );
    r.register(
        TaskInfo::new(
            "mulaw",
            "ITU-T G.711 mu-law encoding of s16le samples (2 bytes -> 1)",
        )
        .allocates(16, 4096),
        |_: &Args, _: &mut Build<'_>| {
            Ok(converter(Companding {
                table: g711::ulaw_table(),
                frames: FrameCarry::new(2),
            }))
        },
    );
    r.register(
        TaskInfo::new(
            "alaw",
            "ITU-T G.711 A-law encoding of s16le samples (2 bytes -> 1)",
        )
        .allocates(16, 4096),
        |_: &Args, _: &mut Build<'_>| {
            Ok(converter(Companding {
                table: g711::alaw_table(),
                frames: FrameCarry::new(2),
            }))
        },
    );
}
