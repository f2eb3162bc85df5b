//! Engine-to-engine queues: `engine-out` carries the buffers of a queue to `host-in` of a
//! pipeline on another engine, over a link session the engine opens itself.
//!
//! A queue whose writer and reader are placed on different engines (`@NAME`, see
//! [`crate::placement`]) becomes, on the writer's engine, `engine-out url=URL pipeline=ID
//! name=Q <Q` and, on the reader's, `host-in name=Q whole=true >Q:POOL`. Each buffer crosses
//! whole on channel `in/ID/Q` (as one message, or as several with a one-byte header when it is
//! larger than a message) and arrives as one buffer, so the link's credit flow control carries the closed loop
//! across: the receiving `host-in` copies a message into a buffer of its free list only when
//! one is free, its daemon reads the channel only when `host-in` has room, the channel grants
//! credit only as it is read, and a blocked send holds the sender's buffers, so its free list
//! stalls its producer. Memory stays bounded end to end.
//!
//! The link is the engine's own: `tls:` with the engine's certificate directory (the other
//! engine must hold a certificate of the same CA). Which URLs a pipeline may reach is the
//! engine's [`Links`]: a pipeline from outside reaches `tls:` URLs only (`tcp:` as well when
//! the engine runs `--insecure`), never a local socket.
//!
//! Failure is whole: if the link breaks, `engine-out` fails its pipeline with an error naming
//! the engine it was sending to, and the receiving daemon fails the reading pipeline (a cut
//! stream is never taken for a complete one, see [`offhost_engine::HostInput::fail`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use offhost_link::{Channel, ChannelOptions, Endpoint, LinkError, LinkOptions, Session};

use crate::names::PipelineRef;
use offhost_engine::Buffer;
use offhost_engine::Get;
use offhost_engine::OutsideWaker;
use offhost_engine::{ArgError, Args, Build, Registry, TaskInfo};
use offhost_engine::{Context, Priority, Status, Task, TaskError};

/// Which engines a pipeline's `engine-out` tasks may reach, and with which certificates.
#[derive(Debug, Clone)]
pub struct Links {
    options: LinkOptions,
    outside: bool,
}

impl Links {
    /// For the user's own pipelines (`offhost run`): any URL, with `options`.
    pub fn own(options: LinkOptions) -> Links {
        Links {
            options,
            outside: false,
        }
    }

    /// For pipelines from outside (a daemon's): `tls:` URLs only, with `options`'
    /// certificates, and plain `tcp:` only when `options.insecure`.
    pub fn outside(options: LinkOptions) -> Links {
        Links {
            options,
            outside: true,
        }
    }

    /// Whether a pipeline may reach `url`; the error says why not.
    pub fn check(&self, url: &str) -> Result<(), String> {
        let e = Endpoint::parse(url).map_err(|e| e.to_string())?;
        if !self.outside {
            return Ok(());
        }
        match e {
            Endpoint::Tls(_) => Ok(()),
            Endpoint::Tcp(_) if self.options.insecure => Ok(()),
            Endpoint::Tcp(_) => Err(format!(
                "{url}: a submitted pipeline reaches other engines over tls: (plain tcp: only when this engine runs --insecure)"
            )),
            _ => Err(format!(
                "{url}: a submitted pipeline reaches other engines over tls: only, not local sockets"
            )),
        }
    }
}

/// Registers `engine-out` and `call` (see [`crate::remote_call`]), reaching engines as
/// `links` allows.
pub fn register(r: &mut Registry, links: Links) {
    let links = Arc::new(links);
    crate::remote_call::register(r, Arc::clone(&links));
    r.register(
        TaskInfo::new(
            "engine-out",
            "sends each buffer of its input to host-in NAME of pipeline ID on the engine at URL (an engine-to-engine queue)",
        )
        .required("url", "the other engine's URL (tls:HOST:PORT)")
        .required(
            "pipeline",
            "the pipeline's id on that engine, or the name it was submitted with",
        )
        .required("name", "its host-in channel")
        .arg("engine", "", "the other engine's name, for errors")
        .inputs(1, 1)
        .outputs(0, 0)
        .priority(Priority::Interrupt),
        move |args: &Args, b: &mut Build<'_>| factory(&links, args, b),
    );
}

fn factory(links: &Arc<Links>, args: &Args, b: &mut Build<'_>) -> Result<Box<dyn Task>, ArgError> {
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

/// Where the buffers go.
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) url: String,
    pub(crate) channel: String,
    pub(crate) engine: String,
    pub(crate) options: LinkOptions,
}

impl Target {
    /// The arguments `engine-out` and `call` share: `url` (which `links` must allow),
    /// `pipeline` (an id or a name), `name` and `engine` (the URL unless given). The channel
    /// is left empty for the task to name; the pipeline and the channel's name come with it.
    pub(crate) fn parse(
        links: &Links,
        args: &Args,
    ) -> Result<(Target, PipelineRef, String), ArgError> {
        let url = args.required("url")?.to_string();
        links.check(&url).map_err(|e| ArgError::new("url", e))?;
        let pipeline: PipelineRef = args.parse("pipeline")?;
        let name = args.required("name")?.to_string();
        let engine = match args.get("engine") {
            Some(e) if !e.is_empty() => e.to_string(),
            _ => url.clone(),
        };
        let target = Target {
            url,
            channel: String::new(),
            engine,
            options: links.options.clone(),
        };
        Ok((target, pipeline, name))
    }
}

/// What the task and its sender thread share.
pub(crate) struct Shared {
    pub(crate) waker: OutsideWaker,
    /// Set once by the sender thread when it is done: `Ok` once every buffer was handed to
    /// the link and the channel closed, `Err` with what broke.
    pub(crate) end: Mutex<Option<Result<(), String>>>,
    /// Set when the task is dropped (its pipeline ended): the sender gives up.
    pub(crate) cancel: AtomicBool,
}

impl Shared {
    /// A new share for the task being built, its waker registered with the pipeline so
    /// that the task's thread can wake it.
    pub(crate) fn register(b: &mut Build<'_>) -> Arc<Shared> {
        let waker = b.outside_waker();
        Arc::new(Shared {
            waker,
            end: Mutex::new(None),
            cancel: AtomicBool::new(false),
        })
    }

    pub(crate) fn finish(&self, r: Result<(), String>) {
        let mut end = self.end.lock().unwrap_or_else(|e| e.into_inner());
        if end.is_none() {
            *end = Some(r);
        }
        drop(end);
        self.waker.wake();
    }

    pub(crate) fn end(&self) -> Option<Result<(), String>> {
        self.end.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
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

/// How often a send waiting for credit looks whether its pipeline has ended.
pub(crate) const CANCEL_CHECK: Duration = Duration::from_millis(100);

/// Sends one message made of `parts` joined, waiting for credit as long as the pipeline runs.
pub(crate) fn send(ch: &Channel, parts: &[&[u8]], cancel: &AtomicBool) -> Result<(), String> {
    loop {
        match ch.send_parts_timeout(parts, CANCEL_CHECK) {
            Ok(()) => return Ok(()),
            // Ordering: Acquire pairs with the Release store in `EngineOut::drop`.
            Err(LinkError::Timeout) if !cancel.load(Ordering::Acquire) => {}
            Err(LinkError::Timeout) => return Err("the pipeline ended".into()),
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Calls `send` with each message of `data` crossing whole: parts of at most `part` bytes,
/// each after a byte that says whether more parts follow ([`MORE`](offhost_engine::MORE)) or
/// not ([`LAST`](offhost_engine::LAST)), as `host-in whole=true` joins them; an empty buffer
/// is one `LAST` byte.
pub(crate) fn in_parts<E>(
    data: &[u8],
    part: usize,
    mut send: impl FnMut(&[&[u8]]) -> Result<(), E>,
) -> Result<(), E> {
    let mut chunks = data.chunks(part.max(1)).peekable();
    if chunks.peek().is_none() {
        return send(&[&[offhost_engine::LAST]]);
    }
    while let Some(c) = chunks.next() {
        let flag = if chunks.peek().is_some() {
            offhost_engine::MORE
        } else {
            offhost_engine::LAST
        };
        send(&[&[flag], c])?;
    }
    Ok(())
}

fn send_all(t: &Target, rx: &Receiver<Buffer>, cancel: &AtomicBool) -> Result<(), String> {
    let session = Session::connect_with(&t.url, &t.options).map_err(|e| e.to_string())?;
    let ch = session
        .open(&t.channel, queue_options())
        .map_err(|e| format!("open {}: {e}", t.channel))?;
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
    ch.close().map_err(|e| e.to_string())?;
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
