//! The echo engine (the seed's `nrate`): reflects every record back to its sender.

use std::time::Duration;

use crate::endpoint::{Endpoint, Receiver, Sender};
use crate::error::ShmError;

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
/// descriptor, without copying. Consecutive ready records go back in one publication.
pub fn echo(endpoint: Endpoint) -> Result<EchoStats, ShmError> {
    let (mut tx, mut rx) = endpoint.split();
    let mut stats = EchoStats::default();
    let mut serve = || -> Result<(), ShmError> {
        loop {
            reflect(&mut tx, &mut rx, &mut stats, None)?;
            for _ in 1..BATCH {
                if !reflect_ready(&mut tx, &mut rx, &mut stats)? {
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

fn forward(tx: &mut Sender, rec: crate::Record<'_>, stats: &mut EchoStats) -> Result<(), ShmError> {
    stats.records += 1;
    stats.bytes += rec.len() as u64;
    if rec.is_buf() {
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
    timeout: Option<Duration>,
) -> Result<(), ShmError> {
    let rec = rx.recv(timeout)?;
    forward(tx, rec, stats)
}

fn reflect_ready(
    tx: &mut Sender,
    rx: &mut Receiver,
    stats: &mut EchoStats,
) -> Result<bool, ShmError> {
    match rx.try_recv()? {
        Some(rec) => forward(tx, rec, stats).map(|()| true),
        None => Ok(false),
    }
}
