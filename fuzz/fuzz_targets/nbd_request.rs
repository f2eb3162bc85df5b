//! Fuzz the NBD server's parsers and a whole transmission session: arbitrary bytes as the
//! request stream (after a successful handshake) and as handshake input. No input may panic,
//! and every reply must answer a request that was made.
#![no_main]

use std::io::{Cursor, Read, Write};
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use offhost_nbd::serve_transmission_threads;
use offhost_nbd::serve_handshake;
use offhost_nbd::proto::{parse_info_request, parse_option_header, parse_request};
use offhost_nbd::Export;

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

fuzz_target!(|data: &[u8]| {
    let _ = parse_request(data);
    let _ = parse_option_header(data);
    let _ = parse_info_request(data);
    let export = Export::from_spec("disk=mem:1M,block=512").expect("valid spec");
    let exports = vec![Arc::new(Export::from_spec("d=mem:64K").expect("valid spec"))];
    let mut d = Duplex {
        input: Cursor::new(data.to_vec()),
        output: Vec::new(),
    };
    let _ = serve_handshake(&mut d, &exports);
    let mut out = Vec::new();
    let structured = data.first().is_some_and(|b| b & 1 == 1);
    let _ = serve_transmission_threads(Cursor::new(data), &mut out, &export, structured, None, 0, 2);
});
