//! `pingpong` with `interleave`: every transport's echo runs for the whole size, and the
//! transports take turns, N round trips at a time.
//!
//! On a shared VM the same transport can run twice as fast in one millisecond as in the next
//! (where the hypervisor puts the two vCPUs). Rounds restart every echo for each round, so a
//! round of one transport and the same round of another are tens of milliseconds apart and
//! often see different states. Blocks of a few hundred round trips, back to back with every
//! echo already running, mostly see the same one, so the per-block ratios between two
//! transports (the rows' `vs_raw`) carry far less of the machine's noise.

use std::time::Instant;

use indicatif::ProgressBar;

use super::{message, Options, PingPeer, Pooled};
use crate::error::{check, Context as _, Error, Result};
use crate::tls::Pki;
use offhost_bench::stats::median;

/// Untimed round trips before each block: the echo was idle while the others ran (an adaptive
/// one may have gone to sleep), so the block starts once it answers at speed.
const BLOCK_WARMUP: usize = 32;

/// Measures every transport of `o` at every size, interleaved in blocks of `block` round
/// trips; one entry per transport and size, in the order of the rounds.
pub(super) fn measure(
    o: &Options,
    cpus: Option<(usize, usize)>,
    block: usize,
    pki: Option<&Pki>,
    bar: &ProgressBar,
    notes: &mut Vec<String>,
) -> Result<Vec<Pooled>> {
    let mut out = Vec::new();
    for &size in &o.sizes {
        let mut live = Vec::new();
        for &t in &o.transports {
            match PingPeer::start(o, t, size, cpus, pki)
                .with_context(|| format!("start the {t} echo for {size}-byte messages"))
            {
                Ok(p) => live.push(p),
                Err(e) => {
                    // The start's failure is the one to report.
                    let _ = finish_all(live, notes);
                    return Err(e);
                }
            }
        }
        let measured = run_blocks(o, size, block, &mut live, bar);
        let who: Vec<_> = live
            .iter()
            .map(|p| (p.transport(), p.placement()))
            .collect();
        let finished = finish_all(live, notes);
        let (samples, medians, wakeups) = measured?;
        finished?;
        for ((((transport, placement), samples), round_medians), wakeups) in
            who.into_iter().zip(samples).zip(medians).zip(wakeups)
        {
            out.push(Pooled {
                transport,
                placement,
                size,
                samples,
                round_medians,
                cpu_idle_pct: None,
                wakeups,
            });
        }
    }
    Ok(out)
}

/// Per transport: the one-way times (ns), each block's median, and the wake-ups counted
/// over its timed round trips.
type Measured = (Vec<Vec<f64>>, Vec<Vec<f64>>, Vec<super::Wakeups>);

fn run_blocks(
    o: &Options,
    size: usize,
    block: usize,
    live: &mut [PingPeer],
    bar: &ProgressBar,
) -> Result<Measured> {
    let iters = o.iters_for(size);
    let blocks = iters.div_ceil(block);
    let data = message(size);
    bar.set_length((blocks * live.len()) as u64);
    bar.set_position(0);
    bar.set_message(format!("pingpong {size} B, interleaved"));
    let mut samples = vec![Vec::with_capacity(iters); live.len()];
    let mut medians = vec![Vec::with_capacity(blocks); live.len()];
    let mut wakeups = vec![Some((0, 0)); live.len()];
    let mut back = Vec::with_capacity(size);
    for b in 0..blocks {
        let n = block.min(iters - b * block);
        for (i, p) in live.iter_mut().enumerate() {
            let name = p.transport();
            let mut timed = Vec::with_capacity(n);
            let mut before = None;
            for k in 0..BLOCK_WARMUP + n {
                if k == BLOCK_WARMUP {
                    before = p.switches();
                }
                let t0 = Instant::now();
                p.round_trip(&data, &mut back)
                    .with_context(|| format!("{name} round trip of {size} bytes"))?;
                if k >= BLOCK_WARMUP {
                    timed.push(t0.elapsed().as_nanos() as f64 / 2.0);
                }
            }
            check(back == data, || {
                format!("{name}: echoed bytes differ from the bytes sent")
            })?;
            let counted = before
                .zip(p.switches())
                .map(|(b, a)| (a.saturating_sub(b), 2 * n as u64));
            wakeups[i] = super::add_wakeups(wakeups[i], counted);
            medians[i].push(median(&timed).ok_or_else(|| Error::Check("no samples".into()))?);
            samples[i].extend(timed);
            bar.inc(1);
        }
    }
    Ok((samples, medians, wakeups))
}

/// Stops every echo; the first failure, if any.
fn finish_all(live: Vec<PingPeer>, notes: &mut Vec<String>) -> Result<()> {
    let mut first = Ok(());
    for p in live {
        match p.finish() {
            Ok(note) => notes.extend(note),
            Err(e) if first.is_ok() => first = Err(e),
            Err(_) => {}
        }
    }
    first
}
