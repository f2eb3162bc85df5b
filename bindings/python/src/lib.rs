//! The native part of the `offhost` Python package (`offhost._offhost`).
//!
//! Sessions and channels (`channel.rs`), loans and received messages (`loan.rs`), pipelines on
//! the embedded engine or a daemon (`engine.rs`), the PET formats and histogramming (`pet.rs`)
//! and a measurement helper ([`bench`]). The Python part of the package (`python/offhost`)
//! adds `run`, the numpy views and the exception classes this module raises (`errors.rs`).
//!
//! Every call that can block releases the GIL, and waits in slices of `SLICE` so that a
//! signal (Ctrl-C) raises `KeyboardInterrupt` in the main thread within a slice.
//! Every entry point that can panic runs inside `errors::guarded` or `errors::detach`: a
//! Rust panic reaches Python as `offhost.Error`, never as PyO3's `PanicException`. (The
//! module's initialisation below only registers classes.)
#![forbid(unsafe_code)]

mod bench;
mod channel;
mod convert;
mod engine;
mod errors;
mod loan;
mod pet;
mod queue;

use pyo3::prelude::*;

/// Longest uninterrupted wait of a blocking call before it looks for signals.
pub(crate) const SLICE: std::time::Duration = std::time::Duration::from_millis(50);

/// The native module.
#[pymodule]
fn _offhost(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<channel::Session>()?;
    m.add_class::<channel::Channel>()?;
    m.add_class::<loan::Loan>()?;
    m.add_class::<loan::Message>()?;
    m.add_function(wrap_pyfunction!(channel::select, m)?)?;
    m.add_class::<engine::Engine>()?;
    m.add_class::<engine::Pipeline>()?;
    m.add_class::<engine::OutputIter>()?;
    m.add_class::<pet::Scanner>()?;
    m.add_class::<pet::EventHistogrammer>()?;
    m.add_class::<pet::PetlinkHistogrammer>()?;
    m.add_function(wrap_pyfunction!(pet::read_listmode, m)?)?;
    m.add_function(wrap_pyfunction!(pet::read_petlink, m)?)?;
    m.add_function(wrap_pyfunction!(pet::read_sinogram, m)?)?;
    m.add_function(wrap_pyfunction!(pet::decode_sinogram, m)?)?;
    m.add_function(wrap_pyfunction!(pet::reconstruct, m)?)?;
    m.add_function(wrap_pyfunction!(pet::simulate, m)?)?;
    m.add_class::<queue::Queue>()?;
    m.add_class::<queue::Completion>()?;
    m.add_class::<queue::QueueLoan>()?;
    m.add_class::<bench::Sink>()?;
    #[cfg(debug_assertions)]
    m.add_function(wrap_pyfunction!(
        errors::test_hook::_panic_in_next_guard,
        m
    )?)?;
    Ok(())
}
