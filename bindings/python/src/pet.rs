//! The native side of `offhost.pet`: scanners, list-mode and PETLINK files, histogramming,
//! sinogram files and reconstruction. Arrays cross as `bytearray`s of little-endian records
//! (the numpy dtypes are in `offhost/pet.py`); histogramming counts a numpy array of list-mode
//! records where it lies (other buffers are copied 64 KiB at a time), with the GIL released.
//!
//! Every entry point runs inside `guarded` or `detach` (a panic is `offhost.Error`, see
//! `errors.rs`) but those that cannot panic: the `Scanner` getters of its fields (`name`,
//! `rings`, `detectors_per_ring`, `radial_bins`, `views`, `span`, `max_ring_difference`,
//! `ring_spacing_mm`, `crystal_radius_mm`, `bin_size_mm`: a `Copy` field, or a `&str` of
//! one) and the `==` PyO3 derives for `#[pyclass(eq)]` (field by field, `PartialEq`).

use std::path::PathBuf;

use numpy::{PyArray1, PyArrayMethods};
use offhost_bindings::Error;
use offhost_pet::listmode::{Reader, RECORD_LEN};
use offhost_pet::petlink::{self, PetlinkReader, Word};
use offhost_pet::recon::Method;
use offhost_pet::sinofile;
use offhost_pet::PetlinkHeader;
use offhost_pet::PetlinkHistogrammer as RustPetlinkHist;
use offhost_pet::{EnergyWindow, HistStats, Histogrammer, Sinogram};
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyDict, PyMemoryView, PySlice};

use crate::errors::{at_path, guarded, to_py};

/// A cylindrical PET scanner and its sinogram sampling: `Scanner("demo")`, `Scanner("mmr")`
/// (the Siemens Biograph mMR), or the one a file records.
#[pyclass(frozen, eq, module = "offhost.pet")]
#[derive(Clone, PartialEq)]
pub struct Scanner {
    pub(crate) inner: offhost_pet::Scanner,
}

/// A span argument: an odd number or `"ssrb"` (the scanner's single-slice rebinning span).
fn span_of(s: &offhost_pet::Scanner, span: &Bound<'_, PyAny>) -> PyResult<u32> {
    let v = if let Ok(name) = span.extract::<String>() {
        match name.as_str() {
            "ssrb" => s.ssrb_span(),
            other => other.parse().map_err(|_| {
                pyo3::exceptions::PyValueError::new_err(format!(
                    "span {other:?}: expected an odd number or \"ssrb\""
                ))
            })?,
        }
    } else {
        span.extract::<u32>()?
    };
    s.with_span(v).validate().map_err(to_py)?;
    Ok(v)
}

#[pymethods]
impl Scanner {
    #[new]
    fn new(name: &str) -> PyResult<Scanner> {
        guarded(|| {
            let inner = offhost_pet::Scanner::preset(name).map_err(to_py)?;
            Ok(Scanner { inner })
        })
    }

    /// The same scanner with another axial compression: an odd span or `"ssrb"`.
    fn with_span(&self, span: &Bound<'_, PyAny>) -> PyResult<Scanner> {
        guarded(|| {
            let v = span_of(&self.inner, span)?;
            Ok(Scanner {
                inner: self.inner.with_span(v),
            })
        })
    }

    /// Short name (`demo`, `mmr`, or `file` for one read from a sinogram file).
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }
    /// Detector rings.
    #[getter]
    fn rings(&self) -> u32 {
        self.inner.rings
    }
    /// Detectors per ring.
    #[getter]
    fn detectors_per_ring(&self) -> u32 {
        self.inner.detectors_per_ring
    }
    /// Radial bins of a sinogram row.
    #[getter]
    fn radial_bins(&self) -> u32 {
        self.inner.radial_bins
    }
    /// Views (angles over 180 degrees).
    #[getter]
    fn views(&self) -> u32 {
        self.inner.views
    }
    /// Axial compression.
    #[getter]
    fn span(&self) -> u32 {
        self.inner.span
    }
    /// The span of single-slice rebinning (`2 * max_ring_difference + 1`).
    #[getter]
    fn ssrb_span(&self) -> PyResult<u32> {
        guarded(|| Ok(self.inner.ssrb_span()))
    }
    /// Largest ring difference kept.
    #[getter]
    fn max_ring_difference(&self) -> u32 {
        self.inner.max_ring_difference
    }
    /// Distance between ring centres, mm.
    #[getter]
    fn ring_spacing_mm(&self) -> f64 {
        self.inner.ring_spacing_mm
    }
    /// Radius of the crystal cylinder, mm.
    #[getter]
    fn crystal_radius_mm(&self) -> f64 {
        self.inner.crystal_radius_mm
    }
    /// Radial bin size, mm.
    #[getter]
    fn bin_size_mm(&self) -> f64 {
        self.inner.bin_size_mm
    }
    /// Number of sinograms at this span.
    #[getter]
    fn sinograms(&self) -> PyResult<u32> {
        guarded(|| {
            Ok(offhost_pet::Layout::new(&self.inner)
                .map_err(to_py)?
                .total_sinograms())
        })
    }
    /// `(sinograms, views, radial_bins)`: the shape of its sinogram arrays.
    #[getter]
    fn sinogram_shape(&self) -> PyResult<(u32, u32, u32)> {
        guarded(|| Ok((self.sinograms()?, self.inner.views, self.inner.radial_bins)))
    }

    fn __repr__(&self) -> PyResult<String> {
        guarded(|| {
            let s = &self.inner;
            Ok(format!(
                "offhost.pet.Scanner({:?}: {} rings x {} detectors, {} views x {} bins, span {})",
                s.name, s.rings, s.detectors_per_ring, s.views, s.radial_bins, s.span
            ))
        })
    }
}

/// Reads a whole buffer-protocol object as bytes (numpy arrays of any dtype as their bytes).
fn bytes_of(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let raw = PyMemoryView::from(obj)?.call_method1("cast", ("B",))?;
    PyBuffer::<u8>::get(&raw)?.to_vec(obj.py())
}

fn hist_stats<'py>(py: Python<'py>, st: &HistStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("events", st.events)?;
    d.set_item("prompts", st.prompts)?;
    d.set_item("delayeds", st.delayeds)?;
    d.set_item("energy_rejected", st.energy_rejected)?;
    d.set_item("geometry_rejected", st.geometry_rejected)?;
    d.set_item("accepted_prompts", st.accepted_prompts)?;
    d.set_item("accepted_delayeds", st.accepted_delayeds)?;
    Ok(d)
}

fn sino_bytes<'py>(py: Python<'py>, s: &Sinogram) -> PyResult<Bound<'py, PyByteArray>> {
    PyByteArray::new_with(py, 4 * s.data.len(), |b| {
        for (o, v) in b.chunks_exact_mut(4).zip(&s.data) {
            o.copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    })
}

/// Records copied and counted at a time by `EventHistogrammer::add` (64 KiB).
const PIECE: usize = 4096;

/// Histograms offhost list-mode records into a sinogram, prompts minus delayeds.
#[pyclass(module = "offhost.pet")]
pub struct EventHistogrammer {
    hist: Histogrammer,
    raw: Vec<u8>,
}

#[pymethods]
impl EventHistogrammer {
    #[new]
    fn new(scanner: &Scanner, lower_kev: f64, upper_kev: f64) -> PyResult<Self> {
        guarded(|| {
            // What a record can hold: tenths of keV in a u16.
            const MAX_KEV: f64 = 6553.5;
            if !((0.0..=MAX_KEV).contains(&lower_kev) && (lower_kev..=MAX_KEV).contains(&upper_kev))
            {
                return Err(to_py(Error::Invalid(format!(
                "lower_kev={lower_kev}, upper_kev={upper_kev}: need 0 <= lower_kev <= upper_kev <= {MAX_KEV}"
            ))));
            }
            let hist = Histogrammer::new(&scanner.inner, EnergyWindow::kev(lower_kev, upper_kev))
                .map_err(to_py)?;
            Ok(EventHistogrammer {
                hist,
                raw: Vec::new(),
            })
        })
    }

    /// Adds the records in `records`, 16 bytes per event. A contiguous numpy `uint8` array
    /// (what `offhost.pet.Histogrammer` hands over) is counted where it lies, without the GIL,
    /// as numpy's own functions read arrays: it must not be written meanwhile. Any other
    /// contiguous buffer is taken 64 KiB at a time: each piece is copied while the GIL is held, then
    /// counted without it.
    fn add(&mut self, py: Python<'_>, records: &Bound<'_, PyAny>) -> PyResult<()> {
        guarded(|| {
            if let Some(array) = readonly_array::<u8>(records) {
                if let Ok(bytes) = array.as_slice() {
                    let (recs, rest) = bytes.as_chunks::<RECORD_LEN>();
                    if !rest.is_empty() {
                        return Err(not_whole_records(bytes.len()));
                    }
                    let hist = &mut self.hist;
                    return crate::errors::detach(py, || hist.add_records(recs));
                }
            }
            self.add_copied(py, records)
        })
    }

    /// Counts the increments still waiting in buckets (large sinograms batch them).
    fn flush(&mut self, py: Python<'_>) -> PyResult<()> {
        guarded(|| {
            let hist = &mut self.hist;
            crate::errors::detach(py, || hist.flush())
        })
    }

    /// The sinogram so far as little-endian i32 bytes.
    fn sinogram<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyByteArray>> {
        guarded(|| sino_bytes(py, &self.hist.snapshot()))
    }

    /// Counts so far.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        guarded(|| hist_stats(py, &self.hist.stats()))
    }
}

impl EventHistogrammer {
    /// `add` for any contiguous buffer but a numpy `uint8` array: 64 KiB pieces, each copied
    /// while the GIL is held (the buffer cannot change meanwhile; the copy stays in the
    /// second-level cache), then counted without it.
    fn add_copied(&mut self, py: Python<'_>, records: &Bound<'_, PyAny>) -> PyResult<()> {
        let whole = PyBuffer::<u8>::get(records)?;
        let n = whole.item_count();
        if !whole.is_c_contiguous() {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "the records are not one contiguous buffer (numpy.ascontiguousarray makes one)",
            ));
        }
        drop(whole);
        if n % RECORD_LEN != 0 {
            return Err(not_whole_records(n));
        }
        let view = PyMemoryView::from(records)?.call_method1("cast", ("B",))?;
        let step = RECORD_LEN * PIECE;
        for at in (0..n).step_by(step) {
            let end = (at + step).min(n);
            let piece = view.get_item(PySlice::new(py, at as isize, end as isize, 1))?;
            let buf = PyBuffer::<u8>::get(&piece)?;
            self.raw.resize(end - at, 0);
            buf.copy_to_slice(py, &mut self.raw)?;
            drop(buf);
            let EventHistogrammer { hist, raw } = self;
            crate::errors::detach(py, || hist.add_records(raw.as_chunks().0))?;
        }
        Ok(())
    }
}

/// `obj` as a 1-D numpy array of `T`, borrowed read-only (the `numpy` crate's borrow flags)
/// to be read in place; `None` for anything else, which is taken the copying way.
fn readonly_array<'py, T: numpy::Element>(
    obj: &Bound<'py, PyAny>,
) -> Option<numpy::PyReadonlyArray1<'py, T>> {
    obj.cast::<PyArray1<T>>().ok()?.try_readonly().ok()
}

/// The error for a buffer of `n` bytes that are not whole list-mode records.
fn not_whole_records(n: usize) -> PyErr {
    pyo3::exceptions::PyValueError::new_err(format!(
        "{n} bytes are not whole 16-byte list-mode records"
    ))
}

/// Histograms PETLINK words into a sinogram of the given span, prompts minus delayeds.
#[pyclass(module = "offhost.pet")]
pub struct PetlinkHistogrammer {
    hist: RustPetlinkHist,
    words: Vec<u32>,
}

#[pymethods]
impl PetlinkHistogrammer {
    #[new]
    fn new(scanner: &Scanner, span: &Bound<'_, PyAny>) -> PyResult<Self> {
        guarded(|| {
            let span = span_of(&scanner.inner, span)?;
            let hist = RustPetlinkHist::new(&scanner.inner, span).map_err(to_py)?;
            Ok(PetlinkHistogrammer {
                hist,
                words: Vec::new(),
            })
        })
    }

    /// Adds raw PETLINK words: a contiguous numpy `uint32` array (of this machine's byte
    /// order), counted where it lies without the GIL, as numpy's own functions read arrays
    /// (it must not be written meanwhile); or any other buffer of little-endian 32-bit words,
    /// copied first.
    fn add(&mut self, py: Python<'_>, words: &Bound<'_, PyAny>) -> PyResult<()> {
        guarded(|| {
            let array = readonly_array::<u32>(words).filter(|_| cfg!(target_endian = "little"));
            if let Some(array) = array {
                if let Ok(w) = array.as_slice() {
                    let hist = &mut self.hist;
                    return crate::errors::detach(py, || {
                        hist.add_words(w);
                        hist.flush();
                    });
                }
            }
            let raw = bytes_of(words)?;
            if raw.len() % 4 != 0 {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "{} bytes are not whole 32-bit words",
                    raw.len()
                )));
            }
            let PetlinkHistogrammer { hist, words } = self;
            crate::errors::detach(py, || {
                words.clear();
                words.extend(
                    raw.chunks_exact(4)
                        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))),
                );
                hist.add_words(words);
                hist.flush();
            })?;
            Ok(())
        })
    }

    /// The sinogram so far as little-endian i32 bytes.
    fn sinogram<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyByteArray>> {
        guarded(|| sino_bytes(py, &self.hist.snapshot()))
    }

    /// Counts so far: events and their fate, and the PETLINK word counts.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        guarded(|| {
            let d = hist_stats(py, &self.hist.stats())?;
            let w = self.hist.word_stats();
            d.set_item("words", w.words)?;
            d.set_item("time_tags", w.time_tags)?;
            d.set_item("duration_ms", w.duration_ms)?;
            Ok(d)
        })
    }
}

/// Refuses a file that may never end (a device such as `/dev/zero`, a FIFO, a socket): the
/// readers below take a whole file into memory. A missing file or a directory is left to
/// the reader, which says so.
fn whole_file(path: &std::path::Path) -> Result<(), Error> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() && !m.is_dir() => Err(Error::Invalid(
            "not a regular file (a device, FIFO or socket): the whole file is read into memory"
                .into(),
        )),
        _ => Ok(()),
    }
}

/// Reads an offhost list-mode file: its records as bytes (16 per event) and its header.
#[pyfunction]
pub fn read_listmode<'py>(
    py: Python<'py>,
    path: PathBuf,
) -> PyResult<(Bound<'py, PyByteArray>, Bound<'py, PyDict>)> {
    guarded(|| {
        let (events, h) = crate::errors::detach(py, || -> Result<_, Error> {
            whole_file(&path)?;
            let mut r = Reader::open(&path)?;
            let h = *r.header();
            Ok((r.read_all()?, h))
        })?
        .map_err(|e| at_path(&path, e))?;
        let recs = PyByteArray::new_with(py, events.len() * RECORD_LEN, |b| {
            for (o, e) in b.chunks_exact_mut(RECORD_LEN).zip(&events) {
                o.copy_from_slice(&e.encode());
            }
            Ok(())
        })?;
        let d = PyDict::new(py);
        d.set_item("rings", h.rings)?;
        d.set_item("detectors_per_ring", h.detectors_per_ring)?;
        d.set_item("ring_spacing_mm", h.ring_spacing_mm)?;
        d.set_item("crystal_radius_mm", h.crystal_radius_mm)?;
        d.set_item("events", events.len())?;
        Ok((recs, d))
    })
}

/// Size of a decoded PETLINK record: word, time_ms, bin (u32), kind, prompt (u8), padding.
const PETLINK_RECORD: usize = 16;

/// Reads a Siemens PETLINK list-mode file (checked against its Interfile header, by default
/// the `.hdr` beside it): one 16-byte record per word (see `offhost.pet.PETLINK_DTYPE`)
/// and the scanner the header describes.
#[pyfunction]
#[pyo3(signature = (path, header=None))]
pub fn read_petlink(
    py: Python<'_>,
    path: PathBuf,
    header: Option<PathBuf>,
) -> PyResult<(Bound<'_, PyByteArray>, Scanner)> {
    guarded(|| {
        let (words, h) = crate::errors::detach(py, || -> Result<_, Error> {
            let hp = match header {
                Some(h) => h,
                None => petlink::find_header(&path).ok_or_else(|| {
                    Error::Invalid(format!(
                        "no Interfile header found beside {} (pass header=)",
                        path.display()
                    ))
                })?,
            };
            whole_file(&hp).map_err(|e| Error::Invalid(format!("{}: {e}", hp.display())))?;
            whole_file(&path)?;
            let h = PetlinkHeader::read(&hp)?;
            let mut r = PetlinkReader::open(&path, &h)?;
            let (mut all, mut buf) = (Vec::new(), Vec::new());
            while r.read_words(&mut buf, 1 << 16)? > 0 {
                all.extend_from_slice(&buf);
            }
            Ok((all, h))
        })?
        .map_err(|e| at_path(&path, e))?;
        let recs = PyByteArray::new_with(py, words.len() * PETLINK_RECORD, |b| {
            let mut time_ms = 0u32;
            for (o, &w) in b.chunks_exact_mut(PETLINK_RECORD).zip(&words) {
                let (kind, prompt, bin) = match Word::decode(w) {
                    Word::Event { prompt, bin } => (0u8, prompt, bin),
                    Word::Time(ms) => {
                        time_ms = ms;
                        (1, false, 0)
                    }
                    Word::DeadTime => (2, false, 0),
                    Word::Motion => (3, false, 0),
                    Word::Monitor => (4, false, 0),
                    Word::Control => (5, false, 0),
                };
                o[0..4].copy_from_slice(&w.to_le_bytes());
                o[4..8].copy_from_slice(&time_ms.to_le_bytes());
                o[8..12].copy_from_slice(&bin.to_le_bytes());
                o[12] = kind;
                o[13] = u8::from(prompt);
            }
            Ok(())
        })?;
        Ok((recs, Scanner { inner: h.scanner }))
    })
}

type Decoded<'py> = (Bound<'py, PyByteArray>, Scanner, bool, bool);

fn decoded<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Decoded<'py>> {
    let (s, flags) = sinofile::decode(bytes).map_err(to_py)?;
    Ok((
        sino_bytes(py, &s)?,
        Scanner { inner: s.scanner },
        flags.last,
        flags.detector_pairs,
    ))
}

/// Reads a sinogram file of `offhost pet hist`: (i32 bytes, scanner, final, detector_pairs).
#[pyfunction]
pub fn read_sinogram(py: Python<'_>, path: PathBuf) -> PyResult<Decoded<'_>> {
    guarded(|| {
        whole_file(&path).map_err(|e| at_path(&path, e))?;
        let bytes = crate::errors::detach(py, || std::fs::read(&path))?.map_err(|e| {
            PyErr::from(std::io::Error::new(
                e.kind(),
                format!("read {}: {e}", path.display()),
            ))
        })?;
        let (s, flags) = sinofile::decode(&bytes).map_err(|e| at_path(&path, e))?;
        Ok((
            sino_bytes(py, &s)?,
            Scanner { inner: s.scanner },
            flags.last,
            flags.detector_pairs,
        ))
    })
}

/// Decodes a sinogram as the `sinogram` task sends it: (i32 bytes, scanner, final,
/// detector_pairs).
#[pyfunction]
pub fn decode_sinogram<'py>(py: Python<'py>, data: &Bound<'py, PyAny>) -> PyResult<Decoded<'py>> {
    guarded(|| decoded(py, &bytes_of(data)?))
}

/// Reconstructs a sinogram (i32 bytes of `scanner`'s shape) into an image volume:
/// (f32 bytes, slices, pixels per side, pixel mm, slice mm).
#[pyfunction]
#[pyo3(signature = (counts, scanner, method="fbp", iterations=10, detector_pairs=true))]
pub fn reconstruct<'py>(
    py: Python<'py>,
    counts: &Bound<'py, PyAny>,
    scanner: &Scanner,
    method: &str,
    iterations: usize,
    detector_pairs: bool,
) -> PyResult<(Bound<'py, PyByteArray>, usize, usize, f64, f64)> {
    guarded(|| {
        let method = match method {
            "fbp" => Method::Fbp,
            "fbp-hann" => Method::FbpHann,
            "mlem" if (1..=MAX_ITERATIONS).contains(&iterations) => Method::Mlem(iterations),
            "mlem" => {
                return Err(to_py(Error::Invalid(format!(
                    "iterations={iterations}: must be between 1 and {MAX_ITERATIONS}"
                ))))
            }
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "method {other:?}: expected fbp, fbp-hann or mlem"
                )))
            }
        };
        let raw = bytes_of(counts)?;
        let mut sino = Sinogram::new(&scanner.inner).map_err(to_py)?;
        if raw.len() != 4 * sino.data.len() {
            return Err(to_py(Error::Invalid(format!(
                "a sinogram of this scanner has {} values ({} bytes), got {} bytes",
                sino.data.len(),
                4 * sino.data.len(),
                raw.len()
            ))));
        }
        let vol = crate::errors::detach(py, || {
            for (d, c) in sino.data.iter_mut().zip(raw.chunks_exact(4)) {
                *d = i32::from_le_bytes(c.try_into().expect("4 bytes"));
            }
            offhost_pet::recon::reconstruct(&sino, method, detector_pairs)
        })?;
        let img = PyByteArray::new_with(py, 4 * vol.data.len(), |b| {
            for (o, v) in b.chunks_exact_mut(4).zip(&vol.data) {
                o.copy_from_slice(&v.to_le_bytes());
            }
            Ok(())
        })?;
        Ok((img, vol.slices, vol.n, vol.pixel_mm, vol.slice_mm))
    })
}

/// Most MLEM iterations `reconstruct` runs (as the `recon` task).
const MAX_ITERATIONS: usize = 10_000;

/// Most events `simulate` makes in one call: 4 GiB of records.
const MAX_SIM_EVENTS: usize = 1 << 28;

/// Simulates `events` coincidences of a phantom on a scanner (the Monte Carlo source of
/// `offhost pet sim`): list-mode records as bytes.
#[pyfunction]
#[pyo3(signature = (events, scanner, phantom="nema", seed=1, rate=4.0e6, scatter=0.3))]
pub fn simulate<'py>(
    py: Python<'py>,
    events: usize,
    scanner: &Scanner,
    phantom: &str,
    seed: u64,
    rate: f64,
    scatter: f64,
) -> PyResult<Bound<'py, PyByteArray>> {
    guarded(|| {
        let phantom = offhost_pet::Phantom::by_name(phantom).ok_or_else(|| {
            to_py(Error::Invalid(format!(
                "unknown phantom {phantom:?} (nema, shepp-logan, cylinder)"
            )))
        })?;
        if events > MAX_SIM_EVENTS {
            return Err(to_py(Error::Invalid(format!(
            "events={events}: must be at most {MAX_SIM_EVENTS} ({} GiB of records); simulate in parts",
            (MAX_SIM_EVENTS * RECORD_LEN) >> 30
        ))));
        }
        let len = events * RECORD_LEN;
        let cfg = offhost_pet::SimConfig {
            phantom,
            seed,
            rate,
            scatter_fraction: scatter,
            ..offhost_pet::SimConfig::default()
        };
        let mut src = offhost_pet::Source::new(&scanner.inner, cfg).map_err(to_py)?;
        let mut out = Vec::new();
        out.try_reserve_exact(len).map_err(|e| {
            to_py(Error::Invalid(format!(
                "events={events}: {len} bytes of records: {e}"
            )))
        })?;
        out.resize(len, 0);
        crate::errors::detach(py, || src.fill_records(&mut out))?;
        Ok(PyByteArray::new(py, &out))
    })
}
