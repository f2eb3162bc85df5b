//! A measurement helper for `python -m offhost.bench`: a sink engine on a Rust thread of this
//! process, the same protocol as the sink of `offhost bench rate` (per channel: say `ready`,
//! count the messages until the end of the stream, answer with the count as 8 bytes).
//!
//! `Sink()` and `join` run inside `guarded` (a panic, the sink thread's included, is
//! `offhost.Error`); the `url` getter (a field) cannot panic.

use std::thread::JoinHandle;

use offhost_bindings::Error;
use offhost_link::{LinkError, Server};
use pyo3::prelude::*;

use crate::errors::{guarded, to_py};
use offhost_link::Wait;

/// A sink engine listening at a URL on a thread of this process; it serves one session.
#[pyclass(module = "offhost")]
pub struct Sink {
    url: String,
    thread: Option<JoinHandle<Result<(), LinkError>>>,
}

fn serve(server: Server) -> Result<(), LinkError> {
    let session = server.accept()?;
    while let Ok(ch) = session.accept() {
        ch.send(b"ready")?;
        let mut n = 0u64;
        // Loans are taken as they are and dropped (back to the pool); other messages are
        // looked at in place, none is copied.
        while let Some(m) = ch.recv_message(Wait::Forever)? {
            std::hint::black_box(m.first());
            n += 1;
        }
        ch.send(&n.to_le_bytes())?;
        ch.close()?;
    }
    Ok(())
}

#[pymethods]
impl Sink {
    #[new]
    fn new(py: Python<'_>, url: &str) -> PyResult<Sink> {
        guarded(|| {
            let server = crate::errors::detach(py, || Server::bind(url))?.map_err(to_py)?;
            let url = server.url().to_owned();
            let thread = std::thread::spawn(move || serve(server));
            Ok(Sink {
                url,
                thread: Some(thread),
            })
        })
    }

    /// The URL it listens at.
    #[getter]
    fn url(&self) -> &str {
        &self.url
    }

    /// Waits for the sink to end (after its session closed).
    fn join(&mut self, py: Python<'_>) -> PyResult<()> {
        guarded(|| {
            if let Some(t) = self.thread.take() {
                let r = crate::errors::detach(py, || t.join())?;
                match r {
                    Ok(r) => r.map_err(to_py)?,
                    // A panic of the sink thread is one of offhost's too: `offhost.Error`.
                    Err(p) => {
                        return Err(to_py(Error::Panicked(format!(
                            "the sink thread: {}",
                            offhost_bindings::panic_message(p.as_ref())
                        ))))
                    }
                }
            }
            Ok(())
        })
    }
}
