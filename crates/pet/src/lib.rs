//! Positron emission tomography acquisition for offhost: scanner geometry, list-mode
//! formats, Monte Carlo source, sinograms and reconstruction.
#![forbid(unsafe_code)]
