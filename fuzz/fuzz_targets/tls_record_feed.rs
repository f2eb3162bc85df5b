//! Hostile TLS record headers, arriving in hostile cuts, through the record feed that hands
//! received ciphertext to rustls (`offhost_access::records`): it never offers more than it
//! holds, always offers something while a record's bytes or a whole header are there, hands
//! over the whole stream but for at most the four bytes of a header cut short at its end,
//! and cuts where the records' own lengths say.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offhost_access::records::RecordFeed;

fuzz_target!(|data: &[u8]| {
    // First byte: how many bytes arrive at a time; second: the most rustls takes per offer.
    let [chunk, room, stream @ ..] = data else {
        return;
    };
    let (chunk, room) = (usize::from(*chunk).max(1), usize::from(*room).max(1));
    // Where the records end, by their headers (the last may be cut short).
    let mut ends = Vec::new();
    let mut at = 0;
    while at + 5 <= stream.len() {
        at += 5 + usize::from(u16::from_be_bytes([stream[at + 3], stream[at + 4]]));
        ends.push(at.min(stream.len()));
    }
    let held = stream.len() - ends.last().copied().unwrap_or(0);
    let mut feed = RecordFeed::new();
    let (mut fed, mut arrived) = (0, 0);
    loop {
        let input = &stream[fed..arrived];
        let n = feed.offer(input);
        assert!(n <= input.len(), "offered {n} of {}", input.len());
        if n == 0 {
            if arrived == stream.len() {
                break;
            }
            arrived = (arrived + chunk).min(stream.len());
            continue;
        }
        // An offer ends at a record's end, a byte past it, or where the input does.
        let end = fed + n;
        assert!(
            end == arrived || ends.contains(&end) || ends.contains(&(end - 1)),
            "cut at {end} (records end at {ends:?})"
        );
        let took = n.min(room);
        feed.took(input, took);
        fed += took;
    }
    // Everything but a header cut short at the end was handed over.
    let left = stream.len() - fed;
    assert!(left == 0 || (left < 5 && left == held), "{left} bytes never offered");
});
