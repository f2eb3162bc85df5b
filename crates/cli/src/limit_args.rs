//! The flags that raise (or lower) the servers' budgets: one group per layer, each turned into
//! that layer's limits type. Every error a limit produces names its flag here.

use std::time::Duration;

use anyhow::{anyhow, Result};

use offhost_units::{parse_seconds as seconds, parse_size as size};

/// Budgets of a link server (`offhost engine`, `offhost echo`); see `offhost_link::Limits`.
#[derive(clap::Args, Debug, Clone)]
pub struct LinkLimitArgs {
    /// Sessions (hosts) served at once; more are refused.
    #[arg(long, default_value_t = offhost_link::DEFAULT_MAX_SESSIONS)]
    max_sessions: usize,
    /// Channels one session may have open; more are refused.
    #[arg(long, default_value_t = offhost_proto::DEFAULT_MAX_CHANNELS)]
    max_channels: u32,
    /// Largest receive window (and message) of one channel a host opens.
    #[arg(long, default_value = "16M", value_parser = size)]
    max_channel_window: u64,
    /// Largest sum of the receive windows of one session's channels.
    #[arg(long, default_value = "32M", value_parser = size)]
    max_session_window: u64,
    /// Threads run for hosts at once (a session or channel past it is refused).
    #[arg(long, default_value_t = offhost_link::DEFAULT_MAX_THREADS)]
    max_threads: usize,
    /// Bytes held for a host that reads nothing before its session ends.
    #[arg(long, default_value = "256M", value_parser = size)]
    max_unsent: u64,
    /// Seconds a write to a host may make no progress before its session ends (0: for ever).
    #[arg(long, default_value = "60", value_parser = seconds)]
    write_stall: Duration,
    /// Seconds a shared-memory or TLS handshake may take.
    #[arg(long, default_value = "5", value_parser = seconds)]
    handshake_timeout: Duration,
    /// Connections whose shm or TLS handshake has not ended, all together; past it the
    /// oldest silent one is closed to make way.
    #[arg(long, default_value_t = offhost_link::DEFAULT_MAX_HANDSHAKES)]
    max_handshakes: usize,
    /// The same from one IP address (or, on shm, one uid).
    #[arg(long, default_value_t = offhost_link::DEFAULT_MAX_HANDSHAKES_PER_SOURCE)]
    max_handshakes_per_source: usize,
    /// Seconds a peer (host or engine) may send nothing, not even a heartbeat, before its
    /// session ends as stopped, frozen or cut off (0: never).
    #[arg(long, default_value = "10", value_parser = seconds)]
    peer_deadline: Duration,
    /// Coalesce wake-ups on shm: (interrupt coalescing): this side's waits sleep until
    /// RECORDS records or DELAY has passed with one there (default delay 1ms).
    #[arg(long, value_name = "RECORDS[,DELAY]")]
    event_limit: Option<offhost_shm::EventLimit>,
}

impl LinkLimitArgs {
    /// The limits these flags describe.
    pub fn limits(&self) -> Result<offhost_link::Limits> {
        let window = u32::try_from(self.max_channel_window)
            .map_err(|_| anyhow!("--max-channel-window: at most 4 GiB - 1"))?;
        Ok(offhost_link::Limits {
            proto: offhost_proto::Limits {
                max_channels: self.max_channels,
                max_channel_window: window,
                max_session_window: self.max_session_window,
            },
            max_sessions: self.max_sessions,
            max_threads: self.max_threads,
            max_unsent: self.max_unsent,
            write_stall: (!self.write_stall.is_zero()).then_some(self.write_stall),
            handshake_timeout: self.handshake_timeout,
            max_handshakes: self.max_handshakes,
            max_handshakes_per_source: self.max_handshakes_per_source,
            peer_deadline: offhost_link::peer_deadline_flag(self.peer_deadline)
                .map_err(anyhow::Error::msg)?,
            event_limit: self.event_limit,
        })
    }
}

/// Budget of one pipeline (`offhost run`, `offhost engine`); see `offhost_engine::Budget`.
#[derive(clap::Args, Debug, Clone)]
pub struct BudgetArgs {
    /// Bytes of a pipeline's free lists, all together.
    #[arg(long, default_value = "1G", value_parser = size)]
    max_pool_bytes: u64,
    /// Buffers of a pipeline's free lists, all together.
    #[arg(long, default_value_t = offhost_engine::DEFAULT_BUFFERS)]
    max_buffers: u64,
    /// Tasks of a pipeline.
    #[arg(long, default_value_t = offhost_engine::DEFAULT_TASKS)]
    max_tasks: usize,
    /// Worker threads of a pipeline.
    #[arg(long, default_value_t = offhost_engine::DEFAULT_WORKERS)]
    max_workers: usize,
    /// Links to other engines a pipeline's tasks open (each engine-out, each call with url=).
    #[arg(long, default_value_t = offhost_engine::DEFAULT_LINKS)]
    max_task_links: usize,
}

impl BudgetArgs {
    /// The budget these flags describe.
    pub fn budget(&self) -> offhost_engine::Budget {
        offhost_engine::Budget {
            pool_bytes: self.max_pool_bytes,
            buffers: self.max_buffers,
            tasks: self.max_tasks,
            workers: self.max_workers,
            links: self.max_task_links,
        }
    }
}

/// Limits of the engine daemon over all its pipelines; see `offhost_node::DaemonLimits`.
#[derive(clap::Args, Debug, Clone)]
pub struct DaemonLimitArgs {
    #[command(flatten)]
    budget: BudgetArgs,
    /// Pipelines running at once.
    #[arg(long, default_value_t = offhost_node::DEFAULT_PIPELINES)]
    max_pipelines: usize,
    /// Bytes of the free lists of all running pipelines together, and of ended ones still
    /// held (not asked about yet, or with outputs a host has not read).
    #[arg(long, default_value = "2G", value_parser = size)]
    max_total_pool_bytes: u64,
    /// Bytes of one pipeline text a host submits.
    #[arg(long, default_value = "1M", value_parser = size)]
    max_text_bytes: u64,
    /// Bytes of the modules one session sends with its pipelines (submit --module).
    #[arg(long, default_value = "64M", value_parser = size)]
    max_module_bytes: u64,
    /// Seconds one pipeline may run (0: for ever); also the longest lifetime of a detached one.
    #[arg(long, default_value = "86400", value_parser = seconds)]
    max_pipeline_time: Duration,
    /// Bytes that may enter one pipeline from its sources (0: no limit).
    #[arg(long, default_value = "1T", value_parser = size)]
    max_pipeline_bytes: u64,
    /// Seconds a pipeline whose submitter has gone runs on before it is stopped.
    #[arg(long, default_value = "5", value_parser = seconds)]
    orphan_grace: Duration,
}

impl DaemonLimitArgs {
    /// The limits these flags describe.
    pub fn limits(&self) -> offhost_node::DaemonLimits {
        offhost_node::DaemonLimits {
            pipeline: self.budget.budget(),
            pipelines: self.max_pipelines,
            pool_bytes: self.max_total_pool_bytes,
            text_bytes: usize::try_from(self.max_text_bytes).unwrap_or(usize::MAX),
            module_bytes: self.max_module_bytes,
            pipeline_time: Some(self.max_pipeline_time).filter(|t| !t.is_zero()),
            pipeline_bytes: Some(self.max_pipeline_bytes).filter(|&b| b > 0),
            orphan_grace: self.orphan_grace,
        }
    }
}

/// Limits of the NBD server; see `offhost_nbd::Limits`.
#[derive(clap::Args, Debug, Clone)]
pub struct NbdLimitArgs {
    /// Connections served at once; more are refused.
    #[arg(long, default_value_t = offhost_nbd::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// Payload bytes of one connection's requests in flight (a larger request runs alone).
    #[arg(long, default_value = "64M", value_parser = size)]
    max_in_flight: u64,
    /// Seconds the whole handshake may take.
    #[arg(long, default_value = "10", value_parser = seconds)]
    handshake_timeout: Duration,
    /// Seconds a reply may wait to be written, or a request's bytes to arrive.
    #[arg(long, default_value = "30", value_parser = seconds)]
    io_timeout: Duration,
    /// Seconds a connection may send no request before it is dropped (0: for ever).
    #[arg(long, default_value = "3600", value_parser = seconds)]
    idle_timeout: Duration,
    /// Connections not yet past TLS (or the handshake, without TLS), all together; past it the
    /// oldest silent one is closed to make way. They do not count against --max-connections.
    #[arg(long, default_value_t = offhost_nbd::DEFAULT_MAX_UNPROVEN)]
    max_unproven: usize,
    /// The same from one IP address (or, on a unix socket, one uid).
    #[arg(long, default_value_t = offhost_nbd::DEFAULT_MAX_UNPROVEN_PER_SOURCE)]
    max_unproven_per_source: usize,
}

impl NbdLimitArgs {
    /// The limits these flags describe.
    pub fn limits(&self) -> offhost_nbd::Limits {
        offhost_nbd::Limits {
            max_connections: self.max_connections,
            max_in_flight: self.max_in_flight,
            handshake_timeout: self.handshake_timeout,
            io_timeout: self.io_timeout,
            idle_timeout: (!self.idle_timeout.is_zero()).then_some(self.idle_timeout),
            max_unproven: self.max_unproven,
            max_unproven_per_source: self.max_unproven_per_source,
        }
    }
}
