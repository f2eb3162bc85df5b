//! The echo engine (the paper's `nrate`): reflects every record back to its sender.

use std::fmt;
use std::time::Duration;

use crate::config::Mode;
use crate::connect::Listener;
use crate::endpoint::Endpoint;
use crate::error::ShmError;
use crate::receiver::Receiver;
use crate::sender::Sender;

/// What an echo run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EchoStats {
    /// Records reflected.
    pub records: u64,
    /// Payload bytes reflected.
    pub bytes: u64,
}

/// Most records reflected per publication.
const BATCH: usize = 64;

/// Reflects every record back until the peer hangs up (then returns `Ok`) or an error occurs.
/// Inline records are copied into the outgoing ring; buffer records are sent back by
/// descriptor, without copying or reading them. Consecutive ready records go back in one
/// publication.
pub fn echo(endpoint: Endpoint) -> Result<EchoStats, ShmError> {
    echo_with(endpoint, false)
}

/// As [`echo`]; with `touch`, the engine also reads every byte of every buffer record before
/// sending it back (as an engine that consumes its input would), so the data really crosses
/// between the cores instead of only its descriptor.
pub fn echo_with(endpoint: Endpoint, touch: bool) -> Result<EchoStats, ShmError> {
    let (mut tx, mut rx) = endpoint.split();
    let mut stats = EchoStats::default();
    let mut serve = || -> Result<(), ShmError> {
        loop {
            reflect(&mut tx, &mut rx, &mut stats, touch)?;
            for _ in 1..BATCH {
                if !reflect_ready(&mut tx, &mut rx, &mut stats, touch)? {
                    break;
                }
            }
            tx.flush()?;
        }
    };
    match serve() {
        Err(ShmError::PeerGone) => Ok(stats),
        Err(e) => Err(e),
        Ok(()) => Ok(stats),
    }
}

fn forward(
    tx: &mut Sender,
    rec: crate::Record<'_>,
    stats: &mut EchoStats,
    touch: bool,
) -> Result<(), ShmError> {
    stats.records += 1;
    stats.bytes += rec.len() as u64;
    if rec.is_buf() {
        if touch {
            let bytes = rec.bytes();
            let words = bytes.chunks_exact(8);
            let tail = words
                .remainder()
                .iter()
                .fold(0u64, |a, &b| a ^ u64::from(b));
            let sum = words.fold(tail, |a, w| {
                a ^ u64::from_ne_bytes(w.try_into().expect("8-byte chunk"))
            });
            std::hint::black_box(sum);
        }
        let buf = rec.take_buf().expect("buffer record");
        return match tx.write_buf(buf)? {
            Ok(()) => Ok(()),
            Err(buf) => tx.send_buf(buf, None),
        };
    }
    if !tx.write(rec.bytes())? {
        tx.send(rec.bytes(), None)?;
    }
    Ok(())
}

fn reflect(
    tx: &mut Sender,
    rx: &mut Receiver,
    stats: &mut EchoStats,
    touch: bool,
) -> Result<(), ShmError> {
    let rec = rx.recv(None)?;
    forward(tx, rec, stats, touch)
}

fn reflect_ready(
    tx: &mut Sender,
    rx: &mut Receiver,
    stats: &mut EchoStats,
    touch: bool,
) -> Result<bool, ShmError> {
    match rx.try_recv()? {
        Some(rec) => forward(tx, rec, stats, touch).map(|()| true),
        None => Ok(false),
    }
}

/// What happened to one host of [`serve_echo`]; its `Display` is a line for a log.
#[derive(Debug)]
#[non_exhaustive]
pub enum EchoEvent {
    /// A host connected, waiting this way.
    Connected(Mode),
    /// It left, after this much was reflected.
    Left(EchoStats),
    /// Its link failed.
    Failed(ShmError),
    /// A host was turned away (its uid, its hello).
    Rejected(ShmError),
}

impl fmt::Display for EchoEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EchoEvent::Connected(m) => write!(f, "host connected ({m})"),
            EchoEvent::Left(s) => write!(
                f,
                "host left after {} records, {} bytes",
                s.records, s.bytes
            ),
            EchoEvent::Failed(e) => write!(f, "link failed: {e}"),
            EchoEvent::Rejected(e) => write!(f, "rejected a host: {e}"),
        }
    }
}

/// Serves the echo to one host after another on `listener` (`offhost echo --raw`), each
/// waiting as `mode` says (or as it asks), reading every buffer with `touch` (see
/// [`echo_with`]); after the first host with `once`. Tells `log` what happens to each.
pub fn serve_echo(
    listener: &Listener,
    mode: Option<(Mode, Duration)>,
    touch: bool,
    once: bool,
    mut log: impl FnMut(EchoEvent),
) {
    loop {
        match listener.accept_with(mode) {
            Ok(ep) => {
                log(EchoEvent::Connected(ep.mode().0));
                match echo_with(ep, touch) {
                    Ok(s) => log(EchoEvent::Left(s)),
                    Err(e) => log(EchoEvent::Failed(e)),
                }
            }
            Err(e) => log(EchoEvent::Rejected(e)),
        }
        if once {
            return;
        }
    }
}
