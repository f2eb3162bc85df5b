//! Audio tasks on 16-bit signed little-endian PCM: `tone`, `mix`, `mulaw`, `alaw`.

use crate::registry::{ArgError, Args, Build, Registry, TaskInfo};
use crate::task::{Context, Priority, Status, Task, TaskError};
use crate::tasks::convert::{converter, Convert, FrameCarry};
use crate::tasks::g711;

/// A sine generator per channel using a rotating phasor (no `sin` per sample).
struct Tone {
    /// (cos, sin) state and (cos, sin) step per channel.
    osc: Vec<(f64, f64, f64, f64)>,
    amp: f64,
    frames_left: Option<u64>,
}

impl Tone {
    fn new(rate: u32, freqs: &[f64], amp: f64, seconds: Option<f64>) -> Tone {
        let osc = freqs
            .iter()
            .map(|f| {
                let w = 2.0 * std::f64::consts::PI * f / rate as f64;
                (1.0, 0.0, w.cos(), w.sin())
            })
            .collect();
        Tone {
            osc,
            amp,
            frames_left: seconds.map(|s| (s * rate as f64).round() as u64),
        }
    }
}

impl Task for Tone {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        let ch = self.osc.len();
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
            for f in out.chunks_exact_mut(frame) {
                for (c, o) in self.osc.iter_mut().enumerate() {
                    let s = (o.1 * amp).round() as i16;
                    f[2 * c..2 * c + 2].copy_from_slice(&s.to_le_bytes());
                    let (re, im) = (o.0 * o.2 - o.1 * o.3, o.0 * o.3 + o.1 * o.2);
                    o.0 = re;
                    o.1 = im;
                }
            }
            // Keep the phasors on the unit circle.
            for o in &mut self.osc {
                let n = (o.0 * o.0 + o.1 * o.1).sqrt();
                o.0 /= n;
                o.1 /= n;
            }
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
            for f in data.chunks_exact(2 * ch) {
                let sum: i32 = f
                    .chunks_exact(2)
                    .map(|s| i16::from_le_bytes([s[0], s[1]]) as i32)
                    .sum();
                let m = sum.div_euclid(ch as i32) as i16;
                out.extend_from_slice(&m.to_le_bytes());
            }
        });
        Ok(())
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
            out.extend(
                data.chunks_exact(2)
                    .map(|s| t[u16::from_le_bytes([s[0], s[1]]) as usize]),
            );
        });
        Ok(())
    }
}

fn positive<T: PartialOrd + Default + std::fmt::Display>(name: &str, v: T) -> Result<T, ArgError> {
    if v > T::default() {
        Ok(v)
    } else {
        Err(ArgError::new(name, format!("{name}={v}: must be positive")))
    }
}

fn tone(args: &Args, _b: &mut Build<'_>) -> Result<Box<dyn Task>, ArgError> {
    let rate = positive("rate", args.parse::<u32>("rate")?)?;
    let channels = positive("channels", args.parse::<usize>("channels")?)?;
    if channels > 8 {
        return Err(ArgError::new("channels", "channels: at most 8"));
    }
    let f1: f64 = args.parse("freq")?;
    let f2: f64 = args.parse("freq2")?;
    let amp: f64 = args.parse("amp")?;
    if !(0.0..=1.0).contains(&amp) {
        return Err(ArgError::new(
            "amp",
            format!("amp={amp}: must be between 0 and 1"),
        ));
    }
    for (n, f) in [("freq", f1), ("freq2", f2)] {
        if !(f >= 0.0 && f < rate as f64 / 2.0) {
            return Err(ArgError::new(
                n,
                format!("{n}={f}: must be between 0 and half the rate ({rate})"),
            ));
        }
    }
    let seconds = args.parse_opt::<f64>("seconds")?;
    if let Some(s) = seconds {
        positive("seconds", s)?;
    }
    let freqs: Vec<f64> = (0..channels)
        .map(|c| if c % 2 == 0 { f1 } else { f2 })
        .collect();
    Ok(Box::new(Tone::new(rate, &freqs, amp, seconds)))
}

fn mix(args: &Args, _b: &mut Build<'_>) -> Result<Box<dyn Task>, ArgError> {
    let channels = positive("channels", args.parse::<usize>("channels")?)?;
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
