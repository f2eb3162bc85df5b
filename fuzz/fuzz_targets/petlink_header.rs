//! Fuzz the Interfile (PETLINK) header parser and the PETLINK word reader: the input is the
//! header text, a NUL byte, then list-mode words. No input may panic or allocate past the
//! sizes the header is checked against; a small enough sinogram is also histogrammed.
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use offhost_pet::PetlinkHeader;
use offhost_pet::Layout;
use offhost_pet::petlink::PetlinkReader;
use offhost_pet::PetlinkHistogrammer;

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let (text, words) = (&data[..split], data.get(split + 1..).unwrap_or(&[]));
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let Ok(h) = PetlinkHeader::parse(text) else {
        return;
    };
    let Ok(mut r) = PetlinkReader::new(Cursor::new(words), &h, h.data_offset) else {
        return;
    };
    let small = Layout::new(&h.scanner.with_span(1))
        .and_then(|l| l.bins(&h.scanner))
        .is_ok_and(|b| b <= 1 << 20);
    let mut hist = small
        .then(|| PetlinkHistogrammer::new(&h.scanner, h.scanner.span).ok())
        .flatten();
    let mut buf = Vec::new();
    while let Ok(n) = r.read_words(&mut buf, 256) {
        if n == 0 {
            break;
        }
        if let Some(hist) = hist.as_mut() {
            hist.add_words(&buf);
        }
    }
});
