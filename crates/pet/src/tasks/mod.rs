//! The PET tasks for the offhost engine.
//!
//! Streams between them carry whole 16-byte records of [`crate::listmode`] (no file header)
//! or raw PETLINK 32-bit words; sinograms travel as [`crate::sinofile`] encodings, one buffer
//! per snapshot.
//!
//! | task | does |
//! |------|------|
//! | `pet-sim` | Monte Carlo source of list-mode records |
//! | `pet-read` | reads an offhost list-mode file (checks it), emits records |
//! | `petlink-read` | reads a PETLINK file (checks it against its header), emits words |
//! | `energy-window` | drops records with a photon outside the window, counts them |
//! | `sinogram` | histograms records or words into a sinogram, prompts minus delayeds, with snapshots every N events or seconds |
//! | `sino-sum` | merges the snapshots and final sinograms of histograms that each saw a share of one scan |
//! | `recon` | reconstructs the last sinogram it receives (FBP or MLEM) and writes a PNG; with `period=`, live images as the scan goes on |

mod histogram;
mod merge;
mod outfile;
mod recon;
mod records;
mod source;
mod window;

pub use histogram::report_counts;
pub use recon::NET_COUNTS_KEY;

use offhost_engine::{ArgError, Args, Registry};

use crate::geometry::Scanner;

/// Adds the PET tasks to a registry.
pub fn register(r: &mut Registry) {
    source::register(r);
    window::register(r);
    histogram::register(r);
    merge::register(r);
    recon::register(r);
}

/// A registry with the engine's built-in tasks and the PET tasks.
pub fn registry() -> Registry {
    let mut r = Registry::with_builtins();
    register(&mut r);
    r
}

pub(crate) fn scanner_arg(a: &Args) -> Result<Scanner, ArgError> {
    let name = a.required("scanner")?;
    Scanner::preset(name).map_err(|e| ArgError::new("scanner", e.to_string()))
}

/// The highest energy level a list-mode record holds, keV (a `u16` of tenths).
pub(crate) const MAX_KEV: f64 = 6553.5;

/// An energy window's `lower=` and `upper=` levels, keV: finite, `0 <= lower <= upper <=
/// 6553.5`; each `None` where absent.
pub(crate) fn window_args(a: &Args) -> Result<(Option<f64>, Option<f64>), ArgError> {
    let lower = a.parse_in_opt::<f64>("lower", 0.0..=MAX_KEV)?;
    let upper = a.parse_in_opt::<f64>("upper", lower.unwrap_or(0.0)..=MAX_KEV)?;
    Ok((lower, upper))
}

/// `span=N` or `span=ssrb`.
pub(crate) fn span_arg(a: &Args, s: &Scanner) -> Result<u32, ArgError> {
    match a.get("span") {
        None | Some("1") => Ok(1),
        Some("ssrb") => Ok(s.ssrb_span()),
        Some(_) => {
            let span: u32 = a.parse("span")?;
            s.with_span(span)
                .validate()
                .map_err(|e| ArgError::new("span", e.to_string()))?;
            Ok(span)
        }
    }
}
