//! What an engine daemon may take over all the pipelines it runs, on top of each pipeline's
//! [`Budget`]. Going over refuses that one pipeline with an error that names the limit; the
//! daemon's other pipelines and hosts are served. The defaults are ones a laptop survives.

use std::time::Duration;

use offhost_engine::Budget;

/// Default [`DaemonLimits::pipelines`].
pub const DEFAULT_PIPELINES: usize = 64;
/// Default [`DaemonLimits::pool_bytes`]: 2 GiB.
pub const DEFAULT_TOTAL_POOL_BYTES: u64 = 2 << 30;
/// Default [`DaemonLimits::text_bytes`]: 1 MiB.
pub const DEFAULT_TEXT_BYTES: usize = 1 << 20;

/// Default [`DaemonLimits::module_bytes`]: 64 MiB.
pub const DEFAULT_MODULE_BYTES: u64 = 64 << 20;
/// Default [`DaemonLimits::pipeline_time`]: a day.
pub const DEFAULT_PIPELINE_TIME: Duration = Duration::from_secs(24 * 3600);
/// Default [`DaemonLimits::pipeline_bytes`]: 1 TiB.
pub const DEFAULT_PIPELINE_BYTES: u64 = 1 << 40;
/// Default [`DaemonLimits::orphan_grace`]: five seconds.
pub const DEFAULT_ORPHAN_GRACE: Duration = Duration::from_secs(5);

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
    /// Bytes of the named modules one session holds, sent beside its pipelines
    /// (`--max-module-bytes`): each module's and all of the session's together.
    pub module_bytes: u64,
    /// How long one pipeline may run before it is ended by force (`--max-pipeline-time`);
    /// also the longest lifetime of a detached one. `None`: for ever.
    pub pipeline_time: Option<Duration>,
    /// Bytes that may enter one pipeline from its sources before it is ended by force
    /// (`--max-pipeline-bytes`); `None`: no limit.
    pub pipeline_bytes: Option<u64>,
    /// How long a pipeline whose submitter has gone keeps running before it is stopped
    /// (`--orphan-grace`); see [`crate::daemon::keep`].
    pub orphan_grace: Duration,
}

impl Default for DaemonLimits {
    fn default() -> Self {
        DaemonLimits {
            pipeline: Budget::default(),
            pipelines: DEFAULT_PIPELINES,
            pool_bytes: DEFAULT_TOTAL_POOL_BYTES,
            text_bytes: DEFAULT_TEXT_BYTES,
            module_bytes: DEFAULT_MODULE_BYTES,
            pipeline_time: Some(DEFAULT_PIPELINE_TIME),
            pipeline_bytes: Some(DEFAULT_PIPELINE_BYTES),
            orphan_grace: DEFAULT_ORPHAN_GRACE,
        }
    }
}
