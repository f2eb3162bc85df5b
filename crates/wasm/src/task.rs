//! The `wasm` task: a module's instance driven by the engine's queues and free lists.

use offhost_engine::{ArgError, Args, BufMut, Build, Context, Get, Status, Task, TaskError};

use crate::error::WasmError;
use crate::guest::{Guest, MAX_ARG_BYTES};
use crate::limits::{Limits, MAX_MEMORY};
use crate::module::{read, Module};

/// The task: takes each input buffer into the module, puts what it emits.
struct WasmTask {
    /// The module's path, for errors.
    path: String,
    guest: Guest,
    /// Per output, the buffer of its free list whose window the module writes into.
    held: Vec<Option<BufMut>>,
    /// Per input, whether its end was handed to the module.
    ended: Vec<bool>,
    /// The input to look at first (inputs take turns).
    next: usize,
    /// The last call returned MORE: call `offhost_resume` once the windows are empty.
    more: bool,
}

impl WasmTask {
    /// Every output holds a buffer (and has its window): `false` when a free list is empty
    /// (the task is woken when a buffer comes back).
    fn hold(&mut self, cx: &mut Context<'_>) -> Result<bool, WasmError> {
        for o in 0..self.held.len() {
            if self.held[o].is_none() {
                let Some(b) = cx.alloc(o) else {
                    return Ok(false);
                };
                if !self.guest.has_window(o) {
                    self.guest.open_window(o, b.remaining())?;
                }
                self.held[o] = Some(b);
            }
        }
        Ok(true)
    }

    /// Puts what the last call emitted, each output's from the module's window into the buffer
    /// it holds.
    fn put(&mut self, cx: &mut Context<'_>) -> Result<(), WasmError> {
        let mut short = None;
        let held = &mut self.held;
        self.guest.drain(|o, bytes| {
            if bytes.is_empty() {
                return;
            }
            let Some(mut b) = held[o].take() else { return };
            if bytes.len() > b.remaining() {
                short = Some((o, bytes.len(), b.remaining()));
                return;
            }
            b.unfilled()[..bytes.len()].copy_from_slice(bytes);
            b.commit(bytes.len());
            cx.put(o, b.freeze());
        });
        match short {
            None => Ok(()),
            Some((o, len, room)) => Err(WasmError::Misuse {
                call: "emit",
                what: format!("{len} bytes for output {o}, whose buffer holds {room}"),
            }),
        }
    }

    fn turn(&mut self, cx: &mut Context<'_>) -> Result<Status, WasmError> {
        loop {
            if !self.hold(cx)? {
                return Ok(Status::Blocked);
            }
            if self.more {
                self.more = self.guest.resume()?;
                self.put(cx)?;
                continue;
            }
            let n = self.ended.len();
            if self.ended.iter().all(|e| *e) {
                return Ok(Status::Done);
            }
            let mut called = false;
            for k in 0..n {
                let i = (self.next + k) % n;
                if self.ended[i] {
                    continue;
                }
                match cx.get(i) {
                    Get::Buf(b) => {
                        self.next = (i + 1) % n;
                        self.more = self.guest.buffer(i, &b)?;
                    }
                    Get::Closed => {
                        self.ended[i] = true;
                        self.more = self.guest.end(i)?;
                    }
                    Get::Empty => continue,
                }
                called = true;
                break;
            }
            if !called {
                return Ok(Status::Blocked);
            }
            self.put(cx)?;
        }
    }
}

impl Task for WasmTask {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        self.turn(cx)
            .map_err(|e| TaskError::Failed(format!("module {}: {e}", self.path)))
    }
}

/// Builds a task running `module`: instantiates it under `limits` and calls its
/// `offhost_start` with `arg`.
pub(crate) fn build(
    path: &str,
    module: &Module,
    limits: &Limits,
    arg: &str,
    inputs: usize,
    outputs: usize,
) -> Result<Box<dyn Task>, WasmError> {
    let mut guest = Guest::new(module, limits.memory, limits.deadline, inputs, outputs)?;
    let more = guest.start(arg.as_bytes(), inputs, outputs)?;
    Ok(Box::new(WasmTask {
        path: path.to_string(),
        guest,
        held: (0..outputs).map(|_| None).collect(),
        ended: vec![false; inputs],
        next: 0,
        more,
    }))
}

/// The `wasm` task's factory.
pub(crate) fn factory(args: &Args, b: &mut Build<'_>) -> Result<Box<dyn Task>, ArgError> {
    let path = args.required("module")?;
    let mut limits = Limits::default();
    if let Some(m) = args.size_in_opt("memory", 65536..=MAX_MEMORY)? {
        limits.memory = m;
    }
    if let Some(d) = args.get("deadline") {
        let d = offhost_units::parse_duration(d)
            .map_err(|e| ArgError::new("deadline", format!("deadline={d}: {e}")))?;
        if d.is_zero() || d.as_secs() > 3600 {
            return Err(ArgError::range(
                "deadline",
                args.get("deadline").unwrap_or_default(),
                "above 0 and at most 1h",
            ));
        }
        limits.deadline = d;
    }
    // The instance's memory cap counts in the pipeline's budget, with its free lists.
    b.reserve_memory("memory", limits.memory)?;
    let arg = args.get("arg").unwrap_or("");
    if arg.len() > MAX_ARG_BYTES {
        return Err(ArgError::range(
            "arg",
            format_args!("({} bytes)", arg.len()),
            format_args!("at most {MAX_ARG_BYTES} bytes"),
        ));
    }
    let at = |e: WasmError| ArgError::new("module", format!("module {path}: {e}"));
    // A module sent with the pipeline under this name (`offhost submit --module NAME=FILE`)
    // goes before a file of that name.
    let bytes: std::sync::Arc<[u8]> = match b.blob(path) {
        Some(blob) => {
            let n = blob.len() as u64;
            if n > limits.module_bytes {
                let over = offhost_units::OverLimit::new(
                    offhost_units::Limit::WasmModuleBytes,
                    limits.module_bytes,
                );
                return Err(at(WasmError::TooBig {
                    over: over.asked(n),
                }));
            }
            blob
        }
        None => {
            let file = b
                .files()
                .open(path)
                .map_err(|e| e.arg("module"))?
                .open()
                .map_err(|e| at(WasmError::Read(e)))?;
            let len = file.metadata().ok().map(|m| m.len());
            read(file, len, limits.module_bytes).map_err(at)?.into()
        }
    };
    let module = Module::load(&bytes, &limits).map_err(at)?;
    build(path, &module, &limits, arg, b.inputs(), b.outputs()).map_err(at)
}
