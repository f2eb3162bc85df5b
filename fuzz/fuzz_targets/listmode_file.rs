//! Fuzz the reader of offhost's own list-mode files: header and records, checked against each
//! other. No input may panic.
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use offhost_pet::listmode::Reader;

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = Reader::new(Cursor::new(data)) else {
        return;
    };
    let mut events = Vec::new();
    while let Ok(n) = r.read_events(&mut events, 64) {
        if n == 0 {
            break;
        }
    }
});
