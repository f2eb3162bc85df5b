//! The process's one wasmtime engine and its one epoch ticker thread.
//!
//! Every call into a module runs under a deadline by epoch interruption: the store's deadline
//! is set a number of ticks past the engine's epoch before each call, and compiled code
//! checks the epoch at function entries and loop back-edges. One thread advances the epoch
//! every [`TICK`] while any instance lives, and waits (no wake-ups) while none does. A
//! deadline is kept to within one tick: a call is interrupted between `deadline` and
//! `deadline + TICK` after it began.

use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

use wasmtime::{Config, Engine, OptLevel};

/// The epoch's period.
pub const TICK: Duration = Duration::from_millis(5);

/// The engine and the ticker's count of live instances.
struct Shared {
    engine: Engine,
    live: Mutex<usize>,
    wake: Condvar,
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<&'static Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        let mut c = Config::new();
        c.epoch_interruption(true)
            .cranelift_opt_level(OptLevel::Speed)
            // What a filter needs; threads, GC and components are not even compiled in.
            .wasm_simd(true)
            .wasm_bulk_memory(true)
            .wasm_multi_value(true)
            .wasm_memory64(false);
        let engine = Engine::new(&c).expect("the engine's configuration is valid");
        let s: &'static Shared = Box::leak(Box::new(Shared {
            engine,
            live: Mutex::new(0),
            wake: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || tick(s))
            .expect("spawn the wasm epoch thread");
        s
    })
}

fn tick(s: &'static Shared) {
    loop {
        {
            let mut live = s.live.lock().unwrap_or_else(|p| p.into_inner());
            while *live == 0 {
                live = s.wake.wait(live).unwrap_or_else(|p| p.into_inner());
            }
        }
        std::thread::sleep(TICK);
        s.engine.increment_epoch();
    }
}

/// The process's engine.
pub(crate) fn engine() -> &'static Engine {
    &shared().engine
}

/// Epoch ticks for `deadline`: enough that the call has at least `deadline`.
pub(crate) fn ticks(deadline: Duration) -> u64 {
    (deadline.as_nanos() / TICK.as_nanos()) as u64 + 1
}

/// Keeps the ticker running while it lives (one per instance).
#[derive(Debug)]
pub(crate) struct Live(());

impl Live {
    pub(crate) fn new() -> Live {
        let s = shared();
        *s.live.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        s.wake.notify_one();
        Live(())
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        *shared().live.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_has_at_least_its_ticks() {
        assert_eq!(ticks(Duration::ZERO), 1);
        assert_eq!(ticks(TICK), 2);
        assert_eq!(ticks(Duration::from_secs(1)), 201);
    }
}
