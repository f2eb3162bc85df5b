//! Measurement library of offhost: machine floors, statistics, fits, tables and plots.
#![forbid(unsafe_code)]
