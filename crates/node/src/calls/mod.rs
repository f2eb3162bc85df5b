//! Calls: a task that hands each buffer of its input to a service and puts out the answer,
//! one call at a time (`call name=NAME [url=URL pipeline=ID]`). One feature, four places, by
//! who owns what:
//!
//! - the engine core (`offhost_engine::call`) owns a call to a service of the task's own
//!   pipeline (no link, no thread: the service's `host-out` wakes the call), and what every
//!   call shares: `timeout=`, putting an answer out, one answer per request;
//! - `client` (here) owns `call url=URL pipeline=ID`: a call to a pipeline on another
//!   engine over a link session of the task's own, every answer checked; without `url=` it is
//!   the core's call;
//! - `serve` (here) owns the daemon's side: channels `call/ID/NAME` from any number of
//!   callers sharing one pipeline's `host-in` and `host-out NAME`, a call at a time;
//! - [`wire`] (here) owns how requests and answers cross a link, which both sides use;
//! - `crate::placement::calls` owns the planning: a placed call of the file's own service on
//!   another engine is pointed at the part that runs the service.

pub(crate) mod client;
pub(crate) mod serve;
pub mod wire;

pub use wire::{Joiner, WireError};
