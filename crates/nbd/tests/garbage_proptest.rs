//! Property tests over whole sessions in memory: arbitrary bytes in the handshake, and
//! arbitrary request streams in transmission, never panic the server, and every reply it
//! sends answers a request that was made, with the right amount of data. (This stands in for
//! a cargo-fuzz target, which needs the workspace's fuzz/ crate.)

use std::collections::HashMap;
use std::io::{Cursor, Read, Write};
use std::sync::Arc;

use offhost_nbd::proto::*;
use offhost_nbd::serve_handshake;
use offhost_nbd::serve_transmission_threads;
use offhost_nbd::Export;
use proptest::prelude::*;

struct Duplex {
    input: Cursor<Vec<u8>>,
    output: Vec<u8>,
}

impl Read for Duplex {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        self.input.read(b)
    }
}
impl Write for Duplex {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.output.write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn exports() -> Vec<Arc<Export>> {
    vec![
        Arc::new(Export::from_spec("disk=mem:1M").unwrap()),
        Arc::new(Export::from_spec("ro=mem:64K,readonly,block=512").unwrap()),
    ]
}

fn request() -> impl Strategy<Value = (u16, u16, u64, u32, bool)> {
    (
        prop_oneof![Just(0u16), Just(CMD_FLAG_FUA), any::<u16>()],
        prop_oneof![0u16..8, any::<u16>()],
        prop_oneof![0u64..(1 << 20) + 4096, any::<u64>()],
        prop_oneof![0u32..70_000, any::<u32>()],
        any::<bool>(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn handshake_survives_arbitrary_bytes(prefix in any::<bool>(), bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut input = Vec::new();
        if prefix {
            input.extend_from_slice(&FLAG_C_FIXED_NEWSTYLE.to_be_bytes());
            input.extend_from_slice(&IHAVEOPT.to_be_bytes());
        }
        input.extend_from_slice(&bytes);
        let mut d = Duplex { input: Cursor::new(input), output: Vec::new() };
        let _ = serve_handshake(&mut d, &exports());
        prop_assert!(d.output.len() >= 18, "the greeting is always sent");
    }

    #[test]
    fn every_reply_answers_a_request(
        reqs in proptest::collection::vec(request(), 1..40),
        ro in any::<bool>(),
        threads in 1usize..4,
    ) {
        let ex = exports();
        let export = if ro { &ex[1] } else { &ex[0] };
        let mut input = Vec::new();
        let mut asked: HashMap<u64, (Command, u32)> = HashMap::new();
        for (i, &(flags, cmd, off, len, full)) in reqs.iter().enumerate() {
            let h = i as u64;
            encode_request(&mut input, flags, cmd, h, off, len);
            let c = Command::from_wire(cmd);
            if c == Command::Write {
                // Either the whole payload, or the stream ends inside it.
                let n = if full && len <= 70_000 { len as usize } else { (len as usize).min(100) };
                input.extend(std::iter::repeat_n(0x5a, n));
                if n < len as usize {
                    asked.insert(h, (c, len));
                    break;
                }
            }
            asked.insert(h, (c, len));
            if c == Command::Disc {
                break;
            }
        }
        let mut out = Vec::new();
        let _ = serve_transmission_threads(Cursor::new(input), &mut out, export, false, None, 0, threads);
        // Parse the simple replies back.
        let mut p = 0;
        while p < out.len() {
            prop_assert!(out.len() - p >= 16, "truncated reply header");
            prop_assert_eq!(u32::from_be_bytes(out[p..p + 4].try_into().unwrap()), SIMPLE_REPLY_MAGIC);
            let err = u32::from_be_bytes(out[p + 4..p + 8].try_into().unwrap());
            let h = u64::from_be_bytes(out[p + 8..p + 16].try_into().unwrap());
            let (c, len) = asked.remove(&h).expect("reply to a request that was never made (or twice)");
            prop_assert!(c != Command::Disc, "NBD_CMD_DISC has no reply");
            p += 16;
            if c == Command::Read && err == 0 {
                p += len as usize;
            }
            if ro && matches!(c, Command::Write | Command::Trim | Command::WriteZeroes) {
                prop_assert!(err != 0, "a write succeeded on a read-only export");
            }
        }
        prop_assert_eq!(p, out.len());
    }
}
