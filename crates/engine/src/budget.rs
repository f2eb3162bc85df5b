//! Budgets: what one pipeline may take.
//!
//! [`Budget`] bounds one pipeline: the bytes and buffers of its free lists, its tasks, its
//! worker threads and the tasks woken from outside it (each holds a link to another engine).
//! It is checked when the pipeline is built ([`Pipeline::build_within`]), before anything is
//! allocated, and when it starts. Going over refuses that one pipeline with
//! [`PipelineError::OverBudget`], which carries the [`OverLimit`] (the limit by its id; a front
//! end says how to raise it, `offhost` by its flag); an engine daemon's limits over all
//! its pipelines stand on top of it (`offhost_node::DaemonLimits`). The defaults are ones a
//! laptop survives.
//!
//! [`Pipeline::build_within`]: crate::Pipeline::build_within
//! [`PipelineError::OverBudget`]: crate::PipelineError::OverBudget

use offhost_units::{Limit, OverLimit};

use crate::pool::{pool_bytes, PoolConfig};

/// Default [`Budget::pool_bytes`]: 1 GiB.
pub const DEFAULT_POOL_BYTES: u64 = 1 << 30;
/// Default [`Budget::buffers`].
pub const DEFAULT_BUFFERS: u64 = 1 << 16;
/// Default [`Budget::tasks`].
pub const DEFAULT_TASKS: usize = 1024;
/// Default [`Budget::workers`].
pub const DEFAULT_WORKERS: usize = 64;
/// Default [`Budget::links`].
pub const DEFAULT_LINKS: usize = 64;

/// What one pipeline may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Bytes of all its free lists' buffers, head- and tailroom included, and of the memory
    /// its tasks reserve beyond them (a WebAssembly instance's cap; `Build::reserve_memory`)
    /// (`--max-pool-bytes`).
    pub pool_bytes: u64,
    /// Buffers of all its free lists (`--max-buffers`).
    pub buffers: u64,
    /// Tasks (`--max-tasks`).
    pub tasks: usize,
    /// Worker threads (`--max-workers`).
    pub workers: usize,
    /// Links to other engines that its tasks open (`--max-task-links`): each `engine-out`, and
    /// each `call` with `url=`, opens a link session (a connection) with a thread of its own.
    pub links: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            pool_bytes: DEFAULT_POOL_BYTES,
            buffers: DEFAULT_BUFFERS,
            tasks: DEFAULT_TASKS,
            workers: DEFAULT_WORKERS,
            links: DEFAULT_LINKS,
        }
    }
}

impl Budget {
    /// Checks the free lists of a pipeline; the error is the first one that goes over, what
    /// it asks for and the limit.
    pub(crate) fn check_pools<'a>(
        &self,
        pools: impl IntoIterator<Item = &'a PoolConfig>,
    ) -> Result<(), (&'a PoolConfig, String, OverLimit)> {
        let (mut bytes, mut buffers) = (0u64, 0u64);
        for p in pools {
            let mine = pool_bytes(p);
            bytes = mine.map_or(u64::MAX, |m| bytes.saturating_add(m));
            buffers = buffers.saturating_add(p.count as u64);
            if bytes > self.pool_bytes {
                let what = match mine {
                    Some(m) if m < bytes => format!("with the free lists before it {bytes} bytes"),
                    Some(m) => format!("{m} bytes"),
                    None => "more than 2^64 bytes".into(),
                };
                return Err((
                    p,
                    format!("{} buffers of {} bytes need {what}", p.count, p.size),
                    OverLimit::new(Limit::MaxPoolBytes, self.pool_bytes).asked(bytes),
                ));
            }
            if buffers > self.buffers {
                return Err((
                    p,
                    format!("{} buffers bring the pipeline to {buffers}", p.count),
                    OverLimit::new(Limit::MaxBuffers, self.buffers).asked(buffers),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_past_the_budget_name_the_limit() {
        let b = Budget::default();
        let huge = PoolConfig::new("a", 1_000_000, 1 << 30);
        let (_, e, over) = b.check_pools([&huge]).unwrap_err();
        assert_eq!(over.limit, Limit::MaxPoolBytes, "{e}");
        assert_eq!(over.value, DEFAULT_POOL_BYTES);
        let wraps = PoolConfig::new("b", usize::MAX, usize::MAX);
        let (_, e, over) = b.check_pools([&wraps]).unwrap_err();
        assert!(e.contains("more than 2^64 bytes"), "{e}");
        assert_eq!(over.asked, Some(u64::MAX));
        let many = PoolConfig::new("c", 100_000, 1);
        let (_, _, over) = b.check_pools([&many]).unwrap_err();
        assert_eq!(
            over,
            OverLimit::new(Limit::MaxBuffers, DEFAULT_BUFFERS).asked(100_000u64)
        );
        let ok = PoolConfig::new("d", 16, 4096);
        assert!(b.check_pools([&ok, &ok]).is_ok());
        assert_eq!(pool_bytes(&ok), Some(16 * (64 + 4096 + 64)));
    }
}

#[cfg(test)]
mod pipeline_tests {
    use crate::{Budget, EngineConfig, Files, Pipeline, PipelineError, Registry};
    use offhost_units::{Limit, OverLimit};

    /// Each limit a pipeline goes over is its error's source, named by its id and no flag.
    #[test]
    fn a_pipeline_over_its_budget_carries_the_limit() {
        let budget = Budget {
            tasks: 2,
            ..Budget::default()
        };
        let over = |text: &str, workers: usize| {
            let r = Registry::with_builtins();
            let e = Pipeline::parse(text)
                .unwrap()
                .build_within(&r, &Files::Ambient, &budget)
                .and_then(|b| {
                    b.try_start(&EngineConfig {
                        workers,
                        ..EngineConfig::default()
                    })
                })
                .map(drop)
                .unwrap_err();
            assert!(matches!(e, PipelineError::OverBudget { .. }), "{e}");
            assert!(!e.to_string().contains("--"), "{e}");
            *OverLimit::find(&e).expect("the limit is the source")
        };
        let o = over("fill bytes=1k >a\ndup <a >b >c\nnull <b\nnull <c\n", 1);
        assert_eq!(o, OverLimit::new(Limit::MaxTasks, 2u8).asked(4u8));
        let o = over("fill bytes=1k >a:p(2,1G)\nnull <a\n", 1);
        assert_eq!(o.limit, Limit::MaxPoolBytes);
        let o = over("fill bytes=1k >a\nnull <a\n", 65);
        assert_eq!(o, OverLimit::new(Limit::MaxWorkers, 64u8).asked(65u8));
    }
}
