//! Fuzz the PETSIRD reader: preamble, header and time blocks of a yardl binary stream. No
//! input may panic or allocate past what the bytes left can hold; a header that reads is
//! also mapped to rings (or refused).
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use offhost_pet::petsird::{PetsirdReader, RingMap};

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = PetsirdReader::new(Cursor::new(data), data.len() as u64) else {
        return;
    };
    let _ = RingMap::new(r.header());
    let mut out = Vec::new();
    while let Ok(Some(_)) = r.next_block(&mut out) {
        out.clear();
    }
});
