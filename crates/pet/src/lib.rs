//! Positron emission tomography acquisition for offhost: scanner geometry, list-mode
//! formats, Monte Carlo source, sinograms and reconstruction.
#![forbid(unsafe_code)]

pub mod error;
pub mod geometry;
pub mod interfile;
pub mod layout;
pub mod listmode;
pub mod petlink;

pub use error::{FormatError, GeometryError, ImageError};
pub use geometry::Scanner;
pub use layout::Layout;
pub mod buckets;
pub mod crystal;
pub mod emission;
pub mod fbp;
mod hist_index;
pub mod lor;
pub mod mlem;
pub mod nema_cells;
pub mod petlink_hist;
pub mod phantom;
pub mod photons;
pub mod projector;
pub mod recon;
pub mod sim;
pub mod sinofile;
pub mod sinogram;
pub mod tasks;
pub mod volume;
