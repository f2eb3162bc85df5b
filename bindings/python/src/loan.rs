//! `offhost.Loan` (a pool buffer being filled) and `offhost.Message` (a received message,
//! a loan read in place).
//!
//! Their `buffer` is a `memoryview` of the shared memory itself, made by `offhost._view`
//! from the buffer's address (ctypes) with the owning object attached, so the memory stays
//! mapped as long as any view of it lives: the loan or message keeps its channel, and with
//! it the session's mapping, alive. (No `unsafe` here: the address is only a number to
//! Rust.) A loan's buffer goes to the peer at `send_loan`, a message's back to the pool at
//! `release()` or when the message is collected; views must not be used after that (the
//! memory is still mapped, so it is not a crash, but the bytes belong to someone else).
//!
//! Every entry point runs inside `guarded` (a panic is `offhost.Error`, see `errors.rs`) but
//! those that cannot panic: `Loan.capacity`, `Loan.__len__` and `Message.__len__` (a `usize`
//! field), `Message.is_loan` (whether a field is `None`) and `Message.__enter__` (`self`).

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyBytes;

use crate::channel::Channel;
use crate::errors::{guarded, raise};

static VIEW: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// A memoryview of `len` bytes at `addr`, kept alive by `owner`.
pub(crate) fn view<'py>(
    py: Python<'py>,
    addr: usize,
    len: usize,
    owner: &Bound<'py, PyAny>,
    readonly: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let f = VIEW.get_or_try_init(py, || {
        PyModule::import(py, "offhost._view")?
            .getattr("view")
            .map(Bound::unbind)
    })?;
    f.bind(py).call1((addr, len, owner, readonly))
}

/// A buffer of the shared pool lent to this process: fill `buffer`, then
/// `channel.send_loan(loan, length)`. Dropping it unsent returns it to the pool.
#[pyclass(frozen, module = "offhost")]
pub struct Loan {
    inner: Mutex<Option<offhost_link::Loan>>,
    addr: usize,
    capacity: usize,
    /// Keeps the session (and its mapping) alive while views of the buffer exist.
    _channel: Py<Channel>,
}

impl Loan {
    pub(crate) fn new(mut l: offhost_link::Loan, channel: Py<Channel>) -> Loan {
        let capacity = l.capacity();
        let addr = l.as_mut_ptr() as usize;
        Loan {
            inner: Mutex::new(Some(l)),
            addr,
            capacity,
            _channel: channel,
        }
    }

    /// Takes the loan out to send its first `length` bytes (default: all); fails if it was
    /// sent already, or, leaving it as it was, if `length` is more than it holds.
    pub(crate) fn take(
        &self,
        py: Python<'_>,
        length: Option<usize>,
    ) -> PyResult<offhost_link::Loan> {
        let mut slot = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Some(l) = slot.as_mut() else {
            return Err(raise(py, "ClosedError", "the loan was sent already".into()));
        };
        l.set_len(length.unwrap_or(l.capacity()))
            .map_err(crate::errors::to_py)?;
        Ok(slot.take().expect("present above"))
    }
}

#[pymethods]
impl Loan {
    /// A writable memoryview of the whole buffer (numpy.frombuffer sees the shared memory).
    #[getter]
    fn buffer<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        guarded(|| {
            let py = slf.py();
            let this = slf.get();
            if this
                .inner
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_none()
            {
                return Err(raise(py, "ClosedError", "the loan was sent already".into()));
            }
            view(py, this.addr, this.capacity, slf.as_any(), false)
        })
    }

    /// Size of the buffer in bytes.
    #[getter]
    fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether it was sent.
    #[getter]
    fn sent(&self) -> PyResult<bool> {
        guarded(|| {
            Ok(self
                .inner
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_none())
        })
    }

    fn __len__(&self) -> usize {
        self.capacity
    }

    fn __repr__(&self) -> PyResult<String> {
        guarded(|| {
            Ok(format!(
                "offhost.Loan(capacity={}, sent={})",
                self.capacity,
                self.sent()?
            ))
        })
    }
}

/// A received message. A loan is read in place: `buffer` is a read-only memoryview of the
/// shared memory, which returns to the pool at `release()` (or a `with` block's end, or
/// when the message is collected). Other messages are bytes.
#[pyclass(frozen, module = "offhost")]
pub struct Message {
    inner: Mutex<Option<offhost_link::Message>>,
    bytes: Option<Py<PyBytes>>,
    addr: usize,
    len: usize,
    _channel: Py<Channel>,
}

impl Message {
    pub(crate) fn new(py: Python<'_>, m: offhost_link::Message, channel: Py<Channel>) -> Message {
        match m {
            offhost_link::Message::Bytes(b) => Message::bytes(py, &b, channel),
            offhost_link::Message::Loan(l) => Message {
                addr: l.as_ptr() as usize,
                len: l.len(),
                inner: Mutex::new(Some(offhost_link::Message::Loan(l))),
                bytes: None,
                _channel: channel,
            },
        }
    }

    pub(crate) fn bytes(py: Python<'_>, b: &[u8], channel: Py<Channel>) -> Message {
        Message {
            inner: Mutex::new(None),
            bytes: Some(PyBytes::new(py, b).unbind()),
            addr: 0,
            len: b.len(),
            _channel: channel,
        }
    }

    fn released(&self) -> bool {
        self.bytes.is_none()
            && self
                .inner
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_none()
    }
}

#[pymethods]
impl Message {
    /// A read-only memoryview of the message (of the shared memory itself for a loan).
    #[getter]
    fn buffer<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        guarded(|| {
            let py = slf.py();
            let this = slf.get();
            if let Some(b) = &this.bytes {
                return pyo3::types::PyMemoryView::from(b.bind(py).as_any()).map(Bound::into_any);
            }
            if this.released() {
                return Err(raise(py, "ClosedError", "the message was released".into()));
            }
            view(py, this.addr, this.len, slf.as_any(), true)
        })
    }

    /// Whether it arrived as a loan (zero-copy, in shared memory).
    #[getter]
    fn is_loan(&self) -> bool {
        self.bytes.is_none()
    }

    /// Returns a loan's buffer to the pool now (views of it must not be used afterwards).
    fn release(&self) -> PyResult<()> {
        guarded(|| {
            // Taken out of the lock first: the loan goes back to the pool as it drops.
            let m = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
            drop(m);
            Ok(())
        })
    }

    fn __bytes__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        guarded(|| {
            if let Some(b) = &self.bytes {
                return Ok(b.bind(py).clone());
            }
            match &*self.inner.lock().unwrap_or_else(|e| e.into_inner()) {
                Some(m) => Ok(PyBytes::new(py, m)),
                None => Err(raise(py, "ClosedError", "the message was released".into())),
            }
        })
    }

    fn __len__(&self) -> usize {
        self.len
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
        guarded(|| self.release())
    }

    fn __repr__(&self) -> PyResult<String> {
        guarded(|| {
            Ok(format!(
                "offhost.Message(len={}, loan={})",
                self.len,
                self.is_loan()
            ))
        })
    }
}
