//! What goes wrong with a module: loading it, checking it, running it.

use offhost_units::OverLimit;

/// Why a module cannot be a task, or why its task failed. The task's errors put the module's
/// path before it; the engine adds the task's name and line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WasmError {
    /// The module's file could not be read.
    #[error("cannot read it: {0}")]
    Read(#[source] std::io::Error),
    /// The module is larger than the engine loads.
    #[error("it is larger than {} bytes, {over}", over.value)]
    TooBig {
        /// The limit.
        #[source]
        over: OverLimit,
    },
    /// The bytes are not a valid WebAssembly module (or use a feature the engine leaves off).
    #[error("not a valid WebAssembly module: {0}")]
    Invalid(String),
    /// Compiling took longer than the engine allows.
    #[error("compiling it took too long, {over}")]
    CompileTime {
        /// The limit.
        #[source]
        over: OverLimit,
    },
    /// Too many modules are compiling at once (each on a thread of its own).
    #[error("{0} modules are compiling already; try again")]
    Busy(usize),
    /// The module imports something the engine does not grant.
    #[error(
        "it imports {module}.{name} ({kind}), which the engine does not grant: a module may import only offhost.emit and offhost.error (functions)"
    )]
    Import {
        /// Import module name.
        module: String,
        /// Import name.
        name: String,
        /// What it is (`func (i32) -> i32`, `memory`, ...).
        kind: String,
    },
    /// The module lacks an export of the interface, or has one of another type.
    #[error("it lacks the export {name} ({want}){}", found.as_ref().map(|f| format!("; it exports {name} as {f}")).unwrap_or_default())]
    Export {
        /// The export's name.
        name: &'static str,
        /// What the interface wants.
        want: String,
        /// What the module has under that name, if anything.
        found: Option<String>,
    },
    /// The module speaks another version of the interface.
    #[error(
        "it speaks version {found} of the interface; this engine speaks version {}",
        crate::abi::VERSION
    )]
    Version {
        /// Its answer to `offhost_abi_version`.
        found: i32,
    },
    /// Instantiation failed (its start function trapped, its memory is over the cap, ...).
    #[error("cannot instantiate it: {0}")]
    Instantiate(String),
    /// A call trapped.
    #[error("{call} trapped: {trap}")]
    Trap {
        /// The export called.
        call: &'static str,
        /// The trap, as wasmtime says it.
        trap: String,
    },
    /// A call ran past its deadline and was interrupted.
    #[error("{call} ran past its deadline, {over} (the task's deadline=)")]
    Deadline {
        /// The export called.
        call: &'static str,
        /// The limit.
        #[source]
        over: OverLimit,
    },
    /// The module's memory would grow over its cap, and it trapped for want of it.
    #[error("{call} trapped after its memory was refused growth to {asked} bytes, {over} (the task's memory=)")]
    Memory {
        /// The export called.
        call: &'static str,
        /// The memory it asked for, bytes.
        asked: u64,
        /// The limit.
        #[source]
        over: OverLimit,
    },
    /// A call returned an error code.
    #[error("{call} failed ({code}): {message}")]
    Failed {
        /// The export called.
        call: &'static str,
        /// The negative code it returned.
        code: i32,
        /// What its `error` import said, or that it said nothing.
        message: String,
    },
    /// The module broke the interface (a bad area, an emit out of bounds, an unknown code).
    #[error("{call}: {what}")]
    Misuse {
        /// The export called (or the import it called).
        call: &'static str,
        /// What it did.
        what: String,
    },
}
