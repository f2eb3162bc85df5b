//! `rate`: sample-rate conversion of mono s16le by a rational factor L/M with a polyphase
//! windowed-sinc (Kaiser) low-pass filter.
//!
//! The prototype filter runs at `from * L`; its cutoff sits halfway between the passband
//! edge and the lower Nyquist frequency, and its length follows Kaiser's formula for the
//! requested stop-band attenuation and transition width. Output sample `m` lies at
//! `m * M` in the up-sampled time; it is the dot product of one phase of the filter with
//! the last `taps` input samples.

use crate::registry::{ArgError, Args, Build, Registry, TaskInfo};
use crate::task::{Task, TaskError};
use crate::tasks::convert::{converter, Convert, FrameCarry};

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Zeroth-order modified Bessel function of the first kind (series).
fn bessel_i0(x: f64) -> f64 {
    let mut sum = 1.0;
    let mut term = 1.0;
    let q = x * x / 4.0;
    for k in 1..64 {
        term *= q / (k * k) as f64;
        sum += term;
        if term < sum * 1e-17 {
            break;
        }
    }
    sum
}

/// Most coefficients of a resampler's prototype filter (taps x phases): 2^20, 8 MiB while it
/// is designed and 4 MiB kept.
pub const MAX_FILTER_LEN: usize = 1 << 20;

/// A streaming polyphase resampler. Its output is aligned in time with its input (output
/// sample `m` lies at input time `m / to` seconds, the filter's delay taken out) and, once
/// [`Resampler::finish`]ed, holds `ceil(inputs x to / from)` samples, as sox's `rate` gives.
pub struct Resampler {
    l: usize,
    m: usize,
    taps: usize,
    /// The taps of every phase, phase `p` at `p * taps..`, each ordered oldest input first.
    phases: Vec<f32>,
    /// Input history: the last samples not yet fully consumed.
    hist: Vec<f32>,
    /// Up-sampled time of the next output, relative to `hist[0]` being input index 0.
    t: u64,
    /// The prototype filter's delay, up-sampled samples.
    delay: u64,
    /// Inputs fed and outputs made so far.
    fed: u64,
    made: u64,
    /// The widest vector unit this CPU has, found once.
    arch: pulp::Arch,
}

/// A conversion the resampler cannot do within its bounds.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RateError {
    /// The ratio needs more polyphase branches than supported.
    #[error("{from} Hz to {to} Hz needs {phases} filter phases; at most 4096 are supported")]
    Phases {
        /// Input rate.
        from: u32,
        /// Output rate.
        to: u32,
        /// Phases the ratio needs.
        phases: usize,
    },
    /// The passband is not below the lower Nyquist frequency.
    #[error("passband={passband}: must be between 0 and {nyquist} Hz")]
    Passband {
        /// Passband asked for, Hz.
        passband: f64,
        /// Half the lower of the two rates, Hz.
        nyquist: f64,
    },
    /// The filter would exceed the coefficient budget.
    #[error("{from} Hz to {to} Hz with passband {passband} Hz needs a filter of {taps:.0} taps x {phases} phases, over the limit of {MAX_FILTER_LEN} coefficients (widen the gap between passband and {nyquist} Hz, or lower atten)")]
    Filter {
        /// Input rate.
        from: u32,
        /// Output rate.
        to: u32,
        /// Passband, Hz.
        passband: f64,
        /// Taps per phase the attenuation needs.
        taps: f64,
        /// Phases.
        phases: usize,
        /// Half the lower of the two rates, Hz.
        nyquist: f64,
    },
}

impl Resampler {
    /// A resampler from `from` Hz to `to` Hz passing up to `passband` Hz with
    /// `atten_db` of stop-band attenuation.
    pub fn new(from: u32, to: u32, passband: f64, atten_db: f64) -> Result<Resampler, RateError> {
        let g = gcd(from as u64, to as u64);
        let (l, m) = ((to as u64 / g) as usize, (from as u64 / g) as usize);
        if l > 4096 {
            return Err(RateError::Phases {
                from,
                to,
                phases: l,
            });
        }
        let nyq = from.min(to) as f64 / 2.0;
        if !(passband > 0.0 && passband < nyq) {
            return Err(RateError::Passband {
                passband,
                nyquist: nyq,
            });
        }
        let fs_up = from as f64 * l as f64;
        let cutoff = (passband + nyq) / 2.0;
        let dw = 2.0 * std::f64::consts::PI * (nyq - passband) / from as f64;
        // In f64 first: an absurd ratio asks for more taps than any integer holds.
        let taps_f = ((atten_db - 8.0) / (2.285 * dw)).ceil().max(4.0);
        let coefficients = taps_f * l as f64;
        if coefficients.is_nan() || coefficients > MAX_FILTER_LEN as f64 {
            return Err(RateError::Filter {
                from,
                to,
                passband,
                taps: taps_f,
                phases: l,
                nyquist: nyq,
            });
        }
        let taps = taps_f as usize;
        let beta = if atten_db > 50.0 {
            0.1102 * (atten_db - 8.7)
        } else if atten_db >= 21.0 {
            0.5842 * (atten_db - 21.0).powf(0.4) + 0.07886 * (atten_db - 21.0)
        } else {
            0.0
        };
        // An odd length puts the filter's centre on a sample, so its delay is a whole number
        // of up-sampled samples and can be taken out exactly; the taps past it are zero.
        let n = if (taps * l) % 2 == 1 {
            taps * l
        } else {
            taps * l - 1
        };
        let centre = (n - 1) as f64 / 2.0;
        let fc = cutoff / fs_up; // cycles per up-sampled sample
        let i0b = bessel_i0(beta);
        let proto: Vec<f64> = (0..taps * l)
            .map(|i| {
                if i >= n {
                    return 0.0;
                }
                let x = i as f64 - centre;
                let sinc = if x == 0.0 {
                    2.0 * fc
                } else {
                    (2.0 * std::f64::consts::PI * fc * x).sin() / (std::f64::consts::PI * x)
                };
                let r = 2.0 * i as f64 / (n - 1) as f64 - 1.0;
                let w = bessel_i0(beta * (1.0 - r * r).max(0.0).sqrt()) / i0b;
                sinc * w * l as f64
            })
            .collect();
        // y[m] = sum_k h[p + k L] x[base - k]; store each phase oldest-first.
        let phases = (0..l)
            .flat_map(|p| (0..taps).rev().map(move |k| (p, k)))
            .map(|(p, k)| proto[p + k * l] as f32)
            .collect();
        let delay = ((n - 1) / 2) as u64;
        Ok(Resampler {
            l,
            m,
            taps,
            phases,
            hist: vec![0.0; taps - 1],
            t: ((taps - 1) * l) as u64 + delay,
            delay,
            fed: 0,
            made: 0,
            arch: pulp::Arch::new(),
        })
    }

    /// Filter taps per phase.
    pub fn taps(&self) -> usize {
        self.taps
    }

    /// Feeds samples, appending the outputs they complete.
    pub fn process(&mut self, input: impl Iterator<Item = f32>, out: &mut Vec<i16>) {
        let before = self.hist.len();
        self.hist.extend(input);
        self.fed += (self.hist.len() - before) as u64;
        self.run(out, u64::MAX);
    }

    /// Ends the stream: appends the outputs still inside the filter, up to
    /// `ceil(inputs x L / M)` in all.
    pub fn finish(&mut self, out: &mut Vec<i16>) {
        let (l, m) = (self.l as u64, self.m as u64);
        let total = (self.fed * l).div_ceil(m);
        // The last output's newest input lies `delay / L` samples past the end: silence.
        let pad = (self.delay / l) as usize + 2;
        self.hist.extend(std::iter::repeat_n(0.0, pad));
        self.run(out, total);
    }

    /// Makes every output the history holds, while fewer than `limit` have been made.
    fn run(&mut self, out: &mut Vec<i16>, limit: u64) {
        let start = out.len();
        self.t = self.arch.dispatch(Outputs {
            phases: &self.phases,
            taps: self.taps,
            hist: &self.hist,
            t: self.t,
            l: self.l as u64,
            m: self.m as u64,
            count: limit.saturating_sub(self.made),
            out,
        });
        self.made += (out.len() - start) as u64;
        // Drop history no output needs any more.
        let keep_from = ((self.t / self.l as u64) as usize + 1)
            .saturating_sub(self.taps)
            .min(self.hist.len());
        if keep_from > 0 {
            self.hist.drain(..keep_from);
            self.t -= keep_from as u64 * self.l as u64;
        }
    }
}

/// One pass of the resampler over its history, compiled for each vector unit
/// ([`pulp::Arch::dispatch`] picks the widest this CPU has).
struct Outputs<'a> {
    phases: &'a [f32],
    taps: usize,
    hist: &'a [f32],
    t: u64,
    l: u64,
    m: u64,
    /// Most outputs to make.
    count: u64,
    out: &'a mut Vec<i16>,
}

impl pulp::WithSimd for Outputs<'_> {
    /// The up-sampled time of the next output.
    type Output = u64;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) -> u64 {
        let Outputs {
            phases,
            taps,
            hist,
            mut t,
            l,
            m,
            count,
            out,
        } = self;
        for _ in 0..count {
            let base = (t / l) as usize;
            if base >= hist.len() {
                break;
            }
            let p = (t % l) as usize;
            let y = dot(
                simd,
                &phases[p * taps..(p + 1) * taps],
                &hist[base + 1 - taps..=base],
            );
            out.push((y + 0.5f32.copysign(y)).clamp(-32768.0, 32767.0) as i16);
            t += m;
        }
        t
    }
}

/// Dot product of two slices of equal length, four vectors at a time so the additions of
/// one do not wait for the last.
#[inline(always)]
fn dot<S: pulp::Simd>(simd: S, a: &[f32], b: &[f32]) -> f32 {
    let (va, ta) = S::as_simd_f32s(a);
    let (vb, tb) = S::as_simd_f32s(b);
    let zero = simd.splat_f32s(0.0);
    let mut acc = [zero; 4];
    let (ca, cb) = (va.chunks_exact(4), vb.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..4 {
            acc[i] = simd.mul_add_e_f32s(x[i], y[i], acc[i]);
        }
    }
    for (i, (x, y)) in ra.iter().zip(rb).enumerate() {
        acc[i] = simd.mul_add_e_f32s(*x, *y, acc[i]);
    }
    let v = simd.add_f32s(simd.add_f32s(acc[0], acc[1]), simd.add_f32s(acc[2], acc[3]));
    let mut s = simd.reduce_sum_f32s(v);
    for (x, y) in ta.iter().zip(tb) {
        s += x * y;
    }
    s
}

struct Rate {
    rs: Resampler,
    frames: FrameCarry,
    samples: Vec<i16>,
}

impl Convert for Rate {
    fn convert(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), TaskError> {
        let (rs, samples) = (&mut self.rs, &mut self.samples);
        self.frames.feed(input, |data| {
            rs.process(
                data.chunks_exact(2)
                    .map(|s| i16::from_le_bytes([s[0], s[1]]) as f32),
                samples,
            );
        });
        put_samples(&mut self.samples, out);
        Ok(())
    }

    fn flush(&mut self, out: &mut Vec<u8>) -> Result<(), TaskError> {
        self.frames.finish("rate")?;
        self.rs.finish(&mut self.samples);
        put_samples(&mut self.samples, out);
        Ok(())
    }
}

/// Appends `samples` to `out` as s16le and empties `samples`.
fn put_samples(samples: &mut Vec<i16>, out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + 2 * samples.len(), 0);
    for (o, s) in out[start..].chunks_exact_mut(2).zip(samples.iter()) {
        o.copy_from_slice(&s.to_le_bytes());
    }
    samples.clear();
}

/// The passband when none is given, as a fraction of the lower rate: 85 % of its Nyquist
/// frequency, 3400 Hz at 8 kHz (the top of the telephone band, ITU-T G.712).
pub const DEFAULT_PASSBAND: f64 = 0.425;

fn rate(args: &Args, _b: &mut Build<'_>) -> Result<Box<dyn Task>, ArgError> {
    let from = args.parse_in::<u32>("from", 1..=u32::MAX)?;
    let to = args.parse_in::<u32>("to", 1..=u32::MAX)?;
    // Finite here; its range (below the lower Nyquist frequency) is the resampler's to check.
    let passband = match args.parse_opt::<f64>("passband")? {
        Some(p) => p,
        None => DEFAULT_PASSBAND * from.min(to) as f64,
    };
    let atten = args.parse_in::<f64>("atten", 20.0..=150.0)?;
    let rs = Resampler::new(from, to, passband, atten)
        .map_err(|e| ArgError::new("passband", e.to_string()))?;
    Ok(converter(Rate {
        rs,
        frames: FrameCarry::new(2),
        samples: Vec::new(),
    }))
}

pub(crate) fn register(r: &mut Registry) {
    r.register(
        TaskInfo::new(
            "rate",
            "sample-rate conversion of mono s16le (polyphase Kaiser-windowed sinc)",
        )
        .arg("from", "44100", "input rate in Hz")
        .arg("to", "8000", "output rate in Hz")
        .optional(
            "passband",
            "highest frequency kept, Hz (default 0.425 of the lower rate: 3400 Hz at 8 kHz, the top of the telephone band)",
        )
        .arg("atten", "80", "stop-band attenuation in dB")
        .allocates(16, 4096)
        .min_buffer(2),
        rate,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone_power(rs: &mut Resampler, f: f64, from: f64) -> (f64, usize) {
        let n = 44100;
        let input = (0..n)
            .map(|i| (10000.0 * (2.0 * std::f64::consts::PI * f * i as f64 / from).sin()) as f32);
        let mut out = Vec::new();
        rs.process(input, &mut out);
        rs.finish(&mut out);
        let tail = &out[out.len() / 4..out.len() * 3 / 4];
        let p = tail.iter().map(|&s| (s as f64).powi(2)).sum::<f64>() / tail.len() as f64;
        (p.sqrt(), out.len())
    }

    #[test]
    fn an_absurd_ratio_is_an_error_not_an_allocation() {
        let e = Resampler::new(u32::MAX, 1, 0.375, 80.0)
            .err()
            .expect("refused");
        assert!(matches!(e, RateError::Filter { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("over the limit of 1048576 coefficients"),
            "{e}"
        );
    }

    /// The output lies on the input's time line (the filter's delay taken out) and has
    /// exactly `ceil(n x to / from)` samples, at ratios with odd and even up-sampling.
    #[test]
    fn outputs_are_aligned_in_time_and_counted_exactly() {
        for (from, to, n) in [
            (44100u32, 8000u32, 44100usize),
            (8000, 44100, 8001),
            (48000, 16000, 4799),
        ] {
            let mut rs = Resampler::new(from, to, 0.45 * from.min(to) as f64, 80.0).unwrap();
            let f = 440.0;
            let input = (0..n).map(|i| {
                (10000.0 * (2.0 * std::f64::consts::PI * f * i as f64 / from as f64).sin()) as f32
            });
            let mut out = Vec::new();
            // In two pieces, as a stream arrives.
            let mut input = input.collect::<Vec<_>>().into_iter();
            rs.process(input.by_ref().take(n / 3), &mut out);
            rs.process(input, &mut out);
            rs.finish(&mut out);
            let want = (n as u64 * to as u64).div_ceil(from as u64) as usize;
            assert_eq!(out.len(), want, "{from} -> {to}");
            // Away from the ends (where the filter sees the silence around the stream), each
            // sample is the tone at its own time.
            let edge = (to / 20) as usize;
            for (m, &y) in out.iter().enumerate().take(want - edge).skip(edge) {
                let ideal = 10000.0 * (2.0 * std::f64::consts::PI * f * m as f64 / to as f64).sin();
                assert!(
                    (y as f64 - ideal).abs() < 3.0,
                    "{from} -> {to}: sample {m} is {y}, not {ideal:.1}"
                );
            }
        }
    }

    #[test]
    fn passes_the_passband_and_rejects_aliases() {
        let mut rs = Resampler::new(44100, 8000, 3000.0, 80.0).unwrap();
        let (rms, len) = tone_power(&mut rs, 1000.0, 44100.0);
        // 1 s in, 8000 samples out.
        assert_eq!(len, 8000);
        let expect = 10000.0 / 2f64.sqrt();
        assert!((rms / expect - 1.0).abs() < 0.01, "passband rms {rms}");
        // 6 kHz would alias to 2 kHz; it must be attenuated by ~80 dB.
        let mut rs = Resampler::new(44100, 8000, 3000.0, 80.0).unwrap();
        let (rms, _) = tone_power(&mut rs, 6000.0, 44100.0);
        assert!(rms < expect * 1e-3, "alias rms {rms}");
    }
}
