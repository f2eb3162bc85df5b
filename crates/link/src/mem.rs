//! The in-process transport `mem:NAME`: listeners registered by name, byte chunks over channels.

use std::collections::HashMap;
use std::io;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};

use crate::error::LinkError;
use crate::wire::{is_idle, Input, WireRead, WireWrite, FEED_BUDGET};

static LISTENERS: LazyLock<Mutex<HashMap<String, Sender<MemConn>>>> =
    LazyLock::new(Default::default);

/// Reading half of an in-process pipe.
pub(crate) struct MemRead {
    rx: Receiver<Vec<u8>>,
    cur: Vec<u8>,
    pos: usize,
    eof: bool,
}

/// Writing half of an in-process pipe.
pub(crate) struct MemWrite {
    tx: Option<Sender<Vec<u8>>>,
}

/// Both halves of one end of an in-process connection.
pub(crate) struct MemConn {
    pub(crate) read: MemRead,
    pub(crate) write: MemWrite,
}

fn pair() -> (MemConn, MemConn) {
    let (atx, brx) = crossbeam_channel::unbounded();
    let (btx, arx) = crossbeam_channel::unbounded();
    let end = |rx, tx| MemConn {
        read: MemRead {
            rx,
            cur: Vec::new(),
            pos: 0,
            eof: false,
        },
        write: MemWrite { tx: Some(tx) },
    };
    (end(arx, atx), end(brx, btx))
}

impl MemRead {
    fn next_chunk(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let next = match timeout {
            None => self.rx.try_recv().map_err(|e| match e {
                TryRecvError::Empty => io::ErrorKind::WouldBlock,
                TryRecvError::Disconnected => io::ErrorKind::UnexpectedEof,
            }),
            Some(t) => self.rx.recv_timeout(t).map_err(|e| match e {
                RecvTimeoutError::Timeout => io::ErrorKind::TimedOut,
                RecvTimeoutError::Disconnected => io::ErrorKind::UnexpectedEof,
            }),
        };
        match next {
            Ok(chunk) => {
                self.cur = chunk;
                self.pos = 0;
                Ok(())
            }
            Err(io::ErrorKind::UnexpectedEof) => {
                self.eof = true;
                Ok(())
            }
            Err(kind) => Err(kind.into()),
        }
    }
}

impl WireRead for MemRead {
    fn cheap_poll(&self) -> bool {
        true
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        if self.pos < self.cur.len() || self.eof {
            return Ok(());
        }
        self.next_chunk(timeout)
    }

    fn feed(&mut self, sink: &mut dyn FnMut(Input<'_>) -> bool) -> io::Result<bool> {
        let mut fed = 0;
        while fed < FEED_BUDGET && !self.eof {
            if self.pos == self.cur.len() {
                match self.next_chunk(None) {
                    Ok(()) => continue,
                    Err(e) if is_idle(&e) => break,
                    Err(e) => return Err(e),
                }
            }
            let chunk = &self.cur[self.pos..];
            self.pos = self.cur.len();
            fed += chunk.len();
            if !sink(Input::Bytes(chunk)) {
                break;
            }
        }
        Ok(!self.eof)
    }
}

impl WireWrite for MemWrite {
    fn write_nb(&mut self, buf: &[u8]) -> io::Result<usize> {
        let tx = self.tx.as_ref().ok_or(io::ErrorKind::BrokenPipe)?;
        tx.send(buf.to_vec())
            .map_err(|_| io::ErrorKind::BrokenPipe)?;
        Ok(buf.len())
    }

    fn write_wait(&mut self, buf: &[u8], _timeout: Duration) -> io::Result<usize> {
        self.write_nb(buf)
    }

    fn shutdown(&mut self) {
        self.tx = None;
    }
}

/// A registered in-process listener; the name is free again when it is dropped.
pub(crate) struct MemListener {
    name: String,
    rx: Receiver<MemConn>,
}

impl MemListener {
    pub(crate) fn bind(name: &str) -> Result<MemListener, LinkError> {
        let mut map = LISTENERS.lock().unwrap_or_else(|e| e.into_inner());
        if map.contains_key(name) {
            return Err(LinkError::io(
                format!("bind mem:{name}"),
                io::Error::new(io::ErrorKind::AddrInUse, "name in use"),
            ));
        }
        let (tx, rx) = crossbeam_channel::unbounded();
        map.insert(name.to_owned(), tx);
        Ok(MemListener {
            name: name.to_owned(),
            rx,
        })
    }

    pub(crate) fn accept(&self) -> Result<MemConn, LinkError> {
        self.rx.recv().map_err(|_| LinkError::SessionClosed)
    }
}

impl Drop for MemListener {
    fn drop(&mut self) {
        LISTENERS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.name);
    }
}

/// Connects to the in-process listener `name`.
pub(crate) fn connect(name: &str) -> Result<MemConn, LinkError> {
    let map = LISTENERS.lock().unwrap_or_else(|e| e.into_inner());
    let tx = map
        .get(name)
        .ok_or_else(|| LinkError::NoListener(name.to_owned()))?;
    let (ours, theirs) = pair();
    tx.send(theirs)
        .map_err(|_| LinkError::NoListener(name.to_owned()))?;
    Ok(ours)
}
