//! Fuzz the `wasm` task's module loader: arbitrary bytes through the size check, validation,
//! compilation and the interface's check of imports and exports (`offhost_wasm::Module::load`).
//! No bytes may panic or take the process down; each gets a module or an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offhost_wasm::{Limits, Module};

fuzz_target!(|data: &[u8]| {
    let _ = Module::load(data, &Limits::default());
});
