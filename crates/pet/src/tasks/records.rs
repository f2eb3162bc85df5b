//! Reassembling fixed-size records from byte buffers whose boundaries may fall anywhere.

/// Turns a byte stream into whole units of `N` bytes, carrying partial units across buffers.
#[derive(Debug, Default)]
pub(crate) struct Carry<const N: usize> {
    part: Vec<u8>,
}

impl<const N: usize> Carry<N> {
    /// Calls `f` with the whole units of `bytes` (prefixed by any carried part).
    pub(crate) fn feed(&mut self, mut bytes: &[u8], mut f: impl FnMut(&[u8])) {
        if !self.part.is_empty() {
            let take = (N - self.part.len()).min(bytes.len());
            self.part.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.part.len() < N {
                return;
            }
            f(&self.part);
            self.part.clear();
        }
        let whole = bytes.len() / N * N;
        if whole > 0 {
            f(&bytes[..whole]);
        }
        self.part.extend_from_slice(&bytes[whole..]);
    }

    /// Bytes of an unfinished unit left over.
    pub(crate) fn leftover(&self) -> usize {
        self.part.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carries_partial_units() {
        let mut c = Carry::<4>::default();
        let mut got = Vec::new();
        for chunk in [&[1u8, 2, 3][..], &[4, 5], &[6, 7, 8, 9, 10, 11, 12, 13]] {
            c.feed(chunk, |b| got.extend_from_slice(b));
        }
        assert_eq!(got, (1..=12).collect::<Vec<u8>>());
        assert_eq!(c.leftover(), 1);
    }
}
