//! Flags shared by the suite's subcommands.

use std::path::PathBuf;

use anyhow::{anyhow, Context};
use clap::Args;
use offhost_bench::run::Plan;
use offhost_bench::sizes;

/// Flags of `exchange` and `stream`.
#[derive(Args, Debug, Clone)]
pub struct SuiteArgs {
    /// Transports and peers, comma-separated (default: every one available; see --help).
    /// Peers: pipe-raw, unix-raw, tcp-raw, crossbeam.
    #[arg(long, value_delimiter = ',')]
    pub transport: Vec<String>,
    /// Doorbell modes for transports that have them (poll, block, adaptive).
    #[arg(long, value_delimiter = ',')]
    pub mode: Vec<String>,
    /// Message sizes: a list `8,64,4096` and/or ranges of powers of two `4..1M`
    /// (default 4..1M).
    #[arg(long)]
    pub sizes: Option<String>,
    /// Repetition preset: small, quick, normal or long.
    #[arg(long, default_value = "normal")]
    pub reps: String,
    /// Messages in flight per acknowledgement (`stream`: 64; 256 with sizes 8,64 measures the short-message rate).
    #[arg(long)]
    pub window: Option<usize>,
    /// Also measure CPU load with counting tasks on the host and engine cores.
    #[arg(long)]
    pub cpu: bool,
    /// Fit t(n) = t0 + n / r_inf per transport and mode (t0, r_inf, n_1/2).
    #[arg(long)]
    pub fit: bool,
    /// Print JSON (an array of rows; with --fit, an object with `rows` and `fit`).
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV instead of the aligned table.
    #[arg(long)]
    pub csv: bool,
    /// Write throughput and latency plots (SVG) into this folder.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
}

impl SuiteArgs {
    /// The sizes asked for, or `default` when none.
    pub fn sizes_or(&self, default: &str) -> anyhow::Result<Vec<usize>> {
        let text = self.sizes.as_deref().unwrap_or(default);
        sizes::parse_sizes(text).with_context(|| format!("--sizes {text:?}"))
    }

    /// The repetition plan, with the CPU pass if asked for.
    pub fn plan(&self) -> anyhow::Result<Plan> {
        let mut p = Plan::preset(&self.reps).ok_or_else(|| {
            anyhow!(
                "--reps {:?}: expected small, quick, normal or long",
                self.reps
            )
        })?;
        if self.cpu {
            p.cpu_time = Some(p.rep_time * 10);
        }
        Ok(p)
    }
}
