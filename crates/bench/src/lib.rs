//! Measurement library of offhost: machine floors, statistics, fits, tables and plots.
//!
//! Figures are always taken with [`std::time::Instant`] (a monotonic clock), after a warm-up,
//! over many samples, and summarised by median and 99th percentile ([`stats::Summary`]).
//! Performance is measured by benchmark commands, never asserted in tests.
#![forbid(unsafe_code)]

pub mod affinity;
pub mod cpu;
pub mod floors;
pub mod stats;
