//! `engine --wasm`: WebAssembly modules against the built-ins they stand for, in one run.
//!
//! For 64 B buffers (`--hop-buffers` of them) and 64 KiB buffers (`--chain-bytes` bytes),
//! `fill` (which writes every byte, as a device would) puts the stream through one task into
//! `null`: the built-in `count` (a pass-through, by reference) and the pass-through module
//! (`pass.wasm`), the built-in `mulaw` and the mu-law module (`mulaw.wasm`), both from
//! `examples/wasm/build.sh`. The same pipeline without the task is the baseline. Each row is
//! the best of three runs:
//!
//! - `ns_per_buffer`: the time the task adds per buffer, (t - t_baseline) / buffers;
//! - `mb_per_s`: the pipeline's throughput with the task, bytes in / t (MB = 10^6 bytes);
//! - `vs_native` (module rows): the module's `mb_per_s` over the built-in's, and
//!   `overhead_ns`: its `ns_per_buffer` less the built-in's.
//!
//! A module's start is in each run (compiled once per process, then taken from the cache by
//! content; instantiated and started per run, which the mu-law module's 64 Ki-entry table
//! makes about a millisecond).

use indicatif::ProgressBar;
use offhost_engine::{EngineConfig, Registry};
use serde::Serialize;

use crate::engine::{best_of, time_pipeline, Options};
use crate::error::{Error, Result};

/// One task at one buffer size.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Row {
    /// What the task does: `pass` or `mulaw`.
    pub task: String,
    /// Buffer size, bytes.
    pub size: usize,
    /// `native` (the built-in) or `wasm` (the module).
    #[serde(rename = "impl")]
    pub imp: String,
    /// Buffers through the task.
    pub buffers: u64,
    /// Time the task adds per buffer, ns.
    pub ns_per_buffer: f64,
    /// The pipeline's throughput with the task, MB/s of input.
    pub mb_per_s: f64,
    /// A module's `mb_per_s` over the built-in's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_native: Option<f64>,
    /// A module's `ns_per_buffer` less the built-in's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead_ns: Option<f64>,
}

/// `fill` of `bytes` in buffers of `size` through `task` (none: the baseline) into `null`;
/// a task that allocates (all but `count`) gets a free list like the source's.
fn pipeline(task: Option<&str>, bytes: u64, size: usize) -> String {
    let count = if size <= 4096 { 256 } else { 32 };
    let src = format!("fill bytes={bytes} >a:src({count},{size})\n");
    match task {
        None => src + "null <a\n",
        Some("count") => format!("{src}count <a >b\nnull <b\n"),
        Some(t) => format!("{src}{t} <a >b:dst({count},{size})\nnull <b\n"),
    }
}

/// Runs the comparison; `bar` shows its steps.
pub fn run(o: &Options, bar: &ProgressBar) -> Result<Vec<Row>> {
    let mut reg = Registry::with_builtins();
    register(&mut reg)?;
    let module = |name: &str| {
        let p = o.wasm_modules.join(name);
        match p.is_file() {
            true => Ok(p.display().to_string()),
            false => Err(Error::Invalid(format!(
                "no {} (build the example modules with examples/wasm/build.sh, or give --wasm-modules DIR)",
                p.display()
            ))),
        }
    };
    let tasks = [
        (
            "pass",
            "count".to_string(),
            format!("wasm module={}", module("pass.wasm")?),
        ),
        (
            "mulaw",
            "mulaw".to_string(),
            format!("wasm module={}", module("mulaw.wasm")?),
        ),
    ];
    let cfg = EngineConfig {
        workers: o.workers.max(1),
        pin: false,
        batch: 64,
    };
    let sizes = [(64usize, o.hop_buffers * 64), (64 << 10, o.chain_bytes)];
    bar.set_length((sizes.len() * (1 + 2 * tasks.len())) as u64);
    let mut rows = Vec::new();
    for (size, bytes) in sizes {
        let bytes = bytes / size as u64 * size as u64;
        let buffers = bytes / size as u64;
        if buffers == 0 {
            return Err(Error::Invalid(format!("no {size}-byte buffer to send")));
        }
        bar.set_message(format!("{size} B: baseline"));
        let base = best_of(3, || {
            time_pipeline(&pipeline(None, bytes, size), &reg, &cfg)
        })?;
        bar.inc(1);
        for (task, native, wasm) in &tasks {
            let mut native_row: Option<Row> = None;
            for (imp, line) in [("native", native), ("wasm", wasm)] {
                bar.set_message(format!("{size} B: {task}, {imp}"));
                let t = best_of(3, || {
                    time_pipeline(&pipeline(Some(line), bytes, size), &reg, &cfg)
                })?;
                bar.inc(1);
                let mut row = Row {
                    task: task.to_string(),
                    size,
                    imp: imp.into(),
                    buffers,
                    ns_per_buffer: ((t - base) / buffers as f64 * 1e9).max(0.0),
                    mb_per_s: bytes as f64 / t / 1e6,
                    vs_native: None,
                    overhead_ns: None,
                };
                if let Some(n) = &native_row {
                    row.vs_native = Some(row.mb_per_s / n.mb_per_s);
                    row.overhead_ns = Some(row.ns_per_buffer - n.ns_per_buffer);
                }
                native_row.get_or_insert_with(|| row.clone());
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

#[cfg(feature = "wasm")]
fn register(r: &mut Registry) -> Result<()> {
    offhost_wasm::register(r);
    Ok(())
}

#[cfg(not(feature = "wasm"))]
fn register(_: &mut Registry) -> Result<()> {
    Err(Error::Invalid(
        "this build has no wasm task (cargo feature wasm of offhost-bench-suite)".into(),
    ))
}

/// The rows as text.
pub fn table(rows: &Vec<Row>) -> String {
    let mut s = format!(
        "{:<6} {:>6} {:<6} {:>12} {:>10} {:>9} {:>11}\n",
        "task", "size", "impl", "ns/buffer", "MB/s", "vs native", "overhead ns"
    );
    for r in rows {
        let opt = |v: Option<f64>, p: usize| v.map_or(String::new(), |v| format!("{v:.p$}"));
        s += &format!(
            "{:<6} {:>6} {:<6} {:>12.1} {:>10.0} {:>9} {:>11}\n",
            r.task,
            r.size,
            r.imp,
            r.ns_per_buffer,
            r.mb_per_s,
            opt(r.vs_native, 2),
            opt(r.overhead_ns, 1)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short run of every row, on the example modules (`examples/wasm/build.sh`;
    /// `scripts/test.d/15-wasm.sh` builds them and runs this): each row measured, each
    /// module's row beside its built-in's.
    #[test]
    #[ignore = "needs examples/wasm/build.sh's modules (scripts/test.d/15-wasm.sh runs it)"]
    fn a_small_run_measures_every_row() {
        let dir = std::env::var_os("OFFHOST_WASM_EXAMPLES").map_or_else(
            || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/wasm-examples"),
            Into::into,
        );
        let o = Options {
            workers: 1,
            hop_buffers: 2000,
            chain_bytes: 4 << 20,
            audio_seconds: 0.0,
            wasm: true,
            wasm_modules: dir,
            view: false,
            peers: false,
            peer_rounds: 1,
            overlap: false,
            overlap_sizes: vec![],
            overlap_seconds: 0.0,
        };
        let rows = run(&o, &ProgressBar::hidden()).unwrap();
        let keys: Vec<_> = rows
            .iter()
            .map(|r| (r.task.as_str(), r.size, r.imp.as_str()))
            .collect();
        assert_eq!(keys.len(), 8);
        for (task, size) in [
            ("pass", 64),
            ("mulaw", 64),
            ("pass", 65536),
            ("mulaw", 65536),
        ] {
            assert!(keys.contains(&(task, size, "native")) && keys.contains(&(task, size, "wasm")));
        }
        for r in &rows {
            assert!(r.mb_per_s > 0.0 && r.buffers > 0, "{r:?}");
            assert_eq!(r.vs_native.is_some(), r.imp == "wasm", "{r:?}");
        }
        let v = serde_json::to_value(&rows).unwrap();
        assert_eq!(v[0]["impl"], "native");
        assert_eq!(table(&rows).lines().count(), 9);
    }

    #[test]
    fn pipelines_put_the_task_between_source_and_sink() {
        assert_eq!(
            pipeline(Some("count"), 6400, 64),
            "fill bytes=6400 >a:src(256,64)\ncount <a >b\nnull <b\n"
        );
        assert_eq!(
            pipeline(Some("mulaw"), 6400, 64),
            "fill bytes=6400 >a:src(256,64)\nmulaw <a >b:dst(256,64)\nnull <b\n"
        );
        assert_eq!(
            pipeline(None, 65536, 65536),
            "fill bytes=65536 >a:src(32,65536)\nnull <a\n"
        );
    }

    #[test]
    fn missing_modules_are_named() {
        let o = Options {
            workers: 1,
            hop_buffers: 100,
            chain_bytes: 1 << 20,
            audio_seconds: 0.0,
            wasm: true,
            wasm_modules: "/nonexistent".into(),
            view: false,
            peers: false,
            peer_rounds: 1,
            overlap: false,
            overlap_sizes: vec![],
            overlap_seconds: 0.0,
        };
        let e = run(&o, &ProgressBar::hidden()).unwrap_err().to_string();
        assert!(
            e.contains("/nonexistent/pass.wasm") || e.contains("no wasm task"),
            "{e}"
        );
    }
}
