//! `offhost.Session`, `offhost.Channel` and `offhost.select`.
//!
//! Every entry point runs inside `guarded` or `detach` (a panic is `offhost.Error`, see
//! `errors.rs`) but three that cannot panic: the `Session.url` getter (a field),
//! `Session.__enter__` and `Channel.__iter__` (they return `self`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use offhost_link::{ChannelOptions, SendMode};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyMemoryView, PySlice};

use crate::convert::{sliced, Slice};
use crate::errors::{guarded, raise, to_py};
use crate::loan::{Loan, Message};
use offhost_link::Wait;

/// A link to an engine (the paper's OpenLink): `offhost.Session("shm:/tmp/echo.sock")`.
///
/// URLs: `shm:PATH` or `shm:@name` (shared memory, the memfd handed over a Unix socket),
/// `unix:PATH`, `tls:HOST:PORT` (mutual TLS: `tls_certificates` names a directory in
/// nbdkit's layout, as `offhost certs DIR` makes), `tcp:HOST:PORT` (plain, for servers started
/// with `--insecure`). On shm, `mode` (`"poll"`, `"block"`, `"adaptive"`), `pool_buffers` and
/// `buffer_size` (the loan pool) and `ring_bytes` set up the segment.
#[pyclass(frozen, module = "offhost")]
pub struct Session {
    inner: offhost_link::Session,
    url: String,
}

fn mode_of(name: &str) -> PyResult<offhost_shm::Mode> {
    match name {
        "poll" => Ok(offhost_shm::Mode::Poll),
        "block" => Ok(offhost_shm::Mode::Block),
        "adaptive" => Ok(offhost_shm::Mode::Adaptive),
        other => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "mode {other:?}: expected poll, block or adaptive"
        ))),
    }
}

/// The link options of a client: the certificate directory (nbdkit's layout, as made by
/// `offhost certs DIR`) for `tls:` URLs.
pub(crate) fn link_options(
    tls_certificates: Option<std::path::PathBuf>,
) -> offhost_link::LinkOptions {
    let o = offhost_link::LinkOptions::new();
    match tls_certificates {
        Some(d) => o.tls_certificates(d),
        None => o,
    }
}

#[pymethods]
impl Session {
    #[new]
    #[pyo3(signature = (url, *, mode=None, pool_buffers=None, buffer_size=None, ring_bytes=None, tls_certificates=None))]
    fn new(
        py: Python<'_>,
        url: String,
        mode: Option<&str>,
        pool_buffers: Option<u32>,
        buffer_size: Option<u32>,
        ring_bytes: Option<u64>,
        tls_certificates: Option<std::path::PathBuf>,
    ) -> PyResult<Session> {
        guarded(|| {
            let shm = url.strip_prefix("shm:").map(str::to_owned);
            let inner = match shm {
                Some(addr) => {
                    let d = offhost_link::default_shm_config();
                    let config = offhost_shm::Config {
                        mode: mode.map(mode_of).transpose()?.unwrap_or(d.mode),
                        pool_buffers: pool_buffers.unwrap_or(d.pool_buffers),
                        buffer_size: buffer_size.unwrap_or(d.buffer_size),
                        ring_bytes: ring_bytes.unwrap_or(d.ring_bytes),
                        ..d
                    };
                    crate::errors::detach(py, || {
                        offhost_link::Session::connect_shm(&addr, &config)
                    })?
                }
                None => {
                    if mode.or(pool_buffers.map(|_| "")).is_some()
                        || buffer_size.is_some()
                        || ring_bytes.is_some()
                    {
                        return Err(pyo3::exceptions::PyValueError::new_err(
                        "mode, pool_buffers, buffer_size and ring_bytes apply to shm: URLs only",
                    ));
                    }
                    let options = link_options(tls_certificates);
                    crate::errors::detach(py, || {
                        offhost_link::Session::connect_with(&url, &options)
                    })?
                }
            }
            .map_err(to_py)?;
            Ok(Session { inner, url })
        })
    }

    /// Opens a channel named `name` (the peer sees it through its `accept`). `max_message`
    /// (default 1 MiB) bounds a message, `recv_buffer` (default max(1 MiB, max_message))
    /// the bytes in flight, `packet_size` (power of two, 8 B to 64 KiB) the packets;
    /// `sync=True` makes every send wait until the receiver has taken the message.
    #[pyo3(signature = (name, *, max_message=None, recv_buffer=None, packet_size=None, sync=false))]
    fn channel(
        &self,
        py: Python<'_>,
        name: &str,
        max_message: Option<u64>,
        recv_buffer: Option<u32>,
        packet_size: Option<usize>,
        sync: bool,
    ) -> PyResult<Channel> {
        guarded(|| {
            let d = ChannelOptions::default();
            let max = max_message.unwrap_or(d.max_message);
            let options = ChannelOptions {
                packet_size: packet_size.unwrap_or(d.packet_size),
                recv_buffer: recv_buffer.unwrap_or_else(|| {
                    u32::try_from(max.max(u64::from(d.recv_buffer))).unwrap_or(u32::MAX)
                }),
                max_message: max,
                send_mode: if sync {
                    SendMode::Sync
                } else {
                    SendMode::Async
                },
            };
            let ch =
                crate::errors::detach(py, || self.inner.open(name, options))?.map_err(to_py)?;
            Ok(Channel::new(ch))
        })
    }

    /// Waits (at most `timeout` seconds; `None`: for ever) for the next channel the peer
    /// opens.
    #[pyo3(signature = (timeout=None))]
    fn accept(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Channel> {
        guarded(|| {
            let ch = sliced(py, timeout, |slice| {
                Slice::link(self.inner.accept_timeout(Some(slice)))
            })?;
            Ok(Channel::new(ch))
        })
    }

    /// The transport: `shm`, `unix`, `tcp` or `mem`.
    #[getter]
    fn transport(&self) -> PyResult<&'static str> {
        guarded(|| Ok(self.inner.transport()))
    }

    /// The URL it was opened with.
    #[getter]
    fn url(&self) -> &str {
        &self.url
    }

    /// Says goodbye: the peer sees end of stream on every channel; later calls fail.
    fn close(&self) -> PyResult<()> {
        guarded(|| {
            self.inner.close();
            Ok(())
        })
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
        guarded(|| {
            self.inner.close();
            Ok(())
        })
    }

    fn __repr__(&self) -> PyResult<String> {
        guarded(|| Ok(format!("offhost.Session({:?})", self.url)))
    }
}

/// One channel of a session: messages both ways, with timeouts and, on shm, zero-copy
/// loans. Iterating over it yields its messages (as `bytes`) until the peer ends the stream.
#[pyclass(frozen, module = "offhost")]
pub struct Channel {
    pub(crate) inner: Arc<offhost_link::Channel>,
    /// A message `recv_into` could not fit; the next receive returns it first.
    pending: Mutex<Option<Vec<u8>>>,
}

impl Channel {
    fn new(inner: offhost_link::Channel) -> Channel {
        Channel {
            inner: Arc::new(inner),
            pending: Mutex::new(None),
        }
    }

    fn take_pending(&self) -> Option<Vec<u8>> {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    pub(crate) fn has_pending(&self) -> bool {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    fn recv_vec(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Vec<u8>>> {
        if let Some(m) = self.take_pending() {
            return Ok(Some(m));
        }
        sliced(py, timeout, |slice| {
            Slice::link(self.inner.recv_wait(slice))
        })
    }
}

/// The bytes of a buffer-protocol object: borrowed from `bytes`, copied from anything else.
pub(crate) enum Data<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Data<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Data::Borrowed(b) => b,
            Data::Owned(v) => v,
        }
    }
}

/// Reads a bytes-like object (any C-contiguous buffer; numpy arrays are read as bytes).
pub(crate) fn data<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<Data<'a>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Data::Borrowed(b.as_bytes()));
    }
    let raw = PyMemoryView::from(obj)?.call_method1("cast", ("B",))?;
    let buf = pyo3::buffer::PyBuffer::<u8>::get(&raw)?;
    Ok(Data::Owned(buf.to_vec(obj.py())?))
}

#[pymethods]
impl Channel {
    /// The channel's name.
    #[getter]
    fn name(&self) -> PyResult<&str> {
        guarded(|| Ok(self.inner.name()))
    }

    /// The options in force (for an accepted channel, those the peer chose).
    #[getter]
    fn options<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        guarded(|| {
            let o = self.inner.options();
            let d = PyDict::new(py);
            d.set_item("max_message", o.max_message)?;
            d.set_item("recv_buffer", o.recv_buffer)?;
            d.set_item("packet_size", o.packet_size)?;
            d.set_item("sync", o.send_mode == SendMode::Sync)?;
            Ok(d)
        })
    }

    /// Sends one message (any bytes-like object), waiting for credit at most `timeout`
    /// seconds (`None`: for ever); on a `sync=True` channel until the peer has taken it.
    #[pyo3(signature = (data, timeout=None))]
    fn send(&self, py: Python<'_>, data: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<()> {
        guarded(|| {
            crate::convert::deadline(timeout)?; // NaN and negative timeouts are errors.
            let msg = self::data(data)?;
            let msg: &[u8] = &msg;
            if self.inner.options().send_mode == SendMode::Sync {
                // A sync send that timed out may still be delivered: never retried in slices.
                let r = crate::errors::detach(py, || match timeout {
                    None => self.inner.send(msg),
                    Some(t) => self.inner.send_wait(
                        msg,
                        Duration::try_from_secs_f64(t.max(0.0)).unwrap_or(Duration::MAX / 4),
                    ),
                })?;
                return r.map_err(to_py);
            }
            sliced(py, timeout, |slice| {
                Slice::link(self.inner.send_wait(msg, slice))
            })
        })
    }

    /// Sends if the credit allows it now; `offhost.WouldBlockError` otherwise.
    fn try_send(&self, data: &Bound<'_, PyAny>) -> PyResult<()> {
        guarded(|| {
            let msg = self::data(data)?;
            self.inner.send_wait(&msg, Wait::Never).map_err(to_py)
        })
    }

    /// The next message as `bytes`, waiting at most `timeout` seconds (`None`: for ever;
    /// then `offhost.TimeoutError`); `None` once the peer ended the stream.
    #[pyo3(signature = (timeout=None))]
    fn recv<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        guarded(|| Ok(self.recv_vec(py, timeout)?.map(|m| PyBytes::new(py, &m))))
    }

    /// The next message if one is there (`offhost.WouldBlockError` otherwise); `None` once
    /// the peer ended the stream.
    fn try_recv<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        guarded(|| {
            if let Some(m) = self.take_pending() {
                return Ok(Some(PyBytes::new(py, &m)));
            }
            let m = self.inner.recv_wait(Wait::Never).map_err(to_py)?;
            Ok(m.map(|m| PyBytes::new(py, &m)))
        })
    }

    /// Receives the next message into `buffer` (a writable bytes-like object: bytearray,
    /// numpy array, memoryview) and returns its length; `None` once the peer ended the
    /// stream. A message larger than the buffer raises `offhost.TooLargeError` and stays
    /// queued for the next receive.
    #[pyo3(signature = (buffer, timeout=None))]
    fn recv_into(
        &self,
        py: Python<'_>,
        buffer: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Option<usize>> {
        guarded(|| {
            let target = PyMemoryView::from(buffer)?.call_method1("cast", ("B",))?;
            if target.getattr("readonly")?.extract::<bool>()? {
                return Err(pyo3::exceptions::PyTypeError::new_err(
                    "recv_into needs a writable buffer",
                ));
            }
            let cap: usize = target.len()?;
            let msg = match self.take_pending() {
                Some(m) => m,
                None => {
                    let mut buf = Vec::new();
                    let got = sliced(py, timeout, |slice| {
                        Slice::link(self.inner.recv_into(&mut buf, slice))
                    })?;
                    if !got {
                        return Ok(None);
                    }
                    buf
                }
            };
            let n = msg.len();
            if n > cap {
                *self.pending.lock().unwrap_or_else(|e| e.into_inner()) = Some(msg);
                return Err(raise(
                    py,
                    "TooLargeError",
                    format!(
                    "message of {n} bytes does not fit the buffer of {cap} bytes (it stays queued)"
                ),
                ));
            }
            let part = target.get_item(PySlice::new(py, 0, n as isize, 1))?;
            pyo3::buffer::PyBuffer::<u8>::get(&part)?.copy_from_slice(py, &msg)?;
            Ok(Some(n))
        })
    }

    /// Borrows a buffer of the shared pool (shm only; `offhost.NoLoansError` elsewhere),
    /// waiting at most `timeout` seconds for one to be free. Fill `loan.buffer` (a writable
    /// memoryview of the shared memory) and pass the loan to `send_loan`.
    #[pyo3(signature = (timeout=None))]
    fn loan(slf: &Bound<'_, Self>, timeout: Option<f64>) -> PyResult<Loan> {
        guarded(|| {
            let py = slf.py();
            let this = slf.get();
            crate::convert::deadline(timeout)?; // NaN and negative timeouts are errors.
                                                // A free buffer is taken at once, without releasing the GIL (nothing waits then);
                                                // only when the pool is empty does the call wait, in slices, without the GIL.
            let l = match this.inner.loan(Some(Duration::ZERO)) {
                Ok(l) => l,
                Err(offhost_link::LinkError::Timeout | offhost_link::LinkError::WouldBlock) => {
                    sliced(py, timeout, |slice| {
                        Slice::link(this.inner.loan(Some(slice)))
                    })?
                }
                Err(e) => return Err(to_py(e)),
            };
            Ok(Loan::new(l, slf.clone().unbind()))
        })
    }

    /// Sends a loan by descriptor, without copying: its first `length` bytes (default: all
    /// of it). The loan (and views of it) must not be used afterwards.
    #[pyo3(signature = (loan, length=None))]
    fn send_loan(
        &self,
        py: Python<'_>,
        loan: &Bound<'_, Loan>,
        length: Option<usize>,
    ) -> PyResult<()> {
        guarded(|| {
            let l = loan.get().take(py, length)?;
            crate::errors::detach(py, || self.inner.send_loan(l))?.map_err(to_py)
        })
    }

    /// The next message as an `offhost.Message`: a loan stays in shared memory (its
    /// `buffer` is a read-only view of it), other messages are bytes. `None` once the peer
    /// ended the stream.
    #[pyo3(signature = (timeout=None))]
    fn recv_message(slf: &Bound<'_, Self>, timeout: Option<f64>) -> PyResult<Option<Message>> {
        guarded(|| {
            let py = slf.py();
            let this = slf.get();
            if let Some(m) = this.take_pending() {
                return Ok(Some(Message::bytes(py, &m, slf.clone().unbind())));
            }
            let m = sliced(py, timeout, |slice| {
                Slice::link(this.inner.recv_message(slice))
            })?;
            Ok(m.map(|m| Message::new(py, m, slf.clone().unbind())))
        })
    }

    /// Ends this side's sending direction (the peer receives end of stream after what was
    /// sent); receiving goes on.
    fn close(&self) -> PyResult<()> {
        guarded(|| self.inner.close().map_err(to_py))
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        guarded(|| self.recv(py, None))
    }

    fn __repr__(&self) -> PyResult<String> {
        guarded(|| Ok(format!("offhost.Channel({:?})", self.inner.name())))
    }
}

/// Waits until one of `channels` has a message or its end of stream, at most `timeout`
/// seconds (`None`: for ever; past it `offhost.TimeoutError`, and with `timeout=0` at once
/// when none is ready: the ALT's default branch), and returns that channel. The channels may
/// belong to any sessions over any transports; when several are ready, each in turn.
#[pyfunction]
#[pyo3(signature = (channels, timeout=None))]
pub fn select<'py>(
    py: Python<'py>,
    channels: Vec<Bound<'py, Channel>>,
    timeout: Option<f64>,
) -> PyResult<Bound<'py, Channel>> {
    guarded(|| {
        if let Some(c) = channels.iter().find(|c| c.get().has_pending()) {
            return Ok(c.clone());
        }
        let inner: Vec<Arc<offhost_link::Channel>> = channels
            .iter()
            .map(|c| Arc::clone(&c.get().inner))
            .collect();
        let i = sliced(py, timeout, |slice| {
            let refs: Vec<&offhost_link::Channel> = inner.iter().map(|c| &**c).collect();
            match offhost_link::select(&refs, Some(slice)) {
                // A slice of no time left: the deadline check says TimeoutError.
                Err(offhost_link::LinkError::WouldBlock) => Slice::Again,
                r => Slice::link(r),
            }
        })?;
        Ok(channels[i].clone())
    })
}
