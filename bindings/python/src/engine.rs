//! `offhost.Engine` and the pipelines it runs (`offhost.Pipeline`).
//!
//! Every entry point runs inside `guarded` or `detach` (a panic is `offhost.Error`, see
//! `errors.rs`) but `Pipeline.__enter__` and `OutputIter.__iter__`, which return `self`.

use std::sync::Arc;

use offhost_bindings::{Dir, Error};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::channel::data;
use crate::convert::{json_to_py, pipeline_text, sliced, Slice};
use crate::errors::{class, guarded, to_py};

/// Where pipelines run: `offhost.Engine()` is the embedded engine (worker threads of this
/// process, with the built-in and PET tasks); `offhost.Engine("unix:/tmp/engine.sock")` an
/// engine daemon (`offhost engine --listen URL`).
#[pyclass(frozen, module = "offhost")]
pub struct Engine {
    inner: offhost_bindings::Engine,
}

#[pymethods]
impl Engine {
    #[new]
    #[pyo3(signature = (url=None, *, workers=None, tls_certificates=None))]
    fn new(
        py: Python<'_>,
        url: Option<String>,
        workers: Option<usize>,
        tls_certificates: Option<std::path::PathBuf>,
    ) -> PyResult<Engine> {
        guarded(|| {
            let inner = match url.as_deref() {
                None | Some("embedded") => {
                    if tls_certificates.is_some() {
                        return Err(pyo3::exceptions::PyValueError::new_err(
                        "tls_certificates applies to a daemon's tls: URL, not the embedded engine",
                    ));
                    }
                    if let Some(w) = workers {
                        offhost_bindings::check_workers(w).map_err(to_py)?;
                    }
                    offhost_bindings::Engine::embedded(workers)
                }
                Some(u) => {
                    if workers.is_some() {
                        return Err(pyo3::exceptions::PyValueError::new_err(
                            "workers applies to the embedded engine only",
                        ));
                    }
                    let options = crate::channel::link_options(tls_certificates);
                    crate::errors::detach(py, || {
                        offhost_bindings::Engine::connect_with(u, &options)
                    })?
                    .map_err(to_py)?
                }
            };
            Ok(Engine { inner })
        })
    }

    /// Checks and starts a pipeline: its text, or a `pathlib.Path` to an `.ion` file.
    /// `offhost.PipelineError` names the line and column of a mistake. On a daemon, `name`
    /// names the pipeline too: other engines' `call ... pipeline=NAME` reach it by that name
    /// (one running pipeline holds a name at a time). A daemon stops a pipeline once the
    /// `Engine` that submitted it has gone, unless `detach=True`: then it runs on until it
    /// ends, is stopped, or `lifetime` seconds pass (default: the daemon's time budget).
    #[pyo3(signature = (pipeline, *, name = None, detach = false, lifetime = None))]
    fn submit(
        &self,
        py: Python<'_>,
        pipeline: &Bound<'_, PyAny>,
        name: Option<&str>,
        detach: bool,
        lifetime: Option<f64>,
    ) -> PyResult<Pipeline> {
        guarded(|| {
            let text = pipeline_text(pipeline)?;
            let lifetime = match lifetime {
                None => None,
                Some(_) if !detach => {
                    return Err(pyo3::exceptions::PyValueError::new_err(
                        "lifetime is for a detached pipeline (detach=True)",
                    ))
                }
                Some(s) => Some(
                    std::time::Duration::try_from_secs_f64(s)
                        .ok()
                        .filter(|d| !d.is_zero())
                        .ok_or_else(|| {
                            pyo3::exceptions::PyValueError::new_err(format!(
                                "lifetime={s}: a number of seconds above zero"
                            ))
                        })?,
                ),
            };
            let p = crate::errors::detach(py, || match detach {
                true => self.inner.submit_detached(&text, name, lifetime),
                false => self.inner.submit_as(&text, name),
            })?
            .map_err(to_py)?;
            Ok(Pipeline { inner: Arc::new(p) })
        })
    }

    /// Adds a WebAssembly module as `name`: the pipelines this engine submits from now on run
    /// it as `wasm module=NAME`. `module` is the module's bytes, or a `pathlib.Path` to its
    /// `.wasm` file. On a daemon it is sent on this engine's session and kept for it (within
    /// the daemon's `--max-module-bytes`).
    fn add_module(&self, py: Python<'_>, name: &str, module: &Bound<'_, PyAny>) -> PyResult<()> {
        guarded(|| {
            let bytes: Vec<u8> = match module.cast::<PyBytes>() {
                Ok(b) => b.as_bytes().to_vec(),
                Err(_) => {
                    let os = PyModule::import(py, "os")?;
                    let path: std::path::PathBuf =
                        os.call_method1("fspath", (module,))?.extract()?;
                    std::fs::read(&path).map_err(|e| {
                        PyErr::from(std::io::Error::new(
                            e.kind(),
                            format!("read {}: {e}", path.display()),
                        ))
                    })?
                }
            };
            crate::errors::detach(py, || self.inner.add_module(name, &bytes))?.map_err(to_py)
        })
    }

    /// Adds a put hook that queues of this engine's pipelines may name as `queue[put=NAME]`:
    /// `hook(queue)` is called each time a buffer lands on the queue while it was empty (the
    /// paper's "kick" of an idle device), on an engine worker thread: keep it short. An
    /// exception in it is reported as unraisable and the pipeline runs on. The embedded
    /// engine only.
    fn add_put_hook(&self, name: &str, hook: Py<PyAny>) -> PyResult<()> {
        guarded(|| {
            let hook = checked_callable(hook)?;
            let r = self.inner.add_put_hook(name, move |queue| {
                Python::attach(|py| {
                    if let Err(e) = hook.call1(py, (queue,)) {
                        e.write_unraisable(py, Some(hook.bind(py)));
                    }
                })
            });
            r.map_err(to_py)
        })
    }

    /// Adds a get hook that queues of this engine's pipelines may name as `queue[get=NAME]`:
    /// `hook(queue)` is called before a dequeue from the empty queue and the `bytes` it
    /// returns are dequeued as a buffer; `None` is nothing (a queue no task writes then
    /// ends: the paper's "status queue"). Anything else, or an exception, is reported as
    /// unraisable and counts as `None`. The embedded engine only.
    fn add_get_hook(&self, name: &str, hook: Py<PyAny>) -> PyResult<()> {
        guarded(|| {
            let hook = checked_callable(hook)?;
            let r = self.inner.add_get_hook(name, move |queue| {
                Python::attach(|py| {
                    let got = hook.call1(py, (queue,)).and_then(|v| {
                        let v = v.bind(py);
                        if v.is_none() {
                            return Ok(None);
                        }
                        match v.cast::<PyBytes>() {
                            Ok(b) => Ok(Some(b.as_bytes().to_vec())),
                            Err(_) => Err(pyo3::exceptions::PyTypeError::new_err(format!(
                                "a get hook returns bytes or None, not {}",
                                v.get_type().name().map_or("?".into(), |n| n.to_string())
                            ))),
                        }
                    });
                    got.unwrap_or_else(|e| {
                        e.write_unraisable(py, Some(hook.bind(py)));
                        None
                    })
                })
            });
            r.map_err(to_py)
        })
    }

    /// `"embedded"` or the daemon's URL.
    #[getter]
    fn url(&self) -> PyResult<&str> {
        guarded(|| Ok(self.inner.url()))
    }

    fn __repr__(&self) -> PyResult<String> {
        guarded(|| Ok(format!("offhost.Engine({:?})", self.inner.url())))
    }
}

/// A running pipeline: send to its `host-in` channels, receive from its `host-out` channels
/// (or iterate over `output(name)`), ask its `status()`, `stop()` it, `wait()` for its
/// statistics.
#[pyclass(frozen, module = "offhost")]
pub struct Pipeline {
    inner: Arc<offhost_bindings::Pipeline>,
}

/// Raises `offhost.TaskFailedError` (with the final status as `.status`) for a failed status.
fn stats_of(py: Python<'_>, status: &offhost_bindings::Status) -> PyResult<Py<PyAny>> {
    match offhost_bindings::Pipeline::result(status) {
        Ok(stats) => Ok(json_to_py(py, &stats)?.unbind()),
        Err(e) => {
            let exc = class(py, "TaskFailedError")?.call1((e.to_string(),))?;
            exc.setattr("status", json_to_py(py, &status.to_json())?)?;
            Err(PyErr::from_value(exc))
        }
    }
}

#[pymethods]
impl Pipeline {
    /// The pipeline's id on a daemon (`None` on the embedded engine).
    #[getter]
    fn id(&self) -> PyResult<Option<u64>> {
        guarded(|| Ok(self.inner.id()))
    }

    /// Names of its `host-in` channels.
    #[getter]
    fn inputs(&self) -> PyResult<Vec<String>> {
        guarded(|| Ok(self.inner.inputs().to_vec()))
    }

    /// Names of its `host-out` channels.
    #[getter]
    fn outputs(&self) -> PyResult<Vec<String>> {
        guarded(|| Ok(self.inner.outputs().to_vec()))
    }

    /// Sends one message (any bytes-like object) to `host-in name=NAME`; waits while the
    /// pipeline is behind.
    fn send(&self, py: Python<'_>, name: &str, data: &Bound<'_, PyAny>) -> PyResult<()> {
        guarded(|| {
            let msg = self::data(data)?.to_vec();
            crate::errors::detach(py, || self.inner.send(name, msg))?.map_err(to_py)
        })
    }

    /// Ends the stream of `host-in name=NAME`.
    fn close_input(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        guarded(|| crate::errors::detach(py, || self.inner.close_input(name))?.map_err(to_py))
    }

    /// Takes a host channel for this side now (`"in"` or `"out"`), so that `wait()` does not
    /// close it; `recv`, `send` and `output` do this themselves.
    fn attach(&self, py: Python<'_>, direction: &str, name: &str) -> PyResult<()> {
        guarded(|| {
            let dir = match direction {
                "in" => Dir::In,
                "out" => Dir::Out,
                other => {
                    return Err(pyo3::exceptions::PyValueError::new_err(format!(
                        "direction {other:?}: expected \"in\" or \"out\""
                    )))
                }
            };
            crate::errors::detach(py, || self.inner.attach(dir, name))?.map_err(to_py)
        })
    }

    /// The next buffer of `host-out name=NAME` as `bytes`, waiting at most `timeout`
    /// seconds (`None`: for ever; then `offhost.TimeoutError`); `None` at the end.
    #[pyo3(signature = (name, timeout=None))]
    fn recv<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        timeout: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        guarded(|| {
            let out = sliced(py, timeout, |slice| {
                match self.inner.recv(name, Some(slice)) {
                    Err(Error::Timeout) => Slice::Again,
                    r => Slice::Done(r),
                }
            })?;
            Ok(out.map(|o| PyBytes::new(py, &o)))
        })
    }

    /// An iterator over the buffers of `host-out name=NAME` (as `bytes`) until its end.
    fn output(&self, py: Python<'_>, name: &str) -> PyResult<OutputIter> {
        guarded(|| {
            crate::errors::detach(py, || self.inner.attach(Dir::Out, name))?.map_err(to_py)?;
            Ok(OutputIter {
                pipeline: Arc::clone(&self.inner),
                name: name.to_owned(),
            })
        })
    }

    /// `{"id", "state": "running" | "finished" | "failed", "stats", "error"}`.
    fn status(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        guarded(|| {
            let v = crate::errors::detach(py, || self.inner.status())?.map_err(to_py)?;
            Ok(json_to_py(py, &v.to_json())?.unbind())
        })
    }

    /// Stops the sources; end of stream flows through and the pipeline finishes.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        guarded(|| crate::errors::detach(py, || self.inner.stop())?.map_err(to_py))
    }

    /// Waits (at most `timeout` seconds; `None`: for ever; then `offhost.TimeoutError`)
    /// for the pipeline to finish and returns its statistics; `offhost.TaskFailedError` if a
    /// task failed. Host channels never used are closed first: `host-in` ones end their
    /// stream, `host-out` ones are discarded.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        guarded(|| {
            let status = sliced(py, timeout, |slice| match self.inner.wait(Some(slice)) {
                Ok(Some(v)) => Slice::Done(Ok(v)),
                Ok(None) => Slice::Again,
                Err(e) => Slice::Done(Err(e)),
            })?;
            stats_of(py, &status)
        })
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Leaving a `with` block stops the pipeline if it still runs and waits for it.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
        guarded(|| {
            self.stop(py)?;
            sliced(py, None, |slice| match self.inner.wait(Some(slice)) {
                Ok(Some(_)) => Slice::Done(Ok(())),
                Ok(None) => Slice::Again,
                Err(e) => Slice::Done(Err(e)),
            })
        })
    }

    fn __repr__(&self) -> PyResult<String> {
        guarded(|| {
            Ok(format!(
                "offhost.Pipeline(id={:?}, inputs={:?}, outputs={:?})",
                self.inner.id(),
                self.inner.inputs(),
                self.inner.outputs()
            ))
        })
    }
}

/// The buffers of one `host-out` channel, as `bytes`, until its end.
#[pyclass(module = "offhost")]
pub struct OutputIter {
    pipeline: Arc<offhost_bindings::Pipeline>,
    name: String,
}

#[pymethods]
impl OutputIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        guarded(|| {
            let out = sliced(py, None, |slice| {
                match self.pipeline.recv(&self.name, Some(slice)) {
                    Err(Error::Timeout) => Slice::Again,
                    r => Slice::Done(r),
                }
            })?;
            Ok(out.map(|o| PyBytes::new(py, &o)))
        })
    }
}

/// `hook` if Python can call it, else a `TypeError`.
fn checked_callable(hook: Py<PyAny>) -> PyResult<Py<PyAny>> {
    Python::attach(|py| {
        if hook.bind(py).is_callable() {
            Ok(hook)
        } else {
            Err(pyo3::exceptions::PyTypeError::new_err(
                "a hook is a callable taking the queue's name",
            ))
        }
    })
}
