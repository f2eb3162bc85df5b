//! Measurement library of offhost: machine floors, statistics, fits, tables and plots.
#![forbid(unsafe_code)]

pub mod cpu;
pub mod fit;
pub mod peers;
pub mod plot;
pub mod report;
pub mod run;
pub mod samples;
pub mod sizes;
