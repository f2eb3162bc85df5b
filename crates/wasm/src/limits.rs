//! The bounds on a module: its size, its compile time, its memory, its calls' deadline.

use std::time::Duration;

use offhost_units::{Limit, OverLimit};

/// Most bytes of a module the engine loads (16 MiB): checked against the file's length before
/// anything is read, and again while reading.
pub const MODULE_BYTES: u64 = 16 << 20;

/// How long compiling one module may take (10 s; cranelift compiles a 16 MiB module in less
/// on one core).
pub const COMPILE_TIME: Duration = Duration::from_secs(10);

/// Modules compiling at once, each on a thread of its own; a compile past its time is left
/// to end on its thread, and counts here until it has.
pub const COMPILES: usize = 4;

/// An instance's memory when `memory=` is not given (16 MiB).
pub const DEFAULT_MEMORY: u64 = 16 << 20;

/// The most `memory=` may be: all a 32-bit memory addresses (4 GiB).
pub const MAX_MEMORY: u64 = 4 << 30;

/// A call's deadline when `deadline=` is not given.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(1);

/// Elements of one table (functions a module calls indirectly); each is a pointer.
pub const TABLE_ELEMENTS: usize = 1 << 16;

/// The bounds of one task's module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of the module's file.
    pub module_bytes: u64,
    /// How long compiling it may take.
    pub compile_time: Duration,
    /// Bytes of its linear memory.
    pub memory: u64,
    /// How long one call may run.
    pub deadline: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            module_bytes: MODULE_BYTES,
            compile_time: COMPILE_TIME,
            memory: DEFAULT_MEMORY,
            deadline: DEFAULT_DEADLINE,
        }
    }
}

/// The store's resource limiter: one memory of at most `cap` bytes, one instance, a few
/// tables of bounded length. Remembers the growth it refused, for the error.
#[derive(Debug)]
pub(crate) struct MemoryCap {
    pub(crate) cap: u64,
    /// Bytes a refused growth asked for.
    pub(crate) refused: Option<u64>,
}

impl MemoryCap {
    pub(crate) fn new(cap: u64) -> MemoryCap {
        MemoryCap { cap, refused: None }
    }

    /// The limit that was hit.
    pub(crate) fn over(&self) -> OverLimit {
        let o = OverLimit::new(Limit::WasmMemory, self.cap);
        match self.refused {
            Some(asked) => o.asked(asked),
            None => o,
        }
    }
}

impl wasmtime::ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let ok = desired as u64 <= self.cap;
        if !ok {
            self.refused = Some(desired as u64);
        }
        Ok(ok)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        1
    }

    fn tables(&self) -> usize {
        4
    }

    fn memories(&self) -> usize {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    #[test]
    fn growth_past_the_cap_is_refused_and_remembered() {
        let mut m = MemoryCap::new(1 << 20);
        assert!(m.memory_growing(0, 1 << 20, None).unwrap());
        assert_eq!(m.refused, None);
        assert!(!m.memory_growing(1 << 20, (1 << 20) + 65536, None).unwrap());
        assert_eq!(m.refused, Some((1 << 20) + 65536));
        let o = m.over();
        assert_eq!(o.limit, Limit::WasmMemory);
        assert_eq!((o.value, o.asked), (1 << 20, Some((1 << 20) + 65536)));
        assert!(!m.table_growing(0, TABLE_ELEMENTS + 1, None).unwrap());
    }
}
