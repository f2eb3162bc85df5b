//! [`Out`]: where a filter writes, the engine's windows and what waits for the next ones.

use alloc::vec::Vec;

/// A filter's outputs during one call. What is written goes into the output's window (a
/// buffer of the output's free list, in the module's memory); what does not fit waits in the
/// module and goes out in the next windows, before any more input comes.
pub struct Out<'a> {
    pub(crate) windows: &'a mut [Vec<u8>],
    pub(crate) filled: &'a mut [usize],
    pub(crate) spill: &'a mut [Vec<u8>],
}

impl Out<'_> {
    /// The number of outputs.
    pub fn outputs(&self) -> usize {
        self.windows.len()
    }

    /// Writes `data` to output `o`.
    ///
    /// # Panics
    /// If `o` is not an output (the module then traps).
    pub fn write(&mut self, o: usize, data: &[u8]) {
        let room = self.room(o);
        let n = if self.spill[o].is_empty() {
            room.min(data.len())
        } else {
            0
        };
        let at = self.filled[o];
        self.windows[o][at..at + n].copy_from_slice(&data[..n]);
        self.filled[o] += n;
        self.spill[o].extend_from_slice(&data[n..]);
    }

    /// Bytes output `o`'s window has left (0 while earlier output waits).
    pub fn room(&self, o: usize) -> usize {
        if self.spill[o].is_empty() {
            self.windows[o].len() - self.filled[o]
        } else {
            0
        }
    }

    /// The free part of output `o`'s window, to write into in place; [`commit`](Self::commit)
    /// says how much was written. Empty while earlier output waits.
    pub fn window(&mut self, o: usize) -> &mut [u8] {
        let room = self.room(o);
        let at = self.filled[o];
        &mut self.windows[o][at..at + room]
    }

    /// The first `n` bytes of [`window`](Self::window) were written.
    ///
    /// # Panics
    /// If `n` is more than the window's room.
    pub fn commit(&mut self, o: usize, n: usize) {
        assert!(n <= self.room(o), "commit of {n} bytes past the window");
        self.filled[o] += n;
    }
}
