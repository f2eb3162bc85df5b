//! Loading a module: its bytes read within a bound, validated, compiled within a time, and
//! checked against the interface (the exports it must have, the imports it may have).

use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use offhost_units::{Limit, OverLimit};
use wasmtime::{ExternType, ValType};

use crate::abi;
use crate::error::WasmError;
use crate::limits::{Limits, COMPILES};
use crate::runtime::engine;

/// A compiled module that has the interface's exports and imports nothing else: ready to
/// instantiate, any number of times (cloning it is cheap).
#[derive(Clone)]
pub struct Module {
    pub(crate) module: wasmtime::Module,
    /// The bytes it was compiled from.
    pub(crate) bytes: usize,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("bytes", &self.bytes)
            .finish()
    }
}

/// Reads a module's bytes from `r`, whose length is `len` where known: refused before
/// anything is read if `len` is over `limit`, and if more than `limit` bytes come.
pub fn read(mut r: impl Read, len: Option<u64>, limit: u64) -> Result<Vec<u8>, WasmError> {
    let too_big = || WasmError::TooBig {
        over: OverLimit::new(Limit::WasmModuleBytes, limit),
    };
    if len.is_some_and(|n| n > limit) {
        return Err(too_big().with_asked(len));
    }
    let mut bytes = Vec::with_capacity(len.unwrap_or(0) as usize);
    r.by_ref()
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(WasmError::Read)?;
    if bytes.len() as u64 > limit {
        return Err(too_big());
    }
    Ok(bytes)
}

impl WasmError {
    fn with_asked(self, asked: Option<u64>) -> WasmError {
        match (self, asked) {
            (WasmError::TooBig { over }, Some(a)) => WasmError::TooBig {
                over: over.asked(a),
            },
            (e, _) => e,
        }
    }
}

/// Modules compiling now (each on a thread of its own).
static COMPILING: AtomicUsize = AtomicUsize::new(0);

impl Module {
    /// Validates `bytes`, compiles them (on a thread of their own, waited for at most
    /// `limits.compile_time`) and checks them against the interface. Arbitrary bytes give an
    /// error, never a panic.
    pub fn load(bytes: &[u8], limits: &Limits) -> Result<Module, WasmError> {
        if bytes.len() as u64 > limits.module_bytes {
            return Err(WasmError::TooBig {
                over: OverLimit::new(Limit::WasmModuleBytes, limits.module_bytes)
                    .asked(bytes.len()),
            });
        }
        if let Some(m) = cache::get(bytes) {
            return Ok(m);
        }
        // Validation is quick and says what is wrong; compiling is what takes time.
        wasmtime::Module::validate(engine(), bytes)
            .map_err(|e| WasmError::Invalid(format!("{e:#}")))?;
        let bytes: Arc<[u8]> = Arc::from(bytes);
        let module = compile(Arc::clone(&bytes), limits)?;
        check(&module)?;
        let m = Module {
            module,
            bytes: bytes.len(),
        };
        cache::put(bytes, &m);
        Ok(m)
    }
}

/// Modules compiled lately, by content: a module used by several tasks, or by pipeline after
/// pipeline, is compiled once. A hit compares the whole bytes, not only their hash.
mod cache {
    use std::collections::VecDeque;
    use std::hash::{Hash, Hasher};
    use std::sync::{Arc, Mutex};

    use super::Module;

    /// Modules kept.
    const ENTRIES: usize = 16;
    /// Bytes of the modules kept, at most (their compiled code is of the same order).
    const BYTES: usize = 64 << 20;

    struct Entry {
        hash: u64,
        bytes: Arc<[u8]>,
        module: Module,
    }

    static CACHE: Mutex<VecDeque<Entry>> = Mutex::new(VecDeque::new());

    fn hash(bytes: &[u8]) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        bytes.hash(&mut h);
        h.finish()
    }

    pub(super) fn get(bytes: &[u8]) -> Option<Module> {
        let h = hash(bytes);
        let c = CACHE.lock().unwrap_or_else(|p| p.into_inner());
        c.iter()
            .find(|e| e.hash == h && *e.bytes == *bytes)
            .map(|e| e.module.clone())
    }

    pub(super) fn put(bytes: Arc<[u8]>, module: &Module) {
        let hash = hash(&bytes);
        let mut c = CACHE.lock().unwrap_or_else(|p| p.into_inner());
        if c.iter().any(|e| e.hash == hash && e.bytes == bytes) {
            return;
        }
        c.push_front(Entry {
            hash,
            bytes,
            module: module.clone(),
        });
        while c.len() > ENTRIES || c.iter().map(|e| e.bytes.len()).sum::<usize>() > BYTES {
            c.pop_back();
        }
    }
}

fn compile(bytes: Arc<[u8]>, limits: &Limits) -> Result<wasmtime::Module, WasmError> {
    // Ordering: Relaxed; the count bounds the threads and orders nothing.
    if COMPILING.fetch_add(1, Ordering::Relaxed) >= COMPILES {
        COMPILING.fetch_sub(1, Ordering::Relaxed);
        return Err(WasmError::Busy(COMPILES));
    }
    let (tx, rx) = mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name("wasm-compile".into())
        .spawn(move || {
            let r = wasmtime::Module::from_binary(engine(), &bytes);
            COMPILING.fetch_sub(1, Ordering::Relaxed);
            let _ = tx.send(r);
        });
    if let Err(e) = spawned {
        COMPILING.fetch_sub(1, Ordering::Relaxed);
        return Err(WasmError::Read(e));
    }
    match rx.recv_timeout(limits.compile_time) {
        Ok(r) => r.map_err(|e| WasmError::Invalid(format!("{e:#}"))),
        Err(_) => Err(WasmError::CompileTime {
            over: OverLimit::time(Limit::WasmCompileTime, limits.compile_time),
        }),
    }
}

/// Whether every value of `types` is an `i32` and there are `n`.
fn all_i32(types: impl ExactSizeIterator<Item = ValType>, n: usize) -> bool {
    types.len() == n && types.into_iter().all(|t| matches!(t, ValType::I32))
}

fn describe(t: &ExternType) -> String {
    match t {
        ExternType::Func(f) => format!("func {f}"),
        ExternType::Global(_) => "a global".into(),
        ExternType::Table(_) => "a table".into(),
        ExternType::Memory(_) => "a memory".into(),
        ExternType::Tag(_) => "a tag".into(),
    }
}

fn want(params: usize, results: usize) -> String {
    let i32s = |n: usize| vec!["i32"; n].join(" ");
    match (params, results) {
        (0, r) => format!("func (result {})", i32s(r)),
        (p, 0) => format!("func (param {})", i32s(p)),
        (p, r) => format!("func (param {}) (result {})", i32s(p), i32s(r)),
    }
}

/// The module has the interface's exports and imports only what the engine grants.
fn check(m: &wasmtime::Module) -> Result<(), WasmError> {
    for i in m.imports() {
        let ty = i.ty();
        let granted = i.module() == abi::IMPORT_MODULE
            && abi::IMPORTS.iter().any(|(name, params)| {
                *name == i.name()
                    && matches!(&ty, ExternType::Func(f)
                        if all_i32(f.params(), *params) && f.results().len() == 0)
            });
        if !granted {
            return Err(WasmError::Import {
                module: i.module().to_string(),
                name: i.name().to_string(),
                kind: describe(&ty),
            });
        }
    }
    match m.get_export("memory") {
        Some(ExternType::Memory(_)) => {}
        found => {
            return Err(WasmError::Export {
                name: "memory",
                want: "a memory".into(),
                found: found.as_ref().map(describe),
            })
        }
    }
    for (name, params, results) in abi::EXPORTS {
        let ok = matches!(m.get_export(name), Some(ExternType::Func(f))
            if all_i32(f.params(), *params) && all_i32(f.results(), *results));
        if !ok {
            return Err(WasmError::Export {
                name,
                want: want(*params, *results),
                found: m.get_export(name).as_ref().map(describe),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_over_the_limit_is_refused_by_its_length_before_reading() {
        struct Unread;
        impl Read for Unread {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                panic!("read although the length was over the limit")
            }
        }
        let e = read(Unread, Some(1 << 30), 1 << 20).unwrap_err();
        assert!(
            e.to_string()
                .contains("over the limit wasm_module_bytes of 1048576 bytes"),
            "{e}"
        );
    }

    #[test]
    fn a_stream_longer_than_the_limit_is_refused_while_reading() {
        let e = read(std::io::repeat(0), None, 4096).unwrap_err();
        assert!(matches!(e, WasmError::TooBig { .. }), "{e}");
        assert_eq!(read(&[1u8, 2, 3][..], Some(3), 3).unwrap(), vec![1, 2, 3]);
    }

    #[test]
    fn the_wanted_types_are_said_as_text() {
        assert_eq!(want(0, 1), "func (result i32)");
        assert_eq!(want(2, 0), "func (param i32 i32)");
        assert_eq!(want(3, 1), "func (param i32 i32 i32) (result i32)");
    }
}

#[cfg(test)]
mod mutated {
    use super::*;

    /// A valid module with bytes changed at places a seeded generator picks: each gives a
    /// module or an error, never a panic (the fuzz target `wasm_module` does this at length).
    #[test]
    fn changed_bytes_give_an_error_or_a_module() {
        let good = wat::parse_str(
            r#"(module (import "offhost" "emit" (func $emit (param i32 i32)))
              (memory (export "memory") 1)
              (func (export "offhost_abi_version") (result i32) i32.const 1)
              (func (export "offhost_area") (param i32 i32 i32) (result i32) i32.const 4096)
              (func (export "offhost_start") (param i32 i32 i32) (result i32) i32.const 0)
              (func (export "offhost_buffer") (param i32 i32) (result i32)
                (call $emit (i32.const 0) (i32.mul (local.get 1) (i32.const 3))) i32.const 0)
              (func (export "offhost_end") (param i32) (result i32) i32.const 0)
              (func (export "offhost_resume") (result i32) i32.const 0))"#,
        )
        .unwrap();
        Module::load(&good, &Limits::default()).unwrap();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let (mut loaded, mut refused) = (0, 0);
        for _ in 0..300 {
            let mut b = good.clone();
            for _ in 0..1 + next() % 3 {
                let at = (next() % b.len() as u64) as usize;
                b[at] = next() as u8;
            }
            match Module::load(&b, &Limits::default()) {
                Ok(_) => loaded += 1,
                Err(_) => refused += 1,
            }
        }
        // Some changes fall in names, immediates and lengths that still make a module.
        assert!(
            loaded > 0 && refused > 0,
            "{loaded} loaded, {refused} refused"
        );
    }
}
