//! The `wasm` task: a WebAssembly module as a filter task, sandboxed and bounded.
//!
//! `wasm module=PATH [memory=SIZE] [deadline=DURATION] [arg=TEXT]` runs a module as a task
//! with the ports, free lists, priorities and statistics of a built-in one. The module
//! speaks the guest interface of [`abi`] (version [`abi::VERSION`]); in Rust,
//! `offhost-wasm-guest` makes a filter one function. [`register`] adds the task to a
//! [`Registry`]; the `offhost` binary, its daemon and the bindings do, behind their cargo
//! feature `wasm`, so that the engine core never pulls in wasmtime.
//!
//! What a module may do, and not:
//!
//! - It imports only the interface's `offhost.emit` and `offhost.error`: no file, socket,
//!   clock or environment. A module that imports anything else is refused when the pipeline
//!   is built ([`WasmError::Import`]).
//! - Its memory is capped by `memory=` (default [`limits::DEFAULT_MEMORY`]) through a
//!   resource limiter: growth past it fails in the module, and the trap that follows says so.
//! - Every call runs under `deadline=` (default [`limits::DEFAULT_DEADLINE`]) by epoch
//!   interruption, kept by one ticker thread per process ([`runtime`]); a module that loops
//!   ends its task with an error naming the task, its line and the module, and the rest of
//!   the engine goes on.
//! - Its file is at most [`limits::MODULE_BYTES`], its compile at most
//!   [`limits::COMPILE_TIME`]; a module that fails validation, lacks an export or traps gets
//!   an error that says which.
//!
//! A module's path is opened through the pipeline's [`Files`](offhost_engine::Files): a
//! pipeline from outside reads modules only beneath the engine's `--files` directory.
#![forbid(unsafe_code)]

pub mod abi;
mod error;
mod guest;
pub mod limits;
mod module;
pub mod runtime;
mod task;

pub use error::WasmError;
pub use guest::MAX_ARG_BYTES;
pub use limits::Limits;
pub use module::{read, Module};

use offhost_engine::{Registry, TaskInfo};

/// The `wasm` task's documentation: its arguments and ports.
pub fn info() -> TaskInfo {
    TaskInfo::new(
        "wasm",
        "runs a WebAssembly module as a filter (sandboxed: no imports but the engine's, memory capped, every call under a deadline; see docs/notes/wasm.md)",
    )
    .required("module", "path of the module (.wasm), opened as the pipeline's files allow")
    .arg(
        "memory",
        "16M",
        "cap of the instance's linear memory (64k to 4G)",
    )
    .arg(
        "deadline",
        "1s",
        "how long one call into the module may run (above 0, at most 1h; kept to within 5 ms)",
    )
    .arg(
        "arg",
        "",
        "text handed to the module's start (at most 64 KiB)",
    )
    .inputs(0, 16)
    .outputs(0, 16)
    .allocates(16, 65536)
}

/// Adds the `wasm` task to `r`.
pub fn register(r: &mut Registry) {
    r.register(info(), task::factory);
}
