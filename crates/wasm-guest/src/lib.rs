//! Write an offhost filter task in Rust for WebAssembly: the guest side of the `wasm` task's
//! interface (version [`VERSION`]; `docs/notes/wasm.md` and `offhost_wasm::abi` say it whole).
//!
//! A filter is one function of the stream's buffers:
//!
//! ```ignore
//! use offhost_wasm_guest::{Error, Out};
//!
//! fn pass(data: &[u8], out: &mut Out<'_>) -> Result<(), Error> {
//!     out.write(0, data);
//!     Ok(())
//! }
//! offhost_wasm_guest::filter_fn!(pass);
//! ```
//!
//! or, with state, arguments or several ports, a type that implements [`Filter`], exported
//! with [`filter!`]. Build it as a `cdylib` for `wasm32-unknown-unknown`
//! (`examples/wasm/rust/` shows the manifest and the command).
//!
//! What it does for you: it keeps the areas the engine writes input into and the windows it
//! reads output from (one `Vec` each, reused), hands your function the input where the engine
//! put it, and [`Out`] writes into the windows; output that does not fit waits in the module
//! and goes out in the next windows (the interface's `MORE` and `offhost_resume`), so a
//! filter may write as much as it likes. An [`Error`] goes to the engine with its message.
//!
//! The crate is `no_std` (it needs `alloc`); the `wasm32` glue, the only `unsafe` in it, is in
//! `wasm.rs`: the interface's two imports, and the one global state of a single-threaded
//! module.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

mod out;
mod state;
#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod wasm;

pub use out::Out;
pub use state::{Host, State};

use alloc::string::String;

/// The interface version this crate speaks.
pub const VERSION: i32 = 1;

/// A filter's failure: its message goes to the engine, which ends the task with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    message: String,
}

impl Error {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> Error {
        Error {
            message: message.into(),
        }
    }

    /// Its message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The task's ports, as the pipeline connected them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    /// Input queues.
    pub inputs: usize,
    /// Output queues.
    pub outputs: usize,
}

/// A filter task with state.
pub trait Filter: Sized {
    /// Starts the filter with the task's `arg=` text and its ports; an error refuses the
    /// pipeline (say what the filter wants).
    fn start(arg: &str, ports: Ports) -> Result<Self, Error>;

    /// One buffer from input `input`.
    fn buffer(&mut self, input: usize, data: &[u8], out: &mut Out<'_>) -> Result<(), Error>;

    /// Input `input` reached its end; write what is left. The task ends after the last
    /// input's end (or, with no inputs, after `start`).
    fn end(&mut self, _input: usize, _out: &mut Out<'_>) -> Result<(), Error> {
        Ok(())
    }
}

/// A filter that is one function of its one input's buffers ([`filter_fn!`]).
#[doc(hidden)]
pub struct FnFilter<F>(pub F);

impl<F: FnMut(&[u8], &mut Out<'_>) -> Result<(), Error>> FnFilter<F> {
    /// Checks that the task has one input and one output.
    pub fn check(ports: Ports) -> Result<(), Error> {
        if ports.inputs == 1 && ports.outputs == 1 {
            Ok(())
        } else {
            Err(Error::new(alloc::format!(
                "this filter takes one input and one output, not {} and {}",
                ports.inputs,
                ports.outputs
            )))
        }
    }
}

/// Exports a type that implements [`Filter`] as the module's filter (once per module).
#[macro_export]
macro_rules! filter {
    ($t:ty) => {
        static OFFHOST_STATE: $crate::wasm::Global<$t> = $crate::wasm::Global::new();
        $crate::wasm_exports!(OFFHOST_STATE);
    };
}

/// Exports a function `fn(&[u8], &mut Out) -> Result<(), Error>` of one input's buffers to
/// one output as the module's filter (once per module).
#[macro_export]
macro_rules! filter_fn {
    ($f:path) => {
        struct OffhostFnFilter;
        impl $crate::Filter for OffhostFnFilter {
            fn start(_arg: &str, ports: $crate::Ports) -> Result<Self, $crate::Error> {
                $crate::FnFilter::<
                                    fn(&[u8], &mut $crate::Out<'_>) -> Result<(), $crate::Error>,
                                >::check(ports)?;
                Ok(OffhostFnFilter)
            }
            fn buffer(
                &mut self,
                _input: usize,
                data: &[u8],
                out: &mut $crate::Out<'_>,
            ) -> Result<(), $crate::Error> {
                $f(data, out)
            }
        }
        $crate::filter!(OffhostFnFilter);
    };
}
