//! Conversions between Python values and the Rust side: JSON values, timeouts, pipeline text,
//! and the sliced wait every blocking call uses.

use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use serde_json::Value;

use offhost_bindings::Error;
use offhost_link::LinkError;

use crate::errors::{raise, to_py};
use crate::SLICE;

/// A JSON value as Python objects (dict, list, str, int, float, bool, None).
pub(crate) fn json_to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(a) => {
            let l = PyList::empty(py);
            for x in a {
                l.append(json_to_py(py, x)?)?;
            }
            l.into_any()
        }
        Value::Object(o) => {
            let d = PyDict::new(py);
            for (k, x) in o {
                d.set_item(k, json_to_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}

/// A timeout in seconds (`None`: wait for ever) as a deadline.
pub(crate) fn deadline(timeout: Option<f64>) -> PyResult<Option<Instant>> {
    match timeout {
        None => Ok(None),
        // A deadline past what an `Instant` holds is no deadline: waiting for ever.
        Some(t) if t.is_finite() && t >= 0.0 => Ok(Duration::try_from_secs_f64(t)
            .ok()
            .and_then(|d| Instant::now().checked_add(d))),
        Some(t) => Err(PyValueError::new_err(format!(
            "timeout must be a non-negative number of seconds, not {t}"
        ))),
    }
}

/// What one slice of a sliced wait found.
pub(crate) enum Slice<T> {
    /// The call completed (or failed for good).
    Done(Result<T, Error>),
    /// Nothing yet: wait another slice.
    Again,
}

impl<T> Slice<T> {
    /// A link call's result: a timeout means "another slice".
    pub(crate) fn link(r: Result<T, LinkError>) -> Slice<T> {
        match r {
            Err(LinkError::Timeout) => Slice::Again,
            r => Slice::Done(r.map_err(Error::from)),
        }
    }
}

/// Runs `step` with the GIL released, a slice (at most [`SLICE`]) at a time, until it
/// completes or `timeout` passes (then `offhost.TimeoutError`). Between slices it runs the
/// Python signal handlers, so Ctrl-C raises `KeyboardInterrupt` in the main thread.
pub(crate) fn sliced<T: Send>(
    py: Python<'_>,
    timeout: Option<f64>,
    mut step: impl FnMut(Duration) -> Slice<T> + Send,
) -> PyResult<T> {
    let deadline = deadline(timeout)?;
    loop {
        let slice = match deadline {
            None => SLICE,
            Some(d) => d.saturating_duration_since(Instant::now()).min(SLICE),
        };
        let r = crate::errors::detach(py, || match step(slice) {
            Slice::Done(r) => Some(r),
            Slice::Again => None,
        })?;
        if let Some(r) = r {
            return r.map_err(to_py);
        }
        py.check_signals()?;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(raise(py, "TimeoutError", "timed out".into()));
        }
    }
}

/// Pipeline text: a `str` is the text itself, a path-like object names a file.
pub(crate) fn pipeline_text(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(s.to_str()?.to_owned());
    }
    let os = PyModule::import(obj.py(), "os")?;
    let path: std::path::PathBuf = os.call_method1("fspath", (obj,))?.extract()?;
    std::fs::read_to_string(&path).map_err(|e| {
        PyErr::from(std::io::Error::new(
            e.kind(),
            format!("read {}: {e}", path.display()),
        ))
    })
}
