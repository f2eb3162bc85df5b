//! Handing received ciphertext to rustls a record at a time.
//!
//! rustls's buffered connection copies what it is given into a buffer of its own, which it
//! sizes by the bytes it holds: once it has processed everything it holds, it shrinks that
//! buffer to 4 KiB, and it grows it again by 4 KiB per read while a record comes in (each step
//! a reallocation, a copy of what it holds and a zeroed extension). Given a receive buffer of
//! several records at once, that happened for every 16 KiB record: a third of the copying and
//! most of the allocator's work of a TLS receiver (`docs/notes/engines.md`, stop 38).
//!
//! [`RecordFeed`] reads the record headers (five bytes: type, version, length) of the
//! ciphertext as it is handed over, and offers rustls the rest of the record it is reading
//! plus the first byte of the next one. rustls then never holds nothing between records, keeps
//! its buffer at full size, and takes each record in one read; what it moves to the front of
//! its buffer after a record is that one byte. A record whose header has not all arrived is
//! held back (at most four bytes) until it has.
//!
//! The feed decides only where the ciphertext is cut; every cut of a TLS stream is valid
//! input to rustls, so a peer's lengths, right or wrong, change nothing but the cuts (a record
//! longer than TLS allows still fails in rustls, as before).

/// Bytes of a TLS record header.
const HEADER: usize = 5;

/// Where the record that rustls is reading ends, as ciphertext is handed to it (see the
/// module doc).
#[derive(Debug, Default, Clone)]
pub struct RecordFeed {
    /// Bytes from the front of the input not yet handed over to the end of the record rustls
    /// is reading; 0 when the input starts with a record's header.
    to_end: usize,
}

/// The whole length of the record whose header starts `buf`, if all of the header is there.
fn record_len(buf: &[u8]) -> Option<usize> {
    match buf {
        [_, _, _, hi, lo, ..] => Some(HEADER + usize::from(u16::from_be_bytes([*hi, *lo]))),
        _ => None,
    }
}

impl RecordFeed {
    /// A feed at the start of a stream (which starts with a record's header).
    pub fn new() -> RecordFeed {
        RecordFeed::default()
    }

    /// How many bytes of `input` (the ciphertext received and not yet handed over, from its
    /// front) to offer rustls now: the rest of the current record and the first byte of the
    /// next when all of the next one's header is there; all of `input` while the current
    /// record has not all arrived; 0 when `input` is the start of a header (less than five
    /// bytes), which is to wait for the rest.
    pub fn offer(&self, input: &[u8]) -> usize {
        let current = if self.to_end > 0 {
            self.to_end
        } else {
            match record_len(input) {
                Some(n) => n,
                None => return 0,
            }
        };
        if input.len() <= current {
            input.len()
        } else if record_len(&input[current..]).is_some() {
            current + 1
        } else {
            current
        }
    }

    /// Notes that rustls took the first `took` bytes of `input` (no more than
    /// [`offer`](Self::offer) said).
    pub fn took(&mut self, input: &[u8], took: usize) {
        if took == 0 {
            return;
        }
        let current = if self.to_end > 0 {
            self.to_end
        } else {
            record_len(input).unwrap_or(took)
        };
        self.to_end = if took < current {
            current - took
        } else {
            // Into the next record (by the one byte offered): its header is in `input`.
            let next = record_len(&input[current..]).unwrap_or(0);
            next.saturating_sub(took - current)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream of records with payloads of these lengths (type 23, version 3.3).
    fn records(lens: &[usize]) -> Vec<u8> {
        let mut v = Vec::new();
        for (i, &n) in lens.iter().enumerate() {
            v.extend_from_slice(&[23, 3, 3]);
            v.extend_from_slice(&u16::try_from(n).unwrap().to_be_bytes());
            v.extend(std::iter::repeat_n(i as u8, n));
        }
        v
    }

    /// Hands `stream` over in arrivals of `chunk` bytes, taking at most `room` per offer;
    /// returns the cuts (stream offsets where each handing-over ended).
    fn cuts(stream: &[u8], chunk: usize, room: usize) -> Vec<usize> {
        let mut feed = RecordFeed::new();
        let (mut at, mut arrived, mut out) = (0, 0, Vec::new());
        while at < stream.len() {
            let input = &stream[at..arrived];
            let n = feed.offer(input).min(room);
            if n == 0 {
                arrived = (arrived + chunk).min(stream.len());
                continue;
            }
            feed.took(input, n);
            at += n;
            out.push(at);
        }
        out
    }

    #[test]
    fn a_record_goes_whole_with_the_first_byte_of_the_next() {
        let s = records(&[100, 200, 300]);
        // Everything there at once: record 1 and a byte, the rest of 2 and a byte, then 3.
        assert_eq!(cuts(&s, s.len(), usize::MAX), [106, 311, s.len()]);
    }

    #[test]
    fn a_record_not_all_there_goes_as_it_arrives_and_a_cut_header_waits() {
        let s = records(&[100, 200]);
        // 64 bytes at a time: the first record as it comes; the second's header is cut at
        // 128 (105 + 23 bytes of the 5 are there: all of it), so a byte of it goes along.
        let c = cuts(&s, 64, usize::MAX);
        assert_eq!(c.first(), Some(&64));
        assert!(c.contains(&106), "{c:?}");
        assert_eq!(c.last(), Some(&s.len()));
        // Three bytes at a time: a header is never offered in part (two to four bytes of
        // the second record's, at 105..110, would be cut points 107 to 109).
        let c = cuts(&s, 3, usize::MAX);
        assert!(c.iter().all(|&x| !(107..110).contains(&x)), "{c:?}");
        assert_eq!(c.last(), Some(&s.len()));
    }

    #[test]
    fn rustls_taking_less_than_offered_keeps_the_count() {
        let s = records(&[1000, 50, 16384, 7]);
        let ends = [1005, 1060, 17449, 17461];
        // Record ends are 1005, 1060, 17449 and 17461: each offer ends a byte past one.
        assert_eq!(cuts(&s, s.len(), usize::MAX), [1006, 1061, 17450, 17461]);
        for room in [1, 2, 5, 6, 1000, 4096] {
            let mut feed = RecordFeed::new();
            let mut at = 0;
            while at < s.len() {
                // The feed knows where the record under `at` ends (0: `at` starts one).
                let end = *ends.iter().find(|&&e| e > at).unwrap();
                let start = ends.iter().rev().find(|&&e| e <= at).copied().unwrap_or(0);
                assert!(
                    feed.to_end == end - at || (feed.to_end == 0 && at == start),
                    "room {room} at {at}: {}",
                    feed.to_end
                );
                let n = feed.offer(&s[at..]).min(room);
                assert!(n > 0, "room {room} at {at}");
                feed.took(&s[at..], n);
                at += n;
            }
        }
    }

    #[test]
    fn lengths_from_a_peer_only_move_the_cuts() {
        // A header claiming the most a length field holds, and garbage after it: the feed
        // offers what is there and never more than it was given.
        let mut s = vec![23, 3, 3, 0xff, 0xff];
        s.extend(std::iter::repeat_n(0xab, 300));
        let feed = RecordFeed::new();
        assert_eq!(feed.offer(&s), s.len());
        assert_eq!(feed.offer(&s[..4]), 0);
        assert_eq!(feed.offer(&[]), 0);
    }
}
