//! `offhost pet ...`: simulate, inspect, histogram and reconstruct PET list-mode data, and run
//! PET pipelines.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context as _};
use indicatif::{ProgressBar, ProgressStyle};
use offhost_pet::listmode::{self, Reader, Writer};
use offhost_pet::petlink::{self, PetlinkReader};
use offhost_pet::recon::{self, Method};
use offhost_pet::sinofile::{self, SinoFlags};
use offhost_pet::PetlinkHeader;
use offhost_pet::PetlinkHistogrammer;
use offhost_pet::Phantom;
use offhost_pet::Scanner;
use offhost_pet::{EnergyWindow, Histogrammer};
use offhost_pet::{Pacer, SimConfig, Source};
use serde_json::json;

/// PET acquisition: list-mode files, sinograms, images.
#[derive(clap::Args, Debug)]
pub struct PetArgs {
    #[command(subcommand)]
    cmd: PetCmd,
}

#[derive(clap::Subcommand, Debug)]
enum PetCmd {
    /// Simulate an acquisition and write an offhost list-mode file.
    Sim(SimArgs),
    /// Count the words or events of a list-mode file.
    Stat(StatArgs),
    /// Histogram a list-mode file into a sinogram file (.sino).
    Hist(HistArgs),
    /// Reconstruct a sinogram file into a PNG.
    Recon(ReconArgs),
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// offhost's own 16-byte records.
    Offhost,
    /// Siemens PETLINK 32-bit words.
    Petlink,
}

#[derive(clap::Args, Debug)]
struct SimArgs {
    /// Output list-mode file.
    #[arg(short, long)]
    out: PathBuf,
    /// Scanner preset (demo, mmr).
    #[arg(long, default_value = "demo")]
    scanner: String,
    /// Phantom (nema, shepp-logan, cylinder).
    #[arg(long, default_value = "nema")]
    phantom: String,
    /// Events to write.
    #[arg(long, default_value_t = 1_000_000)]
    events: u64,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Acquisition count rate, events per second of scan time.
    #[arg(long, default_value_t = 4.0e6)]
    rate: f64,
    /// Emit at most this many events per wall-clock second (0 = full speed).
    #[arg(long, default_value_t = 0.0)]
    pace: f64,
    /// Scatter fraction of true events.
    #[arg(long, default_value_t = 0.3)]
    scatter: f64,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct StatArgs {
    /// List-mode file.
    file: PathBuf,
    /// File format.
    #[arg(long, value_enum, default_value = "offhost")]
    format: Format,
    /// PETLINK Interfile header (default: the .hdr beside the file that names it).
    #[arg(long)]
    header: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct HistArgs {
    /// List-mode file.
    file: PathBuf,
    /// Output sinogram file.
    #[arg(short, long)]
    out: PathBuf,
    /// File format.
    #[arg(long, value_enum, default_value = "offhost")]
    format: Format,
    /// Scanner preset for offhost files (demo, mmr); PETLINK uses its header.
    #[arg(long, default_value = "demo")]
    scanner: String,
    /// PETLINK Interfile header (default: the .hdr beside the file that names it).
    #[arg(long)]
    header: Option<PathBuf>,
    /// Axial compression: 1, an odd span, or ssrb.
    #[arg(long, default_value = "1")]
    span: String,
    /// Energy window lower level, keV (offhost files).
    #[arg(long, default_value_t = 435.0)]
    lower: f64,
    /// Energy window upper level, keV (offhost files).
    #[arg(long, default_value_t = 650.0)]
    upper: f64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct ReconArgs {
    /// Sinogram file from `offhost pet hist`.
    sino: PathBuf,
    /// Output PNG.
    #[arg(long)]
    png: PathBuf,
    /// fbp, fbp-hann or mlem.
    #[arg(long, default_value = "fbp")]
    method: String,
    /// MLEM iterations.
    #[arg(long, default_value_t = 10)]
    iterations: usize,
}

/// Runs `offhost pet ...`.
pub fn run(args: PetArgs) -> anyhow::Result<()> {
    match args.cmd {
        PetCmd::Sim(a) => sim(a),
        PetCmd::Stat(a) => stat(a),
        PetCmd::Hist(a) => hist(a),
        PetCmd::Recon(a) => recon_cmd(a),
    }
}

fn bar(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} ({per_sec}, eta {eta})")
            .expect("valid template"),
    );
    pb.set_message(what.to_string());
    pb
}

fn sim(a: SimArgs) -> anyhow::Result<()> {
    let scanner = Scanner::preset(&a.scanner)?;
    let phantom = Phantom::by_name(&a.phantom).with_context(|| {
        format!(
            "unknown phantom {:?} (nema, shepp-logan, cylinder)",
            a.phantom
        )
    })?;
    let cfg = SimConfig {
        phantom,
        seed: a.seed,
        rate: a.rate,
        scatter_fraction: a.scatter,
        ..SimConfig::default()
    };
    let mut src = Source::new(&scanner, cfg)?;
    let mut w =
        Writer::create(&a.out, &scanner).with_context(|| format!("create {}", a.out.display()))?;
    let pb = bar(a.events, "simulating");
    let mut pacer = (a.pace > 0.0).then(|| Pacer::new(a.pace));
    let t = Instant::now();
    let mut buf = Vec::new();
    let mut left = a.events;
    while left > 0 {
        let n = left.min(65_536);
        if let Some(p) = &mut pacer {
            p.wait(n);
        }
        buf.clear();
        src.fill(&mut buf, n as usize);
        w.write_events(&buf)?;
        left -= n;
        pb.inc(n);
    }
    w.finish()?;
    pb.finish_and_clear();
    let secs = t.elapsed().as_secs_f64();
    let c = src.counts();
    let out = json!({
        "file": a.out,
        "events": a.events,
        "trues": c.trues,
        "scatters": c.scatters,
        "randoms": c.randoms,
        "delayeds": c.delayeds,
        "acquisition_s": src.time_s(),
        "wall_s": secs,
        "events_per_s": a.events as f64 / secs,
    });
    print_out(&out, a.json, || {
        format!(
            "{} events ({} trues, {} scatters, {} randoms, {} delayeds), {:.3} s of acquisition, written in {:.2} s ({:.2} M events/s) to {}",
            a.events, c.trues, c.scatters, c.randoms, c.delayeds, src.time_s(), secs,
            a.events as f64 / secs / 1e6, a.out.display()
        )
    });
    Ok(())
}

fn print_out(v: &serde_json::Value, as_json: bool, text: impl FnOnce() -> String) {
    if as_json {
        println!("{}", serde_json::to_string_pretty(v).expect("serialisable"));
    } else {
        println!("{}", text());
    }
}

fn header_for(file: &Path, given: Option<&PathBuf>) -> anyhow::Result<PetlinkHeader> {
    let path = match given {
        Some(p) => p.clone(),
        None => petlink::find_header(file).with_context(|| {
            format!(
                "no Interfile header found beside {} (use --header)",
                file.display()
            )
        })?,
    };
    PetlinkHeader::read(&path).with_context(|| format!("header {}", path.display()))
}

fn stat(a: StatArgs) -> anyhow::Result<()> {
    match a.format {
        Format::Petlink => {
            let h = header_for(&a.file, a.header.as_ref())?;
            let st = petlink::stat(&a.file, &h).with_context(|| a.file.display().to_string())?;
            let mut v = serde_json::to_value(&st)?;
            v["format"] = json!("petlink");
            v["header_total_words"] = json!(h.total_words);
            print_out(&v, a.json, || {
                format!(
                    "{} words: {} events ({} prompts, {} delayeds), {} time tags over {} ms, {} other tags",
                    st.words, st.events, st.prompts, st.delayeds, st.time_tags, st.duration_ms,
                    st.deadtime_tags + st.motion_tags + st.monitor_tags + st.control_tags
                )
            });
        }
        Format::Offhost => {
            let mut r = Reader::open(&a.file).with_context(|| a.file.display().to_string())?;
            let hdr = *r.header();
            let (mut events, mut delayeds) = (0u64, 0u64);
            let (mut first, mut last) = (None, 0u32);
            let mut buf = Vec::new();
            while r
                .read_events(&mut buf, 65_536)
                .with_context(|| a.file.display().to_string())?
                > 0
            {
                events += buf.len() as u64;
                delayeds += buf.iter().filter(|e| e.delayed).count() as u64;
                first.get_or_insert(buf[0].time_us);
                last = buf[buf.len() - 1].time_us;
            }
            let duration_ms = first.map_or(0, |f| (last.saturating_sub(f)) as u64 / 1000);
            let v = json!({
                "format": "offhost",
                "words": events * (listmode::RECORD_LEN as u64 / 4),
                "records": events,
                "events": events,
                "prompts": events - delayeds,
                "delayeds": delayeds,
                "time_tags": 0,
                "duration_ms": duration_ms,
                "rings": hdr.rings,
                "detectors_per_ring": hdr.detectors_per_ring,
            });
            print_out(&v, a.json, || {
                format!(
                    "{events} events ({} prompts, {delayeds} delayeds) over {duration_ms} ms; scanner {} rings x {} detectors",
                    events - delayeds, hdr.rings, hdr.detectors_per_ring
                )
            });
        }
    }
    Ok(())
}

fn span_of(s: &Scanner, span: &str) -> anyhow::Result<u32> {
    let v = if span == "ssrb" {
        s.ssrb_span()
    } else {
        span.parse()
            .with_context(|| format!("--span {span}: expected an odd number or ssrb"))?
    };
    s.with_span(v).validate()?;
    Ok(v)
}

fn hist(a: HistArgs) -> anyhow::Result<()> {
    let t = Instant::now();
    let (sino, st, flags) = match a.format {
        Format::Petlink => {
            let h = header_for(&a.file, a.header.as_ref())?;
            let span = span_of(&h.scanner, &a.span)?;
            let mut hist = PetlinkHistogrammer::new(&h.scanner, span)?;
            let mut r = PetlinkReader::open(&a.file, &h)?;
            let mut buf = Vec::new();
            while r.read_words(&mut buf, 1 << 16)? > 0 {
                hist.add_words(&buf);
            }
            let (s, st, _) = hist.finish();
            (
                s,
                st,
                SinoFlags {
                    last: true,
                    detector_pairs: false,
                },
            )
        }
        Format::Offhost => {
            let scanner = Scanner::preset(&a.scanner)?;
            let span = span_of(&scanner, &a.span)?;
            let mut r = Reader::open(&a.file).with_context(|| a.file.display().to_string())?;
            if r.header().rings as u32 != scanner.rings
                || r.header().detectors_per_ring as u32 != scanner.detectors_per_ring
            {
                bail!(
                    "{}: recorded on {} rings x {} detectors, not the {} scanner",
                    a.file.display(),
                    r.header().rings,
                    r.header().detectors_per_ring,
                    a.scanner
                );
            }
            let mut hist = Histogrammer::new(
                &scanner.with_span(span),
                EnergyWindow::kev(a.lower, a.upper),
            )?;
            let mut buf = Vec::new();
            while r.read_events(&mut buf, 1 << 16)? > 0 {
                hist.add(&buf);
            }
            let (s, st) = hist.finish();
            (
                s,
                st,
                SinoFlags {
                    last: true,
                    detector_pairs: true,
                },
            )
        }
    };
    std::fs::write(&a.out, sinofile::encode(&sino, flags))
        .with_context(|| format!("write {}", a.out.display()))?;
    let secs = t.elapsed().as_secs_f64();
    let mut v = serde_json::to_value(st)?;
    v["sinograms"] = json!(sino.layout.total_sinograms());
    v["net_counts"] = json!(sino.total());
    v["seconds"] = json!(secs);
    v["events_per_s"] = json!(st.events as f64 / secs);
    print_out(&v, a.json, || {
        format!(
            "{} events ({} prompts, {} delayeds): {} energy-rejected, {} outside, {} accepted; {} sinograms, net {} counts -> {} in {:.2} s",
            st.events, st.prompts, st.delayeds, st.energy_rejected, st.geometry_rejected,
            st.accepted(), sino.layout.total_sinograms(), sino.total(), a.out.display(), secs
        )
    });
    Ok(())
}

fn recon_cmd(a: ReconArgs) -> anyhow::Result<()> {
    let bytes = std::fs::read(&a.sino).with_context(|| format!("read {}", a.sino.display()))?;
    let (sino, flags) = sinofile::decode(&bytes).with_context(|| a.sino.display().to_string())?;
    let method = match a.method.as_str() {
        "fbp" => Method::Fbp,
        "fbp-hann" => Method::FbpHann,
        "mlem" => Method::Mlem(a.iterations),
        other => bail!("--method {other}: expected fbp, fbp-hann or mlem"),
    };
    let t = Instant::now();
    let vol = recon::reconstruct(&sino, method, flags.detector_pairs);
    vol.write_png(&a.png, 8)?;
    println!(
        "{method:?}: {} slices of {}x{} in {:.2} s -> {}",
        vol.slices,
        vol.n,
        vol.n,
        t.elapsed().as_secs_f64(),
        a.png.display()
    );
    Ok(())
}
