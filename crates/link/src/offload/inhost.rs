//! The in-host queue: the host process runs the peer links itself; completions wait in
//! memory for [`HostQueue::wait`](super::HostQueue::wait).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use offhost_proto::offload::{ErrorCode, Op, QueueLimits};

use super::book::Book;
use super::router::{HostSink, Posted, Router, RouterLimits};
use super::{complete, Address, Completion, Data, OpenOptions, Outcome, QueueError};
use crate::peer::{Failure, Lane, Notify, Outgoing, Payload, PeerConfig, Peers, SendBatch, Stream};

/// The budgets of an in-host queue: the engine's defaults.
pub(crate) fn default_limits(max_message: u32) -> QueueLimits {
    QueueLimits {
        max_outstanding: 4096,
        max_channels: 256,
        max_bytes: 64 << 20,
        max_message,
        inline_max: max_message,
    }
}

/// A finished submission as the link's threads report it.
struct Raw {
    op: Op,
    id: u64,
    outcome: Outcome,
    data: Option<Vec<u8>>,
}

#[derive(Default)]
struct SinkState {
    items: VecDeque<Raw>,
    waiting: bool,
}

/// Where the link's threads leave completions for the host thread.
#[derive(Default)]
pub(crate) struct LocalSink {
    st: Mutex<SinkState>,
    cv: Condvar,
}

impl LocalSink {
    fn push(&self, r: Raw) {
        self.st
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .items
            .push_back(r);
    }
}

impl Notify for LocalSink {
    fn done(&self, _handle: u32, token: u64, _len: u64, result: Result<u64, Failure>) {
        self.push(Raw {
            op: Op::Send,
            id: token,
            outcome: match result {
                Ok(n) => Outcome::Ok(n),
                Err(f) => Outcome::Failed(f),
            },
            data: None,
        });
    }

    fn flush(&self) {
        let st = self.st.lock().unwrap_or_else(|e| e.into_inner());
        if st.waiting {
            self.cv.notify_one();
        }
    }
}

impl HostSink for LocalSink {
    fn received(&self, _handle: u32, id: u64, result: Result<Option<&[u8]>, Failure>) -> bool {
        let (outcome, data) = match result {
            Ok(Some(m)) => (Outcome::Ok(m.len() as u64), Some(m.to_vec())),
            Ok(None) => (Outcome::End, None),
            Err(f) => (Outcome::Failed(f), None),
        };
        self.push(Raw {
            op: Op::Recv,
            id,
            outcome,
            data,
        });
        true
    }
}

struct Chan {
    address: Address,
    stream: Option<Stream>,
}

enum Staged {
    Open {
        id: u64,
        handle: u32,
        address: String,
        opts: OpenOptions,
    },
    Send {
        id: u64,
        handle: u32,
        data: Vec<u8>,
    },
    Recv {
        id: u64,
        handle: u32,
        max: u32,
    },
    Close {
        id: u64,
        handle: u32,
    },
}

pub(crate) struct InHost {
    peers: Peers,
    router: Arc<Router>,
    sink: Arc<LocalSink>,
    chans: HashMap<u32, Chan>,
    staged: Vec<Staged>,
}

impl InHost {
    pub(crate) fn new(config: PeerConfig) -> Result<(InHost, QueueLimits), QueueError> {
        let router = Arc::new(Router::new(RouterLimits::default()));
        let limits = default_limits(config.max_message);
        let peers = Peers::new(config, router.clone())?;
        Ok((
            InHost {
                peers,
                router,
                sink: Arc::new(LocalSink::default()),
                chans: HashMap::new(),
                staged: Vec::new(),
            },
            limits,
        ))
    }

    pub(crate) fn open(
        &mut self,
        id: u64,
        handle: u32,
        address: &str,
        opts: OpenOptions,
    ) -> Result<(), QueueError> {
        self.staged.push(Staged::Open {
            id,
            handle,
            address: address.to_owned(),
            opts,
        });
        Ok(())
    }

    pub(crate) fn send(&mut self, id: u64, handle: u32, data: Vec<u8>) -> Result<(), QueueError> {
        self.staged.push(Staged::Send { id, handle, data });
        Ok(())
    }

    pub(crate) fn recv(&mut self, id: u64, handle: u32, max: u32) -> Result<(), QueueError> {
        self.staged.push(Staged::Recv { id, handle, max });
        Ok(())
    }

    pub(crate) fn close(&mut self, id: u64, handle: u32) -> Result<(), QueueError> {
        self.staged.push(Staged::Close { id, handle });
        Ok(())
    }

    fn fail(&self, op: Op, id: u64, code: ErrorCode, reason: String) {
        self.sink.push(Raw {
            op,
            id,
            outcome: Outcome::Failed(Failure { code, reason }),
            data: None,
        });
    }

    fn ok(&self, op: Op, id: u64) {
        self.sink.push(Raw {
            op,
            id,
            outcome: Outcome::Ok(0),
            data: None,
        });
    }

    /// Runs every staged submission, in order.
    pub(crate) fn submit(&mut self) {
        // The same batching as an engine's: small sends after the first go together.
        let mut batch = SendBatch::new();
        for s in std::mem::take(&mut self.staged) {
            match s {
                Staged::Open {
                    id,
                    handle,
                    address,
                    opts,
                } => {
                    batch.release();
                    let address = match Address::parse(&address) {
                        Ok(a) => a,
                        Err(why) => {
                            self.fail(Op::Open, id, ErrorCode::BadAddress, why.to_string());
                            continue;
                        }
                    };
                    let stream = match &address.peer {
                        None => None,
                        Some(p) => {
                            let lane = if opts.urgent {
                                Lane::Urgent
                            } else {
                                Lane::Bulk
                            };
                            match self.peers.stream(p, &address.channel, lane, opts.rate) {
                                Ok(s) => Some(s),
                                Err(f) => {
                                    self.fail(Op::Open, id, f.code, f.reason);
                                    continue;
                                }
                            }
                        }
                    };
                    self.chans.insert(handle, Chan { address, stream });
                    self.ok(Op::Open, id);
                }
                Staged::Send { id, handle, data } => match self.chans.get(&handle) {
                    None => self.fail(Op::Send, id, ErrorCode::BadHandle, "not open".into()),
                    Some(Chan {
                        stream: Some(s), ..
                    }) => {
                        batch.before_send(s, data.len());
                        s.send(Outgoing {
                            data: Payload::Bytes(data),
                            notify: self.sink.clone(),
                            handle,
                            token: id,
                        })
                    }
                    Some(Chan { address, .. }) => self.router.deliver_local(
                        &address.channel,
                        data,
                        0,
                        self.sink.clone(),
                        handle,
                        id,
                    ),
                },
                Staged::Recv { id, handle, max } => match self.chans.get(&handle) {
                    None => self.fail(Op::Recv, id, ErrorCode::BadHandle, "not open".into()),
                    Some(c) => self.router.post(
                        &c.address.channel,
                        Posted {
                            sink: self.sink.clone(),
                            owner: 0,
                            handle,
                            id,
                            max,
                        },
                    ),
                },
                Staged::Close { id, handle } => {
                    batch.release();
                    if self.chans.remove(&handle).is_none() {
                        self.fail(Op::Close, id, ErrorCode::BadHandle, "not open".into());
                        continue;
                    }
                    self.router.cancel(0, Some(handle), true);
                    self.ok(Op::Close, id);
                }
            }
        }
    }

    pub(crate) fn reap(
        &mut self,
        book: &mut Book,
        ready: &mut VecDeque<Completion>,
        min: usize,
        deadline: Option<Instant>,
    ) {
        let mut st = self.sink.st.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            while let Some(r) = st.items.pop_front() {
                if let Some(e) = book.take(r.id, r.op) {
                    let data = r.data.map_or(Data::None, Data::Bytes);
                    ready.push_back(complete(book, e, r.id, r.outcome, data));
                }
            }
            if ready.len() >= min || book.outstanding() == 0 {
                st.waiting = false;
                return;
            }
            st.waiting = true;
            st = match deadline {
                None => self.sink.cv.wait(st).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        st.waiting = false;
                        return;
                    }
                    self.sink
                        .cv
                        .wait_timeout(st, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }
}

impl Drop for InHost {
    fn drop(&mut self) {
        self.chans.clear();
        self.peers.close();
    }
}
