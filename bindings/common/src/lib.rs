//! What the Python (`bindings/python`) and C (`bindings/c`) bindings of offhost share.
//!
//! - [`Engine`] and [`Pipeline`]: a pipeline on the embedded engine (in this process) or on an
//!   engine daemon (`offhost engine --listen URL`) behind one handle, with its `host-in` and
//!   `host-out` channels by name, its status, stop and wait. Every blocking call takes a
//!   timeout, so a binding can wait in slices and look for signals (Ctrl-C) in between.
//! - [`Error`] and [`ErrorKind`]: every failure of the layers below with the kind a binding
//!   maps to an exception class or a status code; the message is the Rust one, and a limit
//!   gone over is also [`Error::over_limit`] (by its id, as the message names it).
#![forbid(unsafe_code)]

mod error;
mod pipeline;
mod status;

pub use error::{code_kind, guard, panic_message, queue_kind, Error, ErrorKind};
pub use pipeline::{check_workers, Dir, Engine, Output, Pipeline, MAX_WORKERS};
pub use status::Status;
