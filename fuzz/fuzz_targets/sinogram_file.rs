//! Fuzz the decoder of `.sino` files (and sinogram snapshots between tasks): the sizes in the
//! header are checked against the data before anything is allocated. No input may panic, what
//! decodes encodes to the same counts, and `check` (what `sino-sum` runs on its inputs) takes
//! exactly what `decode` takes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offhost_pet::sinofile::{check, decode, encode};

fuzz_target!(|data: &[u8]| {
    assert_eq!(check(data).is_ok(), decode(data).is_ok());
    if let Ok((s, flags)) = decode(data) {
        assert_eq!(encode(&s, flags)[64..], data[64..]);
    }
});
