//! `offhost bench floors`.

use anyhow::Result;
use offhost_bench::floors::{measure, Floors, Plan};

/// Arguments of `offhost bench floors`.
#[derive(clap::Args, Debug)]
pub struct FloorsArgs {
    /// Timed cache-line round trips (the futex ping-pong does a tenth as many).
    #[arg(long, default_value_t = 100_000)]
    samples: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// Measures the floors with progress on stderr.
pub fn measure_with_progress(samples: usize) -> Floors {
    let pb = super::spinner();
    let floors = measure(
        Plan {
            warmup: samples / 10,
            samples,
        },
        &mut |phase| pb.set_message(format!("floors: {phase}")),
    );
    pb.finish_and_clear();
    floors
}

/// Runs `offhost bench floors`.
pub fn run(args: FloorsArgs) -> Result<()> {
    let f = measure_with_progress(args.samples.max(10));
    if args.json {
        println!("{}", serde_json::to_string(&f)?);
        return Ok(());
    }
    let cpus = f
        .cpus
        .map_or("unpinned".to_owned(), |(a, b)| format!("CPUs {a} and {b}"));
    println!("floor                     median        p99");
    println!(
        "cache-line one way   {:>10.0} ns {:>10.0} ns",
        f.cacheline_ns, f.cacheline_ns_p99
    );
    println!(
        "futex one way        {:>10.1} us {:>10.1} us",
        f.futex_ns / 1e3,
        f.futex_ns_p99 / 1e3
    );
    println!("memcpy 1 MiB         {:>10.2} GB/s", f.memcpy_gb_per_s);
    println!("({cpus})");
    Ok(())
}
