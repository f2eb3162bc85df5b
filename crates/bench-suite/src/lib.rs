//! offhost's experiments as a library: each `offhost bench` subcommand is a module here with
//! an `Options` struct and a `run` function that returns rows (or a report) for the binary to
//! print. The binary only parses arguments and prints; everything measured can be tested
//! here without it.
//!
//! | module | command | measures |
//! |---|---|---|
//! | [`pingpong`] | `bench pingpong` | one-way latency against an echo, per transport and size, in rounds or interleaved |
//! | [`suite`] | `bench exchange`, `bench stream` | both directions at once; a window then an acknowledgement |
//! | [`rate`] | `bench rate` | messages per second through channels (in turn, run by run), by copy or loan |
//! | [`overhead`] | `bench overhead` | a channel round trip's CPU against the raw ring's |
//! | [`reproduce`] | `bench reproduce` | the seed papers' tables and findings |
//! | [`engine`] | `bench engine` | a task hop, a 4-stage chain against memcpy, the audio example |
//! | [`audio_peers`] | `bench engine --peers` | the telephony chain against sox and GStreamer: wall, CPU, SNR against the ideal converter |
//! | [`wasm`] | `bench engine --wasm` | WebAssembly modules against the built-ins they stand for: the time a task adds per buffer, the pipeline's throughput |
//! | [`rpc`] | `bench engine --rpc` | `[ION]`'s Table 1: task switch, event synchronisation, null calls in one engine, into it, to another |
//! | [`nbd`] | `bench nbd` | `offhost nbd` against nbdkit's memory plugin under the same fio jobs, with `--tls` over TLS too |
//! | [`pet`] | `bench pet` | histogramming on one core, the PET pipelines' real-time factors, reconstruction |
//! | [`offload`] | `bench offload` | `[Off-host]`: a host's CPU and wake-ups per message, throughput and latency, in-host against off-host; a rate-limited channel; an urgent channel under bulk load |
//! | [`hostile`] | `bench hostile` | a certified client's connect time on the link and NBD while a crowd of silent or trickling connections (other addresses and its own) is held open; an established session's throughput with and without it |
//! | [`mux`] | `bench mux` | `[DS-link]` Figures 1 and 5: N channels on one link against a link per channel, MB/s by message size; short messages per second over L links of 10 channels |
//!
//! The machinery they share:
//!
//! - transports are named once, in [`offhost_bench::transport::Transport`] (`shm` the raw
//!   ring, `shm-chan`, `tcp`, `tls`, `unix`, `mem` channels, `tcp-raw`, `tls-raw`,
//!   `unix-raw`, `pipe-raw`, `crossbeam` plain), and where the echo runs in
//!   [`offhost_bench::transport::Placement`];
//! - TLS transports get a throw-away certificate directory per run ([`tls::Pki`]); `tls-raw`
//!   (one plain rustls connection) starts in [`tls`];
//! - every latency measurement is an [`offhost_bench::report::Row`], summarised by
//!   [`offhost_bench::stats::Summary`];
//! - threads are pinned with [`offhost_bench::affinity`];
//! - a peer in another process is started and reaped by [`process::PeerProcess`]; a channel
//!   with its peer on a thread by [`channel::Served`]; the raw ring by [`ring::RingRun`];
//!   plain transports by [`offhost_bench::plain`];
//! - progress goes to the [`indicatif::ProgressBar`] the caller passes (hidden in tests).
//!
//! To add an experiment: a module with `Options` (deriving `clap::Args`, so the binary
//! flattens it) and `run(&Options, &ProgressBar) -> Result<...>` returning rows or a
//! serialisable report (and a `table` or `text` function for the text form); start peers
//! with the helpers above; add a test here with small options; then a subcommand in the
//! binary's `bench.rs` that flattens `Options` and prints. See ARCHITECTURE.md.
#![forbid(unsafe_code)]

pub mod audio_peers;
pub mod channel;
pub mod engine;
pub mod engines;
pub mod error;
pub mod hostile;
pub mod iceoryx2;
pub mod mux;
pub mod nbd;
pub mod offload;
pub mod overhead;
pub mod overlap;
pub mod pet;
pub mod pet_live;
pub mod pingpong;
pub mod process;
pub mod rate;
pub mod reproduce;
pub mod ring;
pub mod rpc;
pub mod suite;
pub mod targets;
pub mod tls;
pub mod view;
pub mod wasm;

pub use error::{Error, Result};

/// The progress bar `offhost bench` draws on stderr (only when stderr is a terminal), for the
/// experiments' `run`.
pub fn progress_bar() -> indicatif::ProgressBar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{elapsed:>4} [{bar:30}] {pos}/{len} {msg}")
            .expect("progress template")
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}
