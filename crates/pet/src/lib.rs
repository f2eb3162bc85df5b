//! Positron emission tomography acquisition for offhost: scanner geometry, list-mode
//! formats, Monte Carlo source, sinograms and reconstruction.
//!
//! The crate's surface is deliberate: the types below at the root, and seven modules that are
//! namespaces of their own ([`listmode`], [`petlink`], [`petsird`] (PETSIRD list mode, read),
//! [`sinofile`], [`projdata`] (STIR's Interfile projection data), [`recon`], [`tasks`]), and
//! [`files`] holds the file jobs of `offhost pet`.
//! Everything else is private.
//!
//! | item | what it is |
//! |---|---|
//! | [`Scanner`], [`Layout`], [`Segment`] | geometry of a ring scanner and of its sinogram stack |
//! | [`Phantom`], [`SimConfig`], [`Source`], [`Pacer`], [`SimCounts`] | the Monte Carlo source |
//! | [`Histogrammer`], [`EnergyWindow`], [`HistStats`], [`Sinogram`] | events into sinograms |
//! | [`PetlinkHeader`], [`PetlinkReader`], [`PetlinkHistogrammer`] | the Siemens mMR's PETLINK format |
//! | [`Strategy`] | how a histogrammer sorts events before counting |
//! | [`Volume`] | a reconstructed image volume |
//! | [`FormatError`], [`GeometryError`], [`ImageError`] | what can go wrong |
#![forbid(unsafe_code)]

mod buckets;
mod crystal;
mod emission;
mod error;
mod fbp;
pub mod files;
mod geometry;
mod hist_index;
pub mod image_hv;
mod interfile;
mod joseph;
mod layout;
pub mod listmode;
mod lor;
mod mlem;
pub mod nema;
mod nema_cells;
pub mod nifti;
mod osem;
pub mod petlink;
mod petlink_hist;
pub mod petsird;
mod phantom;
mod photons;
pub mod preview;
pub mod projdata;
mod projector;
mod raytrace;
pub mod recon;
pub mod recon3d;
pub mod replay;
mod sim;
pub mod sinofile;
mod sinogram;
pub mod stir;
pub mod tasks;
mod volume;

pub use buckets::Strategy;
pub use error::{FormatError, GeometryError, ImageError};
pub use geometry::{Scanner, MAX_BINS_PER_AXIS, MAX_SINOGRAM_BINS};
pub use interfile::PetlinkHeader;
pub use layout::{Layout, Segment};
pub use petlink::PetlinkReader;
pub use petlink_hist::PetlinkHistogrammer;
pub use phantom::Phantom;
pub use sim::{Pacer, SimConfig, SimCounts, Source};
pub use sinogram::{EnergyWindow, HistStats, Histogrammer, Sinogram};
pub use volume::Volume;
