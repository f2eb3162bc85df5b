//! `offhost bench pingpong --interleave N`: every transport's echo peer runs for the whole size,
//! and the transports take turns, N round trips at a time.
//!
//! On a shared VM the same transport can run twice as fast in one millisecond as in the next
//! (where the hypervisor puts the two vCPUs). `--rounds` restarts every peer for each round,
//! so a round of one transport and the same round of another are tens of milliseconds apart
//! and often see different states. Blocks of a few hundred round trips, back to back with
//! every peer already running, mostly see the same one, so the per-block ratios between two
//! transports (the rows' `vs_raw`) carry far less of the machine's noise.

use anyhow::{Context, Result};
use offhost_bench::samples::Summary;
use offhost_shm::Endpoint;
use std::time::Instant;

use super::channels::Echoed;
use super::pingpong::{
    config, iters_for, round_trip, start_peer, stop_peer, uses_loan, Peer, PingpongArgs, Pooled,
    Transport,
};

/// Untimed round trips before each block: the peer was idle while the others ran (an
/// adaptive one may have gone to sleep), so the block starts once it answers at speed.
const BLOCK_WARMUP: usize = 32;

/// One running peer of the interleaved run.
enum Live {
    Ring {
        name: &'static str,
        ep: Endpoint,
        peer: Peer,
        loan: bool,
        back: Vec<u8>,
    },
    Echoed(Echoed, Vec<u8>),
}

impl Live {
    fn start(
        args: &PingpongArgs,
        t: Transport,
        size: usize,
        cpus: Option<(usize, usize)>,
    ) -> Result<Live> {
        Ok(match t {
            Transport::Shm | Transport::Mem => {
                let (ep, peer) = start_peer(args, t, &config(args), cpus)?;
                if let Some((a, _)) = cpus {
                    offhost_bench::affinity::pin_current_thread(a);
                }
                Live::Ring {
                    name: if t == Transport::Shm { "shm" } else { "mem" },
                    ep,
                    peer,
                    loan: uses_loan(args.path, size),
                    back: vec![0; size],
                }
            }
            other => Live::Echoed(
                Echoed::start(other, args.mode, size, cpus)?,
                Vec::with_capacity(size),
            ),
        })
    }

    fn name(&self) -> &'static str {
        match self {
            Live::Ring { name, .. } => name,
            Live::Echoed(e, _) => e.name(),
        }
    }

    fn round_trip(&mut self, data: &[u8]) -> Result<()> {
        match self {
            Live::Ring { ep, loan, back, .. } => round_trip(ep, data, back, *loan),
            Live::Echoed(e, back) => e.round_trip(data, back),
        }
    }

    /// The bytes of the last echo.
    fn back(&self) -> &[u8] {
        match self {
            Live::Ring { back, .. } | Live::Echoed(_, back) => back,
        }
    }

    fn finish(self) -> Result<()> {
        match self {
            Live::Ring { ep, peer, .. } => {
                drop(ep); // the echo engine sees the hang-up and ends
                stop_peer(peer)
            }
            Live::Echoed(e, _) => e.finish(),
        }
    }
}

/// Measures every transport of `args` at every size, interleaved in blocks of `block` round
/// trips; one entry per transport and size, in the order of the other modes.
pub(super) fn measure(
    args: &PingpongArgs,
    cpus: Option<(usize, usize)>,
    block: usize,
) -> Result<Vec<Pooled>> {
    let mut out = Vec::new();
    for &size in &args.sizes {
        let mut live = Vec::new();
        for &t in &args.transport {
            let started = Live::start(args, t, size, cpus)
                .with_context(|| format!("start the {t:?} echo peer for {size}-byte messages"));
            match started {
                Ok(l) => live.push(l),
                Err(e) => {
                    // The start's failure is the one to report.
                    let _ = finish_all(live);
                    return Err(e);
                }
            }
        }
        let measured = run_blocks(args, size, block, &mut live);
        let names: Vec<&'static str> = live.iter().map(Live::name).collect();
        let finished = finish_all(live);
        let (samples, medians) = measured?;
        finished?;
        for ((t, name), (samples, round_medians)) in args
            .transport
            .iter()
            .zip(names)
            .zip(samples.into_iter().zip(medians))
        {
            let mut row = Pooled::new(args, *t, name, size, samples)?;
            row.round_medians = round_medians;
            out.push(row);
        }
    }
    Ok(out)
}

/// Per transport: the one-way times (ns) and each block's median.
type Measured = (Vec<Vec<f64>>, Vec<Vec<f64>>);

fn run_blocks(
    args: &PingpongArgs,
    size: usize,
    block: usize,
    live: &mut [Live],
) -> Result<Measured> {
    let iters = iters_for(args, size);
    let blocks = iters.div_ceil(block);
    let data: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
    let pb = indicatif::ProgressBar::with_draw_target(
        Some((blocks * live.len()) as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    pb.set_message(format!("pingpong {size} B, interleaved"));
    let mut samples = vec![Vec::with_capacity(iters); live.len()];
    let mut medians = vec![Vec::with_capacity(blocks); live.len()];
    for b in 0..blocks {
        let n = block.min(iters - b * block);
        for (i, l) in live.iter_mut().enumerate() {
            let name = l.name();
            let mut timed = Vec::with_capacity(n);
            for k in 0..BLOCK_WARMUP + n {
                let t0 = Instant::now();
                l.round_trip(&data)
                    .with_context(|| format!("{name} round trip of {size} bytes"))?;
                if k >= BLOCK_WARMUP {
                    timed.push(t0.elapsed().as_nanos() as f64 / 2.0);
                }
            }
            anyhow::ensure!(
                l.back() == data,
                "{name}: echoed bytes differ from the bytes sent"
            );
            medians[i].push(Summary::of(&timed).context("no samples")?.median);
            samples[i].extend(timed);
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    Ok((samples, medians))
}

/// Stops every peer; the first failure, if any.
fn finish_all(live: Vec<Live>) -> Result<()> {
    let mut first = Ok(());
    for l in live {
        if let Err(e) = l.finish() {
            if first.is_ok() {
                first = Err(e);
            }
        }
    }
    first
}
