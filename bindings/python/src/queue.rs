//! `offhost.Queue` and `offhost.Completion`: a host's submission and completion queues at its
//! local engine (the off-host transport: the engine carries the host's channels to other
//! engines).
//!
//! Every entry point runs inside `guarded` or `detach` (a panic is `offhost.Error`, see
//! `errors.rs`) but those that cannot panic: `QueueLoan.__len__` (a `usize` field) and the
//! attributes of a `Completion` (PyO3's `get_all` getters, each a copy of a field).

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use offhost_bindings::Error;
use offhost_link::offload::{
    ChannelId, Completion as RawCompletion, HostQueue, OpenOptions, Outcome, QueueError, RecvSize,
    SendLoan,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::channel::data;
use crate::convert::{sliced, Slice};
use crate::errors::{guarded, to_py};

/// A host's submission and completion queues at its local engine (`offhost engine --listen
/// shm:PATH`), over shared memory: `offhost.Queue("shm:/run/offhost/engine.sock")`.
///
/// Records go into a ring without a system call: `push_open`, `push_send`, `push_recv`,
/// `push_close` stage them (each with a `tag` of yours), `submit` publishes them, `wait`
/// sleeps until completions arrive and `pop`/`completions` take them. The engine runs the
/// protocol to other engines: an address `PEER/CHANNEL` reaches a peer of the engine
/// (`offhost engine --peer PEER=tls:HOST:PORT`), a plain `CHANNEL` the engine's own mailbox.
/// `open`, `send`, `recv` and `close` are the blocking one-call forms.
#[pyclass(frozen, module = "offhost")]
pub struct Queue {
    inner: Mutex<State>,
    engine: String,
}

/// The queue, and the completions a blocking call took from it while it looked for its own
/// (handed out first by `pop`).
struct State {
    q: HostQueue,
    held: VecDeque<RawCompletion>,
    /// The next tag of a blocking call's submission.
    next_tag: u64,
}

/// Tags from here up are the blocking calls' own.
const OWN_TAGS: u64 = 1 << 63;

/// How a submission ended (`offhost.Queue.pop`).
#[pyclass(frozen, get_all, module = "offhost")]
pub struct Completion {
    /// `"open"`, `"send"`, `"recv"` or `"close"`.
    op: &'static str,
    /// The tag given with the submission.
    tag: u64,
    /// The channel handle it was for.
    channel: u32,
    /// True when it succeeded (a receive at the end of its channel too: see `end`).
    ok: bool,
    /// A send's bytes delivered, a receive's message length, 0 otherwise.
    value: u64,
    /// A receive found its channel closed by this host.
    end: bool,
    /// Why it failed (`None` when `ok`).
    error: Option<String>,
    /// The failure's kind as the engine names it (`"peer unreachable"`, `"too large"`, ...).
    code: Option<&'static str>,
    /// A receive's message.
    data: Option<Py<PyBytes>>,
}

#[pymethods]
impl Completion {
    fn __repr__(&self) -> PyResult<String> {
        guarded(|| {
            Ok(format!(
                "Completion(op={:?}, tag={}, channel={}, ok={}, value={}, end={}, error={:?})",
                self.op, self.tag, self.channel, self.ok, self.value, self.end, self.error
            ))
        })
    }
}

/// A buffer to write a message into for `Queue.push_send_loan`: off-host, a buffer of the
/// shared pool that the engine sends from where it lies (no copy). `buffer` is a writable
/// memoryview of the message's bytes (`numpy.frombuffer` sees the shared memory itself);
/// do not use it after the loan is pushed. Dropped unpushed, it returns to the pool.
#[pyclass(frozen, module = "offhost")]
pub struct QueueLoan {
    inner: Mutex<Option<SendLoan>>,
    addr: usize,
    len: usize,
    /// Keeps the queue (and its mapping) alive while views of the buffer exist.
    _queue: Py<Queue>,
}

#[pymethods]
impl QueueLoan {
    /// A writable memoryview of the message's bytes.
    #[getter]
    fn buffer<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        guarded(|| {
            let py = slf.py();
            let this = slf.get();
            if this.pushed()? {
                return Err(crate::errors::raise(
                    py,
                    "ClosedError",
                    "the loan was pushed already".into(),
                ));
            }
            crate::loan::view(py, this.addr, this.len, slf.as_any(), false)
        })
    }

    /// Whether it was pushed.
    #[getter]
    fn pushed(&self) -> PyResult<bool> {
        guarded(|| {
            Ok(self
                .inner
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_none())
        })
    }

    fn __len__(&self) -> usize {
        self.len
    }

    fn __repr__(&self) -> PyResult<String> {
        guarded(|| {
            Ok(format!(
                "offhost.QueueLoan(len={}, pushed={})",
                self.len,
                self.pushed()?
            ))
        })
    }
}

fn completion(py: Python<'_>, c: RawCompletion) -> Completion {
    let (ok, value, end, error, code) = match &c.outcome {
        Outcome::Ok(n) => (true, *n, false, None, None),
        Outcome::End => (true, 0, true, None, None),
        Outcome::Failed(f) => (false, 0, false, Some(f.reason.clone()), Some(f.code.name())),
    };
    let data = (c.op == offhost_link::offload::Op::Recv && ok && !end)
        .then(|| PyBytes::new(py, &c.data).unbind());
    Completion {
        op: c.op.name(),
        tag: c.tag,
        channel: c.channel.0,
        ok,
        value,
        end,
        error,
        code,
        data,
    }
}

fn options(urgent: bool, rate: Option<u64>, burst: Option<u64>) -> PyResult<OpenOptions> {
    let o = if urgent {
        OpenOptions::urgent()
    } else {
        OpenOptions::bulk()
    };
    match (rate, burst) {
        (None, None) => Ok(o),
        (Some(r), b) if r > 0 => Ok(o.rate(r, b.unwrap_or(64 << 10).max(1))),
        (Some(_), _) => Err(pyo3::exceptions::PyValueError::new_err(
            "rate must be a positive number of bytes per second",
        )),
        (None, Some(_)) => Err(pyo3::exceptions::PyValueError::new_err(
            "burst needs a rate",
        )),
    }
}

fn q_err(e: QueueError) -> PyErr {
    to_py(Error::from(e))
}

fn check_tag(tag: u64) -> PyResult<u64> {
    if tag >= OWN_TAGS {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "tags from 2**63 up are reserved for the blocking calls",
        ));
    }
    Ok(tag)
}

impl Queue {
    fn of(q: HostQueue, engine: String) -> Queue {
        Queue {
            inner: Mutex::new(State {
                q,
                held: VecDeque::new(),
                next_tag: OWN_TAGS,
            }),
            engine,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stages a submission with a tag of its own (`push` gets the queue and the tag),
    /// publishes it and waits, a slice at a time, for its completion; the others that arrive
    /// meanwhile are kept for `pop`. A spent budget (`Full`) waits for completions and tries
    /// again.
    fn call<T: Send>(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        push: impl Fn(&mut HostQueue, u64) -> Result<T, QueueError> + Send + Sync,
    ) -> PyResult<(T, RawCompletion)> {
        let mut staged: Option<(T, u64)> = None;
        sliced(py, timeout, |slice| {
            let mut st = self.lock();
            let st = &mut *st;
            if staged.is_none() {
                let tag = st.next_tag;
                match push(&mut st.q, tag) {
                    Ok(v) => {
                        st.next_tag += 1;
                        staged = Some((v, tag));
                        if let Err(e) = st.q.submit() {
                            return Slice::Done(Err(Error::from(e)));
                        }
                    }
                    Err(QueueError::Full(_)) if st.q.outstanding() > 0 => {
                        return match st.q.wait(1, Some(slice)) {
                            Ok(_) => {
                                while let Some(c) = st.q.pop() {
                                    st.held.push_back(c);
                                }
                                Slice::Again
                            }
                            Err(e) => Slice::Done(Err(Error::from(e))),
                        };
                    }
                    Err(e) => return Slice::Done(Err(Error::from(e))),
                }
            }
            let tag = staged.as_ref().map_or(0, |s| s.1);
            loop {
                while let Some(c) = st.q.pop() {
                    st.held.push_back(c);
                }
                if let Some(i) = st.held.iter().position(|c| c.tag == tag) {
                    let c = st.held.remove(i).expect("position found");
                    let v = staged.take().expect("staged above").0;
                    return Slice::Done(Ok((v, c)));
                }
                if st.q.outstanding() == 0 {
                    return Slice::Done(Err(Error::from(
                        st.q.wait(0, None).err().unwrap_or(QueueError::EngineGone),
                    )));
                }
                match st.q.wait(1, Some(slice)) {
                    Ok(0) => return Slice::Again,
                    Ok(_) => {}
                    Err(e) => return Slice::Done(Err(Error::from(e))),
                }
            }
        })
    }
}

/// A blocking call's completion as its result: the value, or the failure as an exception.
fn outcome(c: &RawCompletion) -> Result<Option<u64>, QueueError> {
    match &c.outcome {
        Outcome::Ok(n) => Ok(Some(*n)),
        Outcome::End => Ok(None),
        Outcome::Failed(f) => Err(QueueError::Failed(f.clone())),
    }
}

#[pymethods]
impl Queue {
    #[new]
    fn new(py: Python<'_>, engine: String) -> PyResult<Queue> {
        guarded(|| {
            let q = crate::errors::detach(py, || HostQueue::connect(&engine))?.map_err(q_err)?;
            Ok(Queue::of(q, engine))
        })
    }

    /// The same queue where this process runs the links itself (the in-host mode, to compare
    /// with): it is node `name`, reaching `peers` (`{"beta": "tls:HOST:PORT"}`) with the
    /// certificates in `tls_certificates`, or over plain `tcp:` when `insecure`. Addresses
    /// name one of `peers` (`PEER/CHANNEL`).
    #[staticmethod]
    #[pyo3(signature = (name, peers, *, tls_certificates=None, insecure=false))]
    fn in_host(
        py: Python<'_>,
        name: String,
        peers: std::collections::BTreeMap<String, String>,
        tls_certificates: Option<std::path::PathBuf>,
        insecure: bool,
    ) -> PyResult<Queue> {
        guarded(|| {
            let options = crate::channel::link_options(tls_certificates).insecure(insecure);
            let mut config = offhost_link::peer::PeerConfig::new(&name).options(options);
            for (p, url) in peers {
                config = config.peer(p, url);
            }
            let q = crate::errors::detach(py, || HostQueue::in_host(config))?.map_err(q_err)?;
            Ok(Queue::of(q, format!("in-host {name}")))
        })
    }

    /// `"off-host"` (the engine runs the protocol) or `"in-host"`.
    #[getter]
    fn mode(&self) -> PyResult<&'static str> {
        guarded(|| Ok(self.lock().q.mode()))
    }

    /// The engine's budgets for this host: `max_outstanding`, `max_channels`, `max_bytes`,
    /// `max_message`, `inline_max`.
    #[getter]
    fn limits<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        guarded(|| {
            let l = self.lock().q.limits();
            let d = PyDict::new(py);
            d.set_item("max_outstanding", l.max_outstanding)?;
            d.set_item("max_channels", l.max_channels)?;
            d.set_item("max_bytes", l.max_bytes)?;
            d.set_item("max_message", l.max_message)?;
            d.set_item("inline_max", l.inline_max)?;
            Ok(d)
        })
    }

    /// Submissions pushed and not yet completed.
    #[getter]
    fn outstanding(&self) -> PyResult<usize> {
        guarded(|| Ok(self.lock().q.outstanding()))
    }

    /// Bytes of sends pushed and not yet completed.
    #[getter]
    fn bytes_in_flight(&self) -> PyResult<u64> {
        guarded(|| Ok(self.lock().q.bytes_in_flight()))
    }

    /// Stages opening `address` (`PEER/CHANNEL` or `CHANNEL`); returns its channel handle at
    /// once (usable in later pushes). `urgent` channels never queue behind bulk ones; `rate`
    /// (bytes per second, with bursts of `burst`, default 64 KiB) is held by the engine.
    #[pyo3(signature = (address, *, urgent=false, rate=None, burst=None, tag=0))]
    fn push_open(
        &self,
        address: &str,
        urgent: bool,
        rate: Option<u64>,
        burst: Option<u64>,
        tag: u64,
    ) -> PyResult<u32> {
        guarded(|| {
            let o = options(urgent, rate, burst)?;
            let tag = check_tag(tag)?;
            self.lock()
                .q
                .push_open(address, o, tag)
                .map(|c| c.0)
                .map_err(q_err)
        })
    }

    /// Stages a send of a copy of `data` (bytes-like) on `channel`. When a budget is spent
    /// (`offhost.WouldBlockError`), wait for completions first.
    #[pyo3(signature = (channel, data, tag=0))]
    fn push_send(&self, channel: u32, data: &Bound<'_, PyAny>, tag: u64) -> PyResult<()> {
        guarded(|| {
            let tag = check_tag(tag)?;
            let msg = self::data(data)?;
            self.lock()
                .q
                .push_send(ChannelId(channel), &msg, tag)
                .map_err(q_err)
        })
    }

    /// A loan of `length` bytes to write a message into (off-host a pool buffer of the
    /// shared memory; waits at most `timeout` seconds for a free one, `None`: for ever).
    #[pyo3(signature = (length, timeout=None))]
    fn loan(slf: &Bound<'_, Self>, length: usize, timeout: Option<f64>) -> PyResult<QueueLoan> {
        guarded(|| {
            let py = slf.py();
            let this = slf.get();
            let mut l = sliced(py, timeout, |slice| {
                match this.lock().q.loan_within(length, Some(slice)) {
                    Err(QueueError::Timeout) => Slice::Again,
                    r => Slice::Done(r.map_err(Error::from)),
                }
            })?;
            let addr = l.as_mut_ptr() as usize;
            Ok(QueueLoan {
                inner: Mutex::new(Some(l)),
                addr,
                len: length,
                _queue: slf.clone().unbind(),
            })
        })
    }

    /// Stages a send of `loan`'s message without copying it (off-host); the loan's buffer
    /// is the engine's from here on.
    #[pyo3(signature = (channel, loan, tag=0))]
    fn push_send_loan(&self, channel: u32, loan: &QueueLoan, tag: u64) -> PyResult<()> {
        guarded(|| {
            let tag = check_tag(tag)?;
            let mut slot = loan.inner.lock().unwrap_or_else(|e| e.into_inner());
            let Some(l) = slot.take() else {
                return Err(to_py(Error::Invalid("the loan was pushed already".into())));
            };
            drop(slot);
            self.lock()
                .q
                .push_send_loan(ChannelId(channel), l, tag)
                .map_err(q_err)
        })
    }

    /// Stages a receive on `channel` of a message of at most `max` bytes (`None`: any up to
    /// the engine's largest).
    #[pyo3(signature = (channel, tag=0, max=None))]
    fn push_recv(&self, channel: u32, tag: u64, max: Option<u32>) -> PyResult<()> {
        guarded(|| {
            let tag = check_tag(tag)?;
            let size = max.map_or(RecvSize::Any, RecvSize::Max);
            self.lock()
                .q
                .push_recv(ChannelId(channel), size, tag)
                .map_err(q_err)
        })
    }

    /// Stages closing `channel` (its pending receives end with `end=True`).
    #[pyo3(signature = (channel, tag=0))]
    fn push_close(&self, channel: u32, tag: u64) -> PyResult<()> {
        guarded(|| {
            let tag = check_tag(tag)?;
            self.lock()
                .q
                .push_close(ChannelId(channel), tag)
                .map_err(q_err)
        })
    }

    /// Publishes what was pushed to the engine (one doorbell at most).
    fn submit(&self, py: Python<'_>) -> PyResult<()> {
        guarded(|| crate::errors::detach(py, || self.lock().q.submit())?.map_err(q_err))
    }

    /// Waits until at least `min` completions are ready (at most the submissions
    /// outstanding, which all complete) or `timeout` seconds pass (`None`: for ever); the
    /// number ready. Sleeps on the engine's doorbell, without spinning.
    #[pyo3(signature = (min=1, timeout=None))]
    fn wait(&self, py: Python<'_>, min: usize, timeout: Option<f64>) -> PyResult<usize> {
        guarded(|| {
            // Timing out with fewer than `min` ready is an answer here, not an error: the
            // deadline is this loop's own, and `sliced` only looks for signals between slices.
            let deadline = crate::convert::deadline(timeout)?;
            sliced(py, None, |slice| {
                let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
                let mut st = self.lock();
                let held = st.held.len();
                let wait = left.map_or(slice, |l| l.min(slice));
                match st.q.wait(min.saturating_sub(held), Some(wait)) {
                    // Enough, nothing more can come, or the time is up.
                    Ok(n)
                        if n + held >= min
                            || st.q.outstanding() == 0
                            || left.is_some_and(|l| l <= wait) =>
                    {
                        Slice::Done(Ok(n + held))
                    }
                    Ok(_) => Slice::Again,
                    Err(e) => Slice::Done(Err(Error::from(e))),
                }
            })
        })
    }

    /// The next ready completion, or `None`.
    fn pop(&self, py: Python<'_>) -> PyResult<Option<Completion>> {
        guarded(|| {
            let mut st = self.lock();
            let c = st.held.pop_front().or_else(|| st.q.pop());
            drop(st);
            Ok(c.map(|c| completion(py, c)))
        })
    }

    /// Every ready completion, in order.
    fn completions(&self, py: Python<'_>) -> PyResult<Vec<Completion>> {
        guarded(|| {
            let mut out = Vec::new();
            let mut st = self.lock();
            let st = &mut *st;
            for c in st.held.drain(..) {
                out.push(completion(py, c));
            }
            while let Some(c) = st.q.pop() {
                out.push(completion(py, c));
            }
            Ok(out)
        })
    }

    /// Opens `address` and waits for the engine's answer; the channel handle.
    #[pyo3(signature = (address, *, urgent=false, rate=None, burst=None, timeout=None))]
    fn open(
        &self,
        py: Python<'_>,
        address: &str,
        urgent: bool,
        rate: Option<u64>,
        burst: Option<u64>,
        timeout: Option<f64>,
    ) -> PyResult<u32> {
        guarded(|| {
            let o = options(urgent, rate, burst)?;
            let (ch, c) = self.call(py, timeout, |q, tag| q.push_open(address, o, tag))?;
            outcome(&c).map_err(q_err)?;
            Ok(ch.0)
        })
    }

    /// Sends a copy of `data` on `channel` and waits until it is delivered (as the module
    /// doc of the queue says: to the peer engine, or into the mailbox); the bytes delivered.
    #[pyo3(signature = (channel, data, timeout=None))]
    fn send(
        &self,
        py: Python<'_>,
        channel: u32,
        data: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<u64> {
        guarded(|| {
            let msg = self::data(data)?;
            let msg: &[u8] = &msg;
            let ((), c) = self.call(py, timeout, |q, tag| {
                q.push_send(ChannelId(channel), msg, tag)
            })?;
            Ok(outcome(&c).map_err(q_err)?.unwrap_or(0))
        })
    }

    /// Receives the next message of `channel` as bytes, waiting at most `timeout` seconds
    /// (`None`: for ever); `None` once the channel was closed. A receive that timed out stays
    /// posted: the message that completes it later comes as a completion (`pop`).
    #[pyo3(signature = (channel, timeout=None))]
    fn recv<'py>(
        &self,
        py: Python<'py>,
        channel: u32,
        timeout: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        guarded(|| {
            let ((), c) = self.call(py, timeout, |q, tag| {
                q.push_recv(ChannelId(channel), RecvSize::Any, tag)
            })?;
            Ok(outcome(&c)
                .map_err(q_err)?
                .map(|_| PyBytes::new(py, &c.data)))
        })
    }

    /// Closes `channel` and waits for it.
    #[pyo3(signature = (channel, timeout=None))]
    fn close(&self, py: Python<'_>, channel: u32, timeout: Option<f64>) -> PyResult<()> {
        guarded(|| {
            let ((), c) = self.call(py, timeout, |q, tag| q.push_close(ChannelId(channel), tag))?;
            outcome(&c).map_err(q_err).map(drop)
        })
    }

    fn __repr__(&self) -> PyResult<String> {
        guarded(|| {
            // One lock for both: two in the arguments of one `format!` would be held at
            // once (temporaries live to the end of the statement), and the second would wait
            // for the first for ever.
            let (mode, outstanding) = {
                let st = self.lock();
                (st.q.mode(), st.q.outstanding())
            };
            Ok(format!(
                "Queue({:?}, mode={:?}, outstanding={})",
                self.engine, mode, outstanding
            ))
        })
    }
}
