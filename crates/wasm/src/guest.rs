//! One instance of a module: its store (memory cap, deadline), its exports, and the calls the
//! task makes into it, each under the deadline, each trap said as a [`WasmError`].

use std::time::Duration;

use offhost_units::{Limit, OverLimit};
use wasmtime::{Caller, Linker, Memory, Store, Trap, TypedFunc};

use crate::abi;
use crate::error::WasmError;
use crate::limits::MemoryCap;
use crate::module::Module;
use crate::runtime::{engine, ticks, Live};

/// What the engine's imports see of the task: the windows, what was emitted into them during
/// the call, the error message.
struct Host {
    limiter: MemoryCap,
    /// Each output's window: (offset, size); size 0 until it exists.
    windows: Vec<(u32, u32)>,
    /// What each output's window holds for the engine after this call.
    emitted: Vec<Option<u32>>,
    /// What `error` said.
    message: Option<String>,
    /// How an import was misused (which then trapped).
    misuse: Option<String>,
}

impl Host {
    fn emit(&mut self, output: i32, len: i32) -> Result<(), String> {
        let o = usize::try_from(output)
            .ok()
            .filter(|o| *o < self.windows.len())
            .ok_or_else(|| {
                format!(
                    "emit to output {output}; the task has {} outputs",
                    self.windows.len()
                )
            })?;
        let size = self.windows[o].1;
        if len < 0 || len as u32 > size {
            return Err(format!(
                "emit of {len} bytes to output {o}, whose window holds {size}"
            ));
        }
        if self.emitted[o].is_some() {
            return Err(format!(
                "emit to output {o} twice in one call (return 1 to have the engine call offhost_resume with an empty window)"
            ));
        }
        self.emitted[o] = Some(len as u32);
        Ok(())
    }
}

/// The interface's exports of an instance.
struct Exports {
    area: TypedFunc<(i32, i32, i32), i32>,
    start: TypedFunc<(i32, i32, i32), i32>,
    buffer: TypedFunc<(i32, i32), i32>,
    end: TypedFunc<i32, i32>,
    resume: TypedFunc<(), i32>,
}

/// A running instance.
pub(crate) struct Guest {
    store: Store<Host>,
    memory: Memory,
    exports: Exports,
    ticks: u64,
    deadline: Duration,
    /// Each input's area: (offset, size).
    inputs: Vec<(u32, u32)>,
    _live: Live,
}

/// Arguments that cross into a module's memory at start, at most.
pub const MAX_ARG_BYTES: usize = 64 << 10;

fn linker() -> Result<Linker<Host>, WasmError> {
    let mut l = Linker::new(engine());
    let wrap = |e: wasmtime::Error| WasmError::Instantiate(format!("{e:#}"));
    l.func_wrap(
        abi::IMPORT_MODULE,
        "emit",
        |mut c: Caller<'_, Host>, output: i32, len: i32| -> wasmtime::Result<()> {
            let h = c.data_mut();
            h.emit(output, len).map_err(|what| {
                h.misuse = Some(what.clone());
                wasmtime::Error::msg(what)
            })
        },
    )
    .map_err(wrap)?;
    l.func_wrap(
        abi::IMPORT_MODULE,
        "error",
        |mut c: Caller<'_, Host>, ptr: i32, len: i32| {
            let text = match c.get_export("memory").and_then(|e| e.into_memory()) {
                Some(m) => {
                    let data = m.data(&c);
                    let (p, n) = (
                        ptr as u32 as usize,
                        (len as u32 as usize).min(abi::MAX_MESSAGE),
                    );
                    match data.get(p..p.saturating_add(n)) {
                        Some(b) => String::from_utf8_lossy(b).into_owned(),
                        None => format!("(its message at {p}, {n} bytes, lies outside its memory)"),
                    }
                }
                None => "(it has no memory to hold a message)".into(),
            };
            c.data_mut().message = Some(text);
        },
    )
    .map_err(wrap)?;
    Ok(l)
}

impl Guest {
    /// Instantiates `module` with a memory of at most `memory` bytes, each call under
    /// `deadline`, for a task with `outputs` outputs; checks the interface's version.
    pub(crate) fn new(
        module: &Module,
        memory: u64,
        deadline: Duration,
        inputs: usize,
        outputs: usize,
    ) -> Result<Guest, WasmError> {
        let live = Live::new();
        let host = Host {
            limiter: MemoryCap::new(memory),
            windows: vec![(0, 0); outputs],
            emitted: vec![None; outputs],
            message: None,
            misuse: None,
        };
        let mut store = Store::new(engine(), host);
        store.limiter(|h| &mut h.limiter);
        store.epoch_deadline_trap();
        let ticks = ticks(deadline);
        // The module's own start function, if it has one, runs under the deadline too.
        store.set_epoch_deadline(ticks);
        let instance = match linker()?.instantiate(&mut store, &module.module) {
            Ok(i) => i,
            Err(e) => {
                return Err(match classify(&store, "instantiation", deadline, &e) {
                    Some(w) => w,
                    None => WasmError::Instantiate(format!("{e:#}")),
                })
            }
        };
        // The exports' presence and types were checked when the module was loaded.
        let missing = |name: &'static str| WasmError::Export {
            name,
            want: "as checked at load".into(),
            found: None,
        };
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or_else(|| missing("memory"))?;
        macro_rules! func {
            ($name:literal) => {
                instance
                    .get_typed_func(&mut store, $name)
                    .map_err(|_| missing($name))?
            };
        }
        let version: TypedFunc<(), i32> = func!("offhost_abi_version");
        let exports = Exports {
            area: func!("offhost_area"),
            start: func!("offhost_start"),
            buffer: func!("offhost_buffer"),
            end: func!("offhost_end"),
            resume: func!("offhost_resume"),
        };
        let mut g = Guest {
            exports,
            store,
            memory,
            ticks,
            deadline,
            inputs: vec![(0, 0); inputs],
            _live: live,
        };
        g.store.set_epoch_deadline(g.ticks);
        let found = match version.call(&mut g.store, ()) {
            Ok(v) => v,
            Err(e) => return Err(g.trapped("offhost_abi_version", e)),
        };
        if found != abi::VERSION {
            return Err(WasmError::Version { found });
        }
        Ok(g)
    }

    /// Calls the export `pick` chooses under the deadline; a trap becomes its error.
    fn call<P, R>(
        &mut self,
        name: &'static str,
        pick: impl FnOnce(&Exports) -> &TypedFunc<P, R>,
        p: P,
    ) -> Result<R, WasmError>
    where
        P: wasmtime::WasmParams,
        R: wasmtime::WasmResults,
    {
        self.store.set_epoch_deadline(self.ticks);
        match pick(&self.exports).call(&mut self.store, p) {
            Ok(r) => Ok(r),
            Err(e) => Err(self.trapped(name, e)),
        }
    }

    fn trapped(&mut self, call: &'static str, e: wasmtime::Error) -> WasmError {
        if let Some(what) = self.store.data_mut().misuse.take() {
            return WasmError::Misuse { call, what };
        }
        classify(&self.store, call, self.deadline, &e).unwrap_or_else(|| WasmError::Trap {
            call,
            trap: format!("{e:#}"),
        })
    }

    /// What a call's code says: `Ok(true)` for more output waiting.
    fn code(&mut self, call: &'static str, code: i32) -> Result<bool, WasmError> {
        match code {
            abi::DONE => Ok(false),
            abi::MORE => Ok(true),
            c if c < 0 => Err(WasmError::Failed {
                call,
                code: c,
                message: self
                    .store
                    .data_mut()
                    .message
                    .take()
                    .unwrap_or_else(|| "(it gave no message)".into()),
            }),
            c => Err(WasmError::Misuse {
                call,
                what: format!("returned {c}, which is no code of the interface (0, 1 or negative)"),
            }),
        }
    }

    /// Room of `size` bytes in the module's memory, from `offhost_area`.
    fn area(&mut self, kind: i32, index: usize, size: usize) -> Result<(u32, u32), WasmError> {
        let cap = self.store.data().limiter.cap;
        if size as u64 > cap || size > i32::MAX as usize {
            return Err(WasmError::Memory {
                call: "offhost_area",
                asked: size as u64,
                over: OverLimit::new(Limit::WasmMemory, cap).asked(size),
            });
        }
        let ptr = self.call(
            "offhost_area",
            |e| &e.area,
            (kind, index as i32, size as i32),
        )?;
        let in_memory = self.memory.data_size(&self.store);
        let end = (ptr as u32 as usize).checked_add(size);
        if ptr == 0 || end.is_none_or(|e| e > in_memory) {
            return Err(WasmError::Misuse {
                call: "offhost_area",
                what: format!(
                    "gave area {ptr} for {size} bytes (kind {kind}, index {index}), which is not room in its memory of {in_memory} bytes"
                ),
            });
        }
        Ok((ptr as u32, size as u32))
    }

    /// `offhost_start` with `args` in the arguments' area: `Ok(true)` when it has output.
    pub(crate) fn start(
        &mut self,
        args: &[u8],
        inputs: usize,
        outputs: usize,
    ) -> Result<bool, WasmError> {
        if !args.is_empty() {
            let (ptr, _) = self.area(abi::AREA_ARGS, 0, args.len())?;
            self.write(ptr, args);
        }
        let code = self.call(
            "offhost_start",
            |e| &e.start,
            (args.len() as i32, inputs as i32, outputs as i32),
        )?;
        if let Some(o) = self.store.data().emitted.iter().position(Option::is_some) {
            return Err(WasmError::Misuse {
                call: "offhost_start",
                what: format!("emitted to output {o} before the engine gave it a window"),
            });
        }
        self.code("offhost_start", code)
    }

    /// Makes output `o`'s window of `size` bytes.
    pub(crate) fn open_window(&mut self, o: usize, size: usize) -> Result<(), WasmError> {
        let w = self.area(abi::AREA_OUTPUT, o, size)?;
        self.store.data_mut().windows[o] = w;
        Ok(())
    }

    /// Whether output `o` has its window.
    pub(crate) fn has_window(&self, o: usize) -> bool {
        self.store.data().windows[o].1 > 0
    }

    fn write(&mut self, ptr: u32, data: &[u8]) {
        let at = ptr as usize;
        // `area` checked that the room lies in memory, which never shrinks.
        self.memory.data_mut(&mut self.store)[at..at + data.len()].copy_from_slice(data);
    }

    /// `offhost_buffer` with `data` in input `i`'s area (made larger first if need be).
    pub(crate) fn buffer(&mut self, i: usize, data: &[u8]) -> Result<bool, WasmError> {
        if (self.inputs[i].1 as usize) < data.len() {
            let size = data.len().next_power_of_two().max(4096);
            self.inputs[i] = self.area(abi::AREA_INPUT, i, size)?;
        }
        self.write(self.inputs[i].0, data);
        let code = self.call(
            "offhost_buffer",
            |e| &e.buffer,
            (i as i32, data.len() as i32),
        )?;
        self.code("offhost_buffer", code)
    }

    /// `offhost_end` for input `i`.
    pub(crate) fn end(&mut self, i: usize) -> Result<bool, WasmError> {
        let code = self.call("offhost_end", |e| &e.end, i as i32)?;
        self.code("offhost_end", code)
    }

    /// `offhost_resume`.
    pub(crate) fn resume(&mut self) -> Result<bool, WasmError> {
        let code = self.call("offhost_resume", |e| &e.resume, ())?;
        self.code("offhost_resume", code)
    }

    /// Hands `f` each output's emitted bytes (in the module's memory) and empties the windows.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(usize, &[u8])) {
        let (data, host) = self.memory.data_and_store_mut(&mut self.store);
        for (o, e) in host.emitted.iter_mut().enumerate() {
            if let Some(len) = e.take() {
                let at = host.windows[o].0 as usize;
                f(o, &data[at..at + len as usize]);
            }
        }
    }
}

/// A deadline or a refused memory growth, where that is what ended the call.
fn classify(
    store: &Store<Host>,
    call: &'static str,
    deadline: Duration,
    e: &wasmtime::Error,
) -> Option<WasmError> {
    if matches!(e.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
        return Some(WasmError::Deadline {
            call,
            over: OverLimit::time(Limit::WasmDeadline, deadline),
        });
    }
    let cap = &store.data().limiter;
    cap.refused.map(|asked| WasmError::Memory {
        call,
        asked,
        over: cap.over(),
    })
}
