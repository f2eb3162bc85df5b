//! What an engine daemon may take over all the pipelines it runs, on top of each pipeline's
//! [`Budget`]. Going over refuses that one pipeline with an error that names the limit; the
//! daemon's other pipelines and hosts are served. The defaults are ones a laptop survives.

use offhost_engine::Budget;

/// Default [`DaemonLimits::pipelines`].
pub const DEFAULT_PIPELINES: usize = 64;
/// Default [`DaemonLimits::pool_bytes`]: 2 GiB.
pub const DEFAULT_TOTAL_POOL_BYTES: u64 = 2 << 30;
/// Default [`DaemonLimits::text_bytes`]: 1 MiB.
pub const DEFAULT_TEXT_BYTES: usize = 1 << 20;

/// What an engine daemon may take over all the pipelines it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DaemonLimits {
    /// Each pipeline's budget.
    pub pipeline: Budget,
    /// Pipelines running at once (`--max-pipelines`).
    pub pipelines: usize,
    /// Bytes of the free lists of all running pipelines together, with those of ended
    /// pipelines that are still held (unasked, or with outputs a host has not read yet)
    /// (`--max-total-pool-bytes`).
    pub pool_bytes: u64,
    /// Bytes of one pipeline text a host submits (`--max-text-bytes`).
    pub text_bytes: usize,
}

impl Default for DaemonLimits {
    fn default() -> Self {
        DaemonLimits {
            pipeline: Budget::default(),
            pipelines: DEFAULT_PIPELINES,
            pool_bytes: DEFAULT_TOTAL_POOL_BYTES,
            text_bytes: DEFAULT_TEXT_BYTES,
        }
    }
}
