//! `std::io::Read` and `std::io::Write` over a channel (the paper's /dev/tlr0 and /dev/tlw0).

use std::io;

use crate::channel::Channel;
use crate::error::LinkError;
use crate::wait::Wait;

fn to_io(e: LinkError) -> io::Error {
    let kind = match e {
        LinkError::Timeout => io::ErrorKind::TimedOut,
        LinkError::WouldBlock => io::ErrorKind::WouldBlock,
        LinkError::PeerGone => io::ErrorKind::BrokenPipe,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, e)
}

/// Reads the bytes of a channel's messages in order; end of stream reads as 0 bytes.
#[derive(Debug)]
pub struct ChannelReader<'a> {
    ch: &'a Channel,
    cur: Vec<u8>,
    pos: usize,
    ended: bool,
    wait: Wait,
}

impl<'a> ChannelReader<'a> {
    pub(crate) fn new(ch: &'a Channel) -> Self {
        ChannelReader {
            ch,
            cur: Vec::new(),
            pos: 0,
            ended: false,
            wait: Wait::Forever,
        }
    }

    /// How long a read waits for the next message (for ever unless told): past it the read
    /// fails with [`io::ErrorKind::TimedOut`] ([`io::ErrorKind::WouldBlock`] with
    /// [`Wait::Never`]), and a later read goes on where it was.
    #[must_use]
    pub fn waiting(self, wait: impl Into<Wait>) -> Self {
        ChannelReader {
            wait: wait.into(),
            ..self
        }
    }
}

impl io::Read for ChannelReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.cur.len() {
            if self.ended || buf.is_empty() {
                return Ok(0);
            }
            if self.ch.recv_into(&mut self.cur, self.wait).map_err(to_io)? {
                self.pos = 0;
            } else {
                self.cur.clear();
                self.pos = 0;
                self.ended = true;
            }
        }
        let n = buf.len().min(self.cur.len() - self.pos);
        buf[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Sends the bytes written as messages; [`flush`](io::Write::flush) sends what is buffered,
/// [`finish`](Self::finish) also ends the stream. Dropping it flushes (errors are lost).
#[derive(Debug)]
pub struct ChannelWriter<'a> {
    ch: &'a Channel,
    buf: Vec<u8>,
    chunk: usize,
    wait: Wait,
}

impl<'a> ChannelWriter<'a> {
    pub(crate) fn new(ch: &'a Channel) -> Self {
        let chunk = ch.options().max_message.min(1 << 20) as usize;
        ChannelWriter {
            ch,
            buf: Vec::with_capacity(chunk),
            chunk,
            wait: Wait::Forever,
        }
    }

    /// How long sending a message waits for credit (for ever unless told): past it the write
    /// or flush fails with [`io::ErrorKind::TimedOut`], the message unsent and still buffered.
    #[must_use]
    pub fn waiting(self, wait: impl Into<Wait>) -> Self {
        let mut w = self;
        w.wait = wait.into();
        w
    }

    /// Sends everything `r` gives until its end, each read as it comes (a message per read, of
    /// at most the channel's largest message, not one filled first: a line typed at a terminal
    /// goes at once), then ends the channel's sending direction. Returns the bytes sent.
    pub fn send_all_from(mut self, r: &mut impl io::Read) -> io::Result<u64> {
        io::Write::flush(&mut self)?;
        let mut buf = vec![0; self.chunk.max(1)];
        let mut sent = 0;
        loop {
            let n = match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.ch.send_wait(&buf[..n], self.wait).map_err(to_io)?;
            sent += n as u64;
        }
        self.finish()?;
        Ok(sent)
    }

    /// Sends what is buffered and ends the channel's sending direction.
    pub fn finish(mut self) -> io::Result<()> {
        io::Write::flush(&mut self)?;
        self.ch.close().map_err(to_io)
    }
}

impl io::Write for ChannelWriter<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.buf.is_empty() && data.len() >= self.chunk {
            (self.ch)
                .send_wait(&data[..self.chunk], self.wait)
                .map_err(to_io)?;
            return Ok(self.chunk);
        }
        let n = data.len().min(self.chunk - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == self.chunk {
            self.flush()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.ch.send_wait(&self.buf, self.wait).map_err(to_io)?;
            self.buf.clear();
        }
        Ok(())
    }
}

impl Drop for ChannelWriter<'_> {
    fn drop(&mut self) {
        // Nobody to report to from a drop; `finish` reports errors.
        let _ = io::Write::flush(self);
    }
}
