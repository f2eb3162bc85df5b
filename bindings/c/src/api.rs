//! The calls of the C binding on Rust types: the handles and what each function does once
//! its pointers are checked (see `ffi/` for the exported functions).
#![forbid(unsafe_code)]
#![allow(non_camel_case_types)]

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use offhost_bindings::{Error, Output};
use offhost_link::{ChannelOptions, LinkError, SendMode};

use crate::status::invalid;
use offhost_link::Wait;

/// A timeout in milliseconds: negative waits for ever.
pub fn timeout(ms: i64) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Who may connect, and how, as C sees it (`NULL` where a function takes one: the defaults).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct offhost_access {
    /// NULL, or a NUL-terminated path: the certificate directory for `tls:` URLs, in nbdkit's
    /// layout (`offhost certs DIR` makes one). A client presents `client-cert.pem`; a server
    /// `server-cert.pem`, and requires clients signed by `ca-cert.pem`.
    pub tls_certificates: *const std::ffi::c_char,
    /// Nonzero: a server may listen on plain `tcp:` (no authentication, no encryption).
    pub insecure: u8,
}

/// The link options of `tls_certificates` (already read from C) and `insecure`.
pub fn link_options(tls_certificates: Option<&str>, insecure: bool) -> offhost_link::LinkOptions {
    let o = offhost_link::LinkOptions::new().insecure(insecure);
    match tls_certificates {
        Some(d) => o.tls_certificates(d),
        None => o,
    }
}

/// Channel options as C sees them (`offhost_channel_options_default` fills the defaults).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct offhost_channel_options {
    /// Largest message in bytes.
    pub max_message: u64,
    /// Receive buffer of each direction in bytes (at least `max_message`).
    pub recv_buffer: u32,
    /// Packet size: a power of two from 8 to 65536.
    pub packet_size: u32,
    /// Nonzero: every send waits until the receiver has taken the message.
    pub sync: u8,
}

impl Default for offhost_channel_options {
    fn default() -> Self {
        let d = ChannelOptions::default();
        offhost_channel_options {
            max_message: d.max_message,
            recv_buffer: d.recv_buffer,
            packet_size: d.packet_size as u32,
            sync: 0,
        }
    }
}

impl offhost_channel_options {
    /// The link's options.
    pub fn to_link(self) -> ChannelOptions {
        ChannelOptions {
            packet_size: self.packet_size as usize,
            recv_buffer: self.recv_buffer,
            max_message: self.max_message,
            send_mode: if self.sync != 0 {
                SendMode::Sync
            } else {
                SendMode::Async
            },
        }
    }
}

/// A session (opaque).
pub struct offhost_session {
    pub(crate) inner: offhost_link::Session,
}

/// A server listening for sessions (opaque).
pub struct offhost_server {
    pub(crate) inner: offhost_link::Server,
    pub(crate) url: std::ffi::CString,
}

/// A channel (opaque).
pub struct offhost_channel {
    pub(crate) inner: offhost_link::Channel,
    /// A received message that did not fit the caller's buffer; the next receive gives it.
    pending: Mutex<Option<Vec<u8>>>,
}

/// A buffer of the shared pool being filled (opaque).
pub struct offhost_loan {
    pub(crate) inner: offhost_link::Loan,
}

/// A received message: bytes, or a loan read in place (opaque).
pub struct offhost_message {
    pub(crate) inner: offhost_link::Message,
}

/// Where pipelines run (opaque).
pub struct offhost_engine {
    pub(crate) inner: offhost_bindings::Engine,
}

/// A started pipeline (opaque).
pub struct offhost_pipeline {
    pub(crate) inner: offhost_bindings::Pipeline,
    /// Per output, a buffer that did not fit the caller's buffer.
    pending: Mutex<HashMap<String, Output>>,
}

/// What a receive into a caller's buffer found.
pub enum Received {
    /// A message of this length was copied.
    Copied(usize),
    /// The stream ended.
    End,
    /// The message needs this many bytes; it stays queued.
    TooSmall(usize),
}

/// Copies `msg` to `buf` if it fits.
fn deliver(msg: &[u8], buf: &mut [u8]) -> Option<usize> {
    let n = msg.len();
    let dst = buf.get_mut(..n)?;
    dst.copy_from_slice(msg);
    Some(n)
}

/// Connects a session with `options`.
pub fn connect(url: &str, options: &offhost_link::LinkOptions) -> Result<offhost_session, Error> {
    Ok(offhost_session {
        inner: offhost_link::Session::connect_with(url, options)?,
    })
}

/// Binds a server with `options`.
pub fn bind(url: &str, options: &offhost_link::LinkOptions) -> Result<offhost_server, Error> {
    let inner = offhost_link::Server::bind_with(url, options)?;
    let url = std::ffi::CString::new(inner.url()).map_err(|_| invalid("url holds a NUL byte"))?;
    Ok(offhost_server { inner, url })
}

impl offhost_server {
    /// Waits for the next session.
    pub fn accept(&self) -> Result<offhost_session, Error> {
        Ok(offhost_session {
            inner: self.inner.accept()?,
        })
    }
}

impl offhost_session {
    /// Opens a channel.
    pub fn open(
        &self,
        name: &str,
        opts: offhost_channel_options,
    ) -> Result<offhost_channel, Error> {
        Ok(offhost_channel::new(self.inner.open(name, opts.to_link())?))
    }

    /// Waits for a channel the peer opens.
    pub fn accept(&self, timeout_ms: i64) -> Result<offhost_channel, Error> {
        Ok(offhost_channel::new(
            self.inner.accept_timeout(timeout(timeout_ms))?,
        ))
    }
}

impl offhost_channel {
    fn new(inner: offhost_link::Channel) -> offhost_channel {
        offhost_channel {
            inner,
            pending: Mutex::new(None),
        }
    }

    /// Sends a message.
    pub fn send(&self, data: &[u8], timeout_ms: i64) -> Result<(), Error> {
        match timeout(timeout_ms) {
            None => self.inner.send(data)?,
            Some(Duration::ZERO) => self.inner.send_wait(data, Wait::Never)?,
            Some(t) => self.inner.send_wait(data, t)?,
        }
        Ok(())
    }

    /// Receives the next message into `buf`.
    pub fn recv(&self, buf: &mut [u8], timeout_ms: i64) -> Result<Received, Error> {
        // The lock is not held while waiting: other threads may select or receive meanwhile.
        let queued = lock(&self.pending).take();
        let msg = match queued {
            Some(m) => m,
            None => {
                let mut v = Vec::new();
                let got = match timeout(timeout_ms) {
                    None => self.inner.recv_into(&mut v, Wait::Forever),
                    Some(t) => self.inner.recv_into(&mut v, t),
                };
                match got {
                    Ok(true) => v,
                    Ok(false) => return Ok(Received::End),
                    Err(LinkError::WouldBlock) => return Err(LinkError::Timeout.into()),
                    Err(e) => return Err(e.into()),
                }
            }
        };
        match deliver(&msg, buf) {
            Some(n) => Ok(Received::Copied(n)),
            None => {
                let n = msg.len();
                *lock(&self.pending) = Some(msg);
                Ok(Received::TooSmall(n))
            }
        }
    }

    /// Receives the next message as it arrived (a loan stays in shared memory); `None` at
    /// the end of the stream.
    pub fn recv_message(&self, timeout_ms: i64) -> Result<Option<offhost_message>, Error> {
        if let Some(m) = lock(&self.pending).take() {
            return Ok(Some(offhost_message {
                inner: offhost_link::Message::Bytes(m),
            }));
        }
        let m = match timeout(timeout_ms) {
            None => self.inner.recv_message(Wait::Forever)?,
            Some(t) => self.inner.recv_message(t)?,
        };
        Ok(m.map(|inner| offhost_message { inner }))
    }

    /// Borrows a pool buffer.
    pub fn loan(&self, timeout_ms: i64) -> Result<offhost_loan, Error> {
        Ok(offhost_loan {
            inner: self.inner.loan(timeout(timeout_ms))?,
        })
    }

    /// Sends the first `len` bytes of a loan.
    pub fn send_loan(&self, mut loan: offhost_loan, len: usize) -> Result<(), Error> {
        loan.inner.set_len(len)?;
        Ok(self.inner.send_loan(loan.inner)?)
    }

    /// Whether a message that did not fit is queued here.
    pub fn has_pending(&self) -> bool {
        lock(&self.pending).is_some()
    }
}

/// Waits until one of `channels` is ready; its index.
pub fn select(channels: &[&offhost_channel], timeout_ms: i64) -> Result<usize, Error> {
    if let Some(i) = channels.iter().position(|c| c.has_pending()) {
        return Ok(i);
    }
    let refs: Vec<&offhost_link::Channel> = channels.iter().map(|c| &c.inner).collect();
    Ok(offhost_link::select(&refs, timeout(timeout_ms))?)
}

impl offhost_engine {
    /// The embedded engine on `workers` threads (0: the default; at most
    /// [`offhost_bindings::MAX_WORKERS`]).
    pub fn embedded(workers: usize) -> Result<offhost_engine, Error> {
        let workers = match workers {
            0 => None,
            w => Some(offhost_bindings::check_workers(w)?),
        };
        Ok(offhost_engine {
            inner: offhost_bindings::Engine::embedded(workers),
        })
    }

    /// A daemon, reached with `options`.
    pub fn connect(
        url: &str,
        options: &offhost_link::LinkOptions,
    ) -> Result<offhost_engine, Error> {
        Ok(offhost_engine {
            inner: offhost_bindings::Engine::connect_with(url, options)?,
        })
    }

    /// Starts a pipeline, on a daemon under `name` if given.
    pub fn submit(&self, text: &str, name: Option<&str>) -> Result<offhost_pipeline, Error> {
        Ok(offhost_pipeline {
            inner: self.inner.submit_as(text, name)?,
            pending: Mutex::new(HashMap::new()),
        })
    }
}

impl offhost_pipeline {
    /// Receives the next buffer of an output into `buf`.
    pub fn recv(&self, name: &str, buf: &mut [u8], timeout_ms: i64) -> Result<Received, Error> {
        // The lock is not held while waiting: other threads may receive other outputs.
        let queued = lock(&self.pending).remove(name);
        let out = match queued {
            Some(o) => o,
            None => match self.inner.recv(name, timeout(timeout_ms))? {
                Some(o) => o,
                None => return Ok(Received::End),
            },
        };
        match deliver(&out, buf) {
            Some(n) => Ok(Received::Copied(n)),
            None => {
                let n = out.len();
                lock(&self.pending).insert(name.to_owned(), out);
                Ok(Received::TooSmall(n))
            }
        }
    }

    /// Waits for the end; the statistics as JSON, or the failure.
    pub fn wait(&self, timeout_ms: i64) -> Result<String, Error> {
        match self.inner.wait(timeout(timeout_ms))? {
            None => Err(Error::Timeout),
            Some(status) => Ok(offhost_bindings::Pipeline::result(&status)?.to_string()),
        }
    }
}

/// Runs a pipeline on the embedded engine to its end (host channels closed or discarded).
pub fn run(text: &str) -> Result<String, Error> {
    let p = offhost_bindings::Engine::embedded(None).submit(text)?;
    let status = p.wait(None)?.ok_or(Error::Timeout)?;
    Ok(offhost_bindings::Pipeline::result(&status)?.to_string())
}
