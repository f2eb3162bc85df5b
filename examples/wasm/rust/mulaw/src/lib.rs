//! ITU-T G.711 mu-law encoding of 16-bit little-endian samples, 2 bytes in, 1 out, as the
//! built-in `mulaw` does: the classic reference coder's segment search, tabulated for all
//! 65536 samples at start. A sample split across two buffers is joined.

use offhost_wasm_guest::{Error, Filter, Out, Ports};

const SEG_UEND: [i16; 8] = [0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF];

fn linear_to_ulaw(sample: i16) -> u8 {
    let mut v = sample >> 2;
    let mask: u8 = if v < 0 {
        v = -v;
        0x7F
    } else {
        0xFF
    };
    v = v.min(8159) + 33;
    match SEG_UEND.iter().position(|&e| v <= e) {
        None => 0x7F ^ mask,
        Some(seg) => (((seg as u8) << 4) | ((v >> (seg + 1)) as u8 & 0x0F)) ^ mask,
    }
}

struct MuLaw {
    /// Indexed by a sample's 16 bits: a `u16` index is always in bounds, so the loop has no
    /// bounds check.
    table: Box<[u8; 65536]>,
    /// The first byte of a sample whose second is in the next buffer.
    carry: Option<u8>,
}

impl Filter for MuLaw {
    fn start(_arg: &str, ports: Ports) -> Result<Self, Error> {
        if ports.inputs != 1 || ports.outputs != 1 {
            return Err(Error::new("mulaw takes one input and one output"));
        }
        let mut table = Box::new([0u8; 65536]);
        for (s, t) in table.iter_mut().enumerate() {
            *t = linear_to_ulaw(s as u16 as i16);
        }
        Ok(MuLaw { table, carry: None })
    }

    fn buffer(&mut self, _input: usize, mut data: &[u8], out: &mut Out<'_>) -> Result<(), Error> {
        if let (Some(lo), Some(&hi)) = (self.carry, data.first()) {
            out.write(0, &[self.table[u16::from_le_bytes([lo, hi]) as usize]]);
            self.carry = None;
            data = &data[1..];
        }
        let whole = data.len() / 2;
        let t: &[u8; 65536] = &self.table;
        let code = |s: &[u8]| t[u16::from_le_bytes([s[0], s[1]]) as usize];
        let w = out.window(0);
        if w.len() >= whole {
            // The common case: straight into the window, 8 samples a step (the engine's
            // deadline check runs once per loop step, not per sample).
            let (w, _) = w.split_at_mut(whole);
            let mut outs = w.chunks_exact_mut(8);
            let mut ins = data.chunks_exact(16);
            for (o, i) in (&mut outs).zip(&mut ins) {
                // Two 8-byte loads and one 8-byte store a step.
                let a = u64::from_le_bytes(i[..8].try_into().expect("8 bytes"));
                let b = u64::from_le_bytes(i[8..].try_into().expect("8 bytes"));
                let at = |v: u64, k: u32| t[(v >> (16 * k)) as u16 as usize];
                let codes = [
                    at(a, 0),
                    at(a, 1),
                    at(a, 2),
                    at(a, 3),
                    at(b, 0),
                    at(b, 1),
                    at(b, 2),
                    at(b, 3),
                ];
                o.copy_from_slice(&codes);
            }
            for (o, s) in outs
                .into_remainder()
                .iter_mut()
                .zip(ins.remainder().chunks_exact(2))
            {
                *o = code(s);
            }
            out.commit(0, whole);
        } else {
            for s in data.chunks_exact(2) {
                out.write(0, &[code(s)]);
            }
        }
        if data.len() % 2 == 1 {
            self.carry = data.last().copied();
        }
        Ok(())
    }

    fn end(&mut self, _input: usize, _out: &mut Out<'_>) -> Result<(), Error> {
        match self.carry {
            None => Ok(()),
            Some(_) => Err(Error::new(
                "G.711 encoding: the stream ended with 1 bytes that are not a whole frame of 2 bytes",
            )),
        }
    }
}

offhost_wasm_guest::filter!(MuLaw);
