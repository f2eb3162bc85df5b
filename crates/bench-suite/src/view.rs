//! `bench engine --view`: what a live view costs the engine. The 4-stage chain of `bench
//! engine` (`fill` -> 4 x `count` -> `null`, 64 KiB buffers, --chain-bytes bytes) runs
//! alone and with a view connected, in alternating rounds of one run: the view served as
//! `offhost run --view` serves it (the runner's look ten times a second), a page's push
//! channel read as it comes and its JSON fetched once a second by a client thread.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use offhost_engine::watch::{Look, One};
use offhost_engine::{EngineConfig, Pipeline, Registry};
use serde::Serialize;

use crate::engine::{chain, Options};
use crate::error::{Error, Result};

/// Rounds of each kind (alternating).
const ROUNDS: usize = 5;
/// How long a round lasts at least: several looks of the view (one a second) fall in it.
const ROUND_S: f64 = 3.0;

/// The chain with and without a view.
#[derive(Serialize, Debug)]
pub struct Report {
    /// Bytes through the chain per round.
    pub chain_bytes: u64,
    /// Rounds of each kind.
    pub rounds: usize,
    /// Median GB/s without a view.
    pub alone_gb_per_s: f64,
    /// Median GB/s with a view and a page connected.
    pub viewed_gb_per_s: f64,
    /// viewed / alone (goal: at least 0.99).
    pub viewed_over_alone: f64,
    /// Every round's GB/s without a view.
    pub alone_runs: Vec<f64>,
    /// Every round's GB/s with one.
    pub viewed_runs: Vec<f64>,
    /// Push messages the page received over the viewed rounds.
    pub messages: u64,
}

/// One round: the chain's GB/s, with a view (and a page reading it) when `viewed`.
fn round(text: &str, bytes: u64, cfg: &EngineConfig, viewed: bool) -> Result<(f64, u64)> {
    let one = Arc::new(One::default());
    let view = match viewed {
        true => Some(
            offhost_view::View::start(
                &offhost_view::ViewConfig::new("127.0.0.1:0".parse().expect("an address")),
                one.clone(),
            )
            .map_err(|e| Error::Check(format!("view: {e}")))?,
        ),
        false => None,
    };
    let t0 = Instant::now();
    let run = Pipeline::parse(text)?.start(&Registry::with_builtins(), cfg)?;
    let done = Arc::new(AtomicBool::new(false));
    let page = view.as_ref().map(|v| {
        let (addr, done) = (v.addr(), Arc::clone(&done));
        std::thread::spawn(move || page(addr, &done))
    });
    // As `offhost run` does: a fresh look ten times a second.
    one.set(Look::at(1, None, &run));
    while !run.wait_timeout(Duration::from_millis(100)) {
        if viewed {
            one.set(Look::at(1, None, &run));
        }
    }
    run.wait()?;
    let secs = t0.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    let messages = match page {
        Some(p) => p
            .join()
            .map_err(|_| Error::Check("the page's thread panicked".into()))?,
        None => 0,
    };
    Ok((bytes as f64 / secs / 1e9, messages))
}

/// A page: the push channel read as it comes, the pipeline's JSON fetched once a second;
/// returns the push messages read.
fn page(addr: std::net::SocketAddr, done: &AtomicBool) -> u64 {
    let Ok(mut events) = TcpStream::connect(addr) else {
        return 0;
    };
    let _ = events.set_read_timeout(Some(Duration::from_millis(100)));
    let _ = write!(
        events,
        "GET /api/events?pipeline=1 HTTP/1.1\r\nHost: b\r\n\r\n"
    );
    let (mut messages, mut last_json) = (0u64, Instant::now());
    let mut buf = vec![0u8; 64 * 1024];
    while !done.load(Ordering::Relaxed) {
        if let Ok(n) = events.read(&mut buf) {
            messages += buf[..n].windows(2).filter(|w| w == b"\n\n").count() as u64;
        }
        if last_json.elapsed() >= Duration::from_secs(1) {
            last_json = Instant::now();
            if let Ok(mut s) = TcpStream::connect(addr) {
                let _ = write!(
                    s,
                    "GET /api/pipelines/1 HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n"
                );
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let _ = s.read_to_end(&mut Vec::new());
            }
        }
    }
    messages
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

/// Runs the comparison.
pub fn run(o: &Options, bar: &ProgressBar) -> Result<Report> {
    compare(o, ROUND_S, bar)
}

/// The comparison with rounds of `round_s` seconds at least.
fn compare(o: &Options, round_s: f64, bar: &ProgressBar) -> Result<Report> {
    let cfg = EngineConfig {
        workers: o.workers.max(1),
        pin: false,
        batch: 64,
    };
    // Rounds of `round_s` at least: --chain-bytes times what a first run says.
    let probe = round(
        &chain(4, o.chain_bytes, 64 * 1024, 32),
        o.chain_bytes,
        &cfg,
        false,
    )?
    .0;
    let secs = o.chain_bytes as f64 / (probe * 1e9);
    let bytes = (o.chain_bytes as f64 * (round_s / secs).ceil().max(1.0)) as u64;
    let text = chain(4, bytes, 64 * 1024, 32);
    bar.set_length(2 * ROUNDS as u64);
    let (mut alone, mut viewed, mut messages) = (Vec::new(), Vec::new(), 0);
    for i in 0..2 * ROUNDS {
        let with = i % 2 == 1;
        bar.set_message(if with {
            "4-stage chain, viewed"
        } else {
            "4-stage chain, alone"
        });
        let (gbs, m) = round(&text, bytes, &cfg, with)?;
        messages += m;
        if with { &mut viewed } else { &mut alone }.push(gbs);
        bar.inc(1);
    }
    let (a, v) = (median(&alone), median(&viewed));
    Ok(Report {
        chain_bytes: bytes,
        rounds: ROUNDS,
        alone_gb_per_s: a,
        viewed_gb_per_s: v,
        viewed_over_alone: v / a,
        alone_runs: alone,
        viewed_runs: viewed,
        messages,
    })
}

impl Report {
    /// The figures as text.
    pub fn table(&self) -> String {
        format!(
            "4-stage chain, 64 KiB, {} rounds each, alternating\n\
             alone                   {:.2} GB/s (median)\n\
             with a view and a page  {:.2} GB/s (median; {} push messages read)\n\
             viewed / alone          {:.3}\n",
            self.rounds,
            self.alone_gb_per_s,
            self.viewed_gb_per_s,
            self.messages,
            self.viewed_over_alone
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_run_compares_the_chain_with_and_without_a_view() {
        let o = Options {
            workers: 1,
            hop_buffers: 2000,
            chain_bytes: 64 << 20,
            audio_seconds: 0.5,
            wasm: false,
            wasm_modules: "target/wasm-examples".into(),
            view: true,
            peers: false,
            peer_rounds: 1,
            overlap: false,
            overlap_sizes: vec![],
            overlap_seconds: 0.0,
        };
        let r = compare(&o, 0.3, &ProgressBar::hidden()).unwrap();
        assert_eq!(r.alone_runs.len(), ROUNDS);
        assert!(r.alone_gb_per_s > 0.0 && r.viewed_gb_per_s > 0.0, "{r:?}");
        assert_eq!(r.table().lines().count(), 4);
    }
}
