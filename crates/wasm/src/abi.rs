//! The guest interface, version 1: what a module exports and imports to be a `wasm` task.
//!
//! A core WebAssembly module (not a component), with `i32` arguments only:
//!
//! | export | type | called |
//! |---|---|---|
//! | `memory` | memory | the module's linear memory, where every buffer crosses |
//! | `offhost_abi_version` | `() -> i32` | once, first; returns [`VERSION`] |
//! | `offhost_area` | `(kind, index, size) -> ptr` | for room in the module's memory: [`AREA_ARGS`] before start, [`AREA_INPUT`] `index` before an input's first (or a larger) buffer, [`AREA_OUTPUT`] `index` once, before the first call that may emit; `ptr` of at least `size` bytes that the module keeps for that use, or 0 when it has no room |
//! | `offhost_start` | `(args_len, inputs, outputs) -> code` | once, when the pipeline is built: the task's `arg=` lies in the arguments' area |
//! | `offhost_buffer` | `(input, len) -> code` | per input buffer: `len` bytes lie in input `input`'s area |
//! | `offhost_end` | `(input) -> code` | once per input, at its end of stream |
//! | `offhost_resume` | `() -> code` | after a call returned [`MORE`], with every output's window empty again |
//!
//! | import (module `offhost`) | type | does |
//! |---|---|---|
//! | `emit` | `(output, len)` | the first `len` bytes of output `output`'s window are a buffer for that output; at most once per output per call, `len` at most the window's size |
//! | `error` | `(ptr, len)` | the text at `ptr` is the message of the error the call returns (at most [`MAX_MESSAGE`] bytes are kept) |
//!
//! A call returns [`DONE`] (0: all of it is handled), [`MORE`] (1: it has more output than
//! its windows held; the engine puts what was emitted, gets fresh buffers and calls
//! `offhost_resume`) or a negative code (an error; its message is what `error` last said).
//! `offhost_start` may not emit (there are no windows yet), and returns [`MORE`] when the
//! module has output before any input (a source). A task with no inputs ends when a call
//! returns [`DONE`]; one with inputs ends after the last `offhost_end` returns [`DONE`].
//!
//! Each output's window is its own area of the module's memory, as large as a buffer of the
//! output's free list: the engine takes a buffer from the free list before a call, and copies
//! what the module emitted into it after, so an input buffer crosses into the module's memory
//! once and an output buffer out of it once. A call is made only when every output holds a
//! buffer, which is how a module waits for its readers (the free lists' back-pressure). A
//! window may be the same memory as an input's area (a filter that works in place): the
//! engine writes the input before the call and reads the window after it.

/// The interface version this engine speaks (`offhost_abi_version`'s answer).
pub const VERSION: i32 = 1;

/// The import module name of every function the engine grants.
pub const IMPORT_MODULE: &str = "offhost";

/// `offhost_area`'s kind: the task's arguments (index 0).
pub const AREA_ARGS: i32 = 0;
/// `offhost_area`'s kind: an input's area (index: the input).
pub const AREA_INPUT: i32 = 1;
/// `offhost_area`'s kind: an output's window (index: the output).
pub const AREA_OUTPUT: i32 = 2;

/// A call's code: done with what it was given.
pub const DONE: i32 = 0;
/// A call's code: more output waits; call `offhost_resume` with empty windows.
pub const MORE: i32 = 1;

/// Bytes of an error message the engine keeps.
pub const MAX_MESSAGE: usize = 1024;

/// The functions a module must export, with their parameter and result counts (all `i32`).
pub const EXPORTS: &[(&str, usize, usize)] = &[
    ("offhost_abi_version", 0, 1),
    ("offhost_area", 3, 1),
    ("offhost_start", 3, 1),
    ("offhost_buffer", 2, 1),
    ("offhost_end", 1, 1),
    ("offhost_resume", 0, 1),
];

/// The functions the engine grants, in module [`IMPORT_MODULE`], with their parameter counts
/// (all `i32`, no results).
pub const IMPORTS: &[(&str, usize)] = &[("emit", 2), ("error", 2)];
