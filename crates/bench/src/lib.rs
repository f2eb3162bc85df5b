//! Measurement library of offhost: the names of what is measured, machine floors, CPU pinning
//! and load, statistics, fits, the one result row with its tables, and plots. It knows no
//! other offhost crate; the experiments that drive offhost's transports, engine, NBD server and
//! PET code live in `offhost-bench-suite`, above every layer.
//!
//! Figures are always taken with [`std::time::Instant`] (a monotonic clock), after a warm-up,
//! over many samples, and summarised by median and 99th percentile ([`stats::Summary`]).
//! Performance is measured by benchmark commands, never asserted in tests.
#![forbid(unsafe_code)]

pub mod affinity;
pub mod cpu;
pub mod fit;
pub mod floors;
pub mod plain;
pub mod plot;
pub mod report;
pub mod run;
pub mod sizes;
pub mod stats;
pub mod threads;
pub mod transport;
