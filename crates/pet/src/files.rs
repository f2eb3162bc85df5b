//! The file jobs behind `offhost pet`: simulate an acquisition into a list-mode file, count a
//! list-mode file, histogram one into a sinogram file, reconstruct a sinogram file into a
//! PNG. Each returns a report the command prints as text or JSON.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use serde_json::{json, Value};

use crate::error::{FormatError, GeometryError, ImageError};
use crate::listmode::{self, Reader, Writer};
use crate::petlink::{self, PetlinkReader};
use crate::recon::{self, Method};
use crate::sinofile::{self, SinoFlags};
use crate::{projdata, Sinogram};
use crate::{
    EnergyWindow, Histogrammer, Pacer, PetlinkHeader, PetlinkHistogrammer, Phantom, Scanner,
    SimConfig, Source,
};

/// What went wrong, naming the file or the option.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileJobError {
    /// An option is wrong.
    #[error("{0}")]
    Option(String),
    /// The scanner is wrong.
    #[error(transparent)]
    Geometry(#[from] GeometryError),
    /// A file is not what it should be.
    #[error("{path}: {source}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        source: FormatError,
    },
    /// A file could not be read or written.
    #[error("{what} {path}: {source}")]
    Io {
        /// `read` or `write`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The image could not be written.
    #[error(transparent)]
    Image(#[from] ImageError),
}

fn format(path: &Path) -> impl FnOnce(FormatError) -> FileJobError + '_ {
    move |source| FileJobError::Format {
        path: path.to_owned(),
        source,
    }
}

/// A list-mode file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListFormat {
    /// offhost's own 16-byte records.
    Offhost,
    /// Siemens PETLINK 32-bit words (with an Interfile header).
    Petlink,
    /// PETSIRD 0.12 list mode (yardl binary).
    Petsird,
}

/// A simulated acquisition (its fields are `offhost pet sim`'s flags).
#[derive(Debug, Clone, clap::Args)]
pub struct SimJob {
    /// Output list-mode file (`*.petsird`: PETSIRD 0.12, else offhost's records).
    #[arg(short, long)]
    pub out: PathBuf,
    /// Scanner preset (demo, mmr).
    #[arg(long, default_value = "demo")]
    pub scanner: String,
    /// Phantom (nema, shepp-logan, cylinder).
    #[arg(long, default_value = "nema")]
    pub phantom: String,
    /// Events to write.
    #[arg(long, default_value_t = 1_000_000)]
    pub events: u64,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Acquisition count rate, events per second of scan time.
    #[arg(long, default_value_t = 4.0e6)]
    pub rate: f64,
    /// Emit at most this many events per wall-clock second (0 = full speed).
    #[arg(long, default_value_t = 0.0)]
    pub pace: f64,
    /// Scatter fraction of true events.
    #[arg(long, default_value_t = 0.3)]
    pub scatter: f64,
}

/// What a simulation wrote.
#[derive(Debug, Clone, Serialize)]
pub struct SimReport {
    /// The file.
    pub file: PathBuf,
    /// Events written.
    pub events: u64,
    /// True coincidences.
    pub trues: u64,
    /// Scattered coincidences.
    pub scatters: u64,
    /// Random coincidences.
    pub randoms: u64,
    /// Delayed coincidences.
    pub delayeds: u64,
    /// Seconds of acquisition simulated.
    pub acquisition_s: f64,
    /// Wall seconds it took.
    pub wall_s: f64,
    /// Events per wall second.
    pub events_per_s: f64,
}

impl SimReport {
    /// One line of text.
    pub fn text(&self) -> String {
        format!(
            "{} events ({} trues, {} scatters, {} randoms, {} delayeds), {:.3} s of acquisition, written in {:.2} s ({:.2} M events/s) to {}",
            self.events, self.trues, self.scatters, self.randoms, self.delayeds,
            self.acquisition_s, self.wall_s, self.events_per_s / 1e6, self.file.display()
        )
    }
}

/// Where `offhost pet sim` writes: offhost's list mode, or PETSIRD for `*.petsird`.
enum SimOut {
    Offhost(Writer<std::io::BufWriter<std::fs::File>>),
    Petsird(crate::petsird::PetsirdWriter<std::io::BufWriter<std::fs::File>>),
}

impl SimOut {
    fn create(out: &Path, scanner: &Scanner) -> Result<Self, FileJobError> {
        if out
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("petsird"))
        {
            let f = std::fs::File::create(out).map_err(|source| FileJobError::Io {
                what: "write",
                path: out.to_owned(),
                source,
            })?;
            let w = crate::petsird::PetsirdWriter::new(std::io::BufWriter::new(f), scanner);
            return w.map(SimOut::Petsird).map_err(format(out));
        }
        Writer::create(out, scanner)
            .map(SimOut::Offhost)
            .map_err(format(out))
    }

    fn write_events(&mut self, e: &[crate::listmode::Event]) -> Result<(), FormatError> {
        match self {
            SimOut::Offhost(w) => w.write_events(e),
            SimOut::Petsird(w) => w.write_events(e),
        }
    }

    fn finish(self) -> Result<(), FormatError> {
        match self {
            SimOut::Offhost(w) => w.finish().map(drop),
            SimOut::Petsird(w) => w.finish().map(drop),
        }
    }
}

/// Simulates `job`; `progress` hears of every block of events written.
pub fn simulate(job: &SimJob, mut progress: impl FnMut(u64)) -> Result<SimReport, FileJobError> {
    let scanner = Scanner::preset(&job.scanner)?;
    let phantom = Phantom::by_name(&job.phantom).ok_or_else(|| {
        FileJobError::Option(format!(
            "unknown phantom {:?} (nema, shepp-logan, cylinder)",
            job.phantom
        ))
    })?;
    let cfg = SimConfig {
        phantom,
        seed: job.seed,
        rate: job.rate,
        scatter_fraction: job.scatter,
        ..SimConfig::default()
    };
    let mut src = Source::new(&scanner, cfg)?;
    let mut w = SimOut::create(&job.out, &scanner)?;
    let mut pacer = (job.pace > 0.0).then(|| Pacer::new(job.pace));
    let t = Instant::now();
    let mut buf = Vec::new();
    let mut left = job.events;
    while left > 0 {
        let n = left.min(65_536);
        if let Some(p) = &mut pacer {
            p.wait(n);
        }
        buf.clear();
        src.fill(&mut buf, n as usize);
        w.write_events(&buf).map_err(format(&job.out))?;
        left -= n;
        progress(n);
    }
    w.finish().map_err(format(&job.out))?;
    let secs = t.elapsed().as_secs_f64();
    let c = src.counts();
    Ok(SimReport {
        file: job.out.clone(),
        events: job.events,
        trues: c.trues,
        scatters: c.scatters,
        randoms: c.randoms,
        delayeds: c.delayeds,
        acquisition_s: src.time_s(),
        wall_s: secs,
        events_per_s: job.events as f64 / secs,
    })
}

/// The Interfile header of PETLINK file `file`: `given`, or the `.hdr` beside it naming it.
pub fn header_for(file: &Path, given: Option<&Path>) -> Result<PetlinkHeader, FileJobError> {
    let path = match given {
        Some(p) => p.to_owned(),
        None => petlink::find_header(file).ok_or_else(|| {
            FileJobError::Option(format!(
                "no Interfile header found beside {} (use --header)",
                file.display()
            ))
        })?,
    };
    PetlinkHeader::read(&path).map_err(format(&path))
}

/// Counts of a list-mode file, as JSON, and its text line.
pub fn stat(
    file: &Path,
    fmt: ListFormat,
    header: Option<&Path>,
) -> Result<(Value, String), FileJobError> {
    if fmt == ListFormat::Petlink {
        let h = header_for(file, header)?;
        let st = petlink::stat(file, &h).map_err(format(file))?;
        /// The counts, with the format and what the header says.
        #[derive(Serialize)]
        struct Counts<'a, S> {
            #[serde(flatten)]
            counts: &'a S,
            format: &'static str,
            header_total_words: Option<u64>,
        }
        let v = serde_json::to_value(Counts {
            counts: &st,
            format: "petlink",
            header_total_words: h.total_words,
        })
        .expect("serialisable");
        let text =
            format!(
            "{} words: {} events ({} prompts, {} delayeds), {} time tags over {} ms, {} other tags",
            st.words, st.events, st.prompts, st.delayeds, st.time_tags, st.duration_ms,
            st.deadtime_tags + st.motion_tags + st.monitor_tags + st.control_tags
        );
        return Ok((v, text));
    }
    if fmt == ListFormat::Petsird {
        let (h, st) = crate::petsird::stat(file).map_err(format(file))?;
        let mut v = serde_json::to_value(&st).expect("serialisable");
        v["format"] = json!("petsird");
        v["model_name"] = json!(h.model_name);
        v["module_types"] = json!(h.module_types.len());
        let text = format!(
            "{} time blocks ({} with events): {} events ({} prompts, {} delayeds), {} singles over {} ms; scanner {:?}, {} module types",
            st.time_blocks, st.event_blocks, st.events, st.prompts, st.delayeds, st.singles,
            st.duration_ms, h.model_name, h.module_types.len()
        );
        return Ok((v, text));
    }
    let mut r = Reader::open(file).map_err(format(file))?;
    let hdr = *r.header();
    let (mut events, mut delayeds) = (0u64, 0u64);
    let (mut first, mut last) = (None, 0u32);
    let mut buf = Vec::new();
    while r.read_events(&mut buf, 65_536).map_err(format(file))? > 0 {
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
    let text = format!(
        "{events} events ({} prompts, {delayeds} delayeds) over {duration_ms} ms; scanner {} rings x {} detectors",
        events - delayeds, hdr.rings, hdr.detectors_per_ring
    );
    Ok((v, text))
}

/// Span `span` (`ssrb` or an odd number) of scanner `s`, checked.
pub fn span_of(s: &Scanner, span: &str) -> Result<u32, FileJobError> {
    let v = if span == "ssrb" {
        s.ssrb_span()
    } else {
        span.parse().map_err(|_| {
            FileJobError::Option(format!("--span {span}: expected an odd number or ssrb"))
        })?
    };
    s.with_span(v).validate()?;
    Ok(v)
}

/// A histogramming of a list-mode file into a sinogram file (`offhost pet hist`'s flags).
#[derive(Debug, Clone, clap::Args)]
pub struct HistJob {
    /// List-mode file.
    pub file: PathBuf,
    /// Its format.
    #[arg(long, value_enum, default_value = "offhost")]
    pub format: ListFormat,
    /// Output sinogram file: X.hs (STIR Interfile projection data, data in X.s) or OHSINO01.
    #[arg(short, long)]
    pub out: PathBuf,
    /// Scanner preset for offhost files (demo, mmr); PETLINK uses its header.
    #[arg(long, default_value = "demo")]
    pub scanner: String,
    /// PETLINK Interfile header (default: the .hdr beside the file that names it).
    #[arg(long)]
    pub header: Option<PathBuf>,
    /// Axial compression: 1, an odd span, or ssrb.
    #[arg(long, default_value = "1")]
    pub span: String,
    /// Energy window lower level, keV (offhost files).
    #[arg(long, default_value_t = 435.0)]
    pub lower: f64,
    /// Energy window upper level, keV (offhost files).
    #[arg(long, default_value_t = 650.0)]
    pub upper: f64,
}

/// Histograms `job`; returns its statistics as JSON and a text line.
pub fn histogram(job: &HistJob) -> Result<(Value, String), FileJobError> {
    let t = Instant::now();
    let file = &job.file;
    let (sino, st, flags) = match job.format {
        ListFormat::Petlink => {
            let h = header_for(file, job.header.as_deref())?;
            let span = span_of(&h.scanner, &job.span)?;
            let mut hist = PetlinkHistogrammer::new(&h.scanner, span)?;
            let mut r = PetlinkReader::open(file, &h).map_err(format(file))?;
            let mut buf = Vec::new();
            while r.read_words(&mut buf, 1 << 16).map_err(format(file))? > 0 {
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
        ListFormat::Petsird => {
            let (s, st) = petsird_histogram(job)?;
            (
                s,
                st,
                SinoFlags {
                    last: true,
                    detector_pairs: true,
                },
            )
        }
        ListFormat::Offhost => {
            let scanner = Scanner::preset(&job.scanner)?;
            let span = span_of(&scanner, &job.span)?;
            let mut r = Reader::open(file).map_err(format(file))?;
            let h = r.header();
            if h.rings as u32 != scanner.rings
                || h.detectors_per_ring as u32 != scanner.detectors_per_ring
            {
                return Err(FileJobError::Option(format!(
                    "{}: recorded on {} rings x {} detectors, not the {} scanner",
                    file.display(),
                    h.rings,
                    h.detectors_per_ring,
                    job.scanner
                )));
            }
            let window = EnergyWindow::kev(job.lower, job.upper);
            let mut hist = Histogrammer::new(&scanner.with_span(span), window)?;
            let mut buf = Vec::new();
            while r.read_events(&mut buf, 1 << 16).map_err(format(file))? > 0 {
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
    write_sinogram(&job.out, &sino, flags)?;
    let secs = t.elapsed().as_secs_f64();
    /// The histogrammer's counts, with what came of them and how fast.
    #[derive(Serialize)]
    struct Made<S> {
        #[serde(flatten)]
        counts: S,
        sinograms: u32,
        net_counts: i64,
        seconds: f64,
        events_per_s: f64,
    }
    let v = serde_json::to_value(Made {
        counts: st,
        sinograms: sino.layout.total_sinograms(),
        net_counts: sino.total(),
        seconds: secs,
        events_per_s: st.events as f64 / secs,
    })
    .expect("serialisable");
    let text = format!(
        "{} events ({} prompts, {} delayeds): {} energy-rejected, {} outside, {} accepted; {} sinograms, net {} counts -> {} in {:.2} s",
        st.events, st.prompts, st.delayeds, st.energy_rejected, st.geometry_rejected,
        st.accepted(), sino.layout.total_sinograms(), sino.total(), job.out.display(), secs
    );
    Ok((v, text))
}

/// Histograms a PETSIRD file of a ring scanner (its geometry from the file's header).
fn petsird_histogram(job: &HistJob) -> Result<(Sinogram, crate::HistStats), FileJobError> {
    use crate::petsird::{Block, PetsirdReader, RingMap};
    let file = &job.file;
    let mut r = PetsirdReader::open(file).map_err(format(file))?;
    let (scanner, map) = RingMap::new(r.header())?;
    let span = span_of(&scanner, &job.span)?;
    let window = EnergyWindow::kev(job.lower, job.upper);
    let mut hist = Histogrammer::new(&scanner.with_span(span), window)?;
    let (mut coinc, mut events) = (Vec::new(), Vec::new());
    loop {
        let at = r.offset();
        let Some(block) = r.next_block(&mut coinc).map_err(format(file))? else {
            break;
        };
        let t = match block {
            Block::Events { start, .. } => start,
            Block::Other(_) => 0,
        };
        events.clear();
        for c in &coinc {
            let e = (c.types == (0, 0))
                .then(|| map.event(c.bins, c.delayed, t))
                .flatten()
                .ok_or_else(|| FileJobError::Format {
                    path: file.clone(),
                    source: FormatError::Mismatch {
                        offset: at,
                        what: format!(
                            "time block: detection bins {:?} of module types {:?}; the scanner has {} bins of type 0",
                            c.bins, c.types, map.len()
                        ),
                    },
                })?;
            events.push(e);
        }
        hist.add(&events);
        coinc.clear();
    }
    Ok(hist.finish())
}

/// A conversion of PETLINK list mode into PETSIRD (`offhost pet convert`'s arguments).
#[derive(Debug, Clone, clap::Args)]
pub struct ConvertJob {
    /// PETLINK list-mode file.
    pub file: PathBuf,
    /// Output PETSIRD file.
    #[arg(short, long)]
    pub out: PathBuf,
    /// PETLINK Interfile header (default: the .hdr beside the file that names it).
    #[arg(long)]
    pub header: Option<PathBuf>,
}

/// Converts `job`; returns its counts as JSON and a text line.
pub fn convert(job: &ConvertJob) -> Result<(Value, String), FileJobError> {
    let h = header_for(&job.file, job.header.as_deref())?;
    let f = std::fs::File::create(&job.out).map_err(|source| FileJobError::Io {
        what: "write",
        path: job.out.clone(),
        source,
    })?;
    let (c, _) = crate::petsird::petlink_to_petsird(&job.file, &h, std::io::BufWriter::new(f))
        .map_err(format(&job.file))?;
    let text = format!(
        "{} words: {} events ({} prompts, {} delayeds), {} time tags -> {}",
        c.words,
        c.events,
        c.prompts,
        c.delayeds,
        c.time_tags,
        job.out.display()
    );
    Ok((serde_json::to_value(&c).expect("serialisable"), text))
}

/// Writes a sinogram file: STIR's Interfile projection data when `out` ends in `.hs` (with
/// its data file `.s` beside it, see [`projdata`]), else offhost's `OHSINO01` encoding.
pub fn write_sinogram(out: &Path, sino: &Sinogram, flags: SinoFlags) -> Result<(), FileJobError> {
    if projdata::is_header(out) {
        return projdata::write(out, sino, flags)
            .map(drop)
            .map_err(format(out));
    }
    std::fs::write(out, sinofile::encode(sino, flags)).map_err(|source| FileJobError::Io {
        what: "write",
        path: out.to_owned(),
        source,
    })
}

/// Reads a sinogram file: a `.hs` Interfile projection data header (and its data file), else
/// an `OHSINO01` file.
pub fn read_sinogram(path: &Path) -> Result<(Sinogram, SinoFlags), FileJobError> {
    if projdata::is_header(path) {
        return projdata::read(path).map_err(format(path));
    }
    let bytes = std::fs::read(path).map_err(|source| FileJobError::Io {
        what: "read",
        path: path.to_owned(),
        source,
    })?;
    sinofile::decode(&bytes).map_err(format(path))
}

/// Reconstructs sinogram file `sino` (`.hs` or `OHSINO01`) with `method` (`fbp`, `fbp-hann`, `mlem`) into `png`;
/// returns a text line. `progress(finished, planes)` hears of each plane finished.
pub fn reconstruct(
    sino: &Path,
    method: &str,
    iterations: usize,
    png: &Path,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<String, FileJobError> {
    let (s, flags) = read_sinogram(sino)?;
    let method = match method {
        "fbp" => Method::Fbp,
        "fbp-hann" => Method::FbpHann,
        "mlem" => Method::Mlem(iterations),
        other => {
            return Err(FileJobError::Option(format!(
                "--method {other}: expected fbp, fbp-hann or mlem"
            )))
        }
    };
    let t = Instant::now();
    let vol = recon::reconstruct_telling(&s, method, flags.detector_pairs, progress);
    vol.write_png(png, 8)?;
    Ok(format!(
        "{method:?}: {} slices of {}x{} in {:.2} s -> {}",
        vol.slices,
        vol.n,
        vol.n,
        t.elapsed().as_secs_f64(),
        png.display()
    ))
}
