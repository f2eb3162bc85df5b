//! Fuzz the reader of STIR's Interfile projection data (`.hs` header + data): the input is the
//! header text, a NUL byte, then the data. No input may panic or allocate before the data are
//! known to hold what the header implies; what decodes is written again and decodes to the
//! same counts; the same bytes read as real factors (`decode_f32`) are all finite.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offhost_pet::projdata::{data, decode, decode_f32, header, parse_header};
use offhost_pet::sinofile::SinoFlags;

fuzz_target!(|input: &[u8]| {
    let split = input.iter().position(|&b| b == 0).unwrap_or(input.len());
    let (text, bytes) = (&input[..split], input.get(split + 1..).unwrap_or(&[]));
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let Ok(h) = parse_header(text) else {
        return;
    };
    if let Ok(f) = decode_f32(&h, bytes) {
        assert!(f.iter().all(|v| v.is_finite()));
    }
    if let Ok(s) = decode(&h, bytes) {
        let flags = SinoFlags {
            last: true,
            detector_pairs: h.arc_corrected,
        };
        let again = parse_header(&header(&s, flags, "x.s")).expect("own header parses");
        assert_eq!(decode(&again, &data(&s)).expect("own data decode").data, s.data);
    }
});
