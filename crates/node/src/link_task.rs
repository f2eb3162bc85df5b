//! What the tasks that reach other engines share (`engine-out`, and `call` with `url=`): which
//! engines a pipeline may reach ([`Links`]), where a task sends ([`Target`]), what a task and
//! the thread that holds its link share ([`Shared`]), and how a buffer crosses a link whole
//! ([`in_parts`], [`send`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use offhost_engine::{ArgError, Args, Build, OutsideWaker};
use offhost_link::{Channel, LinkError, LinkOptions, Url};

use crate::names::PipelineRef;

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
    pub fn check(&self, url: &str) -> Result<(), ReachError> {
        let e = Url::parse(url).map_err(|source| ReachError::BadUrl {
            url: url.to_string(),
            source,
        })?;
        if !self.outside {
            return Ok(());
        }
        match e {
            Url::Tls(_) => Ok(()),
            Url::Tcp(_) if self.options.insecure => Ok(()),
            Url::Tcp(_) => Err(ReachError::PlainTcp(url.to_string())),
            _ => Err(ReachError::Local(url.to_string())),
        }
    }
}

/// Why a pipeline may not reach a URL ([`Links::check`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReachError {
    /// The URL does not parse.
    #[error("{url}: {source}")]
    BadUrl {
        /// The URL given.
        url: String,
        /// Why it does not parse.
        source: LinkError,
    },
    /// Plain TCP, from a pipeline from outside, on an engine that does not allow it.
    #[error("{0}: a submitted pipeline reaches other engines over tls: (plain tcp: only when this engine allows insecure links)")]
    PlainTcp(String),
    /// A local socket (`unix:`, `shm:`, `mem:`), from a pipeline from outside.
    #[error("{0}: a submitted pipeline reaches other engines over tls: only, not local sockets")]
    Local(String),
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
        links
            .check(&url)
            .map_err(|e| ArgError::new("url", e.to_string()))?;
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

/// What broke the link of a task that reaches another engine (`engine-out`, `call` with
/// `url=`): the task fails naming the engine and this.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// The task's pipeline ended first.
    #[error("the pipeline ended")]
    PipelineEnded,
    /// The link failed.
    #[error(transparent)]
    Link(#[from] LinkError),
    /// The channel to the other engine's pipeline could not be opened.
    #[error("open {channel}: {source}")]
    Open {
        /// The channel's name (`in/ID/NAME`, `call/ID/NAME`).
        channel: String,
        /// Why.
        source: LinkError,
    },
    /// Call number `call` (from 1) failed.
    #[error("call {call}: {source}")]
    Call {
        /// Which call.
        call: u64,
        /// What went wrong with it.
        source: Box<RemoteError>,
    },
    /// The service ended without answering a call.
    #[error("the service ended without answering")]
    NoAnswer,
    /// The answer's last part never came.
    #[error("the answer was cut off: its last part never came")]
    AnswerCut,
    /// A part of an answer was not a part, or the answer too large.
    #[error(transparent)]
    Wire(#[from] crate::calls::WireError),
    /// An answer came after the last call.
    #[error("an answer after the last of {0} calls, which nobody asked for")]
    Unasked(u64),
    /// No answer within the call's `timeout=`.
    #[error("{}", offhost_engine::call::no_answer_within(*.0))]
    Timeout(Duration),
}

/// How a task's link thread ended: `Ok` once every buffer was handed over and the channel
/// closed, or what broke (shared with the task, which reports it).
pub(crate) type End = Result<(), Arc<RemoteError>>;

/// What the task and its sender thread share.
pub(crate) struct Shared {
    pub(crate) waker: OutsideWaker,
    /// Set once by the sender thread when it is done: `Ok` once every buffer was handed to
    /// the link and the channel closed, `Err` with what broke.
    pub(crate) end: Mutex<Option<End>>,
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

    pub(crate) fn finish(&self, r: Result<(), RemoteError>) {
        let r = r.map_err(Arc::new);
        let mut end = self.end.lock().unwrap_or_else(|e| e.into_inner());
        if end.is_none() {
            *end = Some(r);
        }
        drop(end);
        self.waker.wake();
    }

    pub(crate) fn end(&self) -> Option<End> {
        self.end.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// How often a send waiting for credit looks whether its pipeline has ended.
pub(crate) const CANCEL_CHECK: Duration = Duration::from_millis(100);

/// Sends one message made of `parts` joined, waiting for credit as long as the pipeline runs.
pub(crate) fn send(ch: &Channel, parts: &[&[u8]], cancel: &AtomicBool) -> Result<(), RemoteError> {
    loop {
        match ch.send_parts(parts, CANCEL_CHECK) {
            Ok(()) => return Ok(()),
            // Ordering: Acquire pairs with the Release store in `EngineOut::drop` (and
            // `Call::drop`).
            Err(LinkError::Timeout) if !cancel.load(Ordering::Acquire) => {}
            Err(LinkError::Timeout) => return Err(RemoteError::PipelineEnded),
            Err(e) => return Err(e.into()),
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
