//! `engine-out`: the writer's end of a queue between engines (see [`crate::remote`]). It
//! sends each buffer of its input whole to `host-in` of a pipeline on another engine, over a
//! link session the task's own thread opens.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use offhost_engine::{ArgError, Args, Buffer, Build, Context, Get, Status, Task, TaskError};
use offhost_link::{ChannelOptions, Session};

use crate::link_task::{in_parts, send, Links, RemoteError, Shared, Target};

pub(crate) fn factory(
    links: &Arc<Links>,
    args: &Args,
    b: &mut Build<'_>,
) -> Result<Box<dyn Task>, ArgError> {
    let (target, pipeline, name) = Target::parse(links, args)?;
    let (tx, rx) = crossbeam_channel::unbounded();
    Ok(Box::new(EngineOut {
        target: Target {
            channel: format!("in/{pipeline}/{name}"),
            ..target
        },
        shared: Shared::register(b),
        tx: Some(tx),
        rx: Some(rx),
    }))
}

struct EngineOut {
    target: Target,
    shared: Arc<Shared>,
    tx: Option<Sender<Buffer>>,
    /// Taken by the sender thread when the task first runs.
    rx: Option<Receiver<Buffer>>,
}

/// Buffers `engine-out` returns to their free list at once (see `send_all`); all it holds
/// when none waits to be sent. Each return wakes the producer waiting for them, and the
/// producer runs on the link thread's CPU, where it preempts the link thread. Eight rather
/// than four, with the queue's default pool of 16: the sending side's CPU per byte fell from
/// 1.25 to 1.21 times the raw TLS writer's, and the throughput rose from 0.77 to 0.81 of the
/// raw socket's (means of eight alternating pairs of `bench engines`). A pool of 4 is
/// returned whole once the link has sent it, as before (docs/notes/engines.md, stop 39).
const RELEASE_BATCH: usize = 8;

fn send_all(t: &Target, rx: &Receiver<Buffer>, cancel: &AtomicBool) -> Result<(), RemoteError> {
    let session = Session::connect_with(&t.url, &t.options)?;
    let ch = session
        .open(&t.channel, queue_options())
        .map_err(|source| RemoteError::Open {
            channel: t.channel.clone(),
            source,
        })?;
    // One byte of header per message: MORE while parts of the buffer follow, LAST on its
    // last part (see host-in whole=true).
    // The header and the part go as one message without being joined here first.
    let part = (ch.options().max_message as usize).saturating_sub(1).max(1);
    // Buffers sent go back to their free list a few at a time, so that a producer waiting
    // for one is woken once per batch rather than once per buffer; all of them before this
    // thread waits for the next, so none is held while nothing moves.
    let mut sent: Vec<Buffer> = Vec::with_capacity(RELEASE_BATCH);
    loop {
        let b = match rx.try_recv() {
            Ok(b) => b,
            Err(TryRecvError::Empty) => {
                offhost_engine::release_together(|| sent.clear());
                match rx.recv() {
                    Ok(b) => b,
                    Err(_) => break,
                }
            }
            Err(TryRecvError::Disconnected) => break,
        };
        in_parts(&b, part, |p| send(&ch, p, cancel))?;
        sent.push(b);
        if sent.len() == RELEASE_BATCH {
            offhost_engine::release_together(|| sent.clear());
        }
    }
    drop(sent);
    ch.close()?;
    // Goodbye: the session's last frames reach the other engine before its socket closes.
    session.close();
    Ok(())
}

impl Task for EngineOut {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        if let Some(rx) = self.rx.take() {
            let (shared, target) = (Arc::clone(&self.shared), self.target.clone());
            let spawned = std::thread::Builder::new()
                .name("offhost-engine-out".into())
                .spawn(move || {
                    let r = send_all(&target, &rx, &shared.cancel);
                    // What is still queued goes back to its free lists.
                    drop(rx);
                    shared.finish(r);
                });
            if let Err(e) = spawned {
                return Err(TaskError::Failed(format!("no thread for the link: {e}")));
            }
        }
        if let Some(Err(why)) = self.shared.end() {
            return Err(TaskError::Failed(format!(
                "engine {}: {why}",
                self.target.engine
            )));
        }
        if let Some(tx) = &self.tx {
            loop {
                match cx.get(0) {
                    Get::Buf(b) => {
                        if tx.send(b).is_err() {
                            // The sender thread ended: its end says why at the next turn.
                            break;
                        }
                    }
                    Get::Empty => return Ok(Status::Blocked),
                    Get::Closed => break,
                }
            }
            self.tx = None;
        }
        match self.shared.end() {
            None => Ok(Status::Blocked),
            Some(Ok(())) => Ok(Status::Done),
            Some(Err(why)) => Err(TaskError::Failed(format!(
                "engine {}: {why}",
                self.target.engine
            ))),
        }
    }
}

impl Drop for EngineOut {
    fn drop(&mut self) {
        // Ordering: Release pairs with the sender's Acquire load.
        self.shared.cancel.store(true, Ordering::Release);
    }
}

/// The channel of an engine-to-engine queue: a receive window of 4 MiB (four times the
/// default), so that a window's worth of buffers is in flight while the credit for the last
/// one travels back.
fn queue_options() -> ChannelOptions {
    ChannelOptions {
        recv_buffer: 4 << 20,
        ..ChannelOptions::default()
    }
}
