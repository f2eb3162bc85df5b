//! Rust errors as Python exceptions.
//!
//! The exception classes are defined in Python (`offhost/errors.py`: each derives from
//! `offhost.Error` and, where one fits, a built-in class such as `TimeoutError` or
//! `ValueError`); this module picks the class by [`ErrorKind`] and passes the Rust message. An
//! error over a limit also says which, by its id (`e.limit`, `e.limit_value`): no keyword
//! argument of this package raises a limit, so the id is what the caller can act on.

use offhost_bindings::{Error, ErrorKind};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The class name in `offhost.errors` of each kind.
fn class_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Timeout => "TimeoutError",
        ErrorKind::WouldBlock => "WouldBlockError",
        ErrorKind::PeerGone => "PeerGoneError",
        ErrorKind::Closed => "ClosedError",
        ErrorKind::TooLarge => "TooLargeError",
        ErrorKind::BadUrl => "BadUrlError",
        ErrorKind::NoLoans => "NoLoansError",
        ErrorKind::Protocol => "ProtocolError",
        ErrorKind::Io => "TransportError",
        ErrorKind::InvalidArgument => "InvalidArgumentError",
        ErrorKind::Pipeline => "PipelineError",
        ErrorKind::TaskFailed => "TaskFailedError",
        ErrorKind::Engine => "EngineError",
        ErrorKind::NoChannel => "NoChannelError",
        ErrorKind::Format => "FormatError",
        ErrorKind::Geometry => "GeometryError",
        // A bug caught at the edge: the base class, which `except offhost.Error` and
        // `except Exception` both catch (PyO3's own PanicException is a BaseException).
        ErrorKind::Panicked => "Error",
    }
}

/// The exception class `offhost.errors.NAME`.
pub(crate) fn class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    let m = ERRORS.get_or_try_init(py, || {
        PyModule::import(py, "offhost.errors").map(Bound::unbind)
    })?;
    Ok(m.bind(py).getattr(name)?.cast_into::<PyType>()?)
}

/// A Python exception of class `offhost.errors.NAME` with `msg`.
pub(crate) fn raise(py: Python<'_>, name: &str, msg: String) -> PyErr {
    match class(py, name) {
        Ok(c) => PyErr::from_type(c, msg),
        Err(e) => e,
    }
}

/// Runs `f` with the GIL released, a panic in it becoming `offhost.Error` instead of PyO3's
/// `PanicException` (a `BaseException` that `except Exception` misses).
pub(crate) fn detach<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> PyResult<T> {
    py.detach(|| offhost_bindings::guard(|| Ok(f())))
        .map_err(to_py)
}

/// Runs `f` (holding the GIL), a panic in it becoming `offhost.Error`.
pub(crate) fn guarded<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        Err(to_py(Error::Panicked(offhost_bindings::panic_message(
            p.as_ref(),
        ))))
    })
}

/// The Python exception of a binding error.
pub(crate) fn to_py(e: impl Into<Error>) -> PyErr {
    let e = e.into();
    Python::attach(|py| with_limit(py, raise(py, class_name(e.kind()), e.to_string()), &e))
}

/// The Python exception of a binding error about a file, its message prefixed with the path.
pub(crate) fn at_path(path: &std::path::Path, e: impl Into<Error>) -> PyErr {
    let e = e.into();
    Python::attach(|py| {
        let err = raise(py, class_name(e.kind()), format!("{}: {e}", path.display()));
        with_limit(py, err, &e)
    })
}

/// `err` with the limit `e` went over, if any, as its `limit` (the id) and `limit_value`.
fn with_limit(py: Python<'_>, err: PyErr, e: &Error) -> PyErr {
    if let Some(o) = e.over_limit() {
        let v = err.value(py);
        // An exception takes attributes; were it to refuse, the message still names the limit.
        let _ = v.setattr("limit", o.limit.id());
        let _ = v.setattr("limit_value", o.value);
    }
    err
}
