//! Fuzz the decoder of `.sino` files (and sinogram snapshots between tasks): the sizes in the
//! header are checked against the data before anything is allocated. No input may panic, and
//! what decodes encodes to the same counts.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offhost_pet::sinofile::{decode, encode};

fuzz_target!(|data: &[u8]| {
    if let Ok((s, flags)) = decode(data) {
        assert_eq!(encode(&s, flags)[64..], data[64..]);
    }
});
