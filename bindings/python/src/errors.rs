//! Rust errors as Python exceptions.
//!
//! The exception classes are defined in Python (`offhost/errors.py`: each derives from
//! `offhost.Error` and, where one fits, a built-in class such as `TimeoutError` or
//! `ValueError`); this module picks the class by [`ErrorKind`] and passes the Rust message. An
//! error over a limit also says which, by its id (`e.limit`, `e.limit_value`): no keyword
//! argument of this package raises a limit, so the id is what the caller can act on.
//!
//! No Rust panic reaches Python as PyO3's `PanicException` (a `BaseException` that `except
//! Exception` misses): every entry point of the module whose body can panic runs inside
//! [`guarded`] (holding the GIL) or [`detach`] (without it), which make a panic
//! `offhost.Error` ("offhost panicked: ..."). A `catch_unwind` costs nothing while nothing
//! panics, so the hot calls (channel send and receive) are guarded too. Each file's header
//! names the entry points left unguarded (trivial ones: a `Copy` field, `self`).
//!
//! Debug builds (the test build of `scripts/test.d/40-bindings.sh`, `--profile dev`) add
//! a test hook, `_offhost._panic_in_next_guard(True)`: the next [`guarded`] or [`detach`]
//! call panics, so a test can check that an entry point is guarded and that the panic comes
//! out as `offhost.Error`. Release builds (`maturin build --release`) have no such hook.

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
    py.detach(|| {
        offhost_bindings::guard(|| {
            test_hook::fire();
            Ok(f())
        })
    })
    .map_err(to_py)
}

/// Runs `f` (holding the GIL), a panic in it becoming `offhost.Error`.
pub(crate) fn guarded<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    let f = || {
        test_hook::fire();
        f()
    };
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

/// `err` with the limit `e` went over, if any, as its `limit` (the id) and `limit_value`, and
/// the setting that would have allowed what it refused, if any, as its `setting` (the id, the
/// keyword argument's name where there is one: `tls_certificates`).
fn with_limit(py: Python<'_>, err: PyErr, e: &Error) -> PyErr {
    let v = err.value(py);
    // An exception takes attributes; were it to refuse, the message still names the limit.
    if let Some(o) = e.over_limit() {
        let _ = v.setattr("limit", o.limit.id());
        let _ = v.setattr("limit_value", o.value);
    }
    if let Some(s) = e.needs() {
        let _ = v.setattr("setting", s.id());
    }
    err
}

/// The test hook of debug builds: a panic injected into the next guarded call.
#[cfg(debug_assertions)]
pub(crate) mod test_hook {
    use std::sync::atomic::{AtomicBool, Ordering};

    use pyo3::prelude::*;

    /// Relaxed throughout: the swap alone decides which call takes the panic; it publishes
    /// no other data.
    static ARMED: AtomicBool = AtomicBool::new(false);

    /// Debug builds only: makes the next guarded call of this process panic (`armed=True`)
    /// or not (`False`); returns whether the hook was armed before, so that a test can tell
    /// that a call went through a guard (it disarmed the hook). Not in release builds.
    #[pyfunction]
    pub(crate) fn _panic_in_next_guard(armed: bool) -> bool {
        ARMED.swap(armed, Ordering::Relaxed)
    }

    /// Panics if the hook is armed (disarming it).
    #[inline]
    pub(super) fn fire() {
        if ARMED.load(Ordering::Relaxed) && ARMED.swap(false, Ordering::Relaxed) {
            panic!("injected by the test hook _panic_in_next_guard");
        }
    }
}

/// Release builds: no hook.
#[cfg(not(debug_assertions))]
mod test_hook {
    #[inline(always)]
    pub(super) fn fire() {}
}
