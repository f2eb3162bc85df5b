//! Receiving many messages of one channel in one call: one channel lookup and one credit
//! update for the whole batch, each message shown in place.

use crate::connection::{Connection, State};
use crate::error::CallError;
use crate::store::Entry;

/// Why [`Connection::recv_each`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchEnd {
    /// It took as many messages as it was allowed; more may wait.
    Full,
    /// No complete message waits (the stream goes on).
    Empty,
    /// The peer closed its sending direction and every message has been taken.
    End,
    /// The next message is a loan; take it with [`Connection::recv_ref`].
    Loan,
}

impl Connection {
    /// Shows up to `max` waiting byte messages of `channel` to `f`, in order and in place,
    /// then grants credit for all of them at once; returns how many it took and why it
    /// stopped. It stops before a loan (see [`BatchEnd::Loan`]).
    pub fn recv_each(
        &mut self,
        channel: u32,
        max: usize,
        mut f: impl FnMut(&[u8]),
    ) -> Result<(usize, BatchEnd), CallError> {
        let open = self.state == State::Open;
        let Some(ch) = self.channels.get_mut(&channel) else {
            return if self.retired(channel) {
                Ok((0, BatchEnd::End))
            } else {
                Err(CallError::NoChannel(channel))
            };
        };
        ch.check_reset()?;
        let mut taken = 0;
        let mut cost = 0;
        let end = loop {
            if taken == max {
                break BatchEnd::Full;
            }
            match ch.store.front() {
                None if ch.recv_closed => break BatchEnd::End,
                None => break BatchEnd::Empty,
                Some(Entry::Loan { .. }) => break BatchEnd::Loan,
                Some(Entry::Bytes(_) | Entry::Own(_)) => {}
            }
            let (entry, at) = ch.store.pop_at().expect("the front entry is there");
            f(ch.store.bytes_of(entry, at));
            cost += entry.cost();
            taken += 1;
        };
        if taken == 0 {
            return Ok((0, end));
        }
        ch.took(
            channel,
            taken as u64,
            cost,
            open,
            &mut self.out,
            &mut self.deferrable,
        );
        if ch.finished() {
            self.remove_chan(channel);
        }
        self.link.consumed += cost;
        if open {
            self.grant_link(false);
        }
        Ok((taken, end))
    }
}
