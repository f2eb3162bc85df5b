//! `bench engine --peers`: the telephony chain (stereo 44.1 kHz WAV, mixed to mono, converted
//! to 8 kHz, mu-law encoded, written as raw mu-law) done by offhost, sox and GStreamer on the
//! same input, each as the command a user would type, one after the other in rounds.
//!
//! - The input is a WAV of whole seconds built from one period of one second: 17 tones from 300
//!   to 3388 Hz (the telephone band) and 8 from 4611 to 19990 Hz (which a correct converter
//!   removes, as they would alias into the band), alternating between the channels, each at
//!   5 % of full scale, with fixed phases.
//! - The reference is the ideal converter's output, computed exactly: the in-band tones of the
//!   mono mix at the output's sample times, nothing else. `snr_db` is its power against the
//!   power of the difference from the decoded output (0.5 s left out at each end, where every
//!   converter sees the silence around the stream). Noise, aliases, the passband's ripple and
//!   any delay all count; mu-law itself limits every tool to about 38 dB.
//! - `wall_s` and `cpu_s` are medians over the rounds; CPU is the child's user and system time
//!   (`getrusage` of the reaped children). Tools that are not installed are listed in
//!   `missing`, not measured.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use indicatif::ProgressBar;
use nix::sys::resource::{getrusage, UsageWho};
use offhost_bench::stats::median;
use offhost_engine::tasks::g711::ulaw_to_linear;
use serde::Serialize;

use crate::error::{check, Error, Result};

/// Input and output rates, Hz.
const FROM: u32 = 44_100;
const TO: u32 = 8_000;
/// Each tone's amplitude, as a fraction of full scale.
const AMPLITUDE: f64 = 0.05;
/// Output samples left out of the comparison at each end.
const EDGE: usize = (TO / 2) as usize;

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The `offhost` binary.
    pub exe: PathBuf,
    /// Seconds of input (rounded to whole seconds, at least 2).
    pub seconds: f64,
    /// Rounds; every tool runs once per round.
    pub rounds: usize,
}

/// One tool's figures.
#[derive(Serialize, Debug, Clone)]
pub struct PeerRow {
    /// `offhost`, `sox` or `gst`.
    pub tool: String,
    /// What the tool says its version is.
    pub version: String,
    /// The command run (paths as in the scratch directory).
    pub command: String,
    /// Wall time, median of the rounds, s.
    pub wall_s: f64,
    /// Wall time of every round, s.
    pub wall_s_rounds: Vec<f64>,
    /// CPU time (user + system), median of the rounds, s.
    pub cpu_s: f64,
    /// Output against the ideal converter's, dB.
    pub snr_db: f64,
    /// Samples written.
    pub samples: u64,
    /// Samples the ideal converter writes (`seconds x 8000`).
    pub expected_samples: u64,
    /// sox's wall time over this tool's (above 1: faster than sox).
    pub speed_vs_sox: Option<f64>,
    /// sox's SNR less this tool's, dB (above 0: worse than sox).
    pub snr_gap_db: Option<f64>,
}

/// The run's figures.
#[derive(Serialize, Debug)]
pub struct Report {
    /// Seconds of input.
    pub seconds: u64,
    /// Rounds run.
    pub rounds: usize,
    /// The input, in words.
    pub signal: String,
    /// One row per tool measured.
    pub rows: Vec<PeerRow>,
    /// Tools not found, with why.
    pub missing: Vec<String>,
}

/// A tone: frequency (Hz), channel, phase (radians).
type Tone = (u32, usize, f64);

/// The input's tones: 17 in the telephone band, 8 above 4.6 kHz, alternating channels; the
/// phases are spread by the golden ratio so the peaks do not line up.
fn tones() -> Vec<Tone> {
    let inband = (0..17).map(|k| 300 + 193 * k);
    let above = (0..8).map(|k| 4611 + 2197 * k);
    inband
        .chain(above)
        .enumerate()
        .map(|(i, f)| {
            let phase = std::f64::consts::TAU * (i as f64 * 0.618_033_988_749_895).fract();
            (f, i % 2, phase)
        })
        .collect()
}

/// One second of the stereo input (every tone is a whole number of Hz, so it repeats).
fn input_period() -> Vec<i16> {
    let tones = tones();
    let mut out = vec![0i16; 2 * FROM as usize];
    for n in 0..FROM as usize {
        for ch in 0..2 {
            let x: f64 = tones
                .iter()
                .filter(|t| t.1 == ch)
                .map(|&(f, _, p)| {
                    let turns = (f as u64 * n as u64 % FROM as u64) as f64 / FROM as f64;
                    (std::f64::consts::TAU * turns + p).sin()
                })
                .sum();
            out[2 * n + ch] = (x * AMPLITUDE * 32767.0).round() as i16;
        }
    }
    out
}

/// One second of the ideal output: the mono mix (the mean of the channels) of the in-band
/// tones at 8 kHz.
fn ideal_period() -> Vec<f64> {
    let tones: Vec<Tone> = tones().into_iter().filter(|t| 2 * t.0 < TO).collect();
    (0..TO as usize)
        .map(|m| {
            let s: f64 = tones
                .iter()
                .map(|&(f, _, p)| {
                    let turns = (f as u64 * m as u64 % TO as u64) as f64 / TO as f64;
                    (std::f64::consts::TAU * turns + p).sin()
                })
                .sum();
            0.5 * s * AMPLITUDE * 32767.0
        })
        .collect()
}

fn write_input(path: &Path, seconds: u64) -> Result<()> {
    let spec = hound::WavSpec {
        channels: 2,
        sample_rate: FROM,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let wav = |e: hound::Error| Error::Check(format!("write {}: {e}", path.display()));
    let mut w = hound::WavWriter::create(path, spec).map_err(wav)?;
    let period = input_period();
    for _ in 0..seconds {
        let mut sw = w.get_i16_writer(period.len() as u32);
        for &s in &period {
            sw.write_sample(s);
        }
        sw.flush().map_err(wav)?;
    }
    w.finalize().map_err(wav)
}

/// The SNR of a raw mu-law file against the ideal output, dB, and its length in samples.
fn snr_db(path: &Path) -> Result<(f64, u64)> {
    let out = std::fs::read(path)?;
    let ideal = ideal_period();
    check(out.len() > 2 * EDGE, || {
        format!(
            "{}: {} samples, too few to compare",
            path.display(),
            out.len()
        )
    })?;
    let (mut signal, mut noise) = (0.0, 0.0);
    for (m, &code) in out.iter().enumerate().take(out.len() - EDGE).skip(EDGE) {
        let want = ideal[m % ideal.len()];
        let e = f64::from(ulaw_to_linear(code)) - want;
        signal += want * want;
        noise += e * e;
    }
    Ok((
        10.0 * (signal / noise.max(f64::MIN_POSITIVE)).log10(),
        out.len() as u64,
    ))
}

/// A tool and how to run it on `input` into `output`.
struct Tool {
    name: &'static str,
    program: PathBuf,
    args: Vec<String>,
    version: String,
}

/// The first line a program prints for `--version`, or `None` when it cannot be run.
fn version(program: &Path) -> Option<String> {
    let out = Command::new(program).arg("--version").output().ok()?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let line = text.lines().find(|l| !l.trim().is_empty())?;
    Some(line.trim().trim_start_matches("sox:").trim().to_string())
}

fn tools(exe: &Path, dir: &Path, missing: &mut Vec<String>) -> Result<Vec<Tool>> {
    let input = dir.join("in.wav");
    let out = |name: &str| dir.join(format!("{name}.ul")).display().to_string();
    let ion = dir.join("telephony.ion");
    std::fs::write(
        &ion,
        format!(
            "wav path=\"{}\" >stereo:adc(16,8k)\n\
             mix channels=2 <stereo >mono:pcm(16,8k)\n\
             rate from={FROM} to={TO} <mono >narrow:tel(16,2k)\n\
             mulaw <narrow >ulaw:law(32,1k)\n\
             file path=\"{}\" <ulaw\n",
            input.display(),
            out("offhost")
        ),
    )?;
    let input = input.display().to_string();
    let candidates = [
        (
            "offhost",
            exe.to_path_buf(),
            vec!["run".into(), "-q".into(), ion.display().to_string()],
        ),
        (
            "sox",
            PathBuf::from("sox"),
            ["-D", &input, "-t", "ul", "-c", "1", "-r", "8000"]
                .iter()
                .map(|s| s.to_string())
                .chain([out("sox")])
                .chain(["remix", "1-2", "rate", "-v", "8000"].map(String::from))
                .collect(),
        ),
        (
            "gst",
            PathBuf::from("gst-launch-1.0"),
            format!(
                "-q filesrc location={input} ! wavparse ! audioconvert ! audioresample quality=10 \
                 ! audio/x-raw,rate=8000,channels=1 ! mulawenc ! filesink location={}",
                out("gst")
            )
            .split(' ')
            .map(String::from)
            .collect(),
        ),
    ];
    let mut found = Vec::new();
    for (name, program, args) in candidates {
        match version(&program) {
            Some(version) => found.push(Tool {
                name,
                program,
                args,
                version,
            }),
            None if name == "offhost" => {
                return Err(Error::Peer(format!("cannot run {}", program.display())))
            }
            None => missing.push(format!("{name}: {} not found", program.display())),
        }
    }
    Ok(found)
}

/// CPU time (user + system) of the reaped children so far, s.
fn children_cpu_s() -> Result<f64> {
    let u = getrusage(UsageWho::RUSAGE_CHILDREN).map_err(std::io::Error::from)?;
    let s = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 * 1e-6;
    Ok(s(u.user_time()) + s(u.system_time()))
}

/// Runs `tool` once: wall and CPU seconds.
fn run_once(tool: &Tool) -> Result<(f64, f64)> {
    let cpu0 = children_cpu_s()?;
    let t0 = Instant::now();
    let out = Command::new(&tool.program)
        .args(&tool.args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    let wall = t0.elapsed().as_secs_f64();
    let cpu = children_cpu_s()? - cpu0;
    check(out.status.success(), || {
        format!(
            "{} failed ({}): {}",
            tool.name,
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })?;
    Ok((wall, cpu))
}

/// Runs the comparison; `bar` counts the input and every tool's round.
pub fn run(plan: &Plan, bar: &ProgressBar) -> Result<Report> {
    let seconds = plan.seconds.round().max(2.0) as u64;
    let rounds = plan.rounds.max(1);
    let dir = tempfile::tempdir()?;
    let mut missing = Vec::new();
    let tools = tools(&plan.exe, dir.path(), &mut missing)?;
    bar.set_length((1 + rounds * tools.len()) as u64);
    bar.set_message(format!("writing {seconds} s of stereo input"));
    write_input(&dir.path().join("in.wav"), seconds)?;
    bar.inc(1);
    let mut times: Vec<(Vec<f64>, Vec<f64>)> = vec![(vec![], vec![]); tools.len()];
    for r in 0..rounds {
        for (tool, t) in tools.iter().zip(&mut times) {
            bar.set_message(format!("{} (round {} of {rounds})", tool.name, r + 1));
            let (wall, cpu) = run_once(tool)?;
            t.0.push(wall);
            t.1.push(cpu);
            bar.inc(1);
        }
    }
    let mut rows = Vec::new();
    for (tool, (walls, cpus)) in tools.iter().zip(times) {
        let (snr_db, samples) = snr_db(&dir.path().join(format!("{}.ul", tool.name)))?;
        rows.push(PeerRow {
            tool: tool.name.into(),
            version: tool.version.clone(),
            command: format!("{} {}", tool.program.display(), tool.args.join(" ")),
            wall_s: median(&walls).unwrap_or(f64::NAN),
            wall_s_rounds: walls,
            cpu_s: median(&cpus).unwrap_or(f64::NAN),
            snr_db,
            samples,
            expected_samples: seconds * u64::from(TO),
            speed_vs_sox: None,
            snr_gap_db: None,
        });
    }
    if let Some(sox) = rows.iter().find(|r| r.tool == "sox").cloned() {
        for r in &mut rows {
            r.speed_vs_sox = Some(sox.wall_s / r.wall_s);
            r.snr_gap_db = Some(sox.snr_db - r.snr_db);
        }
    }
    Ok(Report {
        seconds,
        rounds,
        signal: "stereo 44.1 kHz: 17 tones 300-3388 Hz and 8 tones 4611-19990 Hz, 5 % of full \
                 scale each; reference: the in-band tones of the mono mix at 8 kHz"
            .into(),
        rows,
        missing,
    })
}

impl Report {
    /// The figures as text.
    pub fn table(&self) -> String {
        let mut s = format!(
            "telephony chain, {} s of input, {} rounds (medians)\n\
             tool      wall s  range          CPU s  x sox speed  SNR dB  gap dB  version\n",
            self.seconds, self.rounds
        );
        let opt = |v: Option<f64>, d: usize| v.map_or("-".into(), |v| format!("{v:.d$}"));
        for r in &self.rows {
            let lo = r
                .wall_s_rounds
                .iter()
                .copied()
                .fold(f64::INFINITY, f64::min);
            let hi = r.wall_s_rounds.iter().copied().fold(0.0, f64::max);
            s += &format!(
                "{:<8} {:>7.3}  {:.3}-{:.3}  {:>6.3}  {:>11}  {:>6.2}  {:>6}  {}\n",
                r.tool,
                r.wall_s,
                lo,
                hi,
                r.cpu_s,
                opt(r.speed_vs_sox, 2),
                r.snr_db,
                opt(r.snr_gap_db, 2),
                r.version
            );
        }
        for m in &self.missing {
            s += &format!("not measured: {m}\n");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The input's mono mix at the output's times is the ideal output plus what a converter
    /// must remove: sampling the in-band part of the input exactly reproduces it.
    #[test]
    fn the_ideal_output_is_the_mix_of_the_in_band_tones() {
        let ideal = ideal_period();
        assert_eq!(ideal.len(), TO as usize);
        let input = input_period();
        // Input frame 441 k lies at the time of output sample 80 k: there the mix of the
        // in-band tones (input rounding aside) equals the ideal sample.
        let inband: Vec<Tone> = tones().into_iter().filter(|t| 2 * t.0 < TO).collect();
        for k in 0..100usize {
            let n = 441 * k % FROM as usize;
            let m = 80 * k % TO as usize;
            let mix: f64 = inband
                .iter()
                .map(|&(f, _, p)| {
                    (std::f64::consts::TAU * f as f64 * n as f64 / FROM as f64 + p).sin()
                })
                .sum::<f64>()
                * 0.5
                * AMPLITUDE
                * 32767.0;
            assert!(
                (mix - ideal[m]).abs() < 1e-6,
                "{k}: {mix} against {}",
                ideal[m]
            );
        }
        // Every channel stays within full scale.
        assert!(input.iter().all(|&s| i32::from(s).abs() < 32767 * 7 / 10));
    }

    /// A file of the ideal output, mu-law encoded, scores what mu-law allows (about 38 dB);
    /// one sample late, far less.
    #[test]
    fn the_snr_counts_noise_and_delay() {
        let d = tempfile::tempdir().unwrap();
        let ideal = ideal_period();
        let table = offhost_engine::tasks::g711::ulaw_table();
        let encode = |shift: usize| -> Vec<u8> {
            (0..3 * TO as usize)
                .map(|m| {
                    let v = ideal[(m + 3 * TO as usize - shift) % ideal.len()].round() as i16;
                    table[v as u16 as usize]
                })
                .collect()
        };
        let p = d.path().join("x.ul");
        std::fs::write(&p, encode(0)).unwrap();
        let (snr, n) = snr_db(&p).unwrap();
        assert_eq!(n, 3 * TO as u64);
        assert!((36.0..40.0).contains(&snr), "{snr}");
        std::fs::write(&p, encode(1)).unwrap();
        let (late, _) = snr_db(&p).unwrap();
        assert!(late < 10.0, "{late}");
    }
}
