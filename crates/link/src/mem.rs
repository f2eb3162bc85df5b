//! The in-process transport `mem:NAME`: listeners registered by name, byte chunks over channels.

use std::collections::HashMap;
use std::io;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};

use crate::error::LinkError;
use crate::wire::{WireRead, WireWrite};

static LISTENERS: LazyLock<Mutex<HashMap<String, Sender<MemConn>>>> =
    LazyLock::new(Default::default);

/// Reading half of an in-process pipe.
pub(crate) struct MemRead {
    rx: Receiver<Vec<u8>>,
    cur: Vec<u8>,
    pos: usize,
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
        },
        write: MemWrite { tx: Some(tx) },
    };
    (end(arx, atx), end(brx, btx))
}

impl WireRead for MemRead {
    fn read(&mut self, buf: &mut [u8], timeout: Option<Duration>) -> io::Result<usize> {
        if self.pos == self.cur.len() {
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
                }
                Err(io::ErrorKind::UnexpectedEof) => return Ok(0),
                Err(kind) => return Err(kind.into()),
            }
        }
        let n = buf.len().min(self.cur.len() - self.pos);
        buf[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
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
