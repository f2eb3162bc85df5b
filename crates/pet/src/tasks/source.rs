//! Source tasks: `pet-sim`, `pet-read`, `petlink-read`.

use std::path::PathBuf;
use std::time::Instant;

use offhost_engine::{
    ArgError, Args, Build, Context, ReadFile, Registry, Status, Task, TaskError, TaskInfo,
};

use crate::interfile::{PetlinkHeader, MAX_HEADER_BYTES};
use crate::listmode::{Event, Reader, RECORD_LEN};
use crate::petlink::{self, PetlinkReader};
use crate::phantom::Phantom;
use crate::sim::{Pacer, SimConfig, Source};

struct PetSim {
    src: Source,
    left: u64,
    pacer: Option<Pacer>,
    started: Option<Instant>,
    emitted: u64,
}

impl Task for PetSim {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        self.started.get_or_insert_with(Instant::now);
        loop {
            if self.left == 0 || cx.stopping() {
                return Ok(Status::Done);
            }
            let Some(mut b) = cx.alloc(0) else {
                return Ok(Status::Blocked);
            };
            let mut n = ((b.remaining() / RECORD_LEN) as u64).min(self.left) as usize;
            if n == 0 {
                return Err(TaskError::Failed(
                    "output buffers are smaller than one 16-byte record".into(),
                ));
            }
            if let Some(p) = &mut self.pacer {
                // A few events at a time at a low rate, and a stop heard within a slice.
                n = p.take(n as u64) as usize;
                if !p.wait_while(n as u64, &|| cx.stopping()) {
                    return Ok(Status::Done);
                }
            }
            // Records are written straight into the engine's buffer.
            self.src.fill_records(&mut b.unfilled()[..n * RECORD_LEN]);
            b.commit(n * RECORD_LEN);
            self.left -= n as u64;
            self.emitted += n as u64;
            cx.put(0, b.freeze());
        }
    }

    fn report(&self) -> Option<String> {
        let c = self.src.counts();
        let wall = self.started.map_or(0.0, |t| t.elapsed().as_secs_f64());
        Some(format!(
            "{} events ({} trues, {} scatters, {} randoms, {} delayeds), {:.3} s acquired in {:.3} s wall: {:.2} M events/s, real-time factor {:.2}",
            self.emitted,
            c.trues,
            c.scatters,
            c.randoms,
            c.delayeds,
            self.src.time_s(),
            wall,
            self.emitted as f64 / wall.max(1e-9) / 1e6,
            self.src.time_s() / wall.max(1e-9),
        ))
    }
}

/// The highest event, singles and pacing rate `pet-sim` takes, per second.
const MAX_RATE: f64 = 1e12;

fn pet_sim(a: &Args, _: &mut Build<'_>) -> Result<Box<dyn Task>, ArgError> {
    let scanner = super::scanner_arg(a)?;
    let phantom_name = a.required("phantom")?;
    let phantom = Phantom::by_name(phantom_name).ok_or_else(|| {
        ArgError::new(
            "phantom",
            format!("unknown phantom {phantom_name:?} (nema, shepp-logan, cylinder)"),
        )
    })?;
    let cfg = SimConfig {
        phantom,
        seed: a.parse("seed")?,
        rate: a.parse_in::<f64>("rate", 1.0..=MAX_RATE)?,
        scatter_fraction: a.parse_in::<f64>("scatter", 0.0..=1.0)?,
        singles_rate: a.parse_in::<f64>("singles", 0.0..=MAX_RATE)?,
        ..SimConfig::default()
    };
    let pace = a.parse_in::<f64>("pace", 0.0..=MAX_RATE)?;
    if pace > 0.0 && pace < 1.0 {
        return Err(ArgError::range(
            "pace",
            a.get("pace").unwrap_or_default(),
            format_args!("0 (full speed) or between 1 and {MAX_RATE} events per second"),
        ));
    }
    let src = Source::new(&scanner, cfg).map_err(|e| ArgError::task(e.to_string()))?;
    Ok(Box::new(PetSim {
        src,
        left: a.parse("events")?,
        pacer: (pace > 0.0).then(|| Pacer::new(pace)),
        started: None,
        emitted: 0,
    }))
}

struct PetRead {
    path: PathBuf,
    src: Option<ReadFile>,
    reader: Option<Reader<std::io::BufReader<std::fs::File>>>,
    events: Vec<Event>,
    read: u64,
}

impl Task for PetRead {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        let bad = |e: crate::FormatError, p: &PathBuf| {
            TaskError::BadInput(format!("{}: {e}", p.display()))
        };
        if let Some(src) = self.src.take() {
            let f = src
                .open()
                .map_err(|e| TaskError::io(format!("open {}", self.path.display()), e))?;
            let f = std::io::BufReader::with_capacity(1 << 20, f);
            self.reader = Some(Reader::new(f).map_err(|e| bad(e, &self.path))?);
        }
        let r = self.reader.as_mut().expect("opened above");
        loop {
            let Some(mut b) = cx.alloc(0) else {
                return Ok(Status::Blocked);
            };
            let max = b.remaining() / RECORD_LEN;
            let n = r
                .read_events(&mut self.events, max)
                .map_err(|e| bad(e, &self.path))?;
            if n == 0 {
                return Ok(Status::Done);
            }
            let out = &mut b.unfilled()[..n * RECORD_LEN];
            for (o, e) in out.chunks_exact_mut(RECORD_LEN).zip(&self.events) {
                o.copy_from_slice(&e.encode());
            }
            b.commit(n * RECORD_LEN);
            self.read += n as u64;
            cx.put(0, b.freeze());
        }
    }

    fn report(&self) -> Option<String> {
        Some(format!("{} events read", self.read))
    }
}

struct PetlinkRead {
    path: PathBuf,
    src: Option<ReadFile>,
    header: PetlinkHeader,
    reader: Option<PetlinkReader<std::io::BufReader<std::fs::File>>>,
    words: Vec<u32>,
    read: u64,
}

impl Task for PetlinkRead {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        let path = self.path.display().to_string();
        let bad = |e: crate::FormatError| TaskError::BadInput(format!("{path}: {e}"));
        if let Some(src) = self.src.take() {
            let f = src
                .open()
                .map_err(|e| TaskError::io(format!("open {path}"), e))?;
            self.reader = Some(PetlinkReader::from_file(f, &self.header).map_err(bad)?);
        }
        let r = self.reader.as_mut().expect("opened above");
        loop {
            let Some(mut b) = cx.alloc(0) else {
                return Ok(Status::Blocked);
            };
            let n = r
                .read_words(&mut self.words, b.remaining() / 4)
                .map_err(bad)?;
            if n == 0 {
                return Ok(Status::Done);
            }
            let out = &mut b.unfilled()[..n * 4];
            for (o, w) in out.chunks_exact_mut(4).zip(&self.words) {
                o.copy_from_slice(&w.to_le_bytes());
            }
            b.commit(n * 4);
            self.read += n as u64;
            cx.put(0, b.freeze());
        }
    }

    fn report(&self) -> Option<String> {
        Some(format!("{} words read", self.read))
    }
}

fn petlink_read(a: &Args, b: &mut Build<'_>) -> Result<Box<dyn Task>, ArgError> {
    let files = b.files();
    let data = a.required("path")?;
    let path = PathBuf::from(data);
    let src = files.open(data).map_err(|e| e.arg("path"))?;
    // The header is read through the same access as the data (found beside it by default).
    let (hdr, text) = match a.get("header") {
        Some(h) => (
            PathBuf::from(h),
            files
                .read_to_string(h, MAX_HEADER_BYTES)
                .map_err(|e| e.arg("header"))?,
        ),
        None => petlink::find_header_with(
            &path,
            |p| files.read_to_string(p.to_str()?, MAX_HEADER_BYTES).ok(),
            |d| files.list_dir(d.to_str()?).ok(),
        )
        .ok_or_else(|| {
            ArgError::new(
                "header",
                format!(
                    "no Interfile header found beside {} (give header=...)",
                    path.display()
                ),
            )
        })?,
    };
    let header = PetlinkHeader::parse(&text)
        .map_err(|e| ArgError::new("header", format!("{}: {e}", hdr.display())))?;
    Ok(Box::new(PetlinkRead {
        path,
        src: Some(src),
        header,
        reader: None,
        words: Vec::new(),
        read: 0,
    }))
}

pub(super) fn register(r: &mut Registry) {
    r.register(
        TaskInfo::new(
            "pet-sim",
            "Monte Carlo PET source: list-mode records from a phantom (deterministic per seed)",
        )
        .arg("scanner", "demo", "scanner preset: demo or mmr")
        .arg("phantom", "nema", "nema, shepp-logan or cylinder")
        .arg("events", "1000000", "events to emit")
        .arg("seed", "1", "random seed")
        .arg(
            "rate",
            "4000000",
            "acquisition count rate, events per second of scan time",
        )
        .arg("scatter", "0.3", "scatter fraction of true events")
        .arg(
            "singles",
            "10000000",
            "singles rate per second (sets randoms)",
        )
        .arg(
            "pace",
            "0",
            "emit at most this many events per wall-clock second (0 = full speed)",
        )
        .inputs(0, 0)
        .allocates(8, 65536)
        .min_buffer(RECORD_LEN),
        pet_sim,
    );
    r.register(
        TaskInfo::new(
            "pet-read",
            "reads an offhost list-mode file, emits its records",
        )
        .required("path", "list-mode file")
        .inputs(0, 0)
        .allocates(8, 65536)
        .min_buffer(RECORD_LEN),
        |a: &Args, b: &mut Build<'_>| {
            let path = a.required("path")?;
            Ok(Box::new(PetRead {
                src: Some(b.files().open(path).map_err(|e| e.arg("path"))?),
                path: PathBuf::from(path),
                reader: None,
                events: Vec::new(),
                read: 0,
            }))
        },
    );
    r.register(
        TaskInfo::new(
            "petlink-read",
            "reads a PETLINK 32-bit list-mode file checked against its Interfile header, emits words",
        )
        .required("path", "list-mode file (.l)")
        .optional("header", "Interfile header (default: the .hdr beside the file naming it)")
        .inputs(0, 0)
        .allocates(8, 65536)
        .min_buffer(4),
        petlink_read,
    );
}
