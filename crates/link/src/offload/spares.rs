//! Message buffers a router keeps for reuse: a message that waits in a mailbox is copied into
//! one, and a host's receive that takes it gives it back, so a stream through a mailbox
//! allocates (and faults in) no new memory per message.

use std::sync::Mutex;

/// Spare buffers, bounded in number and in bytes of capacity.
#[derive(Debug)]
pub(crate) struct Spares {
    st: Mutex<Kept>,
    /// Total capacity kept at most.
    max_bytes: usize,
    /// Buffers kept at most.
    max_count: usize,
}

#[derive(Debug, Default)]
struct Kept {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
}

impl Spares {
    /// Keeps at most `max_count` buffers of `max_bytes` capacity in all.
    pub(crate) fn new(max_count: usize, max_bytes: usize) -> Spares {
        Spares {
            st: Mutex::new(Kept::default()),
            max_bytes,
            max_count,
        }
    }

    /// A copy of `msg` in a kept buffer with room for it, or in a new one.
    pub(crate) fn copy_of(&self, msg: &[u8]) -> Vec<u8> {
        let found = {
            let mut k = self.st.lock().unwrap_or_else(|e| e.into_inner());
            match k.bufs.iter().rposition(|b| b.capacity() >= msg.len()) {
                Some(i) => {
                    let b = k.bufs.swap_remove(i);
                    k.bytes -= b.capacity();
                    Some(b)
                }
                None => None,
            }
        };
        match found {
            Some(mut b) => {
                b.clear();
                b.extend_from_slice(msg);
                b
            }
            None => msg.to_vec(),
        }
    }

    /// Gives a buffer back: kept while within the bounds, freed otherwise.
    pub(crate) fn give(&self, buf: Vec<u8>) {
        let cap = buf.capacity();
        if cap == 0 || cap > self.max_bytes {
            return;
        }
        let mut k = self.st.lock().unwrap_or_else(|e| e.into_inner());
        if k.bufs.len() < self.max_count && k.bytes + cap <= self.max_bytes {
            k.bytes += cap;
            k.bufs.push(buf);
        }
    }

    /// Buffers kept now.
    #[cfg(test)]
    pub(crate) fn kept(&self) -> (usize, usize) {
        let k = self.st.lock().unwrap_or_else(|e| e.into_inner());
        (k.bufs.len(), k.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_buffer_is_reused_for_a_message_it_holds() {
        let s = Spares::new(4, 1 << 20);
        let b = Vec::with_capacity(4096);
        let at = b.as_ptr();
        s.give(b);
        assert_eq!(s.kept(), (1, 4096));
        let m = s.copy_of(&[7u8; 3000]);
        assert_eq!(m, vec![7u8; 3000]);
        assert_eq!(m.as_ptr(), at, "the kept buffer was not reused");
        assert_eq!(s.kept(), (0, 0));
    }

    #[test]
    fn a_buffer_too_small_stays_and_the_copy_is_new() {
        let s = Spares::new(4, 1 << 20);
        s.give(Vec::with_capacity(100));
        let m = s.copy_of(&[1u8; 200]);
        assert_eq!(m.len(), 200);
        assert_eq!(s.kept(), (1, 100));
    }

    #[test]
    fn bounds_in_count_and_bytes_hold() {
        let s = Spares::new(2, 10_000);
        for _ in 0..5 {
            s.give(Vec::with_capacity(4000));
        }
        assert_eq!(s.kept(), (2, 8000));
        let s = Spares::new(10, 10_000);
        for _ in 0..5 {
            s.give(Vec::with_capacity(4000));
        }
        assert_eq!(s.kept(), (2, 8000), "capacity bound");
        s.give(Vec::with_capacity(20_000));
        assert_eq!(s.kept(), (2, 8000), "a buffer larger than the bound");
    }
}
