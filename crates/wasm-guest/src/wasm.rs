//! The `wasm32` glue: the interface's imports, the module's one global state, and the exports
//! [`filter!`](crate::filter) writes. This is the crate's FFI edge and its only `unsafe`.

use core::cell::UnsafeCell;

use crate::state::{Host, State};

#[link(wasm_import_module = "offhost")]
extern "C" {
    /// `offhost.emit(output, len)`.
    #[link_name = "emit"]
    fn offhost_emit(output: i32, len: i32);
    /// `offhost.error(ptr, len)`.
    #[link_name = "error"]
    fn offhost_error(ptr: i32, len: i32);
}

/// The engine, through the imports.
pub struct Imports;

impl Host for Imports {
    fn emit(&mut self, output: usize, len: usize) {
        // SAFETY: an import of the engine's, which only reads its two integers; the window
        // it names is the module's own memory, which the engine checks.
        unsafe { offhost_emit(output as i32, len as i32) }
    }

    fn error(&mut self, message: &str) {
        // SAFETY: as above; the engine copies at most `len` bytes from `ptr` in this
        // module's memory, where `message` lies for the whole call.
        unsafe { offhost_error(message.as_ptr() as i32, message.len() as i32) }
    }
}

/// The module's state, in a static. A `wasm32-unknown-unknown` module has one thread, and the
/// engine never calls an export while another runs (its imports do not call back), so one
/// `&mut` at a time is all there ever is.
pub struct Global<F>(UnsafeCell<State<F>>);

// SAFETY: see the type's doc: no second thread can exist in this module (no `atomics`
// target feature, no shared memory), so the state is never reached from two threads.
unsafe impl<F> Sync for Global<F> {}

impl<F> Global<F> {
    /// Empty.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Global<F> {
        Global(UnsafeCell::new(State::new()))
    }

    /// Runs `f` on the state.
    pub fn with<R>(&self, f: impl FnOnce(&mut State<F>, &mut Imports) -> R) -> R {
        // SAFETY: the only reference to the state while an export runs (see the type's
        // doc); exports do not nest, and `f` cannot reach `self` again.
        let s = unsafe { &mut *self.0.get() };
        f(s, &mut Imports)
    }
}

/// The interface's exports over a [`Global`] named `$g`.
#[doc(hidden)]
#[macro_export]
macro_rules! wasm_exports {
    ($g:ident) => {
        #[no_mangle]
        pub extern "C" fn offhost_abi_version() -> i32 {
            $crate::VERSION
        }
        #[no_mangle]
        pub extern "C" fn offhost_area(kind: i32, index: i32, size: i32) -> i32 {
            $g.with(|s, _| s.area(kind, index, size) as i32)
        }
        #[no_mangle]
        pub extern "C" fn offhost_start(len: i32, inputs: i32, outputs: i32) -> i32 {
            $g.with(|s, h| s.start(len, inputs, outputs, h))
        }
        #[no_mangle]
        pub extern "C" fn offhost_buffer(input: i32, len: i32) -> i32 {
            $g.with(|s, h| s.buffer(input, len, h))
        }
        #[no_mangle]
        pub extern "C" fn offhost_end(input: i32) -> i32 {
            $g.with(|s, h| s.end(input, h))
        }
        #[no_mangle]
        pub extern "C" fn offhost_resume() -> i32 {
            $g.with(|s, h| s.resume(h))
        }
    };
}
